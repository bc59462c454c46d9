"""gemmtune.patch without a GPU: which nn.Linear layers it routes, what undo puts back, torch.matmul
and F.linear routed inside `with gemmtune.patched()` only, CPU calls left to torch (exactly its
results); without torch, a clear error. The GPU side is test_gpu_patch.py."""
import importlib.util

import pytest

import gemmtune

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="torch is not importable here")


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None,
                    reason="torch is importable here: gemmtune.patch works")
def test_patch_needs_torch():
    with pytest.raises(gemmtune.Error, match="torch is not importable here") as e:
        gemmtune.patch(object())
    assert e.value.code == "unsupported"
    with pytest.raises(gemmtune.Error, match="torch is not importable here"):
        with gemmtune.patched():
            pass


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def model_of(torch):
    """Linear layers of every kind patch meets: plain ones, one used twice, a subclass with its
    own forward, one whose forward someone set, and something else between them."""
    nn = torch.nn

    class Scaled(nn.Linear):
        def forward(self, x):
            return 2 * super().forward(x)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.first = nn.Linear(8, 16)
            self.shared = nn.Linear(16, 16, bias=False)
            self.scaled = Scaled(16, 16)
            self.hooked = nn.Linear(16, 16)
            self.hooked.forward = lambda x: self.hooked.weight.sum() + x  # someone else's
            self.last = nn.Linear(16, 4)

        def forward(self, x):
            h = torch.relu(self.first(x))
            h = self.shared(self.shared(h))
            return self.last(self.hooked(self.scaled(h)))

    torch.manual_seed(0)
    return Model()


@needs_torch
def test_plain_linear_layers_are_routed_and_undo_puts_them_back(torch):
    from gemmtune import _torch
    model, x = model_of(torch), torch.randn(3, 5, 8)
    want = model(x)
    someone_elses = model.hooked.forward
    handle = gemmtune.patch(model)
    assert handle.layers == ("first", "shared", "last") and not handle.functions
    assert "3 nn.Linear layers" in repr(handle)
    for layer in (model.first, model.shared, model.last):
        assert layer.forward.__func__ is gemmtune._patch._routed_forward
    assert "forward" not in model.scaled.__dict__ and model.hooked.forward is someone_elses
    assert torch.equal(model(x), want)  # CPU tensors: torch's own F.linear, exactly
    handle.undo()
    assert handle.layers == ()
    for layer in (model.first, model.shared, model.last):
        assert "forward" not in layer.__dict__
        assert layer.forward.__func__ is torch.nn.Linear.forward
    assert model.hooked.forward is someone_elses
    assert torch.equal(model(x), want)
    handle.undo()  # again: nothing
    assert _torch.routed_linear is not torch.nn.functional.linear


@needs_torch
def test_cpu_calls_never_reach_gemmtune(torch, monkeypatch):
    from gemmtune import _torch
    tried = []
    monkeypatch.setattr(_torch, "_linear_or_torch", lambda *a: tried.append(a))
    monkeypatch.setattr(_torch, "_matmul_or_torch", lambda *a: tried.append(a))
    model, x = model_of(torch), torch.randn(4, 8)
    want = model(x)
    with gemmtune.patched(model, functions=True):
        assert torch.equal(model(x), want)
        a, b = torch.randn(6, 8), torch.randn(8, 5)
        assert torch.allclose(torch.matmul(a, b), a @ b)
        assert torch.allclose(torch.nn.functional.linear(a, b.t()), a @ b)
    assert tried == []


@needs_torch
def test_patching_twice_routes_nothing_twice(torch):
    model, x = model_of(torch), torch.randn(2, 8)
    want = model(x)
    first = gemmtune.patch(model)
    second = gemmtune.patch(model)
    assert second.layers == () and len(first.layers) == 3
    second.undo()
    assert model.first.forward.__func__ is gemmtune._patch._routed_forward  # still the first's
    first.undo()
    assert "forward" not in model.first.__dict__
    assert torch.equal(model(x), want)


@needs_torch
def test_functions_are_routed_inside_the_block_only(torch):
    from gemmtune import _torch
    F = torch.nn.functional
    matmul, linear = torch.matmul, F.linear
    with gemmtune.patched() as handle:
        assert handle.functions and handle.layers == ()
        assert torch.matmul is _torch.routed_matmul and F.linear is _torch.routed_linear
        a, b, out = torch.randn(3, 4), torch.randn(4, 2), torch.empty(3, 2)
        assert torch.matmul(a, b, out=out) is out and torch.allclose(out, a @ b)  # torch's out=
        assert torch.allclose(F.linear(input=a, weight=b.t(), bias=None), a @ b)  # its keywords
        assert torch.matmul(torch.randn(2, 3, 4), b).shape == (2, 3, 2)
    assert torch.matmul is matmul and F.linear is linear


@needs_torch
def test_functions_stay_routed_until_the_last_handle_lets_go(torch):
    F = torch.nn.functional
    matmul, linear = torch.matmul, F.linear
    outer = gemmtune.patch(functions=True, model=model_of(torch))
    assert outer.functions and len(outer.layers) == 3
    with gemmtune.patched():
        pass
    assert torch.matmul is not matmul  # the outer handle still routes them
    outer.undo()
    assert torch.matmul is matmul and F.linear is linear


@needs_torch
def test_patch_takes_a_module(torch):
    with pytest.raises(gemmtune.Error, match="model is a int: gemmtune.patch takes a torch.nn"):
        gemmtune.patch(42)
    handle = gemmtune.patch(torch.nn.Linear(4, 4))  # a model that is one layer
    assert handle.layers == ("",)
    handle.undo()
