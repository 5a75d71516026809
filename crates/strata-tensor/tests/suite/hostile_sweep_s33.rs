//! Session 33's sweep of hostile inputs to strata-tensor (after
//! `hostile_sweep_s32.rs`): public functions no earlier sweep names
//! (`addmm`, `masked_scatter`, `gelu_backward`, `log_softmax_backward`,
//! `scaled_softmax`, `eye`, `unbind` of a 0-d tensor), 0-d and size-0
//! arguments to views, softmax, joins and splits, in-place ops on expanded
//! and self-overlapping targets, integer scalars that wrap, clamp bounds
//! and allclose tolerances at the edges. Each assertion states what PyTorch
//! 2.15 (CPU) gives for the same call, checked there and noted beside it.
//!
//! Defects these tests found (fixed with them):
//!
//! * `unbind` of a 0-d tensor named `iter_dim` (the op it is computed
//!   with) in its error, and `eye` with a shape too large named `full`;
//!   each now names itself.
//!
//! Everything else here already gave PyTorch's answer.

use strata_tensor::{DType, Device, GeluApprox, Scalar, Tensor, TensorError};

const CPU: Device = Device::Cpu;

fn m(v: &[f32], s: &[usize]) -> Tensor {
    Tensor::from_slice(v, s, CPU).unwrap()
}

fn t<T: strata_tensor::Element>(v: &[T]) -> Tensor {
    Tensor::from_slice(v, &[v.len()], CPU).unwrap()
}

fn f32s(x: &Tensor) -> Vec<f32> {
    x.contiguous().unwrap().to_vec::<f32>().unwrap()
}

fn scalar(v: f64) -> Tensor {
    Tensor::scalar(v, DType::F32, CPU).unwrap()
}

fn shapes(v: &[Tensor]) -> Vec<Vec<usize>> {
    v.iter().map(|x| x.shape().to_vec()).collect()
}

// --------------------------------------------------------- op names in errors

#[test]
fn unbind_and_eye_name_themselves_in_their_errors() {
    // torch.unbind(torch.tensor(1.)): "Dimension specified as 0 but tensor
    // has no dimensions".
    match scalar(1.0).unbind(0) {
        Err(TensorError::Dim { op, .. }) => assert_eq!(op, "unbind"),
        other => panic!("expected a dim error, got {other:?}"),
    }
    match t(&[1.0f32, 2.0]).unbind(3) {
        Err(TensorError::Dim { op, .. }) => assert_eq!(op, "unbind"),
        other => panic!("expected a dim error, got {other:?}"),
    }
    // iter_dim keeps its own name.
    match scalar(1.0).iter_dim(0) {
        Err(TensorError::Dim { op, .. }) => assert_eq!(op, "iter_dim"),
        other => panic!("expected a dim error, got {other:?}"),
    }
    // torch.eye(2**64 - 1, 0): n does not fit an int64 ("Overflow when
    // unpacking long"); strata's sizes are usize, so it is a size error.
    match Tensor::eye(usize::MAX, Some(0), DType::F32, CPU) {
        Err(TensorError::SizeOverflow { op, .. }) => assert_eq!(op, "eye"),
        other => panic!("expected a size error, got {other:?}"),
    }
    // torch.eye(2**62, 0) is an empty (2^62, 0) tensor.
    let e = Tensor::eye(1 << 62, Some(0), DType::F32, CPU).unwrap();
    assert_eq!(e.shape(), &[1 << 62, 0]);
}

// ------------------------------------------------------------------- addmm

