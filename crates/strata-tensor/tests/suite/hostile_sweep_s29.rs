//! Session 29's sweep of hostile inputs to strata-tensor (after
//! `adversarial.rs`, `hostile_inputs*.rs`, `fuzz_ops_fixes.rs` and
//! `hostile_sweep_s27.rs`). Each test asserts the typed error or the values
//! PyTorch 2.15 (CPU) gives for the same call, worked out there and noted
//! beside the assertion.
//!
//! Defects these tests found (fixed with them):
//!
//! * `gather` and `scatter_add(_)` compared ranks literally: a 1-D input
//!   with a 0-d index (`torch.gather(x, 0, torch.tensor(1))` is a 0-d
//!   result) and an empty index of another rank (PyTorch checks nothing
//!   against an empty index) were refused, while a 0-d `self` took a `src`
//!   of any rank that had enough elements (PyTorch: "Index tensor must have
//!   the same number of dimensions as src tensor"). Ranks and sizes now
//!   follow PyTorch's `ensure_nonempty_dim`: a 0-d tensor counts as 1-D.
//! * A float scalar into an integer dtype (`fill_`, `full`, `full_like`,
//!   `masked_fill`, `where`, `addcmul_`'s value) was checked against
//!   `[min, max]` in f64: 2^63 passed for i64 (`i64::MAX as f64` is 2^63)
//!   and filled `i64::MAX`, where PyTorch refuses it, and 255.5 for u8 or
//!   2147483647.5 for i32 were refused, where PyTorch truncates them to the
//!   maximum. The range is now `[min, max + 1)`, PyTorch's.
//! * `TorchCpuGenerator::uniform` took any bounds (`from > to`, NaN, an
//!   infinite or wider-than-`f32::MAX` range gave values outside the range,
//!   NaN or inf) and `normal` a negative or NaN `std`; PyTorch's
//!   `uniform_`/`normal_` refuse all of them. Both are now value errors,
//!   raised before anything is drawn (the stream is where it was).
//! * `std` took the square root as `exp(ln(v) / 2)`: an f64 `std` of
//!   `[0, 6]` (population) was 3.0000000000000004 where PyTorch gives 3; it
//!   is now the correctly rounded square root.
//! * `dropout` refused every integer or bool tensor; PyTorch 2.15 returns
//!   the input unchanged when nothing is dropped (eval, `p = 0`, an empty
//!   tensor) and zeros of its dtype for `p = 1`, whatever the dtype (only
//!   `0 < p < 1` needs a float tensor). strata now does the same.
//! * `embedding` with an index out of range named `index_select` (the op it
//!   is computed with) in its error; it names `embedding` now.
//! * `adam_step_` on non-contiguous operands ran the update op by op,
//!   rounding every step: an f16 or bf16 parameter came out an ulp away
//!   from the contiguous result in many elements (f32 moments in the last
//!   bit), so the same step gave different parameters for different
//!   layouts, and an allocation failure midway left the moments updated
//!   and the parameter not. Strided operands now take the fused kernel on
//!   contiguous copies made before anything is written.
//! * `masked_fill_` with a mask that shares part of self's memory
//!   (`x[1:].masked_fill_(x[:-1], true)` on a bool `x`) filled as if the
//!   mask had been copied first; PyTorch 2.15 refuses it ("some elements of
//!   the input tensor and the written-to tensor refer to a single memory
//!   location"), and so does strata now (`TensorError::Overlap`, self
//!   unchanged). A mask that is self itself is still allowed.

use strata_tensor::torch_random::TorchCpuGenerator;
use strata_tensor::{DType, Device, Scalar, Tensor, TensorError};

const CPU: Device = Device::Cpu;

fn f32t(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape, CPU).unwrap()
}

fn i64t(v: &[i64], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape, CPU).unwrap()
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.to_vec_as::<f32>().unwrap()
}

/// The message of an error of the expected variant (anything else fails).
fn shape_err(r: Result<Tensor, TensorError>) -> String {
    match r {
        Err(e @ TensorError::Shape { .. }) => e.to_string(),
        other => panic!("expected a shape error, got {other:?}"),
    }
}

