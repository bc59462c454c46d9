"""Where the package finds libgemmtune and its programs: the environment's overrides, the source
tree's build, and (GEMMTUNE_TEST_INSTALLED=1) the copies a pip install puts inside it."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

import gemmtune
from conftest import INSTALLED, ROOT
from gemmtune._library import bin_dir, tool_path

PACKAGE = pathlib.Path(gemmtune.__file__).resolve().parent
TOOLS = ("gemm-tune", "gemm-tune-worker", "gemm-db")
installed_only = pytest.mark.skipif(not INSTALLED, reason="tests a pip install "
                                    "(GEMMTUNE_TEST_INSTALLED=1, tools/pip-check.sh)")


def test_gemmtune_bin_dir_wins(monkeypatch, tmp_path):
    monkeypatch.setenv("GEMMTUNE_BIN_DIR", str(tmp_path))
    assert bin_dir() == tmp_path
    with pytest.raises(gemmtune.Error, match="GEMMTUNE_BIN_DIR") as e:
        tool_path("gemm-tune")
    assert e.value.code == "tool_not_found"


def test_the_source_tree_uses_its_build(monkeypatch):
    if INSTALLED:
        pytest.skip("the installed package has its own bin/")
    monkeypatch.delenv("GEMMTUNE_BIN_DIR", raising=False)
    assert bin_dir() == ROOT / "build" / "bin"


@installed_only
def test_the_installed_package_holds_its_library_and_programs(monkeypatch):
    assert not PACKAGE.is_relative_to(ROOT / "python"), PACKAGE
    if "GEMMTUNE_LIBRARY" not in os.environ:
        assert gemmtune.library_path() == str(PACKAGE / "lib" / "libgemmtune.so.0")
    monkeypatch.delenv("GEMMTUNE_BIN_DIR", raising=False)
    assert bin_dir() == PACKAGE / "bin"
    for tool in TOOLS:  # gemm-tune finds gemm-tune-worker beside it, as libgemmtune does (../bin)
        assert os.access(tool_path(tool), os.X_OK), tool


@installed_only
def test_the_console_script_runs_the_packaged_gemm_tune(tmp_path):
    script = pathlib.Path(sys.executable).parent / "gemm-tune"
    if not script.exists():  # pip install --target puts scripts in the target's bin/
        pytest.skip(f"no console script beside {sys.executable}: installed without its scripts")
    env = dict(os.environ, GEMMTUNE_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("GEMMTUNE_BIN_DIR", None)
    result = subprocess.run([str(script), "--dry-run", "--m", "64", "--n", "64", "--k", "64",
                             "--dtype", "bf16", "--arch", "sm_90a", "--budget", "1", "--json"],
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    dry_run = json.loads(result.stdout)
    assert dry_run["problem"] == "bf16 nn 64x64x64 lda=64 ldb=64 ldc=64 align=16"
    assert dry_run["compiled"] == 1 and dry_run["failed"] == 0
