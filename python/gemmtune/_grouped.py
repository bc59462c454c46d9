"""torch._grouped_mm's 2-D x 3-D call (a mixture-of-experts layer) and bmm as the library's
grouped problem. Pure Python: testable anywhere.

grouped_mm(x, w, offs): x (T, K) holds the tokens, sorted by expert; w (G, K, N) the G experts'
weights; offs (G,) int32 the cumulative ends of the experts' rows: rows offs[g-1]..offs[g] of the
(T, N) result are x[those rows] @ w[g]. Read column-major, the row-major result is D (N x T) =
W_g x^T group by group: the library's grouped problem with m = N, n = T, k = K, whose group g owns
columns [offs[g-1], offs[g]) of op(B) = x^T (K x T) and of D, and whose A holds the G matrices
op(A) = w[g]^T (N x K) one after another:

    operand  torch                                   library
    A        w (G, K, N), w[g] row-major             op(A) = N, lda = w.stride(1)
             w = W.transpose(1, 2), W (G, N, K)      op(A) = T, lda = w.stride(2)
    B        x (T, K) row-major                      op(B) = N, ldb = x.stride(0)
    D        the (T, N) result, row-major            ldc = out.stride(0)

The library takes the G matrices of A exactly lda x (columns of A as stored) elements apart:
w.stride(0) must be lda * K (op 'n') or lda * N (op 't'). Operands laid out otherwise are read
from a contiguous copy (GroupedPlan.copy_x, copy_w); a result must be row-major. x column-major
is copied too: the grouped kernels read op(B) = N only (a group starts at any token, and TMA
faults on a box whose contiguous side starts off 16 bytes).

bmm(a, b) (G, M, K) @ (G, K, N) is grouped_mm of a's G*M rows with uniform ends (g+1)*M.

grouped_mm_masked(x, w, counts) (DeepGEMM's masked layout, for decode under CUDA graphs): x
(G, cap, K) holds each group's capacity of token rows, counts (G,) int32 how many of them are
tokens; rows r < counts[g] of the (G, cap, N) result are x[g, r] @ w[g]. It is bmm's problem,
x's G*cap rows as op(B), with the library's masked group layout: counts instead of ends, group g
owning columns [g cap, g cap + counts[g]) of n = G cap.
"""
from typing import NamedTuple, Optional, Tuple

from ._library import InvalidType, InvalidValue
from ._plan import DataTypes, Problem
from ._scaled import Tensor, _check_devices, _leading, _shape, torch_name

INPUTS = ("bf16", "f16")  # the grouped kernels' (wgmma_sm90 on Hopper, mma_sm80)
OUTPUTS = ("bf16", "f16", "f32")  # which pairs with which is the library's answer


class GroupedPlan(NamedTuple):
    """The library's grouped problem for grouped_mm, grouped_mm_masked or bmm: its A is w's
    (b's) memory, its B x's (a's), its D the row-major result's."""
    problem: Optional[Problem]  # None: nothing to compute (T, N or G is 0, or K is: zero_rows)
    groups: int  # G
    types: DataTypes  # the GEMM's: A of w's type, B of x's, C and D the result's
    copy_x: bool  # x (a) is not laid out as the library reads it: the call copies it, contiguous
    copy_w: bool  # likewise w (b)
    shape: Tuple[int, ...]  # the result's: (T, N) for grouped_mm, (G, M, N) for bmm and masked
    device: int  # the GPU of the operands (-1 where none says)
    zero_rows: bool = False  # K = 0: the groups' rows are sums over nothing, zeros; no GEMM
    masked: bool = False  # the group values are counts (grouped_mm_masked), not ends


def _x_layout(x):
    """(op(B), ldb) of x (T, K) read in place as x^T (K x T), or None: not row-major."""
    T, K = x.shape
    ld = _leading(T, K, *x.strides)
    return None if ld is None else ("n", ld)  # row-major (T, K): column-major K x T


