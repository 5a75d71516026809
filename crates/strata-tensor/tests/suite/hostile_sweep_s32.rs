//! Session 32's sweep of hostile inputs to strata-tensor (after
//! `hostile_sweep_s31.rs`). Each assertion states what PyTorch 2.15 (CPU)
//! gives for the same call, checked there and noted beside it.
//!
//! Defects these tests found (fixed with them):
//!
//! * `pow` / `pow_` with a scalar exponent that the computation dtype cannot
//!   hold ran with the exponent converted unchecked: an i32 tensor to the
//!   power 2^40 wrapped the exponent to 0 (`[4].pow(2^40)` was `[1]`), to
//!   `i64::MAX` to -1 (`[2]` gave 0), a u8 tensor to the power 256 used 0,
//!   and an f16/bf16 tensor took 70000 / 1e39 as inf. PyTorch's kernel
//!   converts the exponent with `checked_convert` ("value cannot be
//!   converted to type int without overflow"), after the in-place checks
//!   and even for an empty tensor; strata now returns the same
//!   `TensorError::Value` and leaves an in-place output unchanged.

use strata_tensor::{DType, Device, Scalar, Tensor, TensorError};

const CPU: Device = Device::Cpu;

fn value_err(r: Result<Tensor, TensorError>) -> String {
    match r {
        Err(e @ TensorError::Value { .. }) => e.to_string(),
        other => panic!("expected a value error, got {other:?}"),
    }
}

fn t<T: strata_tensor::Element>(v: &[T]) -> Tensor {
    Tensor::from_slice(v, &[v.len()], CPU).unwrap()
}

// ---------------------------------------------------------------------- pow

#[test]
fn pow_refuses_a_scalar_exponent_its_dtype_cannot_hold() {
    // torch.tensor([4], dtype=torch.int32).pow(2**40): "value cannot be
    // converted to type int without overflow" (not 4^0 = 1).
    let cases: Vec<(Tensor, Scalar, &str)> = vec![
        (t(&[4i32]), Scalar::Int(1 << 40), "int"),
        (t(&[1i32]), Scalar::Int(1 << 31), "int"),
        (t(&[2i32]), Scalar::Int(i64::MAX), "int"),
        (t(&[-1i32]), Scalar::Int((1 << 40) + 1), "int"),
        (t(&[1u8]), Scalar::Int(256), "uint8"),
        (t(&[1u8]), Scalar::Int(1 << 62), "uint8"),
        // f16: anything beyond 65504 (65519 too, though it rounds to
        // 65504), from an int or a float; bf16 beyond 3.3895313892515355e38.
        (
            t(&[4.0f32]).to_dtype(DType::F16).unwrap(),
            Scalar::Int(100_000),
            "float16",
        ),
        (
            t(&[4.0f32]).to_dtype(DType::F16).unwrap(),
            Scalar::Float(65519.0),
            "float16",
        ),
        (
            t(&[4.0f32]).to_dtype(DType::F16).unwrap(),
            Scalar::Float(-70000.0),
            "float16",
        ),
        (
            t(&[4.0f32]).to_dtype(DType::BF16).unwrap(),
            Scalar::Float(3.39e38),
            "bfloat16",
        ),
        // Empty: PyTorch converts the exponent all the same
        // (torch.zeros(0, dtype=torch.int32).pow(2**40) is the same error).
        (
            Tensor::zeros(&[0], DType::I32, CPU).unwrap(),
            Scalar::Int(1 << 40),
            "int",
        ),
        // 0-d.
        (
            Tensor::scalar(2i64, DType::I32, CPU).unwrap(),
            Scalar::Int(1 << 40),
            "int",
        ),
    ];
    for (x, e, ty) in cases {
        let before = x.to_scalars().unwrap();
        let msg = value_err(x.pow(e));
        assert!(
            msg.contains("without overflow") && msg.contains(ty) && msg.contains("pow"),
            "{} ^ {e}: {msg}",
            x.dtype()
        );
        let msg = value_err(x.pow_(e));
        assert!(msg.contains("pow_"), "{} ^ {e} in place: {msg}", x.dtype());
        assert_eq!(x.to_scalars().unwrap(), before, "pow_ changed its output");
    }
}

#[test]
fn pow_takes_every_exponent_its_dtype_holds() {
    // The ends of each range still run (PyTorch):
    // int32 [1].pow(2**31 - 1) = [1]; uint8 [1].pow(255) = [1];
    // int64 [1].pow(2**63 - 1) = [1]; int32 [-1].pow(2**31 - 1) = [-1].
    assert_eq!(
        t(&[1i32, -1])
            .pow(i32::MAX as i64)
            .unwrap()
            .to_vec::<i32>()
            .unwrap(),
        vec![1, -1]
    );
    assert_eq!(
        t(&[1u8]).pow(255i64).unwrap().to_vec::<u8>().unwrap(),
        vec![1]
    );
    assert_eq!(
        t(&[1i64]).pow(i64::MAX).unwrap().to_vec::<i64>().unwrap(),
        vec![1]
    );
    // f16 max 65504 and bf16 max are in range (1^max = 1, 4^max = inf);
    // infinities and NaN pass (float16 [1].pow(-inf) = [1], [4].pow(nan) = [nan]).
    let h = t(&[1.0f32, 4.0]).to_dtype(DType::F16).unwrap();
    let got = |e: f64| {
        h.pow(e)
            .unwrap()
            .to_dtype(DType::F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
    };
    assert_eq!(got(65504.0), vec![1.0, f32::INFINITY]);
    assert_eq!(got(f64::NEG_INFINITY), vec![1.0, 0.0]);
    let n = got(f64::NAN);
    assert!(n[0] == 1.0 && n[1].is_nan(), "{n:?}");
    let bf = t(&[1.0f32]).to_dtype(DType::BF16).unwrap();
    assert_eq!(
        bf.pow(3.3895313892515355e38)
            .unwrap()
            .to_dtype(DType::F32)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        vec![1.0]
    );
    // f32 and f64 take any exponent (torch.tensor([4.]).pow(1e39) = [inf]:
    // their kernels convert it unchecked); a float exponent promotes an
    // integer tensor to f32 (int32 [1].pow(2.0**40) = [1.]).
    assert_eq!(
        t(&[4.0f32, 1.0])
            .pow(1e39)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        vec![f32::INFINITY, 1.0]
    );
    let r = t(&[1i32]).pow(2f64.powi(40)).unwrap();
    assert_eq!(
        (r.dtype(), r.to_vec::<f32>().unwrap()),
        (DType::F32, vec![1.0])
    );
    // A bool tensor to an int power computes in i64 (torch.tensor([True])
    // .pow(2**40) = tensor([1])).
    let r = t(&[true]).pow(1i64 << 40).unwrap();
    assert_eq!(
        (r.dtype(), r.to_vec::<i64>().unwrap()),
        (DType::I64, vec![1])
    );
}

#[test]
fn pow_checks_overlap_and_negative_exponents_before_the_exponents_range() {
    // PyTorch's order: the negative-integer check (meta function), the
    // output's memory overlap (TensorIterator), then the kernel's
    // conversion of the exponent.
    let x = t(&[2i32]);
    let msg = value_err(x.pow(-(1i64 << 40)));
    assert!(msg.contains("negative integer powers"), "{msg}");
    let e = x.expand(&[3]).unwrap();
    assert!(
        matches!(e.pow_(1i64 << 40), Err(TensorError::Overlap { .. })),
        "expanded pow_"
    );
}
