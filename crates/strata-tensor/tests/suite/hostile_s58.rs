//! Session 58's sweep of hostile inputs to strata-tensor (after
//! `hostile_s57.rs`): the public layout helpers of TensorIterator's order,
//! and copies of empty tensors whose other dims are near i64::MAX, checked
//! against PyTorch 2.15 CPU.
//!
//! Defects these tests found (fixed with them):
//!
//! * `layout::pytorch_reorder_dims` indexed past an operand's strides when
//!   they were fewer than the dims (a panic: index out of bounds), and
//!   `layout::pytorch_scalar_loop_mask` panicked on a `chunk` of 0 (a
//!   remainder by zero), an `order` naming a dim twice or past the shape,
//!   stride lists shorter than the shape or none at all; a shape whose
//!   product passes `usize` wrapped (`[2^32, 2^32]` answered "no element
//!   takes the scalar loop"), and one of 2^40 elements aborted the process
//!   asking for a 1 TiB mask. Both now check their arguments and return a
//!   typed error (`Shape`, `Value`, `SizeOverflow`) before computing.
//! * `zeros_like`/`empty_like`/`full_like` and `to_dtype` of an empty
//!   tensor whose shape has no row-major strides below i64::MAX
//!   (`[0, 2^62, 2^62]`, a permuted view of `zeros([2^62, 0, 2^62])`) were
//!   refused with a size overflow: they made a row-major copy. PyTorch's
//!   `empty_like` and `.to(dtype)` keep an empty tensor's strides, whatever
//!   they are (expanded and stepped ones too), and so does strata now (an
//!   empty tensor is contiguous whatever its strides). `deep_clone` stayed
//!   row-major then; since session 59 it keeps the strides as PyTorch's
//!   `clone()` does, and `clone_contiguous` is the row-major copy, refusing
//!   such a shape as PyTorch's `clone(memory_format=torch.contiguous_format)`
//!   does.

use super::common::CPU;
use strata_tensor::layout::{pytorch_reorder_dims, pytorch_scalar_loop_mask};
use strata_tensor::{DType, Tensor, TensorError};

/// 2^62: two of it fit in i64, three do not.
const BIG: usize = 1 << 62;

fn zeros(shape: &[usize]) -> Tensor {
    Tensor::zeros(shape, DType::F32, CPU).unwrap()
}

fn is_shape_err<T: std::fmt::Debug>(r: Result<T, TensorError>, what: &str) -> String {
    match r {
        Err(e @ TensorError::Shape { .. }) => e.to_string(),
        other => panic!("{what}: expected a shape error, got {other:?}"),
    }
}

#[test]
fn reorder_dims_refuses_operands_without_one_stride_per_dim() {
    let msg = is_shape_err(pytorch_reorder_dims(&[2, 3], None, &[&[1]]), "short input");
    assert!(msg.contains("one stride per dim"), "{msg}");
    is_shape_err(
        pytorch_reorder_dims(&[2, 3], None, &[&[3, 1], &[1, 2, 6]]),
        "long second input",
    );
    is_shape_err(
        pytorch_reorder_dims(&[2, 3], Some(&[1]), &[&[3, 1]]),
        "short reduced output",
    );
    // Valid operands keep their answers (the doc's: transposed 2 x 3 has
    // dim 0 innermost, contiguous dim 1).
    assert_eq!(
        pytorch_reorder_dims(&[2, 3], None, &[&[1, 2]]).unwrap(),
        [0, 1]
    );
    assert_eq!(
        pytorch_reorder_dims(&[2, 3], None, &[&[3, 1]]).unwrap(),
        [1, 0]
    );
    assert_eq!(
        pytorch_reorder_dims(&[], None, &[&[]]).unwrap(),
        Vec::<usize>::new()
    );
}

