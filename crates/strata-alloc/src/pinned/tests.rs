//! The pinned allocator's tests, over the simulated backend.

use super::*;
use crate::driver::StreamId;
use proptest::prelude::*;
use std::collections::HashMap;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

fn sim(
    capacity: Option<u64>,
) -> (
    Arc<SimPinnedBackend>,
    Arc<PinnedAllocator<Arc<SimPinnedBackend>>>,
) {
    let b = Arc::new(SimPinnedBackend::new(capacity));
    (Arc::clone(&b), PinnedAllocator::new(b))
}

#[test]
fn size_classes_are_pages_then_eighths() {
    assert_eq!(size_class(1), PAGE);
    assert_eq!(size_class(PAGE), PAGE);
    assert_eq!(size_class(PAGE + 1), 2 * PAGE);
    assert_eq!(size_class(20 * KIB + 1), 24 * KIB); // page rounding below 32 KiB
    assert_eq!(size_class(33 * KIB), 36 * KIB); // 32 KiB / 8 = 4 KiB steps
    assert_eq!(size_class(65 * KIB), 72 * KIB); // 64 KiB / 8 = 8 KiB steps
    assert_eq!(size_class(129 * MIB + MIB / 2), 144 * MIB);
    assert_eq!(size_class(1 << 40), 1 << 40);
    assert_eq!(size_class((1 << 40) + 1), (1 << 40) + (1 << 37));
}

proptest! {
    #[test]
    fn size_class_bounds(size in 1u64..(1 << 45)) {
        let c = size_class(size);
        prop_assert!(c >= size);
        prop_assert_eq!(c % PAGE, 0);
        // Waste: under a page up to 32 KiB, under 1/8 of the request above.
        if size <= 32 * KIB {
            prop_assert!(c - size < PAGE);
        } else {
            prop_assert!((c - size) * 8 < size, "{} -> {}", size, c);
        }
        // Monotone, and a class is its own class.
        prop_assert!(size_class(size + 1) >= c);
        prop_assert_eq!(size_class(c), c);
    }
}

#[test]
fn a_freed_block_is_reused_without_a_backend_call() {
    let (b, a) = sim(None);
    let x = a.allocate(100 * KIB).unwrap();
    let p = x.ptr();
    assert_eq!(x.capacity(), size_class(100 * KIB));
    drop(x);
    assert_eq!(a.cached_bytes(), size_class(100 * KIB));
    let y = a.allocate(100 * KIB - 5).unwrap();
    assert_eq!(y.ptr(), p);
    assert_eq!(b.calls(), (1, 0));
    let s = a.stats();
    assert_eq!(s.num_host_alloc, 1);
    assert_eq!(s.allocations.current, 1);
    assert_eq!(s.active_requests.current, 1);
    assert_eq!(s.active_requests.allocated, 2);
    assert_eq!(s.active_bytes.current, y.capacity() as i64);
    a.check_consistency().unwrap();
}

#[test]
fn a_slightly_larger_cached_block_serves_but_a_much_larger_one_does_not() {
    let (_b, a) = sim(None);
    // class(40000) = 40 KiB; 44 KiB is within 1/8 above it, 48 KiB is not.
    let big = a.allocate(48 * KIB).unwrap();
    let mid = a.allocate(44 * KIB).unwrap();
    let (pb, pm) = (big.ptr(), mid.ptr());
    drop(big);
    drop(mid);
    let x = a.allocate(40_000).unwrap();
    assert_eq!((x.ptr(), x.capacity()), (pm, 44 * KIB));
    let y = a.allocate(40_000).unwrap();
    assert_ne!(y.ptr(), pb, "a 48 KiB block must not serve a 40 KiB class");
    assert_eq!(y.capacity(), 40 * KIB);
    a.check_consistency().unwrap();
}

