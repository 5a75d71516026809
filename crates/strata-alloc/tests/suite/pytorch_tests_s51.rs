//! PyTorch's allocator tests, session 51.
//!
//! Mirrors a rule of `c10/cuda/CUDACachingAllocator.cpp` that PyTorch's
//! allocator tests stand on whenever they run with expandable segments
//! (`test/test_cuda_expandable_segments.py` reruns `test/test_cuda.py` with
//! `expandable_segments:True`: `test_memory_stats`, `test_memory_snapshot`,
//! `TestMemPool`, …) and that the earlier files (`pytorch_parity*.rs`,
//! `pytorch_tests_s32.rs` to `_s49.rs`, `pytorch_pinned_parity.rs`,
//! `settings.rs`, `mempool.rs`, `history*.rs`, `hostile_*.rs`) do not pin:
//! best fit over the free tail of an expandable segment (a deliberate
//! difference, below). It also pins the
//! size of the `snapshot` trace entry while a free waits for another stream,
//! as `snapshot()` works it out.
//!
//! Deliberate difference, pinned by two ignored tests (docs/allocator.md,
//! "Splitting and merging"): with expandable segments on, PyTorch's
//! `get_free_block` counts the free tail of an expandable segment (a free
//! block followed by unmapped address space) as its size plus the unmapped
//! range after it (`expandable_size`) and moves on, in the pool's (stream,
//! size, address) order, to each next block whose size so counted is
//! smaller, so a free block inside a segment (or a cached block of an
//! ordinary segment) that fits is taken before the growable tail: a 256 KiB
//! request with a 512 KiB hole and a 256 KiB tail in a small-pool segment
//! gets the hole in PyTorch and the tail in strata. strata keeps plain best
//! fit. Tried in session 51, the rule (small pool only; in the large pool
//! too it put `resnet50_varbatch`'s first pass above PyTorch's expandable
//! figure) added about 23 instructions to every allocation of `bert_mlm_fp16`
//! (callgrind, 514 to 537 per `allocate_raw`) and, over the traces of
//! `tests/traces.rs`, 25 more device allocations in first passes (58 to 65
//! on `bert_serving`, 156 to 180 on `unet_cfg_sampling`; 48 to 40 on
//! `lstm_tbptt`) and 50 MiB more reserved on `moe_train`: strata's growths
//! are placed by its own rules (fewest new pages, recycling), under which
//! taking the tail first costs less.
//!
//! PyTorch tests read for this session that strata cannot express (no
//! disagreement to fix there): `TestBlockStateAbsorption` (checkpointing a
//! private pool's state, `_cuda_getCheckpointState`), `test_graph_capture_
//! reclaim_2_streams`/`_4_streams` (stream joins inside a graph capture),
//! `test_mempool_empty_cache_inactive` and `test_tensor_delete_after_
//! allocator_delete` (a user allocator compiled into the test), `test_cycles`,
//! `test_memory_profiler_viz`, `test_direct_traceback`, `test_memory_snapshot_
//! script`, `test_memory_compile_regions` (Python, TorchScript, C++ and
//! `torch.compile` frames), `test_allocator_backend` (`cudaMallocAsync`).
//!
//! Expected figures come from PyTorch's source, worked out in each test's
//! comments, never from strata's output.

use super::common::{sim_device, stat};
use strata_alloc::history::Action;
use strata_alloc::snapshot::BlockState;
use strata_alloc::StreamId;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;
const S1: StreamId = StreamId(7);

/// The (address, size, state) of every block, segment by segment.
fn layout(a: &strata_alloc::CachingAllocator) -> Vec<Vec<(u64, u64, BlockState)>> {
    a.snapshot()
        .iter()
        .map(|s| {
            s.blocks
                .iter()
                .map(|b| (b.address, b.size, b.state))
                .collect()
        })
        .collect()
}

// ---------------------------------------------------------------------------
// get_free_block: the growable tail of an expandable segment
// ---------------------------------------------------------------------------

