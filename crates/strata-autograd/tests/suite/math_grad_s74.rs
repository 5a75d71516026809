//! Session 74: the gradients of the element-wise math added in session 74
//! (`Var::tan` ... `Var::fmod`), against PyTorch 2.15's CPU autograd
//! (`benches/anchors/gen_math_s74.py`, the calls of strata-tensor's
//! `math_s74` fixture with f32 or f64 inputs that succeed): the gradient
//! of `sum(y * u)` for the upstream `u` whose element j is
//! `((3 j) mod 7 - 3) / 2`, for self and for a float second operand.
//! Within the tolerances of conformance/FORMAT.md (the formulas are
//! PyTorch's, in its order, but the functions they call may round
//! differently in the last bit, which a broadcast's sum can magnify: a
//! relative error of 1e-4 for f32, 1e-9 for f64).

use crate::pytorch_fixture::{assert_cases_agree, fixture, gunzip, input, num, nums};
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::Var;
use strata_tensor::{DType, Device, Scalar, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/math_grad_s74.json.gz"))));

pub fn f64s(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64)
        .unwrap()
        .contiguous()
        .unwrap()
        .to_vec()
        .unwrap()
}

pub fn close(got: &[f64], want: &[f64], rel: f64) -> bool {
    got.len() == want.len()
        && got.iter().zip(want).all(|(&g, &w)| {
            (g.is_nan() && w.is_nan()) || g == w || (g - w).abs() <= rel * w.abs().max(1.0)
        })
}

/// Where the gradients of `vars` (each with the key of PyTorch's in case
/// `c`; a key the case lacks is not compared) differ from PyTorch's by more
/// than `rel` (relative, absolute below 1), or `None`.
pub fn grads_difference(c: &Value, vars: &[(Option<&Var>, &str)], rel: f64) -> Option<String> {
    for &(v, k) in vars {
        if let (Some(v), Some(want)) = (v, c.get(k)) {
            let got = v.grad().map(|g| f64s(&g)).unwrap_or_default();
            if !close(&got, &nums(want), rel) {
                return Some(format!("{k} {got:?}, PyTorch {:?}", nums(want)));
            }
        }
    }
    None
}

/// Where strata's gradients for case `c` differ from PyTorch's, or `None`.
fn difference(c: &Value, device: Device) -> Option<String> {
    let op = c["op"].as_str().unwrap();
    let x = Var::parameter(input(&c["x"], device)).unwrap();
    let other = c.get("other").map(|o| {
        let t = input(o, device);
        if t.dtype().is_float() {
            Var::parameter(t).unwrap()
        } else {
            Var::new(t)
        }
    });
    let scalar = c.get("scalar").map(|s| match s["kind"].as_str().unwrap() {
        "int" => Scalar::Int(s["value"].as_i64().unwrap()),
        "bool" => Scalar::Bool(s["value"].as_bool().unwrap()),
        _ => Scalar::Float(num(&s["value"])),
    });
    let arg = |k: &str| c["args"].get(k).map(num);
    let y = match op {
        "tan" => x.tan(),
        "asin" => x.asin(),
        "acos" => x.acos(),
        "atan" => x.atan(),
        "sinh" => x.sinh(),
        "cosh" => x.cosh(),
        "asinh" => x.asinh(),
        "acosh" => x.acosh(),
        "atanh" => x.atanh(),
        "log2" => x.log2(),
        "log10" => x.log10(),
        "exp2" => x.exp2(),
        "erfc" => x.erfc(),
        "floor" => x.floor(),
        "ceil" => x.ceil(),
        "round" => x.round(),
        "trunc" => x.trunc(),
        "frac" => x.frac(),
        "square" => x.square(),
        "nan_to_num" => x.nan_to_num(arg("nan"), arg("posinf"), arg("neginf")),
        "atan2" => x.atan2(other.as_ref().unwrap()),
        "remainder" => match (&other, scalar) {
            (Some(o), _) => x.remainder(o),
            (None, s) => x.remainder(s.unwrap()),
        },
        "fmod" => match (&other, scalar) {
            (Some(o), _) => x.fmod(o),
            (None, s) => x.fmod(s.unwrap()),
        },
        _ => panic!("the generator wrote an op this test does not know: {op}"),
    };
    let y = match y {
        Ok(y) => y,
        Err(e) => return Some(format!("failed ({e}), PyTorch did not")),
    };
    if let Some(e) = backward_with_upstream(&y, device) {
        return Some(e);
    }
    let rel = if x.dtype() == DType::F64 { 1e-9 } else { 1e-4 };
    let gx = x.grad().map(|g| f64s(&g)).unwrap_or_default();
    if !close(&gx, &nums(&c["grad_x"]), rel) {
        return Some(format!(
            "grad of x {gx:?}, PyTorch {:?}",
            nums(&c["grad_x"])
        ));
    }
    if let Some(w) = c.get("grad_other") {
        let go = other.unwrap().grad().map(|g| f64s(&g)).unwrap_or_default();
        if !close(&go, &nums(w), rel) {
            return Some(format!("grad of other {go:?}, PyTorch {:?}", nums(w)));
        }
    }
    None
}

