//! Session 79: gradients of the element-wise math session 79 added at
//! their singular and edge points against PyTorch 2.15's CPU autograd
//! (`benches/anchors/gen_hostile_s79.py`): each function at the poles,
//! domain ends, ±0, ±inf and NaN (`erfinv` at ±1, `lgamma`/`digamma`/
//! `polygamma` at 0 and the negative integers, `logit` with every kind of
//! `eps`, `ndtri` at 0 and 1, `entr` at 0 and below, `i1e`/`sinc` at 0,
//! the binary ops on every pair of ±0, ±inf, NaN and ±1, `ldexp` by
//! exponents that overflow), for `y.sum()` backward. strata must give
//! PyTorch's gradients, its infinities and NaN included (within a relative
//! 1e-9 in f64, 1e-4 in f32, as math_ops_s79), and refuse to record on
//! integer tensors.

use crate::math_grad_s74::{close, f64s};
use crate::pytorch_fixture::{fixture, gunzip, input, nums};
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::{Result, Var};
use strata_tensor::{DType, Device, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/hostile_s79_grad.json.gz"))));

fn call(c: &Value, v: &[Var], other: Option<&Tensor>) -> Result<Var> {
    let a = &c["args"];
    let x = &v[0];
    match c["op"].as_str().unwrap() {
        "erfinv" => x.erfinv(),
        "lgamma" => x.lgamma(),
        "digamma" => x.digamma(),
        "polygamma" => x.polygamma(a["n"].as_i64().unwrap()),
        "mvlgamma" => x.mvlgamma(a["p"].as_i64().unwrap()),
        "i0" => x.i0(),
        "special_i0e" => x.special_i0e(),
        "special_i1" => x.special_i1(),
        "special_i1e" => x.special_i1e(),
        "sinc" => x.sinc(),
        "special_entr" => x.special_entr(),
        "special_ndtr" => x.special_ndtr(),
        "special_ndtri" => x.special_ndtri(),
        "special_log_ndtr" => x.special_log_ndtr(),
        "special_erfcx" => x.special_erfcx(),
        "logit" => x.logit((!a["eps"].is_null()).then(|| crate::pytorch_fixture::num(&a["eps"]))),
        "rad2deg" => x.rad2deg(),
        "deg2rad" => x.deg2rad(),
        "angle" => x.angle(),
        "positive" => x.positive(),
        "hypot" => x.hypot(&v[1]),
        "copysign" => x.copysign(&v[1]),
        "fmax" => x.fmax(&v[1]),
        "fmin" => x.fmin(&v[1]),
        "xlog1py" => x.xlog1py(&v[1]),
        "float_power" => x.float_power(&v[1]),
        "true_divide" => x.true_divide(&v[1]),
        "ldexp" => x.ldexp(other.unwrap()),
        op => panic!("the generator wrote an op this test does not know: {op}"),
    }
}

fn difference(c: &Value, device: Device) -> Option<String> {
    let v: Vec<Var> = c["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| Var::parameter(input(r, device)).unwrap())
        .collect();
    let other = c.get("other").map(|r| input(r, device));
    let y = match call(c, &v, other.as_ref()) {
        Ok(y) => y,
        Err(e) => {
            return c
                .get("grads")
                .map(|_| format!("failed ({e}), PyTorch did not"))
        }
    };
    if let Err(e) = y.sum(None, false).and_then(|s| s.backward()) {
        return c
            .get("grads")
            .map(|_| format!("backward failed ({e}), PyTorch did not"));
    }
    let Some(grads) = c.get("grads") else {
        return Some(format!("PyTorch failed: {}", c["error"]));
    };
    let rel = if v[0].dtype() == DType::F64 {
        1e-9
    } else {
        1e-4
    };
    for (j, want) in grads.as_array().unwrap().iter().enumerate() {
        let got = v[j].grad().map(|g| f64s(&g));
        let ok = match (&got, want.is_null()) {
            (None, true) => true,
            (Some(g), true) => g.iter().all(|&x| x == 0.0),
            (Some(g), false) => close(g, &nums(&want["data"]), rel),
            (None, false) => nums(&want["data"]).iter().all(|&x| x == 0.0),
        };
        if !ok {
            return Some(format!(
                "grad of operand {j}: {got:?}, PyTorch {}",
                want["data"]
            ));
        }
    }
    None
}

fn all_agree_on(device: Device) {
    let cases = FIXTURE["cases"].as_array().unwrap();
    assert!(cases.len() >= 60, "{} cases", cases.len());
    let bad: Vec<String> = cases
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            difference(c, device).map(|w| format!("case {i}: {} ({}): {w}", c["op"], c["note"]))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {} differ:\n{}",
        bad.len(),
        cases.len(),
        bad.join("\n")
    );
}

#[test]
fn gradients_at_the_edges_of_session_79_math_match_pytorch() {
    all_agree_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn gradients_at_the_edges_of_session_79_math_match_pytorch_on_a_gpu() {
    all_agree_on(crate::hostile_calls::gpu());
}

/// Integer tensors take no gradient (PyTorch: "only Tensors of floating
/// point dtype can require gradients"); the integer-valued ops have no
/// recorded form to differentiate.
#[test]
fn integer_tensors_take_no_gradient() {
    for d in [DType::I64, DType::I32, DType::U8, DType::Bool] {
        let t = Tensor::zeros(&[3], d, Device::Cpu).unwrap();
        assert!(Var::parameter(t).is_err(), "{d:?}");
    }
}
