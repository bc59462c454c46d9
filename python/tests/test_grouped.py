"""grouped_mm, grouped_mm_masked and bmm without a GPU or torch: torch._grouped_mm's 2-D x 3-D
call, DeepGEMM's masked layout and torch.bmm become the library's grouped problem (checked by
running both definitions in pure Python over the tensors' memory, for every striding of x, w and
out, for ragged routings and for counts from 0 to the capacity), operands that cannot be read in
place are copied, bad arguments are ValueError or TypeError naming the argument, and the library
takes the groups, their ends or counts and the group layout through the descriptor."""
import ctypes
import itertools
import random
import re
import threading

import pytest

import gemmtune
from conftest import ROOT, no_gpu_only
from gemmtune import _api, _library
from gemmtune._grouped import GroupedPlan, plan_bmm, plan_grouped_mm, plan_grouped_mm_masked
from gemmtune._plan import DataTypes, Problem
from gemmtune._scaled import Tensor

GPU = 0


def header_enum(prefix):
    """NAME -> value of the enumerators `prefix`NAME = value in gemmtune.h."""
    text = (ROOT / "runtime" / "include" / "gemmtune" / "gemmtune.h").read_text()
    return {name.lower(): int(value)
            for name, value in re.findall(rf"\b{prefix}(\w+) = (\d+)", text)}


def test_the_group_attributes_are_gemmtune_hs():
    attributes = header_enum("GEMMTUNE_MATMUL_DESC_")
    assert attributes["groups"] == _library.GROUPS_ATTRIBUTE
    assert attributes["group_ends_pointer"] == _library.GROUP_ENDS_POINTER
    assert attributes["group_layout"] == _library.GROUP_LAYOUT_ATTRIBUTE
    assert header_enum("GEMMTUNE_GROUP_LAYOUT_") == _library.GROUP_LAYOUTS


# ---------------------------------------------------------------------------------------------
# Tensors as torch lays them out


def contiguous(shape, dtype="bf16", device=GPU):
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return Tensor(tuple(shape), tuple(reversed(strides)), dtype, device)


def offs(G, device=GPU):
    return Tensor((G,), (1,), "int32", device)


# x (T, K): (strides, op(B), ldb, copied). Copied ones are read as x.contiguous(): ldb = K. The
# grouped kernels read op(B) = N only: a column-major x is copied too.
def x_layouts(T, K):
    return {
        "row-major": ((K, 1), "n", K, False),
        "padded": ((K + 3, 1), "n", K + 3, False),
        "column-major": ((1, T), "n", K, True),  # x = X.t() of a contiguous (K, T) X
        "column-major padded": ((1, T + 2), "n", K, True),
        "no unit stride": ((2 * K, 2), "n", K, True),
    }


# w (G, K, N): (strides, op(A), lda, copied). Copied ones are read as w.contiguous(): lda = N.
def w_layouts(G, K, N):
    return {
        "row-major": ((K * N, N, 1), "n", N, False),
        "padded": ((K * (N + 2), N + 2, 1), "n", N + 2, False),
        "transposed": ((N * K, 1, K), "t", K, False),  # W.transpose(1, 2), W (G, N, K)
        "transposed padded": ((N * (K + 3), 1, K + 3), "t", K + 3, False),
        "gaps between groups": ((K * N + 5, N, 1), "n", N, True),
        "one matrix for all": ((0, N, 1), "n", N, True),  # W.expand(G, K, N)
        "every other column": ((2 * K * N, 2 * N, 2), "n", N, True),
    }


@pytest.mark.parametrize("x_name", list(x_layouts(7, 5)))
@pytest.mark.parametrize("w_name", list(w_layouts(3, 5, 4)))
def test_the_problem_is_w_times_x_transposed_group_by_group(x_name, w_name):
    T, K, N, G = 300, 512, 1024, 8
    x_strides, op_b, ldb, copy_x = x_layouts(T, K)[x_name]
    w_strides, op_a, lda, copy_w = w_layouts(G, K, N)[w_name]
    plan = plan_grouped_mm(Tensor((T, K), x_strides, "bf16", GPU),
                           Tensor((G, K, N), w_strides, "bf16", GPU), offs(G))
    # D (N x T) = op(A) op(B): m = N (out features), n = T (tokens), k = K; D is the row-major
    # (T, N) result, ldc = N.
    assert plan.problem == Problem("bf16", op_a + op_b, N, T, K, lda, ldb, N)
    assert (plan.groups, plan.copy_x, plan.copy_w) == (G, copy_x, copy_w)
    assert (plan.shape, plan.device, plan.zero_rows) == ((T, N), GPU, False)


