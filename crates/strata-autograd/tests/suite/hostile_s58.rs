//! Session 58's sweep of hostile inputs to strata-autograd (after
//! `hostile_s57.rs`): forward ops over empty inputs whose other dims are
//! near i64::MAX, each followed by its backward.
//!
//! Defect this test found (fixed with it): the backward of `cumsum` flips
//! the gradient along the summed dim with an index of its length, and for
//! an empty gradient of shape `[2^62, 0, 2^62]` that index (2^62 `i64`s)
//! could not be made: backward failed with a size overflow from `arange`
//! although the forward had been accepted. PyTorch 2.15 returns an empty
//! gradient of the input's shape (`torch.zeros(2**62, 0, 2**62,
//! requires_grad=True).cumsum(0)` then `backward(ones_like(y))`), and so
//! does strata now: an empty gradient has nothing to reverse.
//!
//! Probed with it and found to agree with PyTorch (an accepted forward whose
//! backward runs, or a typed error in the forward): sums, means, var/std,
//! norms, logsumexp, amax/max_dim/min_dim, softmax/log_softmax, narrow,
//! chunk/split, squeeze/unsqueeze, tril/triu, t, view/reshape/flatten,
//! expand, stack, dtype casts, gelu, dropout, pow, clamp, maximum, where,
//! layer_norm, masked_fill, index_select, gather, embedding, cross_entropy
//! and mse_loss over such inputs.

use strata_autograd::Var;
use strata_tensor::{DType, Device, Tensor};

const BIG: usize = 1 << 62;

fn param(shape: &[usize], dtype: DType) -> Var {
    Var::parameter(Tensor::zeros(shape, dtype, Device::Cpu).unwrap()).unwrap()
}

#[test]
fn cumsum_of_empty_inputs_with_huge_dims_back_propagates() {
    let cases: [(&[usize], i64, DType); 6] = [
        (&[BIG, 0, BIG], 0, DType::F32),
        (&[BIG, 0, BIG], 2, DType::F32),
        (&[BIG, 0, BIG], -1, DType::F64),
        (&[0, BIG], 1, DType::F32),
        (&[BIG, 0], 0, DType::BF16),
        (&[BIG, 0], 1, DType::F32),
    ];
    for (shape, dim, dtype) in cases {
        let x = param(shape, dtype);
        let y = x.cumsum(dim, None).unwrap();
        assert_eq!(y.shape(), shape);
        let g = Tensor::ones(y.shape(), y.dtype(), Device::Cpu).unwrap();
        y.backward_with(Some(&g), false)
            .unwrap_or_else(|e| panic!("cumsum({shape:?}, {dim}) backward: {e}"));
        let grad = x.grad().expect("a gradient");
        assert_eq!(grad.shape(), shape, "cumsum({shape:?}, {dim})");
        assert_eq!(grad.dtype(), dtype);
        assert_eq!(grad.numel(), 0);
    }
    // With a dtype argument the gradient comes back in the input's dtype.
    let x = param(&[BIG, 0, BIG], DType::F32);
    let y = x.cumsum(0, Some(DType::F64)).unwrap();
    assert_eq!(y.dtype(), DType::F64);
    y.exp()
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    let grad = x.grad().unwrap();
    assert_eq!(
        (grad.shape(), grad.dtype()),
        (&[BIG, 0, BIG][..], DType::F32)
    );
}

/// A small cumsum still reverses: the gradient of `cumsum(x)` summed is
/// the count of outputs each element reaches (n - i).
#[test]
fn cumsum_backward_still_sums_the_later_gradients() {
    let x = Var::parameter(Tensor::zeros(&[2, 4], DType::F32, Device::Cpu).unwrap()).unwrap();
    x.cumsum(1, None)
        .unwrap()
        .sum(None, false)
        .unwrap()
        .backward()
        .unwrap();
    let g = x.grad().unwrap().to_vec::<f32>().unwrap();
    assert_eq!(g, vec![4.0, 3.0, 2.0, 1.0, 4.0, 3.0, 2.0, 1.0]);
}

/// The first gradient of an empty leaf reached through a dtype conversion
/// is laid out as the leaf (PyTorch 2.15: `x.to(torch.float64).sum()
/// .backward()` gives `x.grad` of `x`'s strides, `(2^62, 1, 1)` for
/// `zeros(0, 2**62, 1)`, `(1, 1)` for `zeros(3, 0)`, `(5, 5, 1)` for
/// `zeros(2, 0, 5)`), not as the expanded gradient of the sum (strides 0),
/// which a conversion of an empty tensor keeps since this session.
#[test]
fn first_gradients_of_empty_leaves_through_a_conversion_are_laid_out_as_the_leaf() {
    let cases: [(&[usize], &[usize]); 4] = [
        (&[0, BIG, 1], &[BIG, 1, 1]),
        (&[3, 0], &[1, 1]),
        (&[0, 4], &[4, 1]),
        (&[2, 0, 5], &[5, 5, 1]),
    ];
    for (shape, strides) in cases {
        for to in [DType::F64, DType::BF16] {
            let x = param(shape, DType::F32);
            assert_eq!(x.data().strides(), strides);
            x.to_dtype(to)
                .unwrap()
                .sum(None, false)
                .unwrap()
                .backward()
                .unwrap();
            let g = x.grad().unwrap();
            assert_eq!(
                (g.shape(), g.strides(), g.dtype()),
                (shape, strides, DType::F32),
                "{shape:?} through {to:?}"
            );
        }
    }
}
