"""PyTorch: tensors as operands, the current stream of their device, scaled_mm (float8, with
torch._scaled_mm's semantics), grouped_mm, grouped_mm_masked and bmm (the grouped kernels, with
torch._grouped_mm's, DeepGEMM's masked and torch.bmm's semantics), and the custom operators
torch.ops.gemmtune.mm, torch.ops.gemmtune.linear (with fake implementations for torch.compile,
and autograd formulas), torch.ops.gemmtune.gated_linear, .scaled_mm, .grouped_mm,
.grouped_mm_masked and .bmm (fake implementations; no autograd). Imported only where torch is."""
import functools
import math
from typing import Optional, Tuple

import torch
import torch.nn.functional as F

from . import _operands
from ._api import (Epilogue, _check_scalars, _stream_handle, gated_plan, result_dtype,
                   run_gated_linear, run_grouped, run_linear, run_matmul, run_scaled,
                   run_scaled_grouped, scaled_out_dtype)
from ._grouped import plan_bmm, plan_grouped_mm, plan_grouped_mm_masked
from ._library import (_ONE_ADDRESS, _ZERO_ADDRESS, Error, InvalidType, bias_descriptor, check,
                       beside_library, descriptor, library, matmul_function, scalar)
from ._operands import SUPPORTED, View
from ._plan import (TORCH_PRECISIONS, DataTypes, call_precision, descriptor_precision,
                    plan_matmul)
from ._scaled import Tensor, plan_scaled_mm
from ._scaled_grouped import plan_scaled_grouped_mm

# torch's dtypes by gemmtune's names; the float8 ones where this torch has them (>= 2.1).
_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
for _torch_name, _name in (("float8_e4m3fn", "e4m3"), ("float8_e5m2", "e5m2")):
    if hasattr(torch, _torch_name):
        _DTYPES[getattr(torch, _torch_name)] = _name
_TORCH_DTYPES = {name: dtype for dtype, name in _DTYPES.items()}


def torch_dtype_name(dtype, name):
    try:
        return _DTYPES[dtype]
    except KeyError:
        raise Error(f"{name} has dtype {dtype}: gemmtune supports {SUPPORTED}",
                    "unsupported") from None


def torch_dtype(name):
    """The torch dtype of an element type's name."""
    try:
        return _TORCH_DTYPES[name]
    except KeyError:
        raise Error(f"this torch ({torch.__version__}) has no dtype for {name}",
                    "unsupported") from None


def result_torch_dtype(a_dtype, b_dtype, out_dtype=None):
    """result_dtype for torch dtypes (torch.compile's fake tensors too)."""
    a_name, b_name = _DTYPES.get(a_dtype), _DTYPES.get(b_dtype)
    if out_dtype is None and (a_name is None or b_name is None):
        return a_dtype  # the call itself says what is wrong
    return torch_dtype(result_dtype(a_name, b_name, out_dtype))


_operands.TORCH_TENSOR = torch.Tensor
_operands.torch_dtype_name = torch_dtype_name


def _stream_object_handle(device):
    return torch.cuda.current_stream(device).cuda_stream


# The handle of a GPU's (an index's) current stream: without building a Stream object where this
# torch can.
current_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or _stream_object_handle


class TorchBackend:
    @staticmethod
    def default_precision():
        """f32 calls' precision where none is given: torch.get_float32_matmul_precision()'s
        (TORCH_PRECISIONS), read at each call as torch's own matmul does."""
        return TORCH_PRECISIONS[torch.get_float32_matmul_precision()]

    @staticmethod
    def allocate(like, view, m, n, dtype):
        return torch.empty((m, n), dtype=torch_dtype(dtype), device=like.device)

    @staticmethod
    def scale(out, beta):
        return out.zero_() if beta == 0 else out.mul_(beta)

    @staticmethod
    def default_stream(ops):
        return current_stream(ops.device)

    @staticmethod
    def rows(x, view):
        # A view where the strides allow, else a copy; the rows by number, as -1 means nothing
        # when there are no features (K = 0).
        return x.reshape(math.prod(view.shape[:-1]), view.shape[-1])

    @staticmethod
    def bias_vector(bias, dtype):
        return bias_vector(bias, torch_dtype(dtype))

    @staticmethod
    def finish(out, bias, activation):
        """The epilogue on a result that no kernel wrote (K = 0): act(out + bias)."""
        if bias is not None:
            out.add_(bias)
        return out if activation == "identity" else out.copy_(activate(out, activation))

    @staticmethod
    def finish_gated(out, bias, activation, layout):
        """The gated epilogue on sums over nothing (K = 0): act(b_gate) * b_up, or zeros."""
        if bias is None:
            return out.zero_()
        gate, up = split_gate_up(bias.to(torch.float32), layout)
        return out.copy_(activate(gate, activation) * up)


def split_gate_up(t, layout):
    """The gate and up parts of t's last dimension (2I): its halves, or its even and odd
    entries."""
    if layout == "interleaved":
        return t[..., 0::2], t[..., 1::2]
    return t.chunk(2, -1)


def bias_vector(bias, dtype):
    """The bias as the kernel reads it: contiguous, of the result's dtype (itself where it is;
    else a small copy on the current stream)."""
    if bias.dtype == dtype and (bias.dim() != 1 or bias.stride(0) == 1 or bias.numel() <= 1):
        return bias  # the general path's checks refuse a bias of another shape
    return bias.to(dtype).contiguous()


# The activations as torch computes them (the library's names).
_ACTIVATIONS = {"relu": torch.relu, "gelu": F.gelu, "silu": F.silu,
                "gelu_tanh": functools.partial(F.gelu, approximate="tanh")}


def activate(t, activation):
    return t if activation == "identity" else _ACTIVATIONS[activation](t)


_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or (
    lambda: False)


def _through_operator(*tensors):
    """Under torch.compile, or when autograd must see the call, go through the registered
    operator; plain eager calls skip the dispatcher. (Plain loops: torch.compile traces this.)"""
    if not OPERATORS:
        return False
    if _is_compiling():
        return True
    if not torch.is_grad_enabled():  # inference_mode and no_grad: nothing more to read
        return False
    needs_grad = False
    for t in tensors:
        if t is not None and not isinstance(t, torch.Tensor):
            return False  # the general path says what is wrong
        needs_grad = needs_grad or (t is not None and t.requires_grad)
    return needs_grad


# The operators take no precision: theirs is torch's setting, read when they run.
def matmul(a, b, out, alpha, beta, stream, out_dtype=None, precision=None):
    if (out is None and out_dtype is None and alpha == 1 and beta == 0 and stream is None
            and precision is None and _through_operator(a, b)):
        return torch.ops.gemmtune.mm(a, b)
    return _matmul(a, b, out, alpha, beta, stream, out_dtype, precision)


# The activations whose backward reads the pre-activation (ReLU's reads the output).
_KEPT_FOR_BACKWARD = ("gelu", "gelu_tanh", "silu")


def _needs_grad(*tensors):
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def linear(x, w, bias, stream, out_dtype=None, activation="identity", precision=None):
    if stream is None and out_dtype is None and precision is None and _through_operator(x, w, bias):
        # Under autograd the kernel stores the pre-activation beside the result, for backward
        # to read rather than recompute (one more GEMM).
        if activation in _KEPT_FOR_BACKWARD and _needs_grad(x, w, bias):
            return torch.ops.gemmtune.linear_keep(x, w, bias, activation)[0]
        return torch.ops.gemmtune.linear(x, w, bias, activation)
    return _linear(x, w, bias, stream, out_dtype, activation, precision)