#[test]
fn recorded_streams_defer_reuse_until_every_event_completes() {
    let (b, a) = sim(None);
    let x = a.allocate(MIB).unwrap();
    let p = x.ptr();
    x.record_stream(StreamId(1)).unwrap();
    x.record_stream(StreamId(2)).unwrap();
    x.record_stream(StreamId(1)).unwrap(); // once per stream
    drop(x);
    assert_eq!(a.pending_events(), 2);
    assert_eq!(
        a.stats().active_requests.current,
        1,
        "pending blocks stay active"
    );
    let y = a.allocate(MIB).unwrap();
    assert_ne!(y.ptr(), p);
    b.complete_stream(StreamId(1));
    let z = a.allocate(MIB).unwrap();
    assert_ne!(z.ptr(), p, "stream 2 may still be copying");
    b.complete_stream(StreamId(2));
    let w = a.allocate(MIB).unwrap();
    assert_eq!(w.ptr(), p);
    assert_eq!(a.pending_events(), 0);
    a.check_consistency().unwrap();
    // Events are pooled: the two created are reused.
    drop(w);
    let v = a.allocate(MIB).unwrap();
    v.record_stream(StreamId(3)).unwrap();
    drop(v);
    assert_eq!(b.live_events(), 2);
}

#[test]
fn record_event_accepts_interior_pointers_and_rejects_strangers() {
    let (_b, a) = sim(None);
    let x = a.allocate(10 * KIB).unwrap();
    a.record_event(x.ptr() + 100, StreamId(4)).unwrap();
    assert_eq!(
        a.record_event(x.ptr() + x.capacity(), StreamId(4)),
        Err(PinnedError::InvalidPointer {
            ptr: x.ptr() + x.capacity()
        })
    );
    assert!(a.record_event(8, StreamId(4)).is_err());
    let p = x.ptr();
    drop(x);
    assert_eq!(a.pending_events(), 1);
    // A cached (not live) block cannot be recorded either.
    assert!(a.record_event(p, StreamId(4)).is_err());
}

#[test]
fn empty_cache_frees_ready_blocks_and_keeps_pending_ones() {
    let (b, a) = sim(None);
    let x = a.allocate(8 * KIB).unwrap();
    let y = a.allocate(MIB).unwrap();
    let keep = a.allocate(3 * MIB).unwrap();
    y.record_stream(StreamId(9)).unwrap();
    drop(x);
    drop(y);
    a.empty_cache().unwrap();
    assert_eq!(
        b.live_blocks(),
        2,
        "the pending block and the live one stay"
    );
    assert_eq!(a.stats().num_host_free, 1);
    b.complete_all();
    a.empty_cache().unwrap();
    assert_eq!(b.live_blocks(), 1);
    assert_eq!(b.used_bytes(), keep.capacity());
    let s = a.stats();
    assert_eq!(s.allocations.current, 1);
    assert_eq!(s.allocations.freed, 2);
    assert_eq!(s.allocated_bytes.peak, (8 * KIB + MIB + 3 * MIB) as i64);
    assert_eq!(s.host_free_time.count, 2);
    a.check_consistency().unwrap();
}

