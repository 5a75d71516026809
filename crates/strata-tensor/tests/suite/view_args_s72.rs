//! Session 72: shape and view ops with hostile integer arguments against
//! PyTorch 2.15 (`benches/anchors/gen_view_args_s72.py`, which says what it
//! draws and what it leaves out): strata must fail where PyTorch fails and
//! otherwise give PyTorch's shapes and values. The probe found one
//! difference, fixed: `roll` of an empty tensor checked its dims, PyTorch
//! returns a copy first.

use crate::pytorch_fixture::{fixture, gunzip, ints};
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::{DType, Device, Result, Tensor};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/view_args_s72.json.gz"))));

fn int(v: &Value) -> i64 {
    v.as_i64().expect("an integer argument")
}

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

/// Where strata's answer to one case differs from PyTorch's, or `None`.
fn difference(c: &Value) -> Option<String> {
    let shape = ints(&c["shape"]);
    let n: i64 = shape.iter().product();
    let x = Tensor::arange(0, n, 1, Some(DType::F32), Device::Cpu)
        .and_then(|t| t.reshape(&shape))
        .unwrap();
    let got = call(c["op"].as_str().unwrap(), &x, c["args"].as_array().unwrap());
    match (got, c.get("error")) {
        (Err(_), Some(_)) => None,
        (Ok(ts), Some(e)) => Some(format!(
            "strata gave shapes {:?}, PyTorch failed: {e}",
            ts.iter().map(|t| t.shape().to_vec()).collect::<Vec<_>>()
        )),
        (Err(e), None) => Some(format!("strata failed ({e}), PyTorch did not")),
        (Ok(ts), None) => {
            let want = c["results"].as_array().unwrap();
            if ts.len() != want.len() {
                return Some(format!("{} results, PyTorch {}", ts.len(), want.len()));
            }
            for (k, (t, w)) in ts.iter().zip(want).enumerate() {
                let ws: Vec<usize> = ints(&w["shape"]).iter().map(|&s| s as usize).collect();
                let wd: Vec<f32> = (w["data"].as_array().unwrap().iter())
                    .map(|v| v.as_f64().unwrap() as f32)
                    .collect();
                let gd = t.contiguous().and_then(|t| t.to_vec::<f32>()).unwrap();
                if t.shape() != ws.as_slice() || gd != wd {
                    return Some(format!(
                        "result {k}: shape {:?} values {gd:?}, PyTorch {ws:?} {wd:?}",
                        t.shape()
                    ));
                }
            }
            None
        }
    }
}

#[test]
fn view_ops_take_hostile_integers_as_pytorch() {
    let cases = FIXTURE["cases"].as_array().unwrap();
    assert!(
        cases.len() > 19_000,
        "the fixture holds {} cases",
        cases.len()
    );
    let bad: Vec<String> = cases
        .iter()
        .filter_map(|c| {
            difference(c).map(|why| format!("{} {} {}: {why}", c["op"], c["shape"], c["args"]))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {} cases differ from PyTorch, e.g.:\n{}",
        bad.len(),
        cases.len(),
        bad[..bad.len().min(10)].join("\n")
    );
}
