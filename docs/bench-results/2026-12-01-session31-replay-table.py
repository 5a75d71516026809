"""Session 31's replay table: strata (5 passes, 60 passes unpinned, 60 passes pinned to one core) beside PyTorch's
default and expandable_segments:True, in ns per operation, from call R's raw output (argument 1)."""
import json, sys
lines = open(sys.argv[1]).read().split('\n')
sec = None; runs = {}; torch = {}; buf = []
def flush():
    global buf
    if buf and sec in ('torch default', 'torch expandable'):
        torch[sec] = json.loads('\n'.join(buf))['replay']
    buf = []
for l in lines:
    if l.startswith('# '):
        flush(); sec = l[2:].strip(); continue
    if sec and sec.startswith('strata') and l.startswith('{'):
        d = json.loads(l); name = d['trace'].split('/')[-1].replace('.default.json.gz', '')
        runs.setdefault(sec, {})[name] = d
    elif sec and sec.startswith('torch') and not l.startswith('rc '):
        buf.append(l)
flush()
s5 = runs['strata passes 5 warmup 2']; s60 = runs['strata passes 60 warmup 2']
p60 = runs['strata passes 60 warmup 2 taskset -c 5']
print(f"{'trace':26s} {'s5':>6s} {'s60':>6s} {'s60pin':>6s} {'tdef':>6s} {'texp':>6s} {'calls':>6s} {'syncs':>5s}")
for n in sorted(s5):
    d = s5[n]
    td = torch['torch default'][n]['ns_per_op_warm']; te = torch['torch expandable'][n]['ns_per_op_warm']
    print(f"{n:26s} {d['ns_per_op']:6.1f} {s60[n]['ns_per_op']:6.1f} {p60[n]['ns_per_op']:6.1f} {td:6.1f} {te:6.1f} "
          f"{d['warm_memory_calls_per_pass']:6} {d['warm_stream_synchronizations_per_pass']:5}")
