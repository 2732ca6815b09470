"""One rank of a multi-process test job (started by conftest.run_job, one process per rank).

usage: rank_worker.py JOB RESULT_JSON
  JOB is "checks" (every scenario below on one communicator), "torch" (torch CPU tensors),
  "from_env", "dead_peer" or "timeout". The rank, size and UniqueId come from TUTTI_TEST_RANK, TUTTI_TEST_SIZE and
  TUTTI_TEST_UID (hex), or from the launcher variables for "from_env".
Writes {"scenario": "ok" | "<traceback>", ...} (plus observations) to RESULT_JSON. Every
expected value is computed with NumPy from data that each rank can rebuild for every rank.
"""

import json
import os
import signal
import sys
import time
import traceback

import numpy as np

import tutti

INT_TYPES = [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64]
FLOAT_TYPES = [np.float16, np.float32, np.float64]
OPS = ["sum", "prod", "max", "min", "avg"]


def data(rank, count, dtype, seed=0):
    """Rank `rank`'s input: small values (1..3, negatives for signed types) so that sums and
    products of up to 4 ranks are exact in every dtype."""
    rng = np.random.default_rng(1000 * seed + rank)
    v = rng.integers(1, 4, size=count)
    if np.issubdtype(dtype, np.signedinteger) or np.issubdtype(dtype, np.floating):
        v = v * rng.choice([-1, 1], size=count)
    return v.astype(dtype)


def reference(inputs, op, dtype):
    stack = np.stack([a.astype(np.float64) for a in inputs])
    n = len(inputs)
    if op == "sum":
        r = stack.sum(0)
    elif op == "prod":
        r = stack.prod(0)
    elif op == "max":
        r = stack.max(0)
    elif op == "min":
        r = stack.min(0)
    else:  # avg: integers truncate toward zero
        s = stack.sum(0)
        r = np.trunc(s / n) if np.issubdtype(dtype, np.integer) else s / n
    if np.issubdtype(dtype, np.unsignedinteger):
        r = np.mod(r, 2.0 ** (8 * np.dtype(dtype).itemsize))  # wrap like the C++ arithmetic
    return r.astype(dtype)


def check_equal(got, want, what):
    if np.issubdtype(want.dtype, np.floating):
        tol = 1e-3 if want.dtype == np.float16 else 1e-6
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol,
                                   atol=tol, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def expect_raises(exc_type, words, fn):
    try:
        fn()
    except exc_type as e:
        for w in words:
            assert w in str(e), f"{exc_type.__name__} message {str(e)!r} lacks {w!r}"
        return e
    raise AssertionError(f"expected {exc_type.__name__} mentioning {words}")


# ---- scenarios: each takes the communicator and raises on a failed check ----


def all_reduce_dtypes_ops(comm):
    r, n = comm.rank, comm.size
    for dtype in INT_TYPES + FLOAT_TYPES:
        for op in OPS:
            for count in (1, 7, 1031):
                x = data(r, count, dtype)
                want = reference([data(i, count, dtype) for i in range(n)], op, dtype)
                got = comm.all_reduce(x, op)
                assert got is x, "in-place all_reduce must return its array"
                check_equal(x, want, f"all_reduce {np.dtype(dtype).name} {op} count={count}")


def all_reduce_large_and_empty(comm):
    r, n = comm.rank, comm.size
    count = (1 << 18) + 3  # about 1 MiB of float32: several pipelined slices
    x = data(r, count, np.float32, seed=1)
    want = reference([data(i, count, np.float32, seed=1) for i in range(n)], "sum", np.float32)
    check_equal(comm.all_reduce(x), want, "large all_reduce")
    e = np.empty(0, dtype=np.float64)
    assert comm.all_reduce(e).size == 0


def all_reduce_out_of_place(comm):
    r, n = comm.rank, comm.size
    x = data(r, 24, np.int32).reshape(4, 6)
    before = x.copy()
    out = np.zeros(24, dtype=np.int32)  # any shape with the same element count
    got = comm.all_reduce(x, tutti.ReduceOp.MAX, out=out)
    assert got is out
    want = reference([data(i, 24, np.int32) for i in range(n)], "max", np.int32)
    check_equal(out, want, "out-of-place all_reduce")
    np.testing.assert_array_equal(x, before, "the input of an out-of-place call changed")