def linear_keeping(x, w, bias, stream, out_dtype=None, activation="identity", precision=None):
    """(act(x @ w.T + bias), x @ w.T + bias) from one kernel (the general path's checks, no
    planned fast path)."""
    if stream is None and out_dtype is None and precision is None and _through_operator(x, w, bias):
        return torch.ops.gemmtune.linear_keep(x, w, bias, activation)
    return run_linear(x, w, bias, stream, TorchBackend, out_dtype, activation, precision,
                      keep_pre_activation=True)


def gated_linear(x, w, bias, stream, out_dtype=None, activation="silu", layout="halves",
                 precision=None):
    # No autograd formula: the operator only where torch.compile traces the call.
    if (stream is None and out_dtype is None and precision is None and OPERATORS
            and _is_compiling()):
        return torch.ops.gemmtune.gated_linear(x, w, bias, activation, layout)
    return _gated_linear(x, w, bias, stream, out_dtype, activation, layout, precision)


# ---------------------------------------------------------------------------------------------
# The fast path: a call on tensors whose dtypes, shapes, strides and devices an earlier call
# checked and planned. Small GEMMs are host-bound, and the general path (Views, checks, the
# plan) costs more than the launch, so a repeated call builds one key, looks it up once and
# calls the C API with the plan's ready arguments. Whatever the cache does not answer (a first
# call, an error, x copied to rows) takes the general path, which raises the errors.

# _matmul_key's or _linear_key's key -> a _Planned, or _REFUSED (a problem the library refused
# a patched call: torch computes it). Only problems with M, N, K >= 1 that passed every check
# are planned.
_PLANS = {}
_MAX_PLANS = 4096  # more shapes than that (e.g. every sequence length): start again
_REFUSED = object()
# The library's refusals of a problem (not failures of the GPU or of a kernel's build), which
# a patched call remembers by its key.
_REFUSALS = ("invalid_argument", "unsupported")


class _Planned:
    """What gemmtune_matmul takes for a checked problem but its addresses and stream, and the
    result's shape, dtype and device."""
    __slots__ = ("call", "ctypes_call", "device", "torch_device", "handle", "descriptor", "m", "n", "k", "lda",
                 "ldb", "ldc", "swap", "shape", "dtype", "bias_descriptor")


def _keep(key, value):
    if len(_PLANS) >= _MAX_PLANS:
        _PLANS.clear()
    _PLANS[key] = value


def _remember(key, plan, like, shape, dtype, epilogue="none"):
    """The plan of a call that ran (like: one of its tensors, on its GPU), for the calls with
    its key."""
    p = plan.problem
    planned = _Planned()
    planned.call = matmul_function()
    planned.ctypes_call = library().gemmtune_matmul  # for alpha or beta not 1 or 0
    planned.device, planned.torch_device = like.get_device(), like.device
    # One per types, layout, epilogue and precision, made once and kept; with a bias, each
    # thread's own (bias_descriptor(*planned.bias_descriptor)) serves the calls.
    precision = descriptor_precision(plan.types, p.precision)
    planned.descriptor = descriptor(plan.types, p.layout, epilogue=epilogue, precision=precision)
    planned.handle = planned.descriptor.handle
    planned.m, planned.n, planned.k = p.m, p.n, p.k
    planned.lda, planned.ldb, planned.ldc, planned.swap = p.lda, p.ldb, p.ldc, plan.swap
    planned.shape, planned.dtype = tuple(shape), dtype
    planned.bias_descriptor = (plan.types, p.layout, epilogue, precision)
    _keep(key, planned)


def _refused(key, error):
    """Remembers the library's refusal of a patched call's problem: torch takes it from now on."""
    if key is not None and error.code in _REFUSALS:
        _keep(key, _REFUSED)


def _launch(planned, a, b, c, stream, handle, alpha=_ONE_ADDRESS, beta=_ZERO_ADDRESS):
    """gemmtune_matmul on the call's row-major a, b and c (addresses) as planned; handle: the
    descriptor's (one with its bias set, where the call has one)."""
    stream = current_stream(planned.device) if stream is None else _stream_handle(stream)
    if planned.swap:
        a, b = b, a
    # Other alphas and betas are ctypes objects (scalar()), which only ctypes takes.
    call = planned.call if alpha.__class__ is int and beta.__class__ is int else planned.ctypes_call
    status = call(planned.device, handle, planned.m, planned.n, planned.k, alpha, a, planned.lda,
                  b, planned.ldb, beta, c, planned.ldc, stream)
    if status:
        check(status)


def _tensor_key(t):
    return t.dtype, t.shape, t.stride(), t.device


_F32 = torch.float32


def _precision_key(x, precision):
    """What a call's precision depends on: the one given, else, where x is f32, torch's
    setting (read at each call: after torch.set_float32_matmul_precision the call is another
    problem); None for other dtypes, whose precision their types decide."""
    if precision is None and x.dtype is _F32:
        return torch.get_float32_matmul_precision()
    return precision


def _matmul_key(a, b, out, out_dtype, precision=None):
    """What the checks and the plan of matmul depend on: each tensor's dtype, shape, strides and
    device, out_dtype, the precision (_precision_key). None for operands without them (arrays,
    sparse tensors) or an out_dtype or precision that is no key: the general path's."""
    try:
        computed = _precision_key(a, precision)
        hash((out_dtype, computed))
        return ("mm", a.dtype, a.shape, a.stride(), a.device, b.dtype, b.shape, b.stride(),
                b.device, None if out is None else _tensor_key(out), out_dtype, computed)
    except Exception:  # noqa: BLE001  (whatever it was, the general path raises it again)
        return None


def _linear_key(x, w, bias, out_dtype, activation, layout=None, precision=None):
    """What the checks and the plan of linear (gated_linear: with its layout) depend on: x's,
    w's and the bias's dtypes, shapes, strides and devices, out_dtype, the activation, the
    precision (_precision_key). None where _matmul_key's is."""
    try:
        computed = _precision_key(x, precision)
        hash((out_dtype, computed))
        return ("linear", x.dtype, x.shape, x.stride(), x.device, w.dtype, w.shape, w.stride(),
                w.device, None if bias is None else _tensor_key(bias), out_dtype, activation,
                layout, computed)
    except Exception:  # noqa: BLE001
        return None


def _types_of(a, b, result):
    """The DataTypes of a call that ran: a's, b's, and the result's (C and D)."""
    c = _DTYPES[result.dtype]
    return DataTypes(_DTYPES[a.dtype], _DTYPES[b.dtype], c, c)


def _plan_of(types, precision, *layout):
    """plan_matmul of a call that ran (layout: its shapes and strides), of the precision it ran
    with (call_precision: torch's setting where none was given)."""
    return plan_matmul(types, *layout,
                       precision=call_precision(types, precision, TorchBackend.default_precision))


def _matmul(a, b, out, alpha, beta, stream, out_dtype=None, precision=None):
    if alpha != 1 or beta != 0:  # the general path's first checks (1 and 0 pass): its errors
        _check_scalars(alpha, beta, out)
    key = _matmul_key(a, b, out, out_dtype, precision)
    planned = _PLANS.get(key)
    if planned is not None and planned is not _REFUSED:
        return _run_matmul(planned, a, b, out, alpha, beta, stream)
    return _plan_matmul(key, a, b, out, alpha, beta, stream, out_dtype, precision)


