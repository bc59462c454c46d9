"""scaled_mm's torch front end without a GPU (skipped without torch or its float8 dtypes):
problem_scaled_mm of torch tensors on any device (use_fast_accum and float32 outputs included),
the errors torch tensors get, and the fake implementation of torch.ops.gemmtune.scaled_mm that
torch.compile traces with."""
import pytest

torch = pytest.importorskip("torch")
if not hasattr(torch, "float8_e4m3fn"):
    pytest.skip(f"torch {torch.__version__} has no float8 dtypes", allow_module_level=True)

import gemmtune  # noqa: E402
from gemmtune import Problem  # noqa: E402

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
M, N, K = 64, 2112, 7168  # a DeepSeek-V3 projection: ceil(K/128) = 56, ceil(N/128) = 17


def operands(device="meta", scaling="block", a_dtype=E4M3, b_dtype=E4M3):
    """a, b, scale_a, scale_b in torch._scaled_mm's layouts."""
    a = torch.empty(M, K, dtype=a_dtype, device=device)
    b = torch.empty(N, K, dtype=b_dtype, device=device).t()  # W.t(): column-major (K, N)
    if scaling == "tensor":
        return a, b, torch.ones((), device=device), torch.ones(1, device=device)
    if scaling == "row":
        return a, b, torch.ones(M, 1, device=device), torch.ones(1, N, device=device)
    # Both outer-dim-major, as torch wants them.
    return (a, b, torch.ones(56, M, device=device).t(), torch.ones(17, 56, device=device).t())


def test_problem_of_tensors_on_the_meta_device():
    a, b, sa, sb = operands()
    assert sa.stride() == (1, M) and sb.stride() == (1, 56)
    assert gemmtune.problem_scaled_mm(a, b, sa, sb) == Problem(
        "e4m3*e4m3->bf16", "tn", N, M, K, K, K, N, False, "block")
    p = gemmtune.problem_scaled_mm(*operands(scaling="row", b_dtype=E5M2),
                                   out_dtype=torch.float16,
                                   bias=torch.empty(N, dtype=torch.float16, device="meta"))
    assert p == Problem("e5m2*e4m3->f16", "tn", N, M, K, K, K, N, True, "row")
    assert p.shape_line() == "2112 64 7168 e5m2*e4m3->f16 tn scaling=row beta=1"


@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
def test_use_fast_accum_and_a_float32_output_on_the_meta_device(scaling):
    fast = gemmtune.problem_scaled_mm(*operands(scaling=scaling), use_fast_accum=True)
    want = "precise" if scaling == "block" else "fast"  # block scales promote already
    assert fast == Problem("e4m3*e4m3->bf16", "tn", N, M, K, K, K, N, False, scaling, want)
    assert gemmtune.problem_scaled_mm(*operands(scaling=scaling)).accumulation == "precise"
    # A float32 output is planned as torch's is; whether it runs is the library's answer.
    f32 = gemmtune.problem_scaled_mm(*operands(scaling=scaling), out_dtype=torch.float32,
                                     use_fast_accum=True)
    assert (f32.dtype, f32.accumulation) == ("e4m3*e4m3->f32", want)


def test_errors_of_torch_tensors():
    a, b, sa, sb = operands(device="cpu", scaling="tensor")
    with pytest.raises(ValueError, match=r"^a is not on a CUDA GPU: scaled_mm multiplies tensors "
                                         r"in GPU memory"):
        gemmtune.scaled_mm(a, b, sa, sb)
    with pytest.raises(TypeError, match=r"^scale_a has dtype float64: scales are float32$"):
        gemmtune.scaled_mm(a, b, sa.double(), sb)
    with pytest.raises(TypeError, match=r"^a has dtype bfloat16: scaled_mm multiplies float8"):
        gemmtune.scaled_mm(a.to(torch.bfloat16), b, sa, sb)
    with pytest.raises(TypeError, match=r"^scale_b is a float: scaled_mm takes torch tensors$"):
        gemmtune.scaled_mm(a, b, sa, 1.0)
    # torch._scaled_mm's fifth argument is the bias; scaled_mm's is out_dtype.
    with pytest.raises(TypeError, match=r"^out_dtype is a Tensor: scaled_mm's fifth argument is "
                                        r"out_dtype \(torch._scaled_mm's is bias: pass bias=...\)"):
        gemmtune.scaled_mm(a, b, sa, sb, torch.empty(N, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match=r"^out_dtype is float64: scaled_mm writes bfloat16"):
        gemmtune.scaled_mm(a, b, sa, sb, out_dtype=torch.float64)
    with pytest.raises(ValueError, match=r"^b must be column-major: \(7168, 2112\) with stride 1 "
                                         r"along K"):
        gemmtune.scaled_mm(a, b.contiguous(), sa, sb)
    with pytest.raises(gemmtune.Error):  # every one is a gemmtune.Error too
        gemmtune.scaled_mm(a, b, sa, sb)


@pytest.mark.skipif(not gemmtune.torch_operators, reason="torch < 2.4: no torch.library.custom_op")
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_the_fake_implementation_gives_the_results_shape_and_dtype(out_dtype):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        a, b, sa, sb = operands(device="cpu")
        y = torch.ops.gemmtune.scaled_mm(a, b, sa, sb, out_dtype)
        assert (tuple(y.shape), y.dtype) == ((M, N), out_dtype)
        bias = torch.empty(N, dtype=out_dtype)
        y = torch.ops.gemmtune.scaled_mm(a, b, sa, sb, out_dtype, bias, True)
        assert (tuple(y.shape), y.dtype) == ((M, N), out_dtype)
        with pytest.raises(RuntimeError, match="a's columns != b's rows"):
            torch.ops.gemmtune.scaled_mm(a, b[:100], sa, sb, out_dtype)
    # Meta tensors take the same implementation.
    y = torch.ops.gemmtune.scaled_mm(*operands(), out_dtype)
    assert (y.device.type, tuple(y.shape), y.dtype) == ("meta", (M, N), out_dtype)