#[test]
fn exhaustion_empties_the_cache_and_retries_then_fails_with_figures() {
    let (b, a) = sim(Some(4 * MIB));
    let x = a.allocate(2 * MIB).unwrap();
    drop(x); // cached: 2 MiB pinned, 0 in use
             // 3 MiB does not fit next to the cached 2 MiB; the cache is emptied.
    let y = a.allocate(3 * MIB).unwrap();
    assert_eq!(b.used_bytes(), 3 * MIB);
    assert_eq!(a.stats().num_host_free, 1);
    match a.allocate(2 * MIB) {
        Err(PinnedError::OutOfMemory {
            requested,
            block_size,
            held,
            active,
        }) => {
            assert_eq!((requested, block_size), (2 * MIB, 2 * MIB));
            assert_eq!((held, active), (3 * MIB, 3 * MIB));
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    let msg = a.allocate(2 * MIB).unwrap_err().to_string();
    assert!(msg.contains("out of pinned host memory"), "{msg}");
    drop(y);
    assert!(a.allocate(2 * MIB).is_ok());
    // Injected exhaustion on both tries is reported too; absurd sizes at once.
    b.inject_out_of_memory(2);
    assert!(matches!(
        a.allocate(64 * KIB),
        Err(PinnedError::OutOfMemory { .. })
    ));
    assert!(matches!(
        a.allocate(u64::MAX),
        Err(PinnedError::OutOfMemory { .. })
    ));
    a.check_consistency().unwrap();
}

#[test]
fn handles_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<PinnedAllocator<SimPinnedBackend>>();
    send_sync::<PinnedBuffer<SimPinnedBackend>>();
    #[cfg(feature = "cuda")]
    send_sync::<PinnedBuffer<CudaPinnedBackend>>();
}

#[test]
fn zero_bytes_is_an_empty_buffer() {
    let (b, a) = sim(None);
    let x = a.allocate(0).unwrap();
    assert!(x.is_empty());
    assert_eq!(x.ptr(), 0);
    x.record_stream(StreamId(1)).unwrap();
    drop(x);
    assert_eq!(b.calls(), (0, 0));
    assert_eq!(a.stats(), PinnedStats::default());
}

#[test]
fn buffers_are_real_writable_memory() {
    let (_b, a) = sim(None);
    let mut x = a.allocate(5000).unwrap();
    // SAFETY: the sim backend hands out real host memory; no copy is in flight.
    unsafe {
        x.as_mut_slice().fill(0xab);
        assert!(x.as_slice().iter().all(|&v| v == 0xab));
        assert_eq!(x.as_slice().len(), 5000);
    }
    assert_eq!(x.ptr() % PAGE, 0);
}

#[test]
fn dropping_the_allocator_returns_everything() {
    let b = Arc::new(SimPinnedBackend::new(None));
    {
        let a = PinnedAllocator::new(Arc::clone(&b));
        let x = a.allocate(MIB).unwrap();
        let y = a.allocate(KIB).unwrap();
        x.record_stream(StreamId(5)).unwrap();
        drop(x); // pending
        drop(y); // cached
        assert_eq!(b.live_blocks(), 2);
    }
    assert_eq!(b.live_blocks(), 0);
    assert_eq!(b.live_events(), 0);
}

#[test]
fn stats_map_has_pytorch_keys_and_resets_work() {
    let (_b, a) = sim(None);
    let x = a.allocate(KIB).unwrap();
    drop(x);
    let m = a.stats().to_map();
    assert_eq!(m["allocations.current"], 1);
    assert_eq!(m["active_requests.peak"], 1);
    assert_eq!(m["num_host_alloc"], 1);
    assert_eq!(m["host_alloc_time.count"], 1);
    a.reset_peak_stats();
    assert_eq!(a.stats().active_requests.peak, 0);
    a.reset_accumulated_stats();
    let s = a.stats();
    assert_eq!((s.allocations.allocated, s.num_host_alloc), (0, 0));
    assert_eq!(s.allocations.current, 1);
}

#[test]
fn concurrent_use_keeps_the_books_straight() {
    let (b, a) = sim(None);
    std::thread::scope(|sc| {
        for t in 0..4u64 {
            let a = &a;
            sc.spawn(move || {
                for i in 0..200u64 {
                    let x = a.allocate(1 + (i * 7919 + t) % (256 * KIB)).unwrap();
                    if i % 3 == 0 {
                        x.record_stream(StreamId(t + 1)).unwrap();
                    }
                }
            });
        }
    });
    b.complete_all();
    a.process_pending_events();
    a.check_consistency().unwrap();
    let s = a.stats();
    assert_eq!(s.active_requests.current, 0);
    assert_eq!(s.allocations.current as usize, b.live_blocks());
    a.empty_cache().unwrap();
    assert_eq!(b.live_blocks(), 0);
}

#[derive(Clone, Debug)]
enum Op {
    Alloc(u64),
    Free(usize),
    Record(usize, u64),
    Complete(u64),
    EmptyCache,
    Settle,
}

fn op() -> impl Strategy<Value = Op> {
    let sizes = prop::sample::select(vec![
        1,
        4096,
        5000,
        40_000,
        44 * KIB,
        45_000,
        100_000,
        MIB,
        MIB + 1,
    ]);
    prop_oneof![
        4 => sizes.prop_map(Op::Alloc),
        3 => any::<usize>().prop_map(Op::Free),
        3 => (any::<usize>(), 1u64..4).prop_map(|(i, s)| Op::Record(i, s)),
        2 => (1u64..4).prop_map(Op::Complete),
        1 => Just(Op::EmptyCache),
        1 => Just(Op::Settle),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn random_sequences_keep_every_invariant(ops in prop::collection::vec(op(), 1..80)) {
        let (b, a) = sim(None);
        // Live buffers, and freed blocks whose streams the model has not seen
        // complete yet (address -> (size, streams)).
        let mut live: Vec<PinnedBuffer<Arc<SimPinnedBackend>>> = Vec::new();
        let mut guarded: Vec<(u64, u64, Vec<u64>)> = Vec::new();
        let mut recorded: HashMap<u64, Vec<u64>> = HashMap::new();
        for op in ops {
            match op {
                Op::Alloc(size) => {
                    let x = a.allocate(size).unwrap();
                    let (p, c) = (x.ptr(), x.capacity());
                    prop_assert!(c >= size);
                    for y in &live {
                        prop_assert!(p + c <= y.ptr() || y.ptr() + y.capacity() <= p,
                            "{:#x}+{} overlaps live {:#x}+{}", p, c, y.ptr(), y.capacity());
                    }
                    for (q, qs, streams) in &guarded {
                        prop_assert!(p + c <= *q || q + qs <= p,
                            "{:#x} reused while streams {:?} may still use it", p, streams);
                    }
                    live.push(x);
                }
                Op::Free(i) if !live.is_empty() => {
                    let x = live.swap_remove(i % live.len());
                    let streams = recorded.remove(&x.ptr()).unwrap_or_default();
                    if !streams.is_empty() {
                        guarded.push((x.ptr(), x.capacity(), streams));
                    }
                    drop(x);
                }
                Op::Record(i, s) if !live.is_empty() => {
                    let x = &live[i % live.len()];
                    x.record_stream(StreamId(s)).unwrap();
                    let v = recorded.entry(x.ptr()).or_default();
                    if !v.contains(&s) {
                        v.push(s);
                    }
                }
                Op::Complete(s) => {
                    b.complete_stream(StreamId(s));
                    for g in &mut guarded {
                        g.2.retain(|&t| t != s);
                    }
                    guarded.retain(|g| !g.2.is_empty());
                }
                Op::EmptyCache => a.empty_cache().unwrap(),
                Op::Settle => {
                    b.complete_all();
                    guarded.clear();
                    a.process_pending_events();
                    let s = a.stats();
                    prop_assert_eq!(s.active_requests.current, live.len() as i64);
                    prop_assert_eq!(
                        s.active_bytes.current,
                        live.iter().map(|x| x.capacity() as i64).sum::<i64>()
                    );
                    prop_assert_eq!(a.pending_events(), 0);
                }
                _ => {}
            }
            a.check_consistency().map_err(TestCaseError::fail)?;
            let s = a.stats();
            prop_assert_eq!(s.allocations.current as usize, b.live_blocks());
            prop_assert_eq!(s.allocated_bytes.current as u64, b.used_bytes());
            prop_assert_eq!(s.num_host_alloc - s.num_host_free, b.live_blocks() as u64);
            prop_assert!(s.active_requests.current >= live.len() as i64);
            prop_assert!(s.allocations.peak >= s.allocations.current);
        }
        drop(live);
        drop(a);
        prop_assert_eq!(b.live_blocks(), 0);
        prop_assert_eq!(b.live_events(), 0);
    }
}
