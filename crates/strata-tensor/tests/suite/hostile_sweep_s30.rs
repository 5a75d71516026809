//! Session 30's sweep of hostile inputs to strata-tensor (after
//! `hostile_sweep_s29.rs`): views of empty tensors with huge strides,
//! indexing, joins, integer arithmetic at the edges, float -> integer
//! conversions. Each assertion states what PyTorch 2.15 (CPU) gives for the
//! same call, worked out there and noted beside it.
//!
//! Defects these tests found (fixed with them):
//!
//! * `narrow`, `slice` and `select` added `start * stride` to the storage
//!   offset without a check. An empty view may have any strides (nothing is
//!   addressed), so a chain of them over `as_strided((2, 2, 0), (i64::MAX,
//!   i64::MAX, 1))` wrapped the offset past `u64` (release builds do not
//!   trap) into a small, wrong one. PyTorch refuses an offset beyond
//!   `i64::MAX` ("Tensor: invalid storage offset"); strata now returns
//!   `TensorError::SizeOverflow` naming the op. `iter_dim`/`unbind`
//!   check the last view up front, so they fail instead of stopping short.
//! * `randint` refused the bool dtype; PyTorch draws bools for bounds with
//!   `low` and `high - 1` in {0, 1} (and refuses other bounds: "to - 1 is
//!   out of bounds for bool"). strata now does the same.

use strata_tensor::{s, DType, Device, Tensor, TensorError};

const CPU: Device = Device::Cpu;

fn overflow_err(r: Result<Tensor, TensorError>) -> String {
    match r {
        Err(e @ TensorError::SizeOverflow { .. }) => e.to_string(),
        other => panic!("expected a size-overflow error, got {other:?}"),
    }
}

// ----- views of empty tensors: the storage offset never wraps -----

#[test]
fn view_offsets_beyond_i64_max_are_refused_not_wrapped() {
    let big = i64::MAX;
    let base = Tensor::zeros(&[1], DType::F32, CPU).unwrap();
    // b.as_strided((1, 1, 1), (big, big, big), 0).narrow(0, 1, 0): offset big.
    let a = base
        .as_strided(&[1, 1, 1], &[big, big, big], Some(0))
        .unwrap();
    let n = a.narrow(0, 1, 0).unwrap();
    assert_eq!((n.shape(), n.offset()), (&[0, 1, 1][..], big as usize));
    // ... .narrow(1, 1, 0): "Tensor: invalid storage offset -2". It used to
    // wrap (three of them gave offset 2^63 - 3).
    assert!(overflow_err(n.narrow(1, 1, 0)).contains("narrow"));
    // a[1:, 1:, 1:]: the same error.
    let s1 = a.slice(0, Some(1), None, 1).unwrap();
    assert_eq!(s1.offset(), big as usize);
    assert!(overflow_err(s1.slice(1, Some(1), None, 1)).contains("slice"));
    assert!(matches!(
        a.i(s![1.., 1.., 1..]),
        Err(TensorError::SizeOverflow { .. })
    ));

    // b.as_strided((2, 2, 0), (big, big, 1), 0).select(0, 1): offset big;
    // .select(0, 1) again: "invalid storage offset -2" (also x[1, 1]).
    let e = base
        .as_strided(&[2, 2, 0], &[big, big, 1], Some(0))
        .unwrap();
    let s0 = e.select(0, 1).unwrap();
    assert_eq!((s0.shape(), s0.offset()), (&[2, 0][..], big as usize));
    assert!(overflow_err(s0.select(0, 1)).contains("select"));
    assert!(matches!(
        e.i(s![1, 1]),
        Err(TensorError::SizeOverflow { .. })
    ));
    // Through split, chunk and unbind, which are narrow/select views.
    let piece = &e.split(1i64, 0).unwrap()[1];
    assert!(matches!(
        piece.split(1i64, 1),
        Err(TensorError::SizeOverflow { .. })
    ));
    let piece = &e.chunk(2, 0).unwrap()[1];
    assert!(matches!(
        piece.chunk(2, 1),
        Err(TensorError::SizeOverflow { .. })
    ));
    let row = &e.unbind(0).unwrap()[1];
    assert!(matches!(
        row.unbind(0),
        Err(TensorError::SizeOverflow { .. })
    ));

    // b.as_strided((3, 0), (2**62, 1), 0): narrow(0, 2, 1), x[2], x[2:]
    // all fail ("invalid storage offset -9223372036854775808"); x[1:] is
    // at offset 2^62.
    let q = base.as_strided(&[3, 0], &[1 << 62, 1], Some(0)).unwrap();
    assert!(matches!(
        q.narrow(0, 2, 1),
        Err(TensorError::SizeOverflow { .. })
    ));
    assert!(matches!(
        q.select(0, 2),
        Err(TensorError::SizeOverflow { .. })
    ));
    assert!(matches!(
        q.slice(0, Some(2), None, 1),
        Err(TensorError::SizeOverflow { .. })
    ));
    assert_eq!(q.slice(0, Some(1), None, 1).unwrap().offset(), 1 << 62);
    // b.as_strided((2, 0), (big, 1), 1).narrow(0, 1, 1): big + 1 overflows.
    let r = base.as_strided(&[2, 0], &[big, 1], Some(1)).unwrap();
    assert!(matches!(
        r.narrow(0, 1, 1),
        Err(TensorError::SizeOverflow { .. })
    ));
    // The views that fit still work, and the failed calls changed nothing.
    assert_eq!(e.offset(), 0);
    assert_eq!(e.narrow(0, 1, 1).unwrap().offset(), big as usize);
}