#[test]
fn addmm_at_the_edges_gives_pytorchs_results() {
    let (a, b) = (m(&[], &[2, 0]), m(&[], &[0, 3]));
    // torch.addmm(torch.tensor([1., 2, 3]), zeros(2, 0), zeros(0, 3)):
    // [[1, 2, 3], [1, 2, 3]].
    let y = t(&[1.0f32, 2.0, 3.0]).addmm(&a, &b).unwrap();
    assert_eq!(y.shape(), &[2, 3]);
    assert_eq!(f32s(&y), vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
    // A 0-d bias: all 5; a NaN bias: all NaN (beta = 1 keeps it).
    assert_eq!(f32s(&scalar(5.0).addmm(&a, &b).unwrap()), vec![5.0; 6]);
    let n = t(&[f32::NAN]).addmm(&a, &b).unwrap();
    assert!(f32s(&n).iter().all(|v| v.is_nan()) && n.numel() == 6);
    // No rows: an empty (0, 3) result.
    let e = t(&[1.0f32, 2.0, 3.0])
        .addmm(&m(&[], &[0, 2]), &m(&[1.0; 6], &[2, 3]))
        .unwrap();
    assert_eq!(e.shape(), &[0, 3]);
    // A [2, 1] bias broadcast over the columns: [[3, 3, 3], [4, 4, 4]].
    let c = m(&[1.0, 2.0], &[2, 1])
        .addmm(&m(&[1.0; 4], &[2, 2]), &m(&[1.0; 6], &[2, 3]))
        .unwrap();
    assert_eq!(f32s(&c), vec![3.0, 3.0, 3.0, 4.0, 4.0, 4.0]);
    // Integers: torch.addmm(tensor([1, 2]), ones(2, 2, long), ones(2, 2, long))
    // = [[3, 4], [3, 4]] (int64).
    let ones = Tensor::ones(&[2, 2], DType::I64, CPU).unwrap();
    let i = t(&[1i64, 2]).addmm(&ones, &ones).unwrap();
    assert_eq!(i.dtype(), DType::I64);
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![3, 4, 3, 4]);
}

#[test]
fn addmm_refuses_what_pytorch_refuses() {
    let (m1, m2) = (m(&[1.0; 4], &[2, 2]), m(&[1.0; 6], &[2, 3]));
    // A bias larger than the product: "expand(...): the number of sizes
    // provided (2) must be greater or equal to the number of dimensions".
    assert!(matches!(
        m(&[1.0; 12], &[2, 2, 3]).addmm(&m1, &m2),
        Err(TensorError::Shape { .. })
    ));
    // A bias of another dtype: "self and mat2 must have the same dtype".
    assert!(matches!(
        t(&[1.0f64, 2.0, 3.0]).addmm(&m1, &m2),
        Err(TensorError::DType { .. })
    ));
    // A 1-D mat1: "self must be a matrix".
    assert!(matches!(
        t(&[1.0f32]).addmm(&t(&[1.0f32, 1.0]), &m(&[1.0; 2], &[2, 1])),
        Err(TensorError::Shape { .. })
    ));
}

// ---------------------------------------------------------- masked_scatter

#[test]
fn masked_scatter_broadcasts_and_takes_any_source_shape() {
    let mask = t(&[true, false, true]);
    // torch.masked_scatter(tensor([0.]), mask, tensor([7., 8, 9])): self is
    // broadcast to the mask's shape: [7, 0, 8].
    let y = t(&[0.0f32])
        .masked_scatter(&mask, &t(&[7.0f32, 8.0, 9.0]))
        .unwrap();
    assert_eq!(f32s(&y), vec![7.0, 0.0, 8.0]);
    // A 2-D source is read in row-major order: [7, 1, 8].
    let x = t(&[0.0f32, 1.0, 2.0]);
    let y = x
        .masked_scatter(&mask, &m(&[7.0, 8.0, 9.0, 10.0], &[2, 2]))
        .unwrap();
    assert_eq!(f32s(&y), vec![7.0, 1.0, 8.0]);
    // A 0-d source for one set position: [0, 4, 2].
    let y = x
        .masked_scatter(&t(&[false, true, false]), &scalar(4.0))
        .unwrap();
    assert_eq!(f32s(&y), vec![0.0, 4.0, 2.0]);
    // Nothing selected, an empty source: self unchanged.
    let y = x.masked_scatter(&t(&[false; 3]), &m(&[], &[0])).unwrap();
    assert_eq!(f32s(&y), vec![0.0, 1.0, 2.0]);
    // A uint8 mask: "masked_scatter_ only supports boolean masks".
    assert!(matches!(
        x.masked_scatter(&t(&[1u8, 0, 1]), &t(&[7.0f32, 8.0])),
        Err(TensorError::DType { .. })
    ));
    assert_eq!(f32s(&x), vec![0.0, 1.0, 2.0]);
}

