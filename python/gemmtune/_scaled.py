"""torch._scaled_mm's call as the library's float8 problem. Pure Python: testable anywhere.

torch computes a row-major D = (scales) * a @ b with a (M, K) row-major and b (K, N) column-major
(b = W.t() of a row-major (N, K) weight W). Read column-major, the row-major D (M, N) is
D^T (N x M) = b^T a^T: the library's A is b (the weights; as stored, K x N column-major, so
op(A) = 'T'), its B is a (the activations, K x M column-major, op(B) = 'N'): the 'tn' problem with
m = N, n = M, k = K, both operands K-major, as the float8 kernels read them. The scales go with
their operands: the library's scale_a holds torch's scale_b, its scale_b torch's scale_a, each
laid out as gemmtune/types.hpp's scale_shape_a/b say (a column-major rows x cols matrix, ld =
rows):

    scaling  torch's scale_a (of a)       torch's scale_b (of b)        library's A / B scales
    tensor   one element                  one element                   1 x 1 / 1 x 1
    row      (M, 1)                       (1, N)                        N x 1 / M x 1
    block    (M, ceil(K/128)): 1 x 128    (ceil(K/128), ceil(N/128)):   ceil(N/128) x ceil(K/128)
             per row of a, outer-dim-     128 x 128 blocks of b         / M x ceil(K/128)
             major (stride (1, M))

Torch's blockwise scale_a (stride (1, M)) is the library's B scales as it lies; its scale_b,
which torch takes outer-dim-major too (scale_b.t() row-major), is the library's A scales
transposed: the call copies it into a row-major (ceil(K/128), ceil(N/128)) tensor first. Scales
in other layouts are copied the same way (ScaleSource.copy).

use_fast_accum (cuBLASLt's FAST_ACCUM): with tensor and row scaling the problem accumulates
'fast' (wgmma sums the whole K without promoting its partial sums into f32: faster, a larger
error on long K); blockwise stays 'precise', as its block scales multiply each 128-deep K block's
sum, which is a promotion already (torch takes the flag there too).
"""
import math
from typing import NamedTuple, Optional, Tuple

from ._library import InvalidType, InvalidValue
from ._plan import DataTypes, Problem

# The K extent of a 1 x 128 block and both extents of a 128 x 128 one (kScaleBlock).
BLOCK = 128
FLOAT8 = ("e4m3", "e5m2")
OUTPUTS = ("bf16", "f16", "f32")
SCALINGS = ("tensor", "row", "block")
_NAMES = {"tensor": "per-tensor", "row": "rowwise", "block": "blockwise"}  # torch's words
# torch's names of gemmtune's types, for messages.
_TORCH_NAMES = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2", "bf16": "bfloat16",
                "f16": "float16", "f32": "float32"}


def torch_name(dtype):
    """'bfloat16' for 'bf16'; a name gemmtune does not know ('float64') as it is."""
    return _TORCH_NAMES.get(dtype, dtype)


class Tensor(NamedTuple):
    """What the checks need of a tensor (a View has these fields too)."""
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]  # in elements
    dtype: str  # gemmtune's name ('e4m3', 'f32', ...), or torch's for other dtypes ('float64')
    device: int  # CUDA ordinal; -1: unknown (the current one); -2: not on a GPU (cpu, meta)


class ScaleSource(NamedTuple):
    """Where the scales of one of the library's operands come from."""
    argument: str  # the call's tensor that holds them: 'scale_a' or 'scale_b'
    rows: int  # the library's layout: a column-major rows x cols matrix with ld = rows
    cols: int
    # That layout in the argument's own (row-major torch) terms: 'contiguous' (row-major, as
    # tensor.contiguous() makes) or 'outer-dim-major' (column-major, as t().contiguous().t()).
    layout: str
    copy: bool  # the argument is not laid out so: the call copies it (a small kernel)


class ScaledPlan(NamedTuple):
    """The library's problem for scaled_mm(a, b, scale_a, scale_b): its A is b's memory, its B
    a's, its C the row-major result's."""
    problem: Optional[Problem]  # None: an empty product (M, N or K is 0)
    types: DataTypes  # the GEMM's: A of b's type (the weights), B of a's
    scaling: str  # 'tensor', 'row' or 'block'
    # 'fast' where use_fast_accum asks for it and the scaling has it (tensor, row), else 'precise'
    accumulation: str
    scale_a: ScaleSource  # the scales of the library's A (torch's b): torch's scale_b
    scale_b: ScaleSource  # the scales of the library's B (torch's a): torch's scale_a
    shape: Tuple[int, int]  # the result's, (M, N)
    device: int  # the GPU of the operands (-1 where none says; problem() does not check)


