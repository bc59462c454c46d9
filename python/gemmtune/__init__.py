"""gemmtune for Python: GEMMs with kernels tuned for your GPU, on PyTorch tensors and CUDA
arrays (CuPy, anything with __cuda_array_interface__ or DLPack).

    import gemmtune
    y = gemmtune.linear(x, w)              # x @ w.T, as torch.nn.functional.linear
    y = gemmtune.linear(x, w, b, activation="gelu")  # gelu(x @ w.T + b) in the kernel's store
    h = gemmtune.gated_linear(x, w_gate_up)  # SwiGLU: silu(x @ w_gate.T) * (x @ w_up.T), one GEMM
    c = gemmtune.matmul(a, b)              # a @ b, transposed views read in place
    gemmtune.select_linear(x, w)           # which kernel, and why: tuned ... fallback
    y = gemmtune.scaled_mm(x8, w8.t(), sx, sw)   # float8, as torch._scaled_mm (bf16 result)
    y = gemmtune.grouped_mm(x, w, offs)    # experts: as torch._grouped_mm, x (T, K), w (G, K, N)
    y = gemmtune.scaled_grouped_mm(x8, w8, sx, sw, offs)  # float8 experts (block, row, tensor)
    y = gemmtune.grouped_mm_masked(x, w, counts)  # decode: x (G, cap, K), counts[g] rows each
    c = gemmtune.bmm(a, b)                 # as torch.bmm, on the same grouped kernels
    handle = gemmtune.patch(model)         # model's nn.Linear layers through gemmtune; .undo()
    with gemmtune.patched():               # torch.matmul and F.linear, inside the block
    # Operands may differ in dtype where a kernel computes the pair (else Error 'unsupported').

GEMMTUNE_RECORD=shapes.txt lists every problem served without a tuned kernel;
`gemm-tune --shapes shapes.txt` then tunes exactly those. The library is libgemmtune, found
at $GEMMTUNE_LIBRARY, inside this package (pip install), beside it, in the source tree's
build/lib, or on the loader's path. With PyTorch (>= 2.4) there are torch.ops.gemmtune.mm,
torch.ops.gemmtune.linear, torch.ops.gemmtune.gated_linear, torch.ops.gemmtune.scaled_mm,
torch.ops.gemmtune.scaled_grouped_mm,
torch.ops.gemmtune.grouped_mm, torch.ops.gemmtune.grouped_mm_masked and torch.ops.gemmtune.bmm
too, which torch.compile (and, for mm and linear, autograd) understand; gemmtune.patch's calls
go through torch.ops.gemmtune.linear_or_torch and .mm_or_torch.
"""
from ._api import (Selection, gated_linear, library_path, linear, matmul, problem,
                   problem_gated_linear, problem_linear, problem_scaled_mm, record, result_dtype,
                   select, select_gated_linear, select_linear, select_scaled_mm)
from ._library import Error
from ._plan import DataTypes, Problem

__all__ = ["DataTypes", "Error", "Problem", "Selection", "bmm", "gated_linear", "grouped_mm",
           "grouped_mm_masked", "library_path", "linear", "matmul", "patch", "patched", "problem",
           "problem_gated_linear", "problem_linear", "problem_scaled_mm", "record", "result_dtype",
           "scaled_grouped_mm", "scaled_mm", "select", "select_gated_linear", "select_linear",
           "select_scaled_mm", "torch_operators", "cpp_linear_operator"]

try:
    import torch as _torch_module  # noqa: F401
except ImportError:
    _torch_module = None

# True when torch.ops.gemmtune.mm, .linear, .gated_linear, .scaled_mm, .grouped_mm,
# .grouped_mm_masked and .bmm are registered (PyTorch >= 2.4).
torch_operators = False
if _torch_module is not None:
    from . import _api, _patch, _torch
    _api.torch_api = _torch
    torch_operators = _torch.OPERATORS
    scaled_mm = _torch.scaled_mm
    scaled_grouped_mm = _torch.scaled_grouped_mm
    grouped_mm = _torch.grouped_mm
    grouped_mm_masked = _torch.grouped_mm_masked
    bmm = _torch.bmm
    patch = _patch.patch
    patched = _patch.patched
    cpp_linear_operator = _torch.cpp_linear_operator
else:
    # Each says it needs torch.
    from ._api import (bmm, grouped_mm, grouped_mm_masked, patch, patched, scaled_grouped_mm,
                       scaled_mm)
