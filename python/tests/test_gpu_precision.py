"""On the GPU (marked gpu; skipped without torch or CUDA): f32 calls in each precision. torch's
float32 matmul precision picks the problem ('highest': exact, 'high': tf32) unless precision= says;
the kernels served compute on tensor cores where asked (tf32 and 3xTF32 on Hopper) and not
otherwise; errors against an f64 reference: tf32 near 2^-10, 3xtf32 and exact near f32's; every
layout (linear's, and matmul's, whose operands come from transposed copies on Hopper)."""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU visible to torch", allow_module_level=True)

import gemmtune  # noqa: E402

pytestmark = pytest.mark.gpu
HOPPER = torch.cuda.get_device_capability() == (9, 0)
# Largest error relative to the largest |reference|, K = 1024 of normal values.
BOUND = {"exact": 1e-5, "tf32": 4e-3, "3xtf32": 1e-5}


@pytest.fixture(autouse=True)
def highest_precision():
    """Every test starts and ends at torch's default, 'highest'."""
    torch.set_float32_matmul_precision("highest")
    yield
    torch.set_float32_matmul_precision("highest")


def error(got, want):
    return ((got.double() - want).abs().max() / want.abs().max()).item()


def operands(m=300, n=520, k=1024):
    g = torch.Generator(device="cuda").manual_seed(7)
    x = torch.randn(m, k, device="cuda", generator=g)
    w = torch.randn(n, k, device="cuda", generator=g)
    return x, w


@pytest.mark.parametrize("precision", ["exact", "tf32", "3xtf32"])
def test_linear_in_each_precision(precision):
    x, w = operands()
    want = x.double() @ w.double().T
    got = gemmtune.linear(x, w, precision=precision)
    e = error(got, want)
    assert e < BOUND[precision], f"{precision}: relative error {e:.2e}"
    kernel = gemmtune.select_linear(x, w, precision=precision).kernel
    assert ("tf32" in kernel) == (HOPPER and precision != "exact"), kernel
    if precision == "tf32":
        assert e > 1e-5, f"tf32 as exact as f32 ({e:.2e}): not computed in tf32"


def test_torch_setting_is_the_default():
    x, w = operands()
    want = x.double() @ w.double().T
    exact = error(gemmtune.linear(x, w), want)
    torch.set_float32_matmul_precision("high")
    high = error(gemmtune.linear(x, w), want)
    kernel = gemmtune.select_linear(x, w).kernel
    torch.set_float32_matmul_precision("highest")
    again = error(gemmtune.linear(x, w), want)
    assert exact < BOUND["exact"] and again < BOUND["exact"]
    assert high < BOUND["tf32"]
    if HOPPER:
        assert "tf32" in kernel and high > 10 * exact, (kernel, high, exact)


@pytest.mark.parametrize("precision", ["tf32", "3xtf32"])
@pytest.mark.parametrize("transpose_a,transpose_b", [(False, False), (True, False), (False, True),
                                                     (True, True)])
def test_matmul_every_layout(precision, transpose_a, transpose_b):
    g = torch.Generator(device="cuda").manual_seed(3)
    a = torch.randn(260, 1000, device="cuda", generator=g)
    b = torch.randn(1000, 200, device="cuda", generator=g)
    a = a.T.contiguous().T if transpose_a else a
    b = b.T.contiguous().T if transpose_b else b
    want = a.double() @ b.double()
    e = error(gemmtune.matmul(a, b, precision=precision), want)
    assert e < BOUND[precision], f"{precision}: relative error {e:.2e}"
