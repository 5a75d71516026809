//! Session 41's sweep of hostile inputs to strata-alloc's public API (after
//! `hostile_sweep_s36.rs`), aimed at what the earlier sweeps left out: the
//! trace reader, allocation sizes at every boundary under the new hot path
//! (free-index bins holding their smallest entry inline, the statistics'
//! `increase_by` / `decrease_by` that assume amounts below 2^63), and
//! outstanding stream uses across `empty_cache`, the statistics resets and
//! snapshots.
//!
//! Defect these tests found (fixed with them):
//!
//! * `TraceOps::from_events` looked each allocation's stream value up by
//!   scanning the streams seen so far: a trace whose stream field holds many
//!   distinct values (a garbled or hostile trace) was read in quadratic time;
//!   200,000 allocations on distinct streams took 85 s in the test profile
//!   (a hang for a million). The index is now a hash map: linear time, and
//!   the same stream indices (order of first appearance) as before.
//!
//! Examined and found correct (some pinned down below):
//!
//! * `increase_by` / `decrease_by` cannot see an amount of 2^63 or more from
//!   a public call: a block's size is bounded by the reserved bytes, which
//!   `fits_fraction` keeps within `MAX_RESERVED` (`i64::MAX`); a request of
//!   2^60 bytes or more is `AllocError::TooLarge` before any arithmetic (as
//!   PyTorch's "more than 1EB"); the pinned allocator caps requests at 2^56
//!   and counts with the signed `increase`.
//! * sizes 0, 1, 511, 512, 513, 1 MiB ± 1, 2 MiB ± 1 (the page), 10 MiB ± 1,
//!   20 MiB ± 1 (a `max_split_size`), 2^60 - 1, 2^60, 2^60 + 1, 2^63 - 1,
//!   2^63, `u64::MAX - 511` and `u64::MAX`, in five configurations: each is
//!   served at its size or refused with a typed out-of-memory error, and the
//!   statistics equal a recount of the snapshot after every call.
//! * `record_stream` on stream ids `u64::MAX` and `u64::MAX - 1`, then
//!   `reset_peak_memory_stats`, `reset_accumulated_memory_stats`, `snapshot`
//!   and `empty_cache` while the uses are outstanding.
//! * a memory fraction of 0 set while 100 MiB is reserved: cached blocks
//!   still serve, a new segment is refused, nothing is released.
//! * private pools dropped while their guards' allocations (one with an
//!   outstanding stream use) are live, and the pools' accounting after.
//!
//! Found by this sweep and fixed after it (session 41): every stream an
//! allocator saw got a dense entry holding two free indexes (about 100 KiB
//! of bins) found by a linear scan (`state::pool_stream_index`), so a caller
//! using tens of thousands of distinct stream ids paid gigabytes and
//! quadratic time (20,000 streams: 103 s and about 2 GB in the test
//! profile); PyTorch keys its free blocks by stream and pays nothing per
//! stream. A free index now makes its bins at its first block, and entries
//! are found through a map.

use crate::common;

use common::{recount, sim, sim_device, stat};
use std::time::{Duration, Instant};
use strata_alloc::trace::{TraceOp, TraceOps};
use strata_alloc::{AllocError, MemPoolOptions, StreamId};

const MIB: u64 = 1 << 20;
const EIB: u64 = 1 << 60;

#[test]
fn a_trace_of_many_distinct_streams_is_read_in_linear_time() {
    // Every allocation on a stream of its own: the old reader scanned the
    // streams seen for each one (85 s for 200,000 in the test profile).
    let n = 200_000u64;
    let start = Instant::now();
    let t = TraceOps::from_events((0..n).map(|i| ("alloc", i * 512, 512, u64::MAX - i)));
    let took = start.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "{n} allocations on distinct streams took {took:?}"
    );
    assert_eq!(t.streams.len(), n as usize);
    assert_eq!(t.streams[0], u64::MAX);
    assert_eq!(t.streams[n as usize - 1], u64::MAX - (n - 1));
    assert_eq!(
        t.ops[n as usize - 1],
        TraceOp::Alloc {
            slot: n as u32 - 1,
            size: 512,
            stream: n as u32 - 1
        }
    );
}