def all_gather_(comm):
    r, n = comm.rank, comm.size
    for dtype in (np.uint8, np.int64, np.float32, np.float16):
        x = data(r, 10, dtype).reshape(2, 5)
        got = comm.all_gather(x)
        assert got.shape == (n, 2, 5) and got.dtype == dtype
        for i in range(n):
            check_equal(got[i], data(i, 10, dtype).reshape(2, 5), f"all_gather row {i}")
    out = np.zeros(n * 3, dtype=np.float64)  # in place: the input is this rank's block of out
    out[3 * r:3 * r + 3] = data(r, 3, np.float64)
    comm.all_gather(out[3 * r:3 * r + 3], out=out)
    check_equal(out, np.concatenate([data(i, 3, np.float64) for i in range(n)]), "in place")


def reduce_scatter_(comm):
    r, n = comm.rank, comm.size
    for dtype, op in ((np.int32, "sum"), (np.float64, "min"), (np.uint8, "max"),
                      (np.float32, "avg")):
        x = data(r, n * 6, dtype).reshape(n, 2, 3)
        got = comm.reduce_scatter(x, op)
        assert got.shape == (2, 3)
        full = reference([data(i, n * 6, dtype) for i in range(n)], op, dtype).reshape(n, 2, 3)
        check_equal(got, full[r], f"reduce_scatter {np.dtype(dtype).name} {op}")
    out = np.empty(5, dtype=np.int64)
    comm.reduce_scatter(data(r, 5 * n, np.int64), out=out)
    full = reference([data(i, 5 * n, np.int64) for i in range(n)], "sum", np.int64)
    check_equal(out, full[5 * r:5 * r + 5], "reduce_scatter out=")


def broadcast_(comm):
    r, n = comm.rank, comm.size
    for root in range(n):
        x = data(r, 33, np.float64, seed=root)
        got = comm.broadcast(x, root)
        assert got is x
        check_equal(x, data(root, 33, np.float64, seed=root), f"broadcast root={root}")
        out = np.zeros(8, dtype=np.int8)
        src = data(r, 8, np.int8) if r == root else None
        comm.broadcast(src, root, out=out)
        check_equal(out, data(root, 8, np.int8), f"broadcast out= root={root}")


def reduce_(comm):
    r, n = comm.rank, comm.size
    for root in range(n):
        x = data(r, 17, np.int64, seed=root)
        before = x.copy()
        got = comm.reduce(x, "sum", root)
        want = reference([data(i, 17, np.int64, seed=root) for i in range(n)], "sum", np.int64)
        if r == root:
            assert got is x
            check_equal(x, want, f"reduce root={root}")
        else:
            assert got is None
            np.testing.assert_array_equal(x, before, "a non-root's array changed in reduce")
        out = np.zeros(17, dtype=np.int64) if r == root else None
        got = comm.reduce(before, "min", root, out=out)
        if r == root:
            want = reference([data(i, 17, np.int64, seed=root) for i in range(n)], "min",
                             np.int64)
            check_equal(out, want, f"reduce out= root={root}")


def all_to_all_(comm):
    r, n = comm.rank, comm.size
    x = (np.arange(n * 4, dtype=np.int32) + 100 * r).reshape(n, 4)  # block j goes to rank j
    got = comm.all_to_all(x)
    want = np.stack([np.arange(4, dtype=np.int32) + 4 * r + 100 * i for i in range(n)])
    np.testing.assert_array_equal(got, want)


