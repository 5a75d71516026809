//! Session 78: the ops PyTorch users reach for that strata lacked (margin,
//! embedding and likelihood losses, `glu`, `prelu`, the shrinks,
//! `softmin`, `nansum`/`nanmean`, `var_mean`/`std_mean`, `logaddexp`/
//! `logaddexp2`, `xlogy`, `addcdiv`, `movedim`) against PyTorch 2.15's CPU:
//! `benches/anchors/gen_missing_ops_s78.py` drew 4,600 calls (every strata
//! dtype, empty and 0-d shapes, transposed operands, NaN, infinities and
//! huge values, arguments out of their domain); each must give PyTorch's
//! dtype, shape and values within conformance/FORMAT.md's tolerance of the
//! result's dtype, or fail where PyTorch raised. One difference is
//! allowed, and counted: the mean of `var_mean`/`std_mean` over elements
//! one of which is infinite is that infinity in strata (the mean's), where
//! PyTorch's Welford reduction gives NaN when the infinity is not the last
//! element of its reduction order (`x - inf` then `inf - inf`).
//! `STRATA_S78_PROBE=FILE` checks another draw of the generator (its third
//! argument is the seed) first.

use crate::hostile_calls::reduction;
use crate::pytorch_fixture::{
    check_fixture_and_probe, close, cpu_kernel_gap, differing_cases, dtype, gunzip, input, num,
    opt_ints, shape, tolerance,
};
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::{DType, Device, GaussianVar, Result, Tensor};

static TEXT: LazyLock<String> =
    LazyLock::new(|| gunzip(include_bytes!("../data/missing_ops_s78.json.gz")));

/// strata's answer to case `c` on `device`.
pub fn call(c: &Value, device: Device) -> Result<Vec<Tensor>> {
    let t: Vec<Tensor> = c["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| input(r, device))
        .collect();
    let a = &c["args"];
    let f = |k: &str| num(&a[k]);
    let b = |k: &str| a[k].as_bool().unwrap();
    let red = || reduction(&a["reduction"]);
    let one = |r: Result<Tensor>| r.map(|t| vec![t]);
    let dims_arg = opt_ints(&a["dim"]);
    match c["op"].as_str().unwrap() {
        "margin_ranking_loss" => one(t[0].margin_ranking_loss(&t[1], &t[2], f("margin"), red())),
        "hinge_embedding_loss" => one(t[0].hinge_embedding_loss(&t[1], f("margin"), red())),
        "soft_margin_loss" => one(t[0].soft_margin_loss(&t[1], red())),
        "cosine_embedding_loss" => {
            one(t[0].cosine_embedding_loss(&t[1], &t[2], f("margin"), red()))
        }
        "triplet_margin_loss" => one(t[0].triplet_margin_loss(
            &t[1],
            &t[2],
            f("margin"),
            f("p"),
            f("eps"),
            b("swap"),
            red(),
        )),
        "multilabel_soft_margin_loss" => {
            let w = a["weight"].is_object().then(|| input(&a["weight"], device));
            one(t[0].multilabel_soft_margin_loss(&t[1], w.as_ref(), red()))
        }
        "poisson_nll_loss" => {
            one(t[0].poisson_nll_loss(&t[1], b("log_input"), b("full"), f("eps"), red()))
        }
        "gaussian_nll_loss" => {
            let var = match t.get(2) {
                Some(v) => GaussianVar::Tensor(v),
                None => GaussianVar::Scalar(f("var")),
            };
            one(t[0].gaussian_nll_loss(&t[1], var, b("full"), f("eps"), red()))
        }
        "glu" => one(t[0].glu(a["dim"].as_i64().unwrap())),
        "hardshrink" => one(t[0].hardshrink(f("lambd"))),
        "softshrink" => one(t[0].softshrink(f("lambd"))),
        "tanhshrink" => one(t[0].tanhshrink()),
        "softmin" => {
            let dt = a["dtype"].as_str().map(dtype);
            one(t[0].softmin(a["dim"].as_i64().unwrap(), dt))
        }
        "prelu" => one(t[0].prelu(&t[1])),
        "nansum" => one(t[0].nansum(dims_arg.as_deref(), b("keepdim"))),
        "nanmean" => one(t[0].nanmean(dims_arg.as_deref(), b("keepdim"))),
        "var_mean" | "std_mean" => {
            let (d, k, corr) = (dims_arg.as_deref(), b("keepdim"), f("correction"));
            let (x, m) = if c["op"] == "var_mean" {
                t[0].var_mean(d, corr, k)?
            } else {
                t[0].std_mean(d, corr, k)?
            };
            Ok(vec![x, m])
        }
        "logaddexp" => one(t[0].logaddexp(&t[1])),
        "logaddexp2" => one(t[0].logaddexp2(&t[1])),
        "xlogy" => one(t[0].xlogy(&t[1])),
        "addcdiv" => one(t[0].addcdiv(&t[1], &t[2], f("value"))),
        "movedim" => one(t[0].movedim(
            &opt_ints(&a["source"]).unwrap(),
            &opt_ints(&a["destination"]).unwrap(),
        )),
        op => panic!("the generator wrote an op this test does not know: {op}"),
    }
}

/// How strata's answer to case `c` differs from PyTorch's, or `None`.
fn difference(c: &Value, device: Device) -> Option<String> {
    let got = call(c, device);
    let Some(want) = c.get("results") else {
        if cpu_kernel_gap(c, device) {
            return None;
        }
        return got.ok().map(|t| {
            format!(
                "gave {:?} {:?}, PyTorch failed: {}",
                t[0].dtype(),
                t[0].shape(),
                c["error"]
            )
        });
    };
    let got = match got {
        Err(e) => return Some(format!("failed ({e}), PyTorch did not")),
        Ok(t) => t,
    };
    let welford = matches!(c["op"].as_str(), Some("var_mean" | "std_mean"));
    for (k, (t, w)) in got.iter().zip(want.as_array().unwrap()).enumerate() {
        let wd = dtype(w["dtype"].as_str().unwrap());
        let ws = shape(&w["shape"]);
        let g = t
            .to_dtype(DType::F64)
            .and_then(|t| t.contiguous())
            .and_then(|t| t.to_vec::<f64>())
            .unwrap();
        let wv = crate::pytorch_fixture::nums(&w["data"]);
        let tol = wd.is_float().then(|| tolerance(wd));
        let ok = t.dtype() == wd
            && t.shape() == ws.as_slice()
            && g.len() == wv.len()
            && g.iter().zip(&wv).all(|(&x, &y)| {
                close(x, y, tol) || (welford && k == 1 && x.is_infinite() && y.is_nan())
            });
        if !ok {
            return Some(format!(
                "gave {:?} {:?} {g:?}, PyTorch {wd:?} {ws:?} {wv:?}",
                t.dtype(),
                t.shape()
            ));
        }
    }
    (got.len() != want.as_array().unwrap().len()).then(|| "a different number of results".into())
}

fn check(text: &str, device: Device) -> (usize, Vec<String>) {
    differing_cases(text, |c| difference(c, device))
}

#[test]
fn the_new_ops_match_pytorch() {
    check_fixture_and_probe(&TEXT, 4_600, "STRATA_S78_PROBE", |t| check(t, Device::Cpu));
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn the_new_ops_match_pytorch_on_a_gpu() {
    let gpu = crate::hostile_calls::gpu();
    check_fixture_and_probe(&TEXT, 4_600, "STRATA_S78_PROBE", |t| check(t, gpu));
}
