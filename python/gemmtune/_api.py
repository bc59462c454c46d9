"""The public calls: matmul, linear, the library calls of scaled_mm and the grouped GEMMs,
select, problem, record."""
import ctypes
import functools
import json
import math
import os
from typing import NamedTuple

from . import _library
from ._library import (OPS, Error, InvalidType, bias_descriptor, check, descriptor,
                       epilogue_name, grouped_descriptor, library, library_f32_precision, scalar,
                       scaled_descriptor, scaled_grouped_descriptor, type_name)
from ._operands import View, is_torch_tensor, view_of
from ._plan import (DataTypes, Plan, call_precision, check_shapes, descriptor_precision,
                    plan_matmul, shape_text)
from ._scaled import FLOAT8, plan_scaled_mm


# gemmtune._torch where torch is importable (set by gemmtune/__init__.py): a module attribute,
# not an import inside the calls, so that torch.compile traces them.
torch_api = None


class Selection(NamedTuple):
    """Which kernel a call uses, and why."""
    source: str  # 'tuned': tuned for this problem on this GPU; 'other_version': tuned for it on
    #              this GPU under another CUDA driver or NVRTC; 'sibling': tuned for it on another
    #              GPU of the same compute capability; 'nearest': tuned for the nearest shape;
    #              'fallback': nothing tuned applies, a built-in default
    kernel: str  # the kernel's name, as profilers show it
    family: str
    config: dict
    note: str  # 'other_version': the driver and NVRTC; 'sibling': the GPU; 'nearest': the shape
    device: dict  # the key results are looked up by: name, cc, sms, driver, nvrtc

    @property
    def tuned(self):
        return self.source == "tuned"


# ---------------------------------------------------------------------------------------------
# Operands and their types

# The dtypes a result takes by default: a's where it is one of them (see result_dtype).
_RESULT_DTYPES = ("f32", "f16", "bf16")


def dtype_name(dtype, what="out_dtype"):
    """The element type's name ('bf16') of a dtype given by a name the library knows ('bf16',
    'bfloat16', 'float8_e4m3fn'), a torch dtype or a NumPy/CuPy dtype."""
    if isinstance(dtype, str):
        text = dtype
    else:
        text = getattr(dtype, "name", None)  # NumPy/CuPy dtypes: 'float16'
        if not isinstance(text, str):
            text = str(dtype)  # torch.bfloat16 -> 'torch.bfloat16'
        if text.startswith("torch."):
            text = text[len("torch."):]
    try:
        return type_name(text)
    except Error as e:
        raise Error(f"{what} is {dtype!r}: {e}", e.code) from None


def result_dtype(a_dtype, b_dtype, out_dtype=None):
    """The dtype (its name) of the result of a call without out=: out_dtype where given; else
    a's when it is f32, f16 or bf16; else (a float8 a: float8 is never an output) bf16, as
    gemm-tune's `--dtype e4m3` means e4m3*e4m3->bf16. The result is D, written over C: both are
    of this dtype. b's dtype does not count (kept for the callers' sake)."""
    if out_dtype is not None:
        return dtype_name(out_dtype)
    return a_dtype if a_dtype in _RESULT_DTYPES else "bf16"


def _types(va, vb, vc, out_dtype, names):
    """The DataTypes of a call's operands, as the call passes them (a, b, out)."""
    if vc is None:
        c = result_dtype(va.dtype, vb.dtype, out_dtype)
    else:
        c = vc.dtype
        if out_dtype is not None and dtype_name(out_dtype) != c:
            raise Error(f"{names[2]} is {c} but out_dtype is {dtype_name(out_dtype)}: the "
                        f"result is written into {names[2]}, in its dtype (leave out_dtype out)")
    return DataTypes(va.dtype, vb.dtype, c, c)


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


# ---------------------------------------------------------------------------------------------
# Epilogues: a bias along the result's columns and an activation, applied by the kernel's store

# Activations by the names linear takes (torch's among them), as the library names them.
_ACTIVATION_NAMES = {"identity": "identity", "none": "identity", "relu": "relu", "gelu": "gelu",
                     "gelu_tanh": "gelu_tanh", "silu": "silu"}
# torch.nn's activation modules by class name (read by name: torch need not be imported).
_ACTIVATION_MODULES = {"Identity": "identity", "ReLU": "relu", "GELU": "gelu", "SiLU": "silu"}


def activation_name(activation, approximate="none"):
    """The library's name of an activation given as None, a name ('relu', 'gelu', 'gelu_tanh',
    'silu'), a torch.nn module (nn.GELU(approximate='tanh')) or function (F.silu); approximate:
    F.gelu's ('none', or 'tanh' for GELU's tanh form)."""
    name = _activation_of(activation)
    if approximate == "tanh" and name in ("gelu", "gelu_tanh"):
        return "gelu_tanh"
    if approximate not in ("none", "tanh"):
        raise Error(f"approximate is {approximate!r}: F.gelu's 'none' or 'tanh'")
    if approximate == "tanh" and name != "gelu_tanh":
        raise Error(f"approximate='tanh' is GELU's tanh form, but the activation is {name}")
    return name


