"""libgemmtune through ctypes: where it is, the C API's signatures, its failures as Error.

A thin layer over the C API (runtime/include/gemmtune/gemmtune.h), so that one build serves
every Python version: no compiled extension.
"""
import ctypes
import os
import pathlib

# gemmtune_status codes, by their C names less the prefix.
_STATUS_CODES = {
    1: "invalid_argument",
    2: "unsupported",
    3: "no_device",
    4: "cuda",
    5: "compile",
    6: "database",
    7: "io",
    8: "timeout",
    9: "internal",
}

DTYPES = {"f32": 0, "f16": 1, "bf16": 2}
OPS = {"n": 0, "t": 1}


class Error(Exception):
    """A gemmtune failure. `code` names its kind: 'invalid_argument', 'unsupported',
    'no_device', 'cuda', 'compile', 'database', 'io', 'timeout', 'internal', or
    'library_not_found'. The message is the library's where the library found the problem."""

    def __init__(self, message, code="invalid_argument"):
        super().__init__(message)
        self.code = code


def _library_candidates():
    """Where libgemmtune may be, in the order tried."""
    explicit = os.environ.get("GEMMTUNE_LIBRARY")
    if explicit:
        return [pathlib.Path(explicit)]  # said explicitly: nothing else is tried
    here = pathlib.Path(__file__).resolve().parent
    return [
        here / "libgemmtune.so.0",  # installed next to the package
        here.parent.parent / "libgemmtune.so.0",  # cmake --install: <libdir>/python/gemmtune
        here.parent.parent / "build" / "lib" / "libgemmtune.so.0",  # the source tree's build/
        pathlib.Path("libgemmtune.so.0"),  # the loader's search path (LD_LIBRARY_PATH, ldconfig)
    ]


def _declare(lib):
    i64, f32, ptr, i32 = ctypes.c_int64, ctypes.c_float, ctypes.c_void_p, ctypes.c_int
    status = ctypes.c_int
    lib.gemmtune_gemm_on_device.argtypes = [
        i32, i32, i32, i32, i64, i64, i64, f32, ptr, i64, ptr, i64, f32, ptr, i64, ptr]
    lib.gemmtune_gemm_on_device.restype = status
    lib.gemmtune_gemm.argtypes = lib.gemmtune_gemm_on_device.argtypes[1:]
    lib.gemmtune_gemm.restype = status
    lib.gemmtune_select.argtypes = [
        i32, i32, i32, i32, i64, i64, i64, ptr, i64, ptr, i64, f32, ptr, i64,
        ctypes.POINTER(ctypes.c_char_p)]
    lib.gemmtune_select.restype = status
    lib.gemmtune_record_problem.argtypes = [
        ctypes.c_char_p, i32, i32, i32, i64, i64, i64, i64, i64, f32, i64, ctypes.POINTER(i32)]
    lib.gemmtune_record_problem.restype = status
    lib.gemmtune_last_error.argtypes = []
    lib.gemmtune_last_error.restype = ctypes.c_char_p
    return lib


_lib = None


def library():
    """The loaded libgemmtune (loaded on first use); Error('library_not_found') if none loads."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for path in _library_candidates():
        if path.is_absolute() and not path.exists():
            tried.append(f"{path} (no such file)")
            continue
        try:
            _lib = _declare(ctypes.CDLL(str(path)))
            return _lib
        except (OSError, AttributeError) as e:
            tried.append(f"{path} ({e})")
    raise Error("cannot load libgemmtune; build it (tools/build.sh) or set GEMMTUNE_LIBRARY to "
                "its path. Tried: " + "; ".join(tried), "library_not_found")


def library_path():
    """The file libgemmtune was loaded from."""
    return library()._name


def check(status):
    """Raises Error with the library's message unless status is GEMMTUNE_SUCCESS."""
    if status != 0:
        message = library().gemmtune_last_error().decode("utf-8", "replace")
        raise Error(message, _STATUS_CODES.get(status, "internal"))
