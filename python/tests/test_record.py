"""GEMMTUNE_RECORD's file: gemm-tune's shapes format, each problem once, also when several
processes record into it at once (no GPU needed: gemmtune.record is the library's recorder)."""
import os
import subprocess
import sys

import pytest

import gemmtune
from conftest import PACKAGE_ENV, bin_dir
from gemmtune import Problem


def problem_lines(path):
    lines = open(path).read().splitlines()
    return [line for line in lines if line and not line.startswith("#")]


def test_lines_are_in_gemm_tunes_format_with_a_header(tmp_path):
    path = tmp_path / "sub" / "shapes.txt"  # the folder is made too
    assert gemmtune.record(Problem("bf16", "tn", 11008, 8, 4096, 4096, 4096, 11008), path)
    assert gemmtune.record(Problem("f32", "nn", 48, 64, 32, 50, 32, 48), path)
    assert gemmtune.record(Problem("f16", "nt", 64, 48, 32, 72, 48, 64), path)
    # The first problem again with beta != 0 (a linear layer with a bias): tuned apart.
    assert gemmtune.record(Problem("bf16", "tn", 11008, 8, 4096, 4096, 4096, 11008, True), path)
    text = path.read_text()
    assert text.startswith("# Problems served without a tuned kernel (GEMMTUNE_RECORD).")
    assert problem_lines(path) == ["11008 8 4096 bf16 tn", "48 64 32 f32 nn lda=50",
                                   "64 48 32 f16 nt lda=72", "11008 8 4096 bf16 tn beta=1"]
    # The library writes what Problem.shape_line says.
    assert problem_lines(path)[-1] == Problem("bf16", "tn", 11008, 8, 4096, 4096, 4096, 11008,
                                              True).shape_line()


def test_a_problem_already_listed_is_not_appended_again(tmp_path):
    path = tmp_path / "shapes.txt"
    p = Problem("bf16", "tn", 4096, 1, 4096, 4096, 4096, 4096)
    assert gemmtune.record(p, path) is True
    assert gemmtune.record(p, path) is False
    # Lines written by hand count too, whatever their spacing or comments.
    path.write_text(path.read_text() + "  6144   32 4096 bf16 tn   # from a notebook\n")
    assert gemmtune.record(Problem("bf16", "tn", 6144, 32, 4096, 4096, 4096, 6144), path) is False
    assert problem_lines(path) == ["4096 1 4096 bf16 tn", "  6144   32 4096 bf16 tn   # from a notebook"]


def test_the_file_comes_from_gemmtune_record_when_no_path_is_given(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMMTUNE_RECORD", str(tmp_path / "env.txt"))
    assert gemmtune.record(Problem("f32", "nn", 2, 3, 4, 2, 4, 2))
    assert problem_lines(tmp_path / "env.txt") == ["2 3 4 f32 nn"]
    monkeypatch.delenv("GEMMTUNE_RECORD")
    with pytest.raises(gemmtune.Error, match="no file given and GEMMTUNE_RECORD is not set"):
        gemmtune.record(Problem("f32", "nn", 2, 3, 4, 2, 4, 2))


def test_invalid_problems_and_unwritable_files_are_errors(tmp_path):
    with pytest.raises(gemmtune.Error, match="lda") as e:
        gemmtune.record(Problem("f32", "nn", 64, 64, 64, 10, 64, 64), tmp_path / "x.txt")
    assert e.value.code == "invalid_argument"
    (tmp_path / "dir").mkdir()
    with pytest.raises(gemmtune.Error, match="GEMMTUNE_RECORD: cannot open .*dir") as e:
        gemmtune.record(Problem("f32", "nn", 2, 3, 4, 2, 4, 2), tmp_path / "dir")
    assert e.value.code == "io"


WRITER = """
import os, sys, time, random
import gemmtune
path, seed, writers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
shared = [gemmtune.Problem("bf16", "tn", 128 * (i + 1), 8, 4096, 4096, 4096, 128 * (i + 1))
          for i in range(200)]
own = [gemmtune.Problem("f16", "nn", 100 + seed, 10 + i, 30, 100 + seed, 30, 100 + seed)
       for i in range(10)]
problems = shared + own
random.Random(seed).shuffle(problems)
# Start together, so that the writers contend for the file: each says it is ready, then waits
# for the others.
open(f"{path}.ready{seed}", "w").close()
deadline = time.time() + 60
while sum(os.path.exists(f"{path}.ready{i}") for i in range(writers)) < writers:
    assert time.time() < deadline, "the other writers never started"
print(sum(gemmtune.record(p, path) for p in problems))
"""


def test_concurrent_writers_list_each_problem_once(tmp_path):
    path = tmp_path / "shapes.txt"
    env = dict(os.environ, **PACKAGE_ENV)
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(seed), "6"],
                                env=env, stdout=subprocess.PIPE, text=True)
               for seed in range(6)]
    appended = [int(w.communicate(timeout=120)[0]) for w in writers]
    assert all(w.returncode == 0 for w in writers)
    lines = problem_lines(path)
    assert len(lines) == len(set(lines)) == 200 + 6 * 10
    assert sum(appended) == len(lines)  # each line was written by exactly one writer
    assert path.read_text().count("# Problems served without a tuned kernel") == 1


def test_gemm_tune_reads_the_recorded_file_back(tmp_path):
    gemm_tune = bin_dir() / "gemm-tune"
    if not gemm_tune.exists():
        pytest.skip(f"{gemm_tune} is not built")
    path = tmp_path / "shapes.txt"
    problems = [Problem("f32", "nn", 48, 64, 32, 50, 32, 48),
                Problem("bf16", "tn", 4096, 8, 4096, 4096, 4096, 4096),
                Problem("f16", "tt", 300, 200, 100, 104, 208, 300)]
    for p in problems:
        gemmtune.record(p, path)
    # A dry run parses the file and compiles one candidate per problem, with no GPU.
    env = dict(os.environ, GEMMTUNE_CACHE_DIR=str(tmp_path / "cache"))
    result = subprocess.run([str(gemm_tune), "--shapes", str(path), "--dry-run", "--arch",
                             "sm_90a", "--budget", "1", "--json"], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    import json
    described = [entry["problem"] for entry in json.loads(result.stdout)["problems"]]
    assert described == [
        "f32 nn 48x64x32 lda=50 ldb=32 ldc=48 align=8",
        "bf16 tn 4096x8x4096 lda=4096 ldb=4096 ldc=4096 align=16",
        "f16 tt 300x200x100 lda=104 ldb=208 ldc=300 align=8",
    ]
