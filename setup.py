"""pip install . / pip wheel . : the Python package gemmtune with libgemmtune and the tools inside.

The build step drives CMake: it builds libgemmtune, gemm-tune, gemm-tune-worker and gemm-db (no
tests) and copies them into the package as gemmtune/lib/libgemmtune.so.0 and gemmtune/bin/. The
same layout as `cmake --install` (lib/ beside bin/), so libgemmtune and gemm-tune find the worker
as installed. GEMMTUNE_BUILD_DIR names a CMake build to reuse (tools/build.sh's build/); else
the build is kept in build-pip/, with ccache where installed, so a second install is cheap.
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel  # setuptools >= 70.1
except ImportError:
    from wheel.bdist_wheel import bdist_wheel  # python3-wheel (Debian bookworm: 0.38)

ROOT = pathlib.Path(__file__).resolve().parent
TARGETS = ["gemmtune", "gemm-tune", "gemm-tune-worker", "gemm-db"]
TOOLS = TARGETS[1:]
LIBRARY = "libgemmtune.so.0"  # the soname: what the package loads; wheels keep no symlinks
# The planned calls' compiled call (python/native), beside the library; built only where Python's
# headers are (python/CMakeLists.txt), else the package calls through ctypes.
NATIVE = "gemmtune_native.abi3.so"


def fail(message):
    sys.exit(f"gemmtune: error: {message}")


def version():
    """The project's version, from CMakeLists.txt: one place says it."""
    text = (ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(gemmtune VERSION ([0-9.]+)", text).group(1)


def build_dir():
    """The CMake build folder: $GEMMTUNE_BUILD_DIR (from the source tree), else build-pip/."""
    return ROOT / os.environ.get("GEMMTUNE_BUILD_DIR", "build-pip")


def staging():
    """setuptools' folder (build/, egg-info) in the CMake one, out of python/: two builds never
    share it. Made here: egg_info refuses an egg_base that does not exist yet."""
    path = build_dir() / "setuptools"
    path.mkdir(parents=True, exist_ok=True)
    return str(path)


def run(command, env=None):
    print("gemmtune:", " ".join(map(str, command)), flush=True)
    subprocess.check_call([str(c) for c in command], env=env)


def cuda_env():
    """The environment with the CUDA toolkit's bin/ first on the PATH, as tools/build.sh has it;
    a clear error where no nvcc is found (CMake's own message is a page long)."""
    cuda_home = pathlib.Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    env = dict(os.environ, PATH=f"{cuda_home / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    if not shutil.which("nvcc", path=env["PATH"]):
        fail(f"no CUDA toolkit (no nvcc in {cuda_home}/bin or on the PATH): install CUDA 12 or 13, "
             "or set CUDA_HOME")
    return env, cuda_home


def check_source(build):
    """Refuses a build folder configured from another source tree: its library would not be
    this package's."""
    cache = (build / "CMakeCache.txt").read_text(errors="replace")
    home = re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$", cache, re.M)
    if home and pathlib.Path(home.group(1)).resolve() != ROOT:
        fail(f"{build} is a build of {home.group(1)}, not of {ROOT}: unset GEMMTUNE_BUILD_DIR "
             "or name a build of this tree")


def configure(build, env, cuda_home):
    """A Release build without tests, as tools/build.sh configures it (Ninja and ccache where
    installed)."""
    command = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
               f"-DCUDAToolkit_ROOT={cuda_home}", "-DGEMMTUNE_BUILD_TESTS=OFF"]
    if shutil.which("ninja"):
        command += ["-G", "Ninja"]
    if shutil.which("ccache"):
        command += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
    run(command, env)


def cmake_build():
    """Configures (first time only) and builds the library and the tools; returns the folder."""
    if not shutil.which("cmake"):
        fail("cmake not found: run tools/setup.sh (or apt-get install cmake ninja-build)")
    build = build_dir()
    env, cuda_home = cuda_env()
    if (build / "CMakeCache.txt").exists():
        check_source(build)
    else:
        configure(build, env, cuda_home)
    jobs = [] if "CMAKE_BUILD_PARALLEL_LEVEL" in os.environ else ["-j", str(os.cpu_count() or 1)]
    run(["cmake", "--build", build, "--target", *TARGETS, *jobs], env)
    try:
        run(["cmake", "--build", build, "--target", "gemmtune_native", *jobs], env)
    except subprocess.CalledProcessError:
        print("gemmtune: no gemmtune_native (no Python headers: apt-get install python3-dev); "
              "the package calls the library through ctypes", flush=True)
    return build


def copy_executable(source, target):
    if not source.exists():
        fail(f"{source} was not built")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source.resolve(), target)  # the file the symlink names; modes kept


class BuildPy(build_py):
    """build_py, then the native part: CMake's outputs copied into the built package."""

    def run(self):
        super().run()
        build = cmake_build()
        package = pathlib.Path(self.build_lib) / "gemmtune"
        copy_executable(build / "lib" / LIBRARY, package / "lib" / LIBRARY)
        if (build / "lib" / NATIVE).exists():
            copy_executable(build / "lib" / NATIVE, package / "lib" / NATIVE)
        for tool in TOOLS:
            copy_executable(build / "bin" / tool, package / "bin" / tool)


class NativeDistribution(Distribution):
    """Native code inside: installed to platlib, and bdist_wheel makes a platform wheel."""

    def has_ext_modules(self):
        return True


class BdistWheel(bdist_wheel):
    """A platform wheel for every Python 3: the library is loaded with ctypes and links no
    libpython, so one wheel serves 3.11 here and 3.12 on the GPU machine."""

    def get_tag(self):
        return "py3", "none", super().get_tag()[2]


setup(
    name="gemmtune",
    version=version(),
    description="JIT GEMM kernels tuned for your NVIDIA GPU, from Python (ctypes over libgemmtune)",
    package_dir={"": "python"},
    packages=["gemmtune"],
    python_requires=">=3.8",
    entry_points={"console_scripts": ["gemm-tune=gemmtune._tools:gemm_tune",
                                      "gemm-db=gemmtune._tools:gemm_db"]},
    distclass=NativeDistribution,
    cmdclass={"build_py": BuildPy, "bdist_wheel": BdistWheel},
    options={"build": {"build_base": staging()}, "egg_info": {"egg_base": staging()}},
    zip_safe=False,
)
