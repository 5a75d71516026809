//! Session 32: the size settings that now clamp as PyTorch's parser does
//! (`max_split_size_mb`, `max_non_split_rounding_mb`, `large_segment_size_mb`
//! at the largest u64) reach the allocator's arithmetic instead of being
//! refused. Every request under them either succeeds or fails with a typed
//! error, nothing overflows (run in the test profile, with overflow checks),
//! and the allocator stays consistent and gives everything back.

use std::sync::Arc;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::{AllocError, AllocatorConfig, CachingAllocator, StreamId};

const HUGE: &str = "18446744073709551615";

/// Requests from one byte to `u64::MAX`, across every size class boundary.
const SIZES: [u64; 15] = [
    1,
    511,
    512,
    1 << 20,
    (1 << 20) + 1,
    10 << 20,
    (10 << 20) + 1,
    21 << 20,
    1 << 30,
    20 << 30,
    79 << 30,
    81 << 30,
    1 << 50,
    u64::MAX / 2,
    u64::MAX,
];

fn settings() -> Vec<String> {
    let base = [
        format!("max_split_size_mb:{HUGE}"),
        format!("max_non_split_rounding_mb:{HUGE}"),
        format!("large_segment_size_mb:{HUGE}"),
        format!("large_segment_size_mb:{HUGE},max_split_size_mb:{HUGE},max_non_split_rounding_mb:{HUGE}"),
        format!("max_split_size_mb:{HUGE},roundup_power2_divisions:[>:16]"),
        "roundup_power2_divisions:[1:1,>:32768]".to_string(),
    ];
    base.iter()
        .flat_map(|c| {
            [
                format!("{c},expandable_segments:True"),
                format!("{c},expandable_segments:False"),
            ]
        })
        .collect()
}

#[test]
fn clamped_huge_size_settings_give_results_or_typed_errors() {
    for conf in settings() {
        let cfg = AllocatorConfig::parse(&conf).unwrap_or_else(|e| panic!("{conf}: {e}"));
        let a = Arc::new(CachingAllocator::new(Arc::new(SimDriver::h100()), cfg));
        let mut live = Vec::new();
        for size in SIZES {
            match a.allocate(size, StreamId::DEFAULT) {
                Ok(x) => live.push(x),
                Err(AllocError::OutOfMemory(_) | AllocError::TooLarge { .. }) => {
                    // The simulated device holds 80 GB: nothing of 81 GiB or more fits.
                    assert!(
                        size > (1 << 20) || conf.contains("large_segment_size_mb"),
                        "{conf}: {size} refused"
                    );
                }
                Err(e) => panic!("{conf}: {size}: unexpected error {e}"),
            }
        }
        a.check_consistency().unwrap();
        // The statistics count exactly the requests that succeeded.
        let stats = a.memory_stats();
        let asked: u64 = live.iter().map(|x| x.size()).sum();
        assert_eq!(stats.requested_bytes.all().current, asked as i64, "{conf}");
        assert_eq!(stats.allocation.all().current, live.len() as i64, "{conf}");
        let _ = a.memory_summary();
        let _ = a.snapshot();
        drop(live);
        a.empty_cache().unwrap();
        a.check_consistency().unwrap();
        assert_eq!(a.memory_stats().reserved_bytes.all().current, 0, "{conf}");
    }
}

/// With ordinary segments, a request between 1 and 10 MiB gets a segment of
/// `large_segment_size_mb` (PyTorch's `kLargeBuffer`): at the largest value
/// the device cannot hold one, so the request is out of memory, as in
/// PyTorch, and nothing is left reserved.
#[test]
fn a_huge_large_segment_size_makes_mid_sized_requests_out_of_memory() {
    let cfg = AllocatorConfig::parse(&format!(
        "large_segment_size_mb:{HUGE},expandable_segments:False"
    ))
    .unwrap();
    let a = Arc::new(CachingAllocator::new(Arc::new(SimDriver::h100()), cfg));
    let small = a.allocate(1 << 20, StreamId::DEFAULT).unwrap();
    match a.allocate((1 << 20) + 1, StreamId::DEFAULT) {
        Err(AllocError::OutOfMemory(_)) => {}
        other => panic!("expected out of memory, got {:?}", other.map(|x| x.size())),
    }
    let big = a.allocate(21 << 20, StreamId::DEFAULT).unwrap();
    assert_eq!(big.size(), 21 << 20);
    drop((small, big));
    a.check_consistency().unwrap();
}
