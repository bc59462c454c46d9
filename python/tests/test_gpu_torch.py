"""On the GPU (marked gpu; skipped without torch or CUDA): gemmtune against torch.matmul and
torch.nn.functional.linear for bf16, f16 and f32; transposed, padded and misaligned views,
batch dimensions, bias, alpha/beta; the current stream; the custom operators under
torch.compile and autograd; CuPy and DLPack operands."""
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
SHAPES = [(64, 64, 64), (257, 129, 191), (1, 1024, 512), (512, 768, 1024)]  # m, k, n


def close(got, want, dtype):
    want = want.float()
    error = (got.float() - want).abs().max() / want.abs().max().clamp_min(1e-6)
    assert error.item() < TOLERANCE[dtype], f"relative error {error.item():.2e}"


def rand(*shape, dtype, **kw):
    return torch.randn(*shape, device="cuda", **kw).to(dtype)


def view(m, n, how, dtype):
    """An m x n matrix laid out as `how` says."""
    if how == "row-major":
        return rand(m, n, dtype=dtype)
    if how == "transposed":
        return rand(n, m, dtype=dtype).t()
    if how == "padded":
        return rand(m, n + 8, dtype=dtype)[:, :n]
    if how == "misaligned":  # starts one element into its buffer: not 16-byte aligned
        return rand(m * n + 1, dtype=dtype)[1:].view(m, n)
    raise ValueError(how)


