"""Float8 experts: torch._scaled_grouped_mm's 2-D x 3-D call as the library's grouped float8
problem. Pure Python: testable anywhere.

scaled_grouped_mm(x, w, scale_x, scale_w, offs): x (T, K) float8 tokens, sorted by expert and
row-major; w (G, K, N) float8 weights with each w[g] column-major (w = W.transpose(1, 2) of a
row-major (G, N, K) W: nn.Linear's weights, stored along K as float8 wgmma reads them); offs (G,)
int32 ends. Rows offs[g-1]..offs[g] of the (T, N) result are x[those rows] @ w[g], scaled. The
library's problem is grouped_mm's (m = N, n = T, k = K, its A the G matrices of w with op(A) =
'T', its B x), in layout tn, and the scales go with their operands (gemmtune/types.hpp,
scale_shape_a/b: the G groups' scales of A one after another, B's over all T tokens):

    scaling  scale_x (tokens)                 scale_w (weights)                 library A / B
    tensor   one element                      (G,): one for each group          G x 1 / 1
    row      (T,) or (T, 1)                   (G, N)                            G x N / T
    block    (T, ceil(K/128)), outer-dim-     (G, ceil(K/128), ceil(N/128)):    G x (nb x kb)
             major: 1 x 128 of each token     128 x 128 blocks of w[g]          / T x kb

(torch._scaled_grouped_mm takes the rowwise form; the tensor and block forms are the library's.)
Each w[g]'s block scales are its (kb, nb) row-major, as scaled_mm takes b's; scales in other
layouts are copied first (ScaleSource.copy).
"""
from typing import NamedTuple, Optional, Tuple

from ._library import InvalidType, InvalidValue
from ._plan import DataTypes, Problem
from ._grouped import experts_shape
from ._scaled import (BLOCK, ScaleSource, _check_devices, _leading, _numel, _shape,
                      accumulation_of, ceil_div, check_float8_types, out_ldc, torch_name)

CALL = "scaled_grouped_mm"


class ScaledGroupedPlan(NamedTuple):
    """The library's grouped float8 problem for scaled_grouped_mm: its A is w's memory, its B
    x's, its C the row-major result's."""
    problem: Optional[Problem]  # None: nothing to compute (T, N, G or K is 0)
    groups: int  # G
    types: DataTypes  # the GEMM's: A of w's type, B of x's, C and D out_dtype
    scaling: str  # 'tensor', 'row' or 'block'
    accumulation: str  # accumulation_of(scaling, use_fast_accum)
    scale_a: ScaleSource  # the library's A scales: scale_w
    scale_b: ScaleSource  # its B scales: scale_x
    shape: Tuple[int, int]  # the result's, (T, N)
    device: int  # the GPU of the operands (-1 where none says)


def _scaling(T, N, K, G, scale_x, scale_w):
    """The scaling the scales' shapes give (tensor, then row, then block)."""
    kb, nb = ceil_div(K, BLOCK), ceil_div(N, BLOCK)
    x_shape, w_shape = tuple(scale_x.shape), tuple(scale_w.shape)
    if _numel(x_shape) == 1 and w_shape in ((G,), (G, 1)):
        return "tensor"
    if x_shape in ((T,), (T, 1)) and w_shape == (G, N):
        return "row"
    if x_shape == (T, kb) and w_shape == (G, kb, nb):
        return "block"
    raise InvalidValue(
        f"scale_x has shape {_shape(x_shape)} and scale_w {_shape(w_shape)}: for x of shape "
        f"{_shape((T, K))} and w of shape {_shape((G, K, N))}, {CALL} takes per-tensor (scale_x "
        f"one element, scale_w {_shape((G,))}), rowwise (scale_x {_shape((T,))}, scale_w "
        f"{_shape((G, N))}) or blockwise scales (scale_x {_shape((T, kb))}: 1x128 blocks of x, "
        f"outer-dim-major; scale_w {_shape((G, kb, nb))}: 128x128 blocks of each w[g])")


