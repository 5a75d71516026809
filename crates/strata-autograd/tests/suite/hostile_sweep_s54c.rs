//! Session 54c: a hostile-input sweep of a leaf's first `.grad` layout
//! (PyTorch's gradient layout contract, session 54b), against PyTorch 2.15
//! (`tests/data/hostile_sweep_s54c.json.gz`, written by
//! `benches/anchors/gen_hostile_sweep_s54c.py`): leaves that are empty
//! (with zero strides too), 0-d (at an offset), with dims of size 1 whose
//! strides are odd or 0, transposed, permuted, stepped, expanded (stride 0),
//! overlapping (as_strided), at an offset; f16 / bf16 / f64 leaves; first
//! gradients that arrive through a cast (f16 arithmetic, f64 arithmetic);
//! backward repeated up to three times. Each pass's `.grad` strides (every
//! dim) and values are compared bit for bit; no pass may panic or fail.
//!
//! Found: an empty leaf of zero strides got a row-major `.grad` (PyTorch
//! counts every empty tensor non-overlapping and dense and gives it the
//! leaf's strides); fixed in `var.rs`. Left (see [`KNOWN`]): a leaf whose
//! dims all have size 1, summed whole, gets row-major strides where PyTorch
//! keeps the leaf's (its sum gradient is a stride-0 expand of a 0-d
//! tensor, which breaks the contract on dims of size 1; strata's is not a
//! stride-0 view there); the values agree and, with every dim of size 1,
//! the strides address the same single element.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::pytorch_fixture::{dtype, fixture, gunzip, hexes, ints};
use serde_json::Value;
use strata_autograd::Var;
use strata_tensor::{DType, Device, Tensor};

fn load() -> Value {
    fixture(&gunzip(include_bytes!(
        "../data/hostile_sweep_s54c.json.gz"
    )))
}

fn build(spec: &Value) -> Tensor {
    let base = hexes(spec["base"].as_str().unwrap());
    Tensor::from_slice(&base, &[base.len()], Device::Cpu)
        .unwrap()
        .to_dtype(dtype(spec["dtype"].as_str().unwrap()))
        .unwrap()
        .as_strided(
            &ints(&spec["size"]),
            &ints(&spec["stride"]),
            Some(spec["offset"].as_i64().unwrap()),
        )
        .unwrap()
}

/// The generator's weights: `((2 + 3 i) % 17 - 8) / 4`, row-major.
fn weights(p: &Var) -> Var {
    let n: usize = p.shape().iter().product();
    let v: Vec<f64> = (0..n as i64)
        .map(|i| ((2 + 3 * i) % 17 - 8) as f64 / 4.0)
        .collect();
    let shape: Vec<i64> = p.shape().iter().map(|&s| s as i64).collect();
    Var::new(
        Tensor::from_slice(&v, &[n], Device::Cpu)
            .unwrap()
            .to_dtype(p.dtype())
            .unwrap()
            .reshape(&shape)
            .unwrap(),
    )
}

fn forward(prog: &str, p: &Var) -> strata_autograd::Result<Var> {
    let w = weights(p);
    match prog {
        "wsum" => p.mul(&w)?.sum(None, false),
        "sum" => p.sum(None, false),
        "half" => p
            .to_dtype(DType::F16)?
            .mul(&w.to_dtype(DType::F16)?)?
            .to_dtype(DType::F32)?
            .sum(None, false),
        "double" => p
            .to_dtype(DType::F64)?
            .mul(&w.to_dtype(DType::F64)?)?
            .sum(None, false),
        "exp" => p.exp()?.mul(&w)?.sum(None, false),
        _ => panic!("program {prog}"),
    }
}

/// Cases whose `.grad` strides may be row-major instead of PyTorch's (the
/// values must still agree).
const KNOWN: &[&str] = &["all size-1 sum"];

fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

#[test]
fn first_grad_layout_hostile_as_pytorch() {
    let f = load();
    let cases = f["grad"].as_array().unwrap();
    assert!(cases.len() >= 100);
    let mut failures = Vec::new();
    let mut passes = 0;
    for c in cases {
        let name = c["name"].as_str().unwrap();
        let leaf = build(&c["leaf"]);
        let base_before = leaf.to_vec_as::<f64>().unwrap();
        let p = Var::parameter(leaf.clone()).unwrap();
        let prog = c["prog"].as_str().unwrap();
        for (k, want) in c["expected"].as_array().unwrap().iter().enumerate() {
            passes += 1;
            let what = format!("{name} pass {}", k + 1);
            let run = catch_unwind(AssertUnwindSafe(|| {
                forward(prog, &p).and_then(|l| l.backward())
            }));
            match run {
                Err(_) => {
                    failures.push(format!("{what}: PANIC"));
                    break;
                }
                Ok(Err(e)) => {
                    failures.push(format!("{what}: error {e}"));
                    continue;
                }
                Ok(Ok(())) => {}
            }
            let Some(g) = p.grad() else {
                failures.push(format!("{what}: no .grad"));
                continue;
            };
            let strides: Vec<usize> = ints(&want["strides"]).iter().map(|&s| s as usize).collect();
            let values = hexes(want["values"].as_str().unwrap());
            let got = g.to_vec_as::<f64>().unwrap();
            let row_major = strata_tensor::shape::contiguous_strides(g.shape());
            let known = KNOWN.contains(&name) && g.strides() == row_major.as_slice();
            if (g.strides() != strides.as_slice() && !known)
                || g.dtype() != p.dtype()
                || g.shape() != p.shape()
            {
                failures.push(format!(
                    "{what}: {:?} {:?} strides {:?}, PyTorch's strides {strides:?}",
                    g.dtype(),
                    g.shape(),
                    g.strides()
                ));
            }
            if !same_bits(&got, &values) {
                failures.push(format!("{what}: values {got:?}, PyTorch's {values:?}"));
            }
            if g.numel() > 0 && g.same_storage(p.data()) {
                failures.push(format!("{what}: .grad shares the leaf's storage"));
            }
        }
        if !same_bits(&leaf.to_vec_as::<f64>().unwrap(), &base_before) {
            failures.push(format!("{name}: the leaf changed"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {passes} passes differ from PyTorch:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