def gather_scatter(comm):
    r, n = comm.rank, comm.size
    for root in range(n):
        got = comm.gather(data(r, 6, np.float32), root)
        if r == root:
            check_equal(got, np.stack([data(i, 6, np.float32) for i in range(n)]), "gather")
        else:
            assert got is None
        src = np.stack([data(i, 5, np.uint32, seed=root) for i in range(n)]) if r == root else None
        out = np.zeros(5, dtype=np.uint32)
        comm.scatter(src, root, out=out)
        check_equal(out, data(r, 5, np.uint32, seed=root), f"scatter root={root}")
    if r == 0:  # the root alone may omit out (it knows the shape)
        got = comm.scatter(np.arange(n * 2, dtype=np.int64).reshape(n, 2), 0)
    else:
        got = comm.scatter(None, 0, out=np.zeros(2, dtype=np.int64))
    np.testing.assert_array_equal(got, [2 * r, 2 * r + 1])


def send_recv_(comm):
    r, n = comm.rank, comm.size
    nxt, prv = (r + 1) % n, (r - 1) % n
    out = np.zeros(100, dtype=np.float64)
    comm.send_recv(data(r, 100, np.float64), nxt, out, prv)
    check_equal(out, data(prv, 100, np.float64), "send_recv ring")
    # pairs (0,1), (2,3): even ranks send first, odd ranks receive first
    if n % 2 == 0:
        peer = r + 1 if r % 2 == 0 else r - 1
        buf = np.zeros(64, dtype=np.int32)
        if r % 2 == 0:
            comm.send(data(r, 64, np.int32), peer)
            comm.recv(buf, peer)
        else:
            comm.recv(buf, peer)
            comm.send(data(r, 64, np.int32), peer)
        check_equal(buf, data(peer, 64, np.int32), "send/recv pair")
    # One group: every rank sends 2 MiB to every rank (itself too) before it receives.
    big = 1 << 19
    sends = [(data(r * n + q, big, np.float32), q) for q in range(n)]
    outs = comm.send_recv_group(sends, [(np.zeros(big, dtype=np.float32), q) for q in range(n)])
    for q, out in enumerate(outs):
        check_equal(out, data(q * n + r, big, np.float32), f"send_recv_group from rank {q}")
    keep = np.full(4, 7, dtype=np.int32)
    expect_raises(ValueError, ["send_recv_group", "sends[1][1]", str(n + 3)],
                  lambda: comm.send_recv_group([(keep, 0), (keep, n + 3)], []))
    expect_raises(TypeError, ["send_recv_group", "recvs[0]", "(array, peer)"],
                  lambda: comm.send_recv_group([], [keep]))
    check_equal(keep, np.full(4, 7, dtype=np.int32), "send_recv_group's bad input changed nothing")
    # recv_any on a communicator kept for sends and receives: rank 0 takes one message from
    # every other rank, in whatever order they arrive, and learns each sender. A sender that was
    # heard leaves the list: its next bytes are the barrier's below.
    p2p = comm.split(0)
    if r == 0:
        seen, waiting = {}, list(range(1, n))
        while waiting:
            buf = np.zeros(300, dtype=np.float32)
            q = p2p.recv_any(buf, waiting)
            waiting.remove(q)
            seen[q] = buf
        check_equal(np.array(sorted(seen)), np.arange(1, n), "recv_any senders")
        for q, buf in seen.items():
            check_equal(buf, data(q, 300, np.float32), f"recv_any from rank {q}")
    else:
        p2p.send(data(r, 300, np.float32), 0)
    expect_raises(ValueError, ["recv_any", "this rank"],
                  lambda: p2p.recv_any(np.zeros(3, dtype=np.float32), [r]))
    expect_raises(ValueError, ["recv_any", "0 bytes"],
                  lambda: p2p.recv_any(np.zeros(0, dtype=np.float32)))
    p2p.barrier()
    del p2p


def barrier_(comm):
    comm.barrier()
    w = comm.barrier(async_op=True)
    assert w.wait() is None and w.is_completed()


