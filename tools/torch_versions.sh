#!/usr/bin/env bash
# Builds tutti's torch backend against other torch releases and runs its tests with each, with
# tutti's libnccl.so.2 as the NCCL that torch loads.
#
#   tools/torch_versions.sh 2.12.1 2.15.0      (default: 2.15.0)
#
# Needs the main build first (tools/build.sh: build/lib/libnccl.so.2). Per version V it makes
# build/torch-V/.venv (torch V as a CPU install: the wheel without its CUDA dependencies, plus the
# three nvidia packages it cannot import without, at the versions V pins; about 1 GB and a
# minute), configures build/torch-V against that Python, builds the module, the backend and
# libnccl.so.2 there, and runs tests/python/test_torch_backend.py and test_torch_tensors.py.
# torch 2.12 and later import only with an NCCL of their own ABI (2.29+): tutti's libnccl.so.2
# is put first on LD_LIBRARY_PATH, for the configure step too, so NVIDIA's nvidia-nccl-cu13 is
# never installed. Prints one line per version, "torch V: passed" or what failed; exit status 0
# when every version passed. CI runs torch 2.11.0 only (tools/python_env.sh): this script is how
# the other releases are checked.
set -uo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
[[ -e build/lib/libnccl.so.2 ]] || { echo "torch_versions.sh: build/lib/libnccl.so.2 missing: run tools/build.sh first" >&2; exit 2; }
versions=("$@")
[[ ${#versions[@]} -gt 0 ]] || versions=(2.15.0)
python="${TUTTI_PYTHON:-python3}"
jobs="${TUTTI_JOBS:-$(nproc)}"
failed=0
summary=()

one() {
  local v=$1 dir="build/torch-$1"
  local venv="$dir/.venv" wheels="$dir/wheels"
  mkdir -p "$dir" "$wheels"
  if ! LD_LIBRARY_PATH="$top/build/lib" "$venv/bin/python" -c \
       "import torch; assert torch.__version__.startswith('$v')" 2>/dev/null; then
    "$python" -m venv "$venv" || return 1
    "$venv/bin/pip" install -q --disable-pip-version-check "nanobind>=2.0" "scikit-build-core>=0.10" \
      numpy pytest typing-extensions filelock sympy networkx jinja2 fsspec || return 1
    "$venv/bin/pip" download -q --disable-pip-version-check --no-deps "torch==$v" -d "$wheels" || return 1
    local wheel
    wheel=$(ls "$wheels"/torch-"$v"*.whl | head -1)
    # The nvidia packages torch cannot import without, at the versions this torch pins.
    local pins
    pins=$(unzip -p "$wheel" "torch-$v*.dist-info/METADATA" |
      sed -n 's/^Requires-Dist: \(nvidia-\(cufile\|cusparselt\|nvshmem\)[^;]*\).*/\1/p' | tr -d ' ')
    [[ $pins == *nvidia-cufile* ]] || pins+=" nvidia-cufile"  # not always pinned, always loaded
    # shellcheck disable=SC2086
    "$venv/bin/pip" install -q --disable-pip-version-check --no-deps "$wheel" $pins || return 1
  fi
  export LD_LIBRARY_PATH="$top/build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTUTTI_BUILD_PYTHON=ON \
    -DPython_EXECUTABLE="$top/$venv/bin/python" -DTUTTI_BUILD_TORCH=ON -DTUTTI_BUILD_TESTS=OFF >/dev/null || return 1
  cmake --build "$dir" -j "$jobs" --target _tutti _torch_backend nccl >/dev/null || return 1
  LD_LIBRARY_PATH="$top/$dir/lib" PYTHONPATH="$top/$dir/python" TUTTI_TEST_REQUIRE_TORCH=1 \
    TUTTI_TEST_REQUIRE_MODULE=1 PYTHONDONTWRITEBYTECODE=1 \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider -rs \
    tests/python/test_torch_backend.py tests/python/test_torch_tensors.py
}

for v in "${versions[@]}"; do
  log="build/torch-$v.log"
  mkdir -p build
  echo "torch $v: installing, building and testing (log: $log)"
  if (one "$v") >"$log" 2>&1; then
    summary+=("torch $v: passed ($(grep -E '[0-9]+ passed' "$log" | tail -1))")
  else
    summary+=("torch $v: FAILED (last lines of $log below)")
    summary+=("$(tail -15 "$log")")
    failed=1
  fi
done
printf '%s\n' "${summary[@]}"
exit "$failed"
