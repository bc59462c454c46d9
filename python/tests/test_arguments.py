"""Bad input is a gemmtune.Error that says what is wrong, before any GPU is touched; without a
GPU a valid call fails with the library's no_device message."""
import os
import subprocess
import sys

import pytest

import gemmtune
from conftest import PACKAGE_ENV, FakeCudaArray, FakeDLPack, no_gpu_only


def test_import_finds_the_library_and_exports_the_api():
    path = gemmtune.library_path()
    assert os.path.basename(path).startswith("libgemmtune.so") and os.path.exists(path)
    assert path == os.environ.get("GEMMTUNE_LIBRARY", path)
    for name in ("matmul", "linear", "select", "select_linear", "problem", "problem_linear",
                 "record", "Error", "Problem", "Selection", "scaled_mm", "problem_scaled_mm",
                 "select_scaled_mm"):
        assert hasattr(gemmtune, name), name


def test_a_missing_library_is_an_error_that_says_what_to_set():
    script = ("import gemmtune\n"
              "try:\n    gemmtune.library_path()\n"
              "except gemmtune.Error as e:\n    print(e.code, e)\n")
    env = {"GEMMTUNE_LIBRARY": "/nonexistent/libgemmtune.so", **PACKAGE_ENV}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert out.startswith("library_not_found cannot load libgemmtune")
    assert "GEMMTUNE_LIBRARY" in out and "/nonexistent/libgemmtune.so (no such file)" in out


def test_unsupported_dtype():
    with pytest.raises(gemmtune.Error, match="a has dtype <f8: gemmtune supports float32, "
                                             "float16, bfloat16, float8_e4m3fn and "
                                             "float8_e5m2") as e:
        gemmtune.matmul(FakeCudaArray((4, 8), "<f8"), FakeCudaArray((8, 3), "<f8"))
    assert e.value.code == "unsupported"


def test_inner_dimensions_must_agree():
    with pytest.raises(gemmtune.Error, match="a is 4x8 and b is 7x3: a's columns must equal b's"):
        gemmtune.matmul(FakeCudaArray((4, 8)), FakeCudaArray((7, 3)))


def test_out_must_have_the_product_shape():
    with pytest.raises(gemmtune.Error, match="out is 4x4, but a @ b is 4x3"):
        gemmtune.matmul(FakeCudaArray((4, 8)), FakeCudaArray((8, 3)), out=FakeCudaArray((4, 4)))


def test_matmul_takes_matrices():
    with pytest.raises(gemmtune.Error, match=r"a is 3-D \(shape \(2, 4, 8\)\).*gemmtune.linear"):
        gemmtune.matmul(FakeCudaArray((2, 4, 8)), FakeCudaArray((8, 3)))


def test_non_unit_inner_stride():
    # Every other column of a 4 x 16 f16 matrix: element strides (16, 2).
    a = FakeCudaArray((4, 8), "<f2", strides=(32, 4))
    with pytest.raises(gemmtune.Error, match=r"a has strides \(16, 2\).*unit stride"):
        gemmtune.matmul(a, FakeCudaArray((8, 3)), out=FakeCudaArray((4, 3)))


def test_byte_strides_must_be_whole_elements():
    a = FakeCudaArray((4, 8), "<f4", strides=(34, 4))
    with pytest.raises(gemmtune.Error, match="not multiples of its element size"):
        gemmtune.problem(a, FakeCudaArray((8, 3), "<f4"))


def test_operands_on_two_gpus():
    a = FakeCudaArray((4, 8), dlpack_device=(2, 0))
    b = FakeCudaArray((8, 3), dlpack_device=(2, 1))
    with pytest.raises(gemmtune.Error, match="a is on GPU 0 but b is on GPU 1"):
        gemmtune.matmul(a, b, out=FakeCudaArray((4, 3), dlpack_device=(2, 0)))


def test_an_array_in_host_memory():
    with pytest.raises(gemmtune.Error, match=r"b is not on a CUDA GPU \(DLPack device type 1\)"):
        gemmtune.matmul(FakeDLPack((4, 8)), FakeDLPack((8, 3), device=(1, 0)))


def test_beta_needs_c():
    with pytest.raises(gemmtune.Error, match=r"beta != 0 reads C: pass C as out="):
        gemmtune.matmul(FakeCudaArray((4, 8)), FakeCudaArray((8, 3)), beta=1.0)


def test_alpha_must_be_finite():
    with pytest.raises(gemmtune.Error, match="alpha and beta must be finite"):
        gemmtune.matmul(FakeCudaArray((4, 8)), FakeCudaArray((8, 3)), out=FakeCudaArray((4, 3)),
                        alpha=float("nan"))


