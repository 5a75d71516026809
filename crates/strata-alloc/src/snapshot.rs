//! Snapshots of the allocator's segments, the `memory_summary()` table, and the
//! consistency check the tests run after every operation.

use crate::block::NONE;
use crate::driver::{Device, StreamId};
use crate::state::State;
use crate::stats::{MemoryStats, Stat, StatArray, StatType};

/// The state of a block in a snapshot (PyTorch's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockState {
    /// Handed out to a caller.
    ActiveAllocated,
    /// Freed by the caller, waiting for other streams' events.
    ActivePendingFree,
    /// Free and reusable.
    Inactive,
}

impl BlockState {
    /// PyTorch's string for the state.
    pub fn name(self) -> &'static str {
        match self {
            BlockState::ActiveAllocated => "active_allocated",
            BlockState::ActivePendingFree => "active_pending_free",
            BlockState::Inactive => "inactive",
        }
    }
}

/// One block of a snapshot.
///
/// `requested_size` is the caller's size for an allocated block and for one
/// whose free waits on other streams' events (PyTorch's `active_pending_free`),
/// 0 for an inactive one: summed over a snapshot it equals
/// `requested_bytes.all.current`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockSnapshot {
    /// Device address.
    pub address: u64,
    /// Size in bytes.
    pub size: u64,
    /// Size the caller asked for (0 when not allocated).
    pub requested_size: u64,
    /// Its state.
    pub state: BlockState,
    /// Where it was allocated, when history was on then (allocated and
    /// pending-free blocks).
    pub site: Option<crate::history::CallSite>,
}

/// One segment of a snapshot (a mapped range, for expandable segments).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentSnapshot {
    /// Base address.
    pub address: u64,
    /// Size in bytes.
    pub total_size: u64,
    /// Bytes of allocated blocks.
    pub allocated_size: u64,
    /// Bytes of active blocks.
    pub active_size: u64,
    /// Bytes the callers asked for.
    pub requested_size: u64,
    /// The stream the segment belongs to.
    pub stream: StreamId,
    /// `"small"` or `"large"`.
    pub segment_type: &'static str,
    /// Whether it is (part of) an expandable segment.
    pub is_expandable: bool,
    /// Where the allocation that made the segment was asked for, when
    /// history was recording call sites then (PyTorch's segment `frames`,
    /// the stack of its `cudaMalloc`); for an expandable segment, only the
    /// range mapped at its base has one: the call site of the allocation that
    /// first mapped memory there (PyTorch's `map_block`).
    pub site: Option<crate::history::CallSite>,
    /// The memory pool it belongs to, as PyTorch's `segment_pool_id`:
    /// `(0, 0)` for the device's default pools, a [`MemPool`]'s
    /// [`id`](crate::MemPool::id) for a private pool's segments.
    ///
    /// [`MemPool`]: crate::MemPool
    pub pool_id: (u64, u64),
    /// Its blocks in address order.
    pub blocks: Vec<BlockSnapshot>,
}

/// The segments and their blocks, sorted by address (PyTorch's
/// `memory_snapshot()`); each mapped range of an expandable segment is its own
/// segment.
pub(crate) fn segments(st: &State) -> Vec<SegmentSnapshot> {
    let mut out = Vec::new();
    let mut heads: Vec<u32> = st.segments.values().copied().collect();
    for seg in st.expandable.iter().flatten() {
        heads.push(seg.head);
    }
    for head in heads {
        let mut cur: Option<SegmentSnapshot> = None;
        let mut id = head;
        while id != NONE {
            let b = &st.blocks[id];
            if b.mapped {
                let seg = cur.get_or_insert_with(|| SegmentSnapshot {
                    address: b.ptr,
                    total_size: 0,
                    allocated_size: 0,
                    active_size: 0,
                    requested_size: 0,
                    stream: st.streams[b.stream as usize].handle,
                    segment_type: b.pool.name(),
                    is_expandable: b.expandable,
                    // Sites are kept by segment base (an expandable
                    // segment's only for the range mapped at its base, as in
                    // PyTorch).
                    site: st
                        .history
                        .segment_sites
                        .get(&b.ptr)
                        .map(|&l| crate::history::CallSite::from_location(l)),
                    pool_id: crate::mempool::pool_id(st.streams[b.stream as usize].mempool),
                    blocks: Vec::new(),
                });
                let state = if b.allocated {
                    BlockState::ActiveAllocated
                } else if b.event_count > 0 || !b.stream_uses.is_empty() {
                    BlockState::ActivePendingFree
                } else {
                    BlockState::Inactive
                };
                // A block whose free waits on other streams' events keeps its
                // requested size until the free completes, as the statistics do.
                let requested = if state == BlockState::Inactive {
                    0
                } else {
                    b.requested
                };
                seg.total_size += b.size;
                if b.allocated {
                    seg.allocated_size += b.size;
                }
                if state != BlockState::Inactive {
                    seg.active_size += b.size;
                }
                seg.requested_size += requested;
                seg.blocks.push(BlockSnapshot {
                    address: b.ptr,
                    size: b.size,
                    requested_size: requested,
                    state,
                    site: if state == BlockState::Inactive {
                        None
                    } else {
                        (b.hist_seq != 0)
                            .then_some(b.hist_site)
                            .flatten()
                            .map(crate::history::CallSite::from_location)
                    },
                });
            } else if let Some(seg) = cur.take() {
                out.push(seg);
            }
            id = b.next;
        }
        out.extend(cur);
    }
    out.sort_by_key(|s| s.address);
    out
}

