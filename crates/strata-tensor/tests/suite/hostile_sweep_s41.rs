//! Session 41's sweep of hostile inputs to strata-tensor (after
//! `hostile_sweep_s40.rs`). Each assertion states what PyTorch 2.15 (CPU)
//! gives for the same call, checked there and noted beside it.
//!
//! Defects these tests found (fixed with them):
//!
//! * Scalars on the left of `-` and `/` (`ops/overloads.rs`): `s - t` made
//!   a 0-d tensor of the scalar with a checked conversion, so `300 - u8`,
//!   `2^40 - i32` and `1e39 - f32` were value errors naming `fill_` where
//!   PyTorch's `rsub` converts the scalar unchecked (43, -1, inf), and a
//!   bool scalar became a number (`true - [1.0]` was `[0.0]`; PyTorch
//!   refuses a bool operand of subtraction). `s / t` was a true division,
//!   where Python's `s / t` is `t.reciprocal() * s`: `3.0 / [7.0]` differed
//!   in the last bit, `1e6 / f16[1e4]` was inf (PyTorch: 100) and
//!   `300 / u8[3]` an error (PyTorch: 100.0).
//! * `cumsum` of f32 on the CPU kept its running sum in f32; PyTorch's CPU
//!   kernel keeps it in f64 (`acc_type<float, false>`), so
//!   `[2^24, 1, 1, 1]` was `[2^24, 2^24, 2^24, 2^24]` (PyTorch: `[2^24,
//!   2^24, 2^24 + 2, 2^24 + 4]`), ten 0.1s summed to 1.0000001 (PyTorch:
//!   1.0) and `[3e38, 3e38, -3e38]` stayed inf after the overflow (PyTorch:
//!   `[3e38, inf, 3e38]`). The GPU kernel is left summing in f32, as
//!   PyTorch's CUDA kernel does.
//!
//! Examined and left:
//!
//! * `arange` of i64 bounds whose difference passes `i64`
//!   (`arange(-(2^63 - 1), 2^63 - 1, 2^63 - 1)`, `arange(i64::MIN,
//!   i64::MAX, i64::MAX)`): PyTorch returns an empty tensor, its length
//!   `(end - start + step - 1) / step` computed in an `int64_t` that
//!   overflows; strata gives the mathematically right values (`[-(2^63 -
//!   1), 0]`, `[i64::MIN, -1, 2^63 - 2]`).
//! * f32 sums of more than 2^15 elements (`sum`, `mean`, `mse_loss`'s
//!   mean) can differ from PyTorch in the last bits, but PyTorch's own
//!   answer there depends on its thread count (a 70000-element sum of
//!   squares is `0x53cea5ea` with 1 or 2 threads, `0x53cea5ec`, strata's,
//!   with 4).
//! * `i64::MIN.div_mode(-1, ..)` wraps to `i64::MIN`; PyTorch's CPU kernel
//!   dies with SIGFPE there, so there is no answer to follow.
//! * Further calls that already gave PyTorch's answer: views and joins of
//!   0-d and empty tensors, index and masked ops with negative, empty and
//!   0-d indices, losses and `layer_norm` at their edges, integer and
//!   half-precision overflow in the element-wise ops, `Display` of bool and
//!   integer tensors; the last test here is one of them.

use strata_tensor::{DType, Device, Scalar, Tensor, TensorError};

const CPU: Device = Device::Cpu;

fn t<T: strata_tensor::Element>(v: &[T]) -> Tensor {
    Tensor::from_slice(v, &[v.len()], CPU).unwrap()
}

fn f32s(x: &Tensor) -> Vec<f32> {
    x.to_vec_as::<f32>().unwrap()
}

// ------------------------------------------------- scalars on the left

