"""On the GPU (marked gpu; skipped without torch or CUDA): gemmtune.patch on a decoder block in
plain torch (RMSNorm, attention with q, k, v and o projections and a key/value cache, a SwiGLU
MLP of gate, up and down projections; bf16). Prefill (2 x 128 tokens) and decode (2 x 1) match
the block unpatched, every nn.Linear call goes through gemmtune (none is given to torch), undo
puts nn.Linear's forward back; the patched block under torch.compile, in CUDA graph capture
and replay, under autograd, as a context manager; torch.matmul and F.linear routed; what
gemmtune leaves to torch (and the problem it refuses, remembered)."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU visible to torch", allow_module_level=True)

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import gemmtune  # noqa: E402
from gemmtune import _torch  # noqa: E402

pytestmark = pytest.mark.gpu
torch.backends.cuda.matmul.allow_tf32 = False  # f32 references in full f32

BF16_TOLERANCE = 2e-2  # bf16: a few roundings of the outputs, in another summation order
F32_TOLERANCE = 1e-3  # f32 gradients through a block: summation order only
LINEAR_LAYERS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
operators = pytest.mark.skipif(not gemmtune.torch_operators,
                               reason="torch < 2.4: no torch.library.custom_op")


def close(got, want, tolerance=BF16_TOLERANCE):
    assert got.shape == want.shape and got.dtype == want.dtype
    want = want.float()
    error = (got.float() - want).abs().max() / want.abs().max().clamp_min(1e-6)
    assert error.item() < tolerance, f"relative error {error.item():.2e}"


class RMSNorm(nn.Module):
    def __init__(self, features, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(features))
        self.eps = eps

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return h.to(x.dtype) * self.weight


class DecoderBlock(nn.Module):
    """A pre-norm decoder block of Llama's shape: attention with q, k, v and o projections (a
    key/value cache passed in and returned), then a SwiGLU MLP of gate, up and down
    projections."""

    def __init__(self, d_model=512, heads=8, d_ff=1408):
        super().__init__()
        self.heads = heads
        self.attention_norm, self.mlp_norm = RMSNorm(d_model), RMSNorm(d_model)
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.o_proj = nn.Linear(d_model, d_model, bias=False)
        self.gate_proj = nn.Linear(d_model, d_ff, bias=False)
        self.up_proj = nn.Linear(d_model, d_ff, bias=False)
        self.down_proj = nn.Linear(d_ff, d_model, bias=False)

    def heads_of(self, t):
        batch, tokens, _ = t.shape
        return t.view(batch, tokens, self.heads, -1).transpose(1, 2)

    def forward(self, x, past_k=None, past_v=None):
        """(the block's output, the keys and values so far)"""
        batch, tokens, d_model = x.shape
        h = self.attention_norm(x)
        q = self.heads_of(self.q_proj(h))
        k = self.heads_of(self.k_proj(h))
        v = self.heads_of(self.v_proj(h))
        if past_k is not None:
            k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=past_k is None)
        x = x + self.o_proj(attended.transpose(1, 2).reshape(batch, tokens, d_model))
        h = self.mlp_norm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h)), k, v


def block(dtype=torch.bfloat16, **sizes):
    torch.manual_seed(0)
    return DecoderBlock(**sizes).to("cuda", dtype).eval()


def tokens(count, dtype=torch.bfloat16, d_model=512, seed=1):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(2, count, d_model, device="cuda", dtype=dtype, generator=generator)


def prefill_and_decode(model, prompt, step):
    """The outputs of a prefill over the prompt, then of one decode step."""
    out, k, v = model(prompt)
    decoded, _, _ = model(step, k, v)
    return out, decoded


@pytest.fixture
def spy(monkeypatch):
    """Counts of routed calls: 'linear' and 'mm', those offered to gemmtune (the bodies of the
    routed F.linear and torch.matmul); 'torch', those torch's own functions computed instead."""
    counts = {"linear": 0, "mm": 0, "torch": 0}

    def counted(name, function):
        def call(*args, **kwargs):
            counts[name] += 1
            return function(*args, **kwargs)
        return call

    for attribute, name in (("_linear_or_torch", "linear"), ("_matmul_or_torch", "mm"),
                            ("_TORCH_LINEAR", "torch"), ("_TORCH_MATMUL", "torch")):
        monkeypatch.setattr(_torch, attribute, counted(name, getattr(_torch, attribute)))
    return counts