#[test]
fn a_hostile_event_stream_is_read_by_the_replay_anchors_rules() {
    let t = TraceOps::from_events([
        ("segment_free", 7, 1 << 21, 0), // not an operation
        ("alloc", 0, u64::MAX, u64::MAX),
        ("alloc", 0, 1, 0),                 // the same address while live
        ("free_completed", 0, 0, 0),        // frees the later one
        ("free_completed", 0, 0, 0),        // nothing live there any more
        ("free_completed", u64::MAX, 1, 3), // never allocated
        ("alloc", 5, 0, 9),                 // 0 bytes: no operation, no stream
        ("segment_alloc", u64::MAX, u64::MAX, 1),
        ("ALLOC", 8, 512, 0), // actions are case-sensitive
        ("", 0, 0, 0),
        ("alloc", 64, 512, 0), // takes the freed slot
    ]);
    assert_eq!(
        t.ops,
        [
            TraceOp::Alloc {
                slot: 0,
                size: u64::MAX,
                stream: 0
            },
            TraceOp::Alloc {
                slot: 1,
                size: 1,
                stream: 1
            },
            TraceOp::Free { slot: 1 },
            TraceOp::Alloc {
                slot: 1,
                size: 512,
                stream: 1
            },
        ]
    );
    assert_eq!((t.slots, t.unknown_frees, t.realloc_live), (2, 2, 1));
    assert_eq!(t.streams, [u64::MAX, 0]);
    assert_eq!(t.segments, [(u64::MAX, u64::MAX)]);
}

#[test]
fn sizes_at_every_boundary_are_served_or_refused_with_a_typed_error() {
    let sizes = [
        0,
        1,
        511,
        512,
        513,
        MIB - 1,
        MIB,
        MIB + 1,
        2 * MIB - 1,
        2 * MIB,
        2 * MIB + 1,
        10 * MIB - 1,
        10 * MIB,
        10 * MIB + 1,
        20 * MIB - 1,
        20 * MIB,
        20 * MIB + 1,
        EIB - 1,
        EIB,
        EIB + 1,
        i64::MAX as u64,
        i64::MAX as u64 + 1,
        u64::MAX - 511,
        u64::MAX,
    ];
    for conf in [
        "",
        "expandable_segments:True",
        "max_split_size_mb:20",
        "expandable_segments:True,max_split_size_mb:20",
        "roundup_power2_divisions:[>:4]",
    ] {
        let a = sim(conf);
        let mut live = Vec::new();
        for &s in &sizes {
            let before = a.memory_stats();
            match a.allocate(s, StreamId::DEFAULT) {
                Ok(x) => {
                    assert!(s < 16 << 30, "{conf}: {s} bytes on a 16 GiB device");
                    assert_eq!(x.size(), s, "{conf}");
                    live.push(x);
                }
                // PyTorch: `size < one_exa_bytes` or "Tried to allocate
                // more than 1EB memory".
                Err(AllocError::TooLarge { requested, .. }) => {
                    assert!(s >= EIB, "{conf}: {s} refused as more than 1 EiB");
                    assert_eq!(requested, s, "{conf}");
                    assert_eq!(a.memory_stats(), before, "{conf}: {s}");
                }
                Err(AllocError::OutOfMemory(oom)) => {
                    assert!((16 << 30..EIB).contains(&s), "{conf}: {s} out of memory");
                    assert_eq!(oom.requested, s, "{conf}");
                }
                Err(e) => panic!("{conf}: {s} bytes: {e:?}"),
            }
            recount(&a, &format!("{conf}: after {s}"));
        }
        drop(live);
        a.empty_cache().unwrap();
        recount(&a, conf);
        assert_eq!(a.memory_reserved(), 0, "{conf}");
        // Only 2^60 - 1 reached the device; the larger sizes are refused
        // before it (and before any statistic, as in PyTorch).
        assert_eq!(stat(&a, "num_ooms"), 1, "{conf}");
    }
}