def _w_layout(w):
    """(op(A), lda) of w (G, K, N) read in place, each w[g]^T as op(A) (N x K), the G matrices
    lda x (columns as stored) apart; None where that is not how w lies."""
    G, K, N = w.shape
    s0, s1, s2 = w.strides
    ld = _leading(K, N, s1, s2)  # w[g] row-major: stored N x K column-major
    if ld is not None and (G == 1 or s0 == ld * K):
        return "n", ld
    ld = _leading(N, K, s2, s1)  # w[g] column-major (nn.Linear's (N, K) transposed): K x N
    if ld is not None and (G == 1 or s0 == ld * N):
        return "t", ld
    return None


def _rows(shape, strides):
    """The strides of the (G*R, C) matrix of the rows of a (G, R, C) tensor, or None where its
    first two dimensions do not flatten without a copy."""
    G, R, _ = shape
    s0, s1, s2 = strides
    if G == 1:
        return s1, s2
    if R == 1:
        return s0, s2
    return (s1, s2) if s0 == s1 * R else None


def _check_dtypes(call, names, x, w):
    x_name, w_name = names
    if x.dtype not in INPUTS:
        raise InvalidType(f"{x_name} has dtype {torch_name(x.dtype)}: {call} multiplies bfloat16 "
                          f"or float16 {x_name} and {w_name} (the grouped kernels' types)")
    if w.dtype != x.dtype:
        raise InvalidType(f"{w_name} has dtype {torch_name(w.dtype)} but {x_name} has "
                          f"{torch_name(x.dtype)}: {call} needs {x_name} and {w_name} of one "
                          "dtype")


def _result_dtype(call, x, out_dtype, out):
    """The result's dtype: out's where given (out_dtype, if given too, must agree), else
    out_dtype, else x's."""
    if out_dtype is not None and out_dtype not in OUTPUTS:
        raise InvalidType(f"out_dtype is {torch_name(out_dtype)}: {call} writes bfloat16, "
                          "float16 or float32")
    if out is None:
        return x.dtype if out_dtype is None else out_dtype
    if out.dtype not in OUTPUTS:
        raise InvalidType(f"out has dtype {torch_name(out.dtype)}: {call} writes bfloat16, "
                          "float16 or float32")
    if out_dtype is not None and out.dtype != out_dtype:
        raise InvalidType(f"out has dtype {torch_name(out.dtype)} but out_dtype is "
                          f"{torch_name(out_dtype)}: the result is written into out, in its "
                          "dtype (leave out_dtype out)")
    return out.dtype


def _check_group_values(call, x, w, values, G, out_dtype, out):
    """The group values (offs of grouped_mm, counts of grouped_mm_masked): (G,) int32; then x's
    and w's dtypes. The result's dtype (_result_dtype)."""
    name, says, dtype_says = (("offs", "the end row", "ends are int32 (as torch._grouped_mm's)")
                              if call == "grouped_mm" else
                              ("counts", "the tokens", "counts are int32"))
    if tuple(values.shape) != (G,):
        raise InvalidValue(f"{name} must be (G,) = ({G},): {says} of each group of x, got shape "
                           f"{_shape(values.shape)}")
    _check_dtypes(call, ("x", "w"), x, w)
    if values.dtype != "int32":
        raise InvalidType(f"{name} has dtype {torch_name(values.dtype)}: the group {dtype_says}")
    return _result_dtype(call, x, out_dtype, out)


def _plan(x, w, groups, ldc, types, shape, device, copy_x=False, masked=False):
    """The grouped problem of x (T, K) and w (G, K, N) into a row-major result with ldc: what
    every call plans once its own checks passed (sizes all >= 1)."""
    T, K = x.shape
    N = w.shape[2]
    x_layout, w_layout = _x_layout(x), _w_layout(w)
    copy_x = copy_x or x_layout is None
    copy_w = w_layout is None
    if copy_x:  # x.contiguous(): row-major (T, K)
        x_layout = ("n", K)
    if copy_w:  # w.contiguous(): each w[g] row-major (K, N), N * K apart
        w_layout = ("n", N)
    problem = Problem(types.name, w_layout[0] + x_layout[0], N, T, K, w_layout[1], x_layout[1],
                      ldc)
    return GroupedPlan(problem, groups, types, copy_x, copy_w, shape, device, masked=masked)


