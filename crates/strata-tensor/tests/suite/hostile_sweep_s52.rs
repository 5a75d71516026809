//! Session 52's hostile-input sweep of strata-tensor, after
//! `hostile_sweep_s51.rs`: grids rather than random draws. Every binary op
//! (add, sub, mul, div in its three modes, maximum, minimum, pow, the
//! comparisons) over every pair of dtypes with each dtype's edge values
//! (integer minimum and maximum, -1, NaN, ±inf, -0.0, subnormals, the
//! largest finite value, 2^24 + 1) as an outer product, against 0-d tensors
//! and against Python scalars of each kind, in place too; every unary op on
//! flat, transposed, 0-d and empty inputs; every cast between dtypes
//! (out-of-range floats to integers included); sum, mean, var/std (five
//! corrections), max/min, argmax/argmin, logsumexp and cumsum (five output
//! dtypes) over empty, 0-d and size-1 shapes, every dim and keepdim;
//! `clamp`/`clamp_` with every pair of 15 bounds (None, NaN, ±inf, -0.0,
//! bools, integers beyond the dtype); `where` and `masked_fill(_)` with
//! scalars of each kind and 0-d tensors of each dtype, u8 and broadcast
//! masks; 1,500 `cat`/`stack` calls over empty, 0-d and mixed-dtype
//! inputs and every dim; `split`/`chunk`/`unbind` of every size and dim;
//! 1,200 `index_select`/`gather`/`scatter_add(_)` calls with negative,
//! out-of-range, empty and non-integer indices; 800 chains of view ops on
//! empty and 0-d tensors; 2,500 `arange` calls with non-finite, huge and
//! tiny arguments in every dtype; and 4,000 `Display` strings (summarised,
//! transposed, empty, every dtype). About 15,000 programs in the
//! conformance format (values bit for bit with signed zeros, dtype, shape,
//! strides of views, error class, tensors unchanged by a failed call) and
//! the strings, against PyTorch 2.15 on the CPU.
//!
//! Every expected value below comes from PyTorch 2.15 on the CPU (the call
//! is quoted next to it).
//!
//! Defects found and fixed in this session (their tests failed before):
//!
//! * `arange` with an infinite or NaN step: PyTorch 2.15 checks first that
//!   the step is finite ("step must be finite but got inf") for every dtype
//!   and every pair of bounds; strata gave `arange(0, 1, inf)` one element
//!   and `arange(0, 0, inf)` none, and named an integer dtype's overflow or
//!   a zero step for the others.
//! * f16/bf16 `arange` checked the step's sign against the bounds rounded
//!   to f32 (so `arange(1e-50, 0, 1, dtype=f16)` was an empty tensor where
//!   PyTorch's f64 comparison finds the bounds inconsistent with the step),
//!   and took a start or step beyond f32's range as inf where PyTorch
//!   converts both to f32, its accumulate type, with an overflow check
//!   ("value cannot be converted to type float without overflow":
//!   `arange(0, 1, 1e39, dtype=f16)`, `arange(-1e39, 0, 1e38, dtype=bf16)`;
//!   the end is only used for the length, so `arange(0, 1e39, 1e38)` is
//!   allowed).
//! * The order of argument checks, where both fail (the error's class
//!   differed from PyTorch's): `stack` checked the shapes before the dim
//!   (PyTorch wraps the dim against the first tensor's rank first);
//!   `split` checked the dim before a negative size; `index_select` the
//!   index's dtype before the dim, the index's rank and the one-value rule
//!   of a 0-d input; `gather` and `scatter_add(_)` the index's dtype (and
//!   src's) before the dim.
//!
//! Examined and left:
//!
//! * `pow` of an f32 tensor by an integer scalar beyond 2^24 (odd
//!   `-2147483649`, `16777217`): PyTorch's vectorized loop takes the
//!   exponent as an f32 (even: `(-inf) ** -2147483649` is +0.0) and its
//!   scalar tail as an f64 (odd: -0.0), so the sign depends on the
//!   element's position (`torch.full([20], -1.0000001).pow(16777217)` is
//!   7.389055 for the first 16 elements and -7.389056 for the last 4);
//!   strata converts the exponent to f32, as the vector loop.
//! * `maximum`/`minimum` of -0.0 and +0.0 (as s50/s51 left them), sqrt of
//!   f32/u8 an ulp from the correctly rounded root (as s50 left it), and
//!   `pow`/transcendental ops an ulp apart.
//! * `expand` of a `[1, 0]` tensor to `[-2, 0]`: PyTorch returns a tensor
//!   of size -2 (its size check multiplies by the zero); strata refuses the
//!   negative size.
//! * Error classes that follow from PyTorch's internals rather than from
//!   the arguments: `scatter_add` of a `[2, 1, 3]` self with a 3-D index and
//!   a 2-D src raises "Dimension out of range" (it reads src's size at the
//!   index's third dim); strata names the rank mismatch (shape).

