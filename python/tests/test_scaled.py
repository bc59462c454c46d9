"""scaled_mm without a GPU or torch: torch._scaled_mm's row-major call becomes the library's
column-major float8 problem (checked by running both definitions in pure Python over the
tensors' memory), its scales go to the right operand in the layouts of gemmtune/types.hpp, bad
arguments are ValueError or TypeError naming the argument and the expected shape, the library
takes the problem and its scales (its own messages name the scale shapes it wants), and the
recorded line names the scaling, which gemm-tune reads back. use_fast_accum makes the tensor and
row problems accumulate fast (their lines say accum=fast) and leaves blockwise ones precise; an
f32 output is the library's to refuse or run."""
import ctypes
import itertools
import json
import os
import random
import re
import subprocess
import threading

import pytest

import gemmtune
from conftest import ROOT, FakeDLPack, bin_dir, no_gpu_only
from gemmtune import _api, _library
from gemmtune._plan import DataTypes, Problem
from gemmtune._scaled import BLOCK, ScaleSource, Tensor, ceil_div, plan_scaled_mm

GPU = 0


def header_enum(prefix):
    """NAME -> value of the enumerators `prefix`NAME = value in gemmtune.h."""
    text = (ROOT / "runtime" / "include" / "gemmtune" / "gemmtune.h").read_text()
    return {name.lower(): int(value)
            for name, value in re.findall(rf"\b{prefix}(\w+) = (\d+)", text)}


def test_the_scaling_codes_and_attributes_are_gemmtune_hs():
    assert header_enum("GEMMTUNE_SCALING_") == _library.SCALINGS
    attributes = header_enum("GEMMTUNE_MATMUL_DESC_")
    assert attributes["scaling"] == _library.SCALING_ATTRIBUTE
    assert attributes["scale_a_pointer"] == _library.SCALE_A_POINTER
    assert attributes["scale_b_pointer"] == _library.SCALE_B_POINTER


def test_the_accumulation_codes_and_attribute_are_gemmtune_hs():
    assert header_enum("GEMMTUNE_ACCUMULATION_") == _library.ACCUMULATIONS == {
        "precise": 0, "fast": 1}
    assert header_enum("GEMMTUNE_MATMUL_DESC_")["accumulation"] == \
        _library.ACCUMULATION_ATTRIBUTE
    desc = _library.MatmulDesc(("e4m3", "e4m3", "bf16", "bf16", "f32"), "tn", "row",
                               accumulation="fast")
    assert desc.get(_library.ACCUMULATION_ATTRIBUTE) == _library.ACCUMULATIONS["fast"]
    assert desc.get(_library.SCALING_ATTRIBUTE) == _library.SCALINGS["row"]
    default = _library.MatmulDesc(("e4m3", "e4m3", "bf16", "bf16", "f32"), "tn", "row")
    assert default.get(_library.ACCUMULATION_ATTRIBUTE) == _library.ACCUMULATIONS["precise"]
    with pytest.raises(gemmtune.Error, match=r"^unknown accumulation 'quick' \(expected precise "
                                             r"or fast\)$"):
        _library.MatmulDesc(("e4m3", "e4m3", "bf16", "bf16", "f32"), "tn", "row",
                            accumulation="quick")


# ---------------------------------------------------------------------------------------------
# Tensors as torch lays them out


def row_major(shape, dtype, device=GPU):
    strides = (shape[1], 1) if len(shape) == 2 else (1,) * len(shape)
    return Tensor(tuple(shape), strides, dtype, device)


def column_major(shape, dtype, device=GPU, ld=None):
    """A (rows, cols) tensor stored column by column: the .t() of a row-major (cols, rows)."""
    return Tensor(tuple(shape), (1, ld or shape[0]), dtype, device)


def operands(M, N, K, scaling, a_dtype="e4m3", b_dtype="e4m3"):
    """a, b, scale_a, scale_b as torch._scaled_mm takes them."""
    a = row_major((M, K), a_dtype)
    b = column_major((K, N), b_dtype)  # W.t() of a row-major (N, K) weight W
    kb, nb = ceil_div(K, BLOCK), ceil_div(N, BLOCK)
    if scaling == "tensor":
        scales = Tensor((), (), "f32", GPU), Tensor((1,), (1,), "f32", GPU)
    elif scaling == "row":
        scales = row_major((M, 1), "f32"), row_major((1, N), "f32")
    else:  # torch's: both outer-dim-major
        scales = column_major((M, kb), "f32"), column_major((kb, nb), "f32")
    return (a, b) + scales


SHAPES = [(64, 2112, 7168), (300, 256, 640), (1, 16, 256), (7, 130, 260)]  # M, N, K