def experts_shape(x, w):
    """(T, K, G, N) of tokens x (T, K) and experts' weights w (G, K, N); InvalidValue for other
    shapes."""
    if len(x.shape) != 2:
        raise InvalidValue(f"x must be a 2-D (T, K) matrix of tokens, got shape "
                           f"{_shape(x.shape)}")
    T, K = x.shape
    if len(w.shape) != 3 or w.shape[1] != K:
        raise InvalidValue(f"w must be (G, K, N) = (G, {K}, N): G weight matrices for x of shape "
                           f"{_shape(x.shape)}, got shape {_shape(w.shape)}")
    G, _, N = w.shape
    return T, K, G, N


def plan_grouped_mm(x, w, offs, out_dtype=None, out=None, need_gpu=True):
    """The library's grouped problem for grouped_mm(x, w, offs, out_dtype, out): a GroupedPlan.
    Operands are Tensors (or Views); dtypes gemmtune's names ('bf16'), or other dtypes' own
    ('int32', 'float64'); out_dtype a type's name or None. Raises InvalidValue (a ValueError)
    for shapes, layouts and devices, and InvalidType (a TypeError) for dtypes, each naming the
    argument and what it must be. offs's values (nondecreasing, at most T) live on the GPU and
    are not checked. need_gpu: check that every tensor is on one GPU."""
    T, K, G, N = experts_shape(x, w)
    result = _check_group_values("grouped_mm", x, w, offs, G, out_dtype, out)
    ldc = N
    if out is not None:
        if tuple(out.shape) != (T, N):
            raise InvalidValue(f"out must be (T, N) = ({T}, {N}), got shape {_shape(out.shape)}")
        ldc = _leading(T, N, *out.strides)
        if ldc is None:  # a group's rows are its columns of D: they cannot be transposed
            raise InvalidValue(f"out must be row-major: ({T}, {N}) with stride 1 along N, got "
                               f"strides {_shape(out.strides)}")
    named = [("x", x), ("w", w), ("offs", offs), ("out", out)]
    device = -1
    if need_gpu:
        device = _check_devices([(n, t) for n, t in named if t is not None], "grouped_mm")
    types = DataTypes(w.dtype, x.dtype, result, result)  # the library's A is w
    if min(T, N, G) < 1:
        return GroupedPlan(None, G, types, False, False, (T, N), device)
    if K < 1:
        return GroupedPlan(None, G, types, False, False, (T, N), device, zero_rows=True)
    return _plan(x, w, G, ldc, types, (T, N), device)


def _batch_shapes(names, rows, what, a, b):
    """(G, M, K, N) of a (G, M, K) batch `a` and b (G, K, N); names: theirs in the call, rows
    the name of M, what a's matrices are."""
    a_name, b_name = names
    if len(a.shape) != 3:
        raise InvalidValue(f"{a_name} must be a 3-D (G, {rows}, K) {what}, got shape "
                           f"{_shape(a.shape)}")
    G, M, K = a.shape
    if len(b.shape) != 3 or tuple(b.shape[:2]) != (G, K):
        raise InvalidValue(f"{b_name} must be (G, K, N) = ({G}, {K}, N) for {a_name} of shape "
                           f"{_shape(a.shape)}, got shape {_shape(b.shape)}")
    return G, M, K, b.shape[2]