fn value_err<T: std::fmt::Debug>(r: Result<T, TensorError>) -> String {
    match r {
        Err(e @ TensorError::Value { .. }) => e.to_string(),
        other => panic!("expected a value error, got {other:?}"),
    }
}

// ----- gather / scatter_add: 0-d counts as 1-D, empty index unchecked -----

#[test]
fn gather_takes_a_0d_index_into_a_1d_input_as_pytorch_does() {
    let x = f32t(&[1.0, 2.0, 3.0], &[3]);
    let i = Tensor::scalar(1i64, DType::I64, CPU).unwrap();
    // torch.gather(tensor([1., 2., 3.]), 0, tensor(1)) -> tensor(2.)
    let g = x.gather(0, &i).unwrap();
    assert_eq!(g.shape(), &[] as &[usize]);
    assert_eq!(f32s(&g), [2.0]);
    assert_eq!(f32s(&x.gather(-1, &i).unwrap()), [2.0]);
    // An int32 index too.
    let i32 = Tensor::scalar(2i64, DType::I32, CPU).unwrap();
    assert_eq!(f32s(&x.gather(0, &i32).unwrap()), [3.0]);
    // Still checked: out of range, and a 2-D input with a 0-d index.
    let oob = Tensor::scalar(3i64, DType::I64, CPU).unwrap();
    assert!(matches!(x.gather(0, &oob), Err(TensorError::Index { .. })));
    let m = Tensor::ones(&[2, 2], DType::F32, CPU).unwrap();
    assert!(shape_err(m.gather(0, &i)).contains("same rank"));
    assert!(shape_err(x.gather(0, &i64t(&[0], &[1, 1]))).contains("same rank"));
}

#[test]
fn gather_with_an_empty_index_is_empty_whatever_its_rank() {
    let m = Tensor::ones(&[2, 2], DType::F32, CPU).unwrap();
    // PyTorch: gather(ones(2, 2), 0, empty(0)) -> tensor([]); an empty
    // [0, 5] index (larger than the input on dim 1) -> an empty [0, 5].
    let g = m.gather(0, &i64t(&[], &[0])).unwrap();
    assert_eq!(g.shape(), &[0]);
    let g = m.gather(0, &i64t(&[], &[0, 5])).unwrap();
    assert_eq!((g.shape(), g.dtype()), (&[0, 5][..], DType::F32));
    let g = m.gather(1, &i64t(&[], &[0, 1, 1])).unwrap();
    assert_eq!(g.shape(), &[0, 1, 1]);
    // The dim is still checked against the input.
    assert!(matches!(
        m.gather(2, &i64t(&[], &[0])),
        Err(TensorError::Dim { .. })
    ));
}

#[test]
fn scatter_add_counts_0d_tensors_as_1d() {
    let one = Tensor::scalar(1i64, DType::I64, CPU).unwrap();
    let five = Tensor::scalar(5.0f32, DType::F32, CPU).unwrap();
    // tensor([1., 2.]).scatter_add(0, tensor(1), tensor(5.)) -> [1., 7.]
    let x = f32t(&[1.0, 2.0], &[2]);
    assert_eq!(f32s(&x.scatter_add(0, &one, &five).unwrap()), [1.0, 7.0]);
    // ... with a 1-D src (its first element) -> [1., 7.]
    let src = f32t(&[5.0, 6.0], &[2]);
    assert_eq!(f32s(&x.scatter_add(0, &one, &src).unwrap()), [1.0, 7.0]);
    // ... and a 1-D index [1] with a 0-d src -> [1., 7.]
    let i1 = i64t(&[1], &[1]);
    assert_eq!(f32s(&x.scatter_add(0, &i1, &five).unwrap()), [1.0, 7.0]);
    // In place, f16 too (accumulated in f32).
    let h = f32t(&[1.0, 2.0], &[2]).to_dtype(DType::F16).unwrap();
    h.scatter_add_(0, &one, &five.to_dtype(DType::F16).unwrap())
        .unwrap();
    assert_eq!(f32s(&h), [1.0, 7.0]);
    // tensor(1.).scatter_add(0, tensor(0), tensor([5., 6.])) -> tensor(6.)
    let s = Tensor::scalar(1.0f32, DType::F32, CPU).unwrap();
    let zero = Tensor::scalar(0i64, DType::I64, CPU).unwrap();
    let r = s.scatter_add(0, &zero, &src).unwrap();
    assert_eq!((r.shape(), f32s(&r)), (&[] as &[usize], vec![6.0]));
    // tensor(1.).scatter_add_(0, tensor([0, 0]), tensor([5., 6.])) -> 12.
    let s2 = Tensor::scalar(1.0f32, DType::F32, CPU).unwrap();
    s2.scatter_add_(0, &i64t(&[0, 0], &[2]), &src).unwrap();
    assert_eq!(f32s(&s2), [12.0]);
}