/// Backpropagates `sum(y * u)` for the fixtures' upstream gradient `u`
/// (element j: `((3 j) mod 7 - 3) / 2`); the failure, if any.
pub fn backward_with_upstream(y: &Var, device: Device) -> Option<String> {
    let u: Vec<f64> = (0..y.numel())
        .map(|j| ((3 * j) % 7) as f64 / 2.0 - 1.5)
        .collect();
    let u = Tensor::from_slice(&u, y.shape(), device)
        .and_then(|u| u.to_dtype(y.dtype()))
        .unwrap();
    y.mul(&Var::new(u))
        .and_then(|p| p.sum(None, false))
        .and_then(|s| s.backward())
        .err()
        .map(|e| format!("backward failed: {e}"))
}

/// How a case of a one-input op's fixture differs from PyTorch's answer:
/// the `Tensor` form (`tensor`) against the recorded result within `tol`,
/// then, where the case records the input's gradient, the `Var` form
/// (`var`) against the `Tensor` form's values and its gradient within the
/// relative `rel`.
pub fn one_input_difference(
    c: &Value,
    device: Device,
    tensor: impl Fn(&Tensor) -> strata_tensor::Result<Tensor>,
    var: impl Fn(&Var) -> strata_autograd::Result<Var>,
    tol: impl Fn(DType) -> Option<(f64, f64)>,
    rel: f64,
) -> Option<String> {
    let x = input(&c["x"], device);
    let got = tensor(&x);
    let values = got.as_ref().ok().map(f64s);
    if let Some(d) = crate::pytorch_fixture::result_difference(got, c, tol) {
        return Some(d);
    }
    c.get("grad_x")?;
    let xv = Var::parameter(x).unwrap();
    let y = match var(&xv) {
        Ok(y) => y,
        Err(e) => return Some(format!("Var form failed ({e})")),
    };
    if !close(&f64s(y.data()), &values.unwrap(), 0.0) {
        return Some("the Var form's values differ from the Tensor form's".into());
    }
    if let Some(e) = backward_with_upstream(&y, device) {
        return Some(e);
    }
    grads_difference(c, &[(Some(&xv), "grad_x")], rel)
}

fn all_agree_on(device: Device) {
    assert_cases_agree(
        FIXTURE["cases"].as_array().unwrap(),
        1_500,
        |c| {
            format!(
                "case {}: {} x {} {:?} other {}",
                c["case"],
                c["op"],
                c["x"]["dtype"],
                c["x"]["values"],
                c.get("other")
                    .map_or("-".into(), |o| o["dtype"].to_string())
            )
        },
        |c| difference(c, device),
    );
}

#[test]
fn gradients_of_the_element_wise_math_match_pytorch() {
    all_agree_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn gradients_of_the_element_wise_math_match_pytorch_on_a_gpu() {
    all_agree_on(crate::hostile_calls::gpu());
}
