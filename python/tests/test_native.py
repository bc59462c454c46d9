"""gemmtune_native, the compiled call of gemmtune_matmul on the planned path (no GPU needed): it
is found beside the library and bound to it, it answers exactly as the ctypes call does, it
refuses what is not an int, and GEMMTUNE_NO_NATIVE leaves the calls to ctypes."""
import ctypes
import os
import subprocess
import sys

import pytest

from gemmtune import _library

from conftest import ROOT


def native_or_skip():
    function = _library.matmul_function()
    if function is _library.library().gemmtune_matmul:
        path = _library.beside_library("gemmtune_native.abi3.so")
        pytest.skip(f"no {path} (built only with Python headers)")
    return function


# gemmtune_matmul's arguments: device, desc, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, stream
def arguments(desc=0, m=1):
    return (-1, desc, m, 1, 1, _library._ONE_ADDRESS, 0, 1, 0, 1, _library._ZERO_ADDRESS, 0, 1, 0)


def test_native_answers_as_ctypes_does():
    native = native_or_skip()
    through_ctypes = _library.library().gemmtune_matmul
    for args in (arguments(), arguments(m=-3)):  # a null descriptor; then a bad M too
        status = native(*args)
        assert status != 0
        assert status == through_ctypes(*args)
    d = _library.descriptor(("bf16",) * 4 + ("f32",), "tn")
    status = native(*arguments(desc=d.handle, m=-3))
    assert status == through_ctypes(*arguments(desc=d.handle, m=-3))
    assert "M" in _library.library().gemmtune_last_error().decode()


def test_native_refuses_what_is_not_an_int():
    native = native_or_skip()
    with pytest.raises(TypeError):
        native(*arguments()[:13])
    with pytest.raises(TypeError):
        native(*arguments()[:5], ctypes.byref(ctypes.c_float(2.0)), *arguments()[6:])
    with pytest.raises(TypeError):
        native(*arguments()[:6], 1.5, *arguments()[7:])


def test_no_native_leaves_the_calls_to_ctypes():
    native_or_skip()
    code = ("from gemmtune import _library; "
            "print(_library.matmul_function() is _library.library().gemmtune_matmul)")
    env = dict(os.environ, GEMMTUNE_NO_NATIVE="1", PYTHONPATH=str(ROOT / "python"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "True"
