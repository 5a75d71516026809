//! Session 36's sweep of hostile inputs to strata-tensor (after
//! `hostile_sweep_s35.rs`): hand-built [`Layout`]s (its fields are public)
//! whose shape and strides disagree in length or whose extent passes
//! `usize`, and, checked against PyTorch 2.15 (CPU, x86) and noted beside
//! each assertion, scans, arg-reductions, index ops, views and creation ops
//! at the edges of their arguments.
//!
//! Defects these tests found (fixed with them):
//!
//! * `Layout`'s methods indexed `strides[d]` for every dim of `shape`, so a
//!   layout built by hand with fewer strides than sizes panicked (index out
//!   of bounds) in `is_contiguous`, `is_dense`, `may_overlap`, `indices`
//!   and every view transform (`transpose`, `permute`, `narrow`, `select`,
//!   `slice`, `expand`, `squeeze`, `unsqueeze`), and `indices` added strides
//!   past `usize::MAX` (a wrapped position) for a layout whose extent does
//!   not fit. The transforms now refuse a malformed layout with
//!   [`TensorError::Shape`]; the predicates answer conservatively
//!   (not contiguous, not dense, may overlap, no extent) and `indices`
//!   yields nothing for a layout `checked_extent` refuses.
//! * `shape::view_strides` (public) unwrapped the last stride and indexed
//!   `old_strides` by `old_shape`'s dims, so strides shorter than the shape
//!   panicked; a 0-d shape "viewed" as `[5]` got `Some([1])`; and its
//!   running size product could wrap. It now answers `None` for strides
//!   not one per size, element counts that differ, or sizes whose product
//!   passes `usize`.
//! * `shape::normalize_dim` (public) cast the rank to i64, so a rank past
//!   `i64::MAX` wrapped negative and refused every dim (and `-n`, `n - 1`
//!   overflowed in a debug build); it now compares in i128.

use strata_tensor::layout::Layout;
use strata_tensor::TensorError;

/// Two sizes but one stride: nothing may index past the shorter list.
fn ragged() -> Layout {
    Layout {
        shape: vec![2, 3],
        strides: vec![1],
        offset: 0,
    }
}

fn shape_err(r: Result<Layout, TensorError>) -> String {
    match r {
        Err(e @ TensorError::Shape { .. }) => e.to_string(),
        other => panic!("expected a shape error, got {other:?}"),
    }
}

#[test]
fn a_layout_with_fewer_strides_than_sizes_is_refused_not_a_panic() {
    let l = ragged();
    // Yes/no questions: the conservative answer.
    assert!(!l.is_contiguous());
    assert!(!l.is_dense());
    assert!(l.may_overlap());
    assert_eq!(l.checked_extent(), None);
    assert_eq!(l.storage_extent(), usize::MAX);
    assert_eq!(l.indices().count(), 0);
    // Transforms: a shape error naming the op and both lengths.
    let msg = shape_err(l.transpose(0, 1));
    assert!(
        msg.contains("transpose") && msg.contains("2 sizes") && msg.contains("1 stride"),
        "{msg}"
    );
    for r in [
        l.t(),
        l.permute(&[1, 0]),
        l.narrow(1, 0, 1),
        l.select(1, 0),
        l.slice(1, None, None, 1),
        l.expand(&[2, 3]),
        l.squeeze(None),
        l.unsqueeze(2),
    ] {
        shape_err(r);
    }
    // More strides than sizes is as malformed.
    let extra = Layout {
        shape: vec![4],
        strides: vec![1, 1],
        offset: 0,
    };
    assert!(!extra.is_contiguous());
    shape_err(extra.select(0, 3));
    // The layout itself is untouched.
    assert_eq!(l, ragged());
}

#[test]
fn a_layout_reaching_past_usize_yields_no_wrapped_index() {
    // Offset + (2 - 1) * usize::MAX does not fit: no index may wrap to a
    // small position inside some storage.
    let l = Layout {
        shape: vec![2],
        strides: vec![usize::MAX],
        offset: 5,
    };
    assert_eq!(l.checked_extent(), None);
    assert_eq!(l.indices().count(), 0);
    // A well-formed layout still walks its elements (a transposed 2 x 3).
    let t = Layout::contiguous(&[2, 3]).t().unwrap();
    assert_eq!(t.indices().collect::<Vec<_>>(), vec![0, 3, 1, 4, 2, 5]);
    // is_contiguous multiplies sizes without wrapping.
    let big = Layout {
        shape: vec![2, 1 << 62, 1 << 62],
        strides: vec![0, 1 << 62, 1],
        offset: 0,
    };
    assert!(!big.is_contiguous());
}

#[test]
fn view_strides_of_malformed_or_mismatched_input_is_none_not_a_panic() {
    use strata_tensor::shape::view_strides;
    // One stride for two sizes, and no stride at all.
    assert_eq!(view_strides(&[2, 3], &[1], &[6]), None);
    assert_eq!(view_strides(&[2, 3], &[], &[6]), None);
    // Element counts that differ: no view can exist (a 0-d tensor of one
    // element is not a view of 5, nor [2, 3] one of 7).
    assert_eq!(view_strides(&[], &[], &[5]), None);
    assert_eq!(view_strides(&[2, 3], &[3, 1], &[7]), None);
    // Sizes whose product passes usize: no wrapped stride.
    assert_eq!(
        view_strides(&[1 << 40, 1 << 40], &[1 << 40, 1], &[1 << 40, 1 << 40, 1]),
        None
    );
    // Well-formed input keeps PyTorch's answers (computeStride).
    assert_eq!(view_strides(&[], &[], &[1, 1]), Some(vec![1, 1]));
    assert_eq!(view_strides(&[3, 4], &[4, 1], &[2, 6]), Some(vec![6, 1]));
    assert_eq!(view_strides(&[4, 3], &[1, 4], &[12]), None);
    assert_eq!(view_strides(&[0, 3], &[3, 1], &[3, 0]), Some(vec![1, 1]));
}

