#!/usr/bin/env bash
# Installs what gemmtune needs to build, from Debian's packages; does nothing when all is there.
# The CUDA toolkit (nvcc, NVRTC, headers) must already be installed (default /usr/local/cuda).
set -euo pipefail

packages=(cmake ninja-build g++ nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev
          libsqlite3-dev libgtest-dev clang-format
          # the Python package's tests; the report's plots (inlined into the page); the browser
          # that renders the report in its test
          python3-pytest libjs-chart.js chromium
          # pip install . (setup.py; tools/pip-check.sh): a venv with Debian's setuptools and wheel;
          # Python's headers for gemmtune_native, the planned calls' compiled call
          python3-venv python3-setuptools python3-wheel python3-pip python3-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cuda_home="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -x "$cuda_home/bin/nvcc" ] && ! command -v nvcc >/dev/null; then
  echo "setup: error: no CUDA toolkit found (looked in $cuda_home and on the PATH); install CUDA 12 or 13" >&2
  exit 1
fi
