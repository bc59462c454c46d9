#!/usr/bin/env bash
# The Python package as pip installs it: `pip install .` into a fresh virtual environment, its
# CPU tests against that copy (from outside the source tree, no GEMMTUNE_LIBRARY or
# GEMMTUNE_BIN_DIR), the gemm-tune console script; then `pip wheel .`, its tag and contents, and
# the wheel installed into a second environment. GEMMTUNE_BUILD_DIR names a CMake build to reuse
# (CI: build/); without it setup.py builds in build-pip/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
unset GEMMTUNE_LIBRARY GEMMTUNE_BIN_DIR GEMMTUNE_WORKER PYTHONPATH
export GEMMTUNE_LOG_LEVEL=warn PYTHONDONTWRITEBYTECODE=1

# Debian's Python, not a pyenv one first on the PATH: its pytest, setuptools and wheel are seen.
/usr/bin/python3 -m venv --system-site-packages "$tmp/venv"
python="$tmp/venv/bin/python"
(cd "$root" && "$python" -m pip install -q --no-build-isolation --no-deps .)

cd "$tmp"  # away from python/gemmtune, which would shadow the installed copy
"$python" - "$tmp/venv" <<'PY'
import pathlib, sys
import gemmtune
package = pathlib.Path(gemmtune.__file__).resolve().parent
assert package.is_relative_to(pathlib.Path(sys.argv[1]).resolve()), package
library = gemmtune.library_path()
assert library == str(package / "lib" / "libgemmtune.so.0"), library
from gemmtune import _library
assert _library.matmul_function() is not _library.library().gemmtune_matmul, "no gemmtune_native"
print(f"pip-check: gemmtune from {package}")
PY
GEMMTUNE_TEST_INSTALLED=1 "$python" -m pytest -q -p no:cacheprovider -m "not gpu" "$root/python/tests"
GEMMTUNE_CACHE_DIR="$tmp/cache" "$tmp/venv/bin/gemm-tune" --dry-run --m 64 --n 64 --k 64 \
  --dtype bf16 --arch sm_90a --budget 1 >/dev/null  # the console script, one candidate compiled
"$tmp/venv/bin/gemm-db" --help >/dev/null

(cd "$root" && "$python" -m pip wheel -q --no-build-isolation --no-deps -w "$tmp/wheels" .)
wheel=("$tmp"/wheels/gemmtune-*.whl)
"$python" - "${wheel[@]}" <<'PY'
import sys, zipfile
(path,) = sys.argv[1:]
assert "-py3-none-linux_" in path, path  # one wheel for every Python 3
names = zipfile.ZipFile(path).namelist()
for name in ("lib/libgemmtune.so.0", "lib/gemmtune_native.abi3.so", "bin/gemm-tune",
             "bin/gemm-tune-worker", "bin/gemm-db"):
    assert "gemmtune/" + name in names, (name, names)
print(f"pip-check: {path.rsplit('/', 1)[1]}: {len(names)} files")
PY
/usr/bin/python3 -m venv --system-site-packages "$tmp/wheel-venv"
"$tmp/wheel-venv/bin/python" -m pip install -q --no-deps "${wheel[@]}"
"$tmp/wheel-venv/bin/python" -c \
  "import gemmtune; print('pip-check: the wheel loads', gemmtune.library_path())"
