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