def ceil_div(x, y):
    return -(-x // y)


def _shape(shape):
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def _leading(rows, cols, row_stride, col_stride):
    """The leading dimension of a row-major rows x cols matrix with these strides (unit stride
    along a row, rows apart by at least a row), or None where it is not one."""
    if cols > 1 and col_stride != 1:
        return None
    if rows <= 1:
        return max(cols, 1)
    return row_stride if row_stride >= max(cols, 1) else None


def _numel(shape):
    return math.prod(shape)


def _check_devices(tensors, call="scaled_mm"):
    """All on one CUDA GPU; returns it. tensors: (name, Tensor) pairs, a first; call: the
    function's name, for messages."""
    first_name, first = tensors[0]
    for name, t in tensors:
        if t.device == -2:
            raise InvalidValue(f"{name} is not on a CUDA GPU: {call} multiplies tensors in GPU "
                               "memory (move it with .cuda())")
    for name, t in tensors:
        if -1 not in (t.device, first.device) and t.device != first.device:
            raise InvalidValue(f"{first_name} is on GPU {first.device} but {name} is on GPU "
                               f"{t.device}: {call} needs every tensor on one GPU")
    return max(t.device for _, t in tensors)


def _scaling(M, N, K, scale_a, scale_b):
    """The scaling torch._scaled_mm reads from the scales' shapes, in its order of preference:
    per-tensor, then rowwise, then blockwise (1 x 128 of a, 128 x 128 of b)."""
    kb, nb = ceil_div(K, BLOCK), ceil_div(N, BLOCK)
    expected = {  # scaling: (scale_a's shape, scale_b's shape); None: one element, any shape
        "tensor": (None, None),
        "row": ((M, 1), (1, N)),
        "block": ((M, kb), (kb, nb)),
    }

    def fits(shape, want):
        return _numel(shape) == 1 if want is None else tuple(shape) == want

    for scaling, (want_a, want_b) in expected.items():
        if fits(scale_a.shape, want_a) and fits(scale_b.shape, want_b):
            return scaling
    forms = (f"per-tensor (one element each), rowwise (scale_a {_shape((M, 1))}, scale_b "
             f"{_shape((1, N))}) or blockwise (scale_a {_shape((M, kb))}: 1x128 blocks of a, "
             f"outer-dim-major; scale_b {_shape((kb, nb))}: 128x128 blocks of b)")
    wants = [("one element" if want_b is None else _shape(want_b)) + f" ({_NAMES[scaling]})"
             for scaling, (want_a, want_b) in expected.items() if fits(scale_a.shape, want_a)]
    if wants:
        raise InvalidValue(f"scale_b has shape {_shape(scale_b.shape)}: with scale_a of shape "
                           f"{_shape(scale_a.shape)} it must be {' or '.join(wants)}; scaled_mm "
                           f"takes {forms}")
    raise InvalidValue(f"scale_a has shape {_shape(scale_a.shape)}: for a of shape "
                       f"{_shape((M, K))} and b of shape {_shape((K, N))}, scaled_mm takes {forms}"
                       "; torch's other blockwise forms (128x128 blocks of a, 1x128 of b) are not "
                       "supported")


def _scale_sources(scaling, M, N, K, scale_a, scale_b):
    """(the library's A scales, its B scales): torch's scale_b and scale_a, with the layout
    each must have and whether it has it."""
    if scaling == "tensor":
        return (ScaleSource("scale_b", 1, 1, "contiguous", False),
                ScaleSource("scale_a", 1, 1, "contiguous", False))
    if scaling == "row":  # N values of b's columns, M of a's rows, each contiguous
        return (ScaleSource("scale_b", N, 1, "contiguous", N > 1 and scale_b.strides[1] != 1),
                ScaleSource("scale_a", M, 1, "contiguous", M > 1 and scale_a.strides[0] != 1))
    kb, nb = ceil_div(K, BLOCK), ceil_div(N, BLOCK)
    # A: nb x kb column-major, the nb blocks of one K block contiguous: in torch's terms the
    # (kb, nb) scale_b row-major, strides (nb, 1).
    a_ok = (kb <= 1 or scale_b.strides[0] == nb) and (nb <= 1 or scale_b.strides[1] == 1)
    # B: M x kb column-major: torch's (M, kb) scale_a outer-dim-major, strides (1, M).
    b_ok = (M <= 1 or scale_a.strides[0] == 1) and (kb <= 1 or scale_a.strides[1] == M)
    return (ScaleSource("scale_b", nb, kb, "contiguous", not a_ok),
            ScaleSource("scale_a", M, kb, "outer-dim-major", not b_ok))


def check_float8_types(call, operands, scales, out_dtype, others):
    """The dtypes of a float8 call: its two operands float8, out_dtype one it writes, its scales
    float32. operands and scales: (name, Tensor) pairs; others: where other dtypes go."""
    for name, t in operands:
        if t.dtype not in FLOAT8:
            raise InvalidType(f"{name} has dtype {torch_name(t.dtype)}: {call} multiplies float8 "
                              f"{operands[0][0]} and {operands[1][0]} (float8_e4m3fn or "
                              f"float8_e5m2; {others})")
    if out_dtype not in OUTPUTS:
        raise InvalidType(f"out_dtype is {torch_name(out_dtype)}: {call} writes bfloat16, "
                          "float16 or float32")
    for name, t in scales:
        if t.dtype != "f32":
            raise InvalidType(f"{name} has dtype {torch_name(t.dtype)}: scales are float32")


def out_ldc(out, rows, cols, out_dtype):
    """The leading dimension of the row-major result: out's (its shape, dtype and layout checked),
    else its columns. rows and cols: (name, extent)."""
    (r, R), (c, C) = rows, cols
    if out is None:
        return C
    if tuple(out.shape) != (R, C):
        raise InvalidValue(f"out must be ({r}, {c}) = ({R}, {C}), got shape {_shape(out.shape)}")
    if out.dtype != out_dtype:
        raise InvalidType(f"out has dtype {torch_name(out.dtype)} but out_dtype is "
                          f"{torch_name(out_dtype)}: pass out_dtype={torch_name(out.dtype)} too "
                          "(the result is written into out, in its dtype)")
    ldc = _leading(R, C, *out.strides)
    if ldc is None:
        raise InvalidValue(f"out must be row-major: ({R}, {C}) with stride 1 along {c}, got "
                           f"strides {_shape(out.strides)}")
    return ldc


def accumulation_of(scaling, use_fast_accum):
    """The problem's accumulation for torch's use_fast_accum: 'fast' for tensor and row scaling,
    'precise' for blockwise (its block scales promote each K block's sum already) and without
    the flag."""
    return "fast" if use_fast_accum and scaling in ("tensor", "row") else "precise"


def plan_scaled_mm(a, b, scale_a, scale_b, out_dtype, bias=None, out=None, need_gpu=True,
                   use_fast_accum=False):
    """The library's problem for torch._scaled_mm(a, b, scale_a, scale_b, bias,
    out_dtype=out_dtype, use_fast_accum=use_fast_accum): a ScaledPlan. Operands are Tensors (or
    Views); out_dtype is a type's name ('bf16', 'f16', 'f32'), or another dtype's ('float64') to
    be refused. Raises InvalidValue (a ValueError) for shapes, layouts and devices, and
    InvalidType (a TypeError) for dtypes, each naming the argument and what it must be. need_gpu:
    check that every tensor is on one GPU. use_fast_accum: the problem accumulates 'fast' with
    tensor and row scaling (accumulation_of). Which problems run is the library's answer (the
    GPU's kernels: an f32 output or fast accumulation, say, where they are not built)."""
    if len(a.shape) != 2:
        raise InvalidValue(f"a must be a 2-D (M, K) matrix, got shape {_shape(a.shape)}")
    M, K = a.shape
    if len(b.shape) != 2 or b.shape[0] != K:
        raise InvalidValue(f"b must be (K, N) = ({K}, N) for a of shape {_shape(a.shape)}, got "
                           f"shape {_shape(b.shape)}")
    N = b.shape[1]
    check_float8_types("scaled_mm", (("a", a), ("b", b)),
                       (("scale_a", scale_a), ("scale_b", scale_b)), out_dtype,
                       "gemmtune.matmul takes the others")
    lda = _leading(M, K, *a.strides)
    if lda is None:
        raise InvalidValue(f"a must be row-major: {_shape((M, K))} with stride 1 along K, got "
                           f"strides {_shape(a.strides)}; pass a.contiguous()")
    ldb = _leading(N, K, b.strides[1], b.strides[0])  # b^T = W, row-major (N, K)
    if ldb is None:
        raise InvalidValue(f"b must be column-major: {_shape((K, N))} with stride 1 along K, the "
                           f"transpose of a row-major ({N}, {K}) weight W (b = W.t()), got strides "
                           f"{_shape(b.strides)}; pass b.t().contiguous().t()")
    scaling = _scaling(M, N, K, scale_a, scale_b)
    if bias is not None:
        if tuple(bias.shape) != (N,):
            raise InvalidValue(f"bias must be (N,) = ({N},), got shape {_shape(bias.shape)}")
        if out_dtype == "f32":
            raise InvalidType("bias goes with a bfloat16 or float16 output, not float32 (as "
                              "torch._scaled_mm's)")
        if bias.dtype != out_dtype:
            raise InvalidType(f"bias has dtype {torch_name(bias.dtype)}: it must be out_dtype's, "
                              f"{torch_name(out_dtype)}")
    ldc = out_ldc(out, ("M", M), ("N", N), out_dtype)
    named = [("a", a), ("b", b), ("scale_a", scale_a), ("scale_b", scale_b), ("bias", bias),
             ("out", out)]
    device = _check_devices([(n, t) for n, t in named if t is not None]) if need_gpu else -1
    types = DataTypes(b.dtype, a.dtype, out_dtype, out_dtype)  # the library's A is b
    sources = _scale_sources(scaling, M, N, K, scale_a, scale_b)
    accumulation = accumulation_of(scaling, use_fast_accum)
    problem = None
    if min(M, N, K) >= 1:
        problem = Problem(types.name, "tn", N, M, K, ldb, lda, ldc, bias is not None, scaling,
                          accumulation)
    return ScaledPlan(problem, types, scaling, accumulation, sources[0], sources[1], (M, N),
                      device)
