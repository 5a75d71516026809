"""Session 33's replay table (call R): strata (5 passes; 60 passes in alphabetical and in reverse order, each the
median of its warm passes, with its slowest warm pass) beside PyTorch's default and expandable_segments:True (its
fastest warm pass, `ns_per_op_warm`), in ns per operation, from call R's raw output (argument 1)."""
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
s5 = runs['strata passes 5 warmup 2']; a = runs['strata passes 60 warmup 2']; r = runs['strata passes 60 warmup 2 reverse']
print(f"{'trace':26s} {'s5':>6s} {'s60':>6s} {'max':>6s} {'s60rev':>6s} {'max':>6s} {'tdef':>6s} {'texp':>6s} {'calls':>6s} {'syncs':>5s}")
for n in sorted(s5):
    d = s5[n]
    td = torch['torch default'][n]['ns_per_op_warm']; te = torch['torch expandable'][n]['ns_per_op_warm']
    print(f"{n:26s} {d['ns_per_op']:6.1f} {a[n]['ns_per_op']:6.1f} {max(a[n]['warm_pass_ns_per_op']):6.1f} "
          f"{r[n]['ns_per_op']:6.1f} {max(r[n]['warm_pass_ns_per_op']):6.1f} {td:6.1f} {te:6.1f} "
          f"{a[n]['warm_memory_calls_per_pass']:6} {a[n]['warm_stream_synchronizations_per_pass']:5}")