def _activation_of(activation):
    if activation is None:
        return "identity"
    if isinstance(activation, str):
        name = _ACTIVATION_NAMES.get(activation.lower())
    else:
        name = _ACTIVATION_MODULES.get(type(activation).__name__)
        if name == "gelu" and getattr(activation, "approximate", "none") == "tanh":
            name = "gelu_tanh"
        if name is None and callable(activation):  # F.relu, torch.relu, F.gelu, F.silu
            name = _ACTIVATION_NAMES.get(getattr(activation, "__name__", ""))
    if name is None:
        raise Error(f"activation is {activation!r}: expected None, 'relu', 'gelu', "
                    "'gelu_tanh' or 'silu' (or torch.nn.ReLU, GELU, SiLU, or F.relu, F.gelu, "
                    "F.silu)")
    return name


class Epilogue(NamedTuple):
    """What a call's store applies: a bias along the result's columns (an nn.Linear's output
    features) and an activation; gated ('halves', 'interleaved'): act(gate) * up of the
    columns' two parts; aux: where the pre-activation goes too (a View laid out as the result),
    or None."""
    bias: object = None  # the bias (an array, a View), or None
    activation: str = "identity"
    gate: str = "none"
    aux: object = None

    def name(self, plan):
        """Its name in the plan's problem: the result's columns are the GEMM's M where the plan
        swaps the operands (a row-major result), else its N."""
        along = "none" if self.bias is None else ("m" if plan.swap else "n")
        return epilogue_name(along, self.activation, self.gate, self.aux is not None)


# A gated epilogue's activations by the names gated_linear takes (the gated forms' among them).
_GATED_ACTIVATION_NAMES = {"silu": "silu", "swiglu": "silu", "gelu": "gelu", "geglu": "gelu",
                           "gelu_tanh": "gelu_tanh", "geglu_tanh": "gelu_tanh", "relu": "relu",
                           "reglu": "relu"}
GATE_LAYOUTS = ("halves", "interleaved")


def gated_activation_name(activation, layout="halves"):
    """The library's name of a gated epilogue's activation ('silu' for 'swiglu', 'gelu' for
    'geglu', ...; torch.nn modules and F functions as linear takes them), its layout checked."""
    if layout not in GATE_LAYOUTS:
        raise Error(f"layout is {layout!r}: 'halves' (w_gate_up = [w_gate; w_up], Hugging "
                    "Face's) or 'interleaved' (gate and up rows alternate)")
    if isinstance(activation, str) and activation.lower() in _GATED_ACTIVATION_NAMES:
        return _GATED_ACTIVATION_NAMES[activation.lower()]
    name = None if activation is None else _activation_or_none(activation)
    if name not in ("silu", "gelu", "gelu_tanh", "relu"):
        raise Error(f"activation is {activation!r}: a gated linear takes 'silu' (SwiGLU), "
                    "'gelu' or 'gelu_tanh' (GeGLU) or 'relu' (ReGLU), or 'swiglu', 'geglu', "
                    "'geglu_tanh', 'reglu'")
    return name


def _activation_or_none(activation):
    try:
        return _activation_of(activation)
    except Error:
        return None


NO_EPILOGUE = Epilogue()


class _Operands(NamedTuple):
    """The checked operands of a call: views, the GEMM plan, the device, the types."""
    a: View
    b: View
    c: View  # None: out was not given
    plan: Plan
    device: int
    types: DataTypes  # of the call's a, b and out (the plan's are the GEMM's)


def _operands(a, b, out, stream=None, need_gpu=True, names=("a", "b", "out"), out_dtype=None,
              precision=None, backend=None):
    """precision: the call's (None: its backend's default for f32 calls, call_precision)."""
    va, vb = view_of(a, names[0], stream), view_of(b, names[1], stream)
    vc = view_of(out, names[2], stream) if out is not None else None
    types = _types(va, vb, vc, out_dtype, names)
    views = (va, vb, vc)
    if vc is None:
        views, names = views[:2], names[:2]
    device = _one_gpu(views, names) if need_gpu else -1
    # The backend is asked only for f32 calls' default: the others never look.
    precision = call_precision(
        types, precision, lambda: (backend or _backend_of(a, b)).default_precision())
    plan = _plan(types, va.shape, va.strides, vb.shape, vb.strides,
                 vc.shape if vc else None, vc.strides if vc else None, precision)
    return _Operands(va, vb, vc, plan, device, types)


@functools.lru_cache(maxsize=1024)
def _plan(types, a_shape, a_strides, b_shape, b_strides, c_shape, c_strides, precision):
    """check_shapes and plan_matmul, remembered: pure functions of the operands' types, shapes
    and strides and the precision, which a model repeats call after call (errors are raised,
    never remembered). None: an empty product (M, N or K is 0)."""
    m, n, k = check_shapes(a_shape, b_shape, c_shape)
    if min(m, n, k) < 1:
        return None
    return plan_matmul(types, a_shape, a_strides, b_shape, b_strides, c_strides, precision)


# ---------------------------------------------------------------------------------------------
# The call


def _float8_hint(types, error):
    """The library's refusal of a problem with float8 operands (they take scales, and float8
    multiplies float8 only), with where such operands go."""
    if error.code == "invalid_argument" and (types.a in FLOAT8 or types.b in FLOAT8):
        return Error(f"{error} (float8 operands go through gemmtune.scaled_mm, with their "
                     "scales)", error.code)
    return error


def _gemm(plan: Plan, a: View, b: View, c: View, alpha, beta, stream, device,
          epilogue=NO_EPILOGUE):
    p = plan.problem
    first, second = (b, a) if plan.swap else (a, b)
    try:
        check(library().gemmtune_matmul(
            device, _call_descriptor(plan, epilogue).handle, p.m, p.n, p.k, scalar(alpha),
            first.ptr, p.lda, second.ptr, p.ldb, scalar(beta), c.ptr, p.ldc, stream))
    except Error as e:
        raise _float8_hint(plan.types, e) from None