use strata_tensor::{DType, SplitSize, Tensor, TensorError};

use super::common::{f32t, f64s, i64t, CPU};

fn arange(s: f64, e: f64, st: f64, dtype: Option<DType>) -> Result<Tensor, TensorError> {
    Tensor::arange(s, e, st, dtype, CPU)
}

fn value_error_saying(r: Result<Tensor, TensorError>, what: &str) {
    match r {
        Err(e @ TensorError::Value { .. }) => {
            assert!(e.to_string().contains(what), "{e} does not say {what:?}")
        }
        other => panic!("expected a value error saying {what:?}, got {other:?}"),
    }
}

// ----- arange: a non-finite step -------------------------------------------------

#[test]
fn arange_refuses_a_non_finite_step_before_anything_else() {
    let dtypes = [
        None,
        Some(DType::F32),
        Some(DType::F64),
        Some(DType::F16),
        Some(DType::BF16),
        Some(DType::I64),
        Some(DType::I32),
        Some(DType::U8),
    ];
    for dt in dtypes {
        // torch.arange(0, 1, inf, dtype=dt): "step must be finite but got inf"
        value_error_saying(arange(0.0, 1.0, f64::INFINITY, dt), "step must be finite");
        // torch.arange(0, 0, inf), torch.arange(1, 0, inf): the same error
        value_error_saying(arange(0.0, 0.0, f64::INFINITY, dt), "step must be finite");
        value_error_saying(arange(1.0, 0.0, f64::INFINITY, dt), "step must be finite");
        // torch.arange(0, 1, -inf): "step must be finite but got -inf"
        value_error_saying(
            arange(0.0, 1.0, f64::NEG_INFINITY, dt),
            "step must be finite",
        );
        // torch.arange(0, 0, nan): "step must be finite but got nan"
        value_error_saying(arange(0.0, 0.0, f64::NAN, dt), "step must be finite");
        // torch.arange(nan, 1, inf): the step first, "step must be finite"
        value_error_saying(
            arange(f64::NAN, 1.0, f64::INFINITY, dt),
            "step must be finite",
        );
    }
    // An integer start and end with a float step: the same.
    // torch.arange(5, 2**62, float('inf')): "step must be finite but got inf"
    value_error_saying(
        Tensor::arange(5, 1i64 << 62, f64::INFINITY, None, CPU),
        "step must be finite",
    );
    // Bool has no kernel: torch.arange(0, 1, inf, dtype=torch.bool) is
    // '"arange_cpu" not implemented for 'Bool'' before the step is looked at.
    assert!(matches!(
        arange(0.0, 1.0, f64::INFINITY, Some(DType::Bool)),
        Err(TensorError::DType { .. })
    ));
}

// ----- arange: f16/bf16 bounds checked as given, start and step in f32 -----------

