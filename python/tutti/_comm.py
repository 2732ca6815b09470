"""The Communicator: tutti's collectives on host arrays, from Python.

Arrays are any C-contiguous host array: a NumPy array, a torch CPU tensor, or any object with
``__dlpack__`` or the buffer protocol. Nothing is copied or converted on the way in: a
non-contiguous array raises ValueError, a dtype tutti lacks raises TypeError.

Shapes: a leading axis of length ``size`` indexes ranks. ``all_gather(x)`` returns
``(size, *x.shape)`` with row r from rank r; ``reduce_scatter(x)`` takes ``(size, *s)`` and
returns ``s`` (this rank's row, reduced over ranks); likewise gather / scatter / all_to_all. With
``out=``, only the element counts and dtypes must match (an output of any C-contiguous shape).
Element counts are elements, never bytes.
"""

from __future__ import annotations

import enum
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple, Union

from . import _tutti
from ._tutti import UniqueId, Work

#: A C-contiguous host array: numpy.ndarray, torch.Tensor on the CPU, or any object with
#: ``__dlpack__`` or the buffer protocol, of a dtype tutti has (int8, uint8, int32, uint32,
#: int64, uint64, float16, float32, float64, bfloat16, float8_e4m3fn, float8_e5m2).
Array = Any


class ReduceOp(enum.IntEnum):
    """Reductions (values as NCCL's ncclRedOp_t). AVG is the sum divided by the number of ranks;
    integer types truncate toward zero. tutti has no bitwise reductions yet."""

    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4


Op = Union[ReduceOp, str, int]

_OP_NAMES = {"sum": 0, "prod": 1, "product": 1, "max": 2, "min": 3, "avg": 4, "mean": 4}
_BITWISE = {"band", "bor", "bxor", "land", "lor", "lxor"}

# tutti's collective names (Communicator.stats) -> this module's method names.
_PY_COLL = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "alltoall": "all_to_all",
    "gather": "gather",
    "scatter": "scatter",
    "sendrecv": "send_recv",
    "barrier": "barrier",
}


class AlgorithmChoice(NamedTuple):
    """What the selector picks for a call shape (Communicator.algorithm_for)."""

    algorithm: str  #: the algorithm's name ("ring", "one_shot", ...)
    predicted_us: float  #: the simulator's predicted time in microseconds; -1 if unknown
    reason: str  #: why it won ("model", "forced by setAlgorithm ...", an override)


def _op(op: Op) -> int:
    if isinstance(op, bool):
        raise TypeError(f"'op' must be a tutti.ReduceOp or a name such as 'sum', got {op!r}")
    if isinstance(op, int):  # ReduceOp included; the extension checks the range
        return int(op)
    name = op if isinstance(op, str) else getattr(op, "name", None)
    if not isinstance(name, str):
        raise TypeError(
            f"'op' must be a tutti.ReduceOp or a name such as 'sum', got {type(op).__name__}")
    key = name.lower().rsplit(".", 1)[-1]
    if key in _OP_NAMES:
        return _OP_NAMES[key]
    if key in _BITWISE:
        raise ValueError(f"'op' is {name!r}: tutti has no bitwise reductions yet "
                         "(it has sum, prod, max, min, avg)")
    raise ValueError(f"'op' is {name!r}, not a reduction (sum, prod, max, min, avg)")


def _ms(seconds: Optional[float], arg: str) -> int:
    if seconds is None:
        return 0
    if seconds <= 0:
        raise ValueError(f"'{arg}' is {seconds}: must be > 0 seconds (None for the default)")
    return max(1, int(round(seconds * 1000)))


def _shape_dtype(like: Array) -> Tuple[Tuple[int, ...], Any]:
    shape = getattr(like, "shape", None)
    dtype = getattr(like, "dtype", None)
    if shape is not None and dtype is not None:
        return tuple(shape), dtype
    import numpy as np  # a bare buffer-protocol object (memoryview, array.array, bytearray)

    a = np.asarray(like)
    return a.shape, a.dtype


