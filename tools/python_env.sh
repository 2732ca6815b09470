#!/usr/bin/env bash
# Makes (or reuses) the virtual environment that the Python module is built and tested with:
# $TUTTI_VENV, default ${TUTTI_BUILD_DIR:-build}/.venv, holding nanobind, scikit-build-core,
# numpy and pytest from pip. A venv because Debian's pip refuses to install into the system
# Python (PEP 668), and it keeps the build reproducible from a fresh clone without root.
# It also gets torch 2.11.0 (CPU use of the CUDA wheel; the last torch whose NCCL ABI, 2.28, is
# tutti's libnccl.so.2) and matplotlib, so that the torch backend tutti._torch_backend is built
# and its tests (ctest python.torch) and the plot of tutti.bench run: about 1 GB and a minute
# or two, once per venv. TUTTI_PYTHON_TORCH=0 skips them; a failed torch install only warns
# (the backend is then not built and its tests skip).
# Prints the CMake arguments that build the module with it on stdout:
#   -DTUTTI_BUILD_PYTHON=ON -DPython_EXECUTABLE=<venv>/bin/python
# or, when the venv cannot be made (no python3-venv, no network), -DTUTTI_BUILD_PYTHON=OFF and
# the reason on stderr, so the C++ build and tests still run (the python test then skips).
set -uo pipefail
cd "$(dirname "$0")/.."
venv="${TUTTI_VENV:-${TUTTI_BUILD_DIR:-build}/.venv}"
python="${TUTTI_PYTHON:-python3}"
packages=("nanobind>=2.0" "scikit-build-core>=0.10" numpy pytest)

fail() {
  echo "tutti: python module skipped: $*" >&2
  echo "-DTUTTI_BUILD_PYTHON=OFF"
  exit 0
}
ready() { "$venv/bin/python" -c "import nanobind, scikit_build_core, numpy, pytest" 2>/dev/null; }

if ! ready; then
  mkdir -p "$(dirname "$venv")"
  "$python" -m venv "$venv" >&2 || fail "'$python -m venv $venv' failed (apt-get install python3-venv)"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${packages[@]}" >&2 ||
    fail "pip install ${packages[*]} into $venv failed"
  ready || fail "$venv lacks nanobind, scikit-build-core, numpy or pytest"
  echo "tutti: python venv ready in $venv" >&2
fi
# torch's wheel depends on every nvidia-* CUDA package (~3 GB); importing it on a CPU needs only
# these three, so the rest is left out (--no-deps).
torch_pin=(torch==2.11.0 nvidia-cufile nvidia-cusparselt-cu13==0.8.0 nvidia-nvshmem-cu13==3.4.5)
torch_deps=(typing-extensions filelock sympy networkx jinja2 fsspec numpy matplotlib)
torch_ready() { "$venv/bin/python" -c "import torch, matplotlib; assert torch.__version__.startswith('2.11.0')" 2>/dev/null; }
if [[ "${TUTTI_PYTHON_TORCH:-1}" != 0 ]] && ! torch_ready; then
  start=$SECONDS
  if "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps "${torch_pin[@]}" >&2 &&
     "$venv/bin/python" -m pip install -q --disable-pip-version-check "${torch_deps[@]}" >&2 &&
     torch_ready; then
    echo "tutti: torch 2.11.0 and matplotlib installed in $venv ($((SECONDS - start)) s)" >&2
  else
    echo "tutti: warning: torch 2.11.0 could not be installed in $venv: the torch backend" \
      "is not built and its tests skip" >&2
  fi
fi
echo "-DTUTTI_BUILD_PYTHON=ON -DPython_EXECUTABLE=$(cd "$venv/bin" && pwd)/python"