// ----------------------------------------------------------- gelu_backward

#[test]
fn gelu_backward_promotes_broadcasts_and_refuses_integers() {
    // aten.gelu_backward(tensor([1]), tensor([1])): "GeluBackwardKernelImpl"
    // not implemented for 'Long'.
    assert!(matches!(
        t(&[1i64]).gelu_backward(&t(&[1i64]), GeluApprox::None),
        Err(TensorError::DType { .. })
    ));
    // An f32 gradient and an f64 input: an f64 result, 0.8674951246561629.
    let d = t(&[1.0f32])
        .gelu_backward(&t(&[0.5f64]), GeluApprox::None)
        .unwrap();
    assert_eq!(d.dtype(), DType::F64);
    assert!((d.to_vec::<f64>().unwrap()[0] - 0.8674951246561629).abs() < 1e-15);
    // Broadcast [2, 1] x [3] (tanh): [[0.5, 1.08296406, 1.08609927],
    // [1, 2.16592813, 2.17219853]].
    let d = m(&[1.0, 2.0], &[2, 1])
        .gelu_backward(&t(&[0.0f32, 1.0, 2.0]), GeluApprox::Tanh)
        .unwrap();
    assert_eq!(d.shape(), &[2, 3]);
    let want = [0.5, 1.0829641, 1.0860993, 1.0, 2.1659281, 2.1721985];
    for (g, w) in f32s(&d).iter().zip(want) {
        assert!((g - w).abs() < 1e-6, "{g} vs {w}");
    }
    // At inf, -inf and NaN PyTorch's gradient is NaN in both forms
    // (inf * pdf(inf) = inf * 0).
    for approx in [GeluApprox::None, GeluApprox::Tanh] {
        let d = t(&[1.0f32; 3])
            .gelu_backward(&t(&[f32::INFINITY, f32::NEG_INFINITY, f32::NAN]), approx)
            .unwrap();
        assert!(f32s(&d).iter().all(|v| v.is_nan()), "{approx:?}");
    }
}

// ------------------------------------------------------------------ softmax

#[test]
fn softmax_family_on_0d_tensors() {
    // torch.softmax(tensor(1.), 0) = 1; log_softmax(tensor(1.), -1) = 0;
    // _softmax_backward_data / _log_softmax_backward_data of 0-d: 0.
    assert_eq!(f32s(&scalar(1.0).softmax(0, None).unwrap()), vec![1.0]);
    assert_eq!(f32s(&scalar(1.0).log_softmax(-1, None).unwrap()), vec![0.0]);
    let g = scalar(1.0);
    assert_eq!(
        f32s(&scalar(1.0).softmax_backward(&g, 0).unwrap()),
        vec![0.0]
    );
    assert_eq!(
        f32s(&scalar(0.0).log_softmax_backward(&g, -1).unwrap()),
        vec![0.0]
    );
    // Out of range: "Dimension out of range (expected to be in range of
    // [-2, 1], but got 2)"; a gradient of another shape is refused.
    let y = m(&[-1.0, -2.0, -0.5, -3.0], &[2, 2]);
    assert!(matches!(
        y.log_softmax_backward(&m(&[1.0; 4], &[2, 2]), 2),
        Err(TensorError::Dim { .. })
    ));
    assert!(y.log_softmax_backward(&t(&[1.0f32, 1.0]), 1).is_err());
}

