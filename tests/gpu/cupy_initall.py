"""CuPy's NcclCommunicator.initAll with one device listed RANKS times, on tutti's libnccl.so.2.

Run with LD_PRELOAD=.../libnccl.so.2 (tests/gpu/run_external.sh does): checks which libnccl is
mapped, makes RANKS communicators on device 0 with initAll, runs an allReduce, allGather and a
send/recv ring in groups (one call per rank on its own stream), checks the results against exact
references, and times 100 grouped allReduces of 4 MiB. NVIDIA's NCCL refuses initAll with a
repeated device (the negative control: run without LD_PRELOAD and expect that refusal).
Exits 77 when CuPy or a GPU is missing, 1 on a wrong result, 2 when initAll fails.
"""
import os
import sys
import time

try:
    import cupy as cp
    from cupy.cuda import nccl
except ImportError:
    sys.exit(77)


def main() -> int:
    if cp.cuda.runtime.getDeviceCount() < 1:
        return 77
    ranks = int(os.environ.get("RANKS", "4"))
    maps = sorted({l.split()[-1] for l in open("/proc/self/maps").read().splitlines() if "libnccl" in l})
    print(f"# libnccl mapped: {maps}; version {nccl.get_version()}", flush=True)
    try:
        comms = nccl.NcclCommunicator.initAll([0] * ranks)
    except Exception as e:  # NVIDIA's library: "invalid usage" (duplicate GPU)
        print(f"initAll([0] * {ranks}) failed: {e}", flush=True)
        return 2
    cp.cuda.Device(0).use()
    n = 1 << 20
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(ranks)]
    xs = [cp.arange(n, dtype=cp.float32) % 5 + r for r in range(ranks)]
    sums = [cp.empty(n, dtype=cp.float32) for _ in range(ranks)]
    gathered = [cp.empty(n * ranks, dtype=cp.float32) for _ in range(ranks)]
    ring = [cp.empty(n, dtype=cp.float32) for _ in range(ranks)]
    cp.cuda.Device(0).synchronize()
    nccl.groupStart()
    for r, c in enumerate(comms):
        c.allReduce(xs[r].data.ptr, sums[r].data.ptr, n, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, streams[r].ptr)
    nccl.groupEnd()
    nccl.groupStart()
    for r, c in enumerate(comms):
        c.allGather(xs[r].data.ptr, gathered[r].data.ptr, n, nccl.NCCL_FLOAT32, streams[r].ptr)
    nccl.groupEnd()
    nccl.groupStart()
    for r, c in enumerate(comms):
        c.send(xs[r].data.ptr, n, nccl.NCCL_FLOAT32, (r + 1) % ranks, streams[r].ptr)
        c.recv(ring[r].data.ptr, n, nccl.NCCL_FLOAT32, (r - 1) % ranks, streams[r].ptr)
    nccl.groupEnd()
    for s in streams:
        s.synchronize()
    ref = sum(xs)
    bad = 0
    for r in range(ranks):
        bad += int(not cp.array_equal(sums[r], ref))
        bad += int(not cp.array_equal(gathered[r], cp.concatenate(xs)))
        bad += int(not cp.array_equal(ring[r], xs[(r - 1) % ranks]))
    big = [cp.ones(1 << 20, dtype=cp.float32) for _ in range(ranks)]
    for s in streams:
        s.synchronize()
    t0 = time.perf_counter()
    for _ in range(100):
        nccl.groupStart()
        for r, c in enumerate(comms):
            c.allReduce(big[r].data.ptr, big[r].data.ptr, 1 << 20, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, streams[r].ptr)
        nccl.groupEnd()
    for s in streams:
        s.synchronize()
    us = (time.perf_counter() - t0) * 1e6 / 100
    print(f"# {ranks} ranks: grouped allReduce of 4 MiB: {us:.1f} us per step (wall clock)", flush=True)
    for c in comms:
        c.destroy()
    print(f"{bad} wrong", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