/// Arguments at the edges of their ranges, each answer PyTorch 2.15's
/// (CPU) for the same call, noted beside it. These already matched.
#[test]
fn edge_arguments_give_pytorchs_answers() {
    use strata_tensor::{DType, Device, RoundingMode, Tensor};
    let cpu = Device::Cpu;
    let u8s = |v: &[u8]| Tensor::from_slice(v, &[v.len()], cpu).unwrap();
    let f32s = |v: &[f32]| Tensor::from_slice(v, &[v.len()], cpu).unwrap();
    let as_f64 = |t: &Tensor| t.to_dtype(DType::F64).unwrap().to_vec::<f64>().unwrap();

    // torch.arange(250, 260, 3, dtype=torch.uint8): [250, 253, 0, 3].
    let a = Tensor::arange(250, 260, 3, Some(DType::U8), cpu).unwrap();
    assert_eq!(a.to_vec::<u8>().unwrap(), vec![250, 253, 0, 3]);
    // torch.zeros(0).chunk(3): three empty tensors.
    let c = Tensor::zeros(&[0], DType::F32, cpu)
        .unwrap()
        .chunk(3, 0)
        .unwrap();
    assert_eq!(c.len(), 3);
    assert!(c.iter().all(|t| t.shape() == [0]));
    // uint8 clamp(min=-1) and clamp(max=300): [1, 200] unchanged.
    let x = u8s(&[1, 200]);
    assert_eq!(
        x.clamp(Some(-1), None::<i64>)
            .unwrap()
            .to_vec::<u8>()
            .unwrap(),
        vec![1, 200]
    );
    assert_eq!(
        x.clamp(None::<i64>, Some(300))
            .unwrap()
            .to_vec::<u8>()
            .unwrap(),
        vec![1, 200]
    );
    // uint8 [1, 200].cumsum(dtype=float16): [1., 201.]; a bool dtype is refused
    // ("cumsum_out_cpu" not implemented for 'Bool').
    let cs = x.cumsum(0, Some(DType::F16)).unwrap();
    assert_eq!(cs.dtype(), DType::F16);
    assert_eq!(
        as_f64(&x.cumsum(0, Some(DType::F16)).unwrap()),
        vec![1.0, 201.0]
    );
    assert!(f32s(&[1.5, 2.5]).cumsum(0, Some(DType::Bool)).is_err());
    // torch.where(cond, half_tensor, 1e10): float16 with inf.
    let cond = Tensor::from_slice(&[true, false], &[2], cpu).unwrap();
    let h = f32s(&[5.0, 6.0]).to_dtype(DType::F16).unwrap();
    let w = Tensor::where_cond(&cond, &h, 1e10).unwrap();
    assert_eq!(w.dtype(), DType::F16);
    assert_eq!(as_f64(&w), vec![5.0, f64::INFINITY]);
    // addcmul on float16 scales in float: 1 + 1e-8 * 1e4 * 1e4 = 2.
    let one = f32s(&[1.0]).to_dtype(DType::F16).unwrap();
    let big = f32s(&[1e4]).to_dtype(DType::F16).unwrap();
    assert_eq!(as_f64(&one.addcmul(&big, &big, 1e-8).unwrap()), vec![2.0]);
    // addcmul on int64 with value=0.5: the value truncates to 0, giving [1].
    let i = |v: i64| Tensor::from_slice(&[v], &[1], cpu).unwrap();
    assert_eq!(
        i(1).addcmul(&i(2), &i(3), 0.5)
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        vec![1]
    );
    // float16 floor division by 0.1: [-70., 69.].
    let q = f32s(&[-7.0, 7.0])
        .to_dtype(DType::F16)
        .unwrap()
        .div_mode(0.1, RoundingMode::Floor)
        .unwrap();
    assert_eq!(as_f64(&q), vec![-70.0, 69.0]);
    // float64 -> bfloat16 rounds through float32 as c10::BFloat16 does:
    // 1 + 2^-8 + 1e-12 gives 1.0 (a direct rounding would give 1.0078125).
    let d = Tensor::full(&[1], 1.00390625 + 1e-12, DType::F64, cpu).unwrap();
    assert_eq!(as_f64(&d.to_dtype(DType::BF16).unwrap()), vec![1.0]);
}

#[test]
fn normalize_dim_for_a_rank_past_i64_max_does_not_wrap() {
    use strata_tensor::shape::normalize_dim;
    // Every dim in [-ndim, ndim) is valid, whatever the rank.
    let huge = usize::MAX;
    assert_eq!(normalize_dim("x", 0, huge).unwrap(), 0);
    assert_eq!(
        normalize_dim("x", i64::MAX, huge).unwrap(),
        i64::MAX as usize
    );
    assert_eq!(normalize_dim("x", -1, huge).unwrap(), usize::MAX - 1);
    assert_eq!(normalize_dim("x", i64::MIN, 1 << 63).unwrap(), 0);
    // And the ordinary ranges keep their messages.
    assert_eq!(normalize_dim("x", -1, 0).unwrap(), 0);
    let e = normalize_dim("x", 2, 2).unwrap_err().to_string();
    assert!(e.contains("expected [-2, 1]"), "{e}");
    let e = normalize_dim("x", i64::MIN, 3).unwrap_err().to_string();
    assert!(e.contains("expected [-3, 2]"), "{e}");
}
