//! Session 57's sweep of hostile inputs to strata-autograd (after
//! `hostile_sweep_s54c.rs`): the gradients of `cat` and `stack` over empty
//! inputs whose other dims are near i64::MAX.
//!
//! Defect this test found (fixed with it): the backward of `cat` (and of
//! `stack`, which is `cat` of unsqueezed inputs) took a `narrow` view of the
//! upstream gradient for every input with a non-zero length along the dim,
//! even one with no elements. An empty gradient of shape `[3, 0, 2^62]`
//! laid out contiguously (any op but a plain sum between the join and the
//! loss, e.g. `exp`) has strides `[2^62, 2^62, 1]`, and the view of the third
//! input's slice started at `2 * 2^62`, beyond i64::MAX: backward failed with
//! that internal `narrow` error although the forward had been accepted.
//! An input with no elements now gets an empty gradient of its shape and
//! dtype. (PyTorch 2.15 fails the same backward with "invalid storage offset
//! -9223372036854775808", an overflow of its own; an accepted forward whose
//! backward cannot run is the defect strata no longer has.)

use strata_autograd::Var;
use strata_tensor::{DType, Device, Tensor};

const BIG: usize = 1 << 62;

fn param(shape: &[usize], dtype: DType) -> Var {
    Var::parameter(Tensor::zeros(shape, dtype, Device::Cpu).unwrap()).unwrap()
}

#[test]
fn joins_of_empty_inputs_with_huge_dims_back_propagate() {
    // stack along dim 0, an f32 and an f64 input (the gradient comes back in
    // each input's dtype).
    let a = param(&[0, BIG], DType::F32);
    let h = param(&[0, BIG], DType::F64);
    let s = Var::stack(&[&a, &h, &a], 0).unwrap();
    assert_eq!(s.shape(), [3, 0, BIG]);
    s.exp()
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    for (v, dtype) in [(&a, DType::F32), (&h, DType::F64)] {
        let g = v.grad().expect("a gradient");
        assert_eq!((g.shape(), g.dtype()), (&[0, BIG][..], dtype));
    }

    // cat along dim 0, with an ordinary input among the empty ones: its
    // gradient is exact.
    let b = param(&[2, 0, BIG], DType::F32);
    let c = Var::cat(&[&b, &b, &b], 0).unwrap();
    assert_eq!(c.shape(), [6, 0, BIG]);
    c.exp()
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    assert_eq!(b.grad().unwrap().shape(), [2, 0, BIG]);

    let x = Var::parameter(Tensor::from_slice(&[1f32, 2.], &[1, 2], Device::Cpu).unwrap()).unwrap();
    let e = param(&[0, 2], DType::F32);
    let y = Var::cat(&[&e, &x, &e, &x], 0).unwrap();
    y.mul(&y)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    // d/dx of 2 * sum(x^2) = 4x.
    assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), [4., 8.]);
    assert_eq!(e.grad().unwrap().shape(), [0, 2]);
}
