#!/usr/bin/env bash
# Makes (or reuses) the virtual environment that the Python module is built and tested with:
# $TUTTI_VENV, default ${TUTTI_BUILD_DIR:-build}/.venv, holding nanobind, scikit-build-core,
# numpy and pytest from pip. A venv because Debian's pip refuses to install into the system
# Python (PEP 668), and it keeps the build reproducible from a fresh clone without root.
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
echo "-DTUTTI_BUILD_PYTHON=ON -DPython_EXECUTABLE=$(cd "$venv/bin" && pwd)/python"
