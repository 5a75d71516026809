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
