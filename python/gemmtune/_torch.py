"""PyTorch: tensors as operands, the current stream of their device, and the custom operators
torch.ops.gemmtune.mm and torch.ops.gemmtune.linear (with fake implementations for
torch.compile, and autograd formulas). Imported only where torch is."""
from typing import Optional

import torch

from . import _operands
from ._api import _check_scalars, _stream_handle, run_linear, run_matmul
from ._library import DTYPES, OPS, Error, check, library
from ._operands import SUPPORTED
from ._plan import plan_matmul

_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


def torch_dtype_name(dtype, name):
    try:
        return _DTYPES[dtype]
    except KeyError:
        raise Error(f"{name} has dtype {dtype}: gemmtune supports {SUPPORTED}",
                    "unsupported") from None


_operands.TORCH_TENSOR = torch.Tensor
_operands.torch_dtype_name = torch_dtype_name


_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


class TorchBackend:
    @staticmethod
    def allocate(like, view, m, n):
        return torch.empty((m, n), dtype=like.dtype, device=like.device)

    @staticmethod
    def scale(out, beta):
        return out.zero_() if beta == 0 else out.mul_(beta)

    @staticmethod
    def default_stream(ops):
        if _raw_stream is not None:  # the handle without building a Stream object: cheaper
            return _raw_stream(ops.device)
        return torch.cuda.current_stream(ops.device).cuda_stream

    @staticmethod
    def rows(x, view):
        return x.reshape(-1, view.shape[-1])  # a view where the strides allow, else a copy

    @staticmethod
    def bias_rows(bias, rows, features):
        out = torch.empty((rows, features), dtype=bias.dtype, device=bias.device)
        return out.copy_(bias)


_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or (
    lambda: False)


def _through_operator(*tensors):
    """Under torch.compile, or when autograd must see the call, go through the registered
    operator; plain eager calls skip the dispatcher. (Plain loops: torch.compile traces this.)"""
    if not OPERATORS:
        return False
    if _is_compiling():
        return True
    needs_grad = False
    for t in tensors:
        if t is not None and not isinstance(t, torch.Tensor):
            return False
        needs_grad = needs_grad or (t is not None and t.requires_grad)
    return needs_grad and torch.is_grad_enabled()


def matmul(a, b, out, alpha, beta, stream):
    if out is None and alpha == 1 and beta == 0 and stream is None and _through_operator(a, b):
        return torch.ops.gemmtune.mm(a, b)
    return _matmul(a, b, out, alpha, beta, stream)


def linear(x, w, bias, stream):
    if stream is None and _through_operator(x, w, bias):
        return torch.ops.gemmtune.linear(x, w, bias)
    return _linear(x, w, bias, stream)


# ---------------------------------------------------------------------------------------------
# The fast path: a call on tensors whose dtypes, shapes and strides an earlier call checked and
# planned. Small GEMMs are host-bound, and the general path (Views, checks, the plan) costs more
# than the launch, so a repeated call reads each tensor once, looks its plan up and calls the C
# API. Whatever the cache does not answer (a first call, an error, tensors on two GPUs, x
# copied to rows) takes the general path, which raises the errors.

# (kind, dtypes, shapes, strides) -> (dtype code, ops, m, n, k), lda, ldb, ldc, swap, the
# result's shape. Only problems with M, N, K >= 1 that passed every check are kept.
_PLANS = {}
_MAX_PLANS = 4096  # more shapes than that (e.g. every sequence length): start again


def _remember(key, plan, shape):
    if len(_PLANS) >= _MAX_PLANS:
        _PLANS.clear()
    p = plan.problem
    head = (DTYPES[p.dtype], OPS[p.layout[0]], OPS[p.layout[1]], p.m, p.n, p.k)
    _PLANS[key] = (head, p.lda, p.ldb, p.ldc, plan.swap, shape)


def _launch(entry, device, a_ptr, b_ptr, c_ptr, alpha, beta, stream):
    """The planned GEMM on a, b and c (the call's row-major operands), as _api._gemm runs it."""
    head, lda, ldb, ldc, swap, _ = entry
    if swap:
        a_ptr, b_ptr = b_ptr, a_ptr
    if stream is None:
        stream = _raw_stream(device) if _raw_stream is not None else \
            torch.cuda.current_stream(device).cuda_stream
    check(library().gemmtune_gemm_on_device(device, *head, alpha, a_ptr, lda, b_ptr, ldb, beta,
                                            c_ptr, ldc, stream))


def _key(kind, a, b, c):
    """What the checks and the plan of a call depend on: dtypes, shapes, strides (a bias: its
    dtype and shape). None for tensors without them (sparse, nested): the general path's."""
    try:
        if c is None:
            third = None
        elif kind == "linear":
            third = (c.dtype, c.shape)
        else:
            third = (c.dtype, c.shape, c.stride())
        return kind, a.dtype, a.shape, a.stride(), b.dtype, b.shape, b.stride(), third
    except Exception:  # noqa: BLE001  (whatever it was, the general path raises it again)
        return None


def _on_one_gpu(tensors):
    """The GPU of the tensors when all of them are CUDA tensors on it, else None (the general
    path then says what is wrong). get_device() is an int; .device builds an object."""
    device = tensors[0].get_device()
    for t in tensors:
        if not t.is_cuda or t.get_device() != device:
            return None
    return device


