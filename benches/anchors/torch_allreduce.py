"""PyTorch's all-reduce bus bandwidth, the anchor of strata's `allreduce_bench` example.

    torchrun --standalone --nproc_per_node N benches/anchors/torch_allreduce.py [--size-mib 1024]
        [--iters 20] [--warmup 5] [--dtype f32]
    python3 benches/anchors/torch_allreduce.py --spawn N [same flags]      # mp.spawn instead

Each rank owns one GPU (rank r -> cuda:r) and all-reduces (SUM) one contiguous tensor of
--size-mib MiB with NCCL; rank 0 prints one JSON line with the median time per all-reduce and,
as nccl-tests defines them, algbw = bytes / time and busbw = algbw * 2 (n - 1) / n (GB/s,
1e9 bytes). Timing: `warmup` untimed calls, then each of `iters` calls between CUDA events on
the current stream, after a barrier. NCCL_NVLS_ENABLE is set to 0 unless already set (NVLink
multicast can take a shared host's GPUs out of service), as strata does.
"""
import argparse, json, os, statistics

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16, "f64": torch.float64}


def nccl_version():
    v = torch.cuda.nccl.version()
    return ".".join(map(str, v)) if isinstance(v, tuple) else str(v)


def bench(rank, world, args):
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    dtype = DTYPES[args.dtype]
    n = args.size_mib * (1 << 20) // torch.tensor([], dtype=dtype).element_size()
    x = torch.ones(n, dtype=dtype, device="cuda")
    for _ in range(args.warmup):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    dist.barrier()
    times = []
    for _ in range(args.iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dist.all_reduce(x)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    t = statistics.median(times)
    nbytes = n * x.element_size()
    algbw = nbytes / t / 1e9
    if rank == 0:
        print(json.dumps({
            "bench": "allreduce", "impl": "torch", "gpus": world, "dtype": args.dtype,
            "bytes": nbytes, "iters": args.iters, "time_us": round(t * 1e6, 1),
            "algbw_gbps": round(algbw, 2), "busbw_gbps": round(algbw * 2 * (world - 1) / world, 2),
            "nccl": nccl_version(), "torch": torch.__version__,
        }), flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--size-mib", type=int, default=1024)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--dtype", default="f32", choices=sorted(DTYPES))
    p.add_argument("--spawn", type=int, default=0, help="start N processes with mp.spawn")
    args = p.parse_args()
    if args.spawn:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        mp.spawn(bench, args=(args.spawn, args), nprocs=args.spawn)
    else:
        bench(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)


if __name__ == "__main__":
    main()