def test_the_usual_layouts():
    # Activations row-major, expert weights (G, K, N) row-major: 'nn'; nn.Linear-style weights
    # (G, N, K) transposed: 'tn', both operands K-major.
    x = contiguous((4096, 2048))
    w = contiguous((128, 2048, 1536))
    assert plan_grouped_mm(x, w, offs(128)).problem == Problem(
        "bf16", "nn", 1536, 4096, 2048, 1536, 2048, 1536)
    wt = Tensor((128, 2048, 1536), (1536 * 2048, 1, 2048), "bf16", GPU)
    assert plan_grouped_mm(x, wt, offs(128)).problem == Problem(
        "bf16", "tn", 1536, 4096, 2048, 2048, 2048, 1536)


def test_one_group_needs_no_group_stride():
    w = Tensor((1, 64, 96), (12345, 96, 1), "f16", GPU)
    plan = plan_grouped_mm(contiguous((10, 64), "f16"), w, offs(1))
    assert not plan.copy_w and plan.problem.lda == 96 and plan.groups == 1


@pytest.mark.parametrize("T,K,N", [(1, 64, 96), (10, 1, 96), (10, 64, 1), (1, 1, 1)])
def test_single_rows_and_columns(T, K, N):
    G = 2
    for w in (contiguous((G, K, N)), Tensor((G, K, N), (N * K, 1, K), "bf16", GPU)):
        plan = plan_grouped_mm(contiguous((T, K)), w, offs(G))
        assert not plan.copy_x and not plan.copy_w
        p = plan.problem
        assert (p.m, p.n, p.k) == (N, T, K)
        rows_a = N if p.layout[0] == "n" else K
        rows_b = K if p.layout[1] == "n" else T
        assert p.lda >= rows_a and p.ldb >= rows_b and p.ldc >= N


def test_out_gives_ldc_and_the_result_dtype():
    x, w = contiguous((300, 512)), contiguous((8, 512, 1024))
    plan = plan_grouped_mm(x, w, offs(8), out=Tensor((300, 1024), (1032, 1), "bf16", GPU))
    assert plan.problem.ldc == 1032 and plan.types == DataTypes.uniform("bf16")
    plan = plan_grouped_mm(x, w, offs(8), out=contiguous((300, 1024), "f32"))
    assert plan.types == DataTypes("bf16", "bf16", "f32", "f32")
    assert plan.problem.dtype == "bf16*bf16->f32"
    plan = plan_grouped_mm(x, w, offs(8), "f16")
    assert plan.problem.dtype == "bf16*bf16->f16"


def test_empty_problems():
    x, w = contiguous((300, 512)), contiguous((8, 512, 1024))
    for plan in (plan_grouped_mm(contiguous((0, 512)), w, offs(8)),
                 plan_grouped_mm(x, contiguous((8, 512, 0)), offs(8)),
                 plan_grouped_mm(x, contiguous((0, 512, 1024)), offs(0))):
        assert plan.problem is None and not plan.zero_rows
    plan = plan_grouped_mm(contiguous((300, 0)), contiguous((8, 0, 1024)), offs(8))
    assert plan.problem is None and plan.zero_rows and plan.shape == (300, 1024)
    assert plan_bmm(contiguous((4, 0, 64)), contiguous((4, 64, 32))).shape == (4, 0, 32)
    plan = plan_bmm(contiguous((4, 16, 0)), contiguous((4, 0, 32)))
    assert plan.problem is None and plan.zero_rows


# a (G, M, K) of bmm: (strides, op(B), ldb, copied).
def a_layouts(G, M, K):
    return {
        "contiguous": ((M * K, K, 1), "n", K, False),
        "padded rows": ((M * (K + 8), K + 8, 1), "n", K + 8, False),
        "transposed": ((K * M, 1, M), "n", K, True),  # A.transpose(1, 2): rows do not flatten
        "gaps between matrices": ((M * K + 8, K, 1), "n", K, True),
    }


@pytest.mark.parametrize("a_name", list(a_layouts(3, 4, 5)))
@pytest.mark.parametrize("b_name", ["row-major", "padded", "transposed", "gaps between groups"])
def test_bmm_is_grouped_mm_of_as_rows(a_name, b_name):
    G, M, K, N = 4, 64, 128, 96
    a_strides, op_b, ldb, copy_x = a_layouts(G, M, K)[a_name]
    b_strides, op_a, lda, copy_w = w_layouts(G, K, N)[b_name]
    plan = plan_bmm(Tensor((G, M, K), a_strides, "f16", GPU),
                    Tensor((G, K, N), b_strides, "f16", GPU))
    # m = N, n = G * M (group g owns columns [g M, (g+1) M)), k = K.
    assert plan.problem == Problem("f16", op_a + op_b, N, G * M, K, lda, ldb, N)
    assert (plan.groups, plan.copy_x, plan.copy_w, plan.shape) == (G, copy_x, copy_w, (G, M, N))