def _matmul(a, b, out, alpha, beta, stream):
    _check_scalars(alpha, beta, out)  # the general path's first checks: the same errors first
    stream = _stream_handle(stream)
    Tensor = torch.Tensor
    if isinstance(a, Tensor) and isinstance(b, Tensor) and (out is None or isinstance(out, Tensor)):
        key = _key("mm", a, b, out)
        entry = _PLANS.get(key) if key is not None else None
        if entry is not None:
            device = _on_one_gpu((a, b) if out is None else (a, b, out))
            if device is not None:
                if out is None:
                    out = torch.empty(entry[-1], dtype=a.dtype, device=a.device)
                _launch(entry, device, a.data_ptr(), b.data_ptr(), out.data_ptr(), alpha, beta,
                        stream)
                return out
        result = run_matmul(a, b, out, alpha, beta, stream, TorchBackend)
        if key is not None and entry is None and min(*a.shape, b.shape[1]) >= 1:
            # Checked now: plan the calls after it.
            plan = plan_matmul(_DTYPES[a.dtype], tuple(a.shape), tuple(a.stride()),
                               tuple(b.shape), tuple(b.stride()),
                               None if out is None else tuple(out.stride()))
            _remember(key, plan, (a.shape[0], b.shape[1]))
        return result
    return run_matmul(a, b, out, alpha, beta, stream, TorchBackend)


def _linear(x, w, bias, stream):
    Tensor = torch.Tensor
    if not (isinstance(x, Tensor) and isinstance(w, Tensor)
            and (bias is None or isinstance(bias, Tensor))):
        return run_linear(x, w, bias, stream, TorchBackend)
    key = _key("linear", x, w, bias)
    entry = _PLANS.get(key) if key is not None else None
    if entry is not None:
        device = _on_one_gpu((x, w) if bias is None else (x, w, bias))
        if device is not None:
            stream = _stream_handle(stream)
            y = torch.empty(entry[-1], dtype=x.dtype, device=x.device)
            beta = 0.0
            if bias is not None:  # as the general path: the bias is C, with beta = 1
                y.copy_(bias)
                beta = 1.0
            _launch(entry, device, x.data_ptr(), w.data_ptr(), y.data_ptr(), 1.0, beta, stream)
            return y
    y = run_linear(x, w, bias, stream, TorchBackend)
    if key is not None and entry is None:
        _learn_linear(key, x, w, bias, tuple(y.shape))
    return y


def _learn_linear(key, x, w, bias, shape):
    """After a general call of linear succeeded: its plan, for the calls after it. x's rows are
    the view x.reshape makes (its strides, as the general path reads them); where reshape
    copies, every call must, so there is no fast path."""
    features, outputs = x.shape[-1], w.shape[0]
    if min(features, outputs) < 1:
        return
    x_rows = x.reshape(-1, features)
    if x_rows.shape[0] < 1 or x_rows.data_ptr() != x.data_ptr():
        return
    c_strides = None if bias is None else (outputs, 1)  # the general path's C: bias rows
    plan = plan_matmul(_DTYPES[x.dtype], tuple(x_rows.shape), tuple(x_rows.stride()),
                       tuple(w.shape)[::-1], tuple(w.stride())[::-1], c_strides)
    _remember(key, plan, shape)


# ---------------------------------------------------------------------------------------------
# Custom operators (torch >= 2.4: torch.library.custom_op)


def _register():
    if not hasattr(torch.library, "custom_op"):
        return False

    @torch.library.custom_op("gemmtune::mm", mutates_args=())
    def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _matmul(a, b, None, 1.0, 0.0, None)

    @mm.register_fake
    def _(a, b):
        torch._check(a.dim() == 2 and b.dim() == 2, lambda: "gemmtune.mm takes 2-D matrices")
        torch._check(a.shape[1] == b.shape[0], lambda: "gemmtune.mm: a's columns != b's rows")
        torch._check(a.dtype == b.dtype, lambda: "gemmtune.mm: a and b differ in dtype")
        return a.new_empty((a.shape[0], b.shape[1]))

    def mm_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def mm_backward(ctx, grad):
        a, b = ctx.saved_tensors
        grad = grad.contiguous()  # gradients may arrive broadcast (stride 0)
        grad_a = mm(grad, b.t()) if ctx.needs_input_grad[0] else None
        grad_b = mm(a.t(), grad) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b

    mm.register_autograd(mm_backward, setup_context=mm_context)

    @torch.library.custom_op("gemmtune::linear", mutates_args=())
    def linear_op(x: torch.Tensor, w: torch.Tensor,
                  bias: Optional[torch.Tensor] = None) -> torch.Tensor:
        return _linear(x, w, bias, None)

    @linear_op.register_fake
    def _(x, w, bias=None):
        torch._check(w.dim() == 2, lambda: "gemmtune.linear takes a 2-D weight")
        torch._check(x.shape[-1] == w.shape[1], lambda: "gemmtune.linear: in_features differ")
        return x.new_empty((*x.shape[:-1], w.shape[0]))

    def linear_context(ctx, inputs, output):
        x, w, bias = inputs
        ctx.save_for_backward(x, w)
        ctx.has_bias = bias is not None

    def linear_backward(ctx, grad):
        x, w = ctx.saved_tensors
        grad2 = grad.reshape(-1, w.shape[0]).contiguous()
        grad_x = grad_w = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_x = mm(grad2, w).view(x.shape)
        if ctx.needs_input_grad[1]:
            grad_w = mm(grad2.t(), x.reshape(-1, x.shape[-1]))
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_bias = grad2.sum(0)
        return grad_x, grad_w, grad_bias

    linear_op.register_autograd(linear_backward, setup_context=linear_context)
    return True


OPERATORS = _register()