@pytest.mark.parametrize("M,N,K", SHAPES)
@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
def test_the_library_problem_is_tn_with_the_weights_as_a(M, N, K, scaling):
    plan = plan_scaled_mm(*operands(M, N, K, scaling, "e4m3", "e5m2"), "bf16")
    # D^T = b^T a^T: the library's A is b (e5m2, N x K as op(A)), its B is a; m = N, n = M.
    assert plan.problem == Problem("e5m2*e4m3->bf16", "tn", N, M, K, K, K, N, False, scaling)
    assert plan.types == DataTypes("e5m2", "e4m3", "bf16", "bf16")
    assert (plan.scaling, plan.shape, plan.device) == (scaling, (M, N), GPU)
    # The library's A scales are torch's scale_b, its B scales torch's scale_a, with the
    # shapes of types.hpp's scale_shape_a/b for the library's m = N, n = M.
    kb, nb = ceil_div(K, BLOCK), ceil_div(N, BLOCK)
    want = {"tensor": ((1, 1), (1, 1)), "row": ((N, 1), (M, 1)), "block": ((nb, kb), (M, kb))}
    assert (plan.scale_a.argument, plan.scale_b.argument) == ("scale_b", "scale_a")
    assert ((plan.scale_a.rows, plan.scale_a.cols), (plan.scale_b.rows, plan.scale_b.cols)) == \
        want[scaling]
    # Torch's layouts are read in place but for blockwise scale_b, which is transposed (unless
    # it has one block row or column, when both layouts are the same).
    assert not plan.scale_b.copy
    assert plan.scale_a.copy == (scaling == "block" and kb > 1 and nb > 1)


def test_a_bias_is_c_read_with_beta_1_and_out_gives_ldc():
    a, b, sa, sb = operands(64, 2112, 7168, "block")
    plan = plan_scaled_mm(a, b, sa, sb, "f16", bias=Tensor((2112,), (1,), "f16", GPU),
                          out=Tensor((64, 2112), (2120, 1), "f16", GPU))
    assert plan.problem == Problem("e4m3*e4m3->f16", "tn", 2112, 64, 7168, 7168, 7168, 2120,
                                   True, "block")
    assert plan.problem.shape_line() == \
        "2112 64 7168 e4m3*e4m3->f16 tn scaling=block ldc=2120 beta=1"


def test_padded_operands_give_their_leading_dimensions():
    a = Tensor((64, 640), (656, 1), "e4m3", GPU)  # rows of 656 bytes
    b = column_major((640, 256), "e4m3", ld=672)
    plan = plan_scaled_mm(a, b, *operands(64, 256, 640, "row")[2:], "bf16")
    assert (plan.problem.lda, plan.problem.ldb) == (672, 656)  # A is b, B is a


def test_scales_in_other_layouts_are_copied_into_the_librarys():
    M, N, K = 300, 256, 640
    kb, nb = ceil_div(K, BLOCK), ceil_div(N, BLOCK)
    a, b = operands(M, N, K, "block")[:2]
    # Row-major blockwise scales: scale_a must be copied (outer-dim-major), scale_b is the
    # library's A scales as they lie.
    plan = plan_scaled_mm(a, b, row_major((M, kb), "f32"), row_major((kb, nb), "f32"), "bf16")
    assert plan.scale_a == ScaleSource("scale_b", nb, kb, "contiguous", False)
    assert plan.scale_b == ScaleSource("scale_a", M, kb, "outer-dim-major", True)
    # Rowwise scales with a stride (a column of a wider tensor) are copied; torch's are not.
    plan = plan_scaled_mm(a, b, Tensor((M, 1), (2, 1), "f32", GPU),
                          Tensor((1, N), (2 * N, 2), "f32", GPU), "bf16")
    assert plan.scale_a == ScaleSource("scale_b", N, 1, "contiguous", True)
    assert plan.scale_b == ScaleSource("scale_a", M, 1, "contiguous", True)


def test_an_empty_product_has_no_problem():
    plan = plan_scaled_mm(*operands(0, 256, 640, "tensor"), "bf16")
    assert plan.problem is None and plan.shape == (0, 256)


@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
def test_use_fast_accum_is_fast_for_tensor_and_row_scaling_and_precise_for_block(scaling):
    M, N, K = 64, 2112, 7168
    want = "precise" if scaling == "block" else "fast"
    fast = plan_scaled_mm(*operands(M, N, K, scaling), "bf16", use_fast_accum=True)
    assert (fast.accumulation, fast.problem.accumulation) == (want, want)
    assert fast.problem == Problem("e4m3*e4m3->bf16", "tn", N, M, K, K, K, N, False, scaling,
                                   want)
    line = f"2112 64 7168 e4m3*e4m3->bf16 tn scaling={scaling}"
    assert fast.problem.shape_line() == line + (" accum=fast" if want == "fast" else "")
    # Without the flag every scaling is precise: the problem of before, its line unchanged.
    precise = plan_scaled_mm(*operands(M, N, K, scaling), "bf16")
    assert (precise.accumulation, precise.problem.accumulation) == ("precise", "precise")
    assert precise.problem == Problem("e4m3*e4m3->bf16", "tn", N, M, K, K, K, N, False, scaling)
    assert precise.problem.shape_line() == line
    assert (fast.problem == precise.problem) == (scaling == "block")
    # The flag is torch's truth value; an empty product has no problem but keeps the answer.
    assert plan_scaled_mm(*operands(M, N, K, scaling), "bf16",
                          use_fast_accum=1).accumulation == want
    assert plan_scaled_mm(*operands(0, N, K, scaling), "bf16",
                          use_fast_accum=True).accumulation == want


