//! Session 53 (helper-86): hostile layouts for the session's CPU changes
//! (maximum/minimum laying their output out in PyTorch's dim order,
//! `to_dtype_keeping_dense_layout` (since session 59 `to_dtype` itself) for
//! operands of another dtype,
//! `pytorch_dim_order`, the p=2 vector_norm kernels), against PyTorch 2.15
//! (`tests/data/hostile_tensor_s53b.json.gz`, written by
//! `benches/anchors/gen_hostile_tensor_s53b.py 600 5303`): operands made by
//! `as_strided` of a 1-d base — expanded (stride 0), overlapping,
//! transposed, offset, 0-d, empty with sizes of 2^40 beside the 0, views of
//! one base (aliasing inputs) — in every dtype, int and bool mixed with
//! float. Each case must give PyTorch's error or its shape, dtype and
//! values bit for bit (NaN payloads aside); nothing may panic.

use crate::pytorch_fixture::gunzip;
use serde_json::Value;
use std::sync::LazyLock;
use strata_tensor::{DType, Device, Tensor};

static FIXTURE: LazyLock<String> =
    LazyLock::new(|| gunzip(include_bytes!("../data/hostile_tensor_s53b.json.gz")));

fn dtype(name: &str) -> DType {
    match name {
        "f32" => DType::F32,
        "f64" => DType::F64,
        "f16" => DType::F16,
        "bf16" => DType::BF16,
        "i32" => DType::I32,
        "i64" => DType::I64,
        "u8" => DType::U8,
        "bool" => DType::Bool,
        other => panic!("unknown dtype {other}"),
    }
}

