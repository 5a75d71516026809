//! PyTorch's allocator tests, session 36: behaviours of PyTorch's allocator
//! that the earlier files (`pytorch_parity*.rs`, `pytorch_tests_s32.rs`,
//! `pytorch_tests_s33.rs`, `pytorch_pinned_parity.rs`, `settings.rs`,
//! `mempool.rs`, `history*.rs`, `diagnostics.rs`) did not check one by one:
//! the accumulated figures of `inactive_split*` (which PyTorch moves by the
//! net change of a free, not by each merge), cached blocks meeting oversize
//! rules changed at run time, a dropped pool's pending frees, the order in
//! which the pinned allocator drains events and searches its free list, and
//! settings strings that must survive a round trip through strata's
//! canonical form (the snapshot's `PYTORCH_CUDA_ALLOC_CONF`).
//!
//! Each test names the PyTorch source function or test it follows
//! (`c10/cuda/CUDACachingAllocator.cpp`, `c10/core/AllocatorConfig.cpp`,
//! `aten/src/ATen/core/CachingHostAllocator.h`, `torch/csrc/cuda/
//! memory_snapshot.cpp`, `test/test_cuda.py`). Expected figures are worked out
//! in the comments from PyTorch's rules, never from strata's output.

use crate::common;

use common::{decode, int, key, sim_device as sim, stat, string};
use serde_pickle::{HashableValue, Value};
use std::sync::Arc;
use strata_alloc::pinned::{PinnedAllocator, SimPinnedBackend};
use strata_alloc::{AllocatorConfig, ConfigError, MemPoolOptions, StreamId};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;
const S5: StreamId = StreamId(5);

/// PyTorch's default segments, and strata's default expandable segments.
const MODES: [&str; 2] = ["expandable_segments:False", "expandable_segments:True"];

/// `current`, `peak`, `allocated` and `freed` of the statistic `k`.
fn figures(a: &strata_alloc::CachingAllocator, k: &str) -> [i64; 4] {
    ["current", "peak", "allocated", "freed"].map(|m| stat(a, &format!("{k}.{m}")))
}

// ----- inactive_split: net changes ----------------------------------------------

/// `DeviceCachingAllocator::alloc_found_block` and `free_block` move
/// `inactive_split` and `inactive_split_bytes` as follows:
///
/// * splitting an unsplit block adds one piece of the remainder's size;
///   shrinking an already split free piece takes the bytes handed out off
///   (`decrease`, so they count in `freed`);
/// * a free sums the pieces its merges swallow (minus one piece and their
///   bytes each) and, when the merged block is still part of a split
///   segment, adds it back (plus one piece and its bytes); only the *net*
///   change is applied, as one `increase` or one `decrease`.
///
/// Three 256 KiB blocks a, b, c in one 2 MiB small segment (ordinary
/// segments; expandable blocks are never counted):
///
/// | step | change | current (pieces, KiB) | allocated | freed |
/// |---|---|---|---|---|
/// | alloc a | split: +1, +1792 | 1, 1792 | 1, 1792 | 0, 0 |
/// | alloc b, c | shrink: -256 twice | 1, 1280 | 1, 1792 | 0, 512 |
/// | free b | no merge, split: +1, +256 | 2, 1536 | 2, 2048 | 0, 512 |
/// | free a | swallows b (-1, -256), split (+1, +512): net 0, +256 | 2, 1792 | 2, 2304 | 0, 512 |
/// | free c | swallows a+b (-1, -512) and the rest (-1, -1280), whole: net -2, -1792 | 0, 0 | 2, 2304 | 2, 2304 |
///
/// Applying each merge on its own instead would add 512 KiB and take 256 KiB
/// at "free a" (allocated 2560 KiB); the peaks are 2 pieces and 1792 KiB.
#[test]
fn inactive_split_moves_by_the_net_change_of_each_free() {
    let k = KIB as i64;
    let (_, a) = sim("expandable_segments:False", 8 * GIB);
    let pieces = |a: &strata_alloc::CachingAllocator| figures(a, "inactive_split.all");
    let bytes = |a: &strata_alloc::CachingAllocator| figures(a, "inactive_split_bytes.all");
    let x = a.allocate(256 * KIB, S0).unwrap();
    assert_eq!(pieces(&a), [1, 1, 1, 0]);
    assert_eq!(bytes(&a), [1792 * k, 1792 * k, 1792 * k, 0]);
    let y = a.allocate(256 * KIB, S0).unwrap();
    let z = a.allocate(256 * KIB, S0).unwrap();
    assert_eq!(pieces(&a), [1, 1, 1, 0]);
    assert_eq!(bytes(&a), [1280 * k, 1792 * k, 1792 * k, 512 * k]);
    drop(y);
    assert_eq!(pieces(&a), [2, 2, 2, 0]);
    assert_eq!(bytes(&a), [1536 * k, 1792 * k, 2048 * k, 512 * k]);
    drop(x);
    assert_eq!(pieces(&a), [2, 2, 2, 0]);
    assert_eq!(bytes(&a), [1792 * k, 1792 * k, 2304 * k, 512 * k]);
    drop(z);
    assert_eq!(pieces(&a), [0, 2, 2, 2]);
    assert_eq!(bytes(&a), [0, 1792 * k, 2304 * k, 2304 * k]);
    // All in the small pool, none in the large.
    assert_eq!(
        figures(&a, "inactive_split_bytes.small_pool"),
        bytes(&a),
        "the small pool's figures are the aggregate's"
    );
    assert_eq!(figures(&a, "inactive_split.large_pool"), [0; 4]);
    a.check_consistency().unwrap();
}

