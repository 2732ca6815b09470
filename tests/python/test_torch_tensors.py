"""torch CPU tensors given to the tutti module (through DLPack; torch is not needed to build or
import tutti). Skipped where torch is not installed."""

import os

import pytest

if os.environ.get("TUTTI_TEST_REQUIRE_MODULE") == "1":
    import tutti  # noqa: F401
else:
    pytest.importorskip("tutti")
pytest.importorskip("torch")

from conftest import run_job  # noqa: E402


@pytest.mark.parametrize("nranks", [2, 3])
def test_torch_cpu_tensors(nranks):
    results, codes, logs = run_job("torch", nranks)
    assert codes == [0] * nranks, logs
    for r, res in enumerate(results):
        assert res is not None and res.get("torch_tensors") == "ok", \
            f"rank {r}:\n{(res or {}).get('torch_tensors', logs)}"