def reset(counts):
    counts.update(dict.fromkeys(counts, 0))


def test_the_patched_block_runs_every_linear_on_gemmtune_and_undo_restores(spy):
    model, prompt, step = block(), tokens(128), tokens(1, seed=2)
    with torch.inference_mode():
        want = prefill_and_decode(model, prompt, step)
        handle = gemmtune.patch(model)
        assert sorted(handle.layers) == sorted(LINEAR_LAYERS)
        for name in LINEAR_LAYERS:
            assert model.get_submodule(name).forward.__func__ is gemmtune._patch._routed_forward
        for _ in range(2):  # the first time plans each problem, the second takes the plans
            got = prefill_and_decode(model, prompt, step)
            for g, w in zip(got, want):
                close(g, w)
        assert spy == {"linear": 4 * len(LINEAR_LAYERS), "mm": 0, "torch": 0}
        assert gemmtune.patch(model).layers == ()  # patched already: nothing routed twice
        handle.undo()
        for name in LINEAR_LAYERS:
            layer = model.get_submodule(name)
            assert "forward" not in layer.__dict__
            assert layer.forward.__func__ is nn.Linear.forward
        reset(spy)
        for g, w in zip(prefill_and_decode(model, prompt, step), want):
            close(g, w, 1e-6)
        assert spy == {"linear": 0, "mm": 0, "torch": 0}


def test_the_context_manager_routes_inside_the_block_only(spy):
    model, prompt, step = block(), tokens(128), tokens(1, seed=2)
    with torch.inference_mode():
        want = prefill_and_decode(model, prompt, step)
        with gemmtune.patched(model) as handle:
            assert len(handle.layers) == len(LINEAR_LAYERS) and not handle.functions
            got = prefill_and_decode(model, prompt, step)
        assert all("forward" not in model.get_submodule(name).__dict__ for name in LINEAR_LAYERS)
    for g, w in zip(got, want):
        close(g, w)
    assert spy == {"linear": 2 * len(LINEAR_LAYERS), "mm": 0, "torch": 0}


@operators
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_the_patched_block_under_torch_compile(spy, backend):
    model, prompt, step = block(), tokens(128), tokens(1, seed=2)
    torch._dynamo.reset()
    with torch.no_grad():
        want = prefill_and_decode(model, prompt, step)
        with gemmtune.patched(model):
            # fullgraph: the routed forwards trace into torch.ops.gemmtune.linear_or_torch
            compiled = torch.compile(model, fullgraph=True, backend=backend)
            prefill_and_decode(compiled, prompt, step)  # compiles
            reset(spy)
            got = prefill_and_decode(compiled, prompt, step)
    for g, w in zip(got, want):
        close(g, w)
    # The compiled graphs call the operator, whose body is the routed call's.
    assert spy == {"linear": 2 * len(LINEAR_LAYERS), "mm": 0, "torch": 0}
    torch._dynamo.reset()


def test_patched_decode_in_cuda_graph_capture_and_replay(spy):
    model, prompt = block(), tokens(128)
    steps = [tokens(1, seed=seed) for seed in (2, 3)]
    with torch.inference_mode():
        _, past_k, past_v = model(prompt)
        wants = [model(step, past_k, past_v)[0] for step in steps]
        handle = gemmtune.patch(model)
        static_step = steps[0].clone()
        # Warm up on a side stream, as torch asks: each problem planned, its kernel loaded.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                model(static_step, past_k, past_v)
        torch.cuda.current_stream().wait_stream(side)
        reset(spy)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = model(static_step, past_k, past_v)[0]
        assert spy == {"linear": len(LINEAR_LAYERS), "mm": 0, "torch": 0}  # captured: gemmtune's
        for step, want in zip(steps, wants):
            static_step.copy_(step)
            graph.replay()
            torch.cuda.synchronize()
            close(static_out, want)
        assert spy["linear"] == len(LINEAR_LAYERS)  # a replay runs no Python
        handle.undo()


