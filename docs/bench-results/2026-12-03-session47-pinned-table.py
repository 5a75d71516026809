"""Session 47, call 2: the 5-pass replay of the 29 `*.default` traces nine times in one call (unpinned, bound to NUMA
node 0, bound to the last node, three rounds), ns per operation (median of the warm passes) per trace and run.
Argument: the folder of the call's `*.jsonl` outputs (free1..3, node0_1..3, nodeL_1..3)."""
import glob, json, os, sys
d = sys.argv[1]
runs = {}
for f in sorted(glob.glob(os.path.join(d, '*.jsonl'))):
    runs[os.path.basename(f)[:-6]] = {
        (r := json.loads(l))['trace'].split('/')[-1].replace('.default.json.gz', ''): r['ns_per_op']
        for l in open(f) if l.startswith('{')}
order = [f'{k}{i}' for i in '123' for k in ('free', 'node0_', 'nodeL_')]
print('trace'.ljust(24), ' '.join(o.rjust(7) for o in order))
for n in sorted(runs['free1']):
    print(n[:23].ljust(24), ' '.join(f'{runs[o][n]:7.1f}' for o in order))
print('max'.ljust(24), ' '.join(f'{max(runs[o].values()):7.1f}' for o in order))
