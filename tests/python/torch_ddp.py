"""DDP training of a small model on "tutti" and on "gloo" in the same processes (under torchrun).

    python -m torch.distributed.run --standalone --nproc-per-node N torch_ddp.py <result.json>

Two copies of one model (same seed) train for STEPS steps on the same per-rank data: one with
DistributedDataParallel over the default group ("tutti", from init_process_group), one over a
"gloo" group. Rank 0 writes the largest parameter difference between the two (0.0 means bit
for bit) and between ranks; small buckets make several allreduces per step.
"""

import json
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import tutti.torch  # noqa: F401

STEPS = 20


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64),
                               torch.nn.Tanh(), torch.nn.Linear(64, 4))


def train(ddp, rank):
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(1000 + rank)
    for _ in range(STEPS):
        x = torch.randn(32, 16, generator=gen)
        y = torch.randn(32, 4, generator=gen)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in ddp.module.parameters()])


def main():
    dist.init_process_group("tutti")
    rank, size = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() == "tutti", dist.get_backend()
    gloo = dist.new_group(backend="gloo")
    p_tutti = train(DDP(model(), bucket_cap_mb=0.01), rank)
    p_gloo = train(DDP(model(), process_group=gloo, bucket_cap_mb=0.01), rank)
    everyone = [torch.empty_like(p_tutti) for _ in range(size)]
    dist.all_gather(everyone, p_tutti, group=gloo)
    if rank == 0:
        with open(sys.argv[1], "w") as f:
            json.dump({"size": size, "numel": p_tutti.numel(),
                       "max_diff_vs_gloo": (p_tutti - p_gloo).abs().max().item(),
                       "bitwise_equal": bool(torch.equal(p_tutti, p_gloo)),
                       "max_diff_across_ranks": max((e - p_tutti).abs().max().item()
                                                    for e in everyone),
                       "moved": (p_tutti - torch.cat([p.reshape(-1) for p in
                                                      model().parameters()])).abs().max().item()},
                      f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