def _call_descriptor(plan, epilogue):
    """The descriptor of a call: the one kept for its types, layout, epilogue and precision, or
    with a bias (a View) this thread's, its bias pointer set for the call."""
    name, layout = epilogue.name(plan), plan.problem.layout
    precision = descriptor_precision(plan.types, plan.problem.precision)
    if epilogue.bias is None and epilogue.aux is None:
        return descriptor(plan.types, layout, epilogue=name, precision=precision)
    desc = bias_descriptor(plan.types, layout, name, precision)
    if epilogue.bias is not None:
        desc.set_bias(epilogue.bias.ptr)
    if epilogue.aux is not None:
        desc.set_aux(epilogue.aux.ptr)
    return desc


def _check_scalars(alpha, beta, out):
    if not (math.isfinite(alpha) and math.isfinite(beta)):
        raise Error(f"alpha and beta must be finite (got {alpha} and {beta})")
    if beta != 0 and out is None:
        raise Error("beta != 0 reads C: pass C as out=")


def matmul(a, b, out=None, *, alpha=1.0, beta=0.0, stream=None, out_dtype=None,
           precision=None):
    """out = alpha * (a @ b) + beta * out, for 2-D a (m x k) and b (k x n) on one GPU, with
    torch's row-major semantics. Transposed views are read in place (their strides become the
    GEMM's op and leading dimension); a matrix needs a unit stride in one dimension.

    a, b, out: torch tensors, or arrays with __cuda_array_interface__ or __dlpack__ (CuPy).
    a and b may differ in dtype (f16 and bf16, say); which combinations run is the library's
    answer for the GPU (Error 'unsupported' names the types). Float8 operands take scales, which
    matmul cannot pass: they go through scaled_mm (here the library refuses them, its message
    naming the types). out=None: a new row-major result (a torch tensor or a CuPy array) of
    dtype out_dtype (a name such as 'bf16', or a torch/NumPy dtype); by default a's dtype when a
    is float32, float16 or bfloat16, else bfloat16 (result_dtype). With out, the result has
    out's dtype. stream: an int handle, a torch.cuda.Stream or a CuPy stream; by default the current
    torch stream of the tensors' device, else the stream the array interface names, else the
    default stream. precision: how f32 operands and result are multiplied: 'exact' (f32 on
    CUDA cores), 'tf32' (tensor cores, 10-bit mantissas) or '3xtf32' (three tf32 products,
    exact's accuracy); other dtypes are exact. None: for torch tensors, torch's
    torch.get_float32_matmul_precision() ('highest': exact; 'high' and 'medium': tf32), read at
    each call; for other arrays, $GEMMTUNE_F32_PRECISION, else exact. Each precision is its own
    problem, tuned apart. Raises gemmtune.Error."""
    if is_torch_tensor(a) or is_torch_tensor(b) or is_torch_tensor(out):
        return torch_api.matmul(a, b, out, alpha, beta, stream, out_dtype, precision)
    return run_matmul(a, b, out, alpha, beta, stream, _ArrayBackend, out_dtype=out_dtype,
                      precision=precision)


def run_matmul(a, b, out, alpha, beta, stream, backend, like=None, names=("a", "b", "out"),
               out_dtype=None, epilogue=NO_EPILOGUE, precision=None, keep_pre_activation=False):
    """matmul for any operands (objects or Views); backend makes results like `like` (default:
    a), names the default stream and the default precision; names are the operands' names in
    error messages. epilogue: an Epilogue whose bias (a vector of the result's dtype,
    contiguous) is on the operands' GPU. keep_pre_activation: (the result, its pre-activation)
    instead, the second made as the first (out must be None)."""
    _check_scalars(alpha, beta, out)
    stream = _stream_handle(stream)
    ops = _operands(a, b, out, stream, names=names, out_dtype=out_dtype, precision=precision,
                    backend=backend)
    bias = epilogue.bias
    if bias is not None:  # its address, and on the operands' GPU
        epilogue = epilogue._replace(bias=view_of(bias, "bias", stream))
        _one_gpu((ops.a, epilogue.bias), (names[0], "bias"))
    m, n, k = ops.a.shape[0], ops.b.shape[1], ops.a.shape[1]
    if out is None:
        out = backend.allocate(a if like is None else like, ops.a, m, n, ops.types.d)
        ops = ops._replace(c=view_of(out, "out", stream))
    pre = None
    if keep_pre_activation:
        pre = backend.allocate(a if like is None else like, ops.a, m, n, ops.types.d)
        epilogue = epilogue._replace(aux=view_of(pre, "pre_activation", stream))
    done = out if pre is None else (out, pre)
    if m == 0 or n == 0:
        return done
    if k == 0:  # a sum over nothing: C = beta * C, then the epilogue
        out = backend.scale(out, beta)
        if pre is not None:
            pre = backend.finish(backend.scale(pre, 0.0), bias, "identity")
        if epilogue.bias is None and epilogue.activation == "identity":
            return done
        out = backend.finish(out, bias, epilogue.activation)
        return out if pre is None else (out, pre)
    if stream is None:
        stream = backend.default_stream(ops)
    _gemm(ops.plan, ops.a, ops.b, ops.c, alpha, beta, stream, ops.device, epilogue)
    return done


