"""One rank of a torch.distributed job on the "tutti" backend (tests/python/test_torch_backend.py).

    torch_worker.py <job> <result.json>      (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set)

The default group is "tutti"; a "gloo" group over the same ranks gives the results to compare
with. Each check appends a line to `failures` instead of raising, so one run reports them all;
the result file holds {"failures": [...], "checked": {...}}.
"""

import datetime
import json
import os
import signal
import sys
import time
import traceback

import torch
import torch.distributed as dist

import tutti.torch  # noqa: F401  (registers the backend)

JOB, OUT = sys.argv[1], sys.argv[2]
failures = []
checked = {"vs_gloo": 0, "vs_reference": 0}
R = dist.ReduceOp


def fail(msg):
    failures.append(f"rank {rank}: {msg}")


def inputs(r, dtype, op, numel=37):
    """Rank r's input: small integers, exact in every dtype and under every op here."""
    base = torch.arange(numel, dtype=torch.int64)
    if op == R.PRODUCT:
        v = (base + r) % 2 + 1
    elif op in (R.BAND, R.BOR, R.BXOR):
        v = (base * 7 + r * 13) % 64
    else:
        v = (base + 3 * r) % 7
    if dtype == torch.bool:
        return (v % 2).to(torch.bool)
    return v.to(dtype)


def reference(dtype, op, numel=37):
    xs = [inputs(r, dtype, op, numel) for r in range(size)]
    acc = xs[0].clone()
    for x in xs[1:]:
        if op in (R.SUM, R.AVG):
            acc = acc + x
        elif op == R.PRODUCT:
            acc = acc * x
        elif op == R.MIN:
            acc = torch.minimum(acc, x)
        elif op == R.MAX:
            acc = torch.maximum(acc, x)
        elif op == R.BAND:
            acc = acc & x
        elif op == R.BOR:
            acc = acc | x
        elif op == R.BXOR:
            acc = acc ^ x
    if op == R.AVG:
        acc = acc / size
    return acc.to(dtype)


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.view(torch.uint8) if a.dtype.is_floating_point and a.element_size() == 1 else a,
        b.view(torch.uint8) if b.dtype.is_floating_point and b.element_size() == 1 else b)


def compare(what, fn, ref=None):
    """fn(group) -> tensor or list of tensors; runs it on tutti (default group) and gloo."""
    def as_list(x):
        return list(x) if isinstance(x, (list, tuple)) else [x]
    try:
        mine = as_list(fn(None))
    except Exception:  # noqa: BLE001
        fail(f"{what}: tutti raised {traceback.format_exc()}")
        return
    if ref is not None:
        ref = as_list(ref)
        if not all(same(a, b) for a, b in zip(mine, ref)) or len(mine) != len(ref):
            fail(f"{what}: tutti {mine} != reference {ref}")
        checked["vs_reference"] += 1
    try:
        theirs = as_list(fn(gloo))
    except RuntimeError:  # gloo lacks this dtype or op: the reference decides
        if ref is None:
            fail(f"{what}: gloo failed and there is no reference: {traceback.format_exc()}")
        return
    if not all(same(a, b) for a, b in zip(mine, theirs)) or len(mine) != len(theirs):
        fail(f"{what}: tutti {mine} != gloo {theirs}")
    checked["vs_gloo"] += 1