// ----- oversize rules changed at run time -----------------------------------------

/// `get_free_block` and `should_split` read `max_split_size` when a request
/// is served, not when the cached block was made; and `alloc_found_block`
/// counts an oversize allocation by the block's size against the limit then
/// in force. (`torch.cuda.memory._set_allocator_settings`, as
/// `test_allocator_settings` calls it, re-parses the limit at run time.)
///
/// First, no limit: a 50 MiB segment is made and cached (not an oversize
/// segment: there is no limit). With `max_split_size_mb:40`, a 2 MiB request
/// may not take the cached 50 MiB block (below the limit, the block at or
/// above it): a new 20 MiB segment, 70 MiB reserved. A 45 MiB request is
/// oversize and the 50 MiB block is within `max_non_split_rounding` (20 MiB)
/// of it: it takes the block whole (oversize, never split), nothing new is
/// reserved, `oversize_allocations` 1, `allocated_bytes` 2 MiB + 50 MiB =
/// 52 MiB, and `oversize_segments` stays 0.
///
/// Then the other way round: made under `max_split_size_mb:40`, the cached
/// 50 MiB segment is an oversize segment; once the settings string no
/// longer names the limit (reset to unlimited), a 2 MiB request takes that
/// block and splits it (`should_split`: below the limit and more than 1 MiB
/// left), with no new segment: 50 MiB reserved, one 48 MiB inactive split
/// piece.
#[test]
fn cached_blocks_meet_the_oversize_rules_in_force_when_they_are_reused() {
    let (_, a) = sim("expandable_segments:False", 8 * GIB);
    drop(a.allocate(50 * MIB, S0).unwrap());
    assert_eq!(figures(&a, "oversize_segments"), [0; 4]);
    a.set_allocator_settings("max_split_size_mb:40").unwrap();
    let small = a.allocate(2 * MIB, S0).unwrap();
    assert_eq!(a.memory_reserved(), 70 * MIB);
    assert_eq!(stat(&a, "segment.all.current"), 2);
    let big = a.allocate(45 * MIB, S0).unwrap();
    assert_eq!(a.memory_reserved(), 70 * MIB, "the cached 50 MiB block");
    assert_eq!(big.size(), 45 * MIB);
    assert_eq!(a.memory_allocated(), 52 * MIB, "the block whole, 50 MiB");
    assert_eq!(figures(&a, "oversize_allocations"), [1, 1, 1, 0]);
    assert_eq!(figures(&a, "oversize_segments"), [0; 4]);
    drop((small, big));
    a.check_consistency().unwrap();

    let (_, a) = sim("expandable_segments:False,max_split_size_mb:40", 8 * GIB);
    drop(a.allocate(50 * MIB, S0).unwrap());
    assert_eq!(figures(&a, "oversize_segments"), [1, 1, 1, 0]);
    a.set_allocator_settings("").unwrap();
    assert_eq!(stat(&a, "max_split_size"), -1);
    let x = a.allocate(2 * MIB, S0).unwrap();
    assert_eq!(a.memory_reserved(), 50 * MIB, "no new segment");
    assert_eq!(a.memory_allocated(), 2 * MIB, "split: the front 2 MiB");
    assert_eq!(stat(&a, "inactive_split.all.current"), 1);
    assert_eq!(
        stat(&a, "inactive_split_bytes.all.current") as u64,
        48 * MIB
    );
    drop(x);
    a.empty_cache().unwrap();
    assert_eq!(a.memory_reserved(), 0);
    // PyTorch's `release_block` would leave `oversize_segments.current` at
    // 1 here (it compares the size with the limit now in force, unlimited);
    // strata undoes exactly what the segment added (docs/allocator.md,
    // "oversize counters undo exactly what each block added").
    assert_eq!(figures(&a, "oversize_segments"), [0, 1, 1, 1]);
    a.check_consistency().unwrap();
}

