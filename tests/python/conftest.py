"""Launches multi-process jobs of rank_worker.py for the tests.

Each rank is a fresh `python rank_worker.py` process in its own process group (so a hung job
is killed whole), joined through a tutti.UniqueId made here (its rendezvous root runs in this
pytest process) or through the launcher variables (TUTTI_RANK, ...) for the from_env job.
Every job has a wall-clock limit; on expiry all its processes are killed and the test fails
with their output.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from procs import free_port, wait_all

WORKER = Path(__file__).with_name("rank_worker.py")
JOB_TIMEOUT_S = float(os.environ.get("TUTTI_TEST_JOB_TIMEOUT", "240"))


def run_job(job, nranks, env_path=False, timeout=JOB_TIMEOUT_S):
    """Runs `job` on `nranks` processes; returns (per-rank results or None, returncodes, logs)."""
    tmp = Path(tempfile.mkdtemp(prefix="tutti-pytest-"))
    base = dict(os.environ, TUTTI_DEBUG=os.environ.get("TUTTI_DEBUG", "NONE"))
    for k in ("TUTTI_RANK", "TUTTI_NRANKS", "TUTTI_COMM_ID", "RANK", "WORLD_SIZE"):
        base.pop(k, None)
    if env_path:
        base.update(TUTTI_NRANKS=str(nranks), TUTTI_COMM_ID=f"127.0.0.1:{free_port()}",
                    TUTTI_LOCAL_SIZE=str(nranks))
    else:
        import tutti

        uid = tutti.UniqueId()
        base.update(TUTTI_TEST_UID=bytes(uid).hex(), TUTTI_TEST_SIZE=str(nranks))
    procs, logs = [], []
    for r in range(nranks):
        env = dict(base)
        env.update(TUTTI_RANK=str(r), TUTTI_LOCAL_RANK=str(r)) if env_path else \
            env.update(TUTTI_TEST_RANK=str(r))
        log = open(tmp / f"rank{r}.log", "w+")
        logs.append(log)
        procs.append(subprocess.Popen(
            [sys.executable, str(WORKER), job, str(tmp / f"rank{r}.json")], env=env,
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True))
    codes, text = wait_all(procs, logs, timeout)
    results = []
    for r in range(nranks):
        f = tmp / f"rank{r}.json"
        results.append(json.loads(f.read_text()) if f.exists() else None)
    return results, codes, text


@pytest.fixture(scope="session")
def checks_job():
    """The 'checks' job for 2, 3 and 4 ranks, each run once on first use."""
    cache = {}

    def get(nranks):
        if nranks not in cache:
            cache[nranks] = run_job("checks", nranks)
        return cache[nranks]

    return get
