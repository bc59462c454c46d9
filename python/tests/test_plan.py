"""Row-major calls become the right column-major GEMM: every layout of every operand, checked
by running the planned GEMM in pure Python over the operands' memory (no GPU needed)."""
import itertools
import random

import pytest

from gemmtune import Error
from gemmtune._plan import DataTypes, Problem, plan_matmul, storage


def layouts(rows, cols):
    """(name, strides, memory size) of the ways a rows x cols matrix may lie in memory."""
    return [
        ("row-major", (cols, 1), rows * cols),
        ("row-major padded", (cols + 3, 1), rows * (cols + 3)),
        ("transposed view", (1, rows), rows * cols),
        ("transposed view padded", (1, rows + 2), (rows + 2) * cols),
    ]


def store(matrix, strides, size, rng):
    """matrix laid out at strides in a memory of `size` elements (the rest is noise)."""
    memory = [rng.uniform(-9, 9) for _ in range(size)]
    for i, row in enumerate(matrix):
        for j, value in enumerate(row):
            memory[i * strides[0] + j * strides[1]] = value
    return memory


def column_major_gemm(p, mem_a, mem_b, mem_c, alpha, beta):
    """cuBLAS's definition, over raw memory: C = alpha op(A) op(B) + beta C."""
    def op_a(i, l):
        return mem_a[i + l * p.lda] if p.layout[0] == "n" else mem_a[l + i * p.lda]

    def op_b(l, j):
        return mem_b[l + j * p.ldb] if p.layout[1] == "n" else mem_b[j + l * p.ldb]
    for i in range(p.m):
        for j in range(p.n):
            acc = sum(op_a(i, l) * op_b(l, j) for l in range(p.k))
            mem_c[i + j * p.ldc] = alpha * acc + beta * mem_c[i + j * p.ldc]


SHAPES = [(3, 5, 4), (1, 5, 4), (3, 1, 4), (3, 5, 1), (1, 1, 1), (6, 2, 7)]
MIXED = DataTypes("e4m3", "e5m2", "bf16", "bf16")  # a, b, out of the call


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_every_layout_computes_a_times_b(m, n, k):
    rng = random.Random(m * 100 + n * 10 + k)
    a = [[rng.uniform(-1, 1) for _ in range(k)] for _ in range(m)]
    b = [[rng.uniform(-1, 1) for _ in range(n)] for _ in range(k)]
    c0 = [[rng.uniform(-1, 1) for _ in range(n)] for _ in range(m)]
    alpha, beta = 1.5, -0.5
    expected = [[alpha * sum(a[i][l] * b[l][j] for l in range(k)) + beta * c0[i][j]
                 for j in range(n)] for i in range(m)]
    for la, lb, lc in itertools.product(layouts(m, k), layouts(k, n), layouts(m, n)):
        mem_a, mem_b = store(a, la[1], la[2], rng), store(b, lb[1], lb[2], rng)
        mem_c = store(c0, lc[1], lc[2], rng)
        plan = plan_matmul("f32", (m, k), la[1], (k, n), lb[1], lc[1])
        first, second = (mem_b, mem_a) if plan.swap else (mem_a, mem_b)
        column_major_gemm(plan.problem, first, second, mem_c, alpha, beta)
        # The types go where the operands go: the GEMM's A is of the type of the memory read
        # as A, whichever of a and b that is.
        typed = plan_matmul(MIXED, (m, k), la[1], (k, n), lb[1], lc[1])
        assert typed.swap == plan.swap and typed.problem[1:] == plan.problem[1:]
        assert typed.types == (MIXED.swapped() if plan.swap else MIXED)
        assert typed.problem.dtype == typed.types.name
        assert (typed.types.a, typed.types.b) == (
            ("e5m2", "e4m3") if first is mem_b else ("e4m3", "e5m2"))
        got = [[mem_c[i * lc[1][0] + j * lc[1][1]] for j in range(n)] for i in range(m)]
        for i, j in itertools.product(range(m), range(n)):
            assert got[i][j] == pytest.approx(expected[i][j], abs=1e-9), (la[0], lb[0], lc[0])


def test_linear_is_tn_with_out_features_as_m():
    # y = x @ w.T, x: 8 tokens x 4096, w: 11008 x 4096 (out x in): llm-shapes.txt's convention.
    plan = plan_matmul("bf16", (8, 4096), (4096, 1), (4096, 11008), (1, 4096))
    assert tuple(plan.problem) == ("bf16", "tn", 11008, 8, 4096, 4096, 4096, 11008, False, "none",
                                   "precise", "none", "exact")
    assert plan.problem.shape_line() == "11008 8 4096 bf16 tn"
    assert plan.problem._replace(reads_c=True).shape_line() == "11008 8 4096 bf16 tn beta=1"


def test_shape_line_names_only_leading_dimensions_that_are_not_tight():
    plan = plan_matmul("f16", (64, 32), (40, 1), (32, 48), (48, 1))
    assert plan.problem.shape_line() == "48 64 32 f16 nn ldb=40"


