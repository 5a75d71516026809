//! Session 72: reductions, scans, sorts and selections with hostile dims and
//! counts against PyTorch 2.15 (`benches/anchors/gen_reduce_args_s72.py`,
//! which says what it draws and what it leaves out): strata must fail where
//! PyTorch fails and otherwise give PyTorch's shapes and values (within f32
//! rounding). The probe found one difference, fixed: `count_nonzero` with
//! an empty dim list reduced nothing, PyTorch counts over every dim.

use crate::hostile_calls::{assert_all_agree, gpu, int, pattern, Match};
use crate::pytorch_fixture::{fixture, gunzip, ints};
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::{Device, Result, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/reduce_args_s72.json.gz"))));

/// A dim list: `None` where the generator passed PyTorch `None` for an
/// empty one (var, vector_norm), else the list itself.
fn dims_or_none(v: &Value) -> Option<Vec<i64>> {
    Some(ints(v)).filter(|d| !d.is_empty())
}

fn call(op: &str, x: &Tensor, a: &[Value]) -> Result<Vec<Tensor>> {
    let one = |r: Result<Tensor>| r.map(|t| vec![t]);
    let two = |r: Result<(Tensor, Tensor)>| r.map(|(p, q)| vec![p, q]);
    let dim = || int(&a[0]);
    match op {
        "topk" => two(x.topk(int(&a[0]) as usize, int(&a[1]), true, true)),
        "kthvalue" => two(x.kthvalue(int(&a[0]) as usize, int(&a[1]), false)),
        "cumsum" => one(x.cumsum(dim(), None)),
        "cumprod" => one(x.cumprod(dim(), None)),
        "sort" => two(x.sort(dim(), false, true)),
        "argsort" => one(x.argsort(dim(), false, true)),
        "argmax" => one(x.argmax(Some(dim()), false)),
        "max_dim" => two(x.max_dim(dim(), false)),
        "median_dim" => two(x.median_dim(dim(), false)),
        "nanmedian_dim" => two(x.nanmedian_dim(dim(), false)),
        "softmax" => one(x.softmax(dim(), None)),
        "log_softmax" => one(x.log_softmax(dim(), None)),
        "all_dim" => one(x.all_dim(dim(), false)),
        "cummax" => two(x.cummax(dim())),
        "logcumsumexp" => one(x.logcumsumexp(dim())),
        "logsumexp" => one(x.logsumexp(&ints(&a[0]), false)),
        "var" => one(x.var(dims_or_none(&a[0]).as_deref(), 1.0, false)),
        "vector_norm" => one(x.vector_norm(2.0, dims_or_none(&a[0]).as_deref(), false)),
        "count_nonzero" => one(x.count_nonzero(Some(&ints(&a[0])))),
        "sum" => one(x.sum(Some(&ints(&a[0])), false)),
        "mean" => one(x.mean(Some(&ints(&a[0])), false)),
        "index_select" | "gather" => {
            let v = ints(&a[1]);
            let n = v.len();
            let shape = match (op, x.ndim()) {
                ("index_select", _) => vec![n],
                (_, 0) if n == 1 => vec![],
                (_, 0) => vec![n],
                (_, nd) => std::iter::once(n)
                    .chain(std::iter::repeat_n(1, nd - 1))
                    .collect(),
            };
            let idx = Tensor::from_slice(&v, &shape, x.device()).unwrap();
            if op == "index_select" {
                one(x.index_select(dim(), &idx))
            } else {
                one(x.gather(dim(), &idx))
            }
        }
        other => panic!("the generator wrote an op this test does not know: {other}"),
    }
}

fn reductions_on(device: Device) {
    assert_all_agree(&FIXTURE, 19_000, Match::Relative(1e-5), |c| {
        let x = pattern(&ints(&c["shape"]), 0, device);
        call(c["op"].as_str().unwrap(), &x, c["args"].as_array().unwrap())
    });
}

#[test]
fn reductions_take_hostile_dims_as_pytorch() {
    reductions_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn reductions_take_hostile_dims_as_pytorch_on_a_gpu() {
    reductions_on(gpu());
}
