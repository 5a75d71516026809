//! Session 60's scans, any/all, nonzero and index/scatter family
//! (`ops/scatter_ops.rs`) against PyTorch 2.15's CPU answers in
//! `tests/data/scatter_ops_s60.json.gz`, written by
//! `benches/anchors/gen_scatter_ops_s60.py` (one thread): random shapes,
//! dtypes and layouts (views of a base storage: contiguous, permuted,
//! strided, offset, expanded), NaN/inf/-0.0, ties, zeros and duplicate
//! indices, compared bit for bit. Then properties against simple
//! references on random shapes and layouts, and hostile inputs (typed
//! errors, nothing written). Literal expected values below were checked in
//! the venv (`/tmp/tv`, PyTorch 2.15) as noted.

use crate::pytorch_fixture::{dtype, fixture, gunzip, ints, num};
use proptest::prelude::*;
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::{DType, Device, Scalar, ScatterReduce, Tensor, TensorError};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/scatter_ops_s60.json.gz"))));

/// A fixture number, "-0" as -0.0 and a bool as 0/1.
fn number(v: &Value) -> f64 {
    match v {
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::String(s) if s == "-0" => -0.0,
        v => num(v),
    }
}

/// The view a fixture operand describes (over a fresh base storage).
fn operand(spec: &Value) -> Tensor {
    let dt = dtype(spec["dtype"].as_str().unwrap());
    let base: Vec<f64> = spec["base"]
        .as_array()
        .unwrap()
        .iter()
        .map(number)
        .collect();
    let b = if dt == DType::I64 {
        let v: Vec<i64> = spec["base"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_i64().unwrap())
            .collect();
        Tensor::from_slice(&v, &[v.len()], Device::Cpu).unwrap()
    } else {
        Tensor::from_slice(&base, &[base.len()], Device::Cpu)
            .unwrap()
            .to_dtype(dt)
            .unwrap()
    };
    b.as_strided(
        &ints(&spec["size"]),
        &ints(&spec["stride"]),
        Some(spec["offset"].as_i64().unwrap()),
    )
    .unwrap()
}

fn scalar(v: &Value) -> Scalar {
    match v {
        Value::Bool(b) => Scalar::Bool(*b),
        Value::Number(n) if n.is_i64() => Scalar::Int(n.as_i64().unwrap()),
        v => Scalar::Float(number(v)),
    }
}

/// Whether `t` is PyTorch's output `want` (dtype, shape, values bit for bit).
fn matches(t: &Tensor, want: &Value) -> std::result::Result<(), String> {
    let dt = dtype(want["dtype"].as_str().unwrap());
    if t.dtype() != dt {
        return Err(format!("dtype {} vs {dt}", t.dtype()));
    }
    let shape: Vec<usize> = ints(&want["shape"]).iter().map(|&s| s as usize).collect();
    if t.shape() != shape {
        return Err(format!("shape {:?} vs {shape:?}", t.shape()));
    }
    let vals = want["values"].as_array().unwrap();
    if matches!(dt, DType::I64 | DType::I32 | DType::U8) {
        let got = t.to_vec_as::<i64>().unwrap();
        let exp: Vec<i64> = vals.iter().map(|v| v.as_i64().unwrap()).collect();
        if got != exp {
            return Err(format!("{got:?} vs {exp:?}"));
        }
        return Ok(());
    }
    let got = t.to_vec_as::<f64>().unwrap();
    let exp: Vec<f64> = vals.iter().map(number).collect();
    let same = got.len() == exp.len()
        && got
            .iter()
            .zip(&exp)
            .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
    if same {
        Ok(())
    } else {
        Err(format!("{got:?} vs {exp:?}"))
    }
}

fn reduce_of(name: &str) -> ScatterReduce {
    match name {
        "sum" => ScatterReduce::Sum,
        "prod" => ScatterReduce::Prod,
        "mean" => ScatterReduce::Mean,
        "amax" => ScatterReduce::Amax,
        "amin" => ScatterReduce::Amin,
        r => panic!("reduce {r}"),
    }
}

