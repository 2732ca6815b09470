"""Process helpers shared by the Python tests: free ports, and reaping the ranks of a job."""

import os
import signal
import socket
import subprocess
import time


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_all(procs, logs, timeout, label="rank"):
    """Waits for `procs` (started with start_new_session=True) at most `timeout` seconds in all,
    kills whatever is left with its whole process group, and closes `logs` (files opened "w+").
    Returns (returncodes, the logs' text, one section per process)."""
    deadline = time.monotonic() + timeout
    try:
        for p in procs:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pass
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    text = []
    for r, log in enumerate(logs):
        log.seek(0)
        text.append(f"--- {label} {r} (exit {procs[r].returncode}) ---\n{log.read()}")
        log.close()
    return [p.returncode for p in procs], "\n".join(text)