def _empty(like: Array, shape: Tuple[int, ...]) -> Array:
    """An uninitialised array of `shape` with like's dtype, of like's kind (torch stays torch)."""
    new_empty = getattr(like, "new_empty", None)
    if callable(new_empty):  # torch.Tensor
        return new_empty(shape)
    import numpy as np

    return np.empty(shape, dtype=_shape_dtype(like)[1])


def _dtype_name(dtype: Any) -> str:
    if isinstance(dtype, str):
        return dtype
    text = str(dtype)
    if text.startswith("torch."):
        return text
    import numpy as np

    try:
        return np.dtype(dtype).name
    except TypeError:
        raise TypeError(f"'dtype' must be a dtype or its name, got {dtype!r}") from None


class Communicator:
    """A group of ``size`` ranks, usually one per process, running collectives on host memory.

    Create one per process either from the launcher's environment (:meth:`from_env`, or
    :func:`tutti.init`) or from a :class:`UniqueId` made by one process and shared with the
    others (``Communicator(uid, rank, size)``). Creation blocks until every rank has joined.

    Every collective must be called by every rank of the communicator, in the same order, with
    matching counts and dtypes. Calls block until this rank's part is done, with the GIL
    released; ``async_op=True`` queues the call instead and returns a :class:`Work` (buffers must
    then stay untouched until it completes). Calls from several threads are serialised.

    Errors: TypeError (not an array, unsupported dtype, device memory), ValueError (not
    C-contiguous, read-only output, wrong element count, root/peer/op out of range), each naming
    the argument and its value, raised before anything runs; :class:`tutti.RemoteError` (a peer
    died: the message names it and the collective), :class:`tutti.TimeoutError`, and after either
    the same error again from every call (the communicator stays failed).
    """

    _c: Any

    def __init__(self, uid: Union[UniqueId, bytes], rank: int, size: int, *,
                 timeout: Optional[float] = None, bootstrap_timeout: Optional[float] = None,
                 transports: str = "", check_calls: Optional[bool] = None) -> None:
        """Joins the rendezvous of ``uid`` as ``rank`` of ``size`` (blocks until all joined).

        Args:
            uid: the UniqueId (or its 128 bytes) that one process created.
            rank: this process's rank, in [0, size).
            size: number of ranks.
            timeout: collective timeout in seconds; a call waiting longer raises
                tutti.TimeoutError. None: TUTTI_TIMEOUT (default: none; dead peers are still
                detected).
            bootstrap_timeout: seconds to wait for all ranks to join (None: TUTTI_BOOTSTRAP_TIMEOUT,
                default 120).
            transports: allowed transports, e.g. "shm,tcp" ("" = TUTTI_TRANSPORTS or all).
            check_calls: check that all ranks call the same collective with the same counts
                (None: TUTTI_CHECK_CALLS).

        Raises:
            tutti.InvalidArgumentError (a ValueError): rank outside [0, size) or size < 1.
            tutti.TimeoutError: not every rank joined in time (the message names the missing).
        """
        if isinstance(uid, (bytes, bytearray)):
            uid = UniqueId.from_bytes(bytes(uid))
        self._c = _tutti._Comm.create(uid, rank, size, _ms(timeout, "timeout"),
                                      _ms(bootstrap_timeout, "bootstrap_timeout"), transports,
                                      -1 if check_calls is None else int(check_calls))

    @classmethod
    def from_env(cls, *, timeout: Optional[float] = None,
                 bootstrap_timeout: Optional[float] = None, transports: str = "",
                 check_calls: Optional[bool] = None) -> "Communicator":
        """Creates the communicator of the job this process was launched in.

        Reads rank and size from, in this order: tutti-run (TUTTI_RANK/TUTTI_NRANKS), torchrun
        (RANK/WORLD_SIZE), Open MPI (OMPI_COMM_WORLD_RANK/SIZE), PMI (PMI_RANK/PMI_SIZE), Slurm
        (SLURM_PROCID/SLURM_NTASKS); the rendezvous address from TUTTI_COMM_ID or NCCL_COMM_ID,
        else MASTER_ADDR (port MASTER_PORT+1), else from the launcher's job (rank 0 hosts it).
        Keyword arguments as for the constructor.

        Raises:
            tutti.InvalidUsageError: no launcher variables found (the message lists them).
        """
        self = cls.__new__(cls)
        self._c = _tutti._Comm.from_env(_ms(timeout, "timeout"),
                                        _ms(bootstrap_timeout, "bootstrap_timeout"), transports,
                                        -1 if check_calls is None else int(check_calls))
        return self

    # ---- properties and lifetime ----

    @property
    def rank(self) -> int:
        """This process's rank, in [0, size); -1 once closed."""
        return self._c.rank

    @property
    def size(self) -> int:
        """Number of ranks; 0 once closed."""
        return self._c.size

    def transport_to(self, peer: int) -> str:
        """The transport that reaches ``peer`` ("self", "shm", "tcp"); "" for a bad peer."""
        return self._c.transport_to(peer)

    def close(self) -> None:
        """Releases the communicator now (queued asynchronous calls finish first). Later calls
        raise tutti.InvalidUsageError. Not collective: peers are not told."""
        self._c.close()

    def abort(self) -> None:
        """Makes every pending and later call fail (tutti.InvalidUsageError "aborted") within
        about 1 s. Safe from any thread, also while another thread is inside a call."""
        self._c.abort()

    def async_error(self) -> Optional[BaseException]:
        """The first asynchronous error seen (a tutti.Error), or None."""
        return self._c.async_error()

    def __enter__(self) -> "Communicator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"tutti.Communicator(rank={self.rank}, size={self.size})"

    # ---- collectives ----

    def all_reduce(self, array: Array, op: Op = ReduceOp.SUM, *, out: Optional[Array] = None,
                   async_op: bool = False) -> Union[Array, Work]:
        """Reduces ``array`` elementwise over all ranks.

        In place by default: the result overwrites ``array`` (as torch.distributed does), or goes
        to ``out`` (same element count and dtype; any shape). Returns the output array, or a
        Work whose wait() returns it.
        """
        target = array if out is None else out
        work = self._c.all_reduce(array, target, _op(op), async_op)
        return work if async_op else target

    def all_gather(self, array: Array, *, out: Optional[Array] = None,
                   async_op: bool = False) -> Union[Array, Work]:
        """Gathers every rank's ``array`` onto every rank.

        Returns a new array of shape ``(size, *array.shape)`` whose row r is rank r's array, or
        fills ``out`` (``size * array.size`` elements, same dtype). ``array`` may be row ``rank``
        of ``out`` (in place).
        """
        if out is None:
            shape, _ = _shape_dtype(array)
            out = _empty(array, (self.size, *shape))
        work = self._c.all_gather(array, out, async_op)
        return work if async_op else out

    def reduce_scatter(self, array: Array, op: Op = ReduceOp.SUM, *, out: Optional[Array] = None,
                       async_op: bool = False) -> Union[Array, Work]:
        """Reduces ``array`` over all ranks and leaves block ``rank`` of the result here.

        ``array`` has shape ``(size, *s)``; returns a new array of shape ``s`` (row ``rank`` of
        the elementwise reduction), or fills ``out`` (``array.size / size`` elements).
        """
        if out is None:
            shape, _ = _shape_dtype(array)
            if len(shape) == 0 or shape[0] != self.size:
                raise ValueError(
                    f"reduce_scatter: 'array' has shape {shape}; without 'out' its first "
                    f"dimension must be size ({self.size}), or pass out= with "
                    f"array.size / size elements")
            out = _empty(array, shape[1:])
        work = self._c.reduce_scatter(array, out, _op(op), async_op)
        return work if async_op else out

    def broadcast(self, array: Optional[Array], root: int = 0, *, out: Optional[Array] = None,
                  async_op: bool = False) -> Union[Array, Work]:
        """Copies the root's ``array`` to every rank.

        In place by default: every rank's ``array`` receives the root's (same element count and
        dtype everywhere). With ``out``, the root sends ``array`` and every rank receives into
        ``out``; other ranks' ``array`` is then unused and may be None.
        """
        target = array if out is None else out
        work = self._c.broadcast(array, target, root, async_op)
        return work if async_op else target

    def reduce(self, array: Array, op: Op = ReduceOp.SUM, root: int = 0, *,
               out: Optional[Array] = None, async_op: bool = False
               ) -> Union[Optional[Array], Work]:
        """Reduces ``array`` elementwise over all ranks onto ``root``.

        On the root the result overwrites ``array`` (or goes to ``out``) and is returned; other
        ranks' arrays are only read, and they get None (a Work whose wait() returns None).
        """
        target = (array if out is None else out) if self.rank == root else None
        work = self._c.reduce(array, target, _op(op), root, async_op)
        return work if async_op else target

    def all_to_all(self, array: Array, *, out: Optional[Array] = None,
                   async_op: bool = False) -> Union[Array, Work]:
        """Block j of ``array`` goes to rank j; block i of the result came from rank i.

        ``array`` holds ``size`` equal blocks (e.g. shape ``(size, *s)``, or any shape whose
        element count is a multiple of size). Returns a new array of array's shape, or fills
        ``out`` (same element count and dtype).
        """
        if out is None:
            shape, _ = _shape_dtype(array)
            out = _empty(array, shape)
        work = self._c.all_to_all(array, out, async_op)
        return work if async_op else out

    def gather(self, array: Array, root: int = 0, *, out: Optional[Array] = None,
               async_op: bool = False) -> Union[Optional[Array], Work]:
        """Gathers every rank's ``array`` onto ``root``.

        The root gets a new array of shape ``(size, *array.shape)`` (row r from rank r), or fills
        ``out`` (``size * array.size`` elements); other ranks get None.
        """
        if self.rank == root and out is None:
            shape, _ = _shape_dtype(array)
            out = _empty(array, (self.size, *shape))
        target = out if self.rank == root else None
        work = self._c.gather(array, target, root, async_op)
        return work if async_op else target

    def scatter(self, array: Optional[Array], root: int = 0, *, out: Optional[Array] = None,
                async_op: bool = False) -> Union[Array, Work]:
        """Sends block r of the root's ``array`` to rank r.

        On the root ``array`` has shape ``(size, *s)`` (or ``size * out.size`` elements); other
        ranks pass None (or anything: it is unused) and must pass ``out``, since only the root
        knows the shape. Returns ``out``, or on the root without ``out`` a new array of shape s.
        """
        if out is None:
            if self.rank != root:
                raise ValueError(
                    f"scatter: 'out' is None on rank {self.rank}; ranks other than the root "
                    f"({root}) must pass out= (only the root knows the shape)")
            shape, _ = _shape_dtype(array)
            if len(shape) == 0 or shape[0] != self.size:
                raise ValueError(
                    f"scatter: 'array' has shape {shape}; without 'out' its first dimension "
                    f"must be size ({self.size}), or pass out= with array.size / size elements")
            out = _empty(array, shape[1:])
        work = self._c.scatter(array if self.rank == root else None, out, root, async_op)
        return work if async_op else out

    def send(self, array: Array, peer: int) -> None:
        """Sends ``array`` to ``peer``, matched in call order with peer's recv from this rank.
        Blocking only (the C++ API has no asynchronous send yet)."""
        self._c.send(array, peer)

    def recv(self, out: Array, peer: int) -> Array:
        """Receives into ``out`` (same element count and dtype as peer's send) from ``peer``, and
        returns it. Blocking only."""
        self._c.recv(out, peer)
        return out

    def recv_any(self, out: Array, peers: Optional[Sequence[int]] = None) -> int:
        """Receives into ``out`` the first message to arrive from any rank of ``peers`` (default:
        every other rank) and returns the sender's rank (MPI_ANY_SOURCE). Each sender uses
        ``send`` with the same element count and dtype; one sender's messages arrive in order.
        Blocking. The receive tells a sender by the bytes waiting from it, whatever call sent
        them, so use it on a communicator that carries only sends and receives (for example a
        ``split(0)`` of this one kept for them): a peer already inside a later collective on the
        same communicator would be taken for a sender. ValueError for an empty ``peers``, a peer
        out of range or equal to this rank, or an ``out`` of 0 bytes (nothing arrives that could
        name the sender), nothing received; tutti.RemoteError naming a dead sender,
        tutti.TimeoutError past the communicator's timeout."""
        if peers is None:
            peers = [q for q in range(self.size) if q != self.rank]
        return self._c.recv_any(out, [int(q) for q in peers])

    def send_recv(self, array: Array, send_peer: int, out: Array, recv_peer: int) -> Array:
        """Sends ``array`` to ``send_peer`` while receiving ``out`` (same count and dtype) from
        ``recv_peer``, concurrently: a ring exchange cannot deadlock. Either peer may be this
        rank. Returns ``out``."""
        self._c.send_recv(array, send_peer, out, recv_peer)
        return out

    def send_recv_group(self, sends: Sequence[Tuple[Array, int]],
                        recvs: Sequence[Tuple[Array, int]]) -> List[Array]:
        """Sends each ``(array, peer)`` of ``sends`` and receives each ``(out, peer)`` of
        ``recvs``, all posted at once as one group (C++ ``Communicator::sendRecvGroup``, an NCCL
        group of sends and receives), so that ranks that each send before they receive do not
        wait for each other. Messages between two ranks match in list order, sends of this rank
        before its receives; each receive's ``out`` must be as large as the matching send. A
        message to this rank itself needs a receive of the same size from itself. Blocking;
        returns the ``out`` arrays. ValueError naming ``sends[i]``/``recvs[i]`` for a peer out
        of range, TypeError for an entry that is not an (array, peer) pair or an array tutti
        cannot use; nothing is sent then."""
        sends, recvs = list(sends), list(recvs)
        self._c.send_recv_group(sends, recvs)
        return [out for out, _ in recvs]

    def barrier(self, *, async_op: bool = False) -> Optional[Work]:
        """Returns when every rank has entered the barrier (or a Work that completes then)."""
        return self._c.barrier(async_op)

    def fused_all_reduce(self, arrays: Sequence[Array], op: Op = ReduceOp.SUM, *,
                         async_op: bool = False) -> Union[List[Array], Work]:
        """All-reduces each array of ``arrays`` in place; returns the list (or a Work for all).

        Results are bit-identical to separate all_reduce calls. Blocking, consecutive arrays of
        one dtype run as one batch (C++ ``Communicator::allReduceFused``): arrays of together
        at most TUTTI_FUSION_BYTES (default 64 KiB) are reduced by one plan, paying one call's
        latency. With ``async_op=True`` each array is one queued all_reduce (no fusion yet).
        Every array is checked before the first call runs; errors as all_reduce.
        """
        arrays = list(arrays)
        work = self._c.fused_all_reduce(arrays, _op(op), async_op)
        return work if async_op else arrays

    # ---- sub-groups ----

    def split(self, color: int, key: int = 0) -> Optional["Communicator"]:
        """Splits into sub-communicators, one per ``color``, ranked by ``(key, rank)``.

        Collective over this communicator (as MPI_Comm_split). A negative color takes part
        but gets None back (MPI_UNDEFINED). The new communicators inherit this one's options.
        In a multi-host job, set TUTTI_SOCKET_IFNAME so that sub-group roots bind a reachable
        interface (they bind loopback otherwise).
        """
        import numpy as np

        color, key = int(color), int(key)
        table = np.empty((self.size, 2), dtype=np.int64)
        self.all_gather(np.array([color, key], dtype=np.int64), out=table)
        members = sorted((int(k), r) for r, (c, k) in enumerate(table) if c == color and c >= 0)
        id_bytes = np.zeros(128, dtype=np.uint8)
        if color >= 0 and members[0][1] == self.rank:
            id_bytes[:] = np.frombuffer(bytes(_tutti._fresh_unique_id()), dtype=np.uint8)
        ids = np.empty((self.size, 128), dtype=np.uint8)
        self.all_gather(id_bytes, out=ids)
        if color < 0:
            return None
        ranks = [r for _, r in members]
        uid = UniqueId.from_bytes(ids[ranks[0]].tobytes())
        timeout_ms, boot_ms, transports, check_calls = self._c.options
        sub = Communicator.__new__(Communicator)
        sub._c = _tutti._Comm.create(uid, ranks.index(self.rank), len(ranks), timeout_ms,
                                     boot_ms, transports, check_calls)
        return sub

    # ---- introspection ----

    def get_stats(self) -> dict:
        """Statistics per collective since creation or reset_stats(), successful calls only.

        Returns ``{name: {"count", "total_bytes", "avg_latency_ms", "algorithm", "wire_bytes",
        "algorithms"}}`` keyed by method name ("all_reduce", "send_recv" for send/recv, ...).
        total_bytes: message sizes as nccl-tests counts them (count x dtype size, times size
        for all_gather, reduce_scatter, all_to_all, gather and scatter). avg_latency_ms: wall
        time per call on this rank. algorithm: the one that ran most often; "algorithms" has
        the same fields per algorithm.
        """
        result: dict = {}
        for coll, algo, calls, nbytes, wire, seconds in self._c.stats():
            entry = result.setdefault(_PY_COLL.get(coll, coll), {
                "count": 0, "total_bytes": 0, "wire_bytes": 0, "seconds": 0.0,
                "algorithms": {}})
            entry["count"] += calls
            entry["total_bytes"] += nbytes
            entry["wire_bytes"] += wire
            entry["seconds"] += seconds
            entry["algorithms"][algo] = {
                "count": calls, "total_bytes": nbytes, "wire_bytes": wire,
                "avg_latency_ms": seconds * 1e3 / calls if calls else 0.0}
        for entry in result.values():
            seconds = entry.pop("seconds")
            entry["avg_latency_ms"] = seconds * 1e3 / entry["count"] if entry["count"] else 0.0
            entry["algorithm"] = max(entry["algorithms"].items(),
                                     key=lambda kv: kv[1]["count"])[0]
        return result

    def reset_stats(self) -> None:
        """Zeroes the statistics of get_stats()."""
        self._c.reset_stats()

    def algorithm_for(self, coll: str, count: int, dtype: Any = "float32",
                      op: Op = ReduceOp.SUM, root: int = 0,
                      in_place: bool = False) -> AlgorithmChoice:
        """The algorithm the selector picks for a call shape, with its predicted time.

        Args:
            coll: "all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
                "all_to_all", "gather" or "scatter" (tutti's "allreduce" spellings work too).
            count: elements as the call takes them (per rank for all_gather's input and
                reduce_scatter's output, i.e. the C++ API's count); >= 1.
            dtype: a NumPy/torch dtype or its name.

        Local and cheap (decisions are cached); no communication.
        """
        name, us, reason = self._c.algorithm_for(coll, int(count), _dtype_name(dtype), _op(op),
                                                 root, bool(in_place))
        return AlgorithmChoice(name, us, reason)

    def set_algorithm(self, coll: str, name: str) -> None:
        """Forces an algorithm by name for a collective on this communicator ("" = automatic).
        tutti.InvalidArgumentError when no such algorithm exists."""
        self._c.set_algorithm(coll, name)

    @staticmethod
    def algorithms(coll: str) -> List[str]:
        """Names of the algorithms registered for a collective."""
        return _tutti._Comm.algorithms(coll)

    def write_hang_report(self) -> None:
        """Logs one line per pending operation (or that nothing is pending)."""
        self._c.write_hang_report()


def init(**kwargs: Any) -> Communicator:
    """The communicator of the launching job: ``Communicator.from_env(**kwargs)``."""
    return Communicator.from_env(**kwargs)