#[test]
fn scalar_loop_mask_refuses_bad_arguments_before_computing() {
    let one: &[usize] = &[1];
    // chunk 0: a remainder by zero before.
    match pytorch_scalar_loop_mask(&[35], &[0], &[one, one], 0) {
        Err(TensorError::Value { .. }) => {}
        other => panic!("chunk 0: expected a value error, got {other:?}"),
    }
    // Orders that are not a permutation of the dims.
    for order in [&[3usize][..], &[], &[0, 0], &[1]] {
        let shape: &[usize] = if order.len() == 2 { &[5, 7] } else { &[35] };
        let strides: Vec<Vec<usize>> = vec![shape::contiguous(shape); 2];
        let st: Vec<&[usize]> = strides.iter().map(Vec::as_slice).collect();
        let msg = is_shape_err(
            pytorch_scalar_loop_mask(shape, order, &st, 32),
            &format!("order {order:?}"),
        );
        assert!(msg.contains("permutation"), "{msg}");
    }
    // Too few strides, or no operand at all (the output's strides come first).
    is_shape_err(
        pytorch_scalar_loop_mask(&[5, 7], &[1, 0], &[&[7, 1], &[7]], 32),
        "short input strides",
    );
    is_shape_err(
        pytorch_scalar_loop_mask(&[5, 7], &[1, 0], &[], 32),
        "no operands",
    );
    // A shape past i64::MAX elements: wrapped to 0 ("no scalar element") before.
    match pytorch_scalar_loop_mask(&[1 << 32, 1 << 32], &[1, 0], &[&[1 << 32, 1]], 32) {
        Err(TensorError::SizeOverflow { .. }) => {}
        other => panic!("2^64 elements: expected a size overflow, got {other:?}"),
    }
    // A mask the host cannot hold (2^62 bools): the process aborted before.
    match pytorch_scalar_loop_mask(&[BIG], &[0], &[one, &[2]], 32) {
        Err(TensorError::SizeOverflow { msg, .. }) => assert!(msg.contains("allocated"), "{msg}"),
        other => panic!("2^62 elements: expected a size overflow, got {other:?}"),
    }
}

/// The documented answers, by hand: with chunk 32, 35 contiguous elements
/// leave the last 3 to the scalar loop; a stepped input sends every element
/// there; an empty shape none.
#[test]
fn scalar_loop_mask_still_answers_valid_calls() {
    let one: &[usize] = &[1];
    let m = pytorch_scalar_loop_mask(&[35], &[0], &[one, one], 32)
        .unwrap()
        .unwrap();
    let expected: Vec<bool> = (0..35).map(|i| i >= 32).collect();
    assert_eq!(m, expected);
    let m = pytorch_scalar_loop_mask(&[64], &[0], &[one, &[2]], 32)
        .unwrap()
        .unwrap();
    assert!(m.len() == 64 && m.iter().all(|&b| b));
    assert!(pytorch_scalar_loop_mask(&[64], &[0], &[one, one], 32)
        .unwrap()
        .is_none());
    assert!(
        pytorch_scalar_loop_mask(&[0, BIG], &[1, 0], &[&[BIG, 1]], 32)
            .unwrap()
            .is_none()
    );
    // Two rows of 35 (contiguous, dims coalesced into one row of 70): the
    // last 70 % 32 = 6 elements.
    let m = pytorch_scalar_loop_mask(&[2, 35], &[1, 0], &[&[35, 1], &[35, 1]], 32)
        .unwrap()
        .unwrap();
    let expected: Vec<bool> = (0..70).map(|i| i >= 64).collect();
    assert_eq!(m, expected);
}

mod shape {
    /// Row-major strides, each size counted as at least 1 (PyTorch's).
    pub fn contiguous(shape: &[usize]) -> Vec<usize> {
        let mut st = vec![1; shape.len()];
        for d in (0..shape.len().saturating_sub(1)).rev() {
            st[d] = st[d + 1] * shape[d + 1].max(1);
        }
        st
    }
}