#[test]
fn scatter_add_refuses_what_pytorch_refuses_and_changes_nothing() {
    let src2d = f32t(&[5.0, 6.0], &[1, 2]);
    let s = Tensor::scalar(1.0f32, DType::F32, CPU).unwrap();
    // tensor(1.).scatter_add(0, tensor([0, 0]), tensor([[5., 6.]])):
    // "Index tensor must have the same number of dimensions as src tensor".
    // It used to be accepted (src had enough elements).
    let i = i64t(&[0, 0], &[2]);
    assert!(shape_err(s.scatter_add(0, &i, &src2d)).contains("src"));
    let e = s.scatter_add_(0, &i, &src2d);
    assert!(shape_err(e).contains("src"));
    assert_eq!(f32s(&s), [1.0], "the failed scatter_add_ changed self");
    // tensor([1., 2.]).scatter_add(0, tensor([1, 0]), tensor(5.)): the index
    // is larger than src (a 0-d src counts as size 1).
    let x = f32t(&[1.0, 2.0], &[2]);
    let five = Tensor::scalar(5.0f32, DType::F32, CPU).unwrap();
    assert!(shape_err(x.scatter_add(0, &i64t(&[1, 0], &[2]), &five)).contains("no larger"));
    // A 2-D self with a 0-d index.
    let m = Tensor::ones(&[2, 2], DType::F32, CPU).unwrap();
    let one = Tensor::scalar(1i64, DType::I64, CPU).unwrap();
    assert!(shape_err(m.scatter_add(0, &one, &five)).contains("self"));
    // An empty index: nothing is checked or added (any rank, any src).
    let r = m
        .scatter_add(0, &i64t(&[], &[0, 1, 1]), &f32t(&[1.0; 3], &[3]))
        .unwrap();
    assert_eq!(f32s(&r), [1.0; 4]);
    // ... but src's dtype and the dim are.
    assert!(matches!(
        m.scatter_add(
            0,
            &i64t(&[], &[0]),
            &f32t(&[1.0], &[1]).to_dtype(DType::F64).unwrap()
        ),
        Err(TensorError::DType { .. })
    ));
    assert!(matches!(
        m.scatter_add(5, &i64t(&[], &[0]), &f32t(&[1.0], &[1])),
        Err(TensorError::Dim { .. })
    ));
}

// ----- float scalars into integer dtypes: PyTorch's [min, max + 1) -----

#[test]
fn a_float_fill_past_the_largest_integer_is_refused_not_saturated() {
    let big = 2f64.powi(63);
    // torch.zeros(2, dtype=torch.int64).fill_(2.0**63): "value cannot be
    // converted to type int64_t without overflow". It used to fill i64::MAX.
    let t = Tensor::from_slice(&[7i64, 8], &[2], CPU).unwrap();
    value_err(t.fill_(big));
    assert_eq!(
        t.to_vec::<i64>().unwrap(),
        [7, 8],
        "a failed fill_ changed it"
    );
    value_err(Tensor::full(&[2], big, DType::I64, CPU));
    value_err(t.full_like(big, None));
    let mask = Tensor::from_slice(&[true, false], &[2], CPU).unwrap();
    value_err(t.masked_fill(&mask, big));
    value_err(t.addcmul_(&t, &t.zeros_like(None).unwrap(), big));
    assert_eq!(t.to_vec::<i64>().unwrap(), [7, 8]);
    assert!(!Scalar::Float(big).fits(DType::I64));
    // -2^63 is i64::MIN itself: accepted (torch.full(.., -2.0**63) works).
    let m = Tensor::full(&[1], -big, DType::I64, CPU).unwrap();
    assert_eq!(m.to_vec::<i64>().unwrap(), [i64::MIN]);
    // The largest f64 below 2^63 (2^63 - 1024) fits.
    let below = big - 1024.0;
    let b = Tensor::full(&[1], below, DType::I64, CPU).unwrap();
    assert_eq!(b.to_vec::<i64>().unwrap(), [9_223_372_036_854_774_784]);
}