// ----- randint into bool: PyTorch's bounds [0, 2) -----

#[test]
fn randint_draws_bools_within_pytorchs_bounds() {
    // torch.randint(1, 2, (4,), dtype=torch.bool) -> [True] * 4;
    // torch.randint(0, 1, ...) -> [False] * 4. strata refused bool.
    let t = Tensor::randint(1, 2, &[4], Some(DType::Bool), 3, CPU).unwrap();
    assert_eq!(t.dtype(), DType::Bool);
    assert_eq!(t.to_vec::<bool>().unwrap(), [true; 4]);
    let f = Tensor::randint(0, 1, &[4], Some(DType::Bool), 3, CPU).unwrap();
    assert_eq!(f.to_vec::<bool>().unwrap(), [false; 4]);
    // torch.randint(0, 2, (1000,), dtype=torch.bool): both values occur.
    let b = Tensor::randint(0, 2, &[1000], Some(DType::Bool), 5, CPU).unwrap();
    let v = b.to_vec::<bool>().unwrap();
    assert!(v.contains(&true) && v.contains(&false));
    // Empty: tensor([], dtype=torch.bool).
    let e = Tensor::randint(0, 2, &[0], Some(DType::Bool), 5, CPU).unwrap();
    assert_eq!((e.shape(), e.dtype()), (&[0][..], DType::Bool));
    // "to - 1 is out of bounds for bool", "from is out of bounds for bool",
    // and from >= to: value errors.
    for (lo, hi) in [(0, 3), (-1, 1), (1, 1), (2, 3)] {
        assert!(
            matches!(
                Tensor::randint(lo, hi, &[2], Some(DType::Bool), 0, CPU),
                Err(TensorError::Value { .. })
            ),
            "randint({lo}, {hi}, bool)"
        );
    }
}

// ----- view chains against a reference in i128 -----

/// A view op of the chain: (kind, dim, a, b, step).
type ViewStep = (u8, i64, i64, i64, i64);

/// The reference layout: shape, strides, offset in i128 (nothing wraps).
#[derive(Clone, Debug)]
struct RefView {
    shape: Vec<i128>,
    strides: Vec<i128>,
    offset: i128,
}

/// Why the reference refuses a step.
#[derive(Debug, PartialEq)]
enum RefErr {
    /// A bad dim, index, length or step (PyTorch's IndexError/RuntimeError).
    Arg,
    /// The new storage offset passes i64::MAX ("invalid storage offset").
    Offset,
}

impl RefView {
    fn dim(&self, d: i64) -> Result<usize, RefErr> {
        let n = self.shape.len() as i64;
        if n == 0 || d < -n || d >= n {
            return Err(RefErr::Arg);
        }
        Ok(if d < 0 { d + n } else { d } as usize)
    }