#[test]
fn half_arange_checks_the_bounds_in_f64_and_converts_start_and_step_to_f32() {
    for dt in [DType::F16, DType::BF16] {
        // torch.arange(1e-50, 0, 1, dtype=dt): "upper bound and lower bound
        // inconsistent with step sign"
        value_error_saying(arange(1e-50, 0.0, 1.0, Some(dt)), "inconsistent");
        // torch.arange(0, 1e-50, -1, dtype=dt): the same
        value_error_saying(arange(0.0, 1e-50, -1.0, Some(dt)), "inconsistent");
        // torch.arange(0, 1, 1e39, dtype=dt): "value cannot be converted to
        // type float without overflow"
        value_error_saying(arange(0.0, 1.0, 1e39, Some(dt)), "without overflow");
        // torch.arange(-1e39, 0, 1e38, dtype=dt): the same (the start)
        value_error_saying(arange(-1e39, 0.0, 1e38, Some(dt)), "without overflow");
        // torch.arange(1e39, 0, -1e38, dtype=dt): the same
        value_error_saying(arange(1e39, 0.0, -1e38, Some(dt)), "without overflow");
        // torch.arange(0, -1, 1e39, dtype=dt): the sign first, "inconsistent"
        value_error_saying(arange(0.0, -1.0, 1e39, Some(dt)), "inconsistent");
        // torch.arange(-1e39, 1e300, 1.0, dtype=dt): the length first,
        // "invalid size, possible overflow?"
        value_error_saying(arange(-1e39, 1e300, 1.0, Some(dt)), "invalid size");
    }
    // The end is only used for the length:
    // torch.arange(0, 1e39, 1e38, dtype=torch.float16).tolist()
    //   == [0.0, inf, inf, inf, inf, inf, inf, inf, inf, inf]
    let h = arange(0.0, 1e39, 1e38, Some(DType::F16)).unwrap();
    let mut want = vec![f64::INFINITY; 10];
    want[0] = 0.0;
    assert_eq!(f64s(&h), want);
    // torch.arange(0, 1e39, 1e38, dtype=torch.bfloat16)[:4].tolist()
    //   == [0.0, 9.969209968386869e+37, 1.9938419936773738e+38, 3.00405527047391e+38]
    //   + [inf] * 6
    let b = arange(0.0, 1e39, 1e38, Some(DType::BF16)).unwrap();
    let mut want = vec![
        0.0,
        9.969209968386869e37,
        1.9938419936773738e38,
        3.00405527047391e38,
    ];
    want.extend([f64::INFINITY; 6]);
    assert_eq!(f64s(&b), want);
    // f32 and f64 compute in f64: torch.arange(0, 1, 1e39, dtype=torch.float32)
    // == tensor([0.]), and torch.arange(-1e39, 0, 1e38).tolist() ==
    // [-inf] * 7 + [-3.0000000054977558e+38, -1.9999999360571385e+38,
    // -9.999999680285692e+37]
    assert_eq!(
        f64s(&arange(0.0, 1.0, 1e39, Some(DType::F32)).unwrap()),
        [0.0]
    );
    let mut want = vec![f64::NEG_INFINITY; 7];
    want.extend([
        -3.0000000054977558e38,
        -1.9999999360571385e38,
        -9.999999680285692e37,
    ]);
    assert_eq!(
        f64s(&arange(-1e39, 0.0, 1e38, Some(DType::F32)).unwrap()),
        want
    );
    // torch.arange(0, 131008, 65504., dtype=torch.bfloat16).tolist() == [0.0, 65536.0]
    assert_eq!(
        f64s(&arange(0.0, 131008.0, 65504.0, Some(DType::BF16)).unwrap()),
        [0.0, 65536.0]
    );
}

#[test]
fn arange_checks_a_zero_step_before_the_bounds_as_pytorch() {
    for dt in [None, Some(DType::F16), Some(DType::I64)] {
        // torch.arange(nan, 1, 0.): "step must be nonzero"
        value_error_saying(arange(f64::NAN, 1.0, 0.0, dt), "nonzero");
        // torch.arange(0, nan, 1e39): "unsupported range: 0 -> nan"
        value_error_saying(arange(0.0, f64::NAN, 1e39, dt), "unsupported range");
    }
}