def async_ops(comm):
    r, n = comm.rank, comm.size
    xs = [data(r, 500, np.float32, seed=s) for s in range(4)]
    works = [comm.all_reduce(x, async_op=True) for x in xs]
    g = data(r, 3, np.int32)
    wg = comm.all_gather(g, async_op=True)
    for s, (x, w) in enumerate(zip(xs, works)):
        assert w.wait() is x and w.is_completed() and w.exception() is None
        want = reference([data(i, 500, np.float32, seed=s) for i in range(n)], "sum", np.float32)
        check_equal(x, want, f"async all_reduce {s}")
    got = wg.result()
    assert got.shape == (n, 3)
    # a blocking call after queued ones runs after them
    y = data(r, 9, np.int64)
    wy = comm.all_reduce(y, "max", async_op=True)
    z = comm.all_reduce(y.copy(), "max")
    wy.wait()
    np.testing.assert_array_equal(y, z)
    # every collective's async form
    rs = comm.reduce_scatter(np.ones((n, 2), dtype=np.int32), async_op=True).wait()
    np.testing.assert_array_equal(rs, [n, n])
    b = np.full(4, r, dtype=np.int32)
    comm.broadcast(b, n - 1, async_op=True).wait()
    np.testing.assert_array_equal(b, [n - 1] * 4)
    red = comm.reduce(np.ones(3, dtype=np.int32), root=0, async_op=True).wait()
    assert (red is None) if r else list(red) == [n] * 3
    a2a = comm.all_to_all(np.full((n, 1), r, dtype=np.int32), async_op=True).wait()
    np.testing.assert_array_equal(a2a.ravel(), np.arange(n))
    gat = comm.gather(np.full(2, r, dtype=np.int32), 0, async_op=True).wait()
    if r == 0:
        np.testing.assert_array_equal(gat[:, 0], np.arange(n))
    sc = comm.scatter(np.arange(n, dtype=np.int32).reshape(n, 1) if r == 0 else None, 0,
                      out=np.zeros(1, dtype=np.int32), async_op=True).wait()
    assert sc[0] == r
    # a Work dropped without wait() waits for its call before releasing the buffers
    d = np.ones(1000, dtype=np.float64)
    comm.all_reduce(d, async_op=True)
    comm.barrier()
    np.testing.assert_array_equal(d, np.full(1000, float(n)))


def fused(comm):
    r, n = comm.rank, comm.size
    arrays = [data(r, c, t, seed=c) for c, t in ((3, np.float32), (100, np.int64),
                                                  (1, np.float64), (0, np.float32))]
    separate = [a.copy() for a in arrays]
    for a in separate:
        comm.all_reduce(a)
    got = comm.fused_all_reduce(arrays)
    assert all(g is a for g, a in zip(got, arrays))
    for a, b in zip(arrays, separate):
        assert a.tobytes() == b.tobytes(), "fused result differs from separate calls"
    w = comm.fused_all_reduce([np.ones(5, dtype=np.int32), np.ones(2, dtype=np.float16)], "sum",
                              async_op=True)
    res = w.wait()
    np.testing.assert_array_equal(res[0], [n] * 5)
    np.testing.assert_array_equal(res[1], [n] * 2)


def split_(comm):
    r, n = comm.rank, comm.size
    # two colors; key = -rank reverses the order inside each color
    sub = comm.split(r % 2, key=-r)
    members = [i for i in range(n) if i % 2 == r % 2]
    assert sub.size == len(members)
    assert sub.rank == sorted(members, reverse=True).index(r), (sub.rank, members)
    x = np.array([r], dtype=np.int64)
    sub.all_reduce(x)
    assert x[0] == sum(members)
    sub.close()
    # rank 0 opts out (None), the others form one group
    sub = comm.split(-1 if r == 0 else 7)
    if r == 0:
        assert sub is None
    else:
        assert sub.size == n - 1 and sub.rank == r - 1
        y = sub.all_gather(np.array([r], dtype=np.int32))
        np.testing.assert_array_equal(y.ravel(), np.arange(1, n))
        sub.close()
    comm.barrier()


