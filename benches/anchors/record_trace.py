"""Records a PyTorch program's allocation events in the format of shared/traces (README there):
    python3 record_trace.py OUT.json.gz NAME MODE script.py [script args...]
MODE is `default` or `expandable` and must match PYTORCH_CUDA_ALLOC_CONF (set by the caller before the
process starts). The script runs with the memory history on (no stacks), then the snapshot's event
list and torch.cuda.memory_stats() are written."""
import gzip, json, runpy, sys
import torch

out, name, mode, script, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
torch.cuda.init()
torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=5_000_000)
sys.argv = [script] + args
runpy.run_path(script, run_name="__main__")
torch.cuda.synchronize()
snap = torch.cuda.memory._snapshot()
events = [[e["action"], e["addr"], e["size"], e["stream"]] for e in snap["device_traces"][0]
          if e["action"] in ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
                             "segment_map", "segment_unmap")]
st = {k: v for k, v in torch.cuda.memory_stats().items() if ".all." in k or "." not in k}
import os
doc = dict(workload=name, mode=mode, torch=torch.__version__, cuda=torch.version.cuda,
           device=torch.cuda.get_device_name(0), alloc_conf=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
           stats=st, events=events)
with gzip.open(out, "wt") as f:
    json.dump(doc, f)
print(f"{name}.{mode}: {len(events)} events, peak allocated {st['allocated_bytes.all.peak'] >> 20} MiB, "
      f"reserved {st['reserved_bytes.all.peak'] >> 20} MiB", file=sys.stderr)
