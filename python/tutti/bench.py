"""torch.distributed on "tutti" against "gloo": time, bus bandwidth and a plot, in one run.

    python -m tutti.bench                       # 2 local processes, 8 B to 16 MiB
    python -m tutti.bench --nranks 4 --max-bytes 64M --out bench-torch

Starts `--nranks` processes on this host. Each joins a default group on "tutti" and a second
group on "gloo" over the same ranks, then times all_reduce, all_gather, reduce_scatter,
broadcast and all_to_all (float32, blocking calls as DDP-free scripts make them) for every size,
alternating the backends. A point's time is the slowest rank's mean over enough iterations to
fill about `--seconds`, after as many warm-up calls. Sizes are the message as nccl-tests counts
it (the whole gathered, scattered or exchanged buffer); busbw uses nccl-tests' factors.
Rank 0 prints a line per point and writes <out>.json and, when matplotlib is installed,
<out>.png (busbw against size, one panel per collective).
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time

COLLS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"]
BACKENDS = ["tutti", "gloo"]


def _parse_bytes(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper().rstrip("B")
    return int(float(s[:-1]) * units[s[-1]]) if s and s[-1] in units else int(s)


def _busbw_factor(coll, n):
    if coll == "all_reduce":
        return 2 * (n - 1) / n
    if coll == "broadcast":
        return 1.0
    return (n - 1) / n


def _sizes(lo, hi):
    out, b = [], lo
    while b <= hi:
        out.append(b)
        b *= 8 if b < 4096 else 4
    if out[-1] != hi:
        out.append(hi)
    return out


def _worker(args):
    import torch
    import torch.distributed as dist

    import tutti.torch  # noqa: F401

    dist.init_process_group("tutti")
    rank, n = dist.get_rank(), dist.get_world_size()
    groups = {"tutti": None, "gloo": dist.new_group(backend="gloo")}
    ctrl = groups["gloo"]  # agreement on iteration counts and the max over ranks

    def make(coll, nbytes):
        """The call for `coll` with a message of `nbytes` (rounded to n*4-byte multiples)."""
        count = max(n, nbytes // 4 // n * n)
        if coll == "all_reduce":
            x = torch.ones(count)
            return lambda g: dist.all_reduce(x, group=g), count * 4
        if coll == "broadcast":
            x = torch.ones(count)
            return lambda g: dist.broadcast(x, src=0, group=g), count * 4
        if coll == "all_gather":
            out, x = torch.empty(count), torch.ones(count // n)
            return lambda g: dist.all_gather_into_tensor(out, x, group=g), count * 4
        if coll == "reduce_scatter":
            out, x = torch.empty(count // n), torch.ones(count)
            return lambda g: dist.reduce_scatter_tensor(out, x, group=g), count * 4
        out, x = torch.empty(count), torch.ones(count)
        return lambda g: dist.all_to_all_single(out, x, group=g), count * 4

    def timed(fn, g, iters):
        dist.barrier(group=ctrl)
        t0 = time.perf_counter()
        for _ in range(iters):
            fn(g)
        t = torch.tensor([(time.perf_counter() - t0) / iters])
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=ctrl)
        return t.item()

    results = []
    colls = [c for c in COLLS if c in args.colls.split(",")]
    for coll in colls:
        for nbytes in _sizes(args.min_bytes, args.max_bytes):
            fn, real = make(coll, nbytes)
            point = {"coll": coll, "bytes": real}
            for backend in BACKENDS:
                g = groups[backend]
                est = timed(fn, g, 3)
                iters = int(min(20000, max(3, args.seconds / max(est, 1e-7))))
                timed(fn, g, iters)  # warm-up
                sec = timed(fn, g, iters)
                point[backend] = {"us": sec * 1e6, "iters": iters,
                                  "busbw_GBps": real * _busbw_factor(coll, n) / sec / 1e9}
            point["speedup"] = point["gloo"]["us"] / point["tutti"]["us"]
            results.append(point)
            if rank == 0:
                print(f"{coll:15s} {real:>10d} B   tutti {point['tutti']['us']:10.1f} us "
                      f"{point['tutti']['busbw_GBps']:7.3f} GB/s   gloo {point['gloo']['us']:10.1f}"
                      f" us {point['gloo']['busbw_GBps']:7.3f} GB/s   x{point['speedup']:.1f}",
                      flush=True)
    if rank == 0:
        meta = {"nranks": n, "torch": torch.__version__, "host": socket.gethostname(),
                "loadavg": os.getloadavg(), "cpus": os.cpu_count(), "results": results}
        with open(args.out + ".json", "w") as f:
            json.dump(meta, f, indent=1)
        _plot(args.out + ".png", meta, colls)
    dist.destroy_process_group()


def _plot(path, meta, colls):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot", flush=True)
        return
    fig, axes = plt.subplots(1, len(colls), figsize=(4 * len(colls), 3.6), squeeze=False)
    for ax, coll in zip(axes[0], colls):
        pts = [p for p in meta["results"] if p["coll"] == coll]
        for backend, style in (("tutti", "o-"), ("gloo", "s--")):
            ax.plot([p["bytes"] for p in pts], [p[backend]["busbw_GBps"] for p in pts], style,
                    label=backend)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(coll)
        ax.set_xlabel("message size (bytes)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("busbw (GB/s)")
    axes[0][0].legend()
    fig.suptitle(f"torch.distributed {meta['torch']}, {meta['nranks']} processes, CPU tensors "
                 f"({meta['cpus']} CPUs, load {meta['loadavg'][0]:.1f})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m tutti.bench", description=__doc__.split("\n")[0])
    p.add_argument("--nranks", type=int, default=2, help="processes to start (default 2)")
    p.add_argument("--min-bytes", type=_parse_bytes, default=8, help="smallest message (8)")
    p.add_argument("--max-bytes", type=_parse_bytes, default=16 << 20,
                   help="largest message (16M)")
    p.add_argument("--seconds", type=float, default=0.25,
                   help="target time per point and backend (0.25)")
    p.add_argument("--colls", default=",".join(COLLS), help="comma-separated subset")
    p.add_argument("--out", default="tutti-torch-bench", help="output prefix (.json, .png)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return _worker(args)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               WORLD_SIZE=str(args.nranks), OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "tutti.bench", "--worker"] + (argv or sys.argv[1:])
    print(f"tutti.bench: {args.nranks} processes, {args.min_bytes}..{args.max_bytes} bytes, "
          f"~{args.seconds} s per point and backend", flush=True)
    procs = [subprocess.Popen(cmd, env=dict(env, RANK=str(r), LOCAL_RANK=str(r)))
             for r in range(args.nranks)]
    try:
        codes = [p.wait() for p in procs]
    finally:
        for pr in procs:
            if pr.poll() is None:
                pr.kill()
    return max(abs(c) for c in codes)


if __name__ == "__main__":
    sys.exit(main())