LAYOUTS = ["row-major", "transposed", "padded", "misaligned"]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_matmul_matches_torch(dtype, m, k, n):
    a, b = rand(m, k, dtype=dtype), rand(k, n, dtype=dtype)
    close(gemmtune.matmul(a, b), torch.matmul(a, b), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("a_layout", LAYOUTS)
@pytest.mark.parametrize("b_layout", LAYOUTS)
def test_every_view_is_read_in_place(dtype, a_layout, b_layout):
    a, b = view(191, 129, a_layout, dtype), view(129, 257, b_layout, dtype)
    close(gemmtune.matmul(a, b), torch.matmul(a, b), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_out_alpha_beta_and_a_column_major_out(dtype):
    a, b = rand(130, 70, dtype=dtype), rand(70, 90, dtype=dtype)
    for out in (rand(130, 90, dtype=dtype), rand(90, 130, dtype=dtype).t()):
        c0 = out.clone()
        result = gemmtune.matmul(a, b, out=out, alpha=0.5, beta=-2.0)
        assert result is out
        close(out, 0.5 * (a.float() @ b.float()) - 2.0 * c0.float(), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_linear_matches_f_linear_with_batch_dimensions_and_bias(dtype):
    x, w, bias = rand(2, 3, 5, 1024, dtype=dtype), rand(768, 1024, dtype=dtype), rand(768, dtype=dtype)
    close(gemmtune.linear(x, w), F.linear(x, w), dtype)
    close(gemmtune.linear(x, w, bias), F.linear(x, w, bias), dtype)
    assert gemmtune.linear(x, w).shape == (2, 3, 5, 768)
    xt = x.transpose(0, 1)  # leading dimensions that do not flatten: copied, still right
    close(gemmtune.linear(xt, w), F.linear(xt, w), dtype)
    close(gemmtune.linear(x[0, 0, 0], w), F.linear(x[0, 0, 0], w), dtype)  # 1-D x
    assert gemmtune.problem_linear(x, w) == gemmtune.Problem(
        {torch.bfloat16: "bf16", torch.float16: "f16", torch.float32: "f32"}[dtype],
        "tn", 768, 30, 1024, 1024, 1024, 768)


def test_empty_products():
    a, b = rand(0, 64, dtype=torch.bfloat16), rand(64, 32, dtype=torch.bfloat16)
    assert gemmtune.matmul(a, b).shape == (0, 32)
    out = gemmtune.matmul(rand(8, 0, dtype=torch.float32), rand(0, 4, dtype=torch.float32))
    assert out.shape == (8, 4) and not out.any()


def test_bad_tensors_are_errors():
    a = rand(64, 64, dtype=torch.bfloat16)
    with pytest.raises(gemmtune.Error, match="b is not on a CUDA GPU"):
        gemmtune.matmul(a, torch.ones(64, 64, dtype=torch.bfloat16))
    with pytest.raises(gemmtune.Error, match="float32, float16, bfloat16") as e:
        gemmtune.matmul(a.double(), a.double())
    assert e.value.code == "unsupported"
    with pytest.raises(gemmtune.Error, match="unit stride"):
        gemmtune.matmul(rand(64, 128, dtype=torch.bfloat16)[:, ::2], a)
    with pytest.raises(gemmtune.Error, match="a's columns must equal b's rows"):
        gemmtune.matmul(a, rand(32, 64, dtype=torch.bfloat16))


def run_or_refused(call, types):
    """call() where a kernel family runs `types` on this GPU; else None, after checking that the
    refusal is the library's 'unsupported' naming the types (not a crash, not another error)."""
    try:
        return call()
    except gemmtune.Error as e:
        assert e.code == "unsupported", e
        assert types in str(e), e
        return None


MIXED = [(torch.bfloat16, torch.float16), (torch.float16, torch.float32)]
FLOAT8 = []
if hasattr(torch, "float8_e4m3fn"):
    FLOAT8 = [(torch.bfloat16, torch.float8_e4m3fn), (torch.float8_e4m3fn, torch.float8_e5m2)]


@pytest.mark.parametrize("x_dtype,w_dtype", MIXED, ids=str)
def test_mixed_dtypes_run_right_or_are_refused_by_name(x_dtype, w_dtype):
    x, w = rand(70, 128, dtype=x_dtype), rand(96, 128, dtype=w_dtype)
    p = gemmtune.problem_linear(x, w)
    result = gemmtune.result_dtype(p.types.b, p.types.a)  # x is the GEMM's B (row-major)
    assert p.types.d == result and p.dtype.startswith(f"{p.types.a}*{p.types.b}->")
    for _ in range(2):  # the first call plans, the second takes the plan
        y = run_or_refused(lambda: gemmtune.linear(x, w), p.dtype)
        if y is not None:
            want = F.linear(x.float(), w.float())
            assert y.dtype == (x_dtype if x_dtype in DTYPES else torch.bfloat16)
            close(y, want, y.dtype)
    y = run_or_refused(lambda: gemmtune.linear(x, w, out_dtype=torch.float32),
                       p.dtype.split("->")[0] + "->f32")
    if y is not None:
        assert y.dtype == torch.float32
        close(y, F.linear(x.float(), w.float()), torch.bfloat16)


@pytest.mark.parametrize("x_dtype,w_dtype", FLOAT8, ids=str)
def test_float8_without_scales_is_refused_with_the_librarys_message(x_dtype, w_dtype):
    # Float8 multiplies float8 only, and with scales: gemmtune.scaled_mm's, not linear's.
    x, w = rand(70, 128, dtype=x_dtype), rand(96, 128, dtype=w_dtype)
    p = gemmtune.problem_linear(x, w)
    want = (f"A is {p.types.a} but B is {p.types.b}: float8 multiplies float8"
            if "bf16" in (p.types.a, p.types.b) else f"{p.dtype} operands take scales")
    for _ in range(2):
        with pytest.raises(gemmtune.Error) as e:
            gemmtune.linear(x, w)
        assert e.value.code == "invalid_argument"
        assert str(e.value).startswith(want) and "gemmtune.scaled_mm" in str(e.value)


def test_out_dtype_of_uniform_operands():
    a, b = rand(64, 96, dtype=torch.bfloat16), rand(96, 80, dtype=torch.bfloat16)
    assert gemmtune.problem(a, b, out_dtype="f32").dtype == "bf16*bf16->f32"
    out = run_or_refused(lambda: gemmtune.matmul(a, b, out_dtype=torch.float32),
                         "bf16*bf16->f32")
    if out is not None:
        assert out.dtype == torch.float32
        close(out, a.float() @ b.float(), torch.bfloat16)
    with pytest.raises(gemmtune.Error, match="out is bf16 but out_dtype is f32"):
        gemmtune.matmul(a, b, out=torch.empty(64, 80, dtype=torch.bfloat16, device="cuda"),
                        out_dtype=torch.float32)


def test_runs_on_the_current_torch_stream():
    a, b, a2 = (rand(1024, 1024, dtype=torch.bfloat16) for _ in range(3))
    torch.cuda.synchronize()
    side = torch.cuda.Stream()  # does not wait for the default stream
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)  # keep the stream busy, then change a
        a.copy_(a2)
        out = gemmtune.matmul(a, b)  # on another stream it would read the old a
    side.synchronize()
    close(out, a2.float() @ b.float(), torch.bfloat16)


def test_select_says_which_kernel_and_why():
    a, b = rand(300, 200, dtype=torch.bfloat16), rand(200, 100, dtype=torch.bfloat16)
    s = gemmtune.select(a, b)
    assert s.source in ("tuned", "other_version", "nearest", "fallback")
    assert s.kernel.startswith("gemm_") and s.family and isinstance(s.config, dict)
    assert s.device["name"] == torch.cuda.get_device_name()
    assert gemmtune.select_linear(a, b.t()).kernel == s.kernel  # the same GEMM


def test_the_current_device_is_left_as_it_was():
    before = torch.cuda.current_device()
    gemmtune.matmul(rand(64, 64, dtype=torch.float32), rand(64, 64, dtype=torch.float32))
    assert torch.cuda.current_device() == before


@pytest.mark.skipif(not gemmtune.torch_operators, reason="torch < 2.4: no torch.library.custom_op")
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_operators_under_torch_compile(backend):
    def block(x, w1, w2, w3):
        h = gemmtune.linear(torch.relu(gemmtune.linear(x, w1)), w2)
        return h + torch.ops.gemmtune.mm(x.flatten(0, 1), w3).view_as(h)  # mm: 2-D operands

    x = rand(4, 33, 256, dtype=torch.bfloat16)
    w1, w2 = rand(512, 256, dtype=torch.bfloat16), rand(256, 512, dtype=torch.bfloat16)
    w3 = rand(256, 256, dtype=torch.bfloat16)
    compiled = torch.compile(block, fullgraph=True, backend=backend)
    want = F.linear(torch.relu(F.linear(x, w1)), w2) + (x.flatten(0, 1) @ w3).view_as(x)
    close(compiled(x, w1, w2, w3), want, torch.bfloat16)
    close(compiled(x[:, :7], w1, w2, w3), want[:, :7], torch.bfloat16)  # another shape


@pytest.mark.skipif(not gemmtune.torch_operators, reason="torch < 2.4: no torch.library.custom_op")
def test_autograd_through_the_operators():
    x = rand(3, 50, 64, dtype=torch.float32, requires_grad=True)
    w = rand(96, 64, dtype=torch.float32, requires_grad=True)
    bias = rand(96, dtype=torch.float32, requires_grad=True)
    a, b = rand(40, 64, dtype=torch.float32, requires_grad=True), rand(64, 30, dtype=torch.float32, requires_grad=True)

    def loss(linear, mm):
        return linear(x, w, bias).square().sum() + mm(a, b).sin().sum()
    grads = torch.autograd.grad(loss(gemmtune.linear, gemmtune.matmul), (x, w, bias, a, b))
    wants = torch.autograd.grad(loss(F.linear, torch.matmul), (x, w, bias, a, b))
    for got, want in zip(grads, wants):
        close(got, want, torch.float32)


def test_cupy_and_dlpack_operands():
    cupy = pytest.importorskip("cupy")
    a = cupy.random.standard_normal((257, 129), dtype=cupy.float32)
    b = cupy.random.standard_normal((129, 191), dtype=cupy.float32)
    out = gemmtune.matmul(a, b.T.copy().T)  # a CuPy result; b a transposed view
    assert isinstance(out, cupy.ndarray)
    close(torch.as_tensor(out, device="cuda"), torch.as_tensor(a @ b, device="cuda"), torch.float32)

    class OnlyDLPack:  # a producer that offers nothing but DLPack
        def __init__(self, tensor):
            self.tensor = tensor

        def __dlpack__(self, stream=None):
            return self.tensor.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return self.tensor.__dlpack_device__()

    x, y = rand(100, 64, dtype=torch.bfloat16), rand(64, 80, dtype=torch.bfloat16)
    result = torch.empty(100, 80, dtype=torch.bfloat16, device="cuda")
    gemmtune.matmul(OnlyDLPack(x), OnlyDLPack(y.t().contiguous().t()), out=OnlyDLPack(result))
    torch.cuda.synchronize()
    close(result, x.float() @ y.float(), torch.bfloat16)


@pytest.mark.parametrize("a_layout", LAYOUTS)
@pytest.mark.parametrize("b_layout", LAYOUTS)
def test_repeated_calls_take_the_planned_path_and_stay_right(a_layout, b_layout):
    # The first call of a dtype, shape and strides is checked and planned; the ones after it
    # reuse the plan (gemmtune._torch._PLANS). Both must compute the same, in place.
    dtype = torch.bfloat16
    a, b = view(63, 129, a_layout, dtype), view(129, 65, b_layout, dtype)
    want = torch.matmul(a, b)
    for _ in range(3):
        close(gemmtune.matmul(a, b), want, dtype)
        out = view(63, 65, "transposed", dtype)
        assert gemmtune.matmul(a, b, out=out) is out
        close(out, want, dtype)
    x, w, bias = rand(2, 7, 129, dtype=dtype), b.t(), rand(65, dtype=dtype)
    for _ in range(3):
        close(gemmtune.linear(x, w), F.linear(x, w), dtype)
        close(gemmtune.linear(x, w, bias), F.linear(x, w, bias), dtype)
        close(gemmtune.linear(x.transpose(0, 1), w), F.linear(x.transpose(0, 1), w), dtype)


def test_planned_calls_follow_the_current_stream_and_still_check_devices():
    a, b, a2 = (rand(1024, 1024, dtype=torch.bfloat16) for _ in range(3))
    gemmtune.matmul(a, b)  # planned on the default stream
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)
        a.copy_(a2)
        out = gemmtune.matmul(a, b)  # the same plan, on the side stream
    side.synchronize()
    close(out, a2.float() @ b.float(), torch.bfloat16)
    with pytest.raises(gemmtune.Error, match="b is not on a CUDA GPU"):
        gemmtune.matmul(a, b.cpu())
    with pytest.raises(gemmtune.Error, match="beta != 0 reads C"):
        gemmtune.matmul(a, b, beta=1.0)