/// `get_free_block` with `expandable_segments:True` (what every test of
/// `test_cuda.py` rerun by `test_cuda_expandable_segments.py` allocates
/// through). In the small pool, pages are 2 MiB (`kSmallBuffer`), in PyTorch
/// and in strata alike.
///
/// `x` (512 KiB) maps the segment's first page: [x 512K][free 1536K]
/// [unmapped]. `b` (512 KiB) and `c` (768 KiB) split that free block in
/// turn: [x][b][c][tail 256K][unmapped], one page mapped. `b` is freed: a
/// 512 KiB hole between `x` and `c`.
///
/// A request of 256 KiB (`round_size`: a multiple of 512, unchanged):
/// `lower_bound` gives the smallest fitting block, the 256 KiB tail. It is
/// expandable and followed by unmapped space, so its `expandable_size` is
/// 256 KiB plus the rest of the address space; the next block in
/// (size, address) order, the 512 KiB hole, has `expandable_size` 512 KiB
/// (its next block, `c`, is mapped), which is smaller: the search moves to
/// the hole, and stops (no block after it). `should_split` (expandable: 256
/// KiB left ≥ 512 bytes) splits it: the request gets `b`'s address, and
/// [256K free] stays after it. The tail is untouched.
///
/// A second 256 KiB request: the hole's rest (256 KiB) and the tail (256
/// KiB) tie on size, the lower address comes first: the hole's rest, whose
/// next block is mapped, so it is taken as it is. A third: only the tail is
/// left; with no next block the search keeps it. No new page is mapped
/// throughout (`num_device_alloc` stays 1, 2 MiB reserved).
#[test]
#[ignore = "deliberate difference from PyTorch: plain best fit over the growable tail (module doc, docs/allocator.md)"]
fn an_interior_free_block_is_taken_before_the_growable_tail() {
    let (_, a) = sim_device("expandable_segments:True", 16 * GIB);
    let x = a.allocate(512 * KIB, S0).unwrap();
    let b = a.allocate(512 * KIB, S0).unwrap();
    let c = a.allocate(768 * KIB, S0).unwrap();
    let base = x.ptr();
    assert_eq!(b.ptr(), base + 512 * KIB);
    assert_eq!(c.ptr(), base + MIB);
    let tail = base + MIB + 768 * KIB;
    drop(b);
    assert_eq!(
        layout(&a),
        vec![vec![
            (base, 512 * KIB, BlockState::ActiveAllocated),
            (base + 512 * KIB, 512 * KIB, BlockState::Inactive),
            (base + MIB, 768 * KIB, BlockState::ActiveAllocated),
            (tail, 256 * KIB, BlockState::Inactive),
        ]]
    );

    let y = a.allocate(256 * KIB, S0).unwrap();
    assert_eq!(y.ptr(), base + 512 * KIB, "the hole, not the tail");
    assert_eq!(
        layout(&a),
        vec![vec![
            (base, 512 * KIB, BlockState::ActiveAllocated),
            (base + 512 * KIB, 256 * KIB, BlockState::ActiveAllocated),
            (base + 768 * KIB, 256 * KIB, BlockState::Inactive),
            (base + MIB, 768 * KIB, BlockState::ActiveAllocated),
            (tail, 256 * KIB, BlockState::Inactive),
        ]]
    );

    let z = a.allocate(256 * KIB, S0).unwrap();
    assert_eq!(z.ptr(), base + 768 * KIB, "the lower address among equals");
    let w = a.allocate(256 * KIB, S0).unwrap();
    assert_eq!(w.ptr(), tail, "the tail, once nothing else fits");
    assert_eq!(a.memory_reserved(), 2 * MIB);
    assert_eq!(stat(&a, "num_device_alloc"), 1);
    a.check_consistency().unwrap();
    drop((x, c, y, z, w));
    a.empty_cache().unwrap();
    assert_eq!(a.memory_reserved(), 0);
}

/// The same rule when the next block is of an ordinary segment: in
/// PyTorch's `get_free_block` the loop moves to the next block whatever its
/// kind (an ordinary block's `expandable_size` is its size), then stops,
/// since the block it stands on is no longer expandable.
///
/// With `expandable_segments:False`, `y1` and `y2` (1 MiB each) fill one
/// ordinary 2 MiB small segment (`get_allocation_size`: a request of at most
/// 1 MiB gets `kSmallBuffer`). Expandable segments are then turned on
/// (`_set_allocator_settings`). `e0` (1 MiB) finds no free block and maps
/// the first page of an expandable segment; `e1` (768 KiB) splits its free
/// 1 MiB: [e0 1M][e1 768K][tail 256K][unmapped]. `y1` is freed: a cached 1
/// MiB block of the ordinary segment.
///
/// A 256 KiB request: `lower_bound` gives the tail (256 KiB); its
/// `expandable_size` is unbounded, the next block's (`y1`'s, 1 MiB) smaller,
/// so it takes `y1`'s block. `should_split` follows the setting
/// (`CUDAAllocatorConfig::expandable_segments()`): 768 KiB left ≥ 512 bytes,
/// so it splits, and `inactive_split` counts the ordinary segment's free
/// 768 KiB piece (one block, 768 KiB). The expandable tail stays free.
#[test]
#[ignore = "deliberate difference from PyTorch: plain best fit over the growable tail (module doc, docs/allocator.md)"]
fn a_cached_ordinary_block_is_taken_before_the_growable_tail() {
    let (_, a) = sim_device("expandable_segments:False", 16 * GIB);
    let y1 = a.allocate(MIB, S0).unwrap();
    let y2 = a.allocate(MIB, S0).unwrap();
    let ordinary = y1.ptr();
    assert_eq!(y2.ptr(), ordinary + MIB);
    a.set_allocator_settings("expandable_segments:True")
        .unwrap();
    let e0 = a.allocate(MIB, S0).unwrap();
    let e1 = a.allocate(768 * KIB, S0).unwrap();
    assert_eq!(e1.ptr(), e0.ptr() + MIB);
    let tail = e0.ptr() + MIB + 768 * KIB;
    drop(y1);
    let r = a.allocate(256 * KIB, S0).unwrap();
    assert_eq!(r.ptr(), ordinary, "the ordinary block, not the tail");
    let segs = a.snapshot();
    let ord = segs.iter().find(|s| !s.is_expandable).unwrap();
    let got: Vec<_> = ord
        .blocks
        .iter()
        .map(|b| (b.address, b.size, b.state))
        .collect();
    assert_eq!(
        got,
        vec![
            (ordinary, 256 * KIB, BlockState::ActiveAllocated),
            (ordinary + 256 * KIB, 768 * KIB, BlockState::Inactive),
            (ordinary + MIB, MIB, BlockState::ActiveAllocated),
        ]
    );
    let exp = segs.iter().find(|s| s.is_expandable).unwrap();
    let last = exp.blocks.last().unwrap();
    assert_eq!(
        (last.address, last.size, last.state),
        (tail, 256 * KIB, BlockState::Inactive)
    );
    assert_eq!(stat(&a, "inactive_split.all.current"), 1);
    assert_eq!(
        stat(&a, "inactive_split_bytes.all.current") as u64,
        768 * KIB
    );
    a.check_consistency().unwrap();
    drop((y2, e0, e1, r));
}