def _cupy_only(array):
    if type(array).__module__.split(".")[0] != "cupy":
        raise Error(f"{type(array).__name__}: gemmtune allocates results only for torch tensors "
                    "and CuPy arrays (pass out= to matmul)")
    import cupy
    return cupy


# The CuPy (NumPy) dtype of a result dtype other than a's: CuPy has no bfloat16 or float8.
_CUPY_DTYPES = {"f32": "float32", "f16": "float16"}


def _cupy_dtype(array, view, dtype):
    if dtype == view.dtype:
        return array.dtype
    if dtype not in _CUPY_DTYPES:
        raise Error(f"CuPy has no {dtype} arrays: pass out= (an array of that dtype), or "
                    "out_dtype='f32' or 'f16'", "unsupported")
    return _CUPY_DTYPES[dtype]


class _ArrayBackend:
    """CuPy arrays and other array-interface objects."""

    # f32 calls' precision where none is given: the library's (GEMMTUNE_F32_PRECISION).
    default_precision = staticmethod(library_f32_precision)

    @staticmethod
    def allocate(array, view, m, n, dtype):
        cupy = _cupy_only(array)
        with cupy.cuda.Device(view.device if view.device >= 0 else None):
            return cupy.empty((m, n), dtype=_cupy_dtype(array, view, dtype))

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
    def finish_gated(out, bias, activation, layout):
        raise Error("x has no features (K = 0): gemmtune needs K >= 1 for arrays other than torch "
                    "tensors")

    @staticmethod
    def bias_vector(bias, dtype):
        """The bias as the kernel reads it: contiguous, of the result's dtype (a CuPy copy where
        it is not)."""
        view = view_of(bias, "bias")
        if view.dtype == dtype and (view.shape[0] <= 1 or view.strides[0] == 1):
            return bias
        if type(bias).__module__.split(".")[0] != "cupy":
            raise Error(f"bias is {view.dtype} with stride {view.strides[0]}, but the kernel reads "
                        f"a contiguous bias of the result's dtype ({dtype}): gemmtune converts "
                        "only torch tensors and CuPy arrays; pass such a bias")
        import cupy
        return cupy.ascontiguousarray(bias, dtype=_cupy_dtype(bias, view, dtype))


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
    """(x as rows (N x in), w.T (in x out), the result's shape, x's dtype, w's dtype): the
    operands of x @ w.T."""
    vx, vw = view_of(x, "x"), view_of(w, "w")
    check_linear_shapes(vx.shape, vw.shape, None if bias is None else view_of(bias, "bias").shape)
    wt = vw._replace(shape=vw.shape[::-1], strides=vw.strides[::-1])
    return (backend.rows(x, vx), wt, tuple(vx.shape[:-1]) + (vw.shape[0],), vx.dtype,
            vw.dtype)


def run_linear(x, w, bias, stream, backend, out_dtype=None, activation="identity",
               precision=None, keep_pre_activation=False):
    """linear with the activation's library name; the bias and the activation go to the
    kernel's epilogue (the bias converted to the result's dtype where it is not).
    keep_pre_activation: (the result, x @ w.T + bias), both stored by the one kernel."""
    if keep_pre_activation and activation == "identity":
        raise Error("return_pre_activation needs an activation (relu, gelu, gelu_tanh or silu): "
                    "without one the pre-activation is the result")
    x_rows, wt, shape, x_dtype, w_dtype = _linear_operands(x, w, bias, backend)
    if bias is not None:
        bias = backend.bias_vector(bias, result_dtype(x_dtype, w_dtype, out_dtype))
    y = run_matmul(x_rows, wt, None, 1.0, 0.0, stream, backend, like=x, names=("x", "w", "out"),
                   out_dtype=out_dtype, epilogue=Epilogue(bias, activation), precision=precision,
                   keep_pre_activation=keep_pre_activation)
    if keep_pre_activation:
        return y[0].reshape(shape), y[1].reshape(shape)
    return y.reshape(shape)


def linear(x, w, bias=None, *, activation=None, approximate="none", stream=None,
           out_dtype=None, precision=None, return_pre_activation=False):
    """act(x @ w.T + bias), as torch.nn.functional.linear followed by the activation: x is
    (..., in), w is (out, in), bias (out,) or None; the result is (..., out). The GEMM is 'tn'
    with M = out, N = the number of rows of x, K = in; the bias (along M) and the activation
    are applied by the kernel's store, in f32, before the one rounding into the result (the
    bias is read as a vector of the result's dtype: converted first where it is not).
    activation: None, 'relu', 'gelu', 'gelu_tanh' or 'silu', or torch.nn.ReLU(), GELU(),
    SiLU(), F.relu, F.gelu, F.silu; approximate='tanh' (F.gelu's) makes 'gelu' GELU's tanh
    form. x and w may differ in dtype; the result's is out_dtype, by default as matmul's with x
    as a (result_dtype). precision: of f32 calls, as matmul's. return_pre_activation: (the
    result, x @ w.T + bias), the second as the kernel stores it beside the first (rounded to the
    result's dtype; what the activation's backward reads), for an activation other than the
    identity. Raises gemmtune.Error."""
    if activation is None and approximate == "none":  # the usual call: nothing to look up
        activation = "identity"
    else:
        activation = activation_name(activation, approximate)
    if is_torch_tensor(x) or is_torch_tensor(w):
        if return_pre_activation:
            return torch_api.linear_keeping(x, w, bias, stream, out_dtype, activation, precision)
        return torch_api.linear(x, w, bias, stream, out_dtype, activation, precision)
    return run_linear(x, w, bias, stream, _ArrayBackend, out_dtype, activation, precision,
                      return_pre_activation)


