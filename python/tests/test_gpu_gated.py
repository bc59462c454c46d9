"""On the GPU (marked gpu; skipped without torch, CUDA or a GPU of sm_80 or later, those with
gated kernels: wgmma_sm90's on Hopper, mma_sm80's elsewhere): gated_linear against torch's
F.linear, then act(g) * u of its two parts (halves: chunk(2, -1); interleaved: the even and odd
features), bf16 and f16, decode (1, 8, 16 rows) and prefill (512 rows) at in = 4096, I = 2048,
with and without a bias, both layouts, every activation; the planned path; K = 0; the custom
operator under torch.compile."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU visible to torch", allow_module_level=True)
if torch.cuda.get_device_capability() < (8, 0):
    pytest.skip("gated kernels are wgmma_sm90's and mma_sm80's (sm_80 or later)",
                allow_module_level=True)

import torch.nn.functional as F  # noqa: E402

import gemmtune  # noqa: E402

pytestmark = pytest.mark.gpu

DTYPES = [torch.bfloat16, torch.float16]
# Relative to the largest |reference|: one rounding of the output, and f32 accumulation order.
TOLERANCE = {torch.bfloat16: 2e-2, torch.float16: 4e-3}
ACTIVATIONS = {"silu": F.silu, "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
               "relu": F.relu}
IN, INTER = 4096, 2048


def close(got, want, dtype):
    want = want.float()
    error = (got.float() - want).abs().max() / want.abs().max().clamp_min(1e-6)
    assert error.item() < TOLERANCE[dtype], f"relative error {error.item():.2e}"


def rand(*shape, dtype, scale=1.0):
    return (torch.randn(*shape, device="cuda") * scale).to(dtype)


def weights(dtype, with_bias, inter=INTER, features=IN):
    # Scaled so that the sums stay near 1: f16's products never overflow.
    w = rand(2 * inter, features, dtype=dtype, scale=features ** -0.5)
    return w, rand(2 * inter, dtype=dtype) if with_bias else None


def reference(x, w, bias, activation="silu", layout="halves"):
    """act(g) * u of F.linear(x, w, bias) in f32, from the operands as given."""
    z = F.linear(x.float(), w.float(), None if bias is None else bias.float())
    g, u = z.chunk(2, -1) if layout == "halves" else (z[..., 0::2], z[..., 1::2])
    return ACTIVATIONS[activation](g) * u


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rows", [1, 8, 16, 512])
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("layout", ["halves", "interleaved"])
def test_swiglu_matches_torch(dtype, rows, with_bias, layout):
    x = rand(rows, IN, dtype=dtype)
    w, bias = weights(dtype, with_bias)
    for _ in range(2):  # the first call plans, the second takes the plan
        y = gemmtune.gated_linear(x, w, bias, layout=layout)
        assert y.shape == (rows, INTER) and y.dtype == dtype
        close(y, reference(x, w, bias, "silu", layout), dtype)


def test_halves_are_hugging_faces_gate_and_up_projections():
    dtype = torch.bfloat16
    x = rand(2, 8, IN, dtype=dtype)  # leading batch dimensions
    w_gate, w_up = rand(INTER, IN, dtype=dtype, scale=IN ** -0.5), rand(INTER, IN, dtype=dtype,
                                                                         scale=IN ** -0.5)
    y = gemmtune.gated_linear(x, torch.cat((w_gate, w_up)))
    assert y.shape == (2, 8, INTER)
    close(y, F.silu(F.linear(x.float(), w_gate.float())) * F.linear(x.float(), w_up.float()),
          dtype)


@pytest.mark.parametrize("activation", ["swiglu", "geglu", "geglu_tanh", "reglu", "gelu", "relu"])
@pytest.mark.parametrize("layout", ["halves", "interleaved"])
def test_every_activation_with_a_bias(activation, layout):
    dtype = torch.bfloat16
    x = rand(37, 1000, dtype=dtype)  # odd rows and features: the store's bounds
    w, bias = weights(dtype, True, inter=300, features=1000)
    names = {"swiglu": "silu", "geglu": "gelu", "geglu_tanh": "gelu_tanh", "reglu": "relu"}
    y = gemmtune.gated_linear(x, w, bias, activation=activation, layout=layout)
    close(y, reference(x, w, bias, names.get(activation, activation), layout), dtype)


def test_a_bias_of_another_dtype_and_out_dtype():
    x = rand(16, IN, dtype=torch.bfloat16)
    w, _ = weights(torch.bfloat16, False)
    bias = rand(2 * INTER, dtype=torch.float32)  # converted to the result's dtype
    close(gemmtune.gated_linear(x, w, bias), reference(x, w, bias.bfloat16()), torch.bfloat16)
    # The gated kernels (wgmma_sm90, mma_sm80) take each operand of one type: an f32 result of
    # bf16 inputs is refused, saying so, rather than computed some other way.
    with pytest.raises(gemmtune.Error, match="no kernel family supports"):
        gemmtune.gated_linear(x, w, out_dtype=torch.float32)


def test_the_selection_names_the_gated_epilogue():
    x = rand(8, IN, dtype=torch.bfloat16)
    w, bias = weights(torch.bfloat16, True)
    s = gemmtune.select_gated_linear(x, w, bias, layout="interleaved")
    hopper = torch.cuda.get_device_capability() >= (9, 0)
    assert s.family == ("wgmma_sm90" if hopper else "mma_sm80")
    p = gemmtune.problem_gated_linear(x, w, bias, layout="interleaved")
    assert (p.m, p.n, p.k, p.ldc, p.epilogue) == (2 * INTER, 8, IN, INTER,
                                                  "bias,swiglu,interleaved")


def test_no_features_and_no_rows():
    x = torch.empty(5, 0, device="cuda", dtype=torch.float16)
    w = torch.empty(14, 0, device="cuda", dtype=torch.float16)
    bias = rand(14, dtype=torch.float16)
    close(gemmtune.gated_linear(x, w, bias), F.silu(bias[:7].float()) * bias[7:].float(),
          torch.float16)
    assert not gemmtune.gated_linear(x, w).any()
    empty = gemmtune.gated_linear(torch.empty(0, 64, device="cuda", dtype=torch.bfloat16),
                                  rand(128, 64, dtype=torch.bfloat16))
    assert empty.shape == (0, 64)


@pytest.mark.skipif(not gemmtune.torch_operators, reason="torch < 2.4: no torch.library.custom_op")
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_the_operator_under_torch_compile(backend):
    def mlp(x, w_gate_up, b, w_down):
        h = gemmtune.gated_linear(x, w_gate_up, b, layout="interleaved")
        return gemmtune.linear(h, w_down)

    dtype = torch.bfloat16
    x = rand(4, 33, 1024, dtype=dtype)
    w, b = weights(dtype, True, inter=512, features=1024)
    w_down = rand(1024, 512, dtype=dtype, scale=512 ** -0.5)
    compiled = torch.compile(mlp, fullgraph=True, backend=backend)
    h = reference(x, w, b, "silu", "interleaved").to(dtype)
    want = F.linear(h.float(), w_down.float())
    close(compiled(x, w, b, w_down), want, dtype)
    close(compiled(x[:, :7], w, b, w_down), want[:, :7], dtype)  # another shape