def stats(comm):
    comm.reset_stats()
    x = np.ones(256, dtype=np.float32)
    for _ in range(3):
        comm.all_reduce(x)
    comm.all_gather(np.ones(4, dtype=np.int64))
    s = comm.get_stats()
    ar = s["all_reduce"]
    assert ar["count"] == 3 and ar["total_bytes"] == 3 * 1024, ar
    assert ar["avg_latency_ms"] > 0 and isinstance(ar["algorithm"], str) and ar["algorithm"]
    assert ar["algorithm"] in tutti.Communicator.algorithms("all_reduce")
    ag = s["all_gather"]
    assert ag["count"] == 1 and ag["total_bytes"] == 4 * 8 * comm.size, ag
    comm.reset_stats()
    assert comm.get_stats() == {}


def algorithm_for(comm):
    for coll in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
                 "all_to_all", "gather", "scatter"):
        c = comm.algorithm_for(coll, 1024, np.float32)
        assert c.algorithm in tutti.Communicator.algorithms(coll), (coll, c)
        assert c.predicted_us > 0 or c.predicted_us == -1, c
        assert isinstance(c.reason, str) and c.reason, c
    big = comm.algorithm_for("allreduce", 1 << 24, "float32", "sum")
    assert big.predicted_us > comm.algorithm_for("all_reduce", 1, "float32").predicted_us > 0
    expect_raises(ValueError, ["coll", "allsum"], lambda: comm.algorithm_for("allsum", 8))
    expect_raises(ValueError, ["count", "0"], lambda: comm.algorithm_for("all_reduce", 0))
    expect_raises(TypeError, ["dtype", "int16"],
                  lambda: comm.algorithm_for("all_reduce", 8, "int16"))
    expect_raises(ValueError, ["root", "99"],
                  lambda: comm.algorithm_for("broadcast", 8, root=99))


def bad_input(comm):
    r, n = comm.rank, comm.size
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    orig = x.copy()
    expect_raises(ValueError, ["all_reduce", "'array'", "C-contiguous"],
                  lambda: comm.all_reduce(x[:, ::2]))
    expect_raises(ValueError, ["'array'", "C-contiguous"], lambda: comm.all_reduce(x.T))
    expect_raises(TypeError, ["'array'", "int16"],
                  lambda: comm.all_reduce(np.ones(4, dtype=np.int16)))
    expect_raises(TypeError, ["'array'", "bool"], lambda: comm.all_reduce(np.ones(4, bool)))
    expect_raises(TypeError, ["'array'", "complex"],
                  lambda: comm.all_reduce(np.ones(4, np.complex64)))
    expect_raises(TypeError, ["'array'", "list"], lambda: comm.all_reduce([1.0, 2.0]))
    expect_raises(ValueError, ["'out'", "5", "16"],
                  lambda: comm.all_reduce(x, out=np.zeros(5, np.float32)))
    expect_raises(TypeError, ["'out'", "float64", "float32"],
                  lambda: comm.all_reduce(x, out=np.zeros(16, np.float64)))
    ro = np.ones(4, dtype=np.float32)
    ro.flags.writeable = False
    expect_raises(ValueError, ["'array'", "read-only"], lambda: comm.all_reduce(ro))
    expect_raises(ValueError, ["op", "band"], lambda: comm.all_reduce(x, "band"))
    expect_raises(ValueError, ["op", "9"], lambda: comm.all_reduce(x, 9))
    expect_raises(ValueError, ["root", str(n)], lambda: comm.broadcast(x, n))
    expect_raises(ValueError, ["root", "-1"], lambda: comm.reduce(x, "sum", -1))
    expect_raises(ValueError, ["root", "7"], lambda: comm.gather(x, 7))
    expect_raises(ValueError, ["peer", str(n + 3)], lambda: comm.send(x, n + 3))
    expect_raises(ValueError, ["peer", "this rank"], lambda: comm.recv(x, r))
    expect_raises(ValueError, ["'out'", str(16 * n + 1)],
                  lambda: comm.all_gather(x, out=np.zeros(16 * n + 1, np.float32)))
    expect_raises(ValueError, ["reduce_scatter", "first dimension"],
                  lambda: comm.reduce_scatter(np.ones(n + 1, np.float32)))
    expect_raises(ValueError, ["'array'", "multiple"],
                  lambda: comm.all_to_all(np.ones(n * 2 + 1, np.float32)))
    if n > 1:
        expect_raises(ValueError, ["scatter", "'out'"], lambda: comm.scatter(None, (r + 1) % n))
    expect_raises(ValueError, ["arrays[1]", "C-contiguous"],
                  lambda: comm.fused_all_reduce([x, x[:, ::2]]))
    expect_raises(ValueError, ["timeout"], lambda: tutti.Communicator(b"\0" * 128, 0, 1,
                                                                      timeout=-1))
    # overlapping buffers are tutti's own check: an InvalidArgumentError, a ValueError
    big = np.zeros(8, np.float32)
    expect_raises(tutti.InvalidArgumentError, ["overlap"],
                  lambda: comm.all_reduce(big[0:4], out=big[2:6]))
    np.testing.assert_array_equal(x, orig, "a rejected call changed its array")
    # nothing ran: the ranks are still in step
    y = np.ones(3, dtype=np.int32)
    comm.all_reduce(y)
    np.testing.assert_array_equal(y, [n] * 3)


