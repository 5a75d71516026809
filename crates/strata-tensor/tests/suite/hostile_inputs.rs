//! Hostile inputs to public entry points that the adversarial suites do not
//! reach: slice items built from huge `usize`/`i64` bounds, the backward
//! helpers `layer_norm_backward` and `cross_entropy_backward` given saved
//! tensors that do not belong to their input (they used to read and write
//! outside their storages: garbage results, or SIGSEGV), `adam_step_` on a
//! moment whose elements alias (it used to update the parameter before
//! failing), `dropout_mask` with a probability outside [0, 1]. Each asserts
//! the typed error's variant and, where state is involved, that nothing
//! changed.

use strata_tensor::{
    s, AdamHyper, CrossEntropyArgs, CrossEntropySaved, DType, Device, SliceItem, Tensor,
    TensorError,
};

const CPU: Device = Device::Cpu;

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn grid() -> Tensor {
    Tensor::arange(0i64, 12, 1, None, CPU)
        .unwrap()
        .view(&[3, 4])
        .unwrap()
}

#[test]
fn a_usize_index_past_i64_max_is_out_of_range_not_the_last_row() {
    // `usize::MAX as i64` is -1: it used to select the last row.
    let e = grid().i(s![usize::MAX]).unwrap_err();
    assert!(matches!(e, TensorError::Index { .. }), "{e}");
    let e = grid()
        .i([SliceItem::from(usize::MAX), SliceItem::from(0)])
        .unwrap_err();
    assert!(matches!(e, TensorError::Index { .. }), "{e}");
}

#[test]
fn huge_range_bounds_saturate_instead_of_wrapping() {
    let x = grid();
    // Start past the end: empty (it used to start at the last row).
    assert_eq!(x.i(s![usize::MAX..]).unwrap().shape(), &[0, 4]);
    // End past the end: everything (it used to stop before the last row).
    assert_eq!(x.i(s![..usize::MAX]).unwrap().shape(), &[3, 4]);
    assert_eq!(x.i(s![1..usize::MAX]).unwrap().shape(), &[2, 4]);
    // An inclusive end of i64::MAX: everything (`e + 1` wrapped to
    // i64::MIN, giving an empty view; a debug build panicked).
    assert_eq!(x.i(s![0..=i64::MAX]).unwrap().shape(), &[3, 4]);
    assert_eq!(x.i(s![..=i64::MAX, 1..=i64::MAX]).unwrap().shape(), &[3, 3]);
    assert_eq!(x.i(s![..=usize::MAX]).unwrap().shape(), &[3, 4]);
    assert_eq!(
        x.i(s![..=i64::MAX; 2, 3]).unwrap().to_vec::<i64>().unwrap(),
        vec![3, 11]
    );
}

/// A [4, 3] input, the forward's mean and rstd, and a gradient.
fn ln_case() -> (Tensor, Tensor, Tensor, Tensor) {
    let x = Tensor::randn(&[4, 3], DType::F32, 7, CPU).unwrap();
    let (_, mean, rstd) = x.layer_norm_forward(&[3], None, None, 1e-5).unwrap();
    let dy = Tensor::randn(&[4, 3], DType::F32, 8, CPU).unwrap();
    (x, mean, rstd, dy)
}

/// layer_norm_backward's gradient, mean, rstd, weight and normalized_shape.
type LnBackwardArgs<'a> = (
    &'a Tensor,
    &'a Tensor,
    &'a Tensor,
    Option<&'a Tensor>,
    &'a [usize],
);