def _run_matmul(planned, a, b, out, alpha, beta, stream):
    if out is None:
        out = torch.empty(planned.shape, dtype=planned.dtype, device=planned.torch_device)
    _launch(planned, a.data_ptr(), b.data_ptr(), out.data_ptr(), stream, planned.handle,
            scalar(alpha), scalar(beta))
    return out


def _plan_matmul(key, a, b, out, alpha, beta, stream, out_dtype=None, precision=None):
    """The general path of matmul, which checks everything and raises the errors; its plan kept
    for the calls with its key."""
    result = run_matmul(a, b, out, alpha, beta, stream, TorchBackend, out_dtype=out_dtype,
                        precision=precision)
    if key is not None and min(*a.shape, b.shape[1]) >= 1:
        plan = _plan_of(_types_of(a, b, result), precision, tuple(a.shape), tuple(a.stride()),
                        tuple(b.shape), tuple(b.stride()),
                        None if out is None else tuple(out.stride()))
        _remember(key, plan, a, (a.shape[0], b.shape[1]), result.dtype)
    return result


def _linear(x, w, bias, stream, out_dtype=None, activation="identity", precision=None):
    key = _linear_key(x, w, bias, out_dtype, activation, None, precision)
    planned = _PLANS.get(key)
    if planned is not None and planned is not _REFUSED:
        return _run_linear(planned, x, w, bias, stream)
    return _plan_linear(key, x, w, bias, stream, out_dtype, activation, None, precision)


def _gated_linear(x, w, bias, stream, out_dtype=None, activation="silu", layout="halves",
                  precision=None):
    key = _linear_key(x, w, bias, out_dtype, activation, layout, precision)
    planned = _PLANS.get(key)
    if planned is not None and planned is not _REFUSED:
        return _run_linear(planned, x, w, bias, stream)
    return _plan_linear(key, x, w, bias, stream, out_dtype, activation, layout, precision)


def _run_linear(planned, x, w, bias, stream):
    """A planned linear or gated linear: the result, the bias set on this thread's descriptor
    (the kernel's store reads it), the GEMM."""
    y = torch.empty(planned.shape, dtype=planned.dtype, device=planned.torch_device)
    handle = planned.handle
    if bias is not None:
        bias = bias_vector(bias, planned.dtype)  # a copy, where it is one, lives until the call
        desc = bias_descriptor(*planned.bias_descriptor)  # this thread's
        desc.set_bias(bias.data_ptr())
        handle = desc.handle
    _launch(planned, x.data_ptr(), w.data_ptr(), y.data_ptr(), stream, handle)
    return y


def _plan_linear(key, x, w, bias, stream, out_dtype=None, activation="identity", layout=None,
                 precision=None):
    """The general path of linear (gated_linear, given its layout), which checks everything and
    raises the errors; its plan kept for the calls with its key."""
    if layout is None:
        y = run_linear(x, w, bias, stream, TorchBackend, out_dtype, activation, precision)
    else:
        y = run_gated_linear(x, w, bias, stream, TorchBackend, out_dtype, activation, layout,
                             precision)
    if key is not None:
        _learn_linear(key, x, w, bias, y, activation, layout or "none", precision)
    return y


def _learn_linear(key, x, w, bias, y, activation="identity", gate="none", precision=None):
    """After a general call of linear (or gated linear, gate 'halves' or 'interleaved')
    succeeded: its plan, for the calls after it. x's rows are the view x.reshape makes (its
    strides, as the general path reads them); where reshape copies, every call must, so there is
    no fast path."""
    shape = tuple(y.shape)
    features, outputs = x.shape[-1], w.shape[0]
    if min(features, outputs) < 1:
        return
    x_rows = x.reshape(-1, features)
    if x_rows.shape[0] < 1 or x_rows.data_ptr() != x.data_ptr():
        return
    plan = _plan_of(_types_of(x, w, y), precision, tuple(x_rows.shape), tuple(x_rows.stride()),
                    tuple(w.shape)[::-1], tuple(w.stride())[::-1])
    epilogue = Epilogue(bias, activation, gate)
    if gate != "none":  # D of M / 2 rows
        plan = gated_plan(plan, epilogue)
    _remember(key, plan, x, shape, y.dtype, epilogue.name(plan))


# ---------------------------------------------------------------------------------------------
# Routed calls: F.linear and torch.matmul through gemmtune where it computes them, else torch's
# own (what gemmtune.patch puts in a model's nn.Linear layers, and in place of the functions)

# torch's functions, as they were when gemmtune was imported: the fallback of a routed call,
# even while gemmtune.patch has put routed_linear and routed_matmul in their place.
_TORCH_LINEAR = F.linear
_TORCH_MATMUL = torch.matmul
_ROUTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_Parameter = torch.nn.Parameter
_any_autocast = getattr(torch._C, "_is_any_autocast_enabled", None) or torch.is_autocast_enabled


def _routable(x, w, bias):
    """Whether gemmtune may take x @ w (F.linear's x @ w.T + bias): tensors, not subclasses
    (whose data_ptr need not hold their values), on CUDA GPUs, of one dtype that gemmtune
    computes, outside autocast (torch's ops cast under it, gemmtune's would not)."""
    x_type, w_type = type(x), type(w)
    if not ((x_type is torch.Tensor or x_type is _Parameter)
            and (w_type is torch.Tensor or w_type is _Parameter)):
        return False
    if not (x.is_cuda and w.is_cuda and x.dtype in _ROUTED_DTYPES and w.dtype == x.dtype):
        return False
    if bias is not None:
        bias_type = type(bias)
        if not ((bias_type is torch.Tensor or bias_type is _Parameter) and bias.is_cuda
                and bias.dtype == x.dtype):
            return False
    return not _any_autocast()


def routed_linear(input, weight, bias=None):
    """torch.nn.functional.linear(input, weight, bias) with gemmtune's GEMM where it computes
    the call (_routable; the library's refusals included: torch's then), else torch's own."""
    if not _routable(input, weight, bias):
        return _TORCH_LINEAR(input, weight, bias)
    if _through_operator(input, weight, bias):
        return torch.ops.gemmtune.linear_or_torch(input, weight, bias)
    return _linear_or_torch(input, weight, bias)


def routed_matmul(input, other, *, out=None):
    """torch.matmul(input, other) with gemmtune's GEMM for a 2-D other and a 2-D or larger
    input (x @ W: linear's rows, other.T as the weight), else torch's own."""
    if out is not None:
        return _TORCH_MATMUL(input, other, out=out)
    if not _routable(input, other, None) or other.dim() != 2 or input.dim() < 2:
        return _TORCH_MATMUL(input, other)
    if input.dim() == 2:
        if _through_operator(input, other):
            return torch.ops.gemmtune.mm_or_torch(input, other)
        return _matmul_or_torch(input, other)
    weight = other.t()
    if _through_operator(input, weight):
        return torch.ops.gemmtune.linear_or_torch(input, weight, None)
    return _linear_or_torch(input, weight, None)