def job_collectives():
    n, r = size, rank
    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
              torch.uint8, torch.int32, torch.int64]
    for dt in dtypes:
        for op in (R.SUM, R.PRODUCT, R.MIN, R.MAX):
            def f(g, dt=dt, op=op):
                x = inputs(r, dt, op)
                dist.all_reduce(x, op=op, group=g)
                return x
            compare(f"all_reduce {dt} {op}", f, reference(dt, op))
    for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        def f(g, dt=dt):
            x = inputs(r, dt, R.AVG)
            dist.all_reduce(x, op=R.AVG, group=g)
            return x
        compare(f"all_reduce {dt} AVG", f, reference(dt, R.AVG))
    for dt in (torch.int32, torch.uint8, torch.int64, torch.bool, torch.int16):
        for op in (R.BAND, R.BOR, R.BXOR):
            if dt == torch.bool and op == R.BXOR:
                continue  # torch's reference: bool ^ bool is fine, gloo lacks bool
            def f(g, dt=dt, op=op):
                x = inputs(r, dt, op)
                dist.all_reduce(x, op=op, group=g)
                return x
            compare(f"all_reduce {dt} {op}", f, reference(dt, op))
    for dt in (torch.float8_e4m3fn, torch.float8_e5m2):
        x = inputs(r, torch.float32, R.MAX).to(dt)
        dist.all_reduce(x, op=R.MAX)
        if not same(x, reference(torch.float32, R.MAX).to(dt)):
            fail(f"all_reduce {dt} MAX: {x}")
        checked["vs_reference"] += 1
    # PREMUL_SUM: factor times each input, then a sum (a double factor, and a tensor factor).
    for factor in (0.5, torch.tensor([0.25])):
        x = inputs(r, torch.float32, R.SUM)
        dist.all_reduce(x, op=dist._make_nccl_premul_sum(factor))
        want = reference(torch.float32, R.SUM) * (factor if isinstance(factor, float) else 0.25)
        if not same(x, want):
            fail(f"all_reduce PREMUL_SUM({factor}): {x} != {want}")
        checked["vs_reference"] += 1
    # complex SUM as real and imaginary parts.
    def fc(g):
        x = torch.complex(inputs(r, torch.float32, R.SUM), -inputs(r, torch.float32, R.SUM))
        dist.all_reduce(x, group=g)
        return x
    ref = reference(torch.float32, R.SUM)
    compare("all_reduce complex64", fc, torch.complex(ref, -ref))
    # A non-contiguous view: reduced in place, the other columns untouched (gloo 2.11 is wrong
    # here, so only the reference).
    base = torch.stack([inputs(r, torch.float32, R.SUM), torch.full((37,), -1.0)], dim=1)
    view = base[:, 0]
    dist.all_reduce(view)
    if not same(base[:, 0].contiguous(), reference(torch.float32, R.SUM)) or \
            not torch.all(base[:, 1] == -1):
        fail(f"all_reduce of a non-contiguous view: {base}")
    checked["vs_reference"] += 1

    for root in sorted({0, n - 1}):
        def fb(g, root=root):
            x = inputs(r, torch.float32, R.SUM) * (r + 1)
            dist.broadcast(x, src=root, group=g)
            return x
        compare(f"broadcast root {root}", fb, inputs(root, torch.float32, R.SUM) * (root + 1))

        def fr(g, root=root):
            x = inputs(r, torch.int64, R.SUM)
            dist.reduce(x, dst=root, group=g)
            return x if r == root else torch.zeros(0)
        compare(f"reduce root {root}", fr,
                reference(torch.int64, R.SUM) if r == root else torch.zeros(0))

        def fg(g, root=root):
            outs = [torch.empty(5, 3) for _ in range(n)] if r == root else None
            dist.gather(torch.full((5, 3), float(r)), outs, dst=root, group=g)
            return outs if r == root else []
        compare(f"gather root {root}", fg,
                [torch.full((5, 3), float(k)) for k in range(n)] if r == root else [])

        def fs(g, root=root):
            ins = [torch.full((4,), float(k * 10 + root)) for k in range(n)] if r == root else None
            out = torch.empty(4)
            dist.scatter(out, ins, src=root, group=g)
            return out
        compare(f"scatter root {root}", fs, torch.full((4,), float(r * 10 + root)))

    def fag(g):
        outs = [torch.empty(3, 2, dtype=torch.int32) for _ in range(n)]
        dist.all_gather(outs, torch.full((3, 2), r, dtype=torch.int32), group=g)
        return outs
    compare("all_gather", fag, [torch.full((3, 2), k, dtype=torch.int32) for k in range(n)])

    def fagt(g):
        out = torch.empty(n * 6, dtype=torch.bfloat16)
        dist.all_gather_into_tensor(out, torch.full((6,), float(r), dtype=torch.bfloat16), group=g)
        return out
    compare("all_gather_into_tensor", fagt,
            torch.arange(n).repeat_interleave(6).to(torch.bfloat16))

    def frs(g):
        out = torch.empty(4, dtype=torch.float64)
        dist.reduce_scatter(out, [torch.full((4,), float(r + 10 * k), dtype=torch.float64)
                                  for k in range(n)], group=g)
        return out
    compare("reduce_scatter", frs,
            torch.full((4,), float(sum(range(n)) + 10 * r * n), dtype=torch.float64))

    def frst(g):
        out = torch.empty(3, dtype=torch.int32)
        inp = torch.arange(3 * n, dtype=torch.int32) + r
        dist.reduce_scatter_tensor(out, inp, op=R.MAX, group=g)
        return out
    compare("reduce_scatter_tensor MAX", frst,
            torch.arange(3 * r, 3 * r + 3, dtype=torch.int32) + n - 1)

    def fa2a(g):
        out = torch.empty(2 * n)
        dist.all_to_all_single(out, torch.arange(2 * n, dtype=torch.float32) + 100 * r, group=g)
        return out
    compare("all_to_all_single equal", fa2a,
            torch.tensor([100.0 * k + 2 * r + j for k in range(n) for j in range(2)]))

    # Unequal splits: rank r sends k+1 rows of width 3 to rank k (values 1000r + 100k + row).
    in_splits = [k + 1 for k in range(n)]
    out_splits = [r + 1] * n

    def fa2av(g):
        inp = torch.cat([torch.full((k + 1, 3), 1000.0 * r + 100 * k) for k in range(n)])
        out = torch.empty(sum(out_splits), 3)
        dist.all_to_all_single(out, inp, out_splits, in_splits, group=g)
        return out
    compare("all_to_all_single unequal", fa2av,
            torch.cat([torch.full((r + 1, 3), 1000.0 * k + 100 * r) for k in range(n)]))

    def fa2al(g):
        outs = [torch.empty(k + 1, dtype=torch.int64) for k in range(n)]
        dist.all_to_all(outs, [torch.full((r + 1,), 10 * r + k, dtype=torch.int64)
                               for k in range(n)], group=g)
        return outs
    compare("all_to_all list", fa2al,
            [torch.full((k + 1,), 10 * k + r, dtype=torch.int64) for k in range(n)])

    def fp2p(g):
        # A ring: even ranks send first, odd ranks receive first.
        nxt, prv = (r + 1) % n, (r - 1) % n
        got = torch.empty(8)
        mine = torch.full((8,), float(r))
        if r % 2 == 0:
            dist.send(mine, nxt, group=g)
            dist.recv(got, prv, group=g)
        else:
            dist.recv(got, prv, group=g)
            dist.send(mine, nxt, group=g)
        return got
    if n % 2 == 0:
        compare("send/recv ring", fp2p, torch.full((8,), float((r - 1) % n)))

    def fany(g):
        # recv without src: rank 0 takes two messages from every other rank in whatever order
        # they arrive (per sender in order); the senders go straight on to an all_reduce, whose
        # traffic reaches rank 0 while it still receives and must not be taken for a message.
        got = {}
        if r == 0:
            for _ in range(2 * (n - 1)):
                t = torch.empty(5, dtype=torch.int64)
                src = dist.recv(t, group=g)
                got.setdefault(src, []).append(t)
        else:
            for m in range(2):
                dist.send(torch.arange(5, dtype=torch.int64) + 100 * r + 10 * m, 0, group=g)
        x = torch.full((3,), float(r))
        dist.all_reduce(x, group=g)
        return [t for src in sorted(got) for t in got[src]] + [x]
    any_ref = [torch.arange(5, dtype=torch.int64) + 100 * k + 10 * m
               for k in range(1, n) for m in range(2)] if r == 0 else []
    compare("recv from any source", fany, any_ref + [torch.full((3,), float(sum(range(n))))])

    def fbatch(g):
        # batch_isend_irecv: every rank sends 4 MiB to every peer before it receives (as
        # separate blocking sends this would wait forever), plus a small message each way.
        big = 1 << 20
        ops, got = [], []
        for k in range(n):
            if k == r:
                continue
            ops.append(dist.P2POp(dist.isend, torch.arange(big, dtype=torch.float32) + 1000 * r + k,
                                  k, group=g))
            ops.append(dist.P2POp(dist.isend, torch.full((3,), r * 10 + k, dtype=torch.int64), k,
                                  group=g))
        for k in range(n):
            if k == r:
                continue
            got.append(torch.empty(big, dtype=torch.float32))
            ops.append(dist.P2POp(dist.irecv, got[-1], k, group=g))
            got.append(torch.empty(3, dtype=torch.int64))
            ops.append(dist.P2POp(dist.irecv, got[-1], k, group=g))
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        return got
    batch_ref = []
    for k in range(n):
        if k != r:
            batch_ref.append(torch.arange(1 << 20, dtype=torch.float32) + 1000 * k + r)
            batch_ref.append(torch.full((3,), k * 10 + r, dtype=torch.int64))
    compare("batch_isend_irecv, sends first", fbatch, batch_ref)

    def fcoal(g):
        xs = [inputs(r, torch.float32, R.SUM, k + 1) for k in range(5)]
        dist.all_reduce_coalesced(xs, group=g)
        return xs
    compare("all_reduce_coalesced", fcoal,
            [reference(torch.float32, R.SUM, k + 1) for k in range(5)])

    def fagc(g):
        outs = [[torch.empty(k + 2) for _ in range(n)] for k in range(3)]
        dist.all_gather_coalesced(outs, [torch.full((k + 2,), float(r + k)) for k in range(3)],
                                  group=g)
        return [t for lst in outs for t in lst]
    compare("all_gather_coalesced", fagc,
            [torch.full((k + 2,), float(j + k)) for k in range(3) for j in range(n)])

    # The tensor-coalesced forms, which torch reaches through the ProcessGroup object.
    def pg_of(g):
        return g if g is not None else dist.distributed_c10d._get_default_group()

    def fagtc(g):
        outs = [torch.empty(n * (k + 1), dtype=torch.int64) for k in range(3)]
        pg_of(g).allgather_into_tensor_coalesced(
            outs, [torch.full((k + 1,), 10 * r + k, dtype=torch.int64) for k in range(3)]).wait()
        return outs
    compare("allgather_into_tensor_coalesced", fagtc,
            [torch.tensor([10 * j + k for j in range(n)]).repeat_interleave(k + 1)
             for k in range(3)])

    def frstc(g):
        outs = [torch.empty(k + 1) for k in range(3)]
        opts = dist.ReduceScatterOptions()
        opts.reduceOp = R.SUM
        pg_of(g).reduce_scatter_tensor_coalesced(
            outs, [torch.arange(n * (k + 1), dtype=torch.float32) + r for k in range(3)],
            opts).wait()
        return outs
    compare("reduce_scatter_tensor_coalesced", frstc,
            [torch.arange(r * (k + 1), (r + 1) * (k + 1), dtype=torch.float32) * n +
             sum(range(n)) for k in range(3)])

    # Asynchronous calls and their futures, several in flight, completed in issue order.
    xs = [torch.full((1000,), float(r + k)) for k in range(4)]
    works = [dist.all_reduce(x, async_op=True) for x in xs]
    futs = [w.get_future() for w in works]
    for k, fut in enumerate(futs):
        val = fut.wait()
        want = torch.full((1000,), float(sum(range(n)) + n * k))
        if not (isinstance(val, list) and same(val[0], want) and same(xs[k], want)):
            fail(f"async all_reduce {k}: future {val}, tensor {xs[k]}")
    checked["vs_reference"] += 1
    dist.barrier()
    seq = dist.distributed_c10d._get_default_group()._get_backend(
        torch.device("cpu"))._get_sequence_number_for_group()
    if seq <= 0:
        fail(f"sequence number {seq}")
    # A sub-group of the even ranks, made by new_group on this backend.
    sub = dist.new_group(list(range(0, n, 2)), backend="tutti")
    if r % 2 == 0:
        x = torch.full((3,), float(r))
        dist.all_reduce(x, group=sub)
        if not same(x, torch.full((3,), float(sum(range(0, n, 2))))):
            fail(f"sub-group all_reduce: {x}")
    dist.barrier()


