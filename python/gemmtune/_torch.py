"""PyTorch: tensors as operands, the current stream of their device, and the custom operators
torch.ops.gemmtune.mm and torch.ops.gemmtune.linear (with fake implementations for
torch.compile, and autograd formulas). Imported only where torch is."""
from typing import Optional

import torch

from . import _operands
from ._api import run_linear, run_matmul
from ._library import Error
from ._operands import SUPPORTED

_operands.TORCH_TENSOR = torch.Tensor

_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


def torch_dtype_name(dtype, name):
    try:
        return _DTYPES[dtype]
    except KeyError:
        raise Error(f"{name} has dtype {dtype}: gemmtune supports {SUPPORTED}",
                    "unsupported") from None


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
    return run_matmul(a, b, out, alpha, beta, stream, TorchBackend)


def linear(x, w, bias, stream):
    if stream is None and _through_operator(x, w, bias):
        return torch.ops.gemmtune.linear(x, w, bias)
    return run_linear(x, w, bias, stream, TorchBackend)


# ---------------------------------------------------------------------------------------------
# Custom operators (torch >= 2.4: torch.library.custom_op)


def _register():
    if not hasattr(torch.library, "custom_op"):
        return False

    @torch.library.custom_op("gemmtune::mm", mutates_args=())
    def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return run_matmul(a, b, None, 1.0, 0.0, None, TorchBackend)

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
        return run_linear(x, w, bias, None, TorchBackend)

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
