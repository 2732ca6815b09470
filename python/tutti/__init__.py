"""tutti: collective communication (all_reduce, all_gather, ...) across processes, from Python.

    import numpy as np, tutti
    comm = tutti.init()                  # under tutti-run, torchrun, mpirun or srun
    x = np.ones(1024, dtype=np.float32)
    comm.all_reduce(x)                   # in place: x == comm.size everywhere

or, without a launcher: one process makes ``uid = tutti.UniqueId()``, sends ``bytes(uid)`` to the
others (a file, a pipe, a key-value store), and each calls ``tutti.Communicator(uid, rank, size)``.

Host memory only for now (NumPy arrays, torch CPU tensors, any buffer-protocol or DLPack object).
See Communicator for the collectives, their shapes and their errors.
"""

from ._errors import (Error, InvalidArgumentError, InvalidUsageError, RemoteError,
                      TimeoutError)
from ._tutti import UniqueId, Work, version as _version
from ._comm import AlgorithmChoice, Communicator, ReduceOp, init

__version__ = _version()

# tutti.TimeoutError is left out so that `from tutti import *` does not shadow the built-in
# TimeoutError (of which it is a subclass).
__all__ = [
    "AlgorithmChoice", "Communicator", "Error", "InvalidArgumentError", "InvalidUsageError",
    "ReduceOp", "RemoteError", "UniqueId", "Work", "init",
]
