import json, random, struct, torch
torch.set_num_threads(1)
def bits(t): return [struct.unpack('<I', struct.pack('<f', float(x)))[0] for x in t.flatten().tolist()]
random.seed(1)
cases = []
for k in range(60):
    seed = random.randrange(0, 2**40)
    torch.manual_seed(seed)
    ops = []
    for j in range(random.randint(1, 5)):
        kind = random.choice(["u", "n", "n", "small"])
        n = random.choice([1, 2, 3, 5, 15, 16, 17, 31, 32, 33, 100, 1000, 4099])
        if kind == "small": n = random.randint(1, 15); kind = "n"
        a, b = (random.choice([0.0, 0.5, -2.0]), random.choice([1.0, 0.02, 3.0]))
        if kind == "u":
            v = torch.empty(n).uniform_(a, a + b)
        else:
            v = torch.empty(n).normal_(a, b)
        ops.append(dict(kind=kind, n=n, a=a, b=b, bits=bits(v)))
    cases.append(dict(seed=seed, ops=ops))
print(json.dumps(cases))