/// PyTorch 2.15 compares the bounds with the step's sign as f64 for every
/// dtype (found by `fuzz_conformance_s63.py` seed 7164, program 61).
#[test]
fn arange_compares_integer_bounds_with_the_step_sign_as_f64() {
    let (lo, hi) = (1i64 << 62, (1i64 << 62) + 2);
    // torch.arange(2**62, 2**62 + 2, -1, dtype=dt): both bounds are 2**62 as
    // f64, so the sign agrees, and the f64 length is 0: an empty tensor.
    for dt in [
        DType::I32,
        DType::U8,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ] {
        let t = Tensor::arange(lo, hi, -1, Some(dt), CPU).unwrap();
        assert_eq!((t.shape(), t.dtype()), (&[0usize][..], dt));
    }
    // torch.arange(2**62, 2**62 + 2, -1): the i64 length is exact, -2:
    // "invalid size, possible overflow?"
    for dt in [None, Some(DType::I64)] {
        value_error_saying(Tensor::arange(lo, hi, -1, dt, CPU), "invalid size");
    }
    // Bounds that stay apart as f64 are still inconsistent:
    // torch.arange(2**53, 2**53 + 2, -1, dtype=torch.int32) and
    // torch.arange(4, 6, -1, dtype=torch.int32).
    for (s, e) in [(1i64 << 53, (1i64 << 53) + 2), (4, 6)] {
        value_error_saying(
            Tensor::arange(s, e, -1, Some(DType::I32), CPU),
            "inconsistent",
        );
    }
}

// ----- the order of argument checks ------------------------------------------------

#[test]
fn stack_checks_the_dim_before_the_shapes() {
    let a = f32t(&[1.0], &[]);
    let b = f32t(&[0.0; 12], &[3, 4]);
    // torch.stack([tensor(1.), zeros(3, 4)], 2): "Dimension out of range
    // (expected to be in range of [-1, 0], but got 2)"
    assert!(matches!(
        Tensor::stack(&[&a, &b], 2),
        Err(TensorError::Dim { .. })
    ));
    // torch.stack([zeros(3, 4), tensor(1.)], -4): "Dimension out of range
    // (expected to be in range of [-3, 2], but got -4)"
    assert!(matches!(
        Tensor::stack(&[&b, &a], -4),
        Err(TensorError::Dim { .. })
    ));
    // torch.stack([zeros(3, 4), tensor(1.)], 2): "stack expects each tensor
    // to be equal size"
    assert!(matches!(
        Tensor::stack(&[&b, &a], 2),
        Err(TensorError::Shape { .. })
    ));
}

#[test]
fn split_checks_a_negative_size_before_the_dim() {
    let x = f32t(&[0.0; 12], &[3, 4]);
    // torch.split(zeros(3, 4), -1, 5): "split expects split_size be
    // non-negative, but got split_size=-1"
    assert!(matches!(x.split(-1, 5), Err(TensorError::Value { .. })));
    // torch.split(zeros(3, 4), 0, 5) and torch.split(zeros(3, 4), [1, -1], 5):
    // "Dimension out of range (expected to be in range of [-2, 1], but got 5)"
    assert!(matches!(x.split(0, 5), Err(TensorError::Dim { .. })));
    assert!(matches!(
        x.split(SplitSize::Sections(vec![1, -1]), 5),
        Err(TensorError::Dim { .. })
    ));
    // torch.split(tensor(1.), -1, 0): "split expects at least a
    // 1-dimensional tensor"
    assert!(matches!(
        f32t(&[1.0], &[]).split(-1, 0),
        Err(TensorError::Shape { .. })
    ));
}

