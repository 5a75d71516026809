"""PyTorch's own random numbers, as exact bits, for strata's torch_random tests."""
import json, struct, torch
def bits(t): return [struct.unpack('<I', struct.pack('<f', float(x)))[0] for x in t.flatten().tolist()]
out = {}
torch.manual_seed(0)
out['cpu_rand5'] = bits(torch.rand(5))
out['cpu_randn20'] = bits(torch.randn(20))
out['cpu_randn3'] = bits(torch.randn(3))
out['cpu_randn2'] = bits(torch.randn(2))
out['cpu_uniform7'] = bits(torch.empty(7).uniform_(-1, 1))
out['cpu_normal40'] = bits(torch.empty(40).normal_(0.5, 0.02))
torch.manual_seed(123)
big = torch.empty(100003).normal_(0, 0.02)
out['cpu_normal_big_idx'] = {str(i): bits(big[i:i+1])[0] for i in [0, 7, 8, 15, 16, 99986, 99987, 100002]}
g = torch.Generator(device='cuda'); g.manual_seed(1)
out['cuda_randint10'] = torch.randint(0, 8192, (10,), device='cuda', generator=g).tolist()
out['cuda_rand6'] = bits(torch.rand(6, device='cuda', generator=g).cpu())
out['cuda_randint_wide'] = torch.randint(-5, 2**30, (5,), device='cuda', generator=g).tolist()
big = torch.randint(0, 1000, (1_200_000,), device='cuda', generator=g).cpu()
out['cuda_big_idx'] = {str(i): int(big[i]) for i in [0, 1, 270335, 270336, 1081343, 1081344, 1199999]}
out['cuda_big_sum'] = int(big.sum())
r = torch.rand(700_000, device='cuda', generator=g).cpu()
out['cuda_rand_big_idx'] = {str(i): bits(r[i:i+1])[0] for i in [0, 270336, 540672, 699999]}
try:
    out['cuda_offset'] = g.get_offset()
except Exception as e:
    out['cuda_offset'] = str(e)
p = torch.cuda.get_device_properties(0)
out['sm'] = [p.multi_processor_count, getattr(p, 'max_threads_per_multi_processor', None)]
print(json.dumps(out))
