//! Session 58's oracle sweep (`benches/anchors/fuzz_conformance_s58.py`,
//! seeds 3400-3415): the differences from PyTorch 2.15 it found, each
//! checked against PyTorch's answers in `tests/data/oracle_s58.json`,
//! written by `benches/anchors/gen_oracle_s58.py` (CPU, one thread).
//!
//! - `masked_fill_` of an `as_strided` view whose elements share memory
//!   through strides smaller than the sizes they skip (`[4, 2]` with strides
//!   `[1, 1]`): PyTorch accepts it (its `has_internal_overlap` tells only a
//!   stride 0 from a dense layout) and writes the value through every masked
//!   element; strata refused it (`fuzz_ops.s3400_inplace_alias_0099`).
//! - In-place ops on such a view with a dtype that cannot hold the result
//!   (`sigmoid_` of i32) or an operand that does not broadcast: PyTorch's
//!   dtype or broadcast error, since it does not see the aliasing; strata
//!   reported its own overlap error first (`fuzz_ops.s3400_inplace_alias_0215`).
//!   Where PyTorch accepts such a write (f32 `sigmoid_`), its result depends
//!   on the order it visits the elements; strata keeps refusing it.
//! - `scatter_add_` checks self's memory (a stride-0 dim) before the range
//!   of the indices (`fuzz_ops.s3400_index_edge_0024`).
//! - `layer_norm` checks the shapes (normalized_shape, weight, bias, the
//!   input's trailing dims) before the dtypes (`fuzz_ops.s3401_empty_0d_0298`).

use crate::pytorch_fixture::{dtype, fixture, ints, num};
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::{DType, Device, Scalar, Tensor, TensorError};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(include_str!("../data/oracle_s58.json")));

/// A fixture value as f64 (a bool as 0 or 1).
fn number(v: &Value) -> f64 {
    match v {
        Value::Bool(b) => f64::from(u8::from(*b)),
        v => num(v),
    }
}

/// The base storage of a fixture operand and its view.
fn operand(spec: &Value) -> (Tensor, Tensor) {
    let dt = dtype(spec["dtype"].as_str().unwrap());
    let base: Vec<f64> = spec["base"]
        .as_array()
        .unwrap()
        .iter()
        .map(number)
        .collect();
    let b = Tensor::from_slice(&base, &[base.len()], Device::Cpu)
        .unwrap()
        .to_dtype(dt)
        .unwrap();
    let v = b
        .as_strided(
            &ints(&spec["size"]),
            &ints(&spec["stride"]),
            Some(spec["offset"].as_i64().unwrap()),
        )
        .unwrap();
    (b, v)
}

fn scalar(v: &Value) -> Scalar {
    match v {
        Value::Bool(b) => Scalar::Bool(*b),
        Value::Number(n) if n.is_i64() => Scalar::Int(n.as_i64().unwrap()),
        v => Scalar::Float(num(v)),
    }
}

fn class(e: &TensorError) -> &'static str {
    match e {
        TensorError::Shape { .. } => "shape",
        TensorError::Broadcast { .. } | TensorError::InPlaceBroadcast { .. } => "broadcast",
        TensorError::DType { .. } => "dtype",
        TensorError::Index { .. } => "index",
        TensorError::Overlap { .. } => "overlap",
        _ => "other",
    }
}

