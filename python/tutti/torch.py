"""tutti as a torch.distributed backend: ``import tutti.torch`` registers the backend "tutti".

    import tutti.torch                      # registers "tutti" for CPU tensors
    import torch.distributed as dist
    dist.init_process_group("tutti")        # under torchrun (or any init_method torch accepts)
    model = torch.nn.parallel.DistributedDataParallel(model)

``new_group(ranks, backend="tutti")`` works too. Every collective, send/recv and barrier runs on
a tutti communicator per group, on CPU tensors; calls run asynchronously, in issue order, on a
thread of the backend. Errors: a dead peer or a timeout raises torch.distributed.DistBackendError
naming the collective and the peer; bad arguments raise ValueError or TypeError naming the
argument, before anything runs.

The extension ``tutti._torch_backend`` is compiled against one exact torch version (torch's C++
ABI is not stable): build tutti where that torch is installed (``pip install
--no-build-isolation .``, or the CMake build with a venv that has torch).
"""

import torch
import torch.distributed as _dist

from . import _tutti  # noqa: F401  (loads libtutti.so before the backend extension)

try:
    from . import _torch_backend
except ImportError as e:
    raise ImportError(
        "tutti.torch: the extension tutti._torch_backend is missing or does not load "
        f"({e}). It is built only where torch is importable at build time: "
        "`pip install --no-build-isolation .` in an environment that has torch, "
        "scikit-build-core and nanobind.") from e

if _torch_backend.torch_version != torch.__version__:
    raise ImportError(
        f"tutti.torch: tutti._torch_backend was built against torch "
        f"{_torch_backend.torch_version}, but torch {torch.__version__} is installed; rebuild "
        "tutti with this torch (`pip install --no-build-isolation .`).")

ProcessGroupTutti = _torch_backend.ProcessGroupTutti
BACKEND_NAME = "tutti"


def _create(store, rank, size, timeout):
    return ProcessGroupTutti(store, rank, size, timeout)


if BACKEND_NAME not in _dist.Backend.backend_list:
    _dist.Backend.register_backend(BACKEND_NAME, _create, devices=["cpu"])

__all__ = ["BACKEND_NAME", "ProcessGroupTutti"]