#[test]
fn scaled_softmax_causal_with_more_or_fewer_rows_than_columns() {
    // PyTorch's is_causal mask is tril(ones(L, S)) (top-left aligned):
    // softmax(s.masked_fill(~tril, -inf), -1).
    // L = 3 > S = 2: [[1, 0], [0.5, 0.5], [0.26894143, 0.73105860]].
    let s = m(&[1.0, 5.0, 2.0, 2.0, 3.0, 4.0], &[3, 2]);
    let p = f32s(&s.scaled_softmax(1.0, true, None).unwrap());
    let want = [1.0, 0.0, 0.5, 0.5, 0.26894143, 0.7310586];
    for (g, w) in p.iter().zip(want) {
        assert!((g - w).abs() < 1e-7, "{p:?}");
    }
    // L = 2 < S = 3: [[1, 0, 0], [0.26894143, 0.73105860, 0]].
    let s = m(&[1.0, 5.0, 2.0, 2.0, 3.0, 4.0], &[2, 3]);
    let p = f32s(&s.scaled_softmax(1.0, true, None).unwrap());
    let want = [1.0, 0.0, 0.0, 0.26894143, 0.7310586, 0.0];
    for (g, w) in p.iter().zip(want) {
        assert!((g - w).abs() < 1e-7, "{p:?}");
    }
    // A scale of 0: uniform rows; an integer input needs a float dtype.
    assert_eq!(
        f32s(
            &m(&[1.0, 5.0], &[1, 2])
                .scaled_softmax(0.0, false, None)
                .unwrap()
        ),
        vec![0.5, 0.5]
    );
    assert!(matches!(
        t(&[1i64, 2]).scaled_softmax(1.0, false, None),
        Err(TensorError::DType { .. })
    ));
}

// ------------------------------------------------------------- views of 0-d

#[test]
fn views_of_0d_tensors() {
    // tensor(1.).squeeze((0,)) and squeeze((-1,)) are 0-d; squeeze((1,)) is
    // "Dimension out of range (expected to be in range of [-1, 0], but got 1)".
    assert_eq!(scalar(1.0).squeeze_dims(&[0]).unwrap().ndim(), 0);
    assert_eq!(scalar(1.0).squeeze_dims(&[-1]).unwrap().ndim(), 0);
    assert!(matches!(
        scalar(1.0).squeeze_dims(&[1]),
        Err(TensorError::Dim { .. })
    ));
    // ones(1, 1).squeeze((0, -2)): "dim 0 appears multiple times".
    assert!(matches!(
        m(&[1.0], &[1, 1]).squeeze_dims(&[0, -2]),
        Err(TensorError::Dim { .. })
    ));
    // flatten of 0-d is [1]; t() and transpose(0, -1) of 0-d are 0-d.
    assert_eq!(scalar(1.0).flatten(0, -1).unwrap().shape(), &[1]);
    assert_eq!(scalar(1.0).t().unwrap().ndim(), 0);
    assert_eq!(scalar(1.0).transpose(0, -1).unwrap().ndim(), 0);
    // unsqueeze(1) / unsqueeze(-2) of 0-d: out of range [-1, 0].
    assert!(matches!(
        scalar(1.0).unsqueeze(1),
        Err(TensorError::Dim { .. })
    ));
    assert!(matches!(
        scalar(1.0).unsqueeze(-2),
        Err(TensorError::Dim { .. })
    ));
    // narrow: start -4 of 3 and i64::MIN are out of range; start = len
    // with length 0 is an empty view; start 1 + length i64::MAX exceeds.
    let x = t(&[1.0f32, 2.0, 3.0]);
    assert_eq!(x.narrow(0, 3, 0).unwrap().shape(), &[0]);
    assert_eq!(f32s(&x.narrow(0, -2, 2).unwrap()), vec![2.0, 3.0]);
    for (s, l) in [(-4, 0), (i64::MIN, 0), (1, i64::MAX)] {
        assert!(matches!(x.narrow(0, s, l), Err(TensorError::Index { .. })));
    }
}