    fn moved(&self, d: usize, i: i128) -> Result<i128, RefErr> {
        let o = self.offset + i * self.strides[d];
        if o > i128::from(i64::MAX) {
            Err(RefErr::Offset)
        } else {
            Ok(o)
        }
    }

    /// PyTorch's narrow, select and slice (step >= 1) on the layout.
    fn apply(&self, (kind, dim, a, b, step): ViewStep) -> Result<RefView, RefErr> {
        let d = self.dim(dim)?;
        let size = self.shape[d];
        let (a, b) = (i128::from(a), i128::from(b));
        let mut r = self.clone();
        match kind % 3 {
            0 => {
                // narrow(d, start = a, length = b)
                if b < 0 || a < -size || a > size {
                    return Err(RefErr::Arg);
                }
                let s = if a < 0 { a + size } else { a };
                if b > size - s {
                    return Err(RefErr::Arg);
                }
                r.offset = self.moved(d, s)?;
                r.shape[d] = b;
            }
            1 => {
                // select(d, index = a)
                if a < -size || a >= size {
                    return Err(RefErr::Arg);
                }
                let i = if a < 0 { a + size } else { a };
                r.offset = self.moved(d, i)?;
                r.shape.remove(d);
                r.strides.remove(d);
            }
            _ => {
                // slice(d, a, b, step)
                if step <= 0 {
                    return Err(RefErr::Arg);
                }
                let clamp = |v: i128| (if v < 0 { v + size } else { v }).clamp(0, size);
                let (s, e) = (clamp(a), clamp(b));
                let step = i128::from(step);
                r.shape[d] = if e > s { (e - s - 1) / step + 1 } else { 0 };
                // strata's stepped stride (PyTorch's `stride * step`, kept
                // as it was where that passes i64::MAX: the dim then has at
                // most one element, so the stride addresses nothing).
                let stepped = self.strides[d] * step;
                if stepped <= i128::from(i64::MAX) {
                    r.strides[d] = stepped;
                }
                r.offset = self.moved(d, s)?;
            }
        }
        Ok(r)
    }

    /// The storage indices of the elements, row-major.
    fn indices(&self) -> Vec<i128> {
        let mut out = vec![self.offset];
        for (&n, &st) in self.shape.iter().zip(&self.strides) {
            out = out
                .iter()
                .flat_map(|&o| (0..n).map(move |i| o + i * st))
                .collect();
        }
        out
    }
}

fn apply_view(t: &Tensor, (kind, dim, a, b, step): ViewStep) -> Result<Tensor, TensorError> {
    match kind % 3 {
        0 => t.narrow(dim, a, b),
        1 => t.select(dim, a),
        _ => t.slice(dim, Some(a), Some(b), step),
    }
}

