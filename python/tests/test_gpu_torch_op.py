"""torch.ops.gemmtune_cpp.linear (python/native/gemmtune_torch.cpp, built by
tools/build_torch_op.py) on the GPU: nn.Linear's results, torch's own path for what gemmtune
does not take, and torch.compile. Skipped where the operator was not built."""

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

import gemmtune  # noqa: E402
from gemmtune import _library  # noqa: E402


@pytest.fixture(scope="module")
def op():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA")
    operator = gemmtune.cpp_linear_operator()
    if operator is None:
        pytest.skip(f"no {_library.beside_library('gemmtune_torch.so')}: "
                    "tools/build_torch_op.py builds it")
    return operator


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("shape", [(16, 4096, 4096), (2, 7, 384, 640), (1, 257, 96)])
def test_matches_linear(op, dtype, shape):
    torch.manual_seed(0)
    *lead, features, outputs = shape
    x = torch.randn(*lead, features, device="cuda", dtype=dtype)
    w = torch.randn(outputs, features, device="cuda", dtype=dtype) / features**0.5
    b = torch.randn(outputs, device="cuda", dtype=dtype)
    tolerance = 1e-2 if dtype == torch.float32 else 3e-2
    for bias in (None, b):
        y = op(x, w, bias)
        expected = torch.nn.functional.linear(x.float(), w.float(),
                                              None if bias is None else bias.float())
        assert y.shape == expected.shape and y.dtype == dtype
        torch.testing.assert_close(y.float(), expected, atol=tolerance, rtol=tolerance)


def test_strided_operands_and_torchs_own_cases(op):
    x = torch.randn(64, 512, device="cuda", dtype=torch.bfloat16)[:, :256]  # rows 512 apart
    w = torch.randn(128, 256, device="cuda", dtype=torch.bfloat16).t().contiguous().t()  # K-major
    torch.testing.assert_close(op(x, w), torch.nn.functional.linear(x, w), atol=5e-2, rtol=5e-2)
    cpu = torch.randn(8, 32), torch.randn(16, 32)
    torch.testing.assert_close(op(*cpu), torch.nn.functional.linear(*cpu))  # at::linear
    f64 = torch.randn(8, 32, device="cuda", dtype=torch.float64)
    w64 = torch.randn(16, 32, device="cuda", dtype=torch.float64)
    torch.testing.assert_close(op(f64, w64), torch.nn.functional.linear(f64, w64))


def test_gradients_match_linears(op):
    torch.manual_seed(1)
    x = torch.randn(24, 320, device="cuda", dtype=torch.float32, requires_grad=True)
    w = torch.randn(192, 320, device="cuda", dtype=torch.float32, requires_grad=True)
    b = torch.randn(192, device="cuda", dtype=torch.float32, requires_grad=True)
    grad = torch.randn(24, 192, device="cuda")
    ours = torch.autograd.grad(op(x, w, b), (x, w, b), grad)
    theirs = torch.autograd.grad(torch.nn.functional.linear(x, w, b), (x, w, b), grad)
    for a, e in zip(ours, theirs):
        torch.testing.assert_close(a, e, atol=1e-2, rtol=1e-2)


def test_under_torch_compile(op):
    x = torch.randn(32, 1024, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(2048, 1024, device="cuda", dtype=torch.bfloat16) / 32
    compiled = torch.compile(lambda a, b: torch.relu(op(a, b)), fullgraph=True)
    torch.testing.assert_close(compiled(x, w), torch.relu(torch.nn.functional.linear(x, w)),
                               atol=3e-2, rtol=3e-2)
