#!/usr/bin/env bash
# Installs tutti's build dependencies from Debian packages, only those that are missing.
# Usage: tools/install_deps.sh [extra-package ...]   (needs root or sudo; bookworm)
set -euo pipefail

packages=(build-essential cmake pkg-config libspdlog-dev libfmt-dev libhwloc-dev catch2
          libcli11-dev libhwy-dev nlohmann-json3-dev libibverbs-dev
          libopenmpi-dev openmpi-bin   # mpirun tests
          clang-14 libclang-rt-14-dev  # tests/fuzz (libFuzzer)
          gnuplot-nox                  # bench/compare_peers.sh plots
          iproute2 iptables            # tests/hosts: emulated hosts (namespaces, tc, loss)
          python3-dev python3-venv     # the Python module (tools/python_env.sh makes its venv)
          "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "tutti: build dependencies already installed"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "tutti: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