def other_buffers(comm):
    import array
    n = comm.size
    a = array.array("d", [1.0, 2.0])  # buffer protocol, no NumPy
    comm.all_reduce(a)
    assert list(a) == [float(n), 2.0 * n]
    b = bytearray([1, 2, 3])  # uint8
    comm.all_reduce(memoryview(b), "max")
    assert list(b) == [1, 2, 3]
    g = comm.all_gather(array.array("i", [comm.rank]))
    assert g.ravel().tolist() == list(range(n))


def torch_tensors(comm):
    """torch CPU tensors through DLPack, including the dtypes NumPy lacks (bfloat16, FP8)."""
    import torch

    r, n = comm.rank, comm.size
    types = [(torch.float32, np.float32), (torch.float64, np.float64),
             (torch.float16, np.float16), (torch.bfloat16, np.float32),
             (torch.int8, np.int8), (torch.uint8, np.uint8), (torch.int32, np.int32),
             (torch.int64, np.int64)]
    if n == 2:  # sums of two values in [-3, 3] are exact in both FP8 formats
        types += [(torch.float8_e4m3fn, np.float32), (torch.float8_e5m2, np.float32)]
    for tdt, ndt in types:
        for op in ("sum", "max", "min", "avg"):
            if tdt in (torch.float8_e4m3fn, torch.float8_e5m2) and op == "avg":
                continue  # halves of odd sums are not all representable in FP8
            x = torch.from_numpy(data(r, 40, ndt)).to(tdt)
            got = comm.all_reduce(x, op)
            assert got is x
            want = reference([data(i, 40, ndt) for i in range(n)], op, ndt)
            want = torch.from_numpy(np.ascontiguousarray(want)).to(tdt)
            tol = 0.0 if not tdt.is_floating_point else 2e-2
            assert torch.allclose(x.to(torch.float64), want.to(torch.float64), rtol=tol,
                                  atol=tol), (tdt, op, x, want)
    x = torch.arange(6, dtype=torch.bfloat16).reshape(2, 3) + r
    g = comm.all_gather(x)
    assert isinstance(g, torch.Tensor) and g.shape == (n, 2, 3) and g.dtype == torch.bfloat16
    for i in range(n):
        assert torch.equal(g[i], torch.arange(6, dtype=torch.bfloat16).reshape(2, 3) + i)
    rs = comm.reduce_scatter(torch.ones(n, 4, dtype=torch.float32))
    assert isinstance(rs, torch.Tensor) and torch.equal(rs, torch.full((4,), float(n)))
    w = comm.all_reduce(torch.ones(8, dtype=torch.int64), async_op=True)
    assert torch.equal(w.wait(), torch.full((8,), n, dtype=torch.int64))
    m = torch.zeros(4, 4)
    expect_raises(ValueError, ["'array'", "C-contiguous"], lambda: comm.all_reduce(m.t()))
    expect_raises(TypeError, ["'array'", "int16"],
                  lambda: comm.all_reduce(torch.ones(3, dtype=torch.int16)))
    # as with torch.distributed, a tensor that requires grad is reduced in place (no autograd)
    gr = torch.ones(3, requires_grad=True)
    comm.all_reduce(gr)
    assert torch.equal(gr.detach(), torch.full((3,), float(n)))
    c = comm.algorithm_for("all_reduce", 64, torch.bfloat16)
    assert c.algorithm in tutti.Communicator.algorithms("all_reduce")