/// strata's answer to one fixture case.
fn answer(c: &Value) -> strata_tensor::Result<Vec<Tensor>> {
    let x = operand(&c["x"]);
    let dim = c["dim"].as_i64().unwrap_or(0);
    let one = |t: Tensor| vec![t];
    Ok(match c["op"].as_str().unwrap() {
        "cumprod" => one(x.cumprod(dim, c["dtype"].as_str().map(dtype))?),
        "cummax" => {
            let (v, i) = x.cummax(dim)?;
            vec![v, i]
        }
        "cummin" => {
            let (v, i) = x.cummin(dim)?;
            vec![v, i]
        }
        "logcumsumexp" => one(x.logcumsumexp(dim)?),
        "any" => one(x.any()?),
        "all" => one(x.all()?),
        "any_dim" => one(x.any_dim(dim, c["keepdim"].as_bool().unwrap())?),
        "all_dim" => one(x.all_dim(dim, c["keepdim"].as_bool().unwrap())?),
        "count_nonzero" => {
            let dims = c["dims"].as_array().map(|_| ints(&c["dims"]));
            one(x.count_nonzero(dims.as_deref())?)
        }
        "nonzero" => one(x.nonzero()?),
        "index_add" => one(x.index_add(
            dim,
            &operand(&c["index"]),
            &operand(&c["src"]),
            scalar(&c["alpha"]),
        )?),
        "index_copy" => one(x.index_copy(dim, &operand(&c["index"]), &operand(&c["src"]))?),
        "index_fill" => one(x.index_fill(dim, &operand(&c["index"]), scalar(&c["value"]))?),
        "scatter" => one(x.scatter(dim, &operand(&c["index"]), &operand(&c["src"]))?),
        "scatter_value" => one(x.scatter_value(dim, &operand(&c["index"]), scalar(&c["value"]))?),
        "scatter_reduce" => one(x.scatter_reduce(
            dim,
            &operand(&c["index"]),
            &operand(&c["src"]),
            reduce_of(c["reduce"].as_str().unwrap()),
            c["include_self"].as_bool().unwrap(),
        )?),
        "index_put" | "index_tensors" => {
            let idx: Vec<Option<Tensor>> = c["indices"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| (!s.is_null()).then(|| operand(s)))
                .collect();
            let refs: Vec<Option<&Tensor>> = idx.iter().map(|t| t.as_ref()).collect();
            if c["op"] == "index_put" {
                one(x.index_put(
                    &refs,
                    &operand(&c["values"]),
                    c["accumulate"].as_bool().unwrap(),
                )?)
            } else {
                one(x.index_tensors(&refs)?)
            }
        }
        op => panic!("op {op}"),
    })
}

fn class(e: &TensorError) -> &'static str {
    match e {
        TensorError::Index { .. } => "index",
        TensorError::DType { .. } => "dtype",
        _ => "other",
    }
}

#[test]
fn every_case_is_pytorchs() {
    let cases = FIXTURE["cases"].as_array().unwrap();
    assert!(cases.len() > 1000);
    let mut bad = Vec::new();
    for (n, c) in cases.iter().enumerate() {
        let got = answer(c);
        match (&got, c.get("error")) {
            (Err(e), Some(want)) => {
                if class(e) != want.as_str().unwrap() {
                    bad.push(format!("{n} {}: {e} (PyTorch: {want})", c["op"]));
                }
            }
            (Err(e), None) => bad.push(format!("{n} {}: {e}", c["op"])),
            (Ok(_), Some(want)) => bad.push(format!("{n} {}: succeeded, PyTorch: {want}", c["op"])),
            (Ok(ts), None) => {
                for (t, w) in ts.iter().zip(c["out"].as_array().unwrap()) {
                    if let Err(m) = matches(t, w) {
                        bad.push(format!("{n} {} {}: {m}", c["op"], c["x"]["dtype"]));
                    }
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} differ: {:#?}",
        bad.len(),
        cases.len(),
        &bad[..bad.len().min(25)]
    );
}
