"""Exceptions raised for a failed tutti call.

Every tutti Status that is not ok becomes an instance of one of these classes; its message is the
C++ message unchanged (it names this rank, the collective and, for a remote failure, the peer).
Argument checks done in Python-facing code raise the built-in TypeError / ValueError directly.
"""

from __future__ import annotations

import builtins


class Error(RuntimeError):
    """A tutti call failed. ``code`` is the tutti/NCCL result name ("RemoteError", ...)."""

    code: str = "Error"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class InvalidArgumentError(Error, ValueError):
    """tutti rejected an argument the Python layer could not check (e.g. overlapping buffers)."""

    code = "InvalidArgument"


class InvalidUsageError(Error):
    """A call that is wrong in this state: a closed or aborted communicator, or ranks whose
    calls do not match (TUTTI_CHECK_CALLS=1)."""

    code = "InvalidUsage"


class RemoteError(Error):
    """A peer died or closed its connection. The message names the peer rank and the collective.
    The communicator stays failed: every later call raises again."""

    code = "RemoteError"


class TimeoutError(Error, builtins.TimeoutError):  # noqa: A001 - deliberately tutti.TimeoutError
    """A wait ran past its timeout (the communicator's ``timeout`` or the bootstrap timeout).
    The message names the collective and the peers waited for. The communicator stays failed."""

    code = "Timeout"


_BY_CODE = {4: InvalidArgumentError, 5: InvalidUsageError, 6: RemoteError, 8: TimeoutError}


def _make(code: int, name: str, message: str) -> Error:
    """The exception for a tutti Status (called by the extension)."""
    return _BY_CODE.get(code, Error)(message, name)
