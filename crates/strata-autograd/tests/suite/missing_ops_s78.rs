//! Session 78: the gradients of the ops strata added in session 78 (margin,
//! embedding and likelihood losses, `glu`, `prelu`, the shrinks,
//! `softmin`, `nansum`/`nanmean`, `var_mean`/`std_mean`, `logaddexp`/
//! `logaddexp2`, `xlogy`, `addcdiv`, `movedim`) against PyTorch 2.15's CPU
//! autograd (`benches/anchors/gen_missing_ops_s78.py`: the calls of
//! strata-tensor's `missing_ops_s78` fixture whose differentiable operands
//! are f32 or f64 and that succeed), for the upstream gradient whose
//! element j is `((3 j) mod 7 - 3) / 2` (each output of a pair its own),
//! within a relative 1e-4 (1e-9 where every operand is f64). The forward
//! values of each recorded form are the `Tensor` form's (checked against
//! PyTorch by strata-tensor's test). Left out: `var_mean`/`std_mean` over
//! an empty dim list, whose forward reduces every dim while PyTorch 2.15's
//! backward divides by a count of 1 (`torch.var(x, dim=[])` too: its
//! gradient is not the derivative of its value); strata's is. And
//! `hardshrink`/`softshrink` of inputs holding NaN: PyTorch's CPU gradient
//! there is 0 in its vectorised loop and the upstream gradient in its
//! scalar loop (small tensors, the tail of a row), strata's 0 everywhere.

use crate::hostile_calls::reduction;
use crate::math_grad_s74::{close, f64s};
use crate::pytorch_fixture::{
    assert_cases_agree, dtype, fixture, gunzip, input, num, nums, opt_ints, upstream,
};
use serde_json::Value;
use std::sync::LazyLock;
use strata_autograd::{Result, Var};
use strata_tensor::{DType, Device, GaussianVar, Tensor};

static FIXTURE: LazyLock<Value> = LazyLock::new(|| {
    fixture(&gunzip(include_bytes!(
        "../data/missing_ops_s78_grad.json.gz"
    )))
});

/// The recorded form of case `c` on the variables `v` (and the plain
/// tensors `t`, for the operands that take no gradient).
fn call(c: &Value, v: &[Var], t: &[Tensor], device: Device) -> Result<Vec<Var>> {
    let a = &c["args"];
    let f = |k: &str| num(&a[k]);
    let b = |k: &str| a[k].as_bool().unwrap();
    let red = || reduction(&a["reduction"]);
    let one = |r: Result<Var>| r.map(|x| vec![x]);
    let dims_arg = opt_ints(&a["dim"]);
    match c["op"].as_str().unwrap() {
        "margin_ranking_loss" => one(v[0].margin_ranking_loss(&v[1], &v[2], f("margin"), red())),
        "hinge_embedding_loss" => one(v[0].hinge_embedding_loss(&t[1], f("margin"), red())),
        "soft_margin_loss" => one(v[0].soft_margin_loss(&t[1], red())),
        "cosine_embedding_loss" => {
            one(v[0].cosine_embedding_loss(&v[1], &t[2], f("margin"), red()))
        }
        "triplet_margin_loss" => one(v[0].triplet_margin_loss(
            &v[1],
            &v[2],
            f("margin"),
            f("p"),
            f("eps"),
            b("swap"),
            red(),
        )),
        "multilabel_soft_margin_loss" => {
            let w = a["weight"].is_object().then(|| input(&a["weight"], device));
            one(v[0].multilabel_soft_margin_loss(&v[1], w.as_ref(), red()))
        }
        "poisson_nll_loss" => {
            one(v[0].poisson_nll_loss(&v[1], b("log_input"), b("full"), f("eps"), red()))
        }
        "gaussian_nll_loss" => {
            let var = match v.get(2) {
                Some(x) => GaussianVar::Tensor(x),
                None => GaussianVar::Scalar(f("var")),
            };
            one(v[0].gaussian_nll_loss(&v[1], var, b("full"), f("eps"), red()))
        }
        "glu" => one(v[0].glu(a["dim"].as_i64().unwrap())),
        "hardshrink" => one(v[0].hardshrink(f("lambd"))),
        "softshrink" => one(v[0].softshrink(f("lambd"))),
        "tanhshrink" => one(v[0].tanhshrink()),
        "softmin" => {
            let dt = a["dtype"].as_str().map(dtype);
            one(v[0].softmin(a["dim"].as_i64().unwrap(), dt))
        }
        "prelu" => one(v[0].prelu(&v[1])),
        "nansum" => one(v[0].nansum(dims_arg.as_deref(), b("keepdim"))),
        "nanmean" => one(v[0].nanmean(dims_arg.as_deref(), b("keepdim"))),
        "var_mean" | "std_mean" => {
            let (d, k, corr) = (dims_arg.as_deref(), b("keepdim"), f("correction"));
            let (x, m) = if c["op"] == "var_mean" {
                v[0].var_mean(d, corr, k)?
            } else {
                v[0].std_mean(d, corr, k)?
            };
            Ok(vec![x, m])
        }
        "logaddexp" => one(v[0].logaddexp(&v[1])),
        "logaddexp2" => one(v[0].logaddexp2(&v[1])),
        "xlogy" => one(v[0].xlogy(&v[1])),
        "addcdiv" => one(v[0].addcdiv(&v[1], &v[2], f("value"))),
        "movedim" => one(v[0].movedim(
            &opt_ints(&a["source"]).unwrap(),
            &opt_ints(&a["destination"]).unwrap(),
        )),
        op => panic!("the generator wrote an op this test does not know: {op}"),
    }
}

