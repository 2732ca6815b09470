"""torch.distributed with backend "nccl" on tutti's libnccl.so.2: RANKS processes on cuda:0.

Run under torchrun with LD_PRELOAD=.../libnccl.so.2 (tests/gpu/run_external.sh does):
every rank checks that the library mapped into it is tutti's (/proc/self/maps), runs
all_reduce (sum, float32 and bfloat16), all_gather_into_tensor, reduce_scatter_tensor and
broadcast on cuda:0 against exact references, then times ITERS all_reduce calls of each size
(CUDA events; rank 0 prints microseconds per call and algbw). Exits 77 when torch or a GPU is
missing, 1 on a wrong result or when another libnccl is in use.
"""
import os
import sys
import time

try:
    import torch
    import torch.distributed as dist
except ImportError:
    sys.exit(77)


def main() -> int:
    if not torch.cuda.is_available():
        return 77
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(0)  # every rank on the one GPU (NVIDIA's NCCL refuses this)
    maps = open("/proc/self/maps").read()
    ours = [l.split()[-1] for l in maps.splitlines() if "libnccl" in l]
    ours = sorted(set(ours))
    want = os.environ.get("TUTTI_NCCL", "")
    if rank == 0:
        print(f"# libnccl mapped: {ours}", flush=True)
    if want and want not in ours:
        print(f"rank {rank}: {want} is not mapped", flush=True)
        return 1
    dist.init_process_group("nccl", rank=rank, world_size=world)
    dev = torch.device("cuda:0")
    bad = 0

    def check(name, got, want):
        nonlocal bad
        if not torch.equal(got, want):
            bad += 1
            diff = (got.float() - want.float()).abs().max().item()
            print(f"rank {rank}: {name} wrong (max diff {diff})", flush=True)

    for dtype in (torch.float32, torch.bfloat16):
        n = 1 << 20
        x = (torch.arange(n, device=dev) % 7 + rank + 1).to(dtype)
        ref = sum((torch.arange(n, device=dev) % 7 + r + 1) for r in range(world)).to(dtype)
        y = x.clone()
        dist.all_reduce(y)
        check(f"all_reduce {dtype}", y, ref)
    n = 4099
    x = torch.full((n,), float(rank + 1), device=dev)
    out = torch.empty(n * world, device=dev)
    dist.all_gather_into_tensor(out, x)
    check("all_gather", out, torch.cat([torch.full((n,), float(r + 1), device=dev) for r in range(world)]))
    big = torch.arange(n * world, device=dev, dtype=torch.float32) + rank
    rs = torch.empty(n, device=dev)
    dist.reduce_scatter_tensor(rs, big)
    full = sum(torch.arange(n * world, device=dev, dtype=torch.float32) + r for r in range(world))
    check("reduce_scatter", rs, full[rank * n:(rank + 1) * n])
    b = torch.full((n,), float(rank + 10), device=dev)
    dist.broadcast(b, src=world - 1)
    check("broadcast", b, torch.full((n,), float(world - 1 + 10), device=dev))

    iters = int(os.environ.get("ITERS", "20"))
    if rank == 0:
        print("# all_reduce float32: bytes  us/call  algbw(GB/s)", flush=True)
    for nbytes in (8, 4096, 1 << 20, 16 << 20, 64 << 20, 256 << 20):
        t = torch.ones(nbytes // 4, device=dev)
        for _ in range(3):
            dist.all_reduce(t)
        torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            dist.all_reduce(t)
        stop.record()
        torch.cuda.synchronize()
        us = start.elapsed_time(stop) * 1000 / iters
        if rank == 0:
            print(f"  {nbytes:12d} {us:10.1f} {nbytes / us / 1e3:10.2f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: {bad} wrong", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