def _linear_or_torch(x, w, bias):
    """F.linear(x, w, bias): gemmtune's where the library runs the problem, else torch's (the
    refusal kept by the call's key, so that each problem is offered to the library once)."""
    key = _linear_key(x, w, bias, None, "identity")
    planned = _PLANS.get(key)
    if planned is not _REFUSED:
        try:
            if planned is not None:
                return _run_linear(planned, x, w, bias, None)
            return _plan_linear(key, x, w, bias, None)
        except Error as error:
            _refused(key, error)
    return _TORCH_LINEAR(x, w, bias)


def _matmul_or_torch(a, b):
    """torch.matmul(a, b) of 2-D a and b: gemmtune's where the library runs the problem, else
    torch's (as _linear_or_torch)."""
    key = _matmul_key(a, b, None, None)
    planned = _PLANS.get(key)
    if planned is not _REFUSED:
        try:
            if planned is not None:
                return _run_matmul(planned, a, b, None, 1.0, 0.0, None)
            return _plan_matmul(key, a, b, None, 1.0, 0.0, None)
        except Error as error:
            _refused(key, error)
    return _TORCH_MATMUL(a, b)


# ---------------------------------------------------------------------------------------------
# Float8: scaled_mm


def _name_of(dtype):
    """gemmtune's name of a torch dtype ('bf16'); a dtype gemmtune has no name for keeps torch's
    ('float64', 'int32'), so that the checks refuse it by name with a TypeError."""
    name = _DTYPES.get(dtype)
    if name is None:
        name = str(dtype)
        name = name[len("torch."):] if name.startswith("torch.") else name
    return name


def scaled_view(t, name):
    """The View of a tensor for scaled_mm's checks (its dtype as _name_of gives it)."""
    dtype = _name_of(t.dtype)
    if t.device.type != "cuda":  # no address needed: the checks refuse it, or need no GPU
        return View(0, tuple(t.shape), tuple(t.stride()), dtype, -2, None)
    return View(t.data_ptr(), tuple(t.shape), tuple(t.stride()), dtype, t.device.index, None)


def _laid_out(t, source):
    """The scales t in the layout the library reads (source: a ScaleSource); a copy where they
    are not (one small kernel on the current stream)."""
    if not source.copy:
        return t
    if source.layout == "contiguous":
        return t.contiguous()
    return t.t().contiguous().t()  # outer-dim-major: column-major


_SCALED_NAMES = ("a", "b", "scale_a", "scale_b", "bias", "out")


def _scaled_mm(a, b, scale_a, scale_b, out_dtype, bias, use_fast_accum, out):
    tensors = (a, b, scale_a, scale_b, bias, out)
    for t, name in zip(tensors, _SCALED_NAMES):
        if t is not None and not isinstance(t, torch.Tensor):
            raise InvalidType(f"{name} is a {type(t).__name__}: scaled_mm takes torch tensors")
    views = [None if t is None else scaled_view(t, name)
             for t, name in zip(tensors, _SCALED_NAMES)]
    plan = plan_scaled_mm(*views[:4], scaled_out_dtype(out_dtype), bias=views[4], out=views[5],
                          use_fast_accum=bool(use_fast_accum))
    if out is None:
        out = torch.empty(plan.shape, dtype=torch_dtype(plan.types.d), device=a.device)
    if plan.problem is None:  # M, N or K is 0
        if out.numel():  # K = 0: a sum over nothing
            out.zero_()
            if bias is not None:
                out.add_(bias)
        return out
    if bias is not None:
        # The bias enters as C, read with beta = 1 (as linear's): added in f32 to the scaled
        # product before the one rounding to out's dtype. Copied into every row first.
        out.copy_(bias)
    scales = {"scale_a": scale_a, "scale_b": scale_b}
    for source in (plan.scale_a, plan.scale_b):
        scales[source.argument] = _laid_out(scales[source.argument], source)
    device = plan.device
    stream = current_stream(device)
    # The copies live in `scales` until the call has queued the kernel; the caching allocator
    # hands their memory out again only after it, on this stream.
    run_scaled(plan, a.data_ptr(), b.data_ptr(), {k: t.data_ptr() for k, t in scales.items()},
               out.data_ptr(), stream)
    return out


def scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16, bias=None, use_fast_accum=False,
              out=None):
    """torch._scaled_mm(a, b, scale_a, scale_b, bias, out_dtype=out_dtype,
    use_fast_accum=use_fast_accum) with gemmtune's float8 kernels: out = (scale_a * scale_b) *
    (a @ b) (+ bias), the scales applied per tensor, per row or per block as their shapes say,
    the products summed in f32 (promoted; use_fast_accum below) and rounded once.

    a: (M, K) row-major, float8_e4m3fn or float8_e5m2. b: (K, N) column-major (b = W.t() of a
    row-major (N, K) weight W), float8 too. The result is (M, N), row-major, of out_dtype:
    bfloat16, float16 or float32, on Hopper (sm_90a), where the float8 kernels are (the library
    refuses what the GPU has no kernel for with Error 'unsupported', naming the problem).
    The scales are float32 tensors on a's GPU:
      per-tensor: scale_a and scale_b each one element;
      rowwise:    scale_a (M, 1), scale_b (1, N);
      blockwise:  DeepSeek-V3's: scale_a (M, ceil(K/128)) (one per 1x128 block of a row of a;
                  torch wants it outer-dim-major, stride (1, M), which is read in place), scale_b
                  (ceil(K/128), ceil(N/128)) (one per 128x128 block of b): the library reads the
                  latter transposed, so each call copies it into a row-major tensor first (a
                  small kernel); scales in other layouts are copied likewise.
    bias: (N,) of out_dtype, added to every row as torch's is: it is the GEMM's C, read with
    beta = 1 (no separate epilogue; a copy of the bias into the output's rows comes first). As
    torch's, a bias goes with a bfloat16 or float16 output, not float32.
    use_fast_accum: as torch's (cuBLASLt's FAST_ACCUM). With per-tensor and rowwise scales the
    library runs the fast-accumulation problem: its kernels let wgmma sum the whole K without
    promoting partial sums into f32 registers, which is faster and has a larger error on long K
    (a problem of its own, tuned and stored apart: Problem.accumulation == 'fast'). Blockwise
    scales keep the precise kernels: each 128-deep K block's sum is multiplied by its scales and
    added in f32, a promotion already, so the flag changes nothing there (torch accepts it there
    too). False, the default: every kernel promotes. out: an (M, N) row-major tensor of
    out_dtype to write into (its rows may be padded).

    The library runs the column-major D^T = b^T a^T: 'tn', its M torch's N and its N torch's M,
    the weights as its A (problem_scaled_mm shows the problem, scaling and accumulation
    included; GEMMTUNE_RECORD records it, with 'accum=fast' where it accumulates fast). Bad
    arguments raise ValueError (shapes, layouts, devices) or TypeError (dtypes) naming the
    argument and what it must be; both are gemmtune.Error too. The library's refusals are
    gemmtune.Error with its message. With torch >= 2.4 this is torch.ops.gemmtune.scaled_mm
    under torch.compile (out= takes the eager path)."""
    if out is None and OPERATORS and isinstance(out_dtype, torch.dtype) and _is_compiling():
        return torch.ops.gemmtune.scaled_mm(a, b, scale_a, scale_b, out_dtype, bias,
                                            bool(use_fast_accum))
    return _scaled_mm(a, b, scale_a, scale_b, out_dtype, bias, use_fast_accum, out)


# ---------------------------------------------------------------------------------------------
# Float8 experts: scaled_grouped_mm

_SCALED_GROUPED_NAMES = ("x", "w", "scale_x", "scale_w", "offs", "out")


