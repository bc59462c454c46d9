"""gemmtune.patch: a torch model's nn.Linear layers (and, asked for, torch.matmul and
torch.nn.functional.linear) computed by gemmtune where it computes them, by torch elsewhere, until
undone. Imported only where torch is."""
import contextlib
import threading
import types

import torch
import torch.nn.functional as F

from . import _torch
from ._library import Error


def _routed_forward(layer, input):
    """The forward of a patched nn.Linear: nn.Linear's F.linear, routed."""
    return _torch.routed_linear(input, layer.weight, layer.bias)


def _is_routed(layer):
    forward = layer.__dict__.get("forward")
    return getattr(forward, "__func__", None) is _routed_forward


def _route_layers(model):
    """[(name, layer)] of the model's nn.Linear layers now routed: those that compute as
    nn.Linear does (not a subclass's own forward, nor a forward set on the layer by someone else,
    nor gemmtune's already)."""
    if not isinstance(model, torch.nn.Module):
        raise Error(f"model is a {type(model).__name__}: gemmtune.patch takes a torch.nn.Module "
                    "(or no model, for torch.matmul and F.linear alone)")
    routed = []
    for name, layer in model.named_modules():
        if (isinstance(layer, torch.nn.Linear) and type(layer).forward is torch.nn.Linear.forward
                and "forward" not in layer.__dict__):
            # A bound method of one function: torch.compile guards a patched forward by it.
            layer.forward = types.MethodType(_routed_forward, layer)
            routed.append((name, layer))
    return routed


# torch.matmul and F.linear are routed while one handle or more asks for it; the functions they
# replaced (torch's, or whatever stood there) come back when the last lets go.
_functions_lock = threading.Lock()
_function_handles = 0
_replaced_functions = None


def _route_functions():
    global _function_handles, _replaced_functions
    with _functions_lock:
        if _function_handles == 0:
            _replaced_functions = (torch.matmul, F.linear)
            torch.matmul, F.linear = _torch.routed_matmul, _torch.routed_linear
        _function_handles += 1


def _restore_functions():
    global _function_handles
    with _functions_lock:
        _function_handles -= 1
        if _function_handles == 0:
            matmul, linear = _replaced_functions
            # Only ours: a function someone put there since stays.
            if torch.matmul is _torch.routed_matmul:
                torch.matmul = matmul
            if F.linear is _torch.routed_linear:
                F.linear = linear


class Patch:
    """What gemmtune.patch routed, until undo(): `layers`, the names of the nn.Linear layers (in
    model.named_modules(); '' for the model itself), and `functions`, whether torch.matmul and
    torch.nn.functional.linear are. A context manager too: undone on leaving the block."""

    def __init__(self, layers, functions):
        self._layers, self._functions = layers, functions

    @property
    def layers(self):
        return tuple(name for name, _ in self._layers)

    @property
    def functions(self):
        return self._functions

    def undo(self):
        """Puts back each routed layer's own forward (nn.Linear's) and, with the last handle
        that routes them, the functions torch.matmul and F.linear were. Again: nothing."""
        layers, self._layers = self._layers, []
        for _, layer in layers:
            if _is_routed(layer):
                del layer.forward
        if self._functions:
            self._functions = False
            _restore_functions()

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.undo()

    def __repr__(self):
        routed = [f"{len(self._layers)} nn.Linear layers"]
        if self._functions:
            routed.append("torch.matmul and F.linear")
        return f"<gemmtune.Patch: {' and '.join(routed)}>"


def patch(model=None, *, functions=False):
    """Routes the model's nn.Linear layers through gemmtune: each calls gemmtune's linear where
    gemmtune computes the call (CUDA tensors of one dtype among float32, float16 and bfloat16,
    plain tensors or parameters, outside autocast, a problem the library runs), else torch's
    F.linear, as before; nothing fails that did not. functions=True (or no model) routes
    torch.matmul (a 2-D other, a 2-D or larger input) and torch.nn.functional.linear too,
    wherever they are called, until undone. Returns a Patch: .undo() puts back what was there.

    Patched calls go through torch.ops.gemmtune.linear_or_torch and .mm_or_torch where
    torch.compile traces them or autograd needs them (each has a backward), and straight to the
    library in plain eager calls; either works in CUDA graph capture (after a warm-up call of
    each shape, as torch asks). A problem the library refuses is given to torch from then on.
    Patching again routes nothing twice: a layer already routed is left as it is. Layers of a
    subclass with its own forward, and layers whose forward was set on them, are left to torch."""
    layers = [] if model is None else _route_layers(model)
    routes_functions = functions or model is None
    if routes_functions:
        _route_functions()
    return Patch(layers, routes_functions)


@contextlib.contextmanager
def patched(model=None, *, functions=False):
    """with gemmtune.patched(model): the model's nn.Linear layers routed inside the block (as
    gemmtune.patch routes them); with no model, torch.matmul and F.linear."""
    handle = patch(model, functions=functions)
    try:
        yield handle
    finally:
        handle.undo()
