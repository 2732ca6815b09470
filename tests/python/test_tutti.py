"""The tutti module on NumPy arrays across 2-4 real processes (see rank_worker.py for the checks)
and in this process (single-rank and argument checks that need no peers)."""

import os

import numpy as np
import pytest

# Skip only when the module was not built; ctest (TUTTI_TEST_REQUIRE_MODULE=1) runs these only
# where it was, so there an import failure fails.
if os.environ.get("TUTTI_TEST_REQUIRE_MODULE") == "1":
    import tutti
else:
    tutti = pytest.importorskip("tutti")

from conftest import run_job  # noqa: E402
from rank_worker import SCENARIOS  # noqa: E402


@pytest.mark.parametrize("nranks", [2, 3, 4])
@pytest.mark.parametrize("scenario", [f.__name__ for f in SCENARIOS])
def test_collectives(checks_job, nranks, scenario):
    results, codes, logs = checks_job(nranks)
    assert codes == [0] * nranks, logs
    for r, res in enumerate(results):
        assert res is not None, logs
        assert res.get(scenario) == "ok", f"rank {r}/{nranks}:\n{res.get(scenario)}"


def test_from_env():
    results, codes, logs = run_job("from_env", 3, env_path=True)
    assert codes == [0, 0, 0], logs
    for r, res in enumerate(results):
        assert (res["rank"], res["size"], res["sum"]) == (r, 3, 0 + 1 + 2), res
        assert res["transport"] == "shm", res
        assert res["sub_members"] == [i for i in range(3) if i % 2 == r % 2], res


def test_dead_peer_raises_remote_error():
    """A rank killed with SIGKILL: every survivor's next call raises RemoteError in bounded
    time, a message names the dead rank and the collective, and later calls raise again."""
    results, codes, logs = run_job("dead_peer", 3, timeout=90)
    assert codes[2] == -9, logs
    assert codes[:2] == [0, 0], logs
    messages = []
    for r in (0, 1):
        res = results[r]
        assert res["error"] == "RemoteError", (r, res, logs)
        assert res["seconds"] < 30, res
        assert res["again"] == "RemoteError", res
        assert "allreduce" in res["message"].lower(), res
        messages.append(res["message"])
    assert any("rank 2" in m or "peer 2" in m or "peer=2" in m for m in messages), messages


def test_timeout_raises_timeout_error():
    """A rank that stays silent past the communicator's timeout (1 s): TimeoutError, also a
    builtins.TimeoutError, naming the collective."""
    results, codes, logs = run_job("timeout", 2, timeout=90)
    res = results[0]
    assert res is not None, logs
    assert res["error"] == "TimeoutError", (res, logs)
    assert res["is_builtin_timeout"], res
    assert 0.5 < res["seconds"] < 15, res
    assert "allreduce" in res["message"].lower() and "rank 1" in res["message"], res


def test_single_rank_in_process():
    """A one-rank communicator in this process: every collective is a copy."""
    uid = tutti.UniqueId()
    assert len(bytes(uid)) == 128
    assert tutti.UniqueId.from_bytes(bytes(uid)) == uid
    with tutti.Communicator(uid, 0, 1) as comm:
        assert (comm.rank, comm.size) == (0, 1)
        x = np.arange(5, dtype=np.float64)
        np.testing.assert_array_equal(comm.all_reduce(x), np.arange(5))
        np.testing.assert_array_equal(comm.all_gather(x), [np.arange(5)])
        np.testing.assert_array_equal(comm.reduce_scatter(x.reshape(1, 5)), np.arange(5))
        w = comm.all_reduce(x, async_op=True)
        assert w.wait() is x and w.is_completed()
    with pytest.raises(tutti.InvalidUsageError):
        comm.all_reduce(x)  # closed


def test_unique_id_errors():
    with pytest.raises(ValueError, match="data.*127.*128"):
        tutti.UniqueId.from_bytes(b"x" * 127)
    import pickle
    uid = tutti.UniqueId()
    assert pickle.loads(pickle.dumps(uid)) == uid
    assert uid != b"x" and uid != tutti.UniqueId()


def test_from_env_without_launcher_names_variables(monkeypatch):
    for k in list(os.environ):
        if k.startswith(("TUTTI_", "OMPI_", "PMI_", "SLURM_")) or k in ("RANK", "WORLD_SIZE"):
            monkeypatch.delenv(k)
    with pytest.raises(tutti.InvalidUsageError, match="TUTTI_RANK"):
        tutti.init()


def test_bad_rank_is_value_error():
    with pytest.raises(ValueError, match="rank"):
        tutti.Communicator(tutti.UniqueId(), 3, 2, bootstrap_timeout=5)
