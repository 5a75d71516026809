//! The comparison shared by the fixtures of calls with hostile arguments
//! (`view_args_s72`, `reduce_args_s72`, `index_args_s73`, `contract_args_s73`,
//! `nn_args_s73`): each case names an op, an input
//! shape and arguments, and holds PyTorch's results (`"results"`: shapes and
//! values row-major) or the fact that it failed (`"error"`). strata must
//! fail where PyTorch fails and otherwise give its shapes and values, on the
//! CPU and (ignored unless `--include-ignored`) on `cuda:0`. Also the
//! fixtures' common readings of their arguments (the value pattern, the
//! names of reductions and pad modes), which strata-autograd's
//! `grad_args_s73` shares by path.

use crate::pytorch_fixture::{ints, num};
use serde_json::Value;
use strata_tensor::{DType, Device, PadMode, Reduction, Result, ScatterReduce, Tensor};

/// An integer argument.
pub fn int(v: &Value) -> i64 {
    v.as_i64().expect("an integer argument")
}

/// Sizes as `usize`.
pub fn sizes(shape: &[i64]) -> Vec<usize> {
    shape.iter().map(|&d| d as usize).collect()
}

/// The generators' values: `(7 (k + start)) mod 5 - 2` for element `k`,
/// row-major (f32).
pub fn pattern(shape: &[i64], start: i64, device: Device) -> Tensor {
    let n: i64 = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|k| (((k + start) * 7) % 5 - 2) as f32).collect();
    Tensor::from_slice(&v, &sizes(shape), device).unwrap()
}

/// nn_args_s73's values: half of [`pattern`]'s, `((7 (k + start)) mod 5 -
/// 2) / 2`.
pub fn half_pattern(shape: &[i64], start: i64, device: Device) -> Tensor {
    let n: i64 = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|k| (((k + start) * 7) % 5 - 2) as f32 / 2.0)
        .collect();
    Tensor::from_slice(&v, &sizes(shape), device).unwrap()
}

/// nn_args_s73's masks: element `k` is true where `(3 (k + start)) mod 4 <
/// 2`.
pub fn mask_pattern(shape: &[i64], start: i64, device: Device) -> Tensor {
    let n: i64 = shape.iter().product();
    let v: Vec<bool> = (0..n).map(|k| ((k + start) * 3) % 4 < 2).collect();
    Tensor::from_slice(&v, &sizes(shape), device).unwrap()
}

/// A loss reduction by PyTorch's name.
pub fn reduction(v: &Value) -> Reduction {
    match v.as_str().unwrap() {
        "mean" => Reduction::Mean,
        "sum" => Reduction::Sum,
        "none" => Reduction::None,
        other => panic!("the generator wrote a reduction this test does not know: {other}"),
    }
}

/// A `scatter_reduce` reduction by PyTorch's name.
pub fn scatter_reduce(v: &Value) -> ScatterReduce {
    match v.as_str().unwrap() {
        "sum" => ScatterReduce::Sum,
        "prod" => ScatterReduce::Prod,
        "mean" => ScatterReduce::Mean,
        "amax" => ScatterReduce::Amax,
        "amin" => ScatterReduce::Amin,
        other => panic!("the generator wrote a scatter reduction this test does not know: {other}"),
    }
}

/// A pad mode by PyTorch's name (`value` for a constant pad).
pub fn pad_mode(v: &Value, value: f64) -> PadMode {
    match v.as_str().unwrap() {
        "constant" => PadMode::Constant(value.into()),
        "reflect" => PadMode::Reflect,
        "replicate" => PadMode::Replicate,
        "circular" => PadMode::Circular,
        other => panic!("the generator wrote a pad mode this test does not know: {other}"),
    }
}

/// How close an element of strata's result must be to PyTorch's.
#[derive(Clone, Copy)]
pub enum Match {
    /// Equal (NaN matching NaN).
    Exact,
    /// Within this relative error (absolute below 1).
    Relative(f64),
}

impl Match {
    /// Whether `got` is close enough to `want`.
    pub fn accepts(self, got: f64, want: f64) -> bool {
        if (got.is_nan() && want.is_nan()) || got == want {
            return true;
        }
        match self {
            Match::Exact => false,
            Match::Relative(r) => (got - want).abs() <= r * want.abs().max(1.0),
        }
    }
}

/// Where strata's answer `got` to case `c` differs from PyTorch's, or `None`.
fn difference(got: Result<Vec<Tensor>>, c: &Value, m: Match) -> Option<String> {
    match (got, c.get("error")) {
        (Err(_), Some(_)) => None,
        (Ok(ts), Some(e)) => Some(format!(
            "strata gave shapes {:?}, PyTorch failed: {e}",
            ts.iter().map(|t| t.shape().to_vec()).collect::<Vec<_>>()
        )),
        (Err(e), None) => Some(format!("strata failed ({e}), PyTorch did not")),
        (Ok(ts), None) => {
            let want = c["results"].as_array().unwrap();
            if ts.len() != want.len() {
                return Some(format!("{} results, PyTorch {}", ts.len(), want.len()));
            }
            for (k, (t, w)) in ts.iter().zip(want).enumerate() {
                let ws: Vec<usize> = ints(&w["shape"]).iter().map(|&s| s as usize).collect();
                let wd: Vec<f64> = w["data"].as_array().unwrap().iter().map(num).collect();
                let gd = (t.to_dtype(DType::F64).and_then(|t| t.contiguous()))
                    .and_then(|t| t.to_vec::<f64>())
                    .unwrap();
                let close =
                    gd.len() == wd.len() && gd.iter().zip(&wd).all(|(&g, &w)| m.accepts(g, w));
                if t.shape() != ws.as_slice() || !close {
                    return Some(format!(
                        "result {k}: shape {:?} values {gd:?}, PyTorch {ws:?} {wd:?}",
                        t.shape()
                    ));
                }
            }
            None
        }
    }
}

/// `cuda:0`; panics (failing the test) with the reason when it is not
/// usable. For the GPU variants of the fixtures' tests (ignored unless
/// `--include-ignored`).
pub fn gpu() -> Device {
    let gpu = Device::Cuda(0);
    assert!(
        strata_tensor::has_backend(gpu),
        "this test needs a CUDA GPU and none is usable: {}",
        strata_tensor::cuda::unavailable_reason().unwrap_or_else(|| "no CUDA backend".into())
    );
    gpu
}

/// Runs every case of `fixture` through `call` and fails, listing the first
/// ten, if any differs from PyTorch; the fixture must hold more than
/// `at_least` cases.
pub fn assert_all_agree(
    fixture: &Value,
    at_least: usize,
    m: Match,
    call: impl Fn(&Value) -> Result<Vec<Tensor>>,
) {
    let cases = fixture["cases"].as_array().unwrap();
    assert!(
        cases.len() > at_least,
        "the fixture holds {} cases",
        cases.len()
    );
    let bad: Vec<String> = cases
        .iter()
        .filter_map(|c| {
            difference(call(c), c, m)
                .map(|why| format!("{} {} {}: {why}", c["op"], c["shape"], c["args"]))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {} cases differ from PyTorch, e.g.:\n{}",
        bad.len(),
        cases.len(),
        bad[..bad.len().min(10)].join("\n")
    );
}
