//! Session 57's sweep of hostile inputs to strata-tensor (after
//! `hostile_sweep_s54c.rs` and `interop_hostile_s56.rs`): empty tensors whose
//! other dims are near i64::MAX, through the joins and the readers, checked
//! against PyTorch 2.15 CPU.
//!
//! Defects these tests found (fixed with them):
//!
//! * `stack` and `cat` of empty tensors refused inputs PyTorch joins: an
//!   empty output's contiguous strides may be huge (`[3, 0, 2^62]` has
//!   strides `[2^62, 2^62, 1]`), and `cat` took a `narrow` view of the
//!   output for every input with a non-zero length along the dim, even one
//!   with no elements; the view of the third input started at `2 * 2^62`,
//!   beyond i64::MAX, and the join failed with that internal `narrow` error.
//!   `torch.stack([torch.zeros(0, 2**62)] * 3)` and
//!   `torch.cat([torch.zeros(2, 0, 2**62)] * 3)` return empty tensors of
//!   shapes `[3, 0, 2^62]` and `[6, 0, 2^62]`; strata now does too (an input
//!   with no elements has nothing to copy).
//! * `to_vec_as` of an empty tensor whose shape has no contiguous strides
//!   below i64::MAX (`[5, 3, 0, 2^62]`, expanded from `[3, 0, 2^62]`)
//!   failed with a size overflow from the dtype conversion it made before
//!   looking at the element count; it returns no elements, as `to_vec` did
//!   and as PyTorch's `tolist()` returns empty lists.
//!
//! Probed this session against PyTorch 2.15 and found to agree (about 250
//! calls; not kept as tests here): reductions over `dim=[]`, repeated and
//! out-of-range dims, `split`/`chunk` of empty dims and huge sizes, the
//! legacy empty 1-D inputs of `cat`, `narrow`/`select` at the edges,
//! `as_strided` bounds, `fill_`/`add`/`eq`/`masked_fill`/`clamp` of
//! out-of-range integer scalars in u8 and i32, integer division by zero, and
//! in-place ops that fail leaving their output unchanged. `i64::MIN`
//! divided by -1 with a rounding mode gives `i64::MIN` (PyTorch's CPU kernel
//! dies of SIGFPE there). A random sweep of 40,000 calls of 105 ops with
//! hostile dims, sizes, scalars and integer extremes, in a debug build
//! (overflow checks on), panicked nowhere and changed no input it refused.

use super::common::CPU;
use strata_tensor::{DType, Tensor, TensorError};

/// 2^62: two of it fit in i64, three do not.
const BIG: usize = 1 << 62;

fn zeros(shape: &[usize]) -> Tensor {
    Tensor::zeros(shape, DType::F32, CPU).unwrap()
}

/// `torch.stack([torch.zeros(0, 2**62)] * 3, dim)`: `[3, 0, 2^62]` with
/// strides `[2^62, 2^62, 1]` for dim 0 (PyTorch's); dims 1 and 2 overflow
/// (`[0, 3, 2^62]` and `[0, 2^62, 3]` need a stride of 3 * 2^62), a size
/// error (PyTorch's are overflow artifacts: a negative dimension, or a
/// wrapped stride).
#[test]
fn stack_of_empty_tensors_with_huge_dims_is_pytorchs() {
    let a = zeros(&[0, BIG]);
    let s = Tensor::stack(&[&a, &a, &a], 0).unwrap();
    assert_eq!(s.shape(), [3, 0, BIG]);
    assert_eq!(s.strides(), [BIG, BIG, 1]);
    assert_eq!(s.dtype(), DType::F32);
    assert!(s.to_vec::<f32>().unwrap().is_empty());
    let s = Tensor::stack(&[&a, &a, &a], -3).unwrap();
    assert_eq!(s.shape(), [3, 0, BIG]);
    for dim in [1, 2, -1, -2] {
        match Tensor::stack(&[&a, &a, &a], dim) {
            Err(TensorError::SizeOverflow { .. }) => {}
            other => panic!("stack dim {dim}: expected SizeOverflow, got {other:?}"),
        }
    }
    // Mixed dtypes promote as usual.
    let h = Tensor::zeros(&[0, BIG], DType::F64, CPU).unwrap();
    let s = Tensor::stack(&[&a, &h, &a], 0).unwrap();
    assert_eq!((s.shape(), s.dtype()), (&[3, 0, BIG][..], DType::F64));
}

/// `torch.cat([torch.zeros(2, 0, 2**62)] * 3)`: `[6, 0, 2^62]`; along dim 2
/// the sizes sum past i64::MAX, a size error naming it.
#[test]
fn cat_of_empty_tensors_with_huge_dims_is_pytorchs() {
    let b = zeros(&[2, 0, BIG]);
    let c = Tensor::cat(&[&b, &b, &b], 0).unwrap();
    assert_eq!(c.shape(), [6, 0, BIG]);
    assert_eq!(c.strides(), [BIG, BIG, 1]);
    let c = Tensor::cat(&[&b, &b, &b], 1).unwrap();
    assert_eq!(c.shape(), [2, 0, BIG]);
    match Tensor::cat(&[&b, &b], 2) {
        Err(TensorError::SizeOverflow { op, msg }) => {
            assert_eq!(op, "cat");
            assert!(msg.contains("dimension 2"), "{msg}");
        }
        other => panic!("expected SizeOverflow, got {other:?}"),
    }
    // Empty pieces among non-empty ones still land where they belong.
    let x = Tensor::from_slice(&[1f32, 2., 3., 4.], &[2, 2], CPU).unwrap();
    let e = zeros(&[0, 2]);
    let c = Tensor::cat(&[&e, &x, &e, &x, &e], 0).unwrap();
    assert_eq!(c.shape(), [4, 2]);
    assert_eq!(c.to_vec::<f32>().unwrap(), [1., 2., 3., 4., 1., 2., 3., 4.]);
    // The inputs are unchanged.
    assert_eq!(x.to_vec::<f32>().unwrap(), [1., 2., 3., 4.]);
    assert_eq!(x.version(), 0);
}

/// An empty view with no contiguous strides below i64::MAX reads as no
/// elements, in its dtype and converted (PyTorch's `tolist()` is empty).
#[test]
fn an_empty_view_too_large_to_copy_reads_as_no_elements() {
    let e = zeros(&[3, 0, BIG]).expand(&[5, 3, 0, BIG as i64]).unwrap();
    assert_eq!(e.numel(), 0);
    assert!(e.to_vec::<f32>().unwrap().is_empty());
    assert!(e.to_vec_as::<f64>().unwrap().is_empty());
    assert!(e.to_vec_as::<i64>().unwrap().is_empty());
    assert!(e.to_scalars().unwrap().is_empty());
    // Asking for the wrong element type is still refused first.
    match e.to_vec::<f64>() {
        Err(TensorError::DType { op, .. }) => assert_eq!(op, "to_vec"),
        other => panic!("expected a dtype error, got {other:?}"),
    }
    // An empty tensor is contiguous: `contiguous` returns the view itself,
    // as PyTorch's does.
    assert!(e.contiguous().unwrap().same_storage(&e));
    // A new tensor of its shape has no contiguous strides below i64::MAX:
    // a size error, as PyTorch's `e + 1` ("Stride calculation overflowed").
    match e.add(1.0) {
        Err(TensorError::SizeOverflow { .. }) => {}
        other => panic!("expected SizeOverflow, got {other:?}"),
    }
}