def _scaled_grouped_mm(x, w, scale_x, scale_w, offs, out_dtype, use_fast_accum, out):
    tensors = (x, w, scale_x, scale_w, offs, out)
    _torch_tensors("scaled_grouped_mm", zip(_SCALED_GROUPED_NAMES, tensors))
    plan = _plan_scaled_grouped_mm(*[None if t is None else _described(t) for t in tensors[:5]],
                                   scaled_out_dtype(out_dtype),
                                   None if out is None else _described(out),
                                   use_fast_accum=bool(use_fast_accum))
    if out is None:  # rows past offs[-1] are in no group: never written
        out = torch.empty(plan.shape, dtype=torch_dtype(plan.types.d), device=x.device)
    if plan.problem is None:
        if out.numel():  # K = 0: the groups' rows are sums over nothing (no host sync for offs)
            rows = torch.arange(out.shape[0], device=out.device) < offs[-1]
            out.masked_fill_(rows.unsqueeze(1), 0)
        return out
    scales = {"scale_x": scale_x, "scale_w": scale_w}
    for source in (plan.scale_a, plan.scale_b):
        scales[source.argument] = _laid_out(scales[source.argument], source)
    stream = current_stream(plan.device)
    # The copies live in `scales` until the call has queued the kernel (as scaled_mm's).
    run_scaled_grouped(plan, x.data_ptr(), w.data_ptr(),
                       {k: t.data_ptr() for k, t in scales.items()}, offs.data_ptr(),
                       out.data_ptr(), stream)
    return out


def scaled_grouped_mm(x, w, scale_x, scale_w, offs, out_dtype=torch.bfloat16,
                      use_fast_accum=False, out=None):
    """Float8 experts (DeepSeek-V3's MoE layers) with gemmtune's grouped float8 kernels: rows
    offs[g-1]..offs[g] of the (T, N) result are (scales) * x[those rows] @ w[g], summed in f32
    (promoted; use_fast_accum as scaled_mm's) and rounded once to out_dtype (bfloat16, float16 or
    float32). torch._scaled_grouped_mm's 2-D x 3-D call, with its rowwise scales and the
    library's per-tensor and blockwise ones.

    x: (T, K) float8 tokens, sorted by expert, row-major. w: (G, K, N) float8, each w[g]
    column-major (w = W.transpose(1, 2) of a contiguous (G, N, K) weight W, nn.Linear's layout).
    offs: (G,) int32 end rows of the groups on the GPU (read by the kernel: a captured graph
    replays whatever routing is written there). The scales are float32 on x's GPU:
      per-tensor: scale_x one element, scale_w (G,): one for each expert;
      rowwise:    scale_x (T,), scale_w (G, N);
      blockwise:  scale_x (T, ceil(K/128)), one per 1x128 block of a token, outer-dim-major
                  (stride (1, T)); scale_w (G, ceil(K/128), ceil(N/128)), one per 128x128 block
                  of each w[g], contiguous. Scales in other layouts are copied first.
    Rows past offs[-1] are not written. Hopper (sm_90a) only (Error 'unsupported' elsewhere).
    The library runs the column-major grouped problem D (N x T) = w[g]^T x^T, 'tn', with the
    groups' scales of A one after another. Bad arguments raise ValueError and TypeError naming the
    argument. No autograd. With torch >= 2.4 this is torch.ops.gemmtune.scaled_grouped_mm under
    torch.compile (out= takes the eager path)."""
    if out is None and OPERATORS and isinstance(out_dtype, torch.dtype) and _is_compiling():
        return torch.ops.gemmtune.scaled_grouped_mm(x, w, scale_x, scale_w, offs, out_dtype,
                                                    bool(use_fast_accum))
    return _scaled_grouped_mm(x, w, scale_x, scale_w, offs, out_dtype, use_fast_accum, out)


# ---------------------------------------------------------------------------------------------
# Grouped GEMMs: grouped_mm (torch._grouped_mm's 2-D x 3-D call), grouped_mm_masked and bmm


def _described(t):
    """What the grouped checks need of a tensor, without its address: so that the plans of
    calls are kept by dtypes, shapes, strides and devices alone."""
    device = t.device.index if t.device.type == "cuda" else -2  # -2: not on a GPU
    return Tensor(tuple(t.shape), tuple(t.stride()), _name_of(t.dtype), device)


# Pure functions of what _described gives (errors are raised, never remembered): a model
# repeats the same few shapes call after call.
_plan_grouped_mm = functools.lru_cache(maxsize=1024)(plan_grouped_mm)
_plan_bmm = functools.lru_cache(maxsize=1024)(plan_bmm)
_plan_grouped_mm_masked = functools.lru_cache(maxsize=1024)(plan_grouped_mm_masked)
_plan_scaled_grouped_mm = functools.lru_cache(maxsize=1024)(plan_scaled_grouped_mm)


def _torch_tensors(call, named):
    for name, t in named:
        if t is not None and not isinstance(t, torch.Tensor):
            raise InvalidType(f"{name} is a {type(t).__name__}: {call} takes torch tensors")


def _grouped_out_dtype(value, call="grouped_mm"):
    if value is None:
        return None
    if not isinstance(value, torch.dtype):
        raise InvalidType(f"out_dtype is a {type(value).__name__}: {call} takes a torch dtype "
                          "(torch.bfloat16, torch.float16 or torch.float32) or None (x's)")
    return _name_of(value)


def _run_grouped(plan, x, w, ends, out):
    """The planned grouped GEMM: the library's A is w, its B x, each read in place or from the
    contiguous copy the plan says (a tensor torch calls contiguous is always read in place, so
    .contiguous() makes a new one here: the layout the plan gives the copy)."""
    if plan.copy_x:
        x = x.contiguous()
    if plan.copy_w:
        w = w.contiguous()
    device = plan.device
    stream = current_stream(device)
    # The copies live until the call has queued the kernel; the caching allocator hands their
    # memory out again only after it, on this stream.
    run_grouped(plan, w.data_ptr(), x.data_ptr(), ends.data_ptr(), out.data_ptr(), stream)


def _grouped_mm(x, w, offs, out_dtype, out):
    _torch_tensors("grouped_mm", (("x", x), ("w", w), ("offs", offs), ("out", out)))
    plan = _plan_grouped_mm(_described(x), _described(w), _described(offs),
                            _grouped_out_dtype(out_dtype),
                            None if out is None else _described(out))
    if out is None:  # rows past offs[-1] are in no group: never written
        out = torch.empty(plan.shape, dtype=torch_dtype(plan.types.d), device=x.device)
    if plan.zero_rows:  # K = 0: the groups' rows are sums over nothing (no host sync for offs)
        rows = torch.arange(out.shape[0], device=out.device) < offs[-1]
        out.masked_fill_(rows.unsqueeze(1), 0)
    elif plan.problem is not None:
        _run_grouped(plan, x, w, offs, out)
    return out