def test_a_matrix_without_a_unit_stride_is_refused():
    assert storage(4, 6, 12, 2) is None
    with pytest.raises(Error, match=r"a has strides \(12, 2\).*unit stride.*a.contiguous\(\)"):
        plan_matmul("f32", (4, 6), (12, 2), (6, 5), (5, 1))


def test_broadcast_rows_are_refused():
    # expand()ed rows overlap: no leading dimension describes them.
    with pytest.raises(Error, match="unit stride"):
        plan_matmul("f32", (4, 6), (0, 1), (6, 5), (5, 1))


def test_single_rows_and_columns_read_with_any_stride():
    assert storage(1, 6, 999, 3) == (False, 3)  # one row, elements 3 apart
    assert storage(6, 1, 3, 999) == (True, 3)   # one column, elements 3 apart
    assert storage(6, 1, 1, 1) == (False, 6)    # a tight column: tight leading dimension


def test_a_uniform_plan_carries_its_types():
    plan = plan_matmul("bf16", (8, 4096), (4096, 1), (4096, 11008), (1, 4096))
    assert plan.types == DataTypes.uniform("bf16") == DataTypes("bf16", "bf16", "bf16", "bf16")
    assert plan.types.is_uniform() and plan.problem.types == plan.types


def test_the_types_swap_with_the_operands_of_a_row_major_call():
    # y = x @ w.T with f16 activations x and f32 weights w: row-major, so the GEMM is the
    # column-major w . x ('tn'), whose A is w: f32 * f16.
    x_then_w = DataTypes("f16", "f32", "f16", "f16")
    plan = plan_matmul(x_then_w, (8, 4096), (4096, 1), (4096, 11008), (1, 4096))
    assert plan.swap
    assert plan.types == DataTypes("f32", "f16", "f16", "f16")
    assert tuple(plan.problem) == ("f32*f16->f16", "tn", 11008, 8, 4096, 4096, 4096, 11008,
                                   False, "none", "precise", "none", "exact")
    assert plan.problem.shape_line() == "11008 8 4096 f32*f16->f16 tn"
    assert plan.problem.types == plan.types
    # Into a column-major out nothing swaps: the GEMM's A is x.
    plan = plan_matmul(x_then_w, (8, 4096), (4096, 1), (4096, 11008), (1, 4096), (1, 8))
    assert not plan.swap
    assert plan.types == x_then_w
    assert plan.problem.dtype == "f16*f32->f16" and plan.problem.layout == "tn"


def test_shape_line_names_the_scaling_where_there_is_one():
    # As the library writes it: the scaling right after the layout, before the leading
    # dimensions and beta.
    p = Problem("e4m3*e4m3->bf16", "tn", 2112, 64, 7168, 7168, 7168, 2112, False, "block")
    assert p.shape_line() == "2112 64 7168 e4m3*e4m3->bf16 tn scaling=block"
    p = p._replace(ldc=2120, reads_c=True, scaling="row")
    assert p.shape_line() == "2112 64 7168 e4m3*e4m3->bf16 tn scaling=row ldc=2120 beta=1"
    # Fast accumulation right after the scaling; precise, the default, writes nothing.
    assert p._replace(accumulation="fast").shape_line() == \
        "2112 64 7168 e4m3*e4m3->bf16 tn scaling=row accum=fast ldc=2120 beta=1"
    assert Problem("bf16", "tn", 1, 2, 3, 3, 3, 1).scaling == "none"
    assert Problem("bf16", "tn", 1, 2, 3, 3, 3, 1).accumulation == "precise"


def test_type_names_are_the_librarys_format_and_read_back():
    cases = [
        (DataTypes.uniform("f16"), "f16"),
        (DataTypes("e4m3", "e5m2", "bf16", "bf16"), "e4m3*e5m2->bf16"),
        (DataTypes("bf16", "bf16", "bf16", "f32"), "bf16*bf16->f32+c=bf16"),
        (DataTypes("e4m3", "e4m3", "f16", "f16", "f16"), "e4m3*e4m3->f16+acc=f16"),
        (DataTypes("f16", "f16", "f16", "f16", "f16"), "f16*f16->f16+acc=f16"),  # not uniform
        (DataTypes("e5m2", "e4m3", "f32", "bf16", "f16"), "e5m2*e4m3->bf16+c=f32+acc=f16"),
    ]
    for types, name in cases:
        assert types.name == name
        assert DataTypes.parse(name) == types
        assert Problem(name, "nn", 1, 1, 1, 1, 1, 1).types == types
    assert DataTypes("e4m3", "e5m2", "bf16", "bf16").swapped() == DataTypes("e5m2", "e4m3", "bf16",
                                                                             "bf16")
    with pytest.raises(Error, match=r"data types 'e4m3\*e5m2': expected A\*B->D"):
        DataTypes.parse("e4m3*e5m2")
    with pytest.raises(Error, match=r"unknown part 'x=f32' \(expected c= or acc=\)"):
        DataTypes.parse("e4m3*e5m2->bf16+x=f32")
