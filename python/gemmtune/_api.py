"""The public calls: matmul, linear, select, problem, record."""
import ctypes
import functools
import json
import math
import os
from typing import NamedTuple

from . import _library
from ._library import DTYPES, OPS, Error, check, library
from ._operands import View, is_torch_tensor, view_of
from ._plan import Plan, check_shapes, plan_matmul, shape_text


# gemmtune._torch where torch is importable (set by gemmtune/__init__.py): a module attribute,
# not an import inside the calls, so that torch.compile traces them.
torch_api = None


class Selection(NamedTuple):
    """Which kernel a call uses, and why."""
    source: str  # 'tuned': tuned for this problem on this GPU; 'other_version': tuned for it on
    #              this GPU under another CUDA driver or NVRTC; 'nearest': tuned for the nearest
    #              shape; 'fallback': nothing tuned applies, a built-in default
    kernel: str  # the kernel's name, as profilers show it
    family: str
    config: dict
    note: str  # 'other_version': the driver and NVRTC; 'nearest': the shape it was tuned for
    device: dict  # the key results are looked up by: name, cc, sms, driver, nvrtc

    @property
    def tuned(self):
        return self.source == "tuned"


# ---------------------------------------------------------------------------------------------
# Operands


def _same_dtype(views, names):
    for view, name in zip(views[1:], names[1:]):
        if view.dtype != views[0].dtype:
            raise Error(f"{names[0]} is {views[0].dtype} but {name} is {view.dtype}: gemmtune "
                        "needs one dtype for all operands")


def _one_gpu(views, names):
    """The GPU of the operands (-1: the thread's current one, when no operand says)."""
    devices = {view.device for view in views}
    if len(devices) == 1 and -2 not in devices:  # the usual case: one GPU, nothing to say
        return views[0].device
    def where(device):
        return "not on a GPU" if device == -2 else f"on GPU {device}"
    for view, name in zip(views, names):
        if view.device == -2:
            raise Error(f"{name} is not on a CUDA GPU: gemmtune multiplies tensors in GPU memory "
                        "(move it with .cuda())")
        if view.device != views[0].device and -1 not in (view.device, views[0].device):
            raise Error(f"{names[0]} is {where(views[0].device)} but {name} is "
                        f"{where(view.device)}: gemmtune needs all operands on one GPU")
    return max(view.device for view in views)


def _stream_handle(stream):
    """A stream given as an int handle, a torch.cuda.Stream or a CuPy stream."""
    if stream is None or isinstance(stream, int):
        return stream
    for attribute in ("cuda_stream", "ptr"):
        if hasattr(stream, attribute):
            return int(getattr(stream, attribute))
    raise Error(f"stream is a {type(stream).__name__}: pass an int handle, a torch.cuda.Stream or "
                "a CuPy stream")


class _Operands(NamedTuple):
    """The checked operands of a call: views, the GEMM plan, the device."""
    a: View
    b: View
    c: View  # None: out was not given
    plan: Plan
    device: int


def _operands(a, b, out, stream=None, need_gpu=True, names=("a", "b", "out")):
    va, vb = view_of(a, names[0], stream), view_of(b, names[1], stream)
    vc = view_of(out, names[2], stream) if out is not None else None
    views = (va, vb, vc)
    if vc is None:
        views, names = views[:2], names[:2]
    _same_dtype(views, names)
    device = _one_gpu(views, names) if need_gpu else -1
    plan = _plan(va.dtype, va.shape, va.strides, vb.shape, vb.strides,
                 vc.shape if vc else None, vc.strides if vc else None)
    return _Operands(va, vb, vc, plan, device)


@functools.lru_cache(maxsize=1024)
def _plan(dtype, a_shape, a_strides, b_shape, b_strides, c_shape, c_strides):
    """check_shapes and plan_matmul, remembered: pure functions of the operands' shapes and
    strides, which a model repeats call after call (errors are raised, never remembered).
    None: an empty product (M, N or K is 0)."""
    m, n, k = check_shapes(a_shape, b_shape, c_shape)
    if min(m, n, k) < 1:
        return None
    return plan_matmul(dtype, a_shape, a_strides, b_shape, b_strides, c_strides)


# ---------------------------------------------------------------------------------------------
# The call


def _gemm(plan: Plan, a: View, b: View, c: View, alpha, beta, stream, device):
    p = plan.problem
    first, second = (b, a) if plan.swap else (a, b)
    check(library().gemmtune_gemm_on_device(
        device, DTYPES[p.dtype], OPS[p.layout[0]], OPS[p.layout[1]], p.m, p.n, p.k,
        alpha, first.ptr, p.lda, second.ptr, p.ldb, beta, c.ptr, p.ldc, stream))


def _check_scalars(alpha, beta, out):
    if not (math.isfinite(alpha) and math.isfinite(beta)):
        raise Error(f"alpha and beta must be finite (got {alpha} and {beta})")
    if beta != 0 and out is None:
        raise Error("beta != 0 reads C: pass C as out=")