// ----- a dropped pool's pending frees --------------------------------------------

/// `MemPool.__del__` / `MemPool::~MemPool`: `releasePool` (the use count
/// drops to 0, the pool becomes freeable) then `emptyCache(id)`, which is
/// `release_cached_blocks(context, id)`: for that pool only it runs
/// `synchronize_and_free_events(context, pool)` (`num_sync_all_streams` + 1)
/// and then releases its whole free segments. So a block of the pool whose
/// free waits on another stream's event (`record_stream`) is waited for and
/// its segment given back when the pool goes, with no `empty_cache` needed.
///
/// A 30 MiB block (a 30 MiB segment of the pool) is used on stream 5 and
/// freed: still active (pending), 30 MiB reserved. Dropping the pool: 0
/// reserved, 0 active, one more `num_sync_all_streams`.
#[test]
fn dropping_a_pool_waits_for_its_pending_frees_and_releases_them() {
    for mode in MODES {
        let (_, a) = sim(mode, 8 * GIB);
        let p = a.mem_pool(MemPoolOptions::default());
        let x = {
            let _g = p.activate().unwrap();
            a.allocate(30 * MIB, S0).unwrap()
        };
        x.record_stream(S5).unwrap();
        drop(x);
        assert_eq!(a.memory_reserved(), 30 * MIB, "{mode}");
        assert_eq!(
            stat(&a, "active_bytes.all.current") as u64,
            30 * MIB,
            "{mode}"
        );
        assert_eq!(stat(&a, "allocated_bytes.all.current"), 0, "{mode}");
        let syncs = stat(&a, "num_sync_all_streams");
        drop(p);
        assert_eq!(a.memory_reserved(), 0, "{mode}");
        assert_eq!(stat(&a, "active_bytes.all.current"), 0, "{mode}");
        assert_eq!(stat(&a, "num_sync_all_streams"), syncs + 1, "{mode}");
        assert!(a.snapshot().is_empty(), "{mode}");
        a.check_consistency().unwrap();
    }
}

// ----- pinned memory: events before the free list -------------------------------

/// `CachingHostAllocatorImpl::allocate` (without background threads): it
/// first runs `process_events()`, which moves each block whose events have
/// completed to the *back* of its size's free list (`push_back`), and only
/// then `get_free_block`, which takes the list's back (`pop_back`): the
/// most recently released block.
///
/// Block A (64 KiB) is used by a copy on stream 3 and freed (pending); block
/// B (64 KiB) is freed with no stream (straight to the free list). The copy
/// finishes. The next 64 KiB request drains A's event first, so A goes
/// behind B and is the block handed out; no event is left pending and only
/// one block is active. (Searching the free list before draining the events
/// would hand out B and leave A's event pending, two blocks active.)
#[test]
fn pinned_allocate_drains_events_before_it_searches_the_free_list() {
    let b = Arc::new(SimPinnedBackend::new(None));
    let a = PinnedAllocator::new(Arc::clone(&b));
    let copy = StreamId(3);
    let ta = a.allocate(64 * KIB).unwrap();
    let tb = a.allocate(64 * KIB).unwrap();
    let (pa, pb) = (ta.ptr(), tb.ptr());
    assert_ne!(pa, pb);
    ta.record_stream(copy).unwrap();
    drop(ta);
    drop(tb);
    assert_eq!(a.pending_events(), 1);
    assert_eq!(a.stats().active_requests.current, 1, "A waits for its copy");
    b.complete_stream(copy);
    let t = a.allocate(64 * KIB).unwrap();
    assert_eq!(t.ptr(), pa, "A, released by its event after B was cached");
    assert_eq!(a.pending_events(), 0);
    let s = a.stats();
    assert_eq!(s.active_requests.current, 1);
    assert_eq!(s.allocations.current, 2, "both blocks still held");
    assert_eq!(s.num_host_alloc, 2, "nothing new pinned");
    a.check_consistency().unwrap();
}

// ----- settings strings ----------------------------------------------------------

