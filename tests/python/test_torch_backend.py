"""The torch.distributed backend "tutti" (tutti.torch), against Gloo in the same processes.

Each job is a set of fresh processes (torch_worker.py, or torch_ddp.py under torchrun) in their
own process groups, killed whole when the job's time limit runs out. Skipped where torch or the
extension tutti._torch_backend is missing (tutti built without torch importable), except under
ctest's python.torch, which runs only where the backend was built.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from procs import free_port, wait_all

if os.environ.get("TUTTI_TEST_REQUIRE_TORCH") == "1":  # ctest python.torch: must be there
    import tutti.torch  # noqa: F401
else:
    pytest.importorskip("torch")
    try:
        import tutti.torch  # noqa: F401
    except ImportError as e:
        pytest.skip(f"tutti.torch unavailable: {e}", allow_module_level=True)

HERE = Path(__file__).parent
JOB_TIMEOUT_S = float(os.environ.get("TUTTI_TEST_JOB_TIMEOUT", "240"))


def _env():
    env = dict(os.environ, TUTTI_DEBUG=os.environ.get("TUTTI_DEBUG", "NONE"),
               OMP_NUM_THREADS="1")
    for k in ("TUTTI_RANK", "TUTTI_NRANKS", "TUTTI_COMM_ID", "NCCL_COMM_ID", "RANK",
              "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    return env


def run_workers(job, nranks, timeout=JOB_TIMEOUT_S):
    """torch_worker.py `job` on `nranks` processes: (per-rank results or None, codes, logs)."""
    tmp = Path(tempfile.mkdtemp(prefix="tutti-torch-"))
    base = _env()
    base.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(nranks))
    procs, logs = [], []
    for r in range(nranks):
        log = open(tmp / f"rank{r}.log", "w+")
        logs.append(log)
        procs.append(subprocess.Popen(
            [sys.executable, str(HERE / "torch_worker.py"), job, str(tmp / f"rank{r}.json")],
            env=dict(base, RANK=str(r), LOCAL_RANK=str(r)), stdin=subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    codes, text = wait_all(procs, logs, timeout)
    results = [json.loads((tmp / f"rank{r}.json").read_text())
               if (tmp / f"rank{r}.json").exists() else None for r in range(nranks)]
    return results, codes, text


@pytest.mark.parametrize("nranks", [2, 4])
def test_collectives_match_gloo(nranks):
    results, codes, logs = run_workers("collectives", nranks)
    assert codes == [0] * nranks, logs
    for r, res in enumerate(results):
        assert res is not None, logs
        assert res["failures"] == [], "\n".join(res["failures"])
        assert res["checked"]["vs_gloo"] >= 40 and res["checked"]["vs_reference"] >= 50, res


def test_bad_input_and_timeout():
    results, codes, logs = run_workers("errors", 2)
    assert codes == [0, 0], logs
    for res in results:
        assert res is not None and res["failures"] == [], (res or {}).get("failures", logs)
    assert results[0]["checked"]["timeout_s"] < 20


def test_killed_rank_names_the_peer():
    t0 = time.monotonic()
    results, codes, logs = run_workers("killed", 2, timeout=120)
    assert codes[1] == -signal.SIGKILL, logs
    assert codes[0] == 0, logs
    assert results[0] is not None and results[0]["failures"] == [], \
        (results[0] or {}).get("failures", logs)
    assert results[0]["checked"]["detect_s"] < 30
    assert time.monotonic() - t0 < 120


@pytest.mark.parametrize("nranks", [2, 4])
def test_ddp_matches_gloo(nranks):
    tmp = Path(tempfile.mkdtemp(prefix="tutti-ddp-"))
    log = open(tmp / "torchrun.log", "w+")
    out = tmp / "result.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node",
         str(nranks), "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
         str(HERE / "torch_ddp.py"), str(out)],
        env=_env(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True)
    codes, text = wait_all([proc], [log], JOB_TIMEOUT_S)
    assert codes == [0], text
    res = json.loads(out.read_text())
    assert res["size"] == nranks and res["moved"] > 1e-3, res  # it trained
    assert res["max_diff_across_ranks"] == 0.0, res
    if nranks == 2:  # a sum of two is the same in any order: bit for bit
        assert res["bitwise_equal"], res
    else:  # summation order differs from Gloo's
        assert res["max_diff_vs_gloo"] < 1e-5, res