fn num(v: &Value) -> f64 {
    match v {
        Value::String(s) => s.parse::<f64>().unwrap(),
        v => v.as_f64().unwrap(),
    }
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

fn base(op: &Value) -> Tensor {
    let vals: Vec<f64> = op["base"].as_array().unwrap().iter().map(num).collect();
    Tensor::from_slice(&vals, &[vals.len()], Device::Cpu)
        .unwrap()
        .to_dtype(dtype(op["dtype"].as_str().unwrap()))
        .unwrap()
}

fn view(b: &Tensor, op: &Value) -> strata_tensor::Result<Tensor> {
    b.as_strided(
        &ints(&op["size"]),
        &ints(&op["stride"]),
        Some(op["offset"].as_i64().unwrap()),
    )
}

fn check(i: usize, case: &Value, got: strata_tensor::Result<Tensor>, bad: &mut Vec<String>) {
    let what = format!("case {i} ({})", case["op"]);
    match (got, case.get("error")) {
        (Err(_), Some(_)) => {}
        // PyTorch failed only to allocate an empty output of huge logical
        // size: strata may give it or refuse it with a typed error.
        (Err(_), None) if case.get("alloc_failure").is_some() => {}
        (Err(e), None) => bad.push(format!("{what}: strata errs ({e}), PyTorch does not")),
        (Ok(t), Some(e)) => bad.push(format!(
            "{what}: PyTorch raises {e}, strata gives {:?}",
            t.shape()
        )),
        (Ok(t), None) => {
            let shape: Vec<usize> = ints(&case["shape"]).iter().map(|&s| s as usize).collect();
            if t.shape() != &shape[..] {
                bad.push(format!("{what}: shape {:?} vs {shape:?}", t.shape()));
                return;
            }
            if t.dtype() != dtype(case["dtype"].as_str().unwrap()) {
                bad.push(format!("{what}: dtype {} vs {}", t.dtype(), case["dtype"]));
                return;
            }
            let want: Vec<u64> = case["out"]
                .as_str()
                .unwrap()
                .as_bytes()
                .chunks(16)
                .map(|c| u64::from_str_radix(std::str::from_utf8(c).unwrap(), 16).unwrap())
                .collect();
            let got = t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();
            assert_eq!(got.len(), want.len(), "{what}: element count");
            for (k, (&g, &w)) in got.iter().zip(&want).enumerate() {
                let w = f64::from_bits(w);
                if g.to_bits() != w.to_bits() && !(g.is_nan() && w.is_nan()) {
                    bad.push(format!("{what}: [{k}] {g:e} vs {w:e}"));
                    return;
                }
            }
        }
    }
}

#[test]
fn hostile_layouts_of_maximum_minimum_and_vector_norm_match_pytorch() {
    let fx: Value = serde_json::from_str(&FIXTURE).unwrap();
    let mut bad = Vec::new();
    let cases = fx["cases"].as_array().unwrap();
    for (i, case) in cases.iter().enumerate() {
        let op = case["op"].as_str().unwrap();
        let a_base = base(&case["a"]);
        let got = if op == "vector_norm" {
            let dims = case["dims"]
                .as_array()
                .map(|d| d.iter().map(|x| x.as_i64().unwrap()).collect::<Vec<_>>());
            view(&a_base, &case["a"]).and_then(|a| {
                a.vector_norm(2.0, dims.as_deref(), case["keepdim"].as_bool().unwrap())
            })
        } else {
            let b_base = if case["same_base"].as_bool().unwrap() {
                a_base.clone()
            } else {
                base(&case["b"])
            };
            view(&a_base, &case["a"]).and_then(|a| {
                let b = view(&b_base, &case["b"])?;
                if op == "maximum" {
                    a.maximum(&b)
                } else {
                    a.minimum(&b)
                }
            })
        };
        check(i, case, got, &mut bad);
    }
    assert!(
        bad.is_empty(),
        "{} of {} cases differ:\n{}",
        bad.len(),
        cases.len(),
        bad.join("\n")
    );
}

/// A few hand-made extremes beside the random ones: results that alias
/// nothing they read, empty outputs of huge logical size, and 0-d operands
/// of another dtype.
#[test]
fn hand_made_hostile_extremes() {
    let huge = 1i64 << 40;
    let e = Tensor::from_slice(&[1.0f32], &[1], Device::Cpu).unwrap();
    // [0, 2^40] against a [1, 2^40] expanded operand: PyTorch 2.15 gives
    // an empty f32 [0, 2^40]. With a bf16 operand both convert it to f32
    // first (2^40 elements: PyTorch fails to allocate 4 TiB, strata's
    // allocator answers a typed out-of-memory error).
    let a2 = e.as_strided(&[0, huge], &[1, 0], Some(0)).unwrap();
    let b2 = e.as_strided(&[1, huge], &[0, 0], Some(0)).unwrap();
    for r in [a2.maximum(&b2).unwrap(), b2.minimum(&a2).unwrap()] {
        assert_eq!(r.shape(), &[0, 1 << 40]);
        assert_eq!(r.dtype(), DType::F32);
        assert_eq!(r.numel(), 0);
    }
    let b2h = e
        .to_dtype(DType::BF16)
        .unwrap()
        .as_strided(&[1, huge], &[0, 0], Some(0))
        .unwrap();
    assert!(a2.maximum(&b2h).is_err());
    // [0, 2^40, 2^40]: PyTorch 2.15 fails (it asks for 4 TiB for the empty
    // output; `torch.empty(0, 2**40, 2**40)` is "Stride calculation
    // overflowed"); strata's typed SizeOverflow, never a panic.
    let a = e.as_strided(&[0, huge, huge], &[1, 0, 0], Some(0)).unwrap();
    let b = e
        .to_dtype(DType::BF16)
        .unwrap()
        .as_strided(&[1, huge, 1], &[0, 0, 0], Some(0))
        .unwrap();
    assert!(a.maximum(&b).is_err());
    assert!(b.minimum(&a).is_err());
    // PyTorch 2.15: "Storage size calculation overflowed" (2^80 elements).
    assert!(a.vector_norm(2.0, Some(&[0]), false).is_err());
    // Reducing a huge dim of an empty tensor: an empty [0, 2^40] result;
    // over everything of an empty f16 one, 0 (PyTorch 2.15 for both; before
    // the fix strata's f32 widening of the input overflowed its strides).
    let n = a.vector_norm(2.0, Some(&[1]), false).unwrap();
    assert_eq!(n.shape(), &[0, 1 << 40]);
    let ah = e
        .to_dtype(DType::F16)
        .unwrap()
        .as_strided(&[0, huge, huge], &[1, 0, 0], Some(0))
        .unwrap();
    for keep in [false, true] {
        let n = ah.vector_norm(2.0, None, keep).unwrap();
        assert_eq!(n.dtype(), DType::F16);
        assert_eq!(n.to_vec::<half::f16>().unwrap()[0].to_bits(), 0);
        assert_eq!(n.shape(), if keep { &[1usize, 1, 1][..] } else { &[][..] });
    }
    // A 0-d u8 operand against an f16 tensor: f16 result.
    let h = Tensor::from_slice(
        &[half::f16::from_f32(-0.0), half::f16::from_f32(3.0)],
        &[2],
        Device::Cpu,
    )
    .unwrap();
    let z = Tensor::from_slice(&[0u8], &[], Device::Cpu).unwrap();
    // PyTorch 2.15: [-0.0, 3.0] (two elements run its scalar loop, which
    // keeps the first operand of a tie).
    let r = h.maximum(&z).unwrap();
    assert_eq!(r.dtype(), DType::F16);
    let v: Vec<u16> = r
        .to_vec::<half::f16>()
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect();
    assert_eq!(v, [0x8000, 0x4200]);
    // maximum of a tensor and a transposed view of itself.
    let s = Tensor::from_slice(&[0.0f32, -0.0, 1.0, f32::NAN], &[2, 2], Device::Cpu).unwrap();
    let r = s.maximum(&s.t().unwrap()).unwrap();
    // PyTorch 2.15: [[0.0, 1.0], [1.0, nan]].
    let v = r.to_vec::<f32>().unwrap();
    assert_eq!(r.shape(), &[2, 2]);
    assert_eq!(
        v[..3].iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        [0, 0x3f80_0000, 0x3f80_0000]
    );
    assert!(v[3].is_nan());
}