/// The tail is still the answer when it is the only block that fits, or
/// when every other fitting block can grow as far: with one tail and no
/// other free block, a request of any size up to the tail's is served from
/// it without mapping anything (PyTorch's loop has no next block to move
/// to). Here [x 1M][tail 1M][unmapped]: a 1 MiB request takes the tail whole
/// (0 bytes left, no split), `num_device_alloc` stays 1.
#[test]
fn the_growable_tail_serves_when_nothing_else_fits() {
    let (_, a) = sim_device("expandable_segments:True", 16 * GIB);
    let x = a.allocate(MIB, S0).unwrap();
    let y = a.allocate(MIB, S0).unwrap();
    assert_eq!(y.ptr(), x.ptr() + MIB);
    assert_eq!(stat(&a, "num_device_alloc"), 1);
    assert_eq!(a.memory_reserved(), 2 * MIB);
    // On another stream the tail of S0's segment is no candidate at all
    // (`get_free_block` searches the request's stream only): a segment of
    // its own.
    let z = a.allocate(512 * KIB, S1).unwrap();
    assert_eq!(stat(&a, "num_device_alloc"), 2);
    assert_eq!(a.memory_reserved(), 4 * MIB);
    a.check_consistency().unwrap();
    drop((x, y, z));
}

// ---------------------------------------------------------------------------
// snapshot(): the trace entry's size
// ---------------------------------------------------------------------------

/// `DeviceCachingAllocator::snapshot` sums each segment's `active_size`
/// (blocks allocated, or with `event_count > 0` or stream uses left) and
/// records `record_trace(SNAPSHOT, 0, total_active, ...)`: a block freed
/// while another stream still uses it (`record_stream`, `test_record_stream`)
/// counts, and is reported `active_pending_free` with its requested size.
///
/// `x` (1 MiB, recorded on S1, freed: pending) and `y` (4 KiB, live) share
/// one ordinary 2 MiB small segment: the snapshot entry's size is 1 MiB +
/// 4 KiB, the segment's `active_size` the same and its `allocated_size` 4
/// KiB. Once S1's work completes, the next `malloc` runs `process_events`,
/// whose `free_block` ends the pending free; a 512-byte request is then
/// live: the next snapshot entry's size is 4 KiB + 512 bytes.
#[test]
fn a_snapshot_entry_counts_a_pending_free_as_active() {
    let (d, a) = sim_device("expandable_segments:False", 16 * GIB);
    a.record_history(Some(1000));
    let x = a.allocate(MIB, S0).unwrap();
    let y = a.allocate(4 * KIB, S0).unwrap();
    x.record_stream(S1).unwrap();
    let xp = x.ptr();
    drop(x);
    let segs = a.snapshot();
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].active_size, MIB + 4 * KIB);
    assert_eq!(segs[0].allocated_size, 4 * KIB);
    assert_eq!(segs[0].requested_size, MIB + 4 * KIB);
    let xb = segs[0].blocks.iter().find(|b| b.address == xp).unwrap();
    assert_eq!(xb.state, BlockState::ActivePendingFree);
    assert_eq!(xb.requested_size, MIB);
    let h = a.history();
    let last = h.last().unwrap();
    assert_eq!(
        (last.action, last.addr, last.size),
        (Action::Snapshot, 0, MIB + 4 * KIB)
    );

    d.complete_stream(S1);
    let z = a.allocate(512, S0).unwrap();
    let segs = a.snapshot();
    assert_eq!(segs[0].active_size, 4 * KIB + 512);
    let h = a.history();
    let last = h.last().unwrap();
    assert_eq!((last.action, last.size), (Action::Snapshot, 4 * KIB + 512));
    a.check_consistency().unwrap();
    drop((y, z));
}
