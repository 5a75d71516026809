//! Session 72: shape and view ops with hostile integer arguments against
//! PyTorch 2.15 (`benches/anchors/gen_view_args_s72.py`, which says what it
//! draws and what it leaves out): strata must fail where PyTorch fails and
//! otherwise give PyTorch's shapes and values. The probe found one
//! difference, fixed: `roll` of an empty tensor checked its dims, PyTorch
//! returns a copy first.

use crate::hostile_calls::{assert_all_agree, gpu, int, Match};
use crate::pytorch_fixture::{fixture, gunzip, ints};
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::{DType, Device, Result, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/view_args_s72.json.gz"))));

/// The op a case names, on `x`, with its arguments.
fn call(op: &str, x: &Tensor, a: &[Value]) -> Result<Vec<Tensor>> {
    let one = |r: Result<Tensor>| r.map(|t| vec![t]);
    match op {
        "diagonal" => one(x.diagonal(int(&a[0]), int(&a[1]), int(&a[2]))),
        "diag_embed" => one(x.diag_embed(int(&a[0]), int(&a[1]), int(&a[2]))),
        "diag" => one(x.diag(int(&a[0]))),
        "roll" => one(x.roll(&ints(&a[0]), &ints(&a[1]))),
        "tril" => one(x.tril(int(&a[0]))),
        "triu" => one(x.triu(int(&a[0]))),
        "narrow" => one(x.narrow(int(&a[0]), int(&a[1]), int(&a[2]))),
        "select" => one(x.select(int(&a[0]), int(&a[1]))),
        "slice" => one(x.slice(int(&a[0]), a[1].as_i64(), a[2].as_i64(), int(&a[3]))),
        "chunk" => x.chunk(int(&a[0]), int(&a[1])),
        "split" => x.split(int(&a[0]), int(&a[1])),
        "repeat" => one(x.repeat(&ints(&a[0]))),
        "tile" => one(x.tile(&ints(&a[0]))),
        "flip" => one(x.flip(&ints(&a[0]))),
        "squeeze_dims" => one(x.squeeze_dims(&ints(&a[0]))),
        "unsqueeze" => one(x.unsqueeze(int(&a[0]))),
        "transpose" => one(x.transpose(int(&a[0]), int(&a[1]))),
        "flatten" => one(x.flatten(int(&a[0]), int(&a[1]))),
        other => panic!("the generator wrote an op this test does not know: {other}"),
    }
}

fn view_ops_on(device: Device) {
    assert_all_agree(&FIXTURE, 19_000, Match::Exact, |c| {
        let shape = ints(&c["shape"]);
        let n: i64 = shape.iter().product();
        let x = Tensor::arange(0, n, 1, Some(DType::F32), device)
            .and_then(|t| t.reshape(&shape))
            .unwrap();
        call(c["op"].as_str().unwrap(), &x, c["args"].as_array().unwrap())
    });
}

#[test]
fn view_ops_take_hostile_integers_as_pytorch() {
    view_ops_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn view_ops_take_hostile_integers_as_pytorch_on_a_gpu() {
    view_ops_on(gpu());
}
