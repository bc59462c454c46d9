"""What gemmtune needs of an array: address, shape, strides in elements, dtype, device, stream.

From PyTorch tensors, from any object with __cuda_array_interface__ (CuPy, Numba, ...), and
from DLPack producers (__dlpack__ / __dlpack_device__).
"""
import ctypes
import functools
from typing import NamedTuple, Optional, Tuple

from ._library import Error

# The names of the element types (the library's, which gives their codes).
_CAI_DTYPES = {"<f4": "f32", "<f2": "f16"}  # no typestr for bfloat16 or float8: via DLPack
# (DLDataTypeCode, bits): kDLFloat, kDLBfloat, kDLFloat8_e4m3fn and kDLFloat8_e5m2 (dlpack.h
# 1.1; its kDLFloat8_e4m3 = 8 has infinities, which e4m3fn lacks: not gemmtune's e4m3).
_DLPACK_DTYPES = {(2, 32): "f32", (2, 16): "f16", (4, 16): "bf16", (10, 8): "e4m3",
                  (12, 8): "e5m2"}
_DL_CUDA, _DL_CUDA_MANAGED = 2, 13
SUPPORTED = "float32, float16, bfloat16, float8_e4m3fn and float8_e5m2"


class View(NamedTuple):
    """A matrix (or a batch of rows) as gemmtune reads it; strides are in elements."""
    ptr: int
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]
    dtype: str  # 'f32', 'f16', 'bf16', 'e4m3', 'e5m2'
    device: int  # CUDA ordinal; -1: unknown (the thread's current context)
    stream: Optional[int]  # the producer's stream to run on (CUDA array interface), if it said
    keepalive: object = None  # what must live until the call returns (a DLPack capsule)


# torch.Tensor where torch is importable (gemmtune/_torch.py sets it), else () which
# isinstance matches to nothing; torch_dtype_name comes with it (_torch imports this module, so
# this one cannot import _torch at its top, and an import per call costs).
TORCH_TENSOR = ()
torch_dtype_name = None


def is_torch_tensor(x):
    return isinstance(x, TORCH_TENSOR)


def view_of(x, name, stream=None):
    """The View of x; Error for what gemmtune cannot read. stream: where the call will run,
    passed to a DLPack producer so that it orders its pending work before it."""
    if isinstance(x, View):
        return x
    if isinstance(x, TORCH_TENSOR):
        return _torch_view(x, name)
    if hasattr(x, "__cuda_array_interface__"):
        return _cai_view(x, name)
    if hasattr(x, "__dlpack__"):
        return _dlpack_view(x, name, stream)
    raise Error(f"{name} is a {type(x).__name__}: gemmtune takes torch tensors and arrays with "
                "__cuda_array_interface__ or __dlpack__ (CuPy)")


def _torch_view(t, name):
    dtype = torch_dtype_name(t.dtype, name)
    device = t.device.index if t.device.type == "cuda" else None
    if device is None:
        device = -2  # not a GPU: matmul says so; problem() does not need one
    return View(t.data_ptr(), tuple(t.shape), tuple(t.stride()), dtype, device, None)


def _dtype_error(name, what):
    return Error(f"{name} has dtype {what}: gemmtune supports {SUPPORTED}", "unsupported")


def _cai_view(x, name):
    iface = x.__cuda_array_interface__
    typestr = iface["typestr"]
    if typestr not in _CAI_DTYPES:
        raise _dtype_error(name, typestr)
    shape = tuple(map(int, iface["shape"]))
    itemsize = int(typestr[2:])
    byte_strides = iface.get("strides")
    if byte_strides is None:
        strides = _contiguous_strides(shape)
    else:
        if any(s % itemsize for s in byte_strides):
            raise Error(f"{name} has byte strides {tuple(byte_strides)} that are not "
                        f"multiples of its element size ({itemsize})")
        strides = tuple(int(s) // itemsize for s in byte_strides)
    return View(int(iface["data"][0] or 0), shape, strides, _CAI_DTYPES[typestr],
                _dlpack_device(x, name), iface.get("stream"))


def _dlpack_device(x, name):
    if not hasattr(x, "__dlpack_device__"):
        return -1
    kind, index = x.__dlpack_device__()
    if int(kind) not in (_DL_CUDA, _DL_CUDA_MANAGED):
        raise Error(f"{name} is not on a CUDA GPU (DLPack device type {int(kind)}): gemmtune "
                    "multiplies arrays in GPU memory", "invalid_argument")
    return int(index)


@functools.lru_cache(maxsize=1024)  # the same few shapes, call after call
def _contiguous_strides(shape):
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


# DLPack's C structures (dlpack.h, unversioned "dltensor" capsules).
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _dlpack_view(x, name, stream):
    device = _dlpack_device(x, name)
    # DLPack says 1 for CUDA's legacy default stream (0 is not allowed).
    try:
        capsule = x.__dlpack__(stream=stream or 1)
    except TypeError:
        capsule = x.__dlpack__()
    # The capsule is only read, never consumed: when it dies, it releases the producer's view.
    tensor = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    code, bits, lanes = tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes
    if lanes != 1 or (code, bits) not in _DLPACK_DTYPES:
        raise _dtype_error(name, f"(DLPack code {code}, {bits} bits, {lanes} lanes)")
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    if tensor.strides:
        strides = tuple(tensor.strides[i] for i in range(tensor.ndim))
    else:
        strides = _contiguous_strides(shape)
    return View((tensor.data or 0) + tensor.byte_offset, shape, strides,
                _DLPACK_DTYPES[(code, bits)], device, None, keepalive=capsule)