# ---------------------------------------------------------------------------------------------
# Gated linear (SwiGLU, GeGLU): act(x @ w_gate.T + b_gate) * (x @ w_up.T + b_up) in one GEMM


def check_gated_shapes(x_shape, w_shape, bias_shape=None):
    """Errors for a gated linear's operands: w (2I, in) with an even 2I, x (..., in), bias
    (2I,)."""
    if len(w_shape) != 2:
        raise Error(f"w_gate_up is {len(w_shape)}-D (shape {tuple(w_shape)}): gated_linear "
                    "takes a 2-D weight (2 * intermediate x in_features)")
    if w_shape[0] % 2:
        raise Error(f"w_gate_up has {w_shape[0]} rows: gated_linear needs an even number, the "
                    "gate's and the up projection's")
    if len(x_shape) < 1 or x_shape[-1] != w_shape[1]:
        raise Error(f"x has shape {tuple(x_shape)} and w_gate_up {tuple(w_shape)}: x's last "
                    "dimension must equal w_gate_up's in_features (its second dimension)")
    if bias_shape is not None and tuple(bias_shape) != (w_shape[0],):
        raise Error(f"bias has shape {tuple(bias_shape)}; gated_linear needs ({w_shape[0]},), "
                    "the gate's and the up projection's")