def _batch_ldc(out, G, M, N, rows):
    """ldc of the (G, M, N) result (`rows` the name of M): N for a new one, else out's, whose
    rows must be row-major and its G matrices one after another."""
    if out is None:
        return N
    if tuple(out.shape) != (G, M, N):
        raise InvalidValue(f"out must be (G, {rows}, N) = ({G}, {M}, {N}), got shape "
                           f"{_shape(out.shape)}")
    out_rows = _rows(out.shape, out.strides)
    ldc = None if out_rows is None else _leading(G * M, N, *out_rows)
    if ldc is None:
        raise InvalidValue(f"out must be row-major rows: ({G}, {M}, {N}) with stride 1 along N and "
                           f"its {G} matrices one after another (strides ({M} * ldc, ldc, 1)), "
                           f"got strides {_shape(out.strides)}")
    return ldc


def _batch_plan(a, b, ldc, types, device, masked=False):
    """The grouped problem of a (G, M, K) @ b (G, K, N) as grouped_mm of a's G*M rows (x) and b
    (w), group g owning rows [g M, (g+1) M) (the first counts[g] of them when masked). a is read
    in place where its rows flatten into one (G*M, K) matrix (else from a contiguous copy), b
    where grouped_mm reads w in place."""
    G, M, K = a.shape
    N = b.shape[2]
    shape = (G, M, N)
    if min(G, M, N) < 1:
        return GroupedPlan(None, G, types, False, False, shape, device, masked=masked)
    if K < 1:
        return GroupedPlan(None, G, types, False, False, shape, device, zero_rows=True,
                           masked=masked)
    rows = _rows(a.shape, a.strides)
    # a.transpose(1, 2) of a (G, K, M) tensor has no such rows: copied (a.contiguous()).
    x = Tensor((G * M, K), rows if rows is not None else (K, 1), a.dtype, a.device)
    return _plan(x, b, G, ldc, types, shape, device, copy_x=rows is None, masked=masked)


def plan_bmm(a, b, out=None, need_gpu=True):
    """The library's grouped problem for bmm(a, b, out): a (G, M, K) @ b (G, K, N) as
    grouped_mm of a's G*M rows (x) and b (w) with the uniform ends (g+1)*M (which the call
    makes). a is read in place where its rows flatten into one (G*M, K) matrix (else from a
    contiguous copy), b where grouped_mm reads w in place. Raises as plan_grouped_mm."""
    G, M, K, N = _batch_shapes(("a", "b"), "M", "batch of matrices", a, b)
    _check_dtypes("bmm", ("a", "b"), a, b)
    result = _result_dtype("bmm", a, None, out)
    ldc = _batch_ldc(out, G, M, N, "M")
    named = [("a", a), ("b", b), ("out", out)]
    device = -1
    if need_gpu:
        device = _check_devices([(n, t) for n, t in named if t is not None], "bmm")
    types = DataTypes(b.dtype, a.dtype, result, result)  # the library's A is b
    return _batch_plan(a, b, ldc, types, device)


def plan_grouped_mm_masked(x, w, counts, out_dtype=None, out=None, need_gpu=True):
    """The library's grouped problem for grouped_mm_masked(x, w, counts, out_dtype, out): x
    (G, cap, K) @ w (G, K, N) as bmm plans it (x's G*cap rows op(B), n = G*cap, w read as
    grouped_mm reads it), in the masked group layout: counts (G,) int32, group g owning the
    first counts[g] of its cap rows. Raises as plan_grouped_mm; counts's values (0 to cap) live
    on the GPU and are not checked."""
    G, cap, K, N = _batch_shapes(("x", "w"), "cap", "batch of each group's capacity of tokens",
                                 x, w)
    result = _check_group_values("grouped_mm_masked", x, w, counts, G, out_dtype, out)
    ldc = _batch_ldc(out, G, cap, N, "cap")
    named = [("x", x), ("w", w), ("counts", counts), ("out", out)]
    device = -1
    if need_gpu:
        device = _check_devices([(n, t) for n, t in named if t is not None], "grouped_mm_masked")
    types = DataTypes(w.dtype, x.dtype, result, result)  # the library's A is w
    return _batch_plan(x, w, ldc, types, device, masked=True)