def test_bmm_of_single_matrices_and_rows():
    # One matrix: a's batch stride does not count; one row each: rows are G matrices apart.
    plan = plan_bmm(Tensor((1, 64, 128), (99999, 128, 1), "bf16", GPU), contiguous((1, 128, 96)))
    assert not plan.copy_x and plan.problem.ldb == 128
    plan = plan_bmm(Tensor((4, 1, 128), (136, 136, 1), "bf16", GPU), contiguous((4, 128, 96)))
    assert not plan.copy_x and plan.problem.ldb == 136
    out = Tensor((4, 64, 96), (64 * 100, 100, 1), "bf16", GPU)
    assert plan_bmm(contiguous((4, 64, 128)), contiguous((4, 128, 96)), out).problem.ldc == 100


# ---------------------------------------------------------------------------------------------
# The mapping computes torch's result: both definitions, in pure Python, over memory


class Memory:
    """A tensor's values laid out at its strides in a flat list (the rest is noise)."""

    def __init__(self, tensor, values, rng):
        self.tensor = tensor
        size = 1 + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.strides))
        self.data = [rng.uniform(-9, 9) for _ in range(max(size, 1))]
        for index in itertools.product(*(range(n) for n in tensor.shape)):
            self.data[self.offset(index)] = values(*index)

    def offset(self, index):
        return sum(i * s for i, s in zip(index, self.tensor.strides))

    def __getitem__(self, index):
        return self.data[self.offset(index)]


def as_read(memory, copied, rng):
    """What the call hands the library: the memory itself, or its contiguous copy."""
    if not copied:
        return memory
    return Memory(contiguous(memory.tensor.shape), lambda *i: memory[i], rng)