#[test]
fn index_ops_check_the_dim_first_then_the_index() {
    let x = f32t(&[0.0; 12], &[3, 4]);
    let x0 = f32t(&[1.0], &[]);
    let f2 = f32t(&[0.0; 4], &[2, 2]);
    let f3 = f32t(&[0.0; 3], &[3]);
    let i2 = i64t(&[0; 4], &[2, 2]);
    // torch.index_select(zeros(3, 4), 5, zeros(2, 2)): "Dimension out of range"
    assert!(matches!(
        x.index_select(5, &f2),
        Err(TensorError::Dim { .. })
    ));
    // torch.index_select(zeros(3, 4), 0, zeros(2, 2)): "index_select(): Index
    // is supposed to be a vector" (before the dtype)
    assert!(matches!(
        x.index_select(0, &f2),
        Err(TensorError::Shape { .. })
    ));
    // torch.index_select(tensor(1.), 0, zeros(3)): "index_select(): Index to
    // scalar can have only 1 value, got 3 value(s)" (before the dtype)
    assert!(matches!(
        x0.index_select(0, &f3),
        Err(TensorError::Index { .. })
    ));
    // torch.index_select(zeros(3, 4), 0, zeros(3)): "index_select(): Expected
    // dtype int32 or int64 for index"
    assert!(matches!(
        x.index_select(0, &f3),
        Err(TensorError::DType { .. })
    ));
    // torch.gather(zeros(3, 4), 5, zeros(2, 2)): "Dimension out of range"
    assert!(matches!(x.gather(5, &f2), Err(TensorError::Dim { .. })));
    // torch.scatter_add(zeros(3, 4), 5, zeros(2, 2), zeros(3, 4, dtype=int)):
    // "Dimension out of range"
    let src_i = x.to_dtype(DType::I32).unwrap();
    assert!(matches!(
        x.scatter_add(5, &f2, &src_i),
        Err(TensorError::Dim { .. })
    ));
    assert!(matches!(
        x.scatter_add(5, &i2, &src_i),
        Err(TensorError::Dim { .. })
    ));
    // torch.scatter_add(zeros(3, 4), 0, zeros(2, 2), ...): "scatter():
    // Expected dtype int32/int64 for index"; with an int64 index: "scatter():
    // Expected self.dtype to be equal to src.dtype"
    assert!(matches!(
        x.scatter_add(0, &f2, &src_i),
        Err(TensorError::DType { .. })
    ));
    assert!(matches!(
        x.scatter_add(0, &i2, &src_i),
        Err(TensorError::DType { .. })
    ));
    // The in-place form is refused the same way and leaves self unchanged.
    let y = x.deep_clone().unwrap();
    assert!(matches!(
        y.scatter_add_(5, &f2, &src_i),
        Err(TensorError::Dim { .. })
    ));
    assert_eq!(f64s(&y), vec![0.0; 12]);
}

// ----- matmul of two vectors: dtypes, sizes, then bools ---------------------------

/// PyTorch's `dot` (the 1-D by 1-D matmul) compares the dtypes, then the
/// sizes, and only then refuses bools (found by oracle seed 3279, program
/// fuzz_core 89; strata refused the bools first):
/// ```python
/// torch.matmul(torch.ones(1, dtype=torch.bool), torch.ones(2, dtype=torch.bool))
/// # RuntimeError: inconsistent tensor size, expected tensor [1] and src [2] to have the
/// # same number of elements, but got 1 and 2 elements respectively
/// torch.matmul(torch.ones(2, dtype=torch.bool), torch.ones(2, dtype=torch.bool))
/// # NotImplementedError: "dot" not implemented for 'Bool'
/// torch.matmul(torch.ones(1, dtype=torch.bool), torch.ones(2))
/// # RuntimeError: dot : expected both vectors to have same dtype, but found Bool and Float
/// torch.matmul(torch.ones(1, dtype=torch.int32), torch.ones(2))   # the same dtype error
/// ```
#[test]
fn vector_matmul_checks_dtypes_then_sizes_then_bools() {
    let b = |n: usize| Tensor::ones(&[n], DType::Bool, CPU).unwrap();
    let f = |n: usize| Tensor::ones(&[n], DType::F32, CPU).unwrap();
    let i = |n: usize| Tensor::ones(&[n], DType::I32, CPU).unwrap();
    assert!(matches!(b(1).matmul(&b(2)), Err(TensorError::Shape { .. })));
    assert!(matches!(i(1).matmul(&i(2)), Err(TensorError::Shape { .. })));
    let bools = b(2).matmul(&b(2)).unwrap_err();
    assert!(!matches!(bools, TensorError::Shape { .. }), "{bools}");
    assert!(bools.to_string().contains("bool"), "{bools}");
    for e in [b(1).matmul(&f(2)), i(1).matmul(&f(2)), b(2).matmul(&f(2))] {
        let e = e.unwrap_err();
        assert!(!matches!(e, TensorError::Shape { .. }), "{e}");
        assert!(e.to_string().contains("dtype"), "{e}");
    }
    // Equal sizes of a dtype with a kernel: the dot product.
    assert_eq!(
        i(3).matmul(&i(3)).unwrap().to_vec::<i32>().unwrap(),
        vec![3]
    );
}
