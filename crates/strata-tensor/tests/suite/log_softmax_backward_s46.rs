//! Log-softmax's backward against PyTorch 2.15's answers in
//! `tests/data/log_softmax_backward_s46.json` (made by
//! `benches/anchors/gen_log_softmax_backward_s46.py`), bit for bit in f32,
//! f64, f16 and bf16, along dims other than the last and a last dim of 2:
//! PyTorch's CPU kernel forms `g - exp(y) sum(g)` with one fused
//! multiply-add, as strata's CPU kernel now does. The fixture keeps the
//! cases where PyTorch's vectorized `exp` agrees with the C library's
//! (64 of 69 drawn). The first case is gradient-oracle program 230:279's
//! backward (`exp(log_softmax(x, 0))` summed: `exp(y) (1 - sum)`, 6.7e-9 and
//! up in PyTorch, where strata's separately rounded product gave multiples
//! of each element's last place).

use serde_json::Value;
use strata_tensor::{DType, Device, Tensor};

const FIXTURE: &str = include_str!("../data/log_softmax_backward_s46.json");

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
fn log_softmax_backward_is_pytorchs_bit_for_bit() {
    let doc: Value = serde_json::from_str(FIXTURE).expect("the fixture parses");
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 65);
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
        let got = y.log_softmax_backward(&g, dim).unwrap();
        let got = got.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
        let same = got.len() == want.len()
            && got
                .iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits());
        if !same {
            failures.push(format!("case {i} ({dt:?} {shape:?} dim {dim})"));
        }
    }
    assert!(failures.is_empty(), "differ from PyTorch: {failures:#?}");
}
