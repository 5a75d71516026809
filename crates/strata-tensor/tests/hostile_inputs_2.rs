//! The second sweep of hostile inputs (after `hostile_inputs.rs`,
//! `adversarial.rs` and `errors.rs`): inputs that panicked, aborted the
//! process, wrapped a size or value, or allocated memory for nothing. Each
//! asserts the typed error's variant and, where state is involved, that
//! nothing changed.
//!
//! * `unbind` of a dim of 2^62 panicked ("capacity overflow"), of 2^40
//!   aborted the process (a `Vec` of 2^40 tensor handles);
//! * `broadcast_to(&[usize::MAX])` read the size as -1 ("keep this size")
//!   and returned the input's shape;
//! * `Scalar::from(usize::MAX)` was `Int(-1)`, so `full(.., usize::MAX, i64)`
//!   filled -1;
//! * `triu`/`tril` of an empty `[2^30, 0]` tensor built an `arange` of 2^30
//!   rows (8 GiB) for a mask of nothing;
//! * `index_select` of a 0-d tensor with two indices ran the kernel and
//!   failed in an internal `reshape`.
//!
//! The CPU allocator of this binary is capped at 256 MiB, so an allocation
//! for nothing shows as the allocator's typed out-of-memory error instead of
//! touching the machine's memory.

use std::sync::{Arc, OnceLock};
use strata_alloc::driver::host::HostDriver;
use strata_alloc::{AllocatorConfig, CachingAllocator};
use strata_tensor::{DType, Device, Scalar, Tensor, TensorError, MAX_PIECES};

const CPU: Device = Device::Cpu;

/// Installs the capped CPU allocator (once, before any tensor is made).
fn setup() {
    static INIT: OnceLock<Arc<CachingAllocator>> = OnceLock::new();
    INIT.get_or_init(|| {
        let a = CachingAllocator::new(
            Arc::new(HostDriver::new(Some(256 << 20))),
            AllocatorConfig::default(),
        );
        strata_alloc::set_allocator(Arc::clone(&a));
        a
    });
}

#[test]
fn unbind_of_a_huge_dim_is_a_value_error_not_an_abort() {
    setup();
    let one = Tensor::ones(&[1], DType::U8, CPU).unwrap();
    // 2^62 views: a panic (capacity overflow); 2^40: the process aborted.
    for n in [1i64 << 62, 1 << 40, MAX_PIECES + 1] {
        let huge = one.expand(&[n]).unwrap();
        let e = huge.unbind(0).unwrap_err();
        assert!(matches!(e, TensorError::Value { op: "unbind", .. }), "{e}");
    }
    // An empty tensor whose other dim is huge, unbound along that dim.
    let empty = Tensor::ones(&[1, 1], DType::F32, CPU)
        .unwrap()
        .expand(&[1 << 40, 0])
        .unwrap();
    let e = empty.unbind(0).unwrap_err();
    assert!(matches!(e, TensorError::Value { .. }), "{e}");
    assert!(empty.unbind(1).unwrap().is_empty());
    // iter_dim stays lazy; unbind of an ordinary tensor is unchanged.
    assert_eq!(empty.iter_dim(0).unwrap().len(), 1 << 40);
    let x = Tensor::arange(0, 6, 1, None, CPU)
        .unwrap()
        .view(&[2, 3])
        .unwrap();
    let rows = x.unbind(0).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1].to_vec::<i64>().unwrap(), vec![3, 4, 5]);
}

#[test]
fn broadcast_to_a_size_past_i64_max_is_an_overflow_not_keep_this_size() {
    setup();
    let x = Tensor::arange(0, 3, 1, None, CPU).unwrap();
    // `usize::MAX as i64` is -1: it used to give back shape [3].
    for shape in [
        vec![usize::MAX],
        vec![usize::MAX, 3],
        vec![2, 1 << 63],
        vec![i64::MAX as usize + 1, 3],
    ] {
        let e = x.broadcast_to(&shape).unwrap_err();
        assert!(
            matches!(
                e,
                TensorError::SizeOverflow {
                    op: "broadcast_to",
                    ..
                }
            ),
            "{shape:?}: {e}"
        );
    }
    assert_eq!(x.broadcast_to(&[2, 3]).unwrap().shape(), &[2, 3]);
    // i64::MAX itself is a size a (broadcast) tensor may have.
    let one = x.narrow(0, 0, 1).unwrap();
    let b = one.broadcast_to(&[i64::MAX as usize]).unwrap();
    assert_eq!(b.shape(), &[i64::MAX as usize]);
}

