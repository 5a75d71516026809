//! Session 75: `batch_norm` (`Tensor` and `Var` forms), its running
//! statistics and its gradients for the input, weight and bias, against
//! PyTorch 2.15's CPU (`benches/anchors/gen_batch_norm_s75.py`: f32, f64,
//! f16 and bf16 inputs with parameters of their dtype or f32, training and
//! evaluation, empty and single-value batches, mismatched lengths and
//! dtypes, one running statistic without the other, eps 0 and negative).
//! strata must fail where PyTorch fails and otherwise give its dtype, shape
//! and values within conformance/FORMAT.md's tolerances, update the running
//! statistics as PyTorch does, and for f32/f64 give its gradients within a
//! relative 1e-4 (f32) or 1e-9 (f64).

use crate::math_grad_s74::{backward_with_upstream, close, f64s, grads_difference};
use crate::pytorch_fixture::{
    assert_cases_agree, fixture, gunzip, input, num, nums, result_difference, tolerance,
};
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::Var;
use strata_tensor::{DType, Device, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/batch_norm_s75.json.gz"))));

struct Args {
    training: bool,
    momentum: f64,
    eps: f64,
}

fn args(c: &Value) -> Args {
    let a = &c["args"];
    Args {
        training: a["training"].as_bool().unwrap(),
        momentum: num(&a["momentum"]),
        eps: num(&a["eps"]),
    }
}

/// The case's running statistics (fresh copies) on `device`.
fn running(c: &Value, device: Device) -> (Option<Tensor>, Option<Tensor>) {
    let get = |k: &str| c.get(k).map(|d| input(d, device).contiguous().unwrap());
    (get("running_mean"), get("running_var"))
}

fn difference(c: &Value, device: Device) -> Option<String> {
    let x = input(&c["x"], device);
    let w = c.get("weight").map(|w| input(w, device));
    let b = c.get("bias").map(|b| input(b, device));
    let (rm, rv) = running(c, device);
    let a = args(c);
    let got = x.batch_norm(
        rm.as_ref(),
        rv.as_ref(),
        w.as_ref(),
        b.as_ref(),
        a.training,
        a.momentum,
        a.eps,
    );
    let values = got.as_ref().ok().map(f64s);
    if let Some(d) = result_difference(got, c, |dt| Some(tolerance(dt))) {
        return Some(d);
    }
    // The running statistics after the call (unchanged in evaluation).
    for (t, k) in [(&rm, "running_mean_after"), (&rv, "running_var_after")] {
        if let (Some(t), Some(want)) = (t, c.get(k)) {
            let (r, at) = tolerance(t.dtype());
            let got = f64s(t);
            let want = nums(want);
            let ok = got.len() == want.len()
                && got
                    .iter()
                    .zip(&want)
                    .all(|(g, w)| (g - w).abs() <= at + r * w.abs());
            if !ok {
                return Some(format!("{k} {got:?}, PyTorch {want:?}"));
            }
        }
    }
    c.get("grad_x")?;
    let xv = Var::parameter(x).unwrap();
    let wv = w.map(|w| Var::parameter(w).unwrap());
    let bv = b.map(|b| Var::parameter(b).unwrap());
    let (rm, rv) = running(c, device);
    let y = match xv.batch_norm(
        rm.as_ref(),
        rv.as_ref(),
        wv.as_ref(),
        bv.as_ref(),
        a.training,
        a.momentum,
        a.eps,
    ) {
        Ok(y) => y,
        Err(e) => return Some(format!("Var form failed ({e})")),
    };
    if !close(&f64s(y.data()), &values.unwrap(), 0.0) {
        return Some("the Var form's values differ from the Tensor form's".into());
    }
    if let Some(e) = backward_with_upstream(&y, device) {
        return Some(e);
    }
    let rel = if xv.dtype() == DType::F64 { 1e-9 } else { 1e-4 };
    grads_difference(
        c,
        &[
            (Some(&xv), "grad_x"),
            (wv.as_ref(), "grad_weight"),
            (bv.as_ref(), "grad_bias"),
        ],
        rel,
    )
}

fn all_agree_on(device: Device) {
    assert_cases_agree(
        FIXTURE["cases"].as_array().unwrap(),
        1_400,
        |c| {
            format!(
                "{} x {} {:?} params {:?}",
                c["args"],
                c["x"]["dtype"],
                c["x"]["shape"],
                ["running_mean", "running_var", "weight", "bias"]
                    .iter()
                    .map(|k| c.get(*k).map(|d| (d["dtype"].clone(), d["shape"].clone())))
                    .collect::<Vec<_>>()
            )
        },
        |c| difference(c, device),
    );
}

#[test]
fn batch_norm_matches_pytorch() {
    all_agree_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn batch_norm_matches_pytorch_on_a_gpu() {
    all_agree_on(crate::hostile_calls::gpu());
}