def library_grouped(p, groups, ends, a, b, d, masked=False):
    """The library's definition (gemmtune.h, GEMMTUNE_MATMUL_DESC_GROUPS) over raw memory: for
    the columns j of group g, [end[g-1], end[g]), D[i + j ldc] = sum over l of
    op(A_g)(i, l) op(B)(l, j), A_g the g-th matrix of A, g lda (columns of A as stored) elements
    after the first. Columns past end[G-1] are not written. masked
    (GEMMTUNE_GROUP_LAYOUT_MASKED): `ends` are counts, group g's columns
    [g cap, g cap + count[g]) of cap = n / G each; the columns past a count are not written."""
    cols_a = p.k if p.layout[0] == "n" else p.m
    for g in range(groups):
        base = g * p.lda * cols_a

        def op_a(i, l):
            return a[base + (i + l * p.lda if p.layout[0] == "n" else l + i * p.lda)]

        def op_b(l, j):
            return b[l + j * p.ldb if p.layout[1] == "n" else j + l * p.ldb]
        columns = (range(g * (p.n // groups), g * (p.n // groups) + ends[g]) if masked
                   else range(ends[g - 1] if g else 0, ends[g]))
        for j in columns:
            for i in range(p.m):
                d[i + j * p.ldc] = sum(op_a(i, l) * op_b(l, j) for l in range(p.k))


ROUTINGS = [(2, 5, 7), (0, 3, 3), (7, 7, 7), (0, 0, 0), (1, 1, 6)]  # G = 3 ends, T = 7


@pytest.mark.parametrize("ends", ROUTINGS)
@pytest.mark.parametrize("padded_out", [False, True])
def test_the_library_computes_what_torch_grouped_mm_does(ends, padded_out):
    T, K, N, G = 7, 5, 4, 3
    rng = random.Random(hash(ends) % 1000 + padded_out)
    ldc = N + 3 if padded_out else N
    for (x_name, (x_strides, *_)), (w_name, (w_strides, *_)) in itertools.product(
            x_layouts(T, K).items(), w_layouts(G, K, N).items()):
        x_t, w_t = Tensor((T, K), x_strides, "bf16", GPU), Tensor((G, K, N), w_strides, "bf16", GPU)
        x = Memory(x_t, lambda t, k: rng.uniform(-1, 1), rng)
        w = Memory(w_t, lambda g, k, n: rng.uniform(-1, 1), rng)
        out_t = Tensor((T, N), (ldc, 1), "bf16", GPU)
        plan = plan_grouped_mm(x_t, w_t, offs(G), out=out_t)
        d = [None] * (T * ldc)  # None: never written
        library_grouped(plan.problem, plan.groups, ends, as_read(w, plan.copy_w, rng).data,
                        as_read(x, plan.copy_x, rng).data, d)
        for row, n in itertools.product(range(T), range(N)):
            got = d[row * ldc + n]
            if row >= ends[-1]:  # in no group
                assert got is None, (x_name, w_name, row, n)
                continue
            g = next(g for g in range(G) if row < ends[g])  # torch._grouped_mm's definition
            want = sum(x[row, k] * w[g, k, n] for k in range(K))
            assert got == pytest.approx(want, rel=1e-9, abs=1e-9), (x_name, w_name, row, n)


def batched_runs(shape, dtype, plan, values, rng):
    """The library's definition over memory for every layout of a (G, M, K), b (G, K, N) and a
    (G, M, N) out with contiguous or padded rows, planned by plan(a, b, out) and given the group
    values `values`: yields (where, a, b, result), result(g, m, n) the value the library wrote
    there (None: never written)."""
    G, M, K, N = shape
    outs = {"contiguous": (M * N, N, 1), "padded rows": (M * (N + 3), N + 3, 1)}
    for (a_name, (a_strides, *_)), (b_name, (b_strides, *_)), (out_name, out_strides) in \
            itertools.product(a_layouts(G, M, K).items(), w_layouts(G, K, N).items(),
                              outs.items()):
        a_t = Tensor((G, M, K), a_strides, dtype, GPU)
        b_t = Tensor((G, K, N), b_strides, dtype, GPU)
        a = Memory(a_t, lambda g, m, k: rng.uniform(-1, 1), rng)
        b = Memory(b_t, lambda g, k, n: rng.uniform(-1, 1), rng)
        p = plan(a_t, b_t, Tensor((G, M, N), out_strides, dtype, GPU))
        d = [None] * (G * out_strides[0])  # None: never written
        library_grouped(p.problem, p.groups, values, as_read(b, p.copy_w, rng).data,
                        as_read(a, p.copy_x, rng).data, d, masked=p.masked)

        def result(*index, d=d, out_strides=out_strides):
            return d[sum(i * s for i, s in zip(index, out_strides))]
        yield (a_name, b_name, out_name), a, b, result


def test_the_library_computes_what_torch_bmm_does():
    G, M, K, N = 3, 4, 5, 2
    ends = [(g + 1) * M for g in range(G)]
    for where, a, b, result in batched_runs((G, M, K, N), "f16", plan_bmm, ends,
                                            random.Random(11)):
        for g, m, n in itertools.product(range(G), range(M), range(N)):
            want = sum(a[g, m, k] * b[g, k, n] for k in range(K))
            assert result(g, m, n) == pytest.approx(want, rel=1e-9, abs=1e-9), where


# ---------------------------------------------------------------------------------------------
# Bad arguments: ValueError or TypeError (gemmtune.Error too), naming the argument


def refused(error, match, plan, *args, **kwargs):
    with pytest.raises(error, match=match) as e:
        plan(*args, **kwargs)
    assert isinstance(e.value, gemmtune.Error) and e.value.code == "invalid_argument"
    return str(e.value)


T, K, N, G = 300, 512, 1024, 8
X, W, OFFS = contiguous((T, K)), contiguous((G, K, N)), offs(G)


def test_grouped_mm_shapes():
    refused(ValueError, r"^x must be a 2-D \(T, K\) matrix of tokens, got shape \(2, 300, 512\)$",
            plan_grouped_mm, contiguous((2, T, K)), W, OFFS)
    refused(ValueError, r"^w must be \(G, K, N\) = \(G, 512, N\): G weight matrices for x of "
                        r"shape \(300, 512\), got shape \(512, 1024\)$",
            plan_grouped_mm, X, contiguous((K, N)), OFFS)
    refused(ValueError, r"^w must be \(G, K, N\) = \(G, 512, N\): .*got shape \(8, 1024, 512\)$",
            plan_grouped_mm, X, contiguous((G, N, K)), OFFS)
    refused(ValueError, r"^offs must be \(G,\) = \(8,\): the end row of each group of x, got "
                        r"shape \(7,\)$", plan_grouped_mm, X, W, offs(7))
    refused(ValueError, r"^offs must be \(G,\) = \(8,\): .*got shape \(1, 8\)$",
            plan_grouped_mm, X, W, contiguous((1, 8), "int32"))


def test_grouped_mm_dtypes():
    refused(TypeError, r"^x has dtype float32: grouped_mm multiplies bfloat16 or float16 x and "
                       r"w \(the grouped kernels' types\)$",
            plan_grouped_mm, X._replace(dtype="f32"), W._replace(dtype="f32"), OFFS)
    refused(TypeError, r"^x has dtype float8_e4m3fn: grouped_mm multiplies bfloat16 or float16",
            plan_grouped_mm, X._replace(dtype="e4m3"), W, OFFS)
    refused(TypeError, r"^w has dtype float16 but x has bfloat16: grouped_mm needs x and w of "
                       r"one dtype$", plan_grouped_mm, X, W._replace(dtype="f16"), OFFS)
    refused(TypeError, r"^offs has dtype int64: the group ends are int32 \(as "
                       r"torch._grouped_mm's\)$", plan_grouped_mm, X, W,
            OFFS._replace(dtype="int64"))
    refused(TypeError, r"^out_dtype is float64: grouped_mm writes bfloat16, float16 or float32$",
            plan_grouped_mm, X, W, OFFS, "float64")
    refused(TypeError, r"^out_dtype is float8_e4m3fn: grouped_mm writes bfloat16",
            plan_grouped_mm, X, W, OFFS, "e4m3")
    refused(TypeError, r"^out has dtype float64: grouped_mm writes bfloat16, float16 or float32$",
            plan_grouped_mm, X, W, OFFS, out=contiguous((T, N), "float64"))
    refused(TypeError, r"^out has dtype float16 but out_dtype is bfloat16: the result is written "
                       r"into out, in its dtype \(leave out_dtype out\)$",
            plan_grouped_mm, X, W, OFFS, "bf16", out=contiguous((T, N), "f16"))


def test_grouped_mm_out():
    refused(ValueError, r"^out must be \(T, N\) = \(300, 1024\), got shape \(1024, 300\)$",
            plan_grouped_mm, X, W, OFFS, out=contiguous((N, T)))
    # A group's rows are its columns of the library's D: out cannot be read transposed.
    refused(ValueError, r"^out must be row-major: \(300, 1024\) with stride 1 along N, got strides "
                        r"\(1, 300\)$",
            plan_grouped_mm, X, W, OFFS, out=Tensor((T, N), (1, T), "bf16", GPU))


def test_grouped_mm_devices():
    refused(ValueError, r"^offs is not on a CUDA GPU: grouped_mm multiplies tensors in GPU memory "
                        r"\(move it with .cuda\(\)\)$",
            plan_grouped_mm, X, W, offs(G, device=-2))
    refused(ValueError, r"^x is on GPU 0 but w is on GPU 1: grouped_mm needs every tensor on one "
                        r"GPU$", plan_grouped_mm, X, W._replace(device=1), OFFS)
    refused(ValueError, r"^x is on GPU 0 but out is on GPU 1: grouped_mm needs every tensor",
            plan_grouped_mm, X, W, OFFS, out=contiguous((T, N), device=1))
    plan = plan_grouped_mm(*(t._replace(device=-2) for t in (X, W, OFFS)), need_gpu=False)
    assert plan.device == -1 and plan.problem is not None


A, B = contiguous((G, 64, K), "f16"), contiguous((G, K, N), "f16")


def test_bmm_errors():
    refused(ValueError, r"^a must be a 3-D \(G, M, K\) batch of matrices, got shape "
                        r"\(64, 512\)$", plan_bmm, contiguous((64, K), "f16"), B)
    refused(ValueError, r"^b must be \(G, K, N\) = \(8, 512, N\) for a of shape \(8, 64, 512\), "
                        r"got shape \(4, 512, 1024\)$", plan_bmm, A, contiguous((4, K, N), "f16"))
    refused(ValueError, r"^b must be \(G, K, N\) = \(8, 512, N\) .*got shape \(512, 1024\)$",
            plan_bmm, A, contiguous((K, N), "f16"))
    refused(TypeError, r"^a has dtype float32: bmm multiplies bfloat16 or float16 a and b",
            plan_bmm, A._replace(dtype="f32"), B)
    refused(TypeError, r"^b has dtype bfloat16 but a has float16: bmm needs a and b of one "
                       r"dtype$", plan_bmm, A, B._replace(dtype="bf16"))
    refused(ValueError, r"^out must be \(G, M, N\) = \(8, 64, 1024\), got shape \(8, 1024, 64\)$",
            plan_bmm, A, B, contiguous((G, N, 64), "f16"))
    refused(TypeError, r"^out has dtype float64: bmm writes bfloat16, float16 or float32$",
            plan_bmm, A, B, contiguous((G, 64, N), "float64"))
    refused(ValueError, r"^out must be row-major rows: \(8, 64, 1024\) with stride 1 along N and "
                        r"its 8 matrices one after another \(strides \(64 \* ldc, ldc, 1\)\), got "
                        r"strides \(65536, 1, 64\)$",
            plan_bmm, A, B, Tensor((G, 64, N), (64 * N, 1, 64), "f16", GPU))
    refused(ValueError, r"^out must be row-major rows: .*got strides \(65600, 1024, 1\)$",
            plan_bmm, A, B, Tensor((G, 64, N), (64 * N + 64, N, 1), "f16", GPU))
    refused(ValueError, r"^b is not on a CUDA GPU: bmm multiplies tensors in GPU memory",
            plan_bmm, A, B._replace(device=-2))


# ---------------------------------------------------------------------------------------------
# The library takes the groups and their ends


class CountingLibrary:
    """libgemmtune with gemmtune_matmul recorded instead of run, and the groups, group ends and
    group layout of the descriptor it was given read back at that moment."""

    def __init__(self, lib):
        self.lib, self.matmuls, self.group_layouts = lib, [], []

    def gemmtune_matmul(self, device, handle, *args):
        pointer, value, layout = ctypes.c_void_p(), ctypes.c_int32(), ctypes.c_int32()
        _library.check(self.lib.gemmtune_matmul_desc_get_attribute(
            handle, _library.GROUP_ENDS_POINTER, ctypes.byref(pointer), ctypes.sizeof(pointer),
            None))
        _library.check(self.lib.gemmtune_matmul_desc_get_attribute(
            handle, _library.GROUPS_ATTRIBUTE, ctypes.byref(value), 4, None))
        _library.check(self.lib.gemmtune_matmul_desc_get_attribute(
            handle, _library.GROUP_LAYOUT_ATTRIBUTE, ctypes.byref(layout), 4, None))
        self.matmuls.append((device, handle, value.value, pointer.value) + args)
        self.group_layouts.append(layout.value)
        return 0

    def __getattr__(self, name):
        return getattr(self.lib, name)


def scalar_value(x):
    return ctypes.c_float.from_address(x).value if isinstance(x, int) else x._obj.value


def test_the_call_passes_w_as_a_x_as_b_and_the_ends(monkeypatch):
    counting = CountingLibrary(_library.library())
    monkeypatch.setattr(_library, "_lib", counting)
    wt = Tensor((G, K, N), (N * K, 1, K), "bf16", GPU)
    plan = plan_grouped_mm(Tensor((T, K), (K + 8, 1), "bf16", GPU), wt, OFFS)
    x, w, ends, out, stream = 0x7F0000000000, 0x7F0001000000, 0x7F0003000000, 0x7F0002000000, 7
    _api.run_grouped(plan, w, x, ends, out, stream)
    (device, handle, groups, ends_pointer, m, n, k, alpha, first, lda, second, ldb, beta, c, ldc,
     on) = counting.matmuls[-1]
    assert (device, groups, ends_pointer, m, n, k, first, lda, second, ldb, c, ldc, on) == (
        GPU, G, ends, N, T, K, w, K, x, K + 8, out, N, stream)
    assert counting.group_layouts[-1] == _library.GROUP_LAYOUTS["contiguous"]
    assert [scalar_value(alpha), scalar_value(beta)] == [1.0, 0.0]
    # The descriptor is this thread's, made for grouped calls: another thread calls with its
    # own, and the shared descriptor of the types (select, record, plain calls) has no groups.
    desc = _library.grouped_descriptor(plan.types, "tn")
    op_a, op_b = 6, 7  # gemmtune_matmul_attribute
    assert desc.handle == handle and (desc.get(op_a), desc.get(op_b)) == (1, 0)
    handles = []
    thread = threading.Thread(target=lambda: handles.append(
        _library.grouped_descriptor(plan.types, "tn").handle))
    thread.start()
    thread.join()
    assert handles and handles[0] != handle
    shared = _library.descriptor(plan.types, "tn")
    assert shared.handle != handle and shared.get(_library.GROUPS_ATTRIBUTE) == 0
    assert shared.get_pointer(_library.GROUP_ENDS_POINTER) == 0
    # The next call's groups and ends replace these.
    plan3 = plan_grouped_mm(X, wt._replace(shape=(3, K, N)), offs(3))
    _api.run_grouped(plan3, w, x, ends + 64, out, stream)
    assert counting.matmuls[-1][2:4] == (3, ends + 64)


@pytest.mark.parametrize("masked", [False, True], ids=["ends", "counts"])
def test_the_library_refuses_groups_without_their_ends_or_counts(masked):
    if masked:
        plan = plan_grouped_mm_masked(contiguous((G, 64, K)), W, OFFS)
        says = r"8 masked groups need their counts: .* \(a device pointer to 8 int32 counts\)"
    else:
        plan = plan_grouped_mm(X, W, OFFS)
        says = r"8 groups need their column end offsets: .* \(a device pointer to 8 int32 offsets\)"
    with pytest.raises(gemmtune.Error, match=rf"^{says}$") as e:
        _api.run_grouped(plan, 0x7F0001000000, 0x7F0000000000, 0, 0x7F0002000000, 0)
    assert e.value.code == "invalid_argument"
    assert "GEMMTUNE_MATMUL_DESC_GROUP_ENDS_POINTER is not set" in str(e.value)


def test_the_library_bounds_the_groups():
    plan = plan_grouped_mm(X, contiguous((4097, K, N)), offs(4097))
    with pytest.raises(gemmtune.Error, match=r"GEMMTUNE_MATMUL_DESC_GROUPS: groups must be 0 "
                                             r"\(one GEMM\) or 1 to 4096 \(got 4097\)"):
        _api.run_grouped(plan, 0x7F0001000000, 0x7F0000000000, 0x7F0003000000, 0x7F0002000000, 0)


@no_gpu_only
def test_without_a_gpu_the_library_takes_the_problem_and_says_no_gpu():
    for plan in (plan_grouped_mm(X, W, OFFS), plan_bmm(A, B),
                 plan_grouped_mm_masked(contiguous((G, 64, K)), W, OFFS)):
        assert isinstance(plan, GroupedPlan)
        with pytest.raises(gemmtune.Error, match="^no GPU: ") as e:
            _api.run_grouped(plan, 0x7F0001000000, 0x7F0000000000, 0x7F0003000000,
                             0x7F0002000000, 0)
        assert e.value.code == "no_device"


def test_grouped_mm_and_bmm_without_torch_say_so():
    if gemmtune.torch_operators or _api.torch_api is not None:
        pytest.skip("torch is importable here")
    with pytest.raises(TypeError, match=r"^grouped_mm takes torch tensors \(torch._grouped_mm's "
                                        r"semantics\), and torch is not importable here$"):
        gemmtune.grouped_mm(X, W, OFFS)
    with pytest.raises(TypeError, match=r"^bmm takes torch tensors, and torch is not importable "
                                        r"here$"):
        gemmtune.bmm(A, B)
    with pytest.raises(TypeError, match=r"^grouped_mm_masked takes torch tensors, and torch is "
                                        r"not importable here$"):
        gemmtune.grouped_mm_masked(A, B, OFFS)


# ---------------------------------------------------------------------------------------------
# The masked layout: grouped_mm_masked, x (G, cap, K), counts (G,)


CAP = 64
XM = contiguous((G, CAP, K))


@pytest.mark.parametrize("x_name", list(a_layouts(3, 4, 5)))
@pytest.mark.parametrize("w_name", list(w_layouts(3, 5, 4)))
def test_masked_is_bmms_problem_with_counts(x_name, w_name):
    Gm, cap, Km, Nm = 4, 48, 128, 96
    x_strides, op_b, ldb, copy_x = a_layouts(Gm, cap, Km)[x_name]
    w_strides, op_a, lda, copy_w = w_layouts(Gm, Km, Nm)[w_name]
    plan = plan_grouped_mm_masked(Tensor((Gm, cap, Km), x_strides, "bf16", GPU),
                                  Tensor((Gm, Km, Nm), w_strides, "bf16", GPU), offs(Gm))
    # m = N, n = G * cap (group g's columns start at g * cap), k = K; the counts say how many.
    assert plan.problem == Problem("bf16", op_a + op_b, Nm, Gm * cap, Km, lda, ldb, Nm)
    assert (plan.groups, plan.masked, plan.copy_x, plan.copy_w) == (Gm, True, copy_x, copy_w)
    assert (plan.shape, plan.device, plan.zero_rows) == ((Gm, cap, Nm), GPU, False)
    # grouped_mm and bmm are not masked.
    assert not plan_grouped_mm(X, W, OFFS).masked and not plan_bmm(A, B).masked


def test_masked_out_gives_ldc_and_the_result_dtype():
    out = Tensor((G, CAP, N), (CAP * (N + 8), N + 8, 1), "bf16", GPU)
    plan = plan_grouped_mm_masked(XM, W, OFFS, out=out)
    assert plan.problem.ldc == N + 8 and plan.types == DataTypes.uniform("bf16")
    plan = plan_grouped_mm_masked(XM, W, OFFS, out=contiguous((G, CAP, N), "f32"))
    assert plan.problem.dtype == "bf16*bf16->f32"
    assert plan_grouped_mm_masked(XM, W, OFFS, "f16").problem.dtype == "bf16*bf16->f16"


def test_masked_empty_problems():
    for plan in (plan_grouped_mm_masked(contiguous((G, 0, K)), W, OFFS),
                 plan_grouped_mm_masked(XM, contiguous((G, K, 0)), OFFS),
                 plan_grouped_mm_masked(contiguous((0, CAP, K)), contiguous((0, K, N)), offs(0))):
        assert plan.problem is None and not plan.zero_rows and plan.masked
    plan = plan_grouped_mm_masked(contiguous((G, CAP, 0)), contiguous((G, 0, N)), OFFS)
    assert plan.problem is None and plan.zero_rows and plan.shape == (G, CAP, N)


COUNTS = [(0, 4, 2), (4, 4, 4), (0, 0, 0), (1, 0, 4)]  # G = 3, cap = 4: from none to full


@pytest.mark.parametrize("counts", COUNTS)
def test_the_library_computes_what_grouped_mm_masked_does(counts):
    Gm, cap, Km, Nm = 3, 4, 5, 2

    def plan(x, w, out):
        return plan_grouped_mm_masked(x, w, offs(Gm), out=out)
    for where, x, w, result in batched_runs((Gm, cap, Km, Nm), "bf16", plan, counts,
                                            random.Random(hash(counts) % 1000)):
        for g, r, n in itertools.product(range(Gm), range(cap), range(Nm)):
            got = result(g, r, n)
            if r >= counts[g]:  # past the group's count: left as it was
                assert got is None, where + (g, r, n)
                continue
            want = sum(x[g, r, k] * w[g, k, n] for k in range(Km))
            assert got == pytest.approx(want, rel=1e-9, abs=1e-9), where + (g, r, n)


def test_grouped_mm_masked_errors():
    plan = plan_grouped_mm_masked
    refused(ValueError, r"^x must be a 3-D \(G, cap, K\) batch of each group's capacity of "
                        r"tokens, got shape \(300, 512\)$", plan, X, W, OFFS)
    refused(ValueError, r"^w must be \(G, K, N\) = \(8, 512, N\) for x of shape \(8, 64, 512\), "
                        r"got shape \(4, 512, 1024\)$", plan, XM, contiguous((4, K, N)), OFFS)
    refused(ValueError, r"^counts must be \(G,\) = \(8,\): the tokens of each group of x, got "
                        r"shape \(7,\)$", plan, XM, W, offs(7))
    refused(TypeError, r"^x has dtype float32: grouped_mm_masked multiplies bfloat16 or float16 "
                       r"x and w", plan, XM._replace(dtype="f32"), W._replace(dtype="f32"), OFFS)
    refused(TypeError, r"^w has dtype float16 but x has bfloat16: grouped_mm_masked needs x and "
                       r"w of one dtype$", plan, XM, W._replace(dtype="f16"), OFFS)
    refused(TypeError, r"^counts has dtype int64: the group counts are int32$",
            plan, XM, W, OFFS._replace(dtype="int64"))
    refused(TypeError, r"^out_dtype is float64: grouped_mm_masked writes bfloat16, float16 or "
                       r"float32$", plan, XM, W, OFFS, "float64")
    refused(ValueError, r"^out must be \(G, cap, N\) = \(8, 64, 1024\), got shape "
                        r"\(8, 1024, 64\)$", plan, XM, W, OFFS, out=contiguous((G, N, CAP)))
    refused(ValueError, r"^out must be row-major rows: \(8, 64, 1024\) with stride 1 along N and "
                        r"its 8 matrices one after another \(strides \(64 \* ldc, ldc, 1\)\), got "
                        r"strides \(65536, 1, 64\)$",
            plan, XM, W, OFFS, out=Tensor((G, CAP, N), (CAP * N, 1, CAP), "bf16", GPU))
    refused(ValueError, r"^counts is not on a CUDA GPU: grouped_mm_masked multiplies tensors in "
                        r"GPU memory", plan, XM, W, offs(G, device=-2))
    refused(ValueError, r"^x is on GPU 0 but out is on GPU 1: grouped_mm_masked needs every "
                        r"tensor", plan, XM, W, OFFS, out=contiguous((G, CAP, N), device=1))
    unchecked = plan(*(t._replace(device=-2) for t in (XM, W, OFFS)), need_gpu=False)
    assert unchecked.device == -1 and unchecked.problem is not None


def test_the_masked_call_passes_its_counts_in_the_masked_layout(monkeypatch):
    counting = CountingLibrary(_library.library())
    monkeypatch.setattr(_library, "_lib", counting)
    plan = plan_grouped_mm_masked(XM, W, OFFS)
    x, w, counts, out, stream = 0x7F0000000000, 0x7F0001000000, 0x7F0003000000, 0x7F0002000000, 7
    _api.run_grouped(plan, w, x, counts, out, stream)
    (device, handle, groups, counts_pointer, m, n, k, _, first, lda, second, ldb, _, c, ldc,
     on) = counting.matmuls[-1]
    assert (device, groups, counts_pointer, m, n, k, first, lda, second, ldb, c, ldc, on) == (
        GPU, G, counts, N, G * CAP, K, w, N, x, K, out, N, stream)
    assert counting.group_layouts[-1] == _library.GROUP_LAYOUTS["masked"]
    # This thread's masked descriptor of the types and layout, set masked once when made; a
    # contiguous call of the same types and layout has its own.
    assert _library.grouped_descriptor(plan.types, "nn", "masked").handle == handle
    _api.run_grouped(plan_bmm(XM, W), w, x, counts, out, stream)
    assert counting.matmuls[-1][1] != handle
    assert counting.group_layouts[-1] == _library.GROUP_LAYOUTS["contiguous"]