#[test]
fn a_float_that_truncates_to_the_largest_integer_fits() {
    // PyTorch 2.15: fill_(255.5) of uint8 -> 255, fill_(255.99) -> 255,
    // fill_(256.0) and fill_(-0.5) overflow; fill_(2147483647.5) of int32
    // -> 2147483647, fill_(2147483648.0) and fill_(-2147483648.5) overflow.
    let u = Tensor::zeros(&[2], DType::U8, CPU).unwrap();
    u.fill_(255.5).unwrap();
    assert_eq!(u.to_vec::<u8>().unwrap(), [255, 255]);
    u.fill_(-0.0).unwrap();
    assert_eq!(u.to_vec::<u8>().unwrap(), [0, 0]);
    u.fill_(255.99).unwrap();
    assert_eq!(u.to_vec::<u8>().unwrap(), [255, 255]);
    value_err(u.fill_(256.0));
    value_err(u.fill_(-0.5));
    assert_eq!(u.to_vec::<u8>().unwrap(), [255, 255]);
    let full = Tensor::full(&[2], 255.5, DType::U8, CPU).unwrap();
    assert_eq!(full.to_vec::<u8>().unwrap(), [255, 255]);
    let i = Tensor::zeros(&[1], DType::I32, CPU).unwrap();
    i.fill_(2147483647.5).unwrap();
    assert_eq!(i.to_vec::<i32>().unwrap(), [i32::MAX]);
    value_err(i.fill_(2147483648.0));
    value_err(i.fill_(-2147483648.5));
    i.fill_(-2147483648.0).unwrap();
    assert_eq!(i.to_vec::<i32>().unwrap(), [i32::MIN]);
    // masked_fill: tensor([1, 2], dtype=uint8).masked_fill(mask, 255.5)
    // -> [255, 2].
    let m = Tensor::from_slice(&[true, false], &[2], CPU).unwrap();
    let x = Tensor::from_slice(&[1u8, 2], &[2], CPU).unwrap();
    assert_eq!(
        x.masked_fill(&m, 255.5).unwrap().to_vec::<u8>().unwrap(),
        [255, 2]
    );
    // Integers keep their rule (u8 takes -255..=255, wrapping).
    u.fill_(-1i64).unwrap();
    assert_eq!(u.to_vec::<u8>().unwrap(), [255, 255]);
    value_err(u.fill_(-256i64));
    // Floats into float dtypes are unchanged: f32 refuses past f32::MAX.
    value_err(Tensor::zeros(&[2], DType::F32, CPU).unwrap().fill_(3.5e38));
    assert!(Scalar::Float(255.5).fits(DType::U8));
    assert!(!Scalar::Float(f64::NAN).fits(DType::U8));
}

// ----- TorchCpuGenerator: PyTorch's checks of uniform_ and normal_ -----