def _gated_operands(x, w, bias, stream, backend, out_dtype, need_gpu=True, precision=None):
    """(the checked operands of x @ w.T, the result's shape (..., I))."""
    names = ("x", "w_gate_up", "out")
    vx, vw = view_of(x, names[0]), view_of(w, names[1])
    check_gated_shapes(vx.shape, vw.shape,
                       None if bias is None else view_of(bias, "bias").shape)
    wt = vw._replace(shape=vw.shape[::-1], strides=vw.strides[::-1])
    ops = _operands(backend.rows(x, vx), wt, None, stream, names=names, out_dtype=out_dtype,
                    need_gpu=need_gpu, precision=precision, backend=backend)
    return ops, tuple(vx.shape[:-1]) + (vw.shape[0] // 2,)


def gated_plan(plan, epilogue):
    """The plan of x @ w.T (a row-major (rows, 2I) result) as the gated problem: D has I rows
    (ldc = I), the epilogue's name in the problem."""
    p = plan.problem
    return plan._replace(problem=p._replace(ldc=max(1, p.m // 2), epilogue=epilogue.name(plan)))


def run_gated_linear(x, w, bias, stream, backend, out_dtype=None, activation="silu",
                     layout="halves", precision=None):
    """gated_linear with the activation's library name: one GEMM, x @ w.T with the gated
    epilogue (the bias, of the result's dtype, to gate and up before the product)."""
    stream = _stream_handle(stream)
    ops, shape = _gated_operands(x, w, bias, stream, backend, out_dtype, precision=precision)
    epilogue = Epilogue(None, activation, layout)
    if bias is not None:
        bias = backend.bias_vector(bias, ops.types.d)
        epilogue = epilogue._replace(bias=view_of(bias, "bias", stream))
        _one_gpu((ops.a, epilogue.bias), ("x", "bias"))
    rows, inter = ops.a.shape[0], shape[-1]
    out = backend.allocate(x, ops.a, rows, inter, ops.types.d)
    if rows == 0 or inter == 0:
        return out.reshape(shape)
    if ops.a.shape[1] == 0:  # a sum over nothing: act(b_gate) * b_up
        return backend.finish_gated(out, bias, activation, layout).reshape(shape)
    ops = ops._replace(c=view_of(out, "out", stream))
    if stream is None:
        stream = backend.default_stream(ops)
    _gemm(gated_plan(ops.plan, epilogue), ops.a, ops.b, ops.c, 1.0, 0.0, stream, ops.device,
          epilogue)
    return out.reshape(shape)


def gated_linear(x, w_gate_up, bias=None, *, activation="silu", layout="halves", stream=None,
                 out_dtype=None, precision=None):
    """act(x @ w_gate.T + b_gate) * (x @ w_up.T + b_up), a gated MLP's first projection
    (SwiGLU with 'silu', GeGLU with 'gelu' or 'gelu_tanh', ReGLU with 'relu') in one GEMM: x is
    (..., in), w_gate_up (2I, in) holds both weights, bias (2I,) both biases or None; the result
    is (..., I). layout: 'halves', w_gate_up = [w_gate; w_up] (rows [0, I) gate, [I, 2I) up:
    Hugging Face's gate_up_proj, torch.cat((w_gate, w_up))), or 'interleaved' (rows 2i gate,
    2i + 1 up). The GEMM is linear's, 'tn' with M = 2I, N = the rows of x, K = in, and its
    store writes act(gate) * up of each pair, in f32, rounded once into the result (ldc = I): the
    gate and up values are never stored. activation: also 'swiglu', 'geglu', 'geglu_tanh',
    'reglu', or torch.nn.SiLU(), GELU(), ReLU(), F.silu, F.gelu, F.relu. Kernels: Hopper
    (wgmma_sm90), sm_80 and later (mma_sm80, bf16 and f16); elsewhere the library refuses the
    problem (Error 'unsupported'). x and
    w_gate_up may differ in dtype; the result's is out_dtype, by default as linear's.
    precision: of f32 calls, as matmul's. No autograd. Raises gemmtune.Error."""
    activation = gated_activation_name(activation, layout)
    if is_torch_tensor(x) or is_torch_tensor(w_gate_up):
        return torch_api.gated_linear(x, w_gate_up, bias, stream, out_dtype, activation, layout,
                                      precision)
    return run_gated_linear(x, w_gate_up, bias, stream, _ArrayBackend, out_dtype, activation,
                            layout, precision)


# ---------------------------------------------------------------------------------------------
# Which kernel, which problem


def problem(a, b, out=None, *, beta=0.0, out_dtype=None, precision=None):
    """The column-major GEMM problem gemmtune runs for matmul(a, b, out, beta=beta,
    out_dtype=out_dtype, precision=precision): what gemm-tune tunes (beta only counts for whether
    it is 0), its precision the call's (torch's setting or GEMMTUNE_F32_PRECISION's, as matmul
    takes them, now). Needs no GPU (torch tensors on any device, even 'meta', will do). It
    describes the call; the library checks the problem where it is used (a call, select, record),
    and refuses float8 operands without scales, which matmul and linear cannot pass
    (problem_scaled_mm gives scaled_mm's)."""
    ops = _operands(a, b, out, need_gpu=False, out_dtype=out_dtype, precision=precision)
    return _problem_of(ops, beta)


def _problem_of(ops, beta, epilogue=NO_EPILOGUE):
    if ops.plan is None:
        raise Error(f"a is {shape_text(ops.a.shape)} and b is {shape_text(ops.b.shape)}: "
                    "gemmtune needs M, N and K >= 1")
    return ops.plan.problem._replace(reads_c=beta != 0, epilogue=epilogue.name(ops.plan))


def problem_linear(x, w, bias=None, *, activation=None, approximate="none", out_dtype=None,
                   precision=None):
    """The column-major GEMM problem gemmtune runs for linear(x, w, bias, activation=...,
    approximate=...): 'tn' with M = out_features, its epilogue the bias along M and the
    activation ('bias,gelu'); C is not read. Needs no GPU."""
    epilogue = Epilogue(bias, activation_name(activation, approximate))
    backend = _backend_of(x, w)
    x_rows, wt = _linear_operands(x, w, bias, backend)[:2]
    ops = _operands(x_rows, wt, None, need_gpu=False, out_dtype=out_dtype, precision=precision,
                    backend=backend)
    return _problem_of(ops, 0.0, epilogue)


def select(a, b, out=None, *, beta=0.0, out_dtype=None, precision=None):
    """Which kernel matmul(a, b, out, beta=beta, out_dtype=out_dtype, precision=precision)
    uses on its GPU, and why (a Selection). Loads or compiles that kernel, as the call would."""
    return _select_operands(_operands(a, b, out, out_dtype=out_dtype, precision=precision), beta)


def _select_operands(ops, beta, epilogue=NO_EPILOGUE):
    """The Selection of a call of checked operands; the epilogue's bias needs no address."""
    if ops.plan is None:
        raise Error("an empty product runs no kernel")
    p = ops.plan.problem
    first, second = (ops.b, ops.a) if ops.plan.swap else (ops.a, ops.b)
    desc = descriptor(ops.plan.types, p.layout, epilogue=epilogue.name(ops.plan),
                      precision=descriptor_precision(ops.plan.types, p.precision))
    try:
        return _select(ops.device, desc, p, first.ptr, second.ptr, beta,
                       ops.c.ptr if ops.c else None)
    except Error as e:
        raise _float8_hint(ops.plan.types, e) from None


def _select(device, desc, p, a_ptr, b_ptr, beta, c_ptr):
    text = ctypes.c_char_p()
    check(library().gemmtune_matmul_select(
        device, desc.handle, p.m, p.n, p.k, a_ptr, p.lda, b_ptr, p.ldb, beta, c_ptr, p.ldc,
        ctypes.byref(text)))
    fields = json.loads(text.value.decode())
    return Selection(fields["source"], fields["kernel"], fields["family"], fields["config"],
                     fields["note"], fields["device"])


def select_linear(x, w, bias=None, *, activation=None, approximate="none", out_dtype=None,
                  precision=None):
    """Which kernel linear(x, w, bias, activation=..., approximate=...) uses on its GPU, and
    why (a Selection): the kernel's name ends with its epilogue ('_bias_gelu')."""
    epilogue = Epilogue(bias, activation_name(activation, approximate))
    backend = _backend_of(x, w)
    x_rows, wt = _linear_operands(x, w, bias, backend)[:2]
    ops = _operands(x_rows, wt, None, names=("x", "w", "out"), out_dtype=out_dtype,
                    precision=precision, backend=backend)
    if bias is not None:  # on the operands' GPU, as the call needs it
        _one_gpu((ops.a, view_of(bias, "bias")), ("x", "bias"))
    return _select_operands(ops, 0.0, epilogue)


def problem_gated_linear(x, w_gate_up, bias=None, *, activation="silu", layout="halves",
                         out_dtype=None, precision=None):
    """The column-major GEMM problem gemmtune runs for gated_linear(x, w_gate_up, bias,
    activation=..., layout=...): 'tn' with M = 2I (w_gate_up's rows), N = the rows of x, K = in,
    ldc = I (D has M / 2 rows), its epilogue the gated one ('swiglu', 'bias,geglu,interleaved');
    C is not read. Needs no GPU."""
    epilogue = Epilogue(bias, gated_activation_name(activation, layout), layout)
    ops, _ = _gated_operands(x, w_gate_up, bias, None, _backend_of(x, w_gate_up), out_dtype,
                             need_gpu=False, precision=precision)
    if ops.plan is None:
        raise Error(f"x has {ops.a.shape[0]} rows of {ops.a.shape[1]} features and w_gate_up "
                    f"{ops.b.shape[1]} rows: gemmtune needs M, N and K >= 1")
    return gated_plan(ops.plan, epilogue).problem


def select_gated_linear(x, w_gate_up, bias=None, *, activation="silu", layout="halves",
                        out_dtype=None, precision=None):
    """Which kernel gated_linear(x, w_gate_up, bias, activation=..., layout=...) uses on its
    GPU, and why (a Selection): the kernel's name ends with its epilogue ('_swiglu')."""
    epilogue = Epilogue(bias, gated_activation_name(activation, layout), layout)
    ops, _ = _gated_operands(x, w_gate_up, bias, None, _backend_of(x, w_gate_up), out_dtype,
                             precision=precision)
    if bias is not None:  # on the operands' GPU, as the call needs it
        _one_gpu((ops.a, view_of(bias, "bias")), ("x", "bias"))
    if ops.plan is None:
        raise Error("an empty product runs no kernel")
    plan = gated_plan(ops.plan, epilogue)
    p = plan.problem
    desc = descriptor(plan.types, p.layout, epilogue=p.epilogue,
                      precision=descriptor_precision(plan.types, p.precision))
    return _select(ops.device, desc, p, ops.b.ptr, ops.a.ptr, 0.0, None)


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
    layout = problem.layout
    if not isinstance(layout, str) or len(layout) != 2 or any(op not in OPS for op in layout):
        raise Error(f"record: {problem} is not a gemmtune problem (layout '{layout}')")
    try:
        # The library knows the types' names and writes the line: the descriptor carries the
        # scaling, accumulation, epilogue and precision.
        precision = descriptor_precision(problem.types, getattr(problem, "precision", "exact"))
        desc = descriptor(problem.types, layout, getattr(problem, "scaling", "none"),
                          getattr(problem, "accumulation", "precise"),
                          getattr(problem, "epilogue", "none"), precision)
    except Error as e:
        raise Error(f"record: {e}", e.code) from None
    appended = ctypes.c_int(0)
    check(library().gemmtune_matmul_record_problem(
        os.fsencode(path), desc.handle, problem.m, problem.n, problem.k, problem.lda,
        problem.ldb, 1.0 if problem.reads_c else 0.0, problem.ldc, ctypes.byref(appended)))
    return bool(appended.value)


# ---------------------------------------------------------------------------------------------
# Float8: scaled_mm (torch._scaled_mm's semantics; gemmtune._torch holds the call itself)


def scaled_out_dtype(value):
    """scaled_mm's out_dtype as a type's name ('bf16'); a dtype gemmtune has no name for as its
    own name ('float64'), which plan_scaled_mm refuses with a TypeError."""
    if hasattr(value, "shape") and not isinstance(value, str):
        raise InvalidType(f"out_dtype is a {type(value).__name__}: scaled_mm's fifth argument is "
                          "out_dtype (torch._scaled_mm's is bias: pass bias=...)")
    try:
        return dtype_name(value)
    except Error:
        text = str(value)
        return text[len("torch."):] if text.startswith("torch.") else text


def _scaled_views(tensors, names):
    views = []
    for t, name in zip(tensors, names):
        if t is None:
            views.append(None)
        elif is_torch_tensor(t):
            views.append(torch_api.scaled_view(t, name))
        else:
            views.append(view_of(t, name))
    return views


_SCALED_NAMES = ("a", "b", "scale_a", "scale_b", "bias")


def problem_scaled_mm(a, b, scale_a, scale_b, *, out_dtype="bf16", bias=None,
                      use_fast_accum=False):
    """The column-major float8 problem gemmtune runs for scaled_mm(a, b, scale_a, scale_b,
    out_dtype, bias, use_fast_accum): 'tn' with M = b's columns (N), N = a's rows (M), K, the
    types of b and a, out_dtype, the scaling the scales' shapes say (Problem.scaling) and the
    accumulation (Problem.accumulation: 'fast' with use_fast_accum for tensor and row scaling,
    else 'precise'); with a bias, C holds it and is read (beta = 1). Needs no GPU (tensors on any
    device, even 'meta'). Raises ValueError and TypeError as scaled_mm does."""
    views = _scaled_views((a, b, scale_a, scale_b, bias), _SCALED_NAMES)
    plan = plan_scaled_mm(*views[:4], scaled_out_dtype(out_dtype), bias=views[4],
                          need_gpu=False, use_fast_accum=bool(use_fast_accum))
    if plan.problem is None:
        raise Error(f"a is {shape_text(views[0].shape)} and b is {shape_text(views[1].shape)}: "
                    "gemmtune needs M, N and K >= 1")
    return plan.problem


def select_scaled_mm(a, b, scale_a, scale_b, *, out_dtype="bf16", bias=None,
                     use_fast_accum=False):
    """Which kernel scaled_mm(a, b, scale_a, scale_b, out_dtype, bias, use_fast_accum) uses on
    its GPU, and why (a Selection). Loads or compiles that kernel, as the call would."""
    views = _scaled_views((a, b, scale_a, scale_b, bias), _SCALED_NAMES)
    plan = plan_scaled_mm(*views[:4], scaled_out_dtype(out_dtype), bias=views[4],
                          use_fast_accum=bool(use_fast_accum))
    if plan.problem is None:
        raise Error("an empty product runs no kernel")
    p = plan.problem
    return _select(plan.device, descriptor(plan.types, p.layout, plan.scaling, p.accumulation),
                   p, views[1].ptr, views[0].ptr, 1.0 if p.reads_c else 0.0, None)


def run_scaled(plan, a, b, scales, out, stream):
    """The library call of a planned scaled_mm (plan_scaled_mm): a, b and out are addresses,
    scales the addresses of the call's scale tensors ({'scale_a': ..., 'scale_b': ...}), each
    laid out as the plan says. The GEMM's A is b, its B is a, and each one's scales are the
    plan's (torch's scale_b for A), and its accumulation the plan's. With a bias, out holds it
    already (beta = 1)."""
    p = plan.problem
    desc = scaled_descriptor(plan.types, p.layout, plan.scaling, p.accumulation)  # this thread's
    desc.set_scales(scales[plan.scale_a.argument], scales[plan.scale_b.argument])
    check(library().gemmtune_matmul(
        plan.device, desc.handle, p.m, p.n, p.k, scalar(1.0), b, p.lda, a, p.ldb,
        scalar(1.0 if p.reads_c else 0.0), out, p.ldc, stream))


def scaled_mm(a, b, scale_a, scale_b, out_dtype="bf16", bias=None, use_fast_accum=False,
              out=None):
    """torch._scaled_mm through gemmtune: needs PyTorch (gemmtune._torch.scaled_mm is this
    function where torch is importable)."""
    raise InvalidType("scaled_mm takes torch tensors (torch._scaled_mm's semantics), and torch "
                      "is not importable here")


# ---------------------------------------------------------------------------------------------
# Grouped GEMMs: grouped_mm, grouped_mm_masked and bmm (gemmtune._torch holds the calls
# themselves)


def run_grouped(plan, a, b, ends, out, stream):
    """The library call of a planned grouped_mm, grouped_mm_masked or bmm (plan_grouped_mm,
    plan_grouped_mm_masked, plan_bmm): a, b, ends and out are addresses: the GEMM's A is w (b of
    bmm), its B x (a), laid out as the plan says (copies where it says so), ends the G int32 end
    offsets of the groups on the GPU (their counts when the plan is masked)."""
    p = plan.problem
    # This thread's, of the plan's group layout.
    desc = grouped_descriptor(plan.types, p.layout, "masked" if plan.masked else "contiguous")
    desc.set_groups(plan.groups, ends)
    check(library().gemmtune_matmul(
        plan.device, desc.handle, p.m, p.n, p.k, scalar(1.0), a, p.lda, b, p.ldb, scalar(0.0),
        out, p.ldc, stream))


def run_scaled_grouped(plan, x, w, scales, ends, out, stream):
    """The library call of a planned scaled_grouped_mm (plan_scaled_grouped_mm): x, w, ends and
    out are addresses, scales the addresses of the call's scale tensors ({'scale_x': ...,
    'scale_w': ...}), each laid out as the plan says. The GEMM's A is w, its B x."""
    p = plan.problem
    desc = scaled_grouped_descriptor(plan.types, p.layout, plan.scaling, p.accumulation)
    desc.set_scales(scales[plan.scale_a.argument], scales[plan.scale_b.argument])
    desc.set_groups(plan.groups, ends)
    check(library().gemmtune_matmul(
        plan.device, desc.handle, p.m, p.n, p.k, scalar(1.0), w, p.lda, x, p.ldb, scalar(0.0),
        out, p.ldc, stream))


def scaled_grouped_mm(x, w, scale_x, scale_w, offs, out_dtype="bf16", use_fast_accum=False,
                      out=None):
    """Float8 experts through gemmtune: needs PyTorch (gemmtune._torch.scaled_grouped_mm is this
    function where torch is importable)."""
    raise InvalidType("scaled_grouped_mm takes torch tensors, and torch is not importable here")


def grouped_mm(x, w, offs, out_dtype=None, out=None):
    """torch._grouped_mm through gemmtune: needs PyTorch (gemmtune._torch.grouped_mm is this
    function where torch is importable)."""
    raise InvalidType("grouped_mm takes torch tensors (torch._grouped_mm's semantics), and torch "
                      "is not importable here")


def grouped_mm_masked(x, w, counts, out_dtype=None, out=None):
    """DeepGEMM's masked grouped GEMM through gemmtune: needs PyTorch
    (gemmtune._torch.grouped_mm_masked is this function where torch is importable)."""
    raise InvalidType("grouped_mm_masked takes torch tensors, and torch is not importable here")


def bmm(a, b, out=None):
    """torch.bmm through gemmtune's grouped kernels: needs PyTorch (gemmtune._torch.bmm is this
    function where torch is importable)."""
    raise InvalidType("bmm takes torch tensors, and torch is not importable here")


def patch(model=None, *, functions=False):
    """gemmtune.patch routes a torch model's nn.Linear layers (and torch.matmul, F.linear):
    needs PyTorch (gemmtune._patch.patch is this function where torch is importable)."""
    raise Error("gemmtune.patch routes PyTorch's nn.Linear layers, torch.matmul and "
                "torch.nn.functional.linear, and torch is not importable here", "unsupported")


def patched(model=None, *, functions=False):
    """gemmtune.patch as a context manager: needs PyTorch, as patch does."""
    return patch(model, functions=functions)


def library_path():
    """The libgemmtune file in use (set GEMMTUNE_LIBRARY to choose another)."""
    return _library.library_path()