/// `parseRoundUpPower2Divisions` keeps every division count it is given,
/// 1 included (a count of 1 rounds like 0, issue #161139, but it is a
/// setting of its own): `[>:1]` with no key before it fills every interval
/// after the first with 1 (`last_index + 1`), and the snapshot's
/// `allocator_settings.roundup_power2_divisions` (`memory_snapshot.cpp`)
/// lists `"1": 0`, then `"2": 1` … `"32768": 1`.
///
/// strata writes a configuration's canonical string (its `Display`, and the
/// snapshot's `PYTORCH_CUDA_ALLOC_CONF`, where PyTorch writes the last
/// settings string itself), which must parse back to the same
/// configuration: a configuration that is not the default must never
/// print as the word "default" (no settings string), nor lose its counts
/// of 1.
#[test]
fn division_counts_of_one_survive_the_canonical_settings_string() {
    for s in [
        "roundup_power2_divisions:[>:1]",
        "roundup_power2_divisions:1",
        "roundup_power2_divisions:[64:1,>:0]",
        "roundup_power2_divisions:[256:1,512:2,>:4]",
    ] {
        let c = AllocatorConfig::parse(s).unwrap();
        assert_ne!(c, AllocatorConfig::default(), "{s}");
        let text = c.to_string();
        assert_ne!(text, "default", "{s}");
        assert_eq!(AllocatorConfig::parse(&text).unwrap(), c, "{s} -> {text}");
    }
    let mut want = [1u64; 16];
    want[0] = 0;
    assert_eq!(
        AllocatorConfig::parse("roundup_power2_divisions:[>:1]")
            .unwrap()
            .roundup_power2_divisions,
        want
    );

    let (_, a) = sim("roundup_power2_divisions:[>:1]", 8 * GIB);
    let doc = decode(&a.snapshot_pickle().unwrap());
    let settings = key(&doc, "allocator_settings");
    let conf = string(key(settings, "PYTORCH_CUDA_ALLOC_CONF"));
    assert_eq!(AllocatorConfig::parse(conf).unwrap(), a.config(), "{conf}");
    let divs = match key(settings, "roundup_power2_divisions") {
        Value::Dict(d) => d,
        v => panic!("not a dict: {v:?}"),
    };
    assert_eq!(divs.len(), 16);
    for i in 0..16u32 {
        let k = HashableValue::String((1u64 << i).to_string());
        assert_eq!(int(&divs[&k]), u64::from(i > 0), "interval {i}");
    }
}

/// `AllocatorConfig::apply` lays a settings string over a configuration
/// (strata's own call; PyTorch's `parseArgs` always starts from the reset
/// keys). Whatever it accepts must be a configuration that `validate`
/// accepts, as `parse` guarantees: PyTorch never lets `max_split_size_mb`
/// be below the large segment size (`parseMaxSplitSize` checks it against
/// the segment size in force). So raising `large_segment_size_mb` to 64
/// over a kept `max_split_size_mb:40` is refused, naming the key and the
/// limit in force, and leaves the configuration as it was; naming both in
/// one string is fine.
#[test]
fn applying_a_segment_size_above_the_split_limit_in_force_is_refused() {
    let mut c = AllocatorConfig::parse("max_split_size_mb:40").unwrap();
    let before = c.clone();
    let e = c.apply("large_segment_size_mb:64").unwrap_err();
    match &e {
        ConfigError::BadValue { key, value, .. } => {
            assert_eq!(*key, "large_segment_size_mb", "{e}");
            assert_eq!(value, "64", "{e}");
        }
        other => panic!("expected BadValue, got {other:?}"),
    }
    let text = e.to_string();
    assert!(text.contains("max_split_size_mb"), "{text}");
    assert_eq!(c, before, "a refused string changes nothing");
    assert!(c.validate().is_ok());

    // Both named: the new limit is checked against the new segment size.
    c.apply("large_segment_size_mb:64,max_split_size_mb:64")
        .unwrap();
    assert_eq!(
        (c.large_segment_size, c.max_split_size),
        (64 * MIB, Some(64 * MIB))
    );
    assert!(c.validate().is_ok());
    // At or below the limit is fine.
    let mut d = AllocatorConfig::parse("max_split_size_mb:40").unwrap();
    d.apply("large_segment_size_mb:40").unwrap();
    assert!(d.validate().is_ok());

    // A live allocator's settings string follows PyTorch's `parseArgs`,
    // which resets the split limit first: the same string is accepted
    // there, and the limit is gone.
    let (_, a) = sim("expandable_segments:False,max_split_size_mb:40", 8 * GIB);
    a.set_allocator_settings("large_segment_size_mb:64")
        .unwrap();
    assert_eq!(a.config().max_split_size, None);
    assert_eq!(a.config().large_segment_size, 64 * MIB);
    assert_eq!(stat(&a, "max_split_size"), -1);
}