def grouped_mm(x, w, offs, out_dtype=None, out=None):
    """torch._grouped_mm(x, w, offs, out_dtype=out_dtype) for a 2-D x and a 3-D w (a
    mixture-of-experts layer) with gemmtune's grouped kernels: rows offs[g-1]..offs[g] of the
    (T, N) result (from row 0 for g = 0) are x[those rows] @ w[g], summed in f32 and rounded
    once.

    x: (T, K), the tokens sorted by expert, row-major or column-major. w: (G, K, N), the G
    experts' weights: each w[g] row-major (w contiguous), or column-major (w = W.transpose(1, 2)
    of nn.Linear-style weights W (G, N, K)); either is read in place when its G matrices lie one
    after another (w.stride(0) = K * w.stride(1), or N * w.stride(2)), else from a contiguous
    copy (as is an x of neither layout). offs: (G,) int32 on x's GPU, the cumulative end rows of
    the groups: nondecreasing, at most T (not checked: the values stay on the GPU, and the
    kernel reads them when it runs, so a captured CUDA graph replays whatever routing offs holds
    then). An empty group is offs[g] == offs[g-1]. Rows past offs[-1] belong to no group and
    are not written: a new result leaves them as torch.empty does. x and w are bfloat16 or
    float16, of one dtype; the result is out_dtype (a torch dtype; default x's) or out's: a
    row-major (T, N) tensor to write into (its rows may be padded). Which dtypes run is the
    library's answer: GPUs from sm_80 on have grouped kernels, and older ones the library
    refuses the call (Error 'unsupported': 'no kernel family supports ...').

    The library runs the column-major grouped problem D (N x T) = w[g]^T x^T per group: its
    M is N, its N the T tokens (the groups split those columns), its K K, w its A. Bad arguments
    raise ValueError (shapes, layouts, devices) or TypeError (dtypes) naming the argument; both
    are gemmtune.Error too. No autograd. With torch >= 2.4 this is torch.ops.gemmtune.grouped_mm
    under torch.compile (out= takes the eager path)."""
    if (out is None and OPERATORS and (out_dtype is None or isinstance(out_dtype, torch.dtype))
            and _is_compiling()):
        return torch.ops.gemmtune.grouped_mm(x, w, offs, out_dtype)
    return _grouped_mm(x, w, offs, out_dtype, out)


def _grouped_mm_masked(x, w, counts, out_dtype, out):
    call = "grouped_mm_masked"
    _torch_tensors(call, (("x", x), ("w", w), ("counts", counts), ("out", out)))
    plan = _plan_grouped_mm_masked(_described(x), _described(w), _described(counts),
                                   _grouped_out_dtype(out_dtype, call),
                                   None if out is None else _described(out))
    if out is None:  # rows past a group's count are never written
        out = torch.empty(plan.shape, dtype=torch_dtype(plan.types.d), device=x.device)
    if plan.zero_rows:  # K = 0: the groups' rows are sums over nothing (no host sync for counts)
        rows = torch.arange(out.shape[1], device=out.device) < counts.unsqueeze(1)
        out.masked_fill_(rows.unsqueeze(2), 0)
    elif plan.problem is not None:
        _run_grouped(plan, x, w, counts, out)
    return out


def grouped_mm_masked(x, w, counts, out_dtype=None, out=None):
    """DeepGEMM's masked grouped GEMM (the layout of decode under CUDA graphs) with gemmtune's
    grouped kernels: out[g, :counts[g]] = x[g, :counts[g]] @ w[g] for each group g, summed in
    f32 and rounded once. Rows past a group's count are not written.

    x: (G, cap, K), each group's capacity of token rows, read in place where its G*cap rows
    flatten into one row-major (G*cap, K) matrix (x contiguous, or with padded rows), else from a
    contiguous copy. w: (G, K, N), as grouped_mm takes it: each w[g] row-major, or
    W.transpose(1, 2) of nn.Linear-style weights W (G, N, K). counts: (G,) int32 on x's GPU, each
    0 to cap (not checked: the values stay on the GPU, and the kernel reads them when it runs,
    so a CUDA graph captured once replays whatever counts hold then, the shapes unchanged).
    x and w are bfloat16 or float16, of one dtype; the result is out_dtype (a torch dtype;
    default x's) or out's: a (G, cap, N) tensor to write into, its rows row-major (stride 1
    along N, may be padded) and its G matrices one after another.

    With out=None the result is a new torch.empty tensor: its rows past a count hold whatever
    that memory held. Pass out= (torch.zeros, say) where those rows must have defined values;
    they are left as they were. GPUs from sm_80 on have grouped kernels (older ones: Error
    'unsupported').

    The library runs bmm's column-major grouped problem D (N x G*cap) = w[g]^T x^T in its masked
    group layout: its M is N, its N G*cap (group g owning columns [g cap, g cap + counts[g])),
    its K K, w its A. Raises as grouped_mm. No autograd. With torch >= 2.4 this is
    torch.ops.gemmtune.grouped_mm_masked under torch.compile (out= takes the eager path)."""
    if (out is None and OPERATORS and (out_dtype is None or isinstance(out_dtype, torch.dtype))
            and _is_compiling()):
        return torch.ops.gemmtune.grouped_mm_masked(x, w, counts, out_dtype)
    return _grouped_mm_masked(x, w, counts, out_dtype, out)


# bmm's group ends, (g+1) * M for g < G, by (G, M, GPU): made once each and never dropped, as
# a captured CUDA graph goes on reading the tensor it was captured with.
_UNIFORM_ENDS = {}


def _uniform_ends(groups, rows, device):
    key = (groups, rows, device.index)
    ends = _UNIFORM_ENDS.get(key)
    if ends is None:
        ends = torch.arange(1, groups + 1, dtype=torch.int32, device=device) * rows
        with torch.cuda.device(device):  # whether the operands' GPU's stream is captured
            if torch.cuda.is_current_stream_capturing():
                # A graph's: its values are written when the graph replays. Kept by it alone.
                return ends
        # Written on this stream; a later call on another stream must find them written.
        torch.cuda.current_stream(device).synchronize()
        _UNIFORM_ENDS[key] = ends
    return ends


def _bmm(a, b, out):
    _torch_tensors("bmm", (("a", a), ("b", b), ("out", out)))
    plan = _plan_bmm(_described(a), _described(b), None if out is None else _described(out))
    if out is None:
        out = torch.empty(plan.shape, dtype=torch_dtype(plan.types.d), device=a.device)
    if plan.zero_rows:  # K = 0: sums over nothing
        out.zero_()
    elif plan.problem is not None:
        groups, rows = plan.shape[:2]
        _run_grouped(plan, a, b, _uniform_ends(groups, rows, a.device), out)
    return out


def bmm(a, b, out=None):
    """torch.bmm(a, b) with gemmtune's grouped kernels: a (G, M, K) @ b (G, K, N) is the
    (G, M, N) result of a's dtype, each product summed in f32 and rounded once; out: a
    (G, M, N) tensor to write into, in its dtype, its rows row-major (stride 1 along N) and its G
    matrices one after another.

    The grouped problem of grouped_mm, with a's G*M rows as x and b as w, and uniform group ends
    (g+1) * M (an int32 tensor made once per G, M and GPU, and kept). a is read in place where
    its rows flatten into a (G*M, K) matrix (a contiguous a does), else from a contiguous copy
    (a.transpose(1, 2) of a (G, K, M) tensor); b as grouped_mm reads w: b[g] row-major, or
    b = B.transpose(1, 2) of a contiguous (G, N, K) B, in place. a and b are bfloat16 or float16,
    of one dtype; GPUs from sm_80 on have grouped kernels (older ones: Error 'unsupported').
    Raises as grouped_mm. No autograd. With torch >= 2.4 this is torch.ops.gemmtune.bmm under
    torch.compile (out= takes the eager path)."""
    if out is None and OPERATORS and _is_compiling():
        return torch.ops.gemmtune.bmm(a, b)
    return _bmm(a, b, out)