def test_results_are_allocated_only_for_torch_and_cupy():
    with pytest.raises(gemmtune.Error, match="FakeCudaArray: gemmtune allocates results only"):
        gemmtune.matmul(FakeCudaArray((4, 8)), FakeCudaArray((8, 3)))


def test_something_that_is_no_array():
    with pytest.raises(gemmtune.Error, match="a is a list: gemmtune takes torch tensors and "
                                             "arrays with __cuda_array_interface__"):
        gemmtune.matmul([[1.0]], FakeCudaArray((1, 3)))


def test_a_stream_of_an_unknown_kind():
    with pytest.raises(gemmtune.Error, match="stream is a str"):
        gemmtune.matmul(FakeCudaArray((4, 8)), FakeCudaArray((8, 3)), out=FakeCudaArray((4, 3)),
                        stream="fast")


@no_gpu_only
def test_without_a_gpu_the_call_raises_the_librarys_no_device_error():
    with pytest.raises(gemmtune.Error, match="^no GPU: ") as e:
        gemmtune.matmul(FakeCudaArray((64, 32)), FakeCudaArray((32, 48)),
                        out=FakeCudaArray((64, 48)))
    assert e.value.code == "no_device"
    with pytest.raises(gemmtune.Error, match="^no GPU: ") as e:
        gemmtune.select(FakeCudaArray((64, 32)), FakeCudaArray((32, 48)))
    assert e.value.code == "no_device"


def test_linear_is_tn_with_batch_dimensions_flattened():
    x = FakeCudaArray((2, 3, 4096))  # 6 tokens
    w = FakeCudaArray((11008, 4096))
    assert tuple(gemmtune.problem_linear(x, w)) == ("f16", "tn", 11008, 6, 4096, 4096, 4096, 11008,
                                                    False, "none", "precise", "none", "exact")
    # With a bias, the kernel's store adds it (the epilogue 'bias', along M): C is not read, and
    # the problem is another for the tuner.
    with_bias = gemmtune.problem_linear(x, w, FakeCudaArray((11008,)))
    assert (with_bias.epilogue, with_bias.reads_c) == ("bias", False)
    with pytest.raises(gemmtune.Error, match="FakeCudaArray: gemmtune allocates results only"):
        gemmtune.linear(x, w)


def test_linear_checks_its_shapes():
    with pytest.raises(gemmtune.Error, match="x's last dimension must equal w's in_features"):
        gemmtune.problem_linear(FakeCudaArray((6, 512)), FakeCudaArray((1024, 256)))
    with pytest.raises(gemmtune.Error, match="w is 3-D"):
        gemmtune.problem_linear(FakeCudaArray((6, 512)), FakeCudaArray((2, 1024, 512)))


def test_linear_flattens_only_what_flattens_without_a_copy():
    # x[:, :3, :] of a 2 x 6 x 64 array: 3 rows, then a gap of 3 rows.
    x = FakeCudaArray((2, 3, 64), strides=(6 * 64 * 2, 64 * 2, 2))
    with pytest.raises(gemmtune.Error, match="do not flatten into rows without a copy"):
        gemmtune.problem_linear(x, FakeCudaArray((32, 64)))
    # x[:, ::2, :]: rows 2 apart throughout, which one leading dimension describes.
    x = FakeCudaArray((2, 3, 64), strides=(6 * 64 * 2, 2 * 64 * 2, 2))
    assert tuple(gemmtune.problem_linear(x, FakeCudaArray((32, 64)))) == (
        "f16", "tn", 32, 6, 64, 64, 128, 32, False, "none", "precise", "none", "exact")


@no_gpu_only
def test_dlpack_operands_bf16_with_offsets_and_strides():
    # A bf16 (DLPack code 4) transposed view, starting 128 bytes into its buffer.
    a = FakeDLPack((64, 32), code=4, bits=16, strides=(1, 64), byte_offset=128)
    b = FakeDLPack((32, 48), code=4, bits=16)
    assert tuple(gemmtune.problem(a, b)) == ("bf16", "nt", 48, 64, 32, 48, 64, 48, False, "none",
                                             "precise", "none", "exact")
    with pytest.raises(gemmtune.Error, match="^no GPU: "):
        gemmtune.matmul(a, b, out=FakeDLPack((64, 48), code=4, bits=16), stream=7)
    # The producer is told which stream the call runs on (DLPack's 1: the legacy default).
    assert a.streams_asked == [1, 7]
    assert gemmtune.problem(a, b, beta=0.5).reads_c and not gemmtune.problem(a, b, beta=0).reads_c


def test_dlpack_unsupported_dtype():
    with pytest.raises(gemmtune.Error, match=r"a has dtype \(DLPack code 0, 32 bits, 1 lanes\)"):
        gemmtune.problem(FakeDLPack((4, 8), code=0, bits=32), FakeDLPack((8, 3), code=0, bits=32))