def test_an_f32_output_is_planned_and_left_to_the_library():
    # torch._scaled_mm writes float32 too: the plan makes the problem, and the library (the
    # GPU's kernels) decides whether it runs; a bias goes with bf16 or f16 only, as torch's.
    for scaling in ("tensor", "row", "block"):
        plan = plan_scaled_mm(*operands(64, 2112, 7168, scaling), "f32")
        assert plan.types == DataTypes("e4m3", "e4m3", "f32", "f32")
        assert plan.problem.dtype == "e4m3*e4m3->f32"
        assert plan.problem.shape_line() == f"2112 64 7168 e4m3*e4m3->f32 tn scaling={scaling}"
    plan = plan_scaled_mm(*operands(64, 2112, 7168, "row"), "f32",
                          out=Tensor((64, 2112), (2120, 1), "f32", GPU), use_fast_accum=True)
    assert plan.problem == Problem("e4m3*e4m3->f32", "tn", 2112, 64, 7168, 7168, 7168, 2120,
                                   False, "row", "fast")


# ---------------------------------------------------------------------------------------------
# The mapping computes torch's result: both definitions, in pure Python, over memory


class Memory:
    """A tensor's values laid out at its strides in a flat list (the rest is noise)."""

    def __init__(self, tensor, values, rng):
        self.tensor = tensor
        size = 1 + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.strides))
        self.data = [rng.uniform(-9, 9) for _ in range(size)]
        for index in itertools.product(*(range(n) for n in tensor.shape)):
            self.data[sum(i * s for i, s in zip(index, tensor.strides))] = values(*index)

    def __getitem__(self, index):
        return self.data[sum(i * s for i, s in zip(index, self.tensor.strides))]


def laid_out(memory, source, rng):
    """What the torch front end hands the library for these scales: the tensor itself, or its
    copy in the source's layout (contiguous or outer-dim-major)."""
    if not source.copy:
        return memory
    t = memory.tensor
    rows, cols = t.shape
    strides = (cols, 1) if source.layout == "contiguous" else (1, rows)
    return Memory(t._replace(strides=strides), lambda *i: memory[i], rng)


