//! Session 73: contractions and products with hostile equations, dims and
//! shapes against PyTorch 2.15 (`benches/anchors/gen_contract_args_s73.py`,
//! which says what it draws and what it leaves out): strata must fail where
//! PyTorch fails and otherwise give PyTorch's shapes and values (within f32
//! rounding), on the CPU and (ignored unless `--include-ignored`) on
//! `cuda:0`. The probe found one defect, fixed: `tensordot` of a 0-d operand
//! with a dim list naming dim 0 or -1 indexed past its empty shape and
//! panicked (PyTorch: "Dimension specified as 0 but tensor has no
//! dimensions").

use crate::hostile_calls::{assert_all_agree, gpu, pattern, Match};
use crate::pytorch_fixture::{fixture, gunzip, ints};
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::{Device, LerpWeight, Result, Tensor, TensordotDims};

static FIXTURE: LazyLock<Value> =
    LazyLock::new(|| fixture(&gunzip(include_bytes!("../data/contract_args_s73.json.gz"))));

fn float(v: &Value) -> f64 {
    v.as_f64().expect("a float argument")
}

/// The generator's values from `start` of the shape `shape` (a list of
/// sizes).
fn values(shape: &Value, start: i64, device: Device) -> Tensor {
    pattern(&ints(shape), start, device)
}

fn call(op: &str, a: &[Value], dev: Device) -> Result<Tensor> {
    // The operands of the ops but einsum and tensordot: the arguments that
    // are shapes, numbered from 0.
    let operands = || -> Vec<Tensor> {
        (a.iter().filter(|v| v.is_array()).enumerate())
            .map(|(k, s)| values(s, k as i64, dev))
            .collect()
    };
    match op {
        "einsum" => {
            let shapes = a[1].as_array().unwrap();
            let ops: Vec<Tensor> = (shapes.iter().enumerate())
                .map(|(k, s)| values(s, k as i64, dev))
                .collect();
            let refs: Vec<&Tensor> = ops.iter().collect();
            Tensor::einsum(a[0].as_str().unwrap(), &refs)
        }
        "tensordot" => {
            let (x, y) = (values(&a[0], 0, dev), values(&a[1], 1, dev));
            match a[2].as_i64() {
                Some(n) => x.tensordot(&y, TensordotDims::Count(n)),
                None => {
                    let (da, db) = (ints(&a[2][0]), ints(&a[2][1]));
                    x.tensordot(&y, TensordotDims::Pairs(&da, &db))
                }
            }
        }
        _ => products(op, &operands(), a),
    }
}

fn products(op: &str, ts: &[Tensor], a: &[Value]) -> Result<Tensor> {
    match op {
        "mm" => ts[0].mm(&ts[1]),
        "bmm" => ts[0].bmm(&ts[1]),
        "matmul" => ts[0].matmul(&ts[1]),
        "kron" => ts[0].kron(&ts[1]),
        "outer" => ts[0].outer(&ts[1]),
        "inner" => ts[0].inner(&ts[1]),
        "trace" => ts[0].trace(),
        "addmm" => ts[0].addmm(&ts[1], &ts[2]),
        "addmv" => ts[0].addmv(&ts[1], &ts[2], float(&a[3]), float(&a[4])),
        "addr" => ts[0].addr(&ts[1], &ts[2], float(&a[3]), float(&a[4])),
        "baddbmm" => ts[0].baddbmm(&ts[1], &ts[2], float(&a[3]), float(&a[4])),
        "addbmm" => ts[0].addbmm(&ts[1], &ts[2], float(&a[3]), float(&a[4])),
        "cross" => ts[0].cross(&ts[1], a[2].as_i64().unwrap()),
        "lerp" => match a[2].as_f64() {
            Some(w) => ts[0].lerp(&ts[1], LerpWeight::Scalar(w.into())),
            None => ts[0].lerp(&ts[1], LerpWeight::Tensor(&ts[2])),
        },
        other => panic!("the generator wrote an op this test does not know: {other}"),
    }
}

fn contractions_on(device: Device) {
    assert_all_agree(&FIXTURE, 15_000, Match::Relative(1e-5), |c| {
        call(
            c["op"].as_str().unwrap(),
            c["args"].as_array().unwrap(),
            device,
        )
        .map(|t| vec![t])
    });
}

#[test]
fn contractions_take_hostile_arguments_as_pytorch() {
    contractions_on(Device::Cpu);
}

#[test]
#[ignore = "needs a CUDA GPU; run with --include-ignored on a GPU machine"]
fn contractions_take_hostile_arguments_as_pytorch_on_a_gpu() {
    contractions_on(gpu());
}