#[test]
fn uniform_and_normal_refuse_bad_ranges_and_leave_the_stream_alone() {
    let mut g = TorchCpuGenerator::new(0);
    // torch.empty(3).uniform_(1, 0): "uniform_ expects to return a [from,
    // to) range, but found from=1 > to=0" (also for an empty tensor).
    assert!(value_err(g.uniform(3, 1.0, 0.0)).contains("from=1 > to=0"));
    assert!(value_err(g.uniform(0, 1.0, 0.0)).contains("from=1 > to=0"));
    // NaN or infinite bounds: "from is out of bounds for float".
    assert!(value_err(g.uniform(3, f32::NAN, 1.0)).contains("from"));
    assert!(value_err(g.uniform(3, 0.0, f32::INFINITY)).contains("to"));
    // -f32::MAX..f32::MAX: "uniform_ expects to-from <= max".
    value_err(g.uniform(3, -f32::MAX, f32::MAX));
    // torch.empty(3).normal_(0, -1) / (0, nan): "normal expects std >= 0.0".
    assert!(value_err(g.normal(3, 0.0, -1.0)).contains("std >= 0.0"));
    value_err(g.normal(0, 0.0, -1.0));
    value_err(g.normal(20, 0.0, f32::NAN));
    // Nothing was drawn: torch.manual_seed(0); torch.rand(5) (the stream's
    // first five floats, bit for bit).
    let bits: Vec<u32> = g
        .uniform(5, 0.0, 1.0)
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect();
    assert_eq!(
        bits,
        [1056839000, 1061464623, 1035285416, 1040659200, 1050502790]
    );
    // Accepted edges: an empty range (from == to gives from), a range of
    // f32::MAX, a zero std (gives the mean).
    let mut h = TorchCpuGenerator::new(1);
    assert_eq!(h.uniform(3, 1.0, 1.0).unwrap(), [1.0; 3]);
    assert!(h
        .uniform(3, 0.0, f32::MAX)
        .unwrap()
        .iter()
        .all(|v| v.is_finite() && *v >= 0.0));
    assert_eq!(h.normal(3, 2.0, 0.0).unwrap(), [2.0; 3]);
}

// ----- std: the correctly rounded square root -----

#[test]
fn std_is_the_correctly_rounded_root() {
    // torch.tensor([0., 6.], dtype=float64).std(correction=0) -> 3.0 exactly
    // (exp(ln(9) / 2) is 3.0000000000000004).
    let x = Tensor::from_slice(&[0.0f64, 6.0], &[2], CPU).unwrap();
    assert_eq!(x.std(None, 0.0, false).unwrap().item::<f64>().unwrap(), 3.0);
    let rows = Tensor::from_slice(&[0.0f64, 6.0, 0.0, 2.0], &[2, 2], CPU).unwrap();
    let s = rows.std(Some(&[1]), 0.0, false).unwrap();
    assert_eq!(s.to_vec::<f64>().unwrap(), [3.0, 1.0]);
    // Unbiased, 1..=10: var = 55 / 6; the reference is f64's own sqrt.
    let v: Vec<f64> = (1..=10).map(f64::from).collect();
    let t = Tensor::from_slice(&v, &[10], CPU).unwrap();
    let got = t.std(None, 1.0, false).unwrap().item::<f64>().unwrap();
    assert_eq!(got, (55.0f64 / 6.0).sqrt());
    // f32 rounds the f64 root once: sqrt(2) for [0, 2] (correction 1).
    let f = f32t(&[0.0, 2.0], &[2]);
    let got = f.std(None, 1.0, false).unwrap().item::<f32>().unwrap();
    assert_eq!(got, 2f64.sqrt() as f32);
    // The edges: nothing to reduce is NaN, a correction past n is +inf.
    let e = f32t(&[], &[0]).std(None, 1.0, false).unwrap();
    assert!(e.item::<f32>().unwrap().is_nan());
    let inf = f32t(&[1.0, 2.0], &[2]).std(None, 5.0, false).unwrap();
    assert_eq!(inf.item::<f32>().unwrap(), f32::INFINITY);
}

// ----- dropout of integer and bool tensors; embedding's own errors -----