/// `torch.zeros(2**62, 0, 2**62).permute(...)` and other empty tensors:
/// PyTorch 2.15's `zeros_like`, `empty_like`, `full_like` and `.double()`
/// keep the input's strides (`[0, 2^62, 2^62]` with strides
/// `[2^62, 2^62, 1]` or `[2^62, 1, 2^62]`; `zeros(0, 1).expand(0, 3)` with
/// `[1, 0]`; `zeros(4, 0, 6)[::2, :, ::3]` with `[12, 6, 3]`).
#[test]
fn copies_of_empty_tensors_keep_their_strides_as_pytorch() {
    let base = zeros(&[BIG, 0, BIG]);
    let cases: Vec<(Tensor, Vec<usize>)> = vec![
        (base.permute(&[1, 0, 2]).unwrap(), vec![BIG, BIG, 1]),
        (base.permute(&[1, 2, 0]).unwrap(), vec![BIG, 1, BIG]),
        (base.permute(&[2, 1, 0]).unwrap(), vec![1, BIG, BIG]),
        (zeros(&[0, 1]).expand(&[0, 3]).unwrap(), vec![1, 0]),
        (
            zeros(&[4, 0, 6])
                .slice(0, None, None, 2)
                .unwrap()
                .slice(2, None, None, 3)
                .unwrap(),
            vec![12, 6, 3],
        ),
    ];
    for (x, strides) in cases {
        assert_eq!(x.strides(), strides, "the input's own strides");
        let shape = x.shape().to_vec();
        let copies = [
            ("zeros_like", x.zeros_like(None)),
            ("ones_like f64", x.ones_like(Some(DType::F64))),
            ("empty_like", x.empty_like(Some(DType::Bool))),
            ("full_like", x.full_like(7, None)),
            ("to_dtype", x.to_dtype(DType::F64)),
            ("to_dtype bf16", x.to_dtype(DType::BF16)),
            ("to_vec_as source", x.to_dtype(DType::I64)),
        ];
        for (name, r) in copies {
            let y = r.unwrap_or_else(|e| panic!("{name} of {shape:?} {strides:?}: {e}"));
            assert_eq!(y.shape(), shape.as_slice(), "{name}");
            assert_eq!(y.strides(), strides.as_slice(), "{name} of {shape:?}");
            assert_eq!(y.offset(), 0, "{name}");
            assert!(!y.same_storage(&x), "{name} is a fresh tensor");
            assert!(y.is_contiguous(), "{name}: an empty tensor is contiguous");
            assert_eq!(y.numel(), 0);
        }
    }
    // clone_contiguous is row-major: `[0, 2^62, 2^62]` has no such strides
    // (PyTorch's `clone(memory_format=torch.contiguous_format)`: "Stride
    // calculation overflowed"); deep_clone keeps them, as PyTorch's
    // `clone()` (preserve_format) does (checked in PyTorch 2.15).
    let big = base.permute(&[1, 0, 2]).unwrap();
    match big.clone_contiguous() {
        Err(TensorError::SizeOverflow { .. }) => {}
        other => {
            panic!("clone_contiguous of [0, 2^62, 2^62]: expected a size overflow, got {other:?}")
        }
    }
    assert_eq!(big.deep_clone().unwrap().strides(), big.strides());
    // torch.zeros(3, 0).t(): strides (1, 1); clone() keeps them,
    // clone(memory_format=torch.contiguous_format) gives (3, 1).
    let e = zeros(&[3, 0]).t().unwrap();
    assert_eq!(e.deep_clone().unwrap().strides(), [1, 1]);
    let c = e.clone_contiguous().unwrap();
    assert_eq!(
        (c.shape(), c.strides()),
        (&[0usize, 3][..], &[3usize, 1][..])
    );
    // A non-empty tensor: deep_clone and to_dtype keep a dense layout
    // (torch.zeros(2, 3).t().clone().stride() == (1, 3)); the `_contiguous`
    // forms are row-major.
    let t = zeros(&[2, 3]).t().unwrap();
    assert_eq!(t.deep_clone().unwrap().strides(), [1, 3]);
    assert_eq!(t.to_dtype(DType::F64).unwrap().strides(), [1, 3]);
    assert_eq!(t.clone_contiguous().unwrap().strides(), [2, 1]);
    assert_eq!(t.to_dtype_contiguous(DType::F64).unwrap().strides(), [2, 1]);
    assert_eq!(t.zeros_like(None).unwrap().strides(), [1, 3]);
}