/// Width of the label column of the `memory_summary()` table (the longest
/// label, "Device reserved segments", and a margin).
const LABEL_WIDTH: usize = 26;
/// Width of a value cell.
const CELL_WIDTH: usize = 12;
/// Inner width of the table.
const INNER: usize = LABEL_WIDTH + 1 + 4 * (CELL_WIDTH + 3) - 1;

/// PyTorch's `memory_summary()` table: full row labels, and one unit style
/// (each byte figure in the binary unit that suits it, as `format_size`
/// writes it; counts as exact integers).
pub(crate) fn summary(device: Device, s: &MemoryStats, abbreviated: bool) -> String {
    let rule = |c: char| format!("|{}|\n", c.to_string().repeat(INNER));
    let half = (INNER - 1) / 2;
    let mut out = String::new();
    out += &rule('=');
    out += &format!(
        "|{:^INNER$}|\n",
        format!("strata memory summary, device {device}")
    );
    out += &rule('-');
    out += &format!(
        "|{:^half$}|{:^rest$}|\n",
        format!("OOMs: {}", s.num_ooms),
        format!("device allocation retries: {}", s.num_alloc_retries),
        rest = INNER - half - 1
    );
    out += &rule('=');
    out += &format!("| {:<w$}|", "Metric", w = LABEL_WIDTH - 1);
    for h in ["Cur Usage", "Peak Usage", "Tot Alloc", "Tot Freed"] {
        out += &format!(" {h:>CELL_WIDTH$} |");
    }
    out += "\n";
    let groups: [(&str, &StatArray, bool); 9] = [
        ("Allocated memory", &s.allocated_bytes, true),
        ("Active memory", &s.active_bytes, true),
        ("Requested memory", &s.requested_bytes, true),
        ("Device reserved memory", &s.reserved_bytes, true),
        ("Non-releasable memory", &s.inactive_split_bytes, true),
        ("Allocations", &s.allocation, false),
        ("Active allocs", &s.active, false),
        ("Device reserved segments", &s.segment, false),
        ("Non-releasable allocs", &s.inactive_split, false),
    ];
    for (name, arr, bytes) in groups {
        out += &rule('-');
        // PyTorch's order: all, then the large pool, then the small pool
        // (abbreviated: all only).
        let pools: &[StatType] = if abbreviated {
            &[StatType::All]
        } else {
            &[StatType::All, StatType::LargePool, StatType::SmallPool]
        };
        for &t in pools {
            let label = match t {
                StatType::All => name.to_string(),
                StatType::LargePool => "      from large pool".to_string(),
                StatType::SmallPool => "      from small pool".to_string(),
            };
            out += &row(&label, arr.get(t), bytes);
        }
    }
    for (name, st) in [
        ("Oversize allocations", s.oversize_allocations),
        ("Oversize segments", s.oversize_segments),
    ] {
        out += &rule('-');
        out += &row(name, st, false);
    }
    out += &rule('=');
    out
}