#[test]
fn dropout_passes_integer_tensors_through_where_pytorch_does() {
    let x = i64t(&[1, 2, 3], &[3]);
    // F.dropout(tensor([1, 2, 3]), p=0.0) -> the input; training=False ->
    // the input; p=1.0 -> zeros of int64; an empty int64 tensor -> itself.
    for (p, train) in [(0.0, true), (0.5, false), (1.0, false)] {
        let y = x.dropout(p, train, 7).unwrap();
        assert_eq!(
            (y.dtype(), y.to_vec::<i64>().unwrap()),
            (DType::I64, vec![1, 2, 3])
        );
    }
    let z = x.dropout(1.0, true, 7).unwrap();
    assert_eq!(
        (z.dtype(), z.to_vec::<i64>().unwrap()),
        (DType::I64, vec![0, 0, 0])
    );
    let e = i64t(&[], &[0]).dropout(0.5, true, 7).unwrap();
    assert_eq!((e.dtype(), e.shape()), (DType::I64, &[0][..]));
    // F.dropout(ones(2, dtype=bool), p=1.0) -> [False, False].
    let b = Tensor::from_slice(&[true, true], &[2], CPU).unwrap();
    assert_eq!(
        b.dropout(1.0, true, 7).unwrap().to_vec::<bool>().unwrap(),
        [false, false]
    );
    // 0 < p < 1 on an integer tensor: PyTorch's "result type Float can't
    // be cast to the desired output type Long"; a NaN p is refused first.
    assert!(matches!(
        x.dropout(0.5, true, 7),
        Err(TensorError::DType { .. })
    ));
    value_err(x.dropout(f64::NAN, false, 7));
    value_err(x.dropout(1.5, false, 7));
    assert_eq!(x.to_vec::<i64>().unwrap(), [1, 2, 3]);
}

#[test]
fn embedding_names_itself_in_an_index_error() {
    let w = Tensor::ones(&[3, 2], DType::F32, CPU).unwrap();
    for bad in [-1i64, 3] {
        let e = Tensor::embedding(&i64t(&[0, bad], &[2]), &w, None).unwrap_err();
        match e {
            TensorError::Index { op, msg } => {
                assert_eq!(op, "embedding");
                assert!(msg.contains(&bad.to_string()), "{msg}");
            }
            other => panic!("expected an index error, got {other:?}"),
        }
    }
    // F.embedding(tensor(1), arange(6.).view(3, 2)) -> tensor([2., 3.]).
    let w6 = f32t(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0], &[3, 2]);
    let one = Tensor::scalar(1i64, DType::I64, CPU).unwrap();
    let r = Tensor::embedding(&one, &w6, None).unwrap();
    assert_eq!((r.shape(), f32s(&r)), (&[2][..], vec![2.0, 3.0]));
}

// ----- adam_step_: the same update whatever the layout -----

#[test]
fn adam_on_strided_operands_matches_the_contiguous_update_bit_for_bit() {
    let h = strata_tensor::AdamHyper {
        lr: 0.1,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.01,
        step: 3,
    };
    let p0: Vec<f32> = (0..16).map(|i| 0.37 * i as f32 - 2.1).collect();
    let g0: Vec<f32> = (0..16).map(|i| 0.11 * (i as f32).sin() + 0.013).collect();
    let m0: Vec<f32> = g0.iter().map(|g| 0.5 * g).collect();
    let v0: Vec<f32> = g0.iter().map(|g| g * g).collect();
    for dt in [DType::F16, DType::BF16, DType::F32] {
        let mk = |v: &[f32]| f32t(v, &[4, 4]).to_dtype(dt).unwrap();
        // The same logical [4, 4] through a transposed storage.
        let mkt = |v: &[f32]| mk(v).t().unwrap().contiguous().unwrap().t().unwrap();
        let (p, g, m, v) = (mk(&p0), mk(&g0), mk(&m0), mk(&v0));
        p.adam_step_(&g, &m, &v, h).unwrap();
        let (ps, gs, ms, vs) = (mkt(&p0), mkt(&g0), mkt(&m0), mkt(&v0));
        assert!(!ps.is_contiguous() && !ms.is_contiguous());
        ps.adam_step_(&gs, &ms, &vs, h).unwrap();
        for (a, b, what) in [
            (&p, &ps, "param"),
            (&m, &ms, "exp_avg"),
            (&v, &vs, "exp_avg_sq"),
        ] {
            assert_eq!(f32s(a), f32s(b), "{dt}: {what} depends on the layout");
        }
        // Both are PyTorch's Adam step (f64 reference, rounding of the dtype).
        let tol = match dt {
            DType::F32 => 1e-6,
            DType::F16 => 2e-3,
            _ => 1.6e-2,
        };
        let (c1, c2) = (1.0 - 0.9f64.powi(3), 1.0 - 0.999f64.powi(3));
        let got = f32s(&ps);
        let (pr, gr, mr, vr) = (
            f32s(&mk(&p0)),
            f32s(&mk(&g0)),
            f32s(&mk(&m0)),
            f32s(&mk(&v0)),
        );
        for i in 0..16 {
            let (pi, gi) = (f64::from(pr[i]) * (1.0 - 0.1 * 0.01), f64::from(gr[i]));
            let m1 = 0.9 * f64::from(mr[i]) + 0.1 * gi;
            let v1 = 0.999 * f64::from(vr[i]) + 0.001 * gi * gi;
            let want = pi - 0.1 / c1 * m1 / ((v1 / c2).sqrt() + 1e-8);
            let err = (f64::from(got[i]) - want).abs();
            assert!(
                err <= tol * want.abs().max(1.0),
                "{dt} [{i}]: {} vs {want}",
                got[i]
            );
        }
    }
}