@operators
def test_gradients_through_the_patched_block(spy):
    model, prompt = block(torch.float32, d_model=128, heads=4, d_ff=352), tokens(
        16, torch.float32, d_model=128)
    prompt.requires_grad_(True)
    inputs = [prompt, *model.parameters()]

    def gradients():
        return torch.autograd.grad(model(prompt)[0].square().sum(), inputs)

    wants = gradients()
    with gemmtune.patched(model):
        got = gradients()
    for g, w in zip(got, wants):
        close(g, w, F32_TOLERANCE)
    # Forward through torch.ops.gemmtune.linear_or_torch, backward through .mm_or_torch: all
    # gemmtune's.
    assert spy["linear"] == len(LINEAR_LAYERS) and spy["mm"] > 0 and spy["torch"] == 0


class Functional(nn.Module):
    """Weights as parameters, used through F.linear and torch.matmul in forward."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(192, 256, device="cuda", dtype=torch.bfloat16) / 16)
        self.m = nn.Parameter(torch.randn(192, 64, device="cuda", dtype=torch.bfloat16) / 16)

    def forward(self, x):
        h = F.linear(x, self.w)
        return torch.matmul(h, self.m), torch.matmul(h.flatten(0, 1), self.m)


def test_torch_matmul_and_f_linear_routed_by_patch_and_patched(spy):
    F_linear, matmul = F.linear, torch.matmul
    model, x = Functional(), tokens(5, d_model=256)
    with torch.inference_mode():
        want = model(x)
        handle = gemmtune.patch(model, functions=True)
        assert handle.functions and handle.layers == ()
        got = model(x)
        handle.undo()
        assert F.linear is F_linear and torch.matmul is matmul
        for g, w in zip(got, want):
            close(g, w)
        # F.linear, then the 3-D @ 2-D matmul as a linear; the 2-D @ 2-D one as an mm.
        assert spy == {"linear": 2, "mm": 1, "torch": 0}
        reset(spy)
        a, b = tokens(33, d_model=96)[0], tokens(96, d_model=80)[0]
        with gemmtune.patched():
            close(torch.matmul(a, b), a @ b)
            close(F.linear(a, b.t()), a @ b)
        assert F.linear is F_linear and torch.matmul is matmul
        assert spy == {"linear": 1, "mm": 1, "torch": 0}


def test_what_gemmtune_does_not_take_stays_with_torch(spy):
    x = tokens(16, d_model=256)[0]
    cases = {
        "float64": (nn.Linear(256, 64).to("cuda", torch.float64), x.double()),
        "on the CPU": (nn.Linear(256, 64), x.float().cpu()),
        "a float32 layer under autocast": (nn.Linear(256, 64).cuda(), x.float()),
    }
    with torch.inference_mode():
        for case, (layer, inputs) in cases.items():
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled="autocast" in case):
                want = layer(inputs)
                with gemmtune.patched(layer):
                    got = layer(inputs)
            assert got.dtype == want.dtype and torch.equal(got, want), case
        assert spy == {"linear": 0, "mm": 0, "torch": len(cases)}
        layer = nn.Linear(128, 64, bias=False).to("cuda", torch.bfloat16)
        with pytest.raises(RuntimeError) as unpatched:
            layer(x.float()[:, :128])  # mixed dtypes: torch's error, patched or not
        with gemmtune.patched(layer), pytest.raises(RuntimeError) as patched:
            layer(x.float()[:, :128])
        assert str(patched.value) == str(unpatched.value)


def test_a_problem_the_library_refuses_goes_to_torch_from_then_on(spy):
    layer = nn.Linear(128, 64, bias=False).to("cuda", torch.bfloat16)
    w = layer.weight.detach()  # the weight without autograd: gemmtune.linear's errors directly
    x = tokens(16, d_model=256)[0][:, ::2]  # no unit stride: gemmtune refuses, F.linear copes
    with pytest.raises(gemmtune.Error, match="unit stride"):
        gemmtune.linear(x, w)
    with torch.inference_mode():
        want = layer(x)
        with gemmtune.patched(layer):
            for _ in range(2):
                close(layer(x), want, 1e-6)
    assert spy == {"linear": 2, "mm": 0, "torch": 2}
    key = _torch._linear_key(x, w, None, None, "identity")
    assert _torch._PLANS[key] is _torch._REFUSED  # offered to the library once
    with pytest.raises(gemmtune.Error, match="unit stride"):
        gemmtune.linear(x, w)  # gemmtune.linear still says why