def gil_released(comm):
    """A blocking call lets other Python threads run: rank 0 waits in all_reduce for rank 1,
    which arrives 0.3 s late, while a thread of rank 0 counts."""
    import threading

    count, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1
            time.sleep(0.001)

    t = threading.Thread(target=spin)
    if comm.rank == 0:
        t.start()
    else:
        time.sleep(0.3)
    x = np.ones(4, dtype=np.float32)
    comm.all_reduce(x)
    if comm.rank == 0:
        stop.set()
        t.join()
        assert count[0] > 20, f"the thread ran only {count[0]} times in 0.3 s"


SCENARIOS = [all_reduce_dtypes_ops, all_reduce_large_and_empty, all_reduce_out_of_place,
             all_gather_, reduce_scatter_, broadcast_, reduce_, all_to_all_, gather_scatter,
             send_recv_, barrier_, async_ops, fused, split_, stats, algorithm_for, bad_input,
             other_buffers, gil_released]


def run_checks(comm, results):
    for fn in SCENARIOS:
        try:
            fn(comm)
            results[fn.__name__] = "ok"
        except Exception:  # record and go on: a failed check does not desync the ranks' calls
            results[fn.__name__] = traceback.format_exc()
        comm.barrier()


def main():
    job, out_path = sys.argv[1], sys.argv[2]
    results = {}

    def write():
        with open(out_path + ".tmp", "w") as f:
            json.dump(results, f)
        os.replace(out_path + ".tmp", out_path)

    if job == "from_env":
        comm = tutti.init()
        results["rank"], results["size"] = comm.rank, comm.size
        x = np.array([comm.rank], dtype=np.int64)
        comm.all_reduce(x)
        results["sum"] = int(x[0])
        results["transport"] = comm.transport_to((comm.rank + 1) % comm.size)
        # split with TUTTI_COMM_ID set (as under tutti-run): each sub-group's root must take
        # its own port, not the parent's address
        sub = comm.split(comm.rank % 2)
        y = sub.all_gather(np.array([comm.rank], dtype=np.int64))
        results["sub_members"] = y.ravel().tolist()
        write()
        return 0

    rank, size = int(os.environ["TUTTI_TEST_RANK"]), int(os.environ["TUTTI_TEST_SIZE"])
    uid = tutti.UniqueId.from_bytes(bytes.fromhex(os.environ["TUTTI_TEST_UID"]))
    kwargs = {"timeout": 1.0} if job == "timeout" else {}
    comm = tutti.Communicator(uid, rank, size, **kwargs)

    if job == "checks":
        run_checks(comm, results)
    elif job == "torch":
        try:
            torch_tensors(comm)
            results["torch_tensors"] = "ok"
        except Exception:
            results["torch_tensors"] = traceback.format_exc()
    elif job in ("dead_peer", "timeout"):
        x = np.ones(1 << 16, dtype=np.float32)
        comm.all_reduce(x)
        victim = size - 1
        if rank == victim:
            write()
            if job == "dead_peer":
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(4)  # "timeout": alive but silent, then gone
            os._exit(0)
        t0 = time.monotonic()
        try:
            for _ in range(100000):
                comm.all_reduce(x)
            results["error"] = None
        except tutti.Error as e:
            results["error"] = type(e).__name__
            results["message"] = str(e)
            results["is_builtin_timeout"] = isinstance(e, TimeoutError)
        results["seconds"] = time.monotonic() - t0
        # the communicator stays failed: the next call raises the same kind at once
        try:
            comm.all_reduce(x)
            results["again"] = None
        except tutti.Error as e:
            results["again"] = type(e).__name__
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
