import itertools
def run(pol, h=18.1, S=129.6, layers=8, W=42.0, cap=None):
    free=[]; live={}; ext=[0.0]; grows=[0]
    def alloc(name,size):
        sel,end=pol[name]
        cands=[(e-s,s,i) for i,(s,e) in enumerate(free) if e-s>=size-1e-9]
        if cands:
            if sel=='best': c=min(cands)
            elif sel=='first': c=min(cands,key=lambda c:c[1])
            elif sel=='last': c=max(cands,key=lambda c:c[1])
            else: c=max(cands)
            sz,s,i=c
            fs,fe=free.pop(i)
            if end=='high':
                live[name]=(fe-size,fe)
                if fe-size-fs>1e-9: free.append((fs,fe-size))
            else:
                live[name]=(fs,fs+size)
                if fe-fs-size>1e-9: free.append((fs+size,fe))
            free.sort(); return
        grows[0]+=1
        if free and abs(free[-1][1]-ext[0])<1e-9:
            fs,fe=free.pop(); live[name]=(fs,fs+size); ext[0]=fs+size
        else:
            live[name]=(ext[0],ext[0]+size); ext[0]+=size
    def release(name):
        s,e=live.pop(name); free.append((s,e)); free.sort()
        m=[]
        for a,b in free:
            if m and abs(m[-1][1]-a)<1e-9: m[-1]=(m[-1][0],b)
            else: m.append((a,b))
        free[:]=m
    alloc('w',W); alloc('x',h)
    out=[]
    for l in range(layers):
        g0=grows[0]
        alloc('qkv',3*h); alloc('sc',S); alloc('pr',S); release('sc'); alloc('ctx',h); release('pr'); release('qkv')
        alloc('ff',4*h); alloc('y',h); release('ff'); release('ctx'); release('x')
        live['x']=live.pop('y')
        out.append((round(ext[0],1),grows[0]-g0))
    return out
opts=[(a,b) for a in ['best','first','last','worst'] for b in ['low','high']]
names=['qkv','sc','pr','ctx','ff','y']
res=[]
for combo in itertools.product(opts,repeat=6):
    pol=dict(zip(names,combo)); pol['w']=('best','low'); pol['x']=('best','low')
    out=run(pol)
    stable=all(g==0 for _,g in out[2:])
    res.append((out[-1][0],stable,combo))
res.sort()
for r in [r for r in res if r[1]][:15]: print(r)
print('best-low all:', [r for r in res if r[2]==tuple([('best','low')]*6)])
