import json, sys
f = sys.argv[1]
lines = open(f).read().split('\n')
sec = None; strata5 = {}; strata60 = {}; torch = {}; buf = []
def flush():
    global buf
    if buf and sec in ('torch default', 'torch expandable'):
        try:
            d = json.loads('\n'.join(buf)); torch[sec] = d['replay']
        except Exception as e:
            print('parse fail', sec, e)
    buf = []
for l in lines:
    if l.startswith('# '):
        flush(); sec = l[2:].strip(); continue
    if sec and sec.startswith('strata') and l.startswith('{'):
        d = json.loads(l); name = d['trace'].split('/')[-1].replace('.default.json.gz', '')
        (strata5 if 'passes 5' in sec else strata60)[name] = d
    elif sec and sec.startswith('torch'):
        if l.startswith('rc '): continue
        buf.append(l)
flush()
print(f"{'trace':28s} {'s5':>7s} {'s60':>7s} {'tdef':>7s} {'texp':>7s} {'calls':>6s} {'syncs':>6s}")
worst = 0
for n in sorted(strata5):
    d = strata5[n]; d60 = strata60.get(n, {})
    td = torch.get('torch default', {}).get(n, {}).get('ns_per_op_warm'); te = torch.get('torch expandable', {}).get(n, {}).get('ns_per_op_warm')
    print(f"{n:28s} {d['ns_per_op']:7.1f} {d60.get('ns_per_op', float('nan')):7.1f} {td or float('nan'):7.1f} {te or float('nan'):7.1f} {d['warm_memory_calls_per_pass']:6} {d['warm_stream_synchronizations_per_pass']:6}")
