"""The console scripts gemm-tune and gemm-db of a pip install: each runs the program of its name
from bin_dir() in place of this process, so that the program finds gemm-tune-worker beside it."""
import os
import sys

from ._library import Error, tool_path


def _exec(name):
    try:
        path = tool_path(name)
    except Error as e:
        sys.exit(f"{name}: {e}")
    os.execv(path, [name, *sys.argv[1:]])


def gemm_tune():
    _exec("gemm-tune")


def gemm_db():
    _exec("gemm-db")