// ------------------------------------------------------------- joins, splits

#[test]
fn splits_and_joins_at_the_edges() {
    let x = t(&[1.0f32, 2.0, 3.0, 4.0, 5.0]);
    // x.chunk(6): five pieces of 1; chunk(0) / chunk(-1) are refused.
    assert_eq!(shapes(&x.chunk(6, 0).unwrap()), vec![vec![1]; 5]);
    assert!(x.chunk(0, 0).is_err() && x.chunk(-1, 0).is_err());
    // split(2**63 - 1): one piece [5]; split(0) of a non-empty dim refused.
    assert_eq!(shapes(&x.split(i64::MAX, 0).unwrap()), vec![vec![5]]);
    assert!(x.split(0, 0).is_err());
    // An empty dim: split(0), split(2) and split(i64::MAX) give one [0]
    // piece; split(-1) is refused; chunk(3) gives three [0] pieces.
    let e = m(&[], &[0]);
    for s in [0, 2, i64::MAX] {
        assert_eq!(shapes(&e.split(s, 0).unwrap()), vec![vec![0]], "{s}");
    }
    assert!(e.split(-1, 0).is_err());
    assert_eq!(shapes(&e.chunk(3, 0).unwrap()), vec![vec![0]; 3]);
    // Sections [5, 0]: [5] and [0]; sections summing to 5 through a huge
    // negative entry are refused (non-negative entries only).
    use strata_tensor::SplitSize::Sections;
    assert_eq!(
        shapes(&x.split(Sections(vec![5, 0]), 0).unwrap()),
        vec![vec![5], vec![0]]
    );
    assert!(x.split(Sections(vec![i64::MAX, i64::MIN + 5]), 0).is_err());
    // A 0-d tensor: chunk refused ("chunk expects at least a
    // 1-dimensional tensor"), cat refused ("zero-dimensional tensor (at
    // position 0) cannot be concatenated"), stack along -1 gives [2].
    assert!(scalar(1.0).chunk(1, 0).is_err());
    assert!(Tensor::cat(&[&scalar(1.0)], 0).is_err());
    let s = Tensor::stack(&[&scalar(1.0), &scalar(2.0)], -1).unwrap();
    assert_eq!((s.shape(), f32s(&s)), (&[2usize][..], vec![1.0, 2.0]));
    assert!(Tensor::stack(&[&scalar(1.0)], 1).is_err());
    // A legacy 1-D empty tensor is skipped by cat whatever the dim.
    let c = Tensor::cat(&[&m(&[], &[0]), &m(&[1.0; 4], &[2, 2])], 1).unwrap();
    assert_eq!(c.shape(), &[2, 2]);
    // Mixed dtypes promote: cat([tensor([2]), tensor([2.5], f64)]) is f64.
    let c = Tensor::cat(&[&t(&[2i64]), &t(&[2.5f64])], 0).unwrap();
    assert_eq!(c.to_vec::<f64>().unwrap(), vec![2.0, 2.5]);
}

// ------------------------------------------------ in-place on odd targets