#[test]
fn layer_norm_backward_checks_its_saved_tensors() {
    let (x, mean, rstd, dy) = ln_case();
    let all = [true, true, true];
    let shape_err = |r: Result<[Option<Tensor>; 3], TensorError>| match r {
        Err(TensorError::Shape { op, .. }) => assert_eq!(op, "layer_norm_backward"),
        Err(e) => panic!("expected a Shape error, got {e}"),
        Ok(_) => panic!("expected a Shape error, got a result"),
    };
    let one = Tensor::zeros(&[1], DType::F32, CPU).unwrap();
    // (gradient, mean, rstd, weight, normalized_shape) that do not fit x.
    let cases: [LnBackwardArgs; 5] = [
        // A mean/rstd of another input (one row instead of four).
        (&dy, &one, &one, None, &[3]),
        // A gradient of another shape.
        (&one, &mean, &rstd, None, &[3]),
        // A normalized_shape that is not the input's trailing dims.
        (&dy, &mean, &rstd, None, &[7]),
        (&dy, &mean, &rstd, None, &[]),
        // A weight of the wrong length.
        (&dy, &mean, &rstd, Some(&one), &[3]),
    ];
    for (g, m, r, w, shape) in cases {
        shape_err(Tensor::layer_norm_backward(g, &x, m, r, w, shape, all));
    }
    // Saved statistics of a 1-byte dtype (the parameter gradients took the
    // statistics' dtype and were written as 2-byte bf16).
    let u8s = Tensor::zeros(&[4], DType::U8, CPU).unwrap();
    shape_err(Tensor::layer_norm_backward(
        &dy,
        &x,
        &u8s,
        &u8s,
        None,
        &[3],
        [false, true, true],
    ));
    // An integer input was read as bf16.
    let xi = Tensor::zeros(&[4, 3], DType::I64, CPU).unwrap();
    let e = Tensor::layer_norm_backward(&xi, &xi, &mean, &rstd, None, &[3], all).unwrap_err();
    assert!(matches!(e, TensorError::DType { .. }), "{e}");
    // An f64 weight beside f32 input.
    let w64 = Tensor::ones(&[3], DType::F64, CPU).unwrap();
    let e = Tensor::layer_norm_backward(&dy, &x, &mean, &rstd, Some(&w64), &[3], all).unwrap_err();
    assert!(matches!(e, TensorError::DType { .. }), "{e}");
}

#[test]
fn layer_norm_backward_reads_strided_statistics_by_their_strides() {
    let (x, mean, rstd, dy) = ln_case();
    let want = Tensor::layer_norm_backward(&dy, &x, &mean, &rstd, None, &[3], [true; 3]).unwrap();
    // The same statistics as every other element of a longer tensor: the
    // kernel used to read them as if contiguous.
    let spread = |t: &Tensor| {
        let wide = Tensor::zeros(&[4, 2], DType::F32, CPU).unwrap();
        wide.select(1, 0).unwrap().copy_(t).unwrap();
        wide.select(1, 0).unwrap()
    };
    let (ms, rs) = (spread(&mean), spread(&rstd));
    assert!(!ms.is_contiguous());
    let got = Tensor::layer_norm_backward(&dy, &x, &ms, &rs, None, &[3], [true; 3]).unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(f32s(g.as_ref().unwrap()), f32s(w.as_ref().unwrap()));
    }
}

/// [4, 3] logits, their targets and what the forward saved.
fn ce_case() -> (Tensor, CrossEntropySaved) {
    let x = Tensor::randn(&[4, 3], DType::F32, 3, CPU).unwrap();
    let t = Tensor::from_slice(&[0i64, 1, 2, 1], &[4], CPU).unwrap();
    let (_, saved) = x
        .cross_entropy_forward(&t, CrossEntropyArgs::default())
        .unwrap();
    (x, saved.unwrap())
}

#[test]
fn cross_entropy_backward_checks_targets_against_the_classes() {
    let (x, saved) = ce_case();
    let g = Tensor::scalar(1.0, DType::F32, CPU).unwrap();
    let w = Tensor::ones(&[3], DType::F32, CPU).unwrap();
    let args = CrossEntropyArgs {
        weight: Some(&w),
        ..Default::default()
    };
    // A target past the classes indexed the weight out of bounds (SIGSEGV).
    for bad in [3i64, 1_000_000_000, -5] {
        let edited = CrossEntropySaved {
            target: Tensor::from_slice(&[0i64, 1, 2, bad], &[4], CPU).unwrap(),
            ..saved.clone()
        };
        let e = x.cross_entropy_backward(&g, &edited, args).unwrap_err();
        assert!(matches!(e, TensorError::Index { .. }), "{bad}: {e}");
    }
    // A target equal to the backward's ignore_index is fine.
    let ignored = CrossEntropySaved {
        target: Tensor::from_slice(&[0i64, 1, 2, -100], &[4], CPU).unwrap(),
        ..saved.clone()
    };
    let dx = x.cross_entropy_backward(&g, &ignored, args).unwrap();
    assert_eq!(&f32s(&dx)[9..], &[0.0, 0.0, 0.0]);
}