/// Python's `s - t` is `torch.rsub(t, s)`: the scalar is wrapped as a 0-d
/// tensor and converted to the common dtype as any operand is, unchecked
/// (an int wraps into an integer dtype, a float beyond f32 is inf), while a
/// bool scalar is a bool operand, which subtraction refuses.
///
/// ```python
/// 300 - torch.tensor([1], dtype=torch.uint8)       # tensor([43], dtype=torch.uint8)
/// 2**40 - torch.tensor([1], dtype=torch.int32)     # tensor([-1], dtype=torch.int32)
/// 1e39 - torch.tensor([1.])                        # tensor([inf])
/// 70000 - torch.tensor([1.]).half()                # tensor([inf], dtype=torch.float16)
/// True - torch.tensor([1.])
/// # RuntimeError: Subtraction, the `-` operator, with a bool tensor is not supported. ...
/// ```
#[test]
fn scalar_minus_tensor_converts_the_scalar_as_pytorchs_rsub() {
    let r = (300 - &t(&[1u8])).unwrap();
    assert_eq!(r.dtype(), DType::U8);
    assert_eq!(r.to_vec::<u8>().unwrap(), [43]);
    let r = ((1i64 << 40) - t(&[1i32])).unwrap();
    assert_eq!(r.dtype(), DType::I32);
    assert_eq!(r.to_vec::<i32>().unwrap(), [-1]);
    let r = (1e39 - &t(&[1.0f32])).unwrap();
    assert_eq!(r.dtype(), DType::F32);
    assert_eq!(r.to_vec::<f32>().unwrap(), [f32::INFINITY]);
    let h = t(&[1.0f32, 2.0]).to_dtype(DType::F16).unwrap();
    let r = (70000 - &h).unwrap();
    assert_eq!(r.dtype(), DType::F16);
    assert_eq!(f32s(&r), [f32::INFINITY, f32::INFINITY]);

    // A bool scalar on the left is a bool operand: refused, as `t - true` is.
    let x = t(&[1.0f32]);
    for e in [
        (true - &x).unwrap_err(),
        (Scalar::Bool(false) - x.clone()).unwrap_err(),
        x.sub(true).unwrap_err(),
    ] {
        match e {
            TensorError::DType { op, msg } => {
                assert_eq!(op, "sub");
                assert!(msg.contains("bool"), "{msg}");
            }
            e => panic!("expected a dtype error, got {e:?}"),
        }
    }
    assert_eq!(x.to_vec::<f32>().unwrap(), [1.0]);
}

/// Python's `s / t` is `t.reciprocal() * s` (`Tensor.__rdiv__`), not a true
/// division: the reciprocal is rounded to t's dtype (f32 for an integer or
/// bool t) before the product, which takes the scalar at the computation
/// precision (f32 for f16), so an f16 quotient that fits is not inf.
///
/// ```python
/// (3.0 / torch.tensor([7.])).view(torch.int32)          # 0x3edb6db8 (3/7 is 0x3edb6db7)
/// 3 / torch.tensor([7])                                 # tensor([0.4286]): 0.4285714626312256
/// 1e6 / torch.tensor([1e4]).half()                      # tensor([100.], dtype=torch.float16)
/// 300 / torch.tensor([3], dtype=torch.uint8)            # tensor([100.])
/// 1e39 / torch.tensor([1e10])                           # tensor([inf])
/// 0 / torch.tensor([0])                                 # tensor([nan])
/// ```
#[test]
fn scalar_over_tensor_is_pytorchs_reciprocal_times_the_scalar() {
    let r = (3.0 / &t(&[7.0f32])).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap()[0].to_bits(), 0x3edb_6db8);
    let r = (3 / t(&[7i64])).unwrap();
    assert_eq!(r.dtype(), DType::F32);
    assert_eq!(r.to_vec::<f32>().unwrap(), [0.428_571_46_f32]);
    assert_ne!(0.428_571_46_f32, 3.0f32 / 7.0);
    let h = t(&[1e4f32]).to_dtype(DType::F16).unwrap();
    let r = (1e6 / &h).unwrap();
    assert_eq!(r.dtype(), DType::F16);
    assert_eq!(f32s(&r), [100.0]);
    let r = (300 / &t(&[3u8])).unwrap();
    assert_eq!(r.dtype(), DType::F32);
    assert_eq!(r.to_vec::<f32>().unwrap(), [100.0]);
    let r = (1e39 / &t(&[1e10f32])).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), [f32::INFINITY]);
    let r = (0 / &t(&[0i64])).unwrap();
    assert!(r.to_vec::<f32>().unwrap()[0].is_nan());
}

// ------------------------------------------------------------------ cumsum