fn stride_strategy() -> impl proptest::strategy::Strategy<Value = i64> {
    use proptest::prelude::*;
    prop_oneof![
        0i64..4,
        Just(1i64 << 62),
        Just(i64::MAX),
        Just(i64::MAX / 3),
        Just(1i64 << 61)
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1024))]
    /// Any chain of narrow/select/slice over any valid as_strided view of a
    /// 12-element storage: strata fails exactly where the i128 reference
    /// (PyTorch's rules) does, with a size-overflow error where the offset
    /// passes i64::MAX, and otherwise gives the reference's shape, offset
    /// and elements.
    #[test]
    fn view_chains_match_an_unwrapped_reference(
        dims in proptest::collection::vec((0usize..6, stride_strategy()), 0..4),
        empty in proptest::option::of(0usize..4),
        offset in 0i64..12,
        steps in proptest::collection::vec(
            (0u8..3, -4i64..4, -6i64..7, -6i64..7, 1i64..4), 1..8),
    ) {
        let storage = Tensor::arange(0, 12, 1, Some(DType::I64), CPU).unwrap();
        // Often one dim of size 0: an empty view may have any strides.
        let size: Vec<i64> = dims
            .iter()
            .enumerate()
            .map(|(d, &(n, _))| if empty == Some(d) { 0 } else { n as i64 })
            .collect();
        let stride: Vec<i64> = dims.iter().map(|&(_, s)| s).collect();
        let Ok(mut t) = storage.as_strided(&size, &stride, Some(offset)) else {
            return Ok(()); // not a valid view of 12 elements
        };
        let mut r = RefView {
            shape: size.iter().map(|&n| i128::from(n)).collect(),
            strides: stride.iter().map(|&s| i128::from(s)).collect(),
            offset: i128::from(offset),
        };
        for step in steps {
            let got = apply_view(&t, step);
            match (r.apply(step), got) {
                (Ok(want), Ok(view)) => {
                    let shape: Vec<i128> = view.shape().iter().map(|&n| n as i128).collect();
                    proptest::prop_assert_eq!(&shape, &want.shape, "{:?}", step);
                    proptest::prop_assert_eq!(view.offset() as i128, want.offset, "{:?}", step);
                    let elems: Vec<i64> = view.to_vec::<i64>().unwrap();
                    let idx: Vec<i64> = want.indices().iter().map(|&i| i as i64).collect();
                    if !idx.is_empty() {
                        proptest::prop_assert_eq!(elems, idx, "{:?}", step);
                    }
                    t = view;
                    r = want;
                }
                (Err(RefErr::Offset), Err(TensorError::SizeOverflow { .. })) => break,
                (Err(RefErr::Arg), Err(e)) => {
                    proptest::prop_assert!(
                        !matches!(e, TensorError::SizeOverflow { .. }),
                        "{:?}: {}", step, e
                    );
                    break;
                }
                (want, got) => {
                    proptest::prop_assert!(false, "{:?}: reference {:?}, strata {:?}", step, want.err(), got.map(|v| v.offset()));
                }
            }
        }
    }
}

// ----- float -> integer conversions of NaN, infinities, out-of-range values -----

/// C leaves these conversions undefined; PyTorch's CPU gives what the x86
/// instruction gives (i32/i64: the smallest integer for NaN, +-inf and any
/// value out of range; u8 through a 32-bit integer: 0 for NaN and +-inf).
/// strata converts with Rust's `as` through i64 (NaN -> 0, saturating at the
/// ends of i64, then wrapping into i32/u8), so those elements differ from
/// PyTorch's; the conformance generators leave them out for that reason.
/// What must hold: no panic, the dtype asked for, and PyTorch's values
/// wherever the conversion is defined (values within i64, truncated).
#[test]
fn float_to_integer_conversions_never_panic_and_agree_where_defined() {
    let hostile = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 3e9, -3e19, 1e38];
    let t = Tensor::from_slice(&hostile, &[6], CPU).unwrap();
    for dtype in [DType::I32, DType::I64, DType::U8, DType::Bool] {
        let c = t.to_dtype(dtype).unwrap();
        assert_eq!((c.shape(), c.dtype()), (&[6][..], dtype));
        c.to_vec_as::<f64>().unwrap();
        // The same through copy_ and item.
        let out = Tensor::zeros(&[6], dtype, CPU).unwrap();
        out.copy_(&t).unwrap();
        t.select(0, 0).unwrap().item::<i64>().unwrap();
    }
    // NaN and infinities are true as bools: tensor([True] * 6).
    let b = t.to_dtype(DType::Bool).unwrap().to_vec::<bool>().unwrap();
    assert_eq!(b, [true; 6]);
    // Defined conversions: tensor([-2.7, 2.7, 300., -1., 1e10]).to(dtype)
    // is [-2, 2, 300, -1, 10000000000] for int64 and [254, 2, 44, 255, 0]
    // for uint8 (int32 of 1e10 is out of range: PyTorch's -2147483648).
    let d = Tensor::from_slice(&[-2.7f64, 2.7, 300.0, -1.0, 1e10], &[5], CPU).unwrap();
    let i64s = d.to_dtype(DType::I64).unwrap().to_vec::<i64>().unwrap();
    assert_eq!(i64s, [-2, 2, 300, -1, 10_000_000_000]);
    let u8s = d.to_dtype(DType::U8).unwrap().to_vec::<u8>().unwrap();
    assert_eq!(u8s, [254, 2, 44, 255, 0]);
}
