"""Shared by the Python tests: stand-ins for GPU arrays (no GPU needed), the tools' folder."""
import ctypes
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
# GEMMTUNE_TEST_INSTALLED=1: test the package as installed (pip), not the source tree's python/.
INSTALLED = os.environ.get("GEMMTUNE_TEST_INSTALLED") == "1"
if not INSTALLED:
    sys.path.insert(0, str(ROOT / "python"))
# What a child Python needs in its environment to import the package under test.
PACKAGE_ENV = {} if INSTALLED else {"PYTHONPATH": str(ROOT / "python")}

import gemmtune  # noqa: E402
from gemmtune._library import bin_dir  # noqa: E402,F401  (the tests' gemm-tune: the package's)
from gemmtune._operands import _DLDataType, _DLDevice, _DLTensor  # noqa: E402  (DLPack's C structs)

if INSTALLED and pathlib.Path(gemmtune.__file__).resolve().is_relative_to(ROOT / "python"):
    raise RuntimeError("GEMMTUNE_TEST_INSTALLED=1 but gemmtune is the source tree's "
                       f"({gemmtune.__file__}): run pytest from outside the source tree")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU and PyTorch (the GPU machine)")


def hopper_float8_torch():
    """torch, for a test module of the float8 kernels on a Hopper GPU (called at its top, before
    its other imports); else skips the module, saying why."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU visible to torch", allow_module_level=True)
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip(f"torch {torch.__version__} has no float8 dtypes", allow_module_level=True)
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the float8 kernels are Hopper's (sm_90a)", allow_module_level=True)
    torch.backends.cuda.matmul.allow_tf32 = False  # references in full f32
    return torch


def gpu_visible():
    """Whether the CUDA driver sees a GPU here. The no-GPU tests pass fake addresses: on a GPU
    the library would launch kernels on them, so those tests run only where there is none."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0


no_gpu_only = pytest.mark.skipif(gpu_visible(), reason="a GPU is visible: this test passes fake "
                                 "addresses, which the library would run kernels on")


class FakeCudaArray:
    """An object with __cuda_array_interface__ (version 3) and nothing behind its address:
    enough for argument checks, problem() and the library's own checks."""

    def __init__(self, shape, typestr="<f2", strides=None, ptr=0x7F0000000000, stream=None,
                 dlpack_device=None):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": typestr, "strides": strides,
            "data": (ptr, False), "version": 3, "stream": stream}
        if dlpack_device is not None:
            self.__dlpack_device__ = lambda: dlpack_device


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_CAPSULE_NAME = ctypes.c_char_p(b"dltensor")  # must outlive every capsule


class FakeDLPack:
    """A DLPack producer (unversioned 'dltensor' capsules) of a tensor on a GPU or the CPU."""

    def __init__(self, shape, code=4, bits=16, strides=None, ptr=0x7F0000000000, device=(2, 0),
                 byte_offset=0):
        n = len(shape)
        self._shape = (ctypes.c_int64 * n)(*shape)
        self._strides = (ctypes.c_int64 * n)(*strides) if strides else None
        self._tensor = _DLManagedTensor(_DLTensor(
            ptr, _DLDevice(*device), n, _DLDataType(code, bits, 1),
            ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64)),
            ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64)) if strides else None,
            byte_offset), None, None)
        self._device = device
        self.streams_asked = []

    def __dlpack_device__(self):
        return self._device

    def __dlpack__(self, stream=None):
        self.streams_asked.append(stream)
        return _capsule_new(ctypes.addressof(self._tensor), _CAPSULE_NAME, None)


@pytest.fixture
def fake():
    return FakeCudaArray