/// PyTorch's CPU cumsum keeps its running sum in `acc_type<float, false>`,
/// which is double: an f32 cumsum rounds each output from an f64 sum, so
/// ones added to 2^24 are not lost and a sum that passes f32's range and
/// comes back is finite again.
///
/// ```python
/// torch.tensor([16777216., 1., 1., 1.]).cumsum(0)
/// # tensor([16777216., 16777216., 16777218., 16777220.])
/// torch.tensor([3e38, 3e38, -3e38]).cumsum(0)      # tensor([3.0000e+38, inf, 3.0000e+38])
/// torch.tensor([0.1] * 10).cumsum(0)[-1].item()    # 1.0 (in f32 steps: 1.0000001192092896)
/// torch.tensor([16777216., 0, 1, 0, 1, 0]).reshape(3, 2).cumsum(0)
/// # tensor([[16777216., 0.], [16777216., 0.], [16777218., 0.]])
/// torch.tensor([16777216, 1, 1]).cumsum(0, dtype=torch.float32)
/// # tensor([16777216., 16777216., 16777218.])
/// ```
#[test]
fn f32_cumsum_accumulates_in_f64_as_pytorchs_cpu_kernel() {
    let r = t(&[16_777_216.0f32, 1.0, 1.0, 1.0])
        .cumsum(0, None)
        .unwrap();
    assert_eq!(
        r.to_vec::<f32>().unwrap(),
        [16_777_216.0, 16_777_216.0, 16_777_218.0, 16_777_220.0]
    );
    let r = t(&[3e38f32, 3e38, -3e38]).cumsum(-1, None).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), [3e38, f32::INFINITY, 3e38]);
    let r = t(&[0.1f32; 10]).cumsum(0, None).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap()[9], 1.0);
    // Along a dim that is not the last (the column loop).
    let x = t(&[16_777_216.0f32, 0.0, 1.0, 0.0, 1.0, 0.0])
        .reshape(&[3, 2])
        .unwrap();
    let r = x.cumsum(0, None).unwrap();
    assert_eq!(
        r.to_vec::<f32>().unwrap(),
        [16_777_216.0, 0.0, 16_777_216.0, 0.0, 16_777_218.0, 0.0]
    );
    // An integer input summed as f32.
    let r = t(&[16_777_216i64, 1, 1])
        .cumsum(0, Some(DType::F32))
        .unwrap();
    assert_eq!(
        r.to_vec::<f32>().unwrap(),
        [16_777_216.0, 16_777_216.0, 16_777_218.0]
    );
}

// ------------------------------------------ already PyTorch's (new ground)

/// A scalar base to integer tensor exponents (no earlier sweep names it):
/// negative exponents give PyTorch's truncated `1 / base^n` (0, except for
/// bases 1 and -1, and 0 for a base of 0 rather than a division by zero),
/// powers past the dtype wrap, and an int base is converted to the tensor's
/// dtype first.
///
/// ```python
/// torch.pow(2, torch.tensor([-1, 0, 62, 63, 64]))
/// # tensor([0, 1, 4611686018427387904, -9223372036854775808, 0])
/// torch.pow(0, torch.tensor([-1, 0, 1]))            # tensor([0, 1, 0])
/// torch.pow(-1, torch.tensor([-3, -2]))             # tensor([-1,  1])
/// torch.pow(300, torch.tensor([1], dtype=torch.uint8))  # tensor([44], dtype=torch.uint8)
/// torch.pow(2, torch.tensor([9], dtype=torch.uint8))    # tensor([0], dtype=torch.uint8)
/// ```
#[test]
fn integer_scalar_pow_with_negative_and_wrapping_exponents() {
    let r = Tensor::scalar_pow(2, &t(&[-1i64, 0, 62, 63, 64])).unwrap();
    assert_eq!(r.dtype(), DType::I64);
    assert_eq!(r.to_vec::<i64>().unwrap(), [0, 1, 1 << 62, i64::MIN, 0]);
    let r = Tensor::scalar_pow(0, &t(&[-1i64, 0, 1])).unwrap();
    assert_eq!(r.to_vec::<i64>().unwrap(), [0, 1, 0]);
    let r = Tensor::scalar_pow(-1, &t(&[-3i64, -2])).unwrap();
    assert_eq!(r.to_vec::<i64>().unwrap(), [-1, 1]);
    let r = Tensor::scalar_pow(300, &t(&[1u8])).unwrap();
    assert_eq!(r.dtype(), DType::U8);
    assert_eq!(r.to_vec::<u8>().unwrap(), [44]);
    let r = Tensor::scalar_pow(2, &t(&[9u8])).unwrap();
    assert_eq!(r.to_vec::<u8>().unwrap(), [0]);
}
