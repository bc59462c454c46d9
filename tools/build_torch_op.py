"""Builds gemmtune_torch.so (python/native/gemmtune_torch.cpp: torch.ops.gemmtune_cpp.linear)
against the torch this Python imports, beside libgemmtune, where the package loads it from.
It needs that torch's headers (a pip torch has them), a C++ compiler and the CUDA headers.

    python3 tools/build_torch_op.py [--library build/lib/libgemmtune.so]
    python3 tools/build_torch_op.py --library "$(python3 -c 'import gemmtune; print(gemmtune.library_path())')"
"""
import argparse
import os
import pathlib
import subprocess
import sys

import torch
from torch.utils import cpp_extension

ROOT = pathlib.Path(__file__).resolve().parents[1]


def torch_paths(kind):
    """torch's include or library folders with CUDA's (the keyword changed across versions)."""
    function = getattr(cpp_extension, f"{kind}_paths")
    try:
        return function(device_type="cuda")
    except TypeError:
        return function(cuda=True)


def command(library, output, standard):
    torch_lib = pathlib.Path(torch.__file__).parent / "lib"
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    return (["g++", f"-std={standard}", "-O2", "-fPIC", "-shared",
             str(ROOT / "python" / "native" / "gemmtune_torch.cpp"),
             f"-D_GLIBCXX_USE_CXX11_ABI={abi}", f"-I{ROOT / 'runtime' / 'include'}",
             f"-I{ROOT / 'templates'}"]
            + [f"-I{p}" for p in torch_paths("include")]
            # The library's own file: a pip install has only its soname, libgemmtune.so.0.
            + ["-o", str(output), str(library)]
            + [f"-L{p}" for p in torch_paths("library")]
            + ["-lc10", "-lc10_cuda", "-ltorch", "-ltorch_cpu", "-ltorch_cuda",
               "-Wl,-rpath,$ORIGIN", f"-Wl,-rpath,{torch_lib}"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", type=pathlib.Path, default=ROOT / "build" / "lib" /
                        "libgemmtune.so")
    args = parser.parse_args()
    output = args.library.resolve().parent / "gemmtune_torch.so"
    for standard in ("c++17", "c++20"):  # torch's headers say which they need
        result = subprocess.run(command(args.library.resolve(), output, standard),
                                capture_output=True, text=True)
        if result.returncode == 0:
            print(f"built {output} (torch {torch.__version__}, {standard})")
            return 0
        print(f"g++ -std={standard} failed:\n{result.stderr[-3000:]}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