def matmul(a, b, out=None, *, alpha=1.0, beta=0.0, stream=None):
    """out = alpha * (a @ b) + beta * out, for 2-D a (m x k) and b (k x n) on one GPU, with
    torch's row-major semantics. Transposed views are read in place (their strides become the
    GEMM's op and leading dimension); a matrix needs a unit stride in one dimension.

    a, b, out: torch tensors, or arrays with __cuda_array_interface__ or __dlpack__ (CuPy).
    out=None: a new row-major result (a torch tensor or a CuPy array). stream: an int handle,
    a torch.cuda.Stream or a CuPy stream; by default the current torch stream of the tensors'
    device, else the stream the array interface names, else the default stream.
    Raises gemmtune.Error."""
    if is_torch_tensor(a) or is_torch_tensor(b) or is_torch_tensor(out):
        return torch_api.matmul(a, b, out, alpha, beta, stream)
    return run_matmul(a, b, out, alpha, beta, stream, _ArrayBackend)


def run_matmul(a, b, out, alpha, beta, stream, backend, like=None, names=("a", "b", "out")):
    """matmul for any operands (objects or Views); backend makes results like `like` (default:
    a) and names the default stream; names are the operands' names in error messages."""
    _check_scalars(alpha, beta, out)
    stream = _stream_handle(stream)
    ops = _operands(a, b, out, stream, names=names)
    m, n, k = ops.a.shape[0], ops.b.shape[1], ops.a.shape[1]
    if out is None:
        out = backend.allocate(a if like is None else like, ops.a, m, n)
        ops = ops._replace(c=view_of(out, "out", stream))
    if m == 0 or n == 0:
        return out
    if k == 0:  # a sum over nothing: C = beta * C
        return backend.scale(out, beta)
    if stream is None:
        stream = backend.default_stream(ops)
    _gemm(ops.plan, ops.a, ops.b, ops.c, alpha, beta, stream, ops.device)
    return out


def _cupy_only(array):
    if type(array).__module__.split(".")[0] != "cupy":
        raise Error(f"{type(array).__name__}: gemmtune allocates results only for torch tensors "
                    "and CuPy arrays (pass out= to matmul)")
    import cupy
    return cupy


class _ArrayBackend:
    """CuPy arrays and other array-interface objects."""

    @staticmethod
    def allocate(array, view, m, n):
        cupy = _cupy_only(array)
        with cupy.cuda.Device(view.device if view.device >= 0 else None):
            return cupy.empty((m, n), dtype=array.dtype)

    @staticmethod
    def scale(out, beta):
        raise Error("a has no columns (K = 0): gemmtune needs K >= 1 for arrays other than torch "
                    "tensors")

    @staticmethod
    def default_stream(ops):
        for view in (ops.c, ops.a, ops.b):
            if view.stream is not None:
                return view.stream
        return 0

    @staticmethod
    def rows(x, view):
        return rows_view(view)

    @staticmethod
    def bias_rows(bias, rows, features):
        cupy = _cupy_only(bias)
        return cupy.broadcast_to(bias, (rows, features)).copy()


def check_linear_shapes(x_shape, w_shape, bias_shape=None):
    if len(w_shape) != 2:
        raise Error(f"w is {len(w_shape)}-D (shape {tuple(w_shape)}): linear takes a 2-D weight "
                    "(out_features x in_features)")
    if len(x_shape) < 1 or x_shape[-1] != w_shape[1]:
        raise Error(f"x has shape {tuple(x_shape)} and w {tuple(w_shape)}: x's last dimension "
                    "must equal w's in_features (its second dimension)")
    if bias_shape is not None and tuple(bias_shape) != (w_shape[0],):
        raise Error(f"bias has shape {tuple(bias_shape)}; linear needs ({w_shape[0]},)")


def rows_view(v):
    """A (..., in) View as its rows (N x in), without copying; Error where strides forbid."""
    *lead, features = v.shape
    rows = math.prod(lead)
    sized = [(size, stride) for size, stride in zip(lead, v.strides[:-1]) if size != 1]
    for (_, outer), (size, inner) in zip(sized, sized[1:]):
        if outer != inner * size:
            raise Error(f"x has shape {tuple(v.shape)} and strides {tuple(v.strides)}: its "
                        "leading dimensions do not flatten into rows without a copy; pass a "
                        "contiguous x")
    row_stride = sized[-1][1] if sized else features
    return v._replace(shape=(rows, features), strides=(row_stride, v.strides[-1]))


def _linear_operands(x, w, bias, backend):
    """(x as rows (N x in), w.T (in x out), the result's shape): the operands of x @ w.T."""
    vx, vw = view_of(x, "x"), view_of(w, "w")
    check_linear_shapes(vx.shape, vw.shape, None if bias is None else view_of(bias, "bias").shape)
    wt = vw._replace(shape=vw.shape[::-1], strides=vw.strides[::-1])
    return backend.rows(x, vx), wt, tuple(vx.shape[:-1]) + (vw.shape[0],)