#[test]
fn in_place_ops_on_expanded_and_self_overlapping_targets() {
    // torch.ones(1).expand(3).zero_() and .fill_(5) are allowed (the one
    // element is written).
    let b = t(&[1.0f32]);
    b.expand(&[3]).unwrap().zero_().unwrap();
    assert_eq!(f32s(&b), vec![0.0]);
    b.expand(&[3]).unwrap().fill_(5.0).unwrap();
    assert_eq!(f32s(&b), vec![5.0]);
    // Everything else: "unsupported operation: more than one element of the
    // written-to tensor refers to a single memory location"; b unchanged.
    let e = b.expand(&[3]).unwrap();
    let results = [
        e.add_(1.0),
        e.sqrt_(),
        e.mul_(2.0),
        e.pow_(2.0),
        e.clamp_(Some(Scalar::Float(7.0)), None::<Scalar>),
        e.copy_(&t(&[7.0f32, 7.0, 7.0])),
        e.addcmul_(&t(&[1.0f32]), &t(&[1.0f32]), 1.0),
    ];
    for r in results {
        assert!(matches!(r, Err(TensorError::Overlap { .. })), "{r:?}");
    }
    assert_eq!(f32s(&b), vec![5.0]);
    // A 2x2 view and its own transpose: "some elements of the input tensor
    // and the written-to tensor refer to a single memory location" for
    // copy_ and add_; x unchanged.
    let x = t(&[1.0f32, 2.0, 3.0, 4.0]);
    let v = x.view(&[2, 2]).unwrap();
    assert!(matches!(
        v.copy_(&v.t().unwrap()),
        Err(TensorError::Overlap { .. })
    ));
    assert!(matches!(
        v.add_(&v.t().unwrap()),
        Err(TensorError::Overlap { .. })
    ));
    assert_eq!(f32s(&x), vec![1.0, 2.0, 3.0, 4.0]);
    // x.add_(x) is allowed: [2, 4, 6, 8]; x[1:].copy_(x[0:1].expand(3))
    // reads memory it does not write: [2, 2, 2, 2].
    x.add_(&x).unwrap();
    assert_eq!(f32s(&x), vec![2.0, 4.0, 6.0, 8.0]);
    x.narrow(0, 1, 3)
        .unwrap()
        .copy_(&x.narrow(0, 0, 1).unwrap().expand(&[3]).unwrap())
        .unwrap();
    assert_eq!(f32s(&x), vec![2.0; 4]);
}

// ------------------------------------------------- integer scalars, clamp

#[test]
fn integer_scalars_wrap_as_in_pytorch() {
    // torch.tensor([1, 5], int32) + 2**40: [1, 5] (the scalar wraps to 0);
    // + (2**63 - 1): [0, 4]; uint8 [1, 5] - 10: [247, 251]; * 300: [44, 220];
    // uint8 + (-1): [0, 4].
    let i = t(&[1i32, 5]);
    assert_eq!(
        i.add(1i64 << 40).unwrap().to_vec::<i32>().unwrap(),
        vec![1, 5]
    );
    assert_eq!(
        i.add(i64::MAX).unwrap().to_vec::<i32>().unwrap(),
        vec![0, 4]
    );
    let u = t(&[1u8, 5]);
    assert_eq!(
        u.sub(10i64).unwrap().to_vec::<u8>().unwrap(),
        vec![247, 251]
    );
    assert_eq!(
        u.mul(300i64).unwrap().to_vec::<u8>().unwrap(),
        vec![44, 220]
    );
    assert_eq!(u.add(-1i64).unwrap().to_vec::<u8>().unwrap(), vec![0, 4]);
    // i64::MIN: abs, neg and floor-division by -1 give i64::MIN.
    let mn = t(&[i64::MIN]);
    assert_eq!(mn.abs().unwrap().to_vec::<i64>().unwrap(), vec![i64::MIN]);
    assert_eq!(mn.neg().unwrap().to_vec::<i64>().unwrap(), vec![i64::MIN]);
    let d = mn
        .div_mode(-1i64, strata_tensor::RoundingMode::Floor)
        .unwrap();
    assert_eq!(d.to_vec::<i64>().unwrap(), vec![i64::MIN]);
    // fill_ of an integer tensor with NaN: "value cannot be converted to
    // type int64_t without overflow"; the tensor unchanged.
    let y = t(&[1i64, 5]);
    assert!(matches!(y.fill_(f64::NAN), Err(TensorError::Value { .. })));
    assert_eq!(y.to_vec::<i64>().unwrap(), vec![1, 5]);
}

