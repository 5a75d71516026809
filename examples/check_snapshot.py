#!/usr/bin/env python3
"""Checks a strata snapshot with PyTorch's own tools.

Run in the directory where the `memory_report` example wrote
`snapshot.pickle` and `memory_stats.json`:

    STRATA_DEVICE=cuda cargo run --release -p strata-examples --example memory_report
    python3 examples/check_snapshot.py [snapshot.pickle] [memory_stats.json]

It loads the pickle with `pickle`, checks the keys PyTorch 2.11's
`torch.cuda.memory._snapshot()` has, compares the segment and block figures
with strata's `memory_stats()`, then runs
`python3 -m torch.cuda._memory_viz` `trace_plot`, `segment_plot` and `stats`
on it. Exits non-zero on the first disagreement.
"""

import json
import os
import pickle
import subprocess
import sys

SNAPSHOT_KEYS = {"segments", "device_traces", "allocator_settings", "external_annotations"}
SEGMENT_KEYS = {
    "address", "total_size", "allocated_size", "active_size", "requested_size", "stream",
    "segment_type", "segment_pool_id", "is_expandable", "device", "frames", "blocks",
}
BLOCK_KEYS = {"address", "size", "requested_size", "state", "frames"}
TRACE_KEYS = {"action", "addr", "size", "stream", "time_us", "frames", "compile_context",
              "user_metadata"}
FRAME_KEYS = {"name", "filename", "line"}
ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "oom", "snapshot"}

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def missing(have, want):
    return sorted(want - set(have))


def main():
    snap_path = sys.argv[1] if len(sys.argv) > 1 else "snapshot.pickle"
    stats_path = sys.argv[2] if len(sys.argv) > 2 else "memory_stats.json"
    with open(snap_path, "rb") as f:
        snap = pickle.load(f)
    with open(stats_path) as f:
        stats = json.load(f)

    check(not missing(snap, SNAPSHOT_KEYS), f"top-level keys {missing(snap, SNAPSHOT_KEYS)} missing")
    segs = snap["segments"]
    blocks = [b for s in segs for b in s["blocks"]]
    for s in segs:
        if missing(s, SEGMENT_KEYS):
            check(False, f"segment keys missing: {missing(s, SEGMENT_KEYS)}")
            break
        if sum(b["size"] for b in s["blocks"]) != s["total_size"]:
            check(False, f"segment {s['address']:#x}: blocks do not tile it")
    for b in blocks:
        if missing(b, BLOCK_KEYS):
            check(False, f"block keys missing: {missing(b, BLOCK_KEYS)}")
            break
        for fr in b["frames"]:
            if missing(fr, FRAME_KEYS):
                check(False, f"frame keys missing: {missing(fr, FRAME_KEYS)}")
                break
    events = [e for t in snap["device_traces"] for e in t]
    for e in events:
        if missing(e, TRACE_KEYS) or e["action"] not in ACTIONS:
            check(False, f"bad trace event {e}")
            break
    check(len(events) > 0, f"{len(events)} trace events")
    allocated = [b for b in blocks if b["state"] == "active_allocated"]
    active = [b for b in blocks if b["state"] != "inactive"]
    with_frames = sum(1 for b in allocated if b["frames"])
    print(f"     {len(segs)} segments, {len(blocks)} blocks, {len(allocated)} allocated "
          f"({with_frames} with call sites), {len(events)} trace events")

    def agree(name, from_snapshot, key):
        want = stats.get(key, 0)
        check(from_snapshot == want, f"{name}: snapshot {from_snapshot} == memory_stats {key} {want}")

    agree("reserved bytes", sum(s["total_size"] for s in segs), "reserved_bytes.all.current")
    agree("allocated bytes", sum(b["size"] for b in allocated), "allocated_bytes.all.current")
    agree("active bytes", sum(b["size"] for b in active), "active_bytes.all.current")
    agree("requested bytes", sum(b["requested_size"] for b in blocks), "requested_bytes.all.current")
    agree("allocations", len(allocated), "allocation.all.current")
    agree("active blocks", len(active), "active.all.current")
    agree("segments", sum(1 for s in segs if not s["is_expandable"]), "segment.all.current")
    for pool in ("large", "small"):
        agree(f"{pool}-pool reserved bytes",
              sum(s["total_size"] for s in segs if s["segment_type"] == pool),
              f"reserved_bytes.{pool}_pool.current")

    # PyTorch's own tools.
    viz = [sys.executable, "-m", "torch.cuda._memory_viz"]
    for cmd, out in (("trace_plot", "trace.html"), ("segment_plot", "segments.html")):
        if os.path.exists(out):
            os.remove(out)
        r = subprocess.run(viz + [cmd, snap_path, "-o", out], capture_output=True, text=True)
        check(r.returncode == 0 and os.path.getsize(out) > 0 if os.path.exists(out) else False,
              f"_memory_viz {cmd} -> {out} (exit {r.returncode}) {r.stderr.strip()[-300:]}")
    r = subprocess.run(viz + ["stats", snap_path], capture_output=True, text=True)
    print(r.stdout)
    check(r.returncode == 0, f"_memory_viz stats (exit {r.returncode}) {r.stderr.strip()[-300:]}")

    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