/// `nll_weights` (public) took any target and weight: float targets came
/// back as float "safe" targets, a 2-d class weight gave `[rows, k]`
/// weights instead of `[rows]`, an integer `acc` integer weights. PyTorch's
/// `nll_loss` refuses the first two ("expected target dtype to be Long or
/// Byte, but got Float"; "weight tensor should be defined either for all 3
/// classes or no classes but got weight tensor of shape: [5, 3]").
#[test]
fn nll_weights_refuses_what_nll_loss_refuses() {
    use strata_tensor::nll_weights;
    let t = Tensor::from_slice(&[0i64, 1, 2], &[3], CPU).unwrap();
    let tf = Tensor::from_slice(&[0.5f32, 1.0], &[2], CPU).unwrap();
    match nll_weights(&tf, None, -100, DType::F32) {
        Err(TensorError::DType { .. }) => {}
        other => panic!("float targets: expected a dtype error, got {other:?}"),
    }
    let ti = t.to_dtype(DType::I32).unwrap();
    assert!(matches!(
        nll_weights(&ti, None, -100, DType::F32),
        Err(TensorError::DType { .. })
    ));
    let w2 = Tensor::ones(&[5, 3], DType::F32, CPU).unwrap();
    match nll_weights(&t, Some(&w2), -100, DType::F32) {
        Err(TensorError::Shape { msg, .. }) => assert!(msg.contains("1-d"), "{msg}"),
        other => panic!("2-d weight: expected a shape error, got {other:?}"),
    }
    assert!(matches!(
        nll_weights(&t, None, -100, DType::I64),
        Err(TensorError::DType { .. })
    ));
    // Valid calls: weights w[t] with ignored rows 0, targets with ignored 0.
    let w = Tensor::from_slice(&[0.5f32, 2.0, 4.0], &[3], CPU).unwrap();
    let tg = Tensor::from_slice(&[2i64, -100, 1], &[3], CPU).unwrap();
    let (wt, safe) = nll_weights(&tg, Some(&w), -100, DType::F32).unwrap();
    assert_eq!(wt.to_vec::<f32>().unwrap(), [4.0, 0.0, 2.0]);
    assert_eq!(safe.to_vec::<i64>().unwrap(), [2, 0, 1]);
    let tu = Tensor::from_slice(&[1u8, 0], &[2], CPU).unwrap();
    let (wt, _) = nll_weights(&tu, None, -100, DType::F64).unwrap();
    assert_eq!(wt.to_vec::<f64>().unwrap(), [1.0, 1.0]);
}

/// `torch.rand_like` and `torch.randn_like` of an empty tensor keep its
/// strides (PyTorch 2.15: `[0, 2^62, 2^62]` views of `zeros(2**62, 0,
/// 2**62)` give strides `(2^62, 2^62, 1)` and `(2^62, 1, 2^62)`, and
/// `zeros(0, 1).expand(0, 3)` gives `(1, 0)`); strata refused the first
/// two with a size overflow. An integer dtype is still refused by `rand`.
#[test]
fn random_likes_of_empty_tensors_keep_their_strides() {
    let base = zeros(&[BIG, 0, BIG]);
    let cases = [
        (base.permute(&[1, 0, 2]).unwrap(), vec![BIG, BIG, 1]),
        (base.permute(&[1, 2, 0]).unwrap(), vec![BIG, 1, BIG]),
        (zeros(&[0, 1]).expand(&[0, 3]).unwrap(), vec![1, 0]),
    ];
    for (x, strides) in cases {
        for r in [x.rand_like(None, 3), x.randn_like(Some(DType::F64), 3)] {
            let y = r.unwrap();
            assert_eq!((y.shape(), y.strides()), (x.shape(), strides.as_slice()));
            assert!(!y.same_storage(&x));
        }
    }
    let e = zeros(&[0]);
    assert!(
        Tensor::rand(&[0], DType::I64, 0, CPU).is_err()
            == e.rand_like(Some(DType::I64), 0).is_err()
    );
    // A non-empty tensor is unchanged: rand_like is row-major.
    assert_eq!(
        zeros(&[2, 3])
            .t()
            .unwrap()
            .rand_like(None, 1)
            .unwrap()
            .strides(),
        [2, 1]
    );
}