#[test]
fn clamp_bounds_at_the_edges() {
    let x = t(&[1.0f32, 5.0, 9.0]);
    // clamp(6, 2): every element is max = 2; a NaN min makes every element NaN.
    assert_eq!(
        f32s(
            &x.clamp(Some(Scalar::Float(6.0)), Some(Scalar::Float(2.0)))
                .unwrap()
        ),
        vec![2.0; 3]
    );
    let n = x
        .clamp(Some(Scalar::Float(f64::NAN)), None::<Scalar>)
        .unwrap();
    assert!(f32s(&n).iter().all(|v| v.is_nan()));
    // An int64 tensor with a float bound: a float result [2.5, 5, 9].
    let c = t(&[1i64, 5, 9])
        .clamp(Some(Scalar::Float(2.5)), None::<Scalar>)
        .unwrap();
    assert_eq!((c.dtype(), f32s(&c)), (DType::F32, vec![2.5, 5.0, 9.0]));
    // int32 with a bound of 2^40: "Clamp min value ... is outside the
    // representable range of Int"; uint8 with (-1, 4): [1, 4, 4]; bool with
    // (0, 1): int64 [1, 0]; f16 with max 1e6: "value cannot be converted
    // to type c10::Half without overflow"; neither bound: refused.
    assert!(matches!(
        t(&[1i32, 5, 9]).clamp(Some(Scalar::Int(1 << 40)), None::<Scalar>),
        Err(TensorError::Value { .. })
    ));
    let u = t(&[1u8, 5, 9])
        .clamp(Some(Scalar::Int(-1)), Some(Scalar::Int(4)))
        .unwrap();
    assert_eq!(u.to_vec::<u8>().unwrap(), vec![1, 4, 4]);
    let b = t(&[true, false])
        .clamp(Some(Scalar::Int(0)), Some(Scalar::Int(1)))
        .unwrap();
    assert_eq!(
        (b.dtype(), b.to_vec::<i64>().unwrap()),
        (DType::I64, vec![1, 0])
    );
    let h = t(&[1.0f32]).to_dtype(DType::F16).unwrap();
    assert!(matches!(
        h.clamp(None::<Scalar>, Some(Scalar::Float(1e6))),
        Err(TensorError::Value { .. })
    ));
    assert!(x.clamp(None::<Scalar>, None::<Scalar>).is_err());
}

#[test]
fn allclose_tolerances_and_infinities() {
    let one = t(&[1.0f32]);
    // rtol -1 or NaN: "rtol must be greater than or equal to zero".
    assert!(one.allclose(&one, -1.0, 0.0).is_err());
    assert!(one.allclose(&t(&[2.0f32]), f64::NAN, f64::NAN).is_err());
    // atol = inf: 1 and 2 are close; 1 and inf are not, nor inf and -inf;
    // inf and inf are, with zero tolerances. Shapes broadcast ([1] vs [2]).
    assert!(one.allclose(&t(&[2.0f32]), 0.0, f64::INFINITY).unwrap());
    assert!(!one
        .allclose(&t(&[f32::INFINITY]), 0.0, f64::INFINITY)
        .unwrap());
    let inf = t(&[f32::INFINITY]);
    assert!(!inf
        .allclose(&t(&[f32::NEG_INFINITY]), 0.0, f64::INFINITY)
        .unwrap());
    assert!(inf.allclose(&inf, 0.0, 0.0).unwrap());
    assert!(one.allclose(&t(&[1.0f32, 1.0]), 0.0, 0.0).unwrap());
    // torch.equal: other shapes false, NaN != NaN, -0 == 0, and int64 [1]
    // equals float [1] (True in PyTorch 2.15).
    assert!(!one.equal(&m(&[1.0], &[1, 1])).unwrap());
    assert!(!t(&[f32::NAN]).equal(&t(&[f32::NAN])).unwrap());
    assert!(t(&[-0.0f32]).equal(&t(&[0.0f32])).unwrap());
    assert!(one.equal(&t(&[1i64])).unwrap());
}