def expect(exc_type, words, fn, what):
    try:
        fn()
    except exc_type as e:
        msg = str(e)
        missing = [w for w in words if w not in msg]
        if missing:
            fail(f"{what}: {exc_type.__name__} lacks {missing}: {msg}")
        return msg
    except Exception as e:  # noqa: BLE001
        fail(f"{what}: expected {exc_type.__name__}, got {type(e).__name__}: {e}")
        return
    fail(f"{what}: no error")


def job_errors():
    x = torch.arange(6, dtype=torch.int16)
    expect(TypeError, ["int16", "allreduce"], lambda: dist.all_reduce(x), "all_reduce int16")
    if not torch.equal(x, torch.arange(6, dtype=torch.int16)):
        fail(f"all_reduce int16 changed the tensor: {x}")
    y = torch.ones(4)
    expect(TypeError, ["BAND", "float32"], lambda: dist.all_reduce(y, op=R.BAND),
           "all_reduce float BAND")
    # torch.distributed's own checks come first for some arguments; the backend's own are
    # reached by calling it directly.
    pg = dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))
    opts = dist.AllreduceOptions()
    opts.reduceOp = R.PRODUCT
    c = torch.ones(2, dtype=torch.complex64)
    expect(TypeError, ["PRODUCT", "complex64"], lambda: pg.allreduce([c], opts),
           "allreduce complex PRODUCT")
    out = torch.zeros(5)
    expect(ValueError, ["output", "5"], lambda: dist.all_gather_into_tensor(out, y),
           "all_gather_into_tensor wrong size")
    if not torch.equal(out, torch.zeros(5)):
        fail("all_gather_into_tensor changed the output")
    expect(ValueError, ["input_split_sizes", "sums to"],
           lambda: dist.all_to_all_single(torch.empty(4), torch.ones(4), [2] * size,
                                          [3] * size),
           "all_to_all_single bad splits")
    outs = [torch.zeros(3) for _ in range(size)]
    expect(TypeError, ["dtype", "float64", "float32"],
           lambda: pg.allgather([outs], [torch.ones(3, dtype=torch.float64)]),
           "allgather dtype mismatch")
    expect(ValueError, ["output_tensor_lists[0]", "entries"],
           lambda: pg.allgather([outs[:1]], [torch.ones(3)]), "allgather short output list")
    if any(not torch.equal(o, torch.zeros(3)) for o in outs):
        fail("allgather changed an output")
    expect(ValueError, ["src", "7"], lambda: pg.broadcast(y, 7), "broadcast root out of range")
    expect(ValueError, ["src=None", "empty"], lambda: dist.recv(torch.empty(0)),
           "recv from any source into an empty tensor")
    # Everything still works after the refused calls.
    z = torch.ones(3)
    dist.all_reduce(z)
    if not same(z, torch.full((3,), float(size))):
        fail(f"all_reduce after errors: {z}")
    # A timeout: rank 0 waits on a group whose other rank never joins the call.
    short = dist.new_group(backend="tutti", timeout=datetime.timedelta(seconds=2))
    if rank == 0:
        t0 = time.monotonic()
        checked["timeout_msg"] = expect(dist.DistBackendError, ["allreduce", "Timeout"],
                                        lambda: dist.all_reduce(torch.ones(2), group=short),
                                        "timeout")
        took = time.monotonic() - t0
        checked["timeout_s"] = took
        if took > 20:
            fail(f"timeout took {took:.1f} s")
    dist.barrier()


def job_killed():
    dist.barrier()
    if rank == size - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    t0 = time.monotonic()
    checked["msg"] = expect(dist.DistBackendError, ["allreduce", f"rank {size - 1}"],
           lambda: [dist.all_reduce(torch.ones(1000)) for _ in range(100000)], "killed peer")
    checked["detect_s"] = time.monotonic() - t0
    if checked["detect_s"] > 30:
        fail(f"the dead peer took {checked['detect_s']:.1f} s to surface")


if __name__ == "__main__":
    dist.init_process_group("tutti", timeout=datetime.timedelta(seconds=60))
    rank, size = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    try:
        {"collectives": job_collectives, "errors": job_errors, "killed": job_killed}[JOB]()
    except Exception:  # noqa: BLE001
        fail(traceback.format_exc())
    with open(OUT, "w") as f:
        json.dump({"failures": failures, "checked": checked}, f)
    f = None
    if JOB == "killed":
        os._exit(0)  # the group has a dead member: skip the teardown
    dist.destroy_process_group()