/// `sum_k sum(y_k * u_k)` backward, `u_k` the fixture's upstream gradient.
fn backward(ys: &[Var], device: Device) -> Result<()> {
    let mut total: Option<Var> = None;
    for y in ys {
        let u = upstream(y.shape(), y.dtype(), device)?;
        let s = y.mul(&Var::new(u))?.sum(None, false)?;
        total = Some(match total {
            Some(t) => t.add(&s)?,
            None => s,
        });
    }
    total.map_or(Ok(()), |t| t.backward())
}

fn difference(c: &Value, device: Device) -> Option<String> {
    let grads = &c["grads"];
    let t: Vec<Tensor> = c["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| input(r, device))
        .collect();
    let v: Vec<Var> = t
        .iter()
        .enumerate()
        .map(|(j, x)| {
            if grads.get(j.to_string()).is_some() {
                Var::parameter(x.clone()).unwrap()
            } else {
                Var::new(x.clone())
            }
        })
        .collect();
    let ys = match call(c, &v, &t, device) {
        Ok(y) => y,
        Err(e) => return Some(format!("failed ({e}), PyTorch did not")),
    };
    if let Err(e) = backward(&ys, device) {
        return Some(format!("backward failed: {e}"));
    }
    // f64 inputs computed in a narrower `dtype` argument (softmin's) are
    // f32 results: on a GPU their sums run in another order than the CPU's.
    let narrowed = c["args"]["dtype"].as_str().is_some_and(|d| d != "f64");
    let all_f64 = t.iter().all(|x| x.dtype() == DType::F64) && !narrowed;
    let rel = if all_f64 { 1e-9 } else { 1e-4 };
    for (k, want) in grads.as_object().unwrap() {
        let j: usize = k.parse().unwrap();
        let got = v[j].grad().map(|g| f64s(&g));
        match (got, want.is_null()) {
            (None, true) => {}
            (Some(g), true) if g.iter().all(|&x| x == 0.0) => {}
            (Some(g), false) if close(&g, &nums(want), rel) => {}
            (None, false) if nums(want).iter().all(|&x| x == 0.0) => {}
            (got, _) => return Some(format!("grad of operand {j}: {got:?}, PyTorch {want}")),
        }
    }
    None
}

fn all_agree_on(device: Device) {
    let cases = FIXTURE["cases"].as_array().unwrap();
    assert_cases_agree(
        cases.iter().filter(|c| {
            let moments = matches!(c["op"].as_str(), Some("var_mean" | "std_mean"));
            let no_dims = c["args"]["dim"].as_array().is_some_and(|d| d.is_empty());
            let shrink = matches!(c["op"].as_str(), Some("hardshrink" | "softshrink"));
            let nan = c["inputs"][0]["values"]
                .as_array()
                .is_some_and(|v| v.iter().any(|x| x == "nan"));
            c.get("grad_error").is_none() && !(moments && no_dims) && !(shrink && nan)
        }),
        1_380,
        |c| {
            format!(
                "{} {} inputs {}",
                c["op"],
                c["args"],
                serde_json::to_string(&c["inputs"]).unwrap()
            )
        },
        |c| difference(c, device),
    );
}

#[test]
fn gradients_of_the_new_ops_match_pytorch() {
    all_agree_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn gradients_of_the_new_ops_match_pytorch_on_a_gpu() {
    all_agree_on(crate::hostile_calls::gpu());
}