fn row(label: &str, s: Stat, bytes: bool) -> String {
    let mut out = format!("| {label:<w$}|", w = LABEL_WIDTH - 1);
    for v in [s.current, s.peak, s.allocated, s.freed] {
        let cell = if bytes {
            crate::stats::format_size(v.max(0) as u64)
        } else {
            v.to_string()
        };
        out += &format!(" {cell:>CELL_WIDTH$} |");
    }
    out + "\n"
}

/// Recounts everything from the blocks and compares with the running state.
pub(crate) fn check(st: &State, page: u64) -> Result<(), String> {
    let mut want = MemoryStats::default();
    let mut free_count = 0usize;
    let mut visited = 0usize;
    let mut walk = |head: u32, base: u64, size: u64, expandable: bool| -> Result<(), String> {
        let mut id = head;
        let mut at = base;
        let mut prev = NONE;
        while id != NONE {
            let b = st
                .blocks
                .get(id)
                .ok_or_else(|| format!("block {id} in a chain is not live"))?;
            visited += 1;
            if b.ptr != at || b.prev != prev {
                return Err(format!(
                    "chain broken at block {id} ({:#x}, expected {at:#x})",
                    b.ptr
                ));
            }
            if b.expandable != expandable {
                return Err(format!("block {id} has the wrong segment kind"));
            }
            let pool = b.pool.stat();
            if b.next != NONE {
                let n = &st.blocks[b.next];
                if b.is_free() && n.is_free() {
                    return Err(format!(
                        "adjacent free blocks {id} and {} not merged",
                        b.next
                    ));
                }
                if !b.mapped && !n.mapped {
                    return Err(format!("adjacent unmapped blocks {id} and {}", b.next));
                }
            }
            if !b.mapped {
                if !b.ptr.is_multiple_of(page) || !b.size.is_multiple_of(page) || b.allocated {
                    return Err(format!("unmapped block {id} not page-aligned or allocated"));
                }
            } else if b.allocated {
                want.allocation.increase(pool, 1);
                want.allocated_bytes.increase(pool, b.size as i64);
                want.active.increase(pool, 1);
                want.active_bytes.increase(pool, b.size as i64);
                want.requested_bytes.increase(pool, b.requested as i64);
            } else if !b.is_free() {
                // Freed by the caller, waiting for other streams: still active,
                // and its requested size counts until the free completes.
                want.active.increase(pool, 1);
                want.active_bytes.increase(pool, b.size as i64);
                want.requested_bytes.increase(pool, b.requested as i64);
            } else {
                free_count += 1;
                let idx = &st.streams[b.stream as usize].free[b.pool as usize];
                if !idx
                    .iter_from(b.size)
                    .take_while(|e| e.size == b.size)
                    .any(|e| e.ptr == b.ptr && e.block == id)
                {
                    return Err(format!("free block {id} missing from its index"));
                }
                if !expandable && b.is_split() {
                    want.inactive_split.increase(pool, 1);
                    want.inactive_split_bytes.increase(pool, b.size as i64);
                }
            }
            at = b.end();
            prev = id;
            id = b.next;
        }
        if at != base + size {
            return Err(format!("segment at {base:#x} not tiled: ends at {at:#x}"));
        }
        Ok(())
    };
    for (&ptr, &head) in &st.segments {
        let b = &st.blocks[head];
        let mut size = 0;
        let mut id = head;
        while id != NONE {
            size += st.blocks[id].size;
            id = st.blocks[id].next;
        }
        walk(head, ptr, size, false)?;
        if st.malloced.get(&ptr) != Some(&size) {
            return Err(format!(
                "segment at {ptr:#x} ({size} bytes) is not among the ranges held from malloc"
            ));
        }
        want.segment.increase(b.pool.stat(), 1);
        want.reserved_bytes.increase(b.pool.stat(), size as i64);
        let mempool = st.streams[b.stream as usize].mempool;
        if mempool != 0 {
            want.reserved_bytes_by_private_pools
                .entry(crate::mempool::pool_id(mempool))
                .or_default()
                .increase(b.pool.stat(), size as i64);
        }
    }
    if st.malloced.len() != st.segments.len() + st.uncached.len()
        || st
            .uncached
            .iter()
            .any(|(p, (s, _))| st.malloced.get(p) != Some(s))
    {
        return Err(format!(
            "{} ranges held from malloc, for {} segments and {} uncached allocations",
            st.malloced.len(),
            st.segments.len(),
            st.uncached.len()
        ));
    }
    let (mut stitched, mut stitched_handles, mut active_handles) = (0usize, Vec::new(), Vec::new());
    for seg in st.expandable.iter().flatten() {
        walk(seg.head, seg.base, seg.size, true)?;
        let handles = seg.handles.iter().filter(|h| h.is_some()).count() as u64;
        if handles != seg.mapped_pages {
            return Err("expandable segment's page count is off".into());
        }
        // Every page touched by a mapped block has a handle; no other does.
        let mut id = seg.head;
        while id != NONE {
            let b = &st.blocks[id];
            let first = (b.ptr - seg.base) / page;
            let last = (b.end() - seg.base).div_ceil(page);
            for p in first..last {
                if b.mapped && seg.handles[p as usize].is_none() {
                    return Err(format!("mapped block {id} over an unmapped page"));
                }
                if !b.mapped && seg.handles[p as usize].is_some() {
                    return Err(format!("unmapped block {id} over a mapped page"));
                }
            }
            id = b.next;
        }
        want.reserved_bytes
            .increase(seg.pool.stat(), (seg.mapped_pages * page) as i64);
        // Stitched mappings lie only where the blocks see unmapped space.
        for (&idx, &(h, stamp)) in &seg.stitched {
            if seg.handles[idx as usize].is_some() {
                return Err(format!("page {idx} is both mapped and stitched"));
            }
            stitched += 1;
            if !st.stitch_lru.contains_key(&stamp) {
                return Err(format!("stitched page {idx} missing from the LRU list"));
            }
            stitched_handles.push(h);
        }
        active_handles.extend(seg.handles.iter().flatten().copied());
    }
    // Busy marks belong to stitched mappings that exist.
    for &(seg, idx) in st.busy_stitched.keys() {
        let exists = st
            .expandable
            .get(seg as usize)
            .and_then(|s| s.as_ref())
            .is_some_and(|s| s.stitched.contains_key(&idx));
        if !exists {
            return Err(format!(
                "busy mark on page {idx} of segment {seg}, which is not stitched"
            ));
        }
    }
    // The reverse map of live pages matches the segments' handles.
    let mut live = 0;
    for (seg_i, seg) in st.expandable.iter().enumerate() {
        let Some(seg) = seg else { continue };
        for (idx, h) in seg.handles.iter().enumerate() {
            if let Some(h) = h {
                live += 1;
                if st.live.get(h) != Some(&(seg_i as u32, idx as u32)) {
                    return Err(format!("live page {idx} missing from the reverse map"));
                }
            }
        }
    }
    if live != st.live.len() {
        return Err("the reverse map of live pages holds pages that are not live".into());
    }
    // Each physical page is live at one address at most, and every page with
    // a stitched mapping is live somewhere (it moved away from there).
    let n = active_handles.len();
    active_handles.sort_unstable_by_key(|h| h.0);
    active_handles.dedup();
    if active_handles.len() != n {
        return Err("a physical page is live at two addresses".into());
    }
    for h in &stitched_handles {
        if active_handles.binary_search_by_key(&h.0, |x| x.0).is_err() {
            return Err(format!("stitched page {} is live nowhere", h.0));
        }
    }
    if stitched != st.stitch_lru.len()
        || stitched != st.aliases.values().map(Vec::len).sum::<usize>()
    {
        return Err("stitched mappings, their LRU list and aliases disagree".into());
    }
    let live = st.blocks.iter().count();
    if live != visited {
        return Err(format!("{live} live blocks but {visited} in segments"));
    }
    let indexed: usize = st
        .streams
        .iter()
        .flat_map(|s| s.free.iter())
        .map(|i| i.len())
        .sum();
    if indexed != free_count {
        return Err(format!(
            "{indexed} indexed free blocks, {free_count} free blocks"
        ));
    }
    // The snapshot agrees with the statistics at every moment.
    let snap = segments(st);
    let sum = |f: fn(&SegmentSnapshot) -> u64| snap.iter().map(f).sum::<u64>() as i64;
    let blocks_in = |s: BlockState| {
        snap.iter()
            .flat_map(|g| g.blocks.iter())
            .filter(|b| b.state == s)
            .count() as i64
    };
    let st_all = |a: &StatArray| a.all().current;
    for (name, snapshot, stat) in [
        (
            "total_size",
            sum(|g| g.total_size),
            st_all(&st.stats.reserved_bytes),
        ),
        (
            "allocated_size",
            sum(|g| g.allocated_size),
            st_all(&st.stats.allocated_bytes),
        ),
        (
            "active_size",
            sum(|g| g.active_size),
            st_all(&st.stats.active_bytes),
        ),
        (
            "requested_size",
            sum(|g| g.requested_size),
            st_all(&st.stats.requested_bytes),
        ),
        (
            "active_allocated blocks",
            blocks_in(BlockState::ActiveAllocated),
            st_all(&st.stats.allocation),
        ),
        (
            "active blocks",
            blocks_in(BlockState::ActiveAllocated) + blocks_in(BlockState::ActivePendingFree),
            st_all(&st.stats.active),
        ),
        (
            "ordinary segments",
            snap.iter().filter(|g| !g.is_expandable).count() as i64,
            st_all(&st.stats.segment),
        ),
    ] {
        if snapshot != stat {
            return Err(format!(
                "the snapshot's {name} add up to {snapshot} but the statistics say {stat}"
            ));
        }
    }
    for g in &snap {
        let b = |f: fn(&BlockSnapshot) -> u64| g.blocks.iter().map(f).sum::<u64>();
        if b(|x| x.size) != g.total_size || b(|x| x.requested_size) != g.requested_size {
            return Err(format!(
                "segment {:#x}: its totals differ from its blocks",
                g.address
            ));
        }
    }
    // Oversize figures: the blocks and segments counted when they were made.
    let oversize_allocations = st
        .blocks
        .iter()
        .filter(|(_, b)| b.allocated && b.oversize)
        .count();
    let oversize_segments = st
        .segments
        .values()
        .filter(|&&h| st.blocks[h].oversize_segment)
        .count();
    if oversize_allocations as i64 != st.stats.oversize_allocations.current
        || oversize_segments as i64 != st.stats.oversize_segments.current
    {
        return Err(format!(
            "oversize allocations/segments are {}/{} but a recount gives {oversize_allocations}/{oversize_segments}",
            st.stats.oversize_allocations.current, st.stats.oversize_segments.current
        ));
    }
    let have = &st.stats;
    // A pool's entry may outlive its segments (current 0) until the pool is
    // forgotten; every pool with segments has one.
    let none = StatArray::default();
    for (&id, w) in &want.reserved_bytes_by_private_pools {
        let h = have
            .reserved_bytes_by_private_pools
            .get(&id)
            .unwrap_or(&none);
        if StatType::ALL
            .iter()
            .any(|&t| h.get(t).current != w.get(t).current)
        {
            return Err(format!(
                "reserved_bytes_by_private_pools of {id:?} is {} but a recount gives {}",
                h.all().current,
                w.all().current
            ));
        }
    }
    for (&id, h) in &have.reserved_bytes_by_private_pools {
        if !want.reserved_bytes_by_private_pools.contains_key(&id)
            && StatType::ALL.iter().any(|&t| h.get(t).current != 0)
        {
            return Err(format!(
                "reserved_bytes_by_private_pools of {id:?} is {} without a segment",
                h.all().current
            ));
        }
    }
    let pairs: [(&str, &StatArray, &StatArray); 9] = [
        ("allocation", &have.allocation, &want.allocation),
        (
            "allocated_bytes",
            &have.allocated_bytes,
            &want.allocated_bytes,
        ),
        ("active", &have.active, &want.active),
        ("active_bytes", &have.active_bytes, &want.active_bytes),
        (
            "requested_bytes",
            &have.requested_bytes,
            &want.requested_bytes,
        ),
        ("segment", &have.segment, &want.segment),
        ("reserved_bytes", &have.reserved_bytes, &want.reserved_bytes),
        ("inactive_split", &have.inactive_split, &want.inactive_split),
        (
            "inactive_split_bytes",
            &have.inactive_split_bytes,
            &want.inactive_split_bytes,
        ),
    ];
    for (name, h, w) in pairs {
        for t in StatType::ALL {
            if h.get(t).current != w.get(t).current {
                return Err(format!(
                    "{name}.{}.current is {} but a recount gives {}",
                    t.name(),
                    h.get(t).current,
                    w.get(t).current
                ));
            }
            if h.get(t).peak < h.get(t).current {
                return Err(format!("{name}.{} peak below current", t.name()));
            }
        }
    }
    Ok(())
}
