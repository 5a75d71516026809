//! Reading the JSON fixtures that `benches/anchors/gen_*.py` write from
//! PyTorch's answers: strata-tensor's suite's helpers (numbers, dtype names,
//! tensors built from and compared with them bit for bit), shared by path,
//! plus option flags and the optimizer comparisons of this suite.

use serde_json::Value;
use strata_autograd::{Optimizer, Sgd, Var};

// The same file as strata-tensor's suite (the crates share no test crate);
// this suite uses part of it.
#[allow(dead_code)]
#[path = "../../../strata-tensor/tests/suite/pytorch_fixture.rs"]
mod base;
pub use base::*;

/// An option flag of a fixture case's keyword arguments (false when absent).
pub fn flag(kw: &Value, name: &str) -> bool {
    kw.get(name).and_then(Value::as_bool).unwrap_or(false)
}

/// An SGD over `p` with a fixture case's keyword arguments (`lr`,
/// `momentum`, `weight_decay`, `dampening`: 0 when absent; `nesterov`,
/// `maximize`: false when absent), as PyTorch's `SGD([p], **kw)`.
pub fn sgd_of(p: &Var, kw: &Value) -> Sgd {
    let num = |k: &str| kw.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    Sgd::new(vec![p.clone()], num("lr"), num("momentum"))
        .and_then(|o| o.with_weight_decay(num("weight_decay")))
        .and_then(|o| o.with_dampening(num("dampening")))
        .and_then(|o| o.with_nesterov(flag(kw, "nesterov")))
        .unwrap()
        .with_maximize(flag(kw, "maximize"))
}

/// Compares an SGD step's parameter `p` and momentum buffer with a fixture
/// case's `p` and `momentum_buffer` (`null`: the state has none) bit for
/// bit, pushing what differs to `failures`.
pub fn check_sgd_result(
    opt: &dyn Optimizer,
    p: &Var,
    case: &Value,
    what: &str,
    failures: &mut Vec<String>,
) {
    if !same(&host(p.data()), &nums(&case["p"])) {
        failures.push(format!("{what}: parameter"));
    }
    let d = opt.state_dict().unwrap();
    match &case["momentum_buffer"] {
        Value::Null => assert!(!d.contains_key("state.0.momentum_buffer"), "{what}"),
        b => {
            if !same(&host(&d["state.0.momentum_buffer"]), &nums(b)) {
                failures.push(format!("{what}: momentum_buffer"));
            }
        }
    }
}

/// Values equal within `tol` relative to the larger magnitude (NaN
/// matches NaN, infinities must be equal).
pub fn close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    let ok = got.len() == want.len()
        && got.iter().zip(want).all(|(a, b)| {
            (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * a.abs().max(b.abs())
        });
    assert!(ok, "{what}: got {got:?}, want {want:?}");
}