#[test]
fn cross_entropy_backward_checks_saved_tensors_and_weight() {
    let (x, saved) = ce_case();
    let g = Tensor::scalar(1.0, DType::F32, CPU).unwrap();
    let ok = x
        .cross_entropy_backward(&g, &saved, CrossEntropyArgs::default())
        .unwrap();
    assert_eq!(ok.shape(), &[4, 3]);
    let shape_err = |r: Result<Tensor, TensorError>| match r {
        Err(TensorError::Shape { .. }) => {}
        Err(e) => panic!("expected a Shape error, got {e}"),
        Ok(_) => panic!("expected a Shape error, got a result"),
    };
    // The saved tensors of 4 rows beside 64 rows of logits.
    let big = Tensor::randn(&[64, 3], DType::F32, 0, CPU).unwrap();
    shape_err(big.cross_entropy_backward(&g, &saved, CrossEntropyArgs::default()));
    // i32 targets were read as i64 (past the end of their storage).
    let i32_targets = CrossEntropySaved {
        target: Tensor::from_slice(&[0i32, 1, 2, 1], &[4], CPU).unwrap(),
        ..saved.clone()
    };
    shape_err(x.cross_entropy_backward(&g, &i32_targets, CrossEntropyArgs::default()));
    // A logsumexp of the wrong shape or dtype.
    let short_lse = CrossEntropySaved {
        lse: Tensor::zeros(&[1, 2], DType::F32, CPU).unwrap(),
        ..saved.clone()
    };
    shape_err(x.cross_entropy_backward(&g, &short_lse, CrossEntropyArgs::default()));
    let f64_lse = CrossEntropySaved {
        lse: Tensor::zeros(&[4, 2], DType::F64, CPU).unwrap(),
        ..saved.clone()
    };
    shape_err(x.cross_entropy_backward(&g, &f64_lse, CrossEntropyArgs::default()));
    // A weight shorter than the classes.
    let w1 = Tensor::ones(&[1], DType::F32, CPU).unwrap();
    shape_err(x.cross_entropy_backward(
        &g,
        &saved,
        CrossEntropyArgs {
            weight: Some(&w1),
            ..Default::default()
        },
    ));
    // Integer logits were read as bf16.
    let xi = Tensor::zeros(&[4, 3], DType::U8, CPU).unwrap();
    let e = xi
        .cross_entropy_backward(&g, &saved, CrossEntropyArgs::default())
        .unwrap_err();
    assert!(matches!(e, TensorError::DType { .. }), "{e}");
    // label_smoothing above 1, as the forward refuses it.
    let e = x
        .cross_entropy_backward(
            &g,
            &saved,
            CrossEntropyArgs {
                label_smoothing: 1.5,
                ..Default::default()
            },
        )
        .unwrap_err();
    assert!(matches!(e, TensorError::Value { .. }), "{e}");
}

#[test]
fn adam_step_on_an_aliased_moment_changes_nothing() {
    let h = AdamHyper {
        lr: 0.1,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.5,
        step: 1,
    };
    let g = Tensor::from_slice(&[0.5f32, 0.5], &[2], CPU).unwrap();
    let expanded = || {
        Tensor::zeros(&[1], DType::F32, CPU)
            .unwrap()
            .expand(&[2])
            .unwrap()
    };
    // exp_avg expanded: the parameter used to be decayed before the error.
    let p = Tensor::from_slice(&[1.0f32, 2.0], &[2], CPU).unwrap();
    let v = Tensor::zeros(&[2], DType::F32, CPU).unwrap();
    let e = p.adam_step_(&g, &expanded(), &v, h).unwrap_err();
    assert!(matches!(e, TensorError::Overlap { .. }), "{e}");
    assert_eq!(f32s(&p), vec![1.0, 2.0]);
    assert_eq!(f32s(&v), vec![0.0, 0.0]);
    // exp_avg_sq expanded: exp_avg used to be updated before the error.
    let m = Tensor::zeros(&[2], DType::F32, CPU).unwrap();
    let e = p.adam_step_(&g, &m, &expanded(), h).unwrap_err();
    assert!(matches!(e, TensorError::Overlap { .. }), "{e}");
    assert_eq!(f32s(&p), vec![1.0, 2.0]);
    assert_eq!(f32s(&m), vec![0.0, 0.0]);
    // The parameter expanded: both moments used to be updated.
    let pe = Tensor::from_slice(&[1.0f32], &[1], CPU)
        .unwrap()
        .expand(&[2])
        .unwrap();
    let e = pe
        .adam_step_(
            &g,
            &m,
            &v,
            AdamHyper {
                weight_decay: 0.0,
                ..h
            },
        )
        .unwrap_err();
    assert!(matches!(e, TensorError::Overlap { .. }), "{e}");
    assert_eq!(f32s(&m), vec![0.0, 0.0]);
    assert_eq!(f32s(&v), vec![0.0, 0.0]);
}

#[test]
fn dropout_mask_refuses_a_probability_outside_zero_one() {
    for p in [f64::NAN, -0.5, 2.0, f64::INFINITY] {
        let e = Tensor::dropout_mask(&[3], p, 0, CPU).unwrap_err();
        assert!(matches!(e, TensorError::Value { .. }), "{p}: {e}");
    }
    assert_eq!(
        Tensor::dropout_mask(&[3], 0.0, 0, CPU).unwrap().shape(),
        &[3]
    );
}