// ----- pinned memory: a model of PyTorch's host allocator ------------------------

/// A model of `CachingHostAllocatorImpl` (`aten/src/ATen/core/
/// CachingHostAllocator.h`, no background threads), for requests whose size
/// is a power of two of at least 4 KiB (where strata's size classes are
/// PyTorch's `PowerOf2Ceil` sizes, docs/allocator.md, "Pinned host memory"):
///
/// * `allocate`: `process_events()` first (the events queue in the order
///   they were recorded, each block's in the order of its streams; stop at
///   the first one not complete; a block whose last event completes goes to
///   the *back* of its size's free list); then `get_free_block`, the back of
///   the free list; else a new block (`allocate_host_memory`,
///   `add_allocated_block`);
/// * `record_event`: adds the stream to the block's set;
/// * `free`: no stream, straight to the back of the free list; else one
///   event per stream, the block waiting for all of them;
/// * `empty_cache`: `process_events()`, then every block of every free list
///   is given back (`allocations` and `allocated_bytes` fall,
///   `num_host_free` + 1 each).
///
/// Statistics as PyTorch keeps them, except the peaks of `active_requests`
/// and `active_bytes`, which PyTorch sums over its per-size buckets and
/// strata keeps exact (documented): those two peaks are not compared.
mod host_model {
    use std::collections::{BTreeMap, VecDeque};

    #[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
    pub struct Stat {
        pub current: i64,
        pub peak: i64,
        pub allocated: i64,
        pub freed: i64,
    }

    impl Stat {
        fn inc(&mut self, n: i64) {
            self.current += n;
            self.allocated += n;
            self.peak = self.peak.max(self.current);
        }
        fn dec(&mut self, n: i64) {
            self.current -= n;
            self.freed += n;
        }
    }

    pub struct Block {
        pub size: u64,
        pub ptr: u64,
        streams: Vec<u64>,
        events: u32,
    }

    #[derive(Default)]
    pub struct Model {
        pub blocks: Vec<Block>,
        free: BTreeMap<u64, Vec<usize>>,
        /// (stream, block, sequence number when recorded)
        events: VecDeque<(u64, usize, u64)>,
        seq: u64,
        /// Per stream: events recorded before this sequence number are done.
        done_before: BTreeMap<u64, u64>,
        pub allocations: Stat,
        pub allocated_bytes: Stat,
        pub active_requests: Stat,
        pub active_bytes: Stat,
        pub num_host_alloc: i64,
        pub num_host_free: i64,
    }

    /// What an allocation should do.
    pub enum Alloc {
        Reuse(usize),
        New,
    }

    impl Model {
        fn process_events(&mut self) {
            while let Some(&(s, b, seq)) = self.events.front() {
                if seq >= self.done_before.get(&s).copied().unwrap_or(0) {
                    break;
                }
                self.events.pop_front();
                self.blocks[b].events -= 1;
                if self.blocks[b].events == 0 {
                    self.release(b);
                }
            }
        }

        fn release(&mut self, b: usize) {
            let size = self.blocks[b].size;
            self.free.entry(size).or_default().push(b);
            self.active_requests.dec(1);
            self.active_bytes.dec(size as i64);
        }

        pub fn allocate(&mut self, size: u64) -> Alloc {
            self.process_events();
            if let Some(b) = self.free.get_mut(&size).and_then(Vec::pop) {
                self.active_requests.inc(1);
                self.active_bytes.inc(size as i64);
                return Alloc::Reuse(b);
            }
            Alloc::New
        }

        /// A new block at `ptr` (after `allocate` said `New`).
        pub fn add(&mut self, size: u64, ptr: u64) -> usize {
            self.blocks.push(Block {
                size,
                ptr,
                streams: Vec::new(),
                events: 0,
            });
            self.num_host_alloc += 1;
            self.allocations.inc(1);
            self.allocated_bytes.inc(size as i64);
            self.active_requests.inc(1);
            self.active_bytes.inc(size as i64);
            self.blocks.len() - 1
        }

        pub fn record(&mut self, b: usize, stream: u64) {
            if !self.blocks[b].streams.contains(&stream) {
                self.blocks[b].streams.push(stream);
            }
        }

