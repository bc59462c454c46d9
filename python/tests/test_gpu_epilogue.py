"""On the GPU (marked gpu; skipped without torch or CUDA): linear's bias and activation applied
by the kernel's store, against torch.nn.functional.linear and the activation in f32, for bf16,
f16 and f32; torch's names for the activations; biases the kernel cannot read as given; the
planned path; K = 0; the custom operator under torch.compile and autograd."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU visible to torch", allow_module_level=True)

import torch.nn.functional as F  # noqa: E402

import gemmtune  # noqa: E402

pytestmark = pytest.mark.gpu
torch.backends.cuda.matmul.allow_tf32 = False  # f32 references in full f32

DTYPES = [torch.bfloat16, torch.float16, torch.float32]
# Relative to the largest |reference|: one rounding of the output, and f32 accumulation order.
TOLERANCE = {torch.bfloat16: 2e-2, torch.float16: 4e-3, torch.float32: 1e-4}
ACTIVATIONS = {None: lambda t: t, "relu": F.relu, "gelu": F.gelu,
               "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu}


def close(got, want, dtype):
    want = want.float()
    error = (got.float() - want).abs().max() / want.abs().max().clamp_min(1e-6)
    assert error.item() < TOLERANCE[dtype], f"relative error {error.item():.2e}"


def rand(*shape, dtype, **kw):
    return torch.randn(*shape, device="cuda", **kw).to(dtype)


def reference(x, w, bias, activation):
    """act(x @ w.T + bias) in f32, from the operands as given."""
    y = F.linear(x.float(), w.float(), None if bias is None else bias.float())
    return ACTIVATIONS[activation](y)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("activation", list(ACTIVATIONS), ids=str)
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no_bias"])
def test_linear_matches_torch(dtype, activation, with_bias):
    # 2 x 3 x 5 tokens, odd features: the store's bounds and the bias's along M.
    x, w = rand(2, 3, 5, 1000, dtype=dtype), rand(771, 1000, dtype=dtype)
    bias = rand(771, dtype=dtype) if with_bias else None
    for _ in range(2):  # the first call plans, the second takes the plan
        y = gemmtune.linear(x, w, bias, activation=activation)
        assert y.shape == (2, 3, 5, 771) and y.dtype == dtype
        close(y, reference(x, w, bias, activation), dtype)


@pytest.mark.parametrize("m,k,n", [(1, 64, 64), (257, 191, 129), (512, 1024, 768)])
def test_every_activation_with_a_bias_at_several_shapes(m, k, n):
    dtype = torch.bfloat16
    x, w, bias = rand(m, k, dtype=dtype), rand(n, k, dtype=dtype), rand(n, dtype=dtype)
    for activation in ACTIVATIONS:
        close(gemmtune.linear(x, w, bias, activation=activation),
              reference(x, w, bias, activation), dtype)


def test_torchs_names_for_the_activations():
    x, w, bias = (rand(64, 256, dtype=torch.bfloat16), rand(96, 256, dtype=torch.bfloat16),
                  rand(96, dtype=torch.bfloat16))
    want = reference(x, w, bias, "gelu_tanh")
    for kw in ({"activation": "gelu", "approximate": "tanh"},
               {"activation": torch.nn.GELU(approximate="tanh")}, {"activation": "gelu_tanh"}):
        close(gemmtune.linear(x, w, bias, **kw), want, torch.bfloat16)
    close(gemmtune.linear(x, w, bias, activation=torch.nn.SiLU()), reference(x, w, bias, "silu"),
          torch.bfloat16)
    close(gemmtune.linear(x, w, bias, activation=F.relu), reference(x, w, bias, "relu"),
          torch.bfloat16)
    close(gemmtune.linear(x, w, bias, activation=torch.nn.GELU()), reference(x, w, bias, "gelu"),
          torch.bfloat16)


def test_the_bias_goes_to_the_kernel_not_into_the_output():
    x, w, bias = (rand(70, 128, dtype=torch.bfloat16), rand(96, 128, dtype=torch.bfloat16),
                  rand(96, dtype=torch.bfloat16))
    p = gemmtune.problem_linear(x, w, bias, activation="gelu")
    assert (p.epilogue, p.reads_c, p.m) == ("bias,gelu", False, 96)  # along M: out_features
    s = gemmtune.select_linear(x, w, bias, activation="gelu")
    assert s.kernel.endswith("_bias_gelu"), s.kernel
    assert gemmtune.select_linear(x, w, activation="silu").kernel.endswith("_silu")
    assert not gemmtune.select_linear(x, w).kernel.endswith(("_bias", "_silu", "_gelu"))


def test_biases_the_kernel_cannot_read_as_given_are_converted():
    x, w = rand(33, 128, dtype=torch.bfloat16), rand(80, 128, dtype=torch.bfloat16)
    strided = rand(160, dtype=torch.bfloat16)[::2]  # stride 2
    close(gemmtune.linear(x, w, strided, activation="relu"), reference(x, w, strided, "relu"),
          torch.bfloat16)
    f32_bias = rand(80, dtype=torch.float32)  # of another dtype than the result
    for _ in range(2):
        close(gemmtune.linear(x, w, f32_bias), reference(x, w, f32_bias, None), torch.bfloat16)
    try:  # bf16*bf16->f32: where a kernel family runs it on this GPU
        y = gemmtune.linear(x, w, f32_bias, activation="silu", out_dtype=torch.float32)
    except gemmtune.Error as e:
        assert e.code == "unsupported" and "bf16*bf16->f32" in str(e), e
        return
    assert y.dtype == torch.float32
    close(y, reference(x, w, f32_bias, "silu"), torch.bfloat16)


def test_planned_calls_keep_their_activations_apart():
    # The same tensors with each activation in turn, twice: each planned call runs its own.
    x, w, bias = (rand(4, 9, 256, dtype=torch.float16), rand(300, 256, dtype=torch.float16),
                  rand(300, dtype=torch.float16))
    for _ in range(2):
        for activation in ACTIVATIONS:
            close(gemmtune.linear(x, w, bias, activation=activation),
                  reference(x, w, bias, activation), torch.float16)
            close(gemmtune.linear(x, w, activation=activation), reference(x, w, None, activation),
                  torch.float16)


def test_planned_calls_follow_the_current_stream_with_a_bias():
    x, w, bias, bias2 = (rand(512, 1024, dtype=torch.bfloat16),
                         rand(1024, 1024, dtype=torch.bfloat16),
                         rand(1024, dtype=torch.bfloat16), rand(1024, dtype=torch.bfloat16))
    gemmtune.linear(x, w, bias, activation="gelu")  # planned on the default stream
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)  # keep the stream busy, then change the bias
        bias.copy_(bias2)
        y = gemmtune.linear(x, w, bias, activation="gelu")  # reads the new bias on this stream
    side.synchronize()
    close(y, reference(x, w, bias2, "gelu"), torch.bfloat16)


def test_k_zero_is_the_activation_of_the_bias():
    x, w = rand(5, 0, dtype=torch.float32), rand(7, 0, dtype=torch.float32)
    bias = rand(7, dtype=torch.float32)
    y = gemmtune.linear(x, w, bias, activation="silu")
    close(y, F.silu(bias).expand(5, 7), torch.float32)
    assert not gemmtune.linear(x, w, activation="gelu").any()


@pytest.mark.skipif(not gemmtune.torch_operators, reason="torch < 2.4: no torch.library.custom_op")
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_the_operator_under_torch_compile(backend):
    def mlp(x, w1, b1, w2, b2):
        h = gemmtune.linear(x, w1, b1, activation="gelu", approximate="tanh")
        return gemmtune.linear(h, w2, b2, activation="silu")

    x = rand(4, 33, 256, dtype=torch.bfloat16)
    w1, b1 = rand(512, 256, dtype=torch.bfloat16), rand(512, dtype=torch.bfloat16)
    w2, b2 = rand(256, 512, dtype=torch.bfloat16), rand(256, dtype=torch.bfloat16)
    compiled = torch.compile(mlp, fullgraph=True, backend=backend)
    h = F.gelu(F.linear(x.float(), w1.float(), b1.float()), approximate="tanh").bfloat16()
    want = F.silu(F.linear(h.float(), w2.float(), b2.float()))
    close(compiled(x, w1, b1, w2, b2), want, torch.bfloat16)
    close(compiled(x[:, :7], w1, b1, w2, b2), want[:, :7], torch.bfloat16)  # another shape


@pytest.mark.skipif(not gemmtune.torch_operators, reason="torch < 2.4: no torch.library.custom_op")
@pytest.mark.parametrize("activation", list(ACTIVATIONS), ids=str)
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no_bias"])
def test_autograd_through_each_activation(activation, with_bias):
    x = rand(3, 50, 64, dtype=torch.float32, requires_grad=True)
    w = rand(96, 64, dtype=torch.float32, requires_grad=True)
    bias = rand(96, dtype=torch.float32, requires_grad=True) if with_bias else None
    inputs = (x, w, bias) if with_bias else (x, w)

    def loss(y):
        return (y * torch.linspace(-1, 1, 96, device="cuda")).square().sum()
    grads = torch.autograd.grad(loss(gemmtune.linear(x, w, bias, activation=activation)), inputs)
    wants = torch.autograd.grad(loss(reference(x, w, bias, activation)), inputs)
    for got, want in zip(grads, wants):
        close(got, want, torch.float32)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh", "silu"])
def test_the_pre_activation_comes_back_beside_the_result(dtype, activation):
    x, w, bias = rand(2, 37, 1000, dtype=dtype), rand(771, 1000, dtype=dtype), rand(771, dtype=dtype)
    y, z = gemmtune.linear(x, w, bias, activation=activation, return_pre_activation=True)
    assert y.shape == z.shape == (2, 37, 771) and y.dtype == z.dtype == dtype
    assert y.data_ptr() != z.data_ptr()
    close(z, reference(x, w, bias, None), dtype)
    close(y, reference(x, w, bias, activation), dtype)
    close(y, ACTIVATIONS[activation](z.float()), dtype)  # the same pre-activation
    with pytest.raises(gemmtune.Error, match="return_pre_activation needs an activation"):
        gemmtune.linear(x, w, bias, return_pre_activation=True)


@pytest.mark.skipif(not gemmtune.torch_operators, reason="torch < 2.4: no torch.library.custom_op")
def test_gradients_through_the_result_and_its_pre_activation():
    x = rand(3, 50, 64, dtype=torch.float32, requires_grad=True)
    w = rand(96, 64, dtype=torch.float32, requires_grad=True)
    bias = rand(96, dtype=torch.float32, requires_grad=True)
    y, z = gemmtune.linear(x, w, bias, activation="gelu", return_pre_activation=True)
    grads = torch.autograd.grad(y.square().sum() + (z * 0.5).sum(), (x, w, bias))
    z_ref = F.linear(x, w, bias)
    wants = torch.autograd.grad(F.gelu(z_ref).square().sum() + (z_ref * 0.5).sum(), (x, w, bias))
    for got, want in zip(grads, wants):
        close(got, want, torch.float32)


@pytest.mark.skipif(not gemmtune.torch_operators, reason="torch < 2.4: no torch.library.custom_op")
def test_the_kept_pre_activation_under_torch_compile():
    def layer(x, w, b):
        y, z = gemmtune.linear(x, w, b, activation="silu", return_pre_activation=True)
        return y + z

    x, w, b = rand(65, 256, dtype=torch.bfloat16), rand(384, 256, dtype=torch.bfloat16), \
        rand(384, dtype=torch.bfloat16)
    z = F.linear(x.float(), w.float(), b.float())
    close(torch.compile(layer, fullgraph=True, backend="aot_eager")(x, w, b), F.silu(z) + z,
          torch.bfloat16)


def test_cupy_operands_with_a_bias():
    cupy = pytest.importorskip("cupy")
    x = cupy.random.standard_normal((65, 128), dtype=cupy.float32)
    w = cupy.random.standard_normal((96, 128), dtype=cupy.float32)
    bias = cupy.random.standard_normal((192,), dtype=cupy.float32)[::2]  # converted: stride 2
    y = gemmtune.linear(x, w, bias, activation="relu")
    assert isinstance(y, cupy.ndarray)
    got, want = (torch.as_tensor(t, device="cuda") for t in (y, cupy.maximum(x @ w.T + bias, 0)))
    close(got, want, torch.float32)