def _scale_sources(scaling, T, N, K, G, scale_x, scale_w):
    """(the library's A scales, its B scales): scale_w and scale_x, with the layout each must
    have and whether it has it."""
    if scaling == "tensor":
        copy_w = G > 1 and scale_w.strides[0] != 1
        return (ScaleSource("scale_w", 1, G, "contiguous", copy_w),
                ScaleSource("scale_x", 1, 1, "contiguous", False))
    if scaling == "row":  # each group's N contiguous, the groups N apart; T contiguous
        copy_w = (N > 1 and scale_w.strides[1] != 1) or (G > 1 and scale_w.strides[0] != N)
        return (ScaleSource("scale_w", N, G, "contiguous", copy_w),
                ScaleSource("scale_x", T, 1, "contiguous", T > 1 and scale_x.strides[0] != 1))
    kb, nb = ceil_div(K, BLOCK), ceil_div(N, BLOCK)
    # A: G matrices nb x kb column-major one after another: (G, kb, nb) row-major.
    w_ok = tuple(scale_w.strides) == (kb * nb, nb, 1) or G * kb * nb == 1
    # B: T x kb column-major: (T, kb) outer-dim-major, strides (1, T).
    x_ok = (T <= 1 or scale_x.strides[0] == 1) and (kb <= 1 or scale_x.strides[1] == T)
    return (ScaleSource("scale_w", nb, kb * G, "contiguous", not w_ok),
            ScaleSource("scale_x", T, kb, "outer-dim-major", not x_ok))


def _check_types(x, w, scale_x, scale_w, offs, out_dtype):
    check_float8_types(CALL, (("x", x), ("w", w)), (("scale_x", scale_x), ("scale_w", scale_w)),
                       out_dtype, "gemmtune.grouped_mm takes bfloat16 and float16")
    if offs.dtype != "int32":
        raise InvalidType(f"offs has dtype {torch_name(offs.dtype)}: the group ends are int32 "
                          "(as torch._scaled_grouped_mm's)")


def _layouts(x, w):
    """(lda, ldb) of w read as op(A) = w[g]^T and x as op(B) = x^T, in place."""
    T, K = x.shape
    G, _, N = w.shape
    ldb = _leading(T, K, *x.strides)
    if ldb is None:
        raise InvalidValue(f"x must be row-major: {_shape((T, K))} with stride 1 along K, got "
                           f"strides {_shape(x.strides)}; pass x.contiguous()")
    lda = _leading(N, K, w.strides[2], w.strides[1])  # w[g]^T = W[g], row-major (N, K)
    if lda is None or (G > 1 and w.strides[0] != lda * N):
        raise InvalidValue(f"w must be (G, K, N) with each w[g] column-major and the groups "
                           f"packed: w = W.transpose(1, 2) of a contiguous ({G}, {N}, {K}) W, got "
                           f"strides {_shape(w.strides)}; pass "
                           "w.transpose(1, 2).contiguous().transpose(1, 2)")
    return lda, ldb


def plan_scaled_grouped_mm(x, w, scale_x, scale_w, offs, out_dtype, out=None, need_gpu=True,
                           use_fast_accum=False):
    """The library's problem for scaled_grouped_mm(x, w, scale_x, scale_w, offs, out_dtype):
    a ScaledGroupedPlan. Operands are Tensors (or Views); out_dtype a type's name ('bf16').
    Raises InvalidValue (a ValueError) for shapes, layouts and devices, and InvalidType (a
    TypeError) for dtypes, each naming the argument and what it must be. offs's values live on
    the GPU and are not checked."""
    T, K, G, N = experts_shape(x, w)
    if tuple(offs.shape) != (G,):
        raise InvalidValue(f"offs must be (G,) = ({G},): the end row of each group of x, got "
                           f"shape {_shape(offs.shape)}")
    _check_types(x, w, scale_x, scale_w, offs, out_dtype)
    ldc = out_ldc(out, ("T", T), ("N", N), out_dtype)
    scaling = _scaling(T, N, K, G, scale_x, scale_w)
    named = [("x", x), ("w", w), ("scale_x", scale_x), ("scale_w", scale_w), ("offs", offs),
             ("out", out)]
    device = -1
    if need_gpu:
        device = _check_devices([(n, t) for n, t in named if t is not None], CALL)
    types = DataTypes(w.dtype, x.dtype, out_dtype, out_dtype)  # the library's A is w
    sources = _scale_sources(scaling, T, N, K, G, scale_x, scale_w)
    accumulation = accumulation_of(scaling, use_fast_accum)
    problem = None
    if min(T, N, G, K) >= 1:
        lda, ldb = _layouts(x, w)
        problem = Problem(types.name, "tn", N, T, K, lda, ldb, ldc, False, scaling, accumulation)
    return ScaledGroupedPlan(problem, G, types, scaling, accumulation, sources[0], sources[1],
                             (T, N), device)
