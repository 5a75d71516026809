//! Session 73: indexing, scatter, joining, padding and layout ops with
//! hostile integer arguments and index tensors against PyTorch 2.15
//! (`benches/anchors/gen_index_args_s73.py`, which says what it draws and
//! what it leaves out): strata must fail where PyTorch fails and otherwise
//! give PyTorch's shapes and values (within f32 rounding). The probe found
//! 566 differences of four kinds, fixed: `index_fill` refused negative
//! indices (PyTorch counts them from the end); `index_fill`, `index_copy`,
//! `index_add` and `index_put`/advanced indexing refused out-of-range
//! indices where PyTorch's kernel visits no element and checks none (an
//! empty slice to fill, an empty source, an empty self of several dims, an
//! empty result); `repeat_interleave` refused a single negative count for
//! an empty dim, which PyTorch expands to no counts.

use crate::hostile_calls::{
    assert_all_agree, gpu, int, pad_mode, pattern, reduction, scatter_reduce, sizes, Match,
};
use crate::pytorch_fixture::{fixture, gunzip, ints};
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::{CrossEntropyArgs, Device, Repeats, Result, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/index_args_s73.json.gz"))));

fn float(v: &Value) -> f64 {
    v.as_f64().expect("a float argument")
}

/// A tensor argument `{"shape", "data"}` of values from `data` on.
fn values_arg(a: &Value, device: Device) -> Tensor {
    pattern(&ints(&a["shape"]), int(&a["data"]), device)
}

/// An index tensor argument `{"shape", "data"}` (int64).
fn index_arg(a: &Value, device: Device) -> Tensor {
    Tensor::from_slice(&ints(&a["data"]), &sizes(&ints(&a["shape"])), device).unwrap()
}

fn call(op: &str, x: &Tensor, a: &[Value]) -> Result<Vec<Tensor>> {
    let one = |r: Result<Tensor>| r.map(|t| vec![t]);
    let dim = || int(&a[0]);
    let dev = x.device();
    match op {
        "scatter" => one(x.scatter(dim(), &index_arg(&a[1], dev), &values_arg(&a[2], dev))),
        "scatter_value" => one(x.scatter_value(dim(), &index_arg(&a[1], dev), float(&a[2]))),
        "scatter_add" => one(x.scatter_add(dim(), &index_arg(&a[1], dev), &values_arg(&a[2], dev))),
        "scatter_reduce" => one(x.scatter_reduce(
            dim(),
            &index_arg(&a[1], dev),
            &values_arg(&a[2], dev),
            scatter_reduce(&a[3]),
            a[4].as_bool().unwrap(),
        )),
        "index_add" => one(x.index_add(
            dim(),
            &index_arg(&a[1], dev),
            &values_arg(&a[2], dev),
            float(&a[3]),
        )),
        "index_copy" => one(x.index_copy(dim(), &index_arg(&a[1], dev), &values_arg(&a[2], dev))),
        "index_fill" => one(x.index_fill(dim(), &index_arg(&a[1], dev), float(&a[2]))),
        "index_put" => {
            let ids: Vec<Option<Tensor>> = (a[0].as_array().unwrap().iter())
                .map(|i| (!i.is_null()).then(|| index_arg(i, dev)))
                .collect();
            let refs: Vec<Option<&Tensor>> = ids.iter().map(Option::as_ref).collect();
            one(x.index_put(&refs, &values_arg(&a[1], dev), a[2].as_bool().unwrap()))
        }
        "embedding" => one(Tensor::embedding(&index_arg(&a[0], dev), x, a[1].as_i64())),
        "nll_loss" => one(x.nll_loss(&index_arg(&a[0], dev), None, int(&a[1]), reduction(&a[2]))),
        "cross_entropy" => one(x.cross_entropy(
            &index_arg(&a[0], dev),
            CrossEntropyArgs {
                weight: None,
                ignore_index: int(&a[1]),
                reduction: reduction(&a[2]),
                label_smoothing: float(&a[3]),
            },
        )),
        "cat" | "stack" => {
            let ts: Vec<Tensor> = (a[0].as_array().unwrap().iter().enumerate())
                .map(|(k, s)| pattern(&ints(s), k as i64, dev))
                .collect();
            let refs: Vec<&Tensor> = ts.iter().collect();
            one(if op == "cat" {
                Tensor::cat(&refs, int(&a[1]))
            } else {
                Tensor::stack(&refs, int(&a[1]))
            })
        }
        "split_sizes" => x.split(ints(&a[0]), int(&a[1])),
        "unbind" => x.unbind(dim()),
        "pad" => one(x.pad(&ints(&a[0]), pad_mode(&a[1], float(&a[2])))),
        "repeat_interleave" => {
            let along = a[1].as_i64();
            if a[0].is_object() {
                let counts = index_arg(&a[0], dev);
                one(x.repeat_interleave(Repeats::Tensor(&counts), along))
            } else {
                one(x.repeat_interleave(Repeats::Count(int(&a[0]) as usize), along))
            }
        }
        "expand" => one(x.expand(&ints(&a[0]))),
        "reshape" => one(x.reshape(&ints(&a[0]))),
        "view" => one(x.view(&ints(&a[0]))),
        "permute" => one(x.permute(&ints(&a[0]))),
        "as_strided" => one(x.as_strided(&ints(&a[0]), &ints(&a[1]), a[2].as_i64())),
        other => panic!("the generator wrote an op this test does not know: {other}"),
    }
}

fn indexing_ops_on(device: Device) {
    assert_all_agree(&FIXTURE, 15_000, Match::Relative(1e-5), |c| {
        let x = pattern(&ints(&c["shape"]), 0, device);
        call(c["op"].as_str().unwrap(), &x, c["args"].as_array().unwrap())
    });
}

#[test]
fn indexing_ops_take_hostile_arguments_as_pytorch() {
    indexing_ops_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn indexing_ops_take_hostile_arguments_as_pytorch_on_a_gpu() {
    indexing_ops_on(gpu());
}

/// The in-place form of the scatter and index ops (`None` for the other
/// ops): on `x`, which it changes where it succeeds.
fn call_in_place(op: &str, x: &Tensor, a: &[Value]) -> Option<Result<Tensor>> {
    let dim = || int(&a[0]);
    let dev = x.device();
    Some(match op {
        "scatter" => x.scatter_(dim(), &index_arg(&a[1], dev), &values_arg(&a[2], dev)),
        "scatter_value" => x.scatter_value_(dim(), &index_arg(&a[1], dev), float(&a[2])),
        "scatter_add" => x.scatter_add_(dim(), &index_arg(&a[1], dev), &values_arg(&a[2], dev)),
        "scatter_reduce" => x.scatter_reduce_(
            dim(),
            &index_arg(&a[1], dev),
            &values_arg(&a[2], dev),
            scatter_reduce(&a[3]),
            a[4].as_bool().unwrap(),
        ),
        "index_add" => x.index_add_(
            dim(),
            &index_arg(&a[1], dev),
            &values_arg(&a[2], dev),
            float(&a[3]),
        ),
        "index_copy" => x.index_copy_(dim(), &index_arg(&a[1], dev), &values_arg(&a[2], dev)),
        "index_fill" => x.index_fill_(dim(), &index_arg(&a[1], dev), float(&a[2])),
        "index_put" => {
            let ids: Vec<Option<Tensor>> = (a[0].as_array().unwrap().iter())
                .map(|i| (!i.is_null()).then(|| index_arg(i, dev)))
                .collect();
            let refs: Vec<Option<&Tensor>> = ids.iter().map(Option::as_ref).collect();
            x.index_put_(&refs, &values_arg(&a[1], dev), a[2].as_bool().unwrap())
        }
        _ => return None,
    })
}

/// PyTorch's out-of-place scatter and index ops clone self and run the
/// in-place op on the clone: strata's in-place forms must give the same
/// answers in self where they succeed, and fail where PyTorch fails with
/// self unchanged.
#[test]
fn in_place_indexing_ops_agree_and_change_nothing_when_they_fail() {
    let checked = std::cell::Cell::new(0);
    assert_all_agree(&FIXTURE, 15_000, Match::Relative(1e-5), |c| {
        let shape = ints(&c["shape"]);
        let x = pattern(&shape, 0, Device::Cpu);
        let (op, a) = (c["op"].as_str().unwrap(), c["args"].as_array().unwrap());
        match call_in_place(op, &x, a) {
            None => call(op, &x, a),
            Some(r) => {
                checked.set(checked.get() + 1);
                let r = r.map(|_| vec![x.clone()]);
                if r.is_err() {
                    let before = pattern(&shape, 0, Device::Cpu);
                    assert!(
                        x.equal(&before).unwrap(),
                        "{op} {shape:?} {a:?} failed and changed self"
                    );
                }
                r
            }
        }
    });
    assert!(checked.get() > 9_000, "{} in-place calls", checked.get());
}