def torch_scaled_mm(a, b, scale_a, scale_b, scaling, M, N, K):
    """torch._scaled_mm's definition, row-major: out[i][j] = sum over l of
    a[i][l] * sa(i, l) * b[l][j] * sb(l, j)."""
    def sa(i, l):
        return {"tensor": lambda: scale_a.data[0], "row": lambda: scale_a[i, 0],
                "block": lambda: scale_a[i, l // BLOCK]}[scaling]()

    def sb(l, j):
        return {"tensor": lambda: scale_b.data[0], "row": lambda: scale_b[0, j],
                "block": lambda: scale_b[l // BLOCK, j // BLOCK]}[scaling]()
    return [[sum(a[i, l] * sa(i, l) * b[l, j] * sb(l, j) for l in range(K)) for j in range(N)]
            for i in range(M)]


def library_gemm(p, mem_a, mem_b, scales_a, scales_b, mem_c):
    """The library's definition (cuBLAS's column-major, gemmtune/types.hpp's scales) over raw
    memory: D[i + j ldc] = sum over l of op(A)(i, l) sA(i, l) op(B)(l, j) sB(l, j); the scales
    of each operand a column-major rows x cols matrix with ld = rows."""
    assert p.layout == "tn"
    rows_a = ceil_div(p.m, BLOCK)

    def sa(i, l):
        return {"tensor": lambda: scales_a[0], "row": lambda: scales_a[i],
                "block": lambda: scales_a[i // BLOCK + (l // BLOCK) * rows_a]}[p.scaling]()

    def sb(l, j):
        return {"tensor": lambda: scales_b[0], "row": lambda: scales_b[j],
                "block": lambda: scales_b[j + (l // BLOCK) * p.n]}[p.scaling]()
    for i, j in itertools.product(range(p.m), range(p.n)):
        mem_c[i + j * p.ldc] = sum(mem_a[l + i * p.lda] * sa(i, l) * mem_b[l + j * p.ldb] *
                                   sb(l, j) for l in range(p.k))


def flat(memory):
    """The library reads a tensor's memory from its first element on."""
    return memory.data


def scale_layouts(M, N, K, scaling):
    """(scale_a, scale_b) in torch's layouts and in others, which the call copies."""
    kb, nb = ceil_div(K, BLOCK), ceil_div(N, BLOCK)
    if scaling == "tensor":
        return [(Tensor((), (), "f32", GPU), Tensor((1,), (1,), "f32", GPU)),
                (Tensor((1, 1), (5, 3), "f32", GPU), Tensor((1, 1, 1), (1, 1, 1), "f32", GPU))]
    if scaling == "row":  # torch's (contiguous), and columns of wider tensors
        return [(row_major((M, 1), "f32"), row_major((1, N), "f32")),
                (Tensor((M, 1), (2, 1), "f32", GPU), Tensor((1, N), (2 * N, 2), "f32", GPU))]
    return [(column_major((M, kb), "f32"), column_major((kb, nb), "f32")),  # torch's
            (row_major((M, kb), "f32"), row_major((kb, nb), "f32")),
            (column_major((M, kb), "f32", ld=M + 1), column_major((kb, nb), "f32", ld=kb + 2))]


@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
@pytest.mark.parametrize("M,N,K", [(3, 130, 260), (2, 5, 3), (1, 257, 129)])
def test_the_library_computes_what_torch_scaled_mm_does(scaling, M, N, K):
    rng = random.Random(M * 1000 + N * 10 + K)
    a_t = row_major((M, K), "e4m3")
    b_t = column_major((K, N), "e4m3", ld=K + 3)  # a padded weight
    for sa_t, sb_t in scale_layouts(M, N, K, scaling):
        a = Memory(a_t, lambda i, l: rng.uniform(-1, 1), rng)
        b = Memory(b_t, lambda l, j: rng.uniform(-1, 1), rng)
        sa = Memory(sa_t, lambda *i: rng.uniform(0.5, 2), rng)
        sb = Memory(sb_t, lambda *i: rng.uniform(0.5, 2), rng)
        want = torch_scaled_mm(a, b, sa, sb, scaling, M, N, K)

        plan = plan_scaled_mm(a_t, b_t, sa_t, sb_t, "bf16")
        assert plan.problem.lda == K + 3
        scales = {"scale_a": sa, "scale_b": sb}
        for source in (plan.scale_a, plan.scale_b):
            scales[source.argument] = laid_out(scales[source.argument], source, rng)
        out = [0.0] * (M * N)  # row-major (M, N): ldc = N
        library_gemm(plan.problem, flat(b), flat(a), flat(scales[plan.scale_a.argument]),
                     flat(scales[plan.scale_b.argument]), out)
        for i, j in itertools.product(range(M), range(N)):
            assert out[i * N + j] == pytest.approx(want[i][j], rel=1e-9, abs=1e-9), (i, j, sa_t)


# ---------------------------------------------------------------------------------------------
# Bad arguments: ValueError or TypeError (gemmtune.Error too), naming the argument


def refused(error, match, *args, **kwargs):
    with pytest.raises(error, match=match) as e:
        plan_scaled_mm(*args, **kwargs)
    assert isinstance(e.value, gemmtune.Error) and e.value.code == "invalid_argument"
    return str(e.value)


M, N, K = 64, 2112, 7168
A, B, SA, SB = operands(M, N, K, "block")


def test_shapes_that_do_not_multiply():
    refused(ValueError, r"^a must be a 2-D \(M, K\) matrix, got shape \(64, 7168, 1\)$",
            A._replace(shape=(64, 7168, 1), strides=(7168, 1, 1)), B, SA, SB, "bf16")
    refused(ValueError, r"^b must be \(K, N\) = \(7168, N\) for a of shape \(64, 7168\), got "
                        r"shape \(2112, 7168\)$",
            A, B._replace(shape=(2112, 7168)), SA, SB, "bf16")
    refused(ValueError, r"^b must be \(K, N\) = \(7168, N\) .*got shape \(7168,\)$",
            A, B._replace(shape=(7168,), strides=(1,)), SA, SB, "bf16")


def test_dtypes():
    refused(TypeError, r"^a has dtype bfloat16: scaled_mm multiplies float8 a and b "
                       r"\(float8_e4m3fn or float8_e5m2; gemmtune.matmul takes the others\)$",
            A._replace(dtype="bf16"), B, SA, SB, "bf16")
    refused(TypeError, r"^b has dtype float32: scaled_mm multiplies float8",
            A, B._replace(dtype="f32"), SA, SB, "bf16")
    refused(TypeError, r"^out_dtype is float8_e4m3fn: scaled_mm writes bfloat16, float16 or "
                       r"float32$", A, B, SA, SB, "e4m3")
    refused(TypeError, r"^out_dtype is float64: ", A, B, SA, SB, "float64")
    refused(TypeError, r"^scale_a has dtype bfloat16: scales are float32$",
            A, B, SA._replace(dtype="bf16"), SB, "bf16")
    refused(TypeError, r"^scale_b has dtype float64: scales are float32$",
            A, B, SA, SB._replace(dtype="float64"), "bf16")


def test_layouts_of_a_and_b():
    refused(ValueError, r"^a must be row-major: \(64, 7168\) with stride 1 along K, got strides "
                        r"\(1, 64\); pass a.contiguous\(\)$",
            A._replace(strides=(1, 64)), B, SA, SB, "bf16")
    refused(ValueError, r"^b must be column-major: \(7168, 2112\) with stride 1 along K, the "
                        r"transpose of a row-major \(2112, 7168\) weight W \(b = W.t\(\)\), got "
                        r"strides \(2112, 1\); pass b.t\(\).contiguous\(\).t\(\)$",
            A, B._replace(strides=(2112, 1)), SA, SB, "bf16")
    refused(ValueError, r"^a must be row-major", A._replace(strides=(7168, 2)), B, SA, SB,
            "bf16")
    refused(ValueError, r"^a must be row-major", A._replace(strides=(100, 1)), B, SA, SB,
            "bf16")  # rows that overlap


def test_scale_shapes_name_what_each_scaling_takes():
    forms = (r"scaled_mm takes per-tensor \(one element each\), rowwise \(scale_a \(64, 1\), "
             r"scale_b \(1, 2112\)\) or blockwise \(scale_a \(64, 56\): 1x128 blocks of a, "
             r"outer-dim-major; scale_b \(56, 17\): 128x128 blocks of b\)")
    # scale_a says the scaling; scale_b does not follow it.
    refused(ValueError, r"^scale_b has shape \(17, 56\): with scale_a of shape \(64, 56\) it must "
                        r"be \(56, 17\) \(blockwise\); " + forms + "$",
            A, B, SA, SB._replace(shape=(17, 56)), "bf16")
    refused(ValueError, r"^scale_b has shape \(2112,\): with scale_a of shape \(64, 1\) it must "
                        r"be \(1, 2112\) \(rowwise\)",
            A, B, row_major((64, 1), "f32"), Tensor((2112,), (1,), "f32", GPU), "bf16")
    refused(ValueError, r"^scale_b has shape \(1, 2112\): with scale_a of shape \(1,\) it must be "
                        r"one element \(per-tensor\)",
            A, B, Tensor((1,), (1,), "f32", GPU), row_major((1, 2112), "f32"), "bf16")
    # scale_a fits nothing: torch's other blockwise forms among them.
    message = refused(ValueError, r"^scale_a has shape \(1, 56\): for a of shape \(64, 7168\) and "
                                  r"b of shape \(7168, 2112\), " + forms,
                      A, B, row_major((1, 56), "f32"), row_major((56, 17), "f32"), "bf16")
    assert message.endswith("torch's other blockwise forms (128x128 blocks of a, 1x128 of b) "
                            "are not supported")


def test_where_two_scalings_fit_torchs_order_decides():
    # One block of each: blockwise scales are one element each, which is per-tensor.
    a, b = row_major((1, 16), "e4m3"), column_major((16, 16), "e4m3")
    assert plan_scaled_mm(a, b, *operands(1, 16, 16, "block")[2:], "bf16").scaling == "tensor"
    # M = 1: scale_a (1, 1) is per-tensor and rowwise; with scale_b (1, N) it is rowwise.
    a, b = row_major((1, 640), "e4m3"), column_major((640, 256), "e4m3")
    plan = plan_scaled_mm(a, b, row_major((1, 1), "f32"), row_major((1, 256), "f32"), "bf16")
    assert plan.scaling == "row"
    # K <= 128: (M, 1) is rowwise and blockwise; with scale_b (1, ceil(N/128)) blockwise.
    a, b = row_major((64, 128), "e4m3"), column_major((128, 256), "e4m3")
    assert plan_scaled_mm(a, b, row_major((64, 1), "f32"), row_major((1, 256), "f32"),
                          "bf16").scaling == "row"
    assert plan_scaled_mm(a, b, row_major((64, 1), "f32"), row_major((1, 2), "f32"),
                          "bf16").scaling == "block"
    message = refused(ValueError, r"^scale_b has shape \(1, 3\): with scale_a of shape \(64, 1\) "
                                  r"it must be \(1, 256\) \(rowwise\) or \(1, 2\) \(blockwise\)",
                      a, b, row_major((64, 1), "f32"), row_major((1, 3), "f32"), "bf16")
    assert "per-tensor" in message


def test_bias_and_out():
    bias = Tensor((N,), (1,), "bf16", GPU)
    refused(ValueError, r"^bias must be \(N,\) = \(2112,\), got shape \(1, 2112\)$",
            A, B, SA, SB, "bf16", bias=bias._replace(shape=(1, N), strides=(N, 1)))
    refused(TypeError, r"^bias has dtype float16: it must be out_dtype's, bfloat16$",
            A, B, SA, SB, "bf16", bias=bias._replace(dtype="f16"))
    refused(TypeError, r"^bias goes with a bfloat16 or float16 output, not float32",
            A, B, SA, SB, "f32", bias=bias._replace(dtype="f32"))
    out = row_major((M, N), "bf16")
    refused(ValueError, r"^out must be \(M, N\) = \(64, 2112\), got shape \(2112, 64\)$",
            A, B, SA, SB, "bf16", out=row_major((N, M), "bf16"))
    refused(TypeError, r"^out has dtype float16 but out_dtype is bfloat16: pass "
                       r"out_dtype=float16 too",
            A, B, SA, SB, "bf16", out=out._replace(dtype="f16"))
    refused(ValueError, r"^out must be row-major: \(64, 2112\) with stride 1 along N, got strides "
                        r"\(1, 64\)$", A, B, SA, SB, "bf16", out=out._replace(strides=(1, M)))


def test_devices():
    refused(ValueError, r"^scale_b is not on a CUDA GPU: scaled_mm multiplies tensors in GPU "
                        r"memory \(move it with .cuda\(\)\)$",
            A, B, SA, SB._replace(device=-2), "bf16")
    refused(ValueError, r"^a is on GPU 0 but bias is on GPU 1: scaled_mm needs every tensor on "
                        r"one GPU$", A, B, SA, SB, "bf16", bias=Tensor((N,), (1,), "bf16", 1))
    # problem_scaled_mm needs no GPU: nothing is checked of the devices.
    plan = plan_scaled_mm(*(t._replace(device=-2) for t in (A, B, SA, SB)), "bf16",
                          need_gpu=False)
    assert plan.problem.scaling == "block" and plan.device == -1


# ---------------------------------------------------------------------------------------------
# The library takes the problem and its scales


def fake_operands(M, N, K, scaling, base=0x7F0000000000):
    """DLPack stand-ins (no memory behind them) in torch's layouts: e4m3 a and b, f32 scales."""
    kb, nb = ceil_div(K, BLOCK), ceil_div(N, BLOCK)
    a = FakeDLPack((M, K), code=10, bits=8, ptr=base)
    b = FakeDLPack((K, N), code=10, bits=8, strides=(1, K), ptr=base + 0x1000000)
    shapes = {"tensor": (((1,), None), ((1,), None)),
              "row": (((M, 1), None), ((1, N), None)),
              "block": (((M, kb), (1, M)), ((kb, nb), (1, kb)))}[scaling]
    scales = [FakeDLPack(shape, code=2, bits=32, strides=strides, ptr=base + 0x2000000 * (i + 1))
              for i, (shape, strides) in enumerate(shapes)]
    return [a, b] + scales


def test_problem_scaled_mm_of_arrays_and_its_recorded_line(tmp_path):
    p = gemmtune.problem_scaled_mm(*fake_operands(64, 2112, 7168, "block"))
    assert p == Problem("e4m3*e4m3->bf16", "tn", 2112, 64, 7168, 7168, 7168, 2112, False,
                        "block")
    path = tmp_path / "shapes.txt"
    assert gemmtune.record(p, path)
    bias = FakeDLPack((2112,), code=2, bits=16)
    with_bias = gemmtune.problem_scaled_mm(*fake_operands(64, 2112, 7168, "block"),
                                           out_dtype="f16", bias=bias)
    assert gemmtune.record(with_bias, path)
    row = gemmtune.problem_scaled_mm(*fake_operands(300, 256, 640, "row"))
    assert gemmtune.record(row, path)
    assert not gemmtune.record(p, path)
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    # The library's lines, which gemm-tune reads back (README: scaling=block), are
    # Problem.shape_line's.
    assert lines == ["2112 64 7168 e4m3*e4m3->bf16 tn scaling=block",
                     "2112 64 7168 e4m3*e4m3->f16 tn scaling=block beta=1",
                     "256 300 640 e4m3*e4m3->bf16 tn scaling=row"]
    assert lines == [q.shape_line() for q in (p, with_bias, row)]


def test_problem_scaled_mm_says_the_accumulation_and_record_writes_it(tmp_path):
    fast = {scaling: gemmtune.problem_scaled_mm(*fake_operands(64, 2112, 7168, scaling),
                                                use_fast_accum=True)
            for scaling in ("tensor", "row", "block")}
    assert {s: p.accumulation for s, p in fast.items()} == {
        "tensor": "fast", "row": "fast", "block": "precise"}
    assert fast["row"] == Problem("e4m3*e4m3->bf16", "tn", 2112, 64, 7168, 7168, 7168, 2112,
                                  False, "row", "fast")
    assert gemmtune.problem_scaled_mm(*fake_operands(64, 2112, 7168, "row")).accumulation == \
        "precise"
    # The library's line (GEMMTUNE_RECORD's) says accum=fast after the scaling, and a fast
    # problem is a line apart from the precise one of the same sizes.
    path = tmp_path / "shapes.txt"
    precise_row = fast["row"]._replace(accumulation="precise")
    for p in (fast["tensor"], fast["row"], precise_row, fast["block"]):
        assert gemmtune.record(p, path)
    assert not gemmtune.record(fast["row"], path)
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    assert lines == ["2112 64 7168 e4m3*e4m3->bf16 tn scaling=tensor accum=fast",
                     "2112 64 7168 e4m3*e4m3->bf16 tn scaling=row accum=fast",
                     "2112 64 7168 e4m3*e4m3->bf16 tn scaling=row",
                     "2112 64 7168 e4m3*e4m3->bf16 tn scaling=block"]
    assert lines == [q.shape_line() for q in (fast["tensor"], fast["row"], precise_row,
                                              fast["block"])]
    # Fast blockwise is no problem: the library says why, and writes nothing.
    with pytest.raises(gemmtune.Error, match=r"fast accumulation is for float8 with tensor or row "
                                             r"scaling, not scaling block") as e:
        gemmtune.record(fast["block"]._replace(accumulation="fast"), path)
    assert e.value.code == "invalid_argument"
    assert len([line for line in path.read_text().splitlines()
                if not line.startswith("#")]) == 4


def test_gemm_tune_reads_the_recorded_scaled_problems_back(tmp_path):
    gemm_tune = bin_dir() / "gemm-tune"
    if not gemm_tune.exists():
        pytest.skip(f"{gemm_tune} is not built")
    path = tmp_path / "shapes.txt"
    for p in (gemmtune.problem_scaled_mm(*fake_operands(64, 2112, 7168, "block")),
              gemmtune.problem_scaled_mm(*fake_operands(300, 256, 640, "row"), out_dtype="f16",
                                         bias=FakeDLPack((256,), code=2, bits=16))):
        gemmtune.record(p, path)
    # A dry run parses the file and compiles one candidate per problem, with no GPU.
    env = dict(os.environ, GEMMTUNE_CACHE_DIR=str(tmp_path / "cache"))
    result = subprocess.run([str(gemm_tune), "--shapes", str(path), "--dry-run", "--arch",
                             "sm_90a", "--budget", "1", "--json"], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    described = [entry["problem"] for entry in json.loads(result.stdout)["problems"]]
    assert described == [
        "e4m3*e4m3->bf16 tn 2112x64x7168 lda=7168 ldb=7168 ldc=2112 align=16 scaling=block",
        "e4m3*e4m3->f16 tn 256x300x640 lda=640 ldb=640 ldc=256 align=16 scaling=row beta!=0",
    ]


def test_scaled_mm_without_torch_says_so():
    if gemmtune.torch_operators or _api.torch_api is not None:
        pytest.skip("torch is importable here")
    with pytest.raises(TypeError, match="scaled_mm takes torch tensors"):
        gemmtune.scaled_mm(*fake_operands(64, 256, 640, "tensor"))


def plan_of(M, N, K, scaling):
    return plan_scaled_mm(*operands(M, N, K, scaling), "bf16")


def test_the_library_wants_the_scale_shapes_the_plan_says():
    # Without a scale pointer the library names the scales it wants, as rows x cols of
    # scale_shape_a/b: the plan's. This is checked before any GPU is touched.
    for (m, n, k), scaling in itertools.product(SHAPES, ["tensor", "row", "block"]):
        plan = plan_of(m, n, k, scaling)
        for missing, source in (("A", plan.scale_a), ("B", plan.scale_b)):
            pointers = {"scale_a": 0x7F0004000000, "scale_b": 0x7F0008000000}
            pointers[source.argument] = 0
            with pytest.raises(gemmtune.Error, match=(
                    rf"^scaling {scaling} needs the scales of {missing}: GEMMTUNE_MATMUL_DESC_"
                    rf"SCALE_{missing}_POINTER is not set \(a device pointer to {source.rows} x "
                    rf"{source.cols} fp32 scales\)$")) as e:
                _api.run_scaled(plan, 0x7F0000000000, 0x7F0001000000, pointers, 0x7F0002000000,
                                0)
            assert e.value.code == "invalid_argument"


class CountingLibrary:
    """libgemmtune with gemmtune_matmul recorded instead of run, and the scale pointers and the
    accumulation of the descriptor it was given read back at that moment."""

    def __init__(self, lib):
        self.lib, self.matmuls, self.accumulations = lib, [], []

    def gemmtune_matmul(self, device, handle, *args):
        pointer = ctypes.c_void_p()
        scales = []
        for attribute in (_library.SCALE_A_POINTER, _library.SCALE_B_POINTER):
            _library.check(self.lib.gemmtune_matmul_desc_get_attribute(
                handle, attribute, ctypes.byref(pointer), ctypes.sizeof(pointer), None))
            scales.append(pointer.value)
        value = ctypes.c_int32()
        _library.check(self.lib.gemmtune_matmul_desc_get_attribute(
            handle, _library.SCALING_ATTRIBUTE, ctypes.byref(value), 4, None))
        self.matmuls.append((device, handle, value.value, tuple(scales)) + args)
        _library.check(self.lib.gemmtune_matmul_desc_get_attribute(
            handle, _library.ACCUMULATION_ATTRIBUTE, ctypes.byref(value), 4, None))
        self.accumulations.append(value.value)
        return 0

    def __getattr__(self, name):
        return getattr(self.lib, name)


def test_the_call_passes_b_as_a_and_each_scale_to_its_operand(monkeypatch):
    counting = CountingLibrary(_library.library())
    monkeypatch.setattr(_library, "_lib", counting)
    plan = plan_scaled_mm(*operands(300, 256, 640, "block"), "bf16",
                          bias=Tensor((256,), (1,), "bf16", GPU))
    a, b, out, stream = 0x7F0000000000, 0x7F0001000000, 0x7F0002000000, 7
    _api.run_scaled(plan, a, b, {"scale_a": 0x7F0003000000, "scale_b": 0x7F0004000000}, out,
                    stream)
    (device, handle, scaling, scales, m, n, k, alpha, first, lda, second, ldb, beta, c, ldc,
     on) = counting.matmuls[-1]
    assert (device, scaling, m, n, k, first, lda, second, ldb, c, ldc, on) == (
        GPU, _library.SCALINGS["block"], 256, 300, 640, b, 640, a, 640, out, 256, stream)
    # The library's A scales are torch's scale_b; its B scales torch's scale_a.
    assert scales == (0x7F0004000000, 0x7F0003000000)
    assert [ctypes.c_float.from_address(x).value if isinstance(x, int) else x._obj.value
            for x in (alpha, beta)] == [1.0, 1.0]  # beta = 1: the bias is in C
    # The descriptor is this thread's: another thread calls with its own.
    handles = []
    thread = threading.Thread(target=lambda: handles.append(
        _library.scaled_descriptor(plan.types, "tn", "block").handle))
    thread.start()
    thread.join()
    assert handles and handles[0] != handle
    assert _library.scaled_descriptor(plan.types, "tn", "block").handle == handle
    # The cached, shared descriptor (select, record) carries no scale pointers.
    shared = _library.descriptor(plan.types, "tn", "block")
    assert shared.handle != handle
    assert shared.get(_library.SCALING_ATTRIBUTE) == _library.SCALINGS["block"]
    assert shared.get_pointer(_library.SCALE_A_POINTER) == 0
    assert counting.accumulations[-1] == _library.ACCUMULATIONS["precise"]


@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
def test_the_call_asks_the_library_for_the_plans_accumulation(monkeypatch, scaling):
    counting = CountingLibrary(_library.library())
    monkeypatch.setattr(_library, "_lib", counting)
    scales = {"scale_a": 0x7F0003000000, "scale_b": 0x7F0004000000}
    handles = {}
    # Fast, precise, fast again: each call's descriptor says its own plan's accumulation.
    for use_fast_accum in (True, False, True):
        plan = plan_scaled_mm(*operands(300, 256, 640, scaling), "bf16",
                              use_fast_accum=use_fast_accum)
        _api.run_scaled(plan, 0x7F0000000000, 0x7F0001000000, scales, 0x7F0002000000, 0)
        handles.setdefault(plan.accumulation, set()).add(counting.matmuls[-1][1])
        assert counting.matmuls[-1][2] == _library.SCALINGS[scaling]
    fast, precise = _library.ACCUMULATIONS["fast"], _library.ACCUMULATIONS["precise"]
    if scaling == "block":  # blockwise is always precise: one descriptor
        assert counting.accumulations == [precise] * 3
        assert list(handles) == ["precise"] and len(handles["precise"]) == 1
    else:  # two descriptors of this thread, each kept
        assert counting.accumulations == [fast, precise, fast]
        assert len(handles["fast"]) == len(handles["precise"]) == 1
        assert handles["fast"] != handles["precise"]


@no_gpu_only
def test_without_a_gpu_the_library_takes_the_problem_and_says_no_gpu():
    # Fast tensor and row problems and f32 outputs too: the GPU's kernels decide those.
    for scaling, out_dtype, use_fast_accum in itertools.product(
            ("tensor", "row", "block"), ("bf16", "f32"), (False, True)):
        plan = plan_scaled_mm(*operands(64, 2112, 7168, scaling), out_dtype,
                              use_fast_accum=use_fast_accum)
        with pytest.raises(gemmtune.Error, match="^no GPU: ") as e:
            _api.run_scaled(plan, 0x7F0000000000, 0x7F0001000000,
                            {"scale_a": 0x7F0003000000, "scale_b": 0x7F0004000000},
                            0x7F0002000000, 0)
        assert e.value.code == "no_device"
    with pytest.raises(gemmtune.Error, match="^no GPU: "):
        gemmtune.select_scaled_mm(*fake_operands(64, 2112, 7168, "block"))
