//! Session 80: gradients of `strata_autograd::linalg` at hostile inputs
//! against PyTorch 2.15's CPU autograd (`benches/anchors/gen_hostile_s80.py`):
//! `det`, `matrix_power`, `svdvals` of singular matrices (rank n - 1 and
//! lower, zero, batches holding one) where PyTorch's first-order gradient
//! is defined; `eigvalsh`, `svdvals`, the nuclear, Frobenius and 1-norms,
//! `cholesky`, `det` and `logdet` at repeated eigenvalues (identity,
//! `2I`, a repeated pair, with losses that do not depend on the basis of
//! an eigenspace); `linalg.norm` of every order, `vecdot` and `cross` at
//! zero-norm vectors and ties; `solve`, `pinv`, `qr` and `svdvals` of
//! empty matrices; `cond` of the identity. Each case is the gradient of
//! `sum_i sum(W_i * out_i)` (ones unless listed), replayed by linalg_s79's
//! dispatcher on a thread of its own (a panic or a hang is a failure).
//! strata must give PyTorch's gradients (within linalg_s79's tolerance,
//! NaN where PyTorch has NaN) or fail where PyTorch fails.

use serde_json::Value;
use std::sync::{mpsc, LazyLock};
use std::time::Duration;
use strata_autograd::Var;
use strata_tensor::Device;

use crate::linalg_s79::{call, inp, loss, weights};
use crate::pytorch_fixture::{fixture, gunzip, num, shape};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/hostile_s80_grad.json.gz"))));

/// Each input's gradient (shape, values; `None` where it has none), or
/// the error of the forward or backward call.
type Grads = std::result::Result<Vec<Option<(Vec<usize>, Vec<f64>)>>, String>;

fn grads(c: &Value) -> Grads {
    let ins: Vec<_> = c["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| inp(d, Device::Cpu))
        .collect();
    let vars: Vec<Var> = ins
        .iter()
        .map(|t| Var::parameter(t.clone()).unwrap())
        .collect();
    let outs = call(c, &vars).map_err(|e| e.to_string())?;
    let ws = match c.get("weights") {
        Some(_) => weights(c, Device::Cpu, ins[0].dtype()),
        // PyTorch failed; ones of each output's shape.
        None => outs
            .iter()
            .map(|o| strata_tensor::Tensor::ones(o.shape(), o.dtype(), Device::Cpu).unwrap())
            .collect(),
    };
    loss(&outs, &ws)
        .and_then(|l| l.backward())
        .map_err(|e| e.to_string())?;
    Ok(vars
        .iter()
        .map(|v| {
            v.grad()
                .map(|g| (g.shape().to_vec(), g.to_vec_as::<f64>().unwrap()))
        })
        .collect())
}

fn difference(c: &Value) -> Option<String> {
    let case = c.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(grads(&case));
    });
    let got = match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(g) => g,
        Err(mpsc::RecvTimeoutError::Timeout) => return Some("hung".into()),
        Err(mpsc::RecvTimeoutError::Disconnected) => return Some("panicked".into()),
    };
    let Some(want) = c.get("grads") else {
        return got
            .ok()
            .map(|_| format!("answered, PyTorch failed: {}", c["error"]));
    };
    let got = match got {
        // strata's backward refuses a singular matrix where PyTorch's
        // gradient is infinite or NaN (strata_autograd::linalg::slogdet's
        // documented error).
        Err(e)
            if e.contains("singular")
                && want.as_array().unwrap().iter().any(|w| {
                    !w.is_null()
                        && w["data"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|x| !num(x).is_finite())
                }) =>
        {
            return None
        }
        Err(e) => return Some(format!("failed ({e}), PyTorch did not")),
        Ok(g) => g,
    };
    let f64_input = c["inputs"][0]["dtype"] == "f64";
    let (tol, floor) = if f64_input {
        (1e-8, 1e-12)
    } else {
        (2e-3, 1e-5)
    };
    for (i, (g, w)) in got.iter().zip(want.as_array().unwrap()).enumerate() {
        let wv: Vec<f64> = if w.is_null() {
            Vec::new()
        } else {
            w["data"].as_array().unwrap().iter().map(num).collect()
        };
        let (gs, gv) = match g {
            // No gradient is PyTorch's zeros (or its None).
            None if wv.iter().all(|&x| x == 0.0) => continue,
            None => return Some(format!("input {i}: no gradient, PyTorch {wv:?}")),
            Some(g) => g,
        };
        if w.is_null() {
            if gv.iter().all(|&x| x == 0.0) {
                continue;
            }
            return Some(format!("input {i}: gradient {gv:?}, PyTorch none"));
        }
        if gs != &shape(&w["shape"]) {
            return Some(format!(
                "input {i}: gradient shape {gs:?}, PyTorch {}",
                w["shape"]
            ));
        }
        let big = wv
            .iter()
            .filter(|x| x.is_finite())
            .fold(0.0f64, |m, x| m.max(x.abs()));
        for (j, (&x, &y)) in gv.iter().zip(&wv).enumerate() {
            let ok = x == y
                || (x.is_nan() && y.is_nan())
                || (x.is_finite()
                    && y.is_finite()
                    && (x - y).abs() <= tol * (big + y.abs()) + floor);
            if !ok {
                return Some(format!(
                    "input {i} element {j}: {x}, PyTorch {y} (all: {gv:?} vs {wv:?})"
                ));
            }
        }
    }
    None
}

#[test]
fn gradients_of_linalg_at_hostile_inputs_match_pytorch() {
    let cases = FIXTURE["cases"].as_array().unwrap();
    assert!(cases.len() >= 200, "{} cases", cases.len());
    let bad: Vec<String> = cases
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            difference(c).map(|d| {
                format!(
                    "case {i}: {} ({}) {} {}: {d}",
                    c["op"], c["note"], c["args"], c["inputs"][0]["dtype"]
                )
            })
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