#[test]
fn a_usize_scalar_past_i64_max_does_not_wrap_to_minus_one() {
    setup();
    assert_eq!(Scalar::from(usize::MAX), Scalar::Float(usize::MAX as f64));
    assert_eq!(Scalar::from(i64::MAX as usize), Scalar::Int(i64::MAX));
    assert_eq!(Scalar::from(7usize), Scalar::Int(7));
    // An integer tensor cannot hold it: an overflow error, not -1.
    let e = Tensor::full(&[2], usize::MAX, DType::I64, CPU).unwrap_err();
    assert!(matches!(e, TensorError::Value { .. }), "{e}");
    let t = Tensor::from_slice(&[5i64, 6], &[2], CPU).unwrap();
    let e = t.fill_(usize::MAX).unwrap_err();
    assert!(matches!(e, TensorError::Value { .. }), "{e}");
    assert_eq!(t.to_vec::<i64>().unwrap(), vec![5, 6]);
    // A float tensor holds its value.
    let f = Tensor::full(&[1], usize::MAX, DType::F64, CPU).unwrap();
    assert_eq!(f.to_vec::<f64>().unwrap(), vec![usize::MAX as f64]);
}

#[test]
fn triu_and_tril_of_an_empty_tensor_build_no_mask() {
    setup();
    // An 8 GiB row (or column) index for a mask of nothing: the capped
    // allocator's out-of-memory error before the fix.
    let tall = Tensor::zeros(&[1 << 30, 0], DType::F32, CPU).unwrap();
    let r = tall.triu(0).unwrap();
    assert_eq!((r.shape(), r.dtype()), (&[1usize << 30, 0][..], DType::F32));
    let r = tall.tril(-5).unwrap();
    assert_eq!(r.shape(), &[1 << 30, 0]);
    let wide = Tensor::zeros(&[3, 0, 1 << 30], DType::I64, CPU).unwrap();
    let r = wide.tril_(1).unwrap();
    assert_eq!(r.shape(), &[3, 0, 1 << 30]);
    assert!(r.same_storage(&wide));
    let r = wide.triu(i64::MIN).unwrap();
    assert_eq!((r.shape(), r.dtype()), (&[3, 0, 1 << 30][..], DType::I64));
    // A 1-D input is still an error, empty or not.
    let e = Tensor::zeros(&[0], DType::F32, CPU)
        .unwrap()
        .triu(0)
        .unwrap_err();
    assert!(matches!(e, TensorError::Shape { .. }), "{e}");
    // Non-empty inputs are unchanged.
    let m = Tensor::ones(&[2, 3], DType::F32, CPU).unwrap();
    assert_eq!(
        m.triu(1).unwrap().to_vec::<f32>().unwrap(),
        vec![0.0, 1.0, 1.0, 0.0, 0.0, 1.0]
    );
}

#[test]
fn index_select_of_a_0d_tensor_takes_exactly_one_index() {
    setup();
    let s = Tensor::scalar(5.0, DType::F32, CPU).unwrap();
    for n in [0usize, 2, 3] {
        let i = Tensor::zeros(&[n], DType::I64, CPU).unwrap();
        let e = s.index_select(0, &i).unwrap_err();
        match e {
            TensorError::Index { op, ref msg } => {
                assert_eq!(op, "index_select");
                assert!(msg.contains(&format!("got {n} value")), "{msg}");
            }
            e => panic!("expected an Index error, got {e}"),
        }
    }
    let one = Tensor::zeros(&[1], DType::I32, CPU).unwrap();
    let r = s.index_select(0, &one).unwrap();
    assert_eq!(r.shape(), &[] as &[usize]);
    assert_eq!(r.item::<f32>().unwrap(), 5.0);
    let zero_d = Tensor::scalar(0, DType::I64, CPU).unwrap();
    assert_eq!(
        s.index_select(-1, &zero_d).unwrap().item::<f32>().unwrap(),
        5.0
    );
    // An index out of range is still an Index error.
    let bad = Tensor::from_slice(&[1i64], &[1], CPU).unwrap();
    let e = s.index_select(0, &bad).unwrap_err();
    assert!(matches!(e, TensorError::Index { .. }), "{e}");
}

/// `empty` of `bool` over a block that held other bytes: every element is
/// `false`, and every op reads the same values (a byte other than 0 or 1 is
/// not a valid `bool`). Found by the adversarial suite on CI: `cumsum` of
/// `empty_like(dtype=bool)` over a reused block summed the raw byte 240 where
/// `to_scalars` read `false`.
#[test]
fn empty_bool_over_reused_memory_is_all_false() {
    for n in [1usize, 7, 256, 4099] {
        drop(Tensor::full(&[n], 240, DType::U8, Device::Cpu).unwrap());
        let b = Tensor::empty(&[n], DType::Bool, Device::Cpu).unwrap();
        assert_eq!(b.to_vec::<bool>().unwrap(), vec![false; n]);
        let c = b.cumsum(0, None).unwrap();
        assert_eq!(c.to_vec::<i64>().unwrap(), vec![0; n]);
        drop(
            Tensor::full(
                &[n, 2],
                0xF0F0_F0F0u32 as i32 as i64,
                DType::I32,
                Device::Cpu,
            )
            .unwrap(),
        );
        let like = Tensor::zeros(&[n, 2], DType::F32, Device::Cpu)
            .unwrap()
            .empty_like(Some(DType::Bool))
            .unwrap();
        assert_eq!(
            like.sum(None, false).unwrap().to_vec::<i64>().unwrap(),
            vec![0]
        );
    }
}