#[test]
fn masked_fill_through_self_aliasing_views_is_pytorchs() {
    let cases = FIXTURE["masked_fill"].as_array().unwrap();
    assert_eq!(cases.len(), 8);
    for c in cases {
        let (base, view) = operand(c);
        let m: Vec<bool> = c["mask"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_bool().unwrap())
            .collect();
        let mask = Tensor::from_slice(&m, view.shape(), Device::Cpu).unwrap();
        let before = base.deep_clone().unwrap();
        view.masked_fill_(&mask, scalar(&c["value"]))
            .unwrap_or_else(|e| panic!("{}: {e}", c["dtype"]));
        let want: Vec<f64> = c["after"].as_array().unwrap().iter().map(number).collect();
        let got = base.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
        assert_eq!(got, want, "{c}");
        // A 0-d value tensor gives the same.
        let (base2, view2) = operand(c);
        let v = Tensor::scalar(scalar(&c["value"]), base2.dtype(), Device::Cpu).unwrap();
        view2.masked_fill_(&mask, &v).unwrap();
        assert!(base2.equal(&base).unwrap(), "{c}");
        // The storage changed, and nothing else was allocated for it.
        assert!(!before.equal(&base).unwrap() || m.iter().all(|b| !b));
    }
}

#[test]
fn inplace_ops_report_pytorchs_error_first() {
    let cases = FIXTURE["errors"].as_array().unwrap();
    assert_eq!(cases.len(), 35);
    for c in cases {
        let ops: Vec<(Tensor, Tensor)> = c["operands"]
            .as_array()
            .unwrap()
            .iter()
            .map(operand)
            .collect();
        let bases: Vec<Tensor> = ops.iter().map(|(b, _)| b.deep_clone().unwrap()).collect();
        let v: Vec<&Tensor> = ops.iter().map(|(_, v)| v).collect();
        let args = &c["args"];
        let r = match args["op"].as_str().unwrap() {
            "sigmoid_" => v[0].sigmoid_(),
            "exp_" => v[0].exp_(),
            "sqrt_" => v[0].sqrt_(),
            "add_" => v[0].add_(v[1]),
            "div_" => v[0].div_(v[1]),
            "copy_" => v[0].copy_(v[1]),
            "addcmul_" => v[0].addcmul_(v[1], v[2], 1),
            "scatter_add_" => v[0].scatter_add_(args["dim"].as_i64().unwrap(), v[1], v[2]),
            "layer_norm" => {
                let ns: Vec<usize> = ints(&args["normalized_shape"])
                    .into_iter()
                    .map(|d| d as usize)
                    .collect();
                v[0].layer_norm(&ns, v.get(1).copied(), None, 1e-5)
            }
            op => panic!("op {op}"),
        };
        let name = c["name"].as_str().unwrap();
        let e = r.err().unwrap_or_else(|| panic!("{name}: succeeded"));
        assert_eq!(
            class(&e),
            c["error"].as_str().unwrap(),
            "{name}: {e} (PyTorch: {})",
            c["message"]
        );
        // A failing op changes nothing.
        for ((b, _), before) in ops.iter().zip(&bases) {
            assert!(b.equal(before).unwrap(), "{name}: changed an operand");
        }
    }
}

/// Where PyTorch accepts a write through a self-aliasing view whose result
/// depends on the order it visits the elements, strata keeps its typed
/// overlap error (and leaves the storage as it was).
#[test]
fn order_dependent_writes_through_aliasing_views_stay_refused() {
    let base = Tensor::arange(0.0, 8.0, 1.0, Some(DType::F32), Device::Cpu).unwrap();
    let v = base.as_strided(&[4, 2], &[1, 1], Some(0)).unwrap();
    let other = Tensor::ones(&[4, 2], DType::F32, Device::Cpu).unwrap();
    let before = base.deep_clone().unwrap();
    for r in [
        v.sigmoid_(),
        v.add_(&other),
        v.addcmul_(&other, &other, 1),
        v.copy_(&other),
        v.clamp_(Some(Scalar::Float(1.0)), None::<Scalar>),
    ] {
        assert!(matches!(r, Err(TensorError::Overlap { .. })), "{r:?}");
    }
    assert!(base.equal(&before).unwrap());
    // fill_ writes one value everywhere: no order to depend on.
    v.fill_(2.5).unwrap();
    assert_eq!(
        base.to_vec::<f32>().unwrap(),
        vec![2.5; 5]
            .into_iter()
            .chain([5.0, 6.0, 7.0])
            .collect::<Vec<_>>()
    );
}
