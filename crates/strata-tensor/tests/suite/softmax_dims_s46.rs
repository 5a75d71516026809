//! PyTorch 2.15's CPU softmax kernels are chosen by the dim's index, and
//! strata's CPU kernels follow: along the last dim the exponentials are
//! multiplied by the reciprocal of their sum (strata divided, which differed
//! on about a quarter of the elements of a `[64, 7]` f32 softmax); along a
//! dim followed only by dims of size 1 (`[outer, n, 1]` along dim 1) the
//! backward accumulates `sum(g y)` with fused multiply-adds, as along any
//! other non-last dim (strata took that dim for the last, as `inner == 1`).
//! Bit for bit against `tests/data/softmax_dims_s46.json`, made by
//! `benches/anchors/gen_softmax_dims_s46.py` (forward rows kept where
//! PyTorch's vectorized `exp` agrees with the C library's).

use serde_json::Value;
use strata_tensor::{Device, Tensor};

const FIXTURE: &str = include_str!("../data/softmax_dims_s46.json");

fn nums(v: &Value) -> Vec<f32> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|x| x.as_f64().expect("a finite number") as f32)
        .collect()
}

fn differ(got: &Tensor, want: &[f32]) -> bool {
    let got = got.to_vec::<f32>().unwrap();
    got.len() != want.len()
        || got
            .iter()
            .zip(want)
            .any(|(a, b)| a.to_bits() != b.to_bits())
}

#[test]
fn softmax_along_the_last_dim_multiplies_by_the_reciprocal_as_pytorch() {
    let doc: Value = serde_json::from_str(FIXTURE).expect("the fixture parses");
    let cases = doc["forward"].as_array().unwrap();
    assert_eq!(cases.len(), 24);
    let mut failures = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let n = c["n"].as_u64().unwrap() as usize;
        let x = Tensor::from_slice(&nums(&c["x"]), &[1, n], Device::Cpu).unwrap();
        if differ(&x.softmax(-1, None).unwrap(), &nums(&c["y"])) {
            failures.push(format!("row {i} of {n}"));
        }
    }
    assert!(failures.is_empty(), "differ from PyTorch: {failures:?}");
}

#[test]
fn softmax_backward_along_a_dim_before_size_one_dims_is_pytorchs() {
    let doc: Value = serde_json::from_str(FIXTURE).expect("the fixture parses");
    let cases = doc["backward"].as_array().unwrap();
    assert_eq!(cases.len(), 12);
    let mut failures = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let shape: Vec<usize> = c["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        let y = Tensor::from_slice(&nums(&c["y"]), &shape, Device::Cpu).unwrap();
        let g = Tensor::from_slice(&nums(&c["g"]), &shape, Device::Cpu).unwrap();
        if differ(&y.softmax_backward(&g, 1).unwrap(), &nums(&c["dx"])) {
            failures.push(format!("case {i} {shape:?}"));
        }
    }
    assert!(failures.is_empty(), "differ from PyTorch: {failures:?}");
}
