//! Softmax's backward along a dim other than the last against PyTorch
//! 2.15's answers in `tests/data/softmax_backward_s45.json` (made by
//! `benches/anchors/gen_softmax_backward_s45.py`), bit for bit in f32, f64,
//! f16 and bf16: PyTorch's CPU kernel accumulates `sum(g y)` along the dim
//! with one fused multiply-add per element, as strata's CPU kernel now
//! does. The first case is gradient-oracle program 196:894's backward
//! (`sum(softmax(x, 1))` scaled by 0.1875), exactly zero in PyTorch, where
//! strata's separately rounded products left a few 1e-9.

use serde_json::Value;
use strata_tensor::{DType, Device, Tensor};

const FIXTURE: &str = include_str!("../data/softmax_backward_s45.json");

fn nums(v: &Value) -> Vec<f64> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|x| x.as_f64().expect("a finite number"))
        .collect()
}

/// `v` (each exactly a value of `dt`) as a tensor of `shape` and `dt`.
fn tensor(v: &[f64], shape: &[usize], dt: DType) -> Tensor {
    Tensor::from_slice(v, shape, Device::Cpu)
        .unwrap()
        .to_dtype(dt)
        .unwrap()
}

#[test]
fn softmax_backward_along_an_inner_dim_is_pytorchs_bit_for_bit() {
    let doc: Value = serde_json::from_str(FIXTURE).expect("the fixture parses");
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 49);
    let mut failures = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let dt = match c["dtype"].as_str().unwrap() {
            "f32" => DType::F32,
            "f64" => DType::F64,
            "f16" => DType::F16,
            "bf16" => DType::BF16,
            d => panic!("dtype {d}"),
        };
        let shape: Vec<usize> = c["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        let dim = c["dim"].as_i64().unwrap();
        let y = tensor(&nums(&c["y"]), &shape, dt);
        let g = tensor(&nums(&c["g"]), &shape, dt);
        let want = nums(&c["dx"]);
        let same = |got: &Tensor| {
            let got = got.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
            got.len() == want.len()
                && got
                    .iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits())
        };
        let dx = y.softmax_backward(&g, dim).unwrap();
        if !same(&dx) {
            failures.push(format!("case {i} ({dt:?} {shape:?} dim {dim})"));
        }
        // The in-place form runs the same kernel over the gradient.
        let g2 = g.deep_clone().unwrap();
        y.softmax_backward_inplace(&g2, dim).unwrap();
        if !same(&g2) {
            failures.push(format!("case {i} ({dt:?} {shape:?} dim {dim}), in place"));
        }
    }
    assert!(failures.is_empty(), "differ from PyTorch: {failures:#?}");
}