def run_linear(x, w, bias, stream, backend):
    x_rows, wt, shape = _linear_operands(x, w, bias, backend)
    out, beta = None, _linear_beta(bias)
    if bias is not None:
        # The bias enters as C with beta = 1: one pass over the output, added in f32.
        out = backend.bias_rows(bias, math.prod(shape[:-1]), shape[-1])
    y = run_matmul(x_rows, wt, out, 1.0, beta, stream, backend, like=x, names=("x", "w", "bias"))
    return y.reshape(shape)


def linear(x, w, bias=None, *, stream=None):
    """x @ w.T (+ bias), as torch.nn.functional.linear: x is (..., in), w is (out, in), bias
    (out,); the result is (..., out). The GEMM is 'tn' with M = out, N = the number of rows of
    x, K = in. Raises gemmtune.Error."""
    if is_torch_tensor(x) or is_torch_tensor(w):
        return torch_api.linear(x, w, bias, stream)
    return run_linear(x, w, bias, stream, _ArrayBackend)


# ---------------------------------------------------------------------------------------------
# Which kernel, which problem


def problem(a, b, out=None, *, beta=0.0):
    """The column-major GEMM problem gemmtune runs for matmul(a, b, out, beta=beta): what
    gemm-tune tunes (beta only counts for whether it is 0). Needs no GPU (torch tensors on any
    device, even 'meta', will do)."""
    ops = _operands(a, b, out, need_gpu=False)
    if ops.plan is None:
        raise Error(f"a is {shape_text(ops.a.shape)} and b is {shape_text(ops.b.shape)}: "
                    "gemmtune needs M, N and K >= 1")
    return ops.plan.problem._replace(reads_c=beta != 0)


def problem_linear(x, w, bias=None):
    """The column-major GEMM problem gemmtune runs for linear(x, w, bias): with a bias, C
    holds it and is read (beta = 1). Needs no GPU."""
    return problem(*_linear_operands(x, w, bias, _backend_of(x, w))[:2], beta=_linear_beta(bias))


def _linear_beta(bias):
    return 0.0 if bias is None else 1.0


def select(a, b, out=None, *, beta=0.0):
    """Which kernel matmul(a, b, out, beta=beta) uses on its GPU, and why (a Selection).
    Loads or compiles that kernel, as the call would."""
    ops = _operands(a, b, out)
    if ops.plan is None:
        raise Error("an empty product runs no kernel")
    p = ops.plan.problem
    first, second = (ops.b, ops.a) if ops.plan.swap else (ops.a, ops.b)
    text = ctypes.c_char_p()
    check(library().gemmtune_select(
        ops.device, DTYPES[p.dtype], OPS[p.layout[0]], OPS[p.layout[1]], p.m, p.n, p.k,
        first.ptr, p.lda, second.ptr, p.ldb, beta, ops.c.ptr if ops.c else None, p.ldc,
        ctypes.byref(text)))
    fields = json.loads(text.value.decode())
    return Selection(fields["source"], fields["kernel"], fields["family"], fields["config"],
                     fields["note"], fields["device"])


def select_linear(x, w, bias=None):
    """Which kernel linear(x, w, bias) uses on its GPU, and why (a Selection)."""
    return select(*_linear_operands(x, w, bias, _backend_of(x, w))[:2], beta=_linear_beta(bias))


def _backend_of(*operands):
    if any(is_torch_tensor(x) for x in operands):
        return torch_api.TorchBackend
    return _ArrayBackend


def record(problem, path=None):
    """Appends the problem (a gemmtune.Problem) to the shapes file at path (default:
    $GEMMTUNE_RECORD) unless the file lists it already, as GEMMTUNE_RECORD does for every call
    without a tuned kernel. Safe from several processes at once; needs no GPU. Returns True
    when it wrote a line."""
    path = path if path is not None else os.environ.get("GEMMTUNE_RECORD")
    if not path:
        raise Error("record: no file given and GEMMTUNE_RECORD is not set")
    dtype, layout = problem.dtype, problem.layout
    if dtype not in DTYPES or len(layout) != 2 or any(op not in OPS for op in layout):
        raise Error(f"record: {problem} is not a gemmtune problem")
    appended = ctypes.c_int(0)
    check(library().gemmtune_record_problem(
        os.fsencode(path), DTYPES[dtype], OPS[layout[0]], OPS[layout[1]], problem.m, problem.n,
        problem.k, problem.lda, problem.ldb, 1.0 if problem.reads_c else 0.0, problem.ldc,
        ctypes.byref(appended)))
    return bool(appended.value)


def library_path():
    """The libgemmtune file in use (set GEMMTUNE_LIBRARY to choose another)."""
    return _library.library_path()
