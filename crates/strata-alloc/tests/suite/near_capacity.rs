//! Expandable segments on a small device (64 MiB of 2 MiB pages), where the
//! growth margin, the chunk mapped for large requests and the hold rule all
//! reach past what the device has left: random sequences of allocations and
//! frees never get an out-of-memory error while the device still has enough
//! pages that no live block touches, and leave the allocator consistent.
//! (A growth that asked for a whole chunk with less than a chunk left ran
//! out of memory: `hostile_sweep_s36.rs`; this test found it again when that
//! fix was taken out.) One or two streams, with or without a memory
//! fraction.

use proptest::prelude::*;
use std::sync::Arc;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::{AllocError, AllocatorConfig, CachingAllocator, RawAllocation, StreamId};

const MIB: u64 = 1 << 20;
const PAGE: u64 = 2 * MIB;
const CAPACITY: u64 = 64 * MIB;

#[derive(Clone, Debug)]
enum Op {
    Alloc(u64, bool),
    Free(usize),
    EmptyCache,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u64..(1 << 20), any::<bool>()).prop_map(|(s, o)| Op::Alloc(s, o)),
        4 => ((1u64 << 20) + 1..(24u64 << 20), any::<bool>()).prop_map(|(s, o)| Op::Alloc(s, o)),
        5 => any::<usize>().prop_map(Op::Free),
        1 => Just(Op::EmptyCache),
    ]
}

/// Pages of the device that no live allocation touches, counting each live
/// allocation generously: its size rounded up to 512 bytes, and for a large
/// one the 1 MiB remainder that a split may leave with it.
fn untouched_pages(live: &[RawAllocation], limit: u64) -> u64 {
    let mut touched = std::collections::BTreeSet::new();
    for r in live {
        let mut len = r.size().div_ceil(512) * 512;
        if r.size() > MIB {
            len += MIB;
        }
        let first = r.ptr() / PAGE;
        let last = (r.ptr() + len - 1) / PAGE;
        touched.extend(first..=last);
    }
    (limit / PAGE).saturating_sub(touched.len() as u64)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: crate::common::cases(256), ..ProptestConfig::default() })]

    #[test]
    fn a_request_that_the_untouched_pages_hold_never_runs_out_of_memory(
        ops in prop::collection::vec(op(), 1..120),
        two_streams in any::<bool>(),
        fraction in prop_oneof![Just(None), Just(Some(0.75))],
    ) {
        let d = Arc::new(SimDriver::new(CAPACITY, PAGE).with_auto_complete_events());
        let a = CachingAllocator::try_new(d.clone(), AllocatorConfig::default()).unwrap();
        prop_assert!(a.expandable_segments());
        let limit = match fraction {
            Some(f) => {
                a.set_memory_fraction(f).unwrap();
                (CAPACITY as f64 * f) as u64
            }
            None => CAPACITY,
        };
        let streams = [StreamId::DEFAULT, StreamId(7)];
        let mut live: Vec<RawAllocation> = Vec::new();
        for op in ops {
            match op {
                Op::Alloc(size, other) => {
                    let s = streams[(two_streams && other) as usize];
                    let need = (size.div_ceil(512) * 512).div_ceil(PAGE).max(1);
                    let spare = untouched_pages(&live, limit);
                    match a.allocate_raw(size, s) {
                        Ok(r) => live.push(r),
                        Err(AllocError::OutOfMemory(oom)) => {
                            // A generous margin: one more page than the
                            // request's own (a small request's page of its
                            // pool, an alignment straddle).
                            prop_assert!(
                                spare < need + 1,
                                "{size} bytes ({need} pages) refused with {spare} untouched pages: {oom:?}"
                            );
                        }
                        Err(e) => prop_assert!(false, "unexpected error {e}"),
                    }
                }
                Op::Free(i) => {
                    if !live.is_empty() {
                        let r = live.swap_remove(i % live.len());
                        a.free_raw(r).unwrap();
                    }
                }
                Op::EmptyCache => a.empty_cache().unwrap(),
            }
            a.check_consistency().map_err(TestCaseError::fail)?;
            prop_assert!(a.memory_reserved() <= limit);
        }
        for r in live {
            a.free_raw(r).unwrap();
        }
        a.empty_cache().unwrap();
        prop_assert_eq!(a.memory_reserved(), 0);
        prop_assert_eq!(d.used_bytes(), 0);
    }
}