# ---------------------------------------------------------------------------------------------
# Custom operators (torch >= 2.4: torch.library.custom_op)


def _register():
    if not hasattr(torch.library, "custom_op"):
        return False

    @torch.library.custom_op("gemmtune::mm", mutates_args=())
    def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _matmul(a, b, None, 1.0, 0.0, None)

    # What a patched torch.matmul runs (gemmtune.patch): gemmtune's mm, or torch's where the
    # library refuses the problem.
    @torch.library.custom_op("gemmtune::mm_or_torch", mutates_args=())
    def mm_or_torch(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _matmul_or_torch(a, b)

    def mm_fake(a, b):
        torch._check(a.dim() == 2 and b.dim() == 2, lambda: "gemmtune.mm takes 2-D matrices")
        torch._check(a.shape[1] == b.shape[0], lambda: "gemmtune.mm: a's columns != b's rows")
        return a.new_empty((a.shape[0], b.shape[1]), dtype=result_torch_dtype(a.dtype, b.dtype))

    def mm_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def mm_backward_of(mm_op):
        """The backward of a @ b, its GEMMs on mm_op (gemmtune's, or the patched one's)."""
        def backward(ctx, grad):
            a, b = ctx.saved_tensors
            grad = grad.contiguous()  # gradients may arrive broadcast (stride 0)
            grad_a = mm_op(grad, b.t()) if ctx.needs_input_grad[0] else None
            grad_b = mm_op(a.t(), grad) if ctx.needs_input_grad[1] else None
            return grad_a, grad_b
        return backward

    for op in (mm, mm_or_torch):
        op.register_fake(mm_fake)
        op.register_autograd(mm_backward_of(op), setup_context=mm_context)

    def linear_fake(x, w, bias=None, activation="identity"):
        torch._check(w.dim() == 2, lambda: "gemmtune.linear takes a 2-D weight")
        torch._check(x.shape[-1] == w.shape[1], lambda: "gemmtune.linear: in_features differ")
        torch._check(activation == "identity" or activation in _ACTIVATIONS,
                     lambda: f"gemmtune.linear: unknown activation {activation!r}")
        return x.new_empty((*x.shape[:-1], w.shape[0]),
                           dtype=result_torch_dtype(x.dtype, w.dtype))

    def linear_grads(ctx, grad, x, w, mm_op):
        """The gradients of x, w and the bias of x @ w.T + bias, from the sum's (grad)."""
        grad2 = grad.reshape(-1, w.shape[0]).contiguous()
        grad_x = grad_w = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_x = mm_op(grad2, w).view(x.shape)
        if ctx.needs_input_grad[1]:
            grad_w = mm_op(grad2.t(), x.reshape(-1, x.shape[-1]))
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_bias = grad2.sum(0)
        return grad_x, grad_w, grad_bias

    # activation: the library's name ('identity', 'relu', 'gelu', 'gelu_tanh', 'silu').
    @torch.library.custom_op("gemmtune::linear", mutates_args=())
    def linear_op(x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor] = None,
                  activation: str = "identity") -> torch.Tensor:
        return _linear(x, w, bias, None, None, activation)

    linear_op.register_fake(linear_fake)

    def linear_context(ctx, inputs, output):
        x, w, bias, activation = inputs
        # ReLU's derivative is read from the output; GELU's and SiLU's need the pre-activation,
        # recomputed in backward (one more GEMM) rather than kept from forward.
        ctx.save_for_backward(x, w, bias, output if activation == "relu" else None)
        ctx.has_bias, ctx.activation = bias is not None, activation

    def activation_grad(activation, grad, z):
        """The gradient of the pre-activation z from the output's, of GELU, its tanh form or
        SiLU."""
        if activation == "silu":
            return torch.ops.aten.silu_backward(grad, z)
        approximate = "tanh" if activation == "gelu_tanh" else "none"
        return torch.ops.aten.gelu_backward(grad, z, approximate=approximate)

    def pre_activation_grad(ctx, grad):
        """The gradient of x @ w.T + bias from the output's."""
        x, w, bias, y = ctx.saved_tensors
        if ctx.activation == "identity":
            return grad
        if ctx.activation == "relu":
            return grad.masked_fill(y <= 0, 0)
        return activation_grad(ctx.activation, grad, linear_op(x, w, bias, "identity"))

    def linear_backward(ctx, grad):
        x, w = ctx.saved_tensors[:2]
        return (*linear_grads(ctx, pre_activation_grad(ctx, grad), x, w, mm), None)

    linear_op.register_autograd(linear_backward, setup_context=linear_context)

    # The result and its pre-activation from one kernel (the epilogue's aux): what linear runs
    # under autograd for GELU and SiLU, whose backward then reads the pre-activation kept.
    @torch.library.custom_op("gemmtune::linear_keep", mutates_args=())
    def linear_keep_op(x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor] = None,
                       activation: str = "gelu") -> Tuple[torch.Tensor, torch.Tensor]:
        return run_linear(x, w, bias, None, TorchBackend, None, activation, None,
                          keep_pre_activation=True)

    @linear_keep_op.register_fake
    def _(x, w, bias=None, activation="gelu"):
        torch._check(activation in _ACTIVATIONS,
                     lambda: f"gemmtune.linear_keep: the activation {activation!r} is not one "
                             "of relu, gelu, gelu_tanh, silu")
        y = linear_fake(x, w, bias, activation)
        return y, torch.empty_like(y)

    def linear_keep_context(ctx, inputs, output):
        x, w, bias, activation = inputs
        ctx.save_for_backward(x, w, output[1])
        ctx.has_bias, ctx.activation = bias is not None, activation

    def linear_keep_backward(ctx, grad, grad_pre):
        x, w, z = ctx.saved_tensors
        if ctx.activation == "relu":
            pre = grad.masked_fill(z <= 0, 0)
        else:
            pre = activation_grad(ctx.activation, grad, z)
        if grad_pre is not None:  # the pre-activation was used downstream too
            pre = pre + grad_pre
        return (*linear_grads(ctx, pre, x, w, mm), None)

    linear_keep_op.register_autograd(linear_keep_backward, setup_context=linear_keep_context)

    # What a patched nn.Linear or F.linear runs (gemmtune.patch): gemmtune's linear, or torch's
    # F.linear where the library refuses the problem.
    @torch.library.custom_op("gemmtune::linear_or_torch", mutates_args=())
    def linear_or_torch(x: torch.Tensor, w: torch.Tensor,
                        bias: Optional[torch.Tensor] = None) -> torch.Tensor:
        return _linear_or_torch(x, w, bias)

    linear_or_torch.register_fake(linear_fake)

    def linear_or_torch_context(ctx, inputs, output):
        x, w, bias = inputs
        ctx.save_for_backward(x, w)
        ctx.has_bias = bias is not None

    def linear_or_torch_backward(ctx, grad):
        x, w = ctx.saved_tensors
        return linear_grads(ctx, grad, x, w, mm_or_torch)

    linear_or_torch.register_autograd(linear_or_torch_backward,
                                      setup_context=linear_or_torch_context)

    # activation: the library's name ('silu', 'gelu', 'gelu_tanh', 'relu'); layout: 'halves' or
    # 'interleaved'. No autograd formula.
    @torch.library.custom_op("gemmtune::gated_linear", mutates_args=())
    def gated_linear_op(x: torch.Tensor, w: torch.Tensor, bias: Optional[torch.Tensor] = None,
                        activation: str = "silu", layout: str = "halves") -> torch.Tensor:
        return _gated_linear(x, w, bias, None, None, activation, layout)

    @gated_linear_op.register_fake
    def _(x, w, bias=None, activation="silu", layout="halves"):
        torch._check(w.dim() == 2, lambda: "gemmtune.gated_linear takes a 2-D weight")
        torch._check(w.shape[0] % 2 == 0,
                     lambda: "gemmtune.gated_linear: the weight's rows (gate and up) are odd")
        torch._check(x.shape[-1] == w.shape[1],
                     lambda: "gemmtune.gated_linear: in_features differ")
        torch._check(activation in ("silu", "gelu", "gelu_tanh", "relu"),
                     lambda: f"gemmtune.gated_linear: unknown activation {activation!r}")
        torch._check(layout in ("halves", "interleaved"),
                     lambda: f"gemmtune.gated_linear: unknown layout {layout!r}")
        return x.new_empty((*x.shape[:-1], w.shape[0] // 2),
                           dtype=result_torch_dtype(x.dtype, w.dtype))

    @torch.library.custom_op("gemmtune::scaled_mm", mutates_args=())
    def scaled_mm_op(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor,
                     scale_b: torch.Tensor, out_dtype: torch.dtype,
                     bias: Optional[torch.Tensor] = None,
                     use_fast_accum: bool = False) -> torch.Tensor:
        return _scaled_mm(a, b, scale_a, scale_b, out_dtype, bias, use_fast_accum, None)

    @scaled_mm_op.register_fake
    def _(a, b, scale_a, scale_b, out_dtype, bias=None, use_fast_accum=False):
        torch._check(a.dim() == 2 and b.dim() == 2,
                     lambda: "gemmtune.scaled_mm takes a 2-D a (M, K) and b (K, N)")
        torch._check(a.shape[1] == b.shape[0],
                     lambda: "gemmtune.scaled_mm: a's columns != b's rows")
        return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype)

    @torch.library.custom_op("gemmtune::scaled_grouped_mm", mutates_args=())
    def scaled_grouped_mm_op(x: torch.Tensor, w: torch.Tensor, scale_x: torch.Tensor,
                             scale_w: torch.Tensor, offs: torch.Tensor, out_dtype: torch.dtype,
                             use_fast_accum: bool = False) -> torch.Tensor:
        return _scaled_grouped_mm(x, w, scale_x, scale_w, offs, out_dtype, use_fast_accum, None)

    @scaled_grouped_mm_op.register_fake
    def _(x, w, scale_x, scale_w, offs, out_dtype, use_fast_accum=False):
        torch._check(x.dim() == 2 and w.dim() == 3,
                     lambda: "gemmtune.scaled_grouped_mm takes a 2-D x (T, K) and a 3-D w "
                             "(G, K, N)")
        torch._check(x.shape[1] == w.shape[1],
                     lambda: "gemmtune.scaled_grouped_mm: x's columns != w's K")
        torch._check(offs.dim() == 1 and offs.shape[0] == w.shape[0],
                     lambda: "gemmtune.scaled_grouped_mm: offs must be (G,), one end per group")
        return x.new_empty((x.shape[0], w.shape[2]), dtype=out_dtype)

    @torch.library.custom_op("gemmtune::grouped_mm", mutates_args=())
    def grouped_mm_op(x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor,
                      out_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
        return _grouped_mm(x, w, offs, out_dtype, None)

    @grouped_mm_op.register_fake
    def _(x, w, offs, out_dtype=None):
        torch._check(x.dim() == 2 and w.dim() == 3,
                     lambda: "gemmtune.grouped_mm takes a 2-D x (T, K) and a 3-D w (G, K, N)")
        torch._check(x.shape[1] == w.shape[1], lambda: "gemmtune.grouped_mm: x's columns != w's K")
        torch._check(offs.dim() == 1, lambda: "gemmtune.grouped_mm takes a 1-D offs (G,)")
        torch._check(offs.shape[0] == w.shape[0],
                     lambda: "gemmtune.grouped_mm: offs must have one end per group of w")
        return x.new_empty((x.shape[0], w.shape[2]),
                           dtype=x.dtype if out_dtype is None else out_dtype)

    @torch.library.custom_op("gemmtune::grouped_mm_masked", mutates_args=())
    def grouped_mm_masked_op(x: torch.Tensor, w: torch.Tensor, counts: torch.Tensor,
                             out_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
        return _grouped_mm_masked(x, w, counts, out_dtype, None)

    @grouped_mm_masked_op.register_fake
    def _(x, w, counts, out_dtype=None):
        torch._check(x.dim() == 3 and w.dim() == 3,
                     lambda: "gemmtune.grouped_mm_masked takes a 3-D x (G, cap, K) and a 3-D w "
                             "(G, K, N)")
        torch._check(x.shape[0] == w.shape[0], lambda: "gemmtune.grouped_mm_masked: x's G != w's G")
        torch._check(x.shape[2] == w.shape[1], lambda: "gemmtune.grouped_mm_masked: x's K != w's K")
        torch._check(counts.dim() == 1 and counts.shape[0] == w.shape[0],
                     lambda: "gemmtune.grouped_mm_masked: counts must be (G,), one per group")
        return x.new_empty((x.shape[0], x.shape[1], w.shape[2]),
                           dtype=x.dtype if out_dtype is None else out_dtype)

    @torch.library.custom_op("gemmtune::bmm", mutates_args=())
    def bmm_op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _bmm(a, b, None)

    @bmm_op.register_fake
    def _(a, b):
        torch._check(a.dim() == 3 and b.dim() == 3,
                     lambda: "gemmtune.bmm takes a 3-D a (G, M, K) and b (G, K, N)")
        torch._check(a.shape[0] == b.shape[0], lambda: "gemmtune.bmm: a's G != b's G")
        torch._check(a.shape[2] == b.shape[1], lambda: "gemmtune.bmm: a's K != b's K")
        return a.new_empty((a.shape[0], a.shape[1], b.shape[2]))

    global _LINEAR_AUTOGRAD
    _LINEAR_AUTOGRAD = (linear_or_torch_backward, linear_or_torch_context)
    return True


OPERATORS = _register()

# torch.ops.gemmtune_cpp.linear once loaded (cpp_linear_operator()).
_CPP_LINEAR = None


def cpp_linear_operator():
    """torch.ops.gemmtune_cpp.linear(x, w, bias=None): F.linear as a C++ operator over the C API
    (python/native/gemmtune_torch.cpp), so that a call through torch's dispatcher runs no Python;
    torch's own F.linear for what gemmtune does not take. Loaded from beside libgemmtune, where
    tools/build_torch_op.py built it for this torch, with its autograd formula; None where it was
    not built."""
    global _CPP_LINEAR
    if _CPP_LINEAR is None and OPERATORS:
        path = beside_library("gemmtune_torch.so")
        if not path.exists():
            return None
        torch.ops.load_library(str(path))
        backward, context = _LINEAR_AUTOGRAD  # linear_or_torch's: the same formula
        torch.library.register_autograd("gemmtune_cpp::linear", backward, setup_context=context)
        _CPP_LINEAR = torch.ops.gemmtune_cpp.linear
    return _CPP_LINEAR
