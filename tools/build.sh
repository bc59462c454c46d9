#!/usr/bin/env bash
# Set-up and build in one step: dependencies (tools/setup.sh), configure, build into build/.
#   tools/build.sh            Release build in build/
#   BUILD_DIR=out tools/build.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"

"$root/tools/setup.sh"
cuda_home="${CUDA_HOME:-/usr/local/cuda}"
export PATH="$cuda_home/bin:$PATH"
if [ ! -f "$build/CMakeCache.txt" ]; then
  launcher=()
  # ccache, when installed, makes rebuilds in several checkouts cheap; it is optional.
  if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUDAToolkit_ROOT="$cuda_home" "${launcher[@]}"
fi
cmake --build "$build" -j "$(nproc)"