// ----- masked_fill_ with a mask that overlaps self in part -----

#[test]
fn masked_fill_with_a_partially_overlapping_mask_is_refused() {
    let bools = |v: &[bool], shape: &[usize]| Tensor::from_slice(v, shape, CPU).unwrap();
    let x = bools(&[true, false, true, false], &[4]);
    let out = x.slice(0, Some(1), None, 1).unwrap();
    let mask = x.slice(0, None, Some(-1), 1).unwrap();
    // x[1:].masked_fill_(x[:-1], True): PyTorch's "some elements of the
    // input tensor and the written-to tensor refer to a single memory
    // location".
    let e = out.masked_fill_(&mask, true).unwrap_err();
    assert!(matches!(e, TensorError::Overlap { .. }), "{e}");
    assert!(e.to_string().contains("masked_fill_"), "{e}");
    assert_eq!(x.to_vec::<bool>().unwrap(), [true, false, true, false]);
    // A [2, 2] view filled through its own transpose: refused too.
    let m = bools(&[true, false, true, false], &[2, 2]);
    let e = m.masked_fill_(&m.t().unwrap(), true).unwrap_err();
    assert!(matches!(e, TensorError::Overlap { .. }), "{e}");
    assert_eq!(m.to_vec::<bool>().unwrap(), [true, false, true, false]);
    // Allowed, as in PyTorch: the mask is self (-> all false), interleaved
    // disjoint halves (x[::2].masked_fill_(x[1::2], True) changes nothing
    // here), a mask beside self in the same storage.
    let s = bools(&[true, false, true], &[3]);
    s.masked_fill_(&s, false).unwrap();
    assert_eq!(s.to_vec::<bool>().unwrap(), [false, false, false]);
    let y = bools(&[true, false, true, false], &[4]);
    y.slice(0, None, None, 2)
        .unwrap()
        .masked_fill_(&y.slice(0, Some(1), None, 2).unwrap(), true)
        .unwrap();
    assert_eq!(y.to_vec::<bool>().unwrap(), [true, false, true, false]);
    let z = bools(&[true, false, true, false], &[4]);
    z.slice(0, Some(1), None, 1)
        .unwrap()
        .masked_fill_(&z.slice(0, None, Some(1), 1).unwrap(), true)
        .unwrap();
    assert_eq!(z.to_vec::<bool>().unwrap(), [true, true, true, true]);
    // An expanded self is still allowed (PyTorch warns, fills every alias).
    let e = Tensor::zeros(&[1], DType::F32, CPU)
        .unwrap()
        .expand(&[3])
        .unwrap();
    e.masked_fill_(&bools(&[true, false, true], &[3]), 1.0)
        .unwrap();
    assert_eq!(f32s(&e), [1.0, 1.0, 1.0]);
}