#[test]
fn outstanding_uses_on_extreme_streams_survive_resets_and_empty_cache_waits_for_them() {
    let a = sim("");
    let x = a.allocate(3 * MIB, StreamId::DEFAULT).unwrap();
    x.record_stream(StreamId(u64::MAX)).unwrap();
    x.record_stream(StreamId(u64::MAX - 1)).unwrap();
    drop(x);
    a.reset_peak_memory_stats();
    a.reset_accumulated_memory_stats();
    // Freed but waiting on both streams: active, not allocated.
    assert_eq!(stat(&a, "allocated_bytes.all.current"), 0);
    assert_eq!(stat(&a, "active_bytes.all.current"), (3 * MIB) as i64);
    assert_eq!(stat(&a, "active_bytes.all.peak"), (3 * MIB) as i64);
    recount(&a, "pending");
    // PyTorch's empty_cache synchronizes every outstanding event first
    // (`synchronize_and_free_events`), then releases the segment.
    let synced = stat(&a, "num_sync_all_streams");
    a.empty_cache().unwrap();
    assert_eq!(stat(&a, "num_sync_all_streams"), synced + 1);
    assert_eq!(a.memory_reserved(), 0);
    assert_eq!(stat(&a, "active_bytes.all.current"), 0);
    recount(&a, "emptied");
}

#[test]
fn a_fraction_of_zero_below_the_reserved_bytes_keeps_the_cache_and_refuses_growth() {
    let a = sim("");
    drop(a.allocate(100 * MIB, StreamId::DEFAULT).unwrap());
    a.set_memory_fraction(0.0).unwrap();
    // PyTorch only checks the limit when it asks the device for memory.
    assert_eq!(a.memory_reserved(), 100 * MIB);
    let y = a.allocate(50 * MIB, StreamId::DEFAULT).unwrap();
    let before = a.memory_stats();
    match a.allocate(200 * MIB, StreamId::DEFAULT) {
        Err(AllocError::OutOfMemory(oom)) => assert_eq!(oom.requested, 200 * MIB),
        other => panic!("expected out of memory, got {other:?}"),
    }
    let after = a.memory_stats();
    assert_eq!(after.num_ooms, before.num_ooms + 1);
    drop(y);
    recount(&a, "fraction 0");
}

#[test]
fn pools_dropped_under_live_blocks_keep_them_until_freed() {
    let (d, a) = sim_device("", 1 << 34);
    let p = a.mem_pool(MemPoolOptions::default());
    let g = p.activate().unwrap();
    let x = a.allocate(3 * MIB, StreamId::DEFAULT).unwrap();
    let q = a.mem_pool(MemPoolOptions::default());
    let h = q.activate().unwrap();
    let y = a.allocate(3 * MIB, StreamId(7)).unwrap();
    y.record_stream(StreamId(9)).unwrap();
    drop(h);
    drop(q);
    drop(g);
    drop(p);
    a.empty_cache().unwrap();
    // Each pool's live block keeps its 20 MiB segment.
    assert_eq!(a.memory_reserved(), 40 * MIB);
    recount(&a, "pools dropped");
    drop(x);
    drop(y);
    a.empty_cache().unwrap();
    assert_eq!(a.memory_reserved(), 0);
    assert_eq!(d.used_bytes(), 0);
    assert!(a.memory_stats().reserved_bytes_by_private_pools.is_empty());
    recount(&a, "freed");
}

#[test]
fn an_allocator_used_on_many_distinct_streams_stays_small_and_fast() {
    // A 2 MiB small segment per stream: a 64 GiB device holds them.
    let a = common::sim_with(1 << 36, "expandable_segments:False");
    let n = 20_000u64;
    let start = Instant::now();
    let blocks: Vec<_> = (0..n)
        .map(|i| a.allocate_raw(512, StreamId(1 + i)).unwrap())
        .collect();
    for b in blocks {
        a.free_raw(b).unwrap();
    }
    // Again, on the same streams: each finds its entry and its cached block.
    for i in 0..n {
        let b = a.allocate_raw(512, StreamId(1 + i)).unwrap();
        a.free_raw(b).unwrap();
    }
    let took = start.elapsed();
    assert!(
        took < Duration::from_secs(30),
        "{n} streams took {took:?} (a scan per new stream was quadratic: 103 s)"
    );
    assert_eq!(stat(&a, "allocated_bytes.all.current"), 0);
    // One small segment per stream (a stream's blocks never serve another),
    // reused by the second round.
    assert_eq!(stat(&a, "num_device_alloc"), n as i64);
    a.empty_cache().unwrap();
    assert_eq!(stat(&a, "reserved_bytes.all.current"), 0);
}