        pub fn free(&mut self, b: usize) {
            let streams = std::mem::take(&mut self.blocks[b].streams);
            if streams.is_empty() {
                self.release(b);
                return;
            }
            self.blocks[b].events = streams.len() as u32;
            for s in streams {
                self.events.push_back((s, b, self.seq));
                self.seq += 1;
            }
        }

        pub fn complete(&mut self, stream: u64) {
            self.done_before.insert(stream, self.seq);
        }

        pub fn empty_cache(&mut self) {
            self.process_events();
            for (size, list) in std::mem::take(&mut self.free) {
                for _ in list {
                    self.allocations.dec(1);
                    self.allocated_bytes.dec(size as i64);
                    self.num_host_free += 1;
                }
            }
        }

        pub fn pending(&self) -> usize {
            self.events.len()
        }

        pub fn cached(&self) -> u64 {
            self.free.iter().map(|(s, l)| s * l.len() as u64).sum()
        }
    }
}

/// strata's pinned allocator against the model of PyTorch's host allocator
/// above, through random allocations (powers of two, 4 to 64 KiB), streams
/// recorded, frees, completed streams and `empty_cache` calls: the same
/// block reused (by address), a new pin exactly when PyTorch pins one, and
/// the same statistics and queue of pending events after every call.
#[test]
fn pinned_allocator_agrees_with_a_model_of_pytorchs_host_allocator() {
    use host_model::{Alloc, Model};
    use strata_alloc::pinned::PinnedBuffer;
    for seed in 1..=8u64 {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut rnd = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let b = Arc::new(SimPinnedBackend::new(None));
        let a = PinnedAllocator::new(Arc::clone(&b));
        let mut m = Model::default();
        let mut live: Vec<(PinnedBuffer<Arc<SimPinnedBackend>>, usize)> = Vec::new();
        for step in 0..1500 {
            let what = format!("seed {seed}, step {step}");
            match rnd(10) {
                0..=3 => {
                    let size = (4 * KIB) << rnd(5);
                    let buf = a.allocate(size).unwrap();
                    let id = match m.allocate(size) {
                        Alloc::Reuse(id) => {
                            assert_eq!(buf.ptr(), m.blocks[id].ptr, "{what}: reuse");
                            id
                        }
                        Alloc::New => m.add(size, buf.ptr()),
                    };
                    live.push((buf, id));
                }
                4 | 5 if !live.is_empty() => {
                    let i = rnd(live.len() as u64) as usize;
                    let s = 1 + rnd(3);
                    live[i].0.record_stream(StreamId(s)).unwrap();
                    m.record(live[i].1, s);
                }
                6 | 7 if !live.is_empty() => {
                    let i = rnd(live.len() as u64) as usize;
                    let (buf, id) = live.swap_remove(i);
                    drop(buf);
                    m.free(id);
                }
                8 => {
                    let s = 1 + rnd(3);
                    b.complete_stream(StreamId(s));
                    m.complete(s);
                }
                9 if rnd(4) == 0 => {
                    a.empty_cache().unwrap();
                    m.empty_cache();
                }
                _ => {}
            }
            let s = a.stats();
            let exact = |x: strata_alloc::Stat| host_model::Stat {
                current: x.current,
                peak: x.peak,
                allocated: x.allocated,
                freed: x.freed,
            };
            let no_peak = |x: strata_alloc::Stat| (x.current, x.allocated, x.freed);
            let model_no_peak = |x: host_model::Stat| (x.current, x.allocated, x.freed);
            assert_eq!(exact(s.allocations), m.allocations, "{what}: allocations");
            assert_eq!(
                exact(s.allocated_bytes),
                m.allocated_bytes,
                "{what}: allocated_bytes"
            );
            assert_eq!(
                no_peak(s.active_requests),
                model_no_peak(m.active_requests),
                "{what}: active_requests"
            );
            assert_eq!(
                no_peak(s.active_bytes),
                model_no_peak(m.active_bytes),
                "{what}: active_bytes"
            );
            assert_eq!(s.num_host_alloc as i64, m.num_host_alloc, "{what}");
            assert_eq!(s.num_host_free as i64, m.num_host_free, "{what}");
            assert_eq!(a.pending_events(), m.pending(), "{what}: pending events");
            assert_eq!(a.cached_bytes(), m.cached(), "{what}: cached bytes");
        }
        drop(live);
        a.check_consistency().unwrap();
    }
}
