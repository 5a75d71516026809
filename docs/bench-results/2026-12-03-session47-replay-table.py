"""Session 47's replay table: strata's `replay --device cuda --json` (5 passes after 2 warm-up passes, and 60
passes; each the median of its warm passes, with the slowest warm pass of the 60) beside PyTorch's default and
expandable_segments:True (`torch_bench.py replay`: its fastest warm pass, `ns_per_op_warm`), in ns per operation.
Arguments: the folder holding replay.jsonl, replay60.jsonl, torch_default.json, torch_expandable.json."""
import json, os, sys
d = sys.argv[1]
def runs(f):
    out = {}
    for l in open(os.path.join(d, f)):
        if l.startswith('{'):
            r = json.loads(l)
            out[r['trace'].split('/')[-1].replace('.default.json.gz', '')] = r
    return out
s5, s60 = runs('replay.jsonl'), runs('replay60.jsonl')
torch = {m: json.load(open(os.path.join(d, f'torch_{m}.json')))['replay'] for m in ('default', 'expandable')}
print('| trace | strata 5 passes | 60 passes (slowest pass) | warm memory calls / pass (5 / 60) | warm syncs / pass (60) '
      '| PyTorch default / expandable | faster PyTorch / strata 60 |')
print('|---|---:|---:|---:|---:|---:|---:|')
worst = []
for n in sorted(s5):
    a, b = s5[n], s60[n]
    td, te = torch['default'][n]['ns_per_op_warm'], torch['expandable'][n]['ns_per_op_warm']
    worst.append((max(a['ns_per_op'], b['ns_per_op']), n))
    print(f"| {n} | {a['ns_per_op']:.1f} | {b['ns_per_op']:.1f} ({max(b['warm_pass_ns_per_op']):.1f}) "
          f"| {a['warm_memory_calls_per_pass']:g} / {b['warm_memory_calls_per_pass']:g} "
          f"| {b['warm_stream_synchronizations_per_pass']:g} | {td:.1f} / {te:.1f} | {min(td, te) / b['ns_per_op']:.1f} x |")
print(f"\nstrata 5-pass max {max(r['ns_per_op'] for r in s5.values()):.1f}, 60-pass max "
      f"{max(r['ns_per_op'] for r in s60.values()):.1f} (traces over 100 in either: "
      f"{[n for w, n in worst if w > 100]})")
