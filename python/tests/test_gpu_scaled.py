"""On a Hopper GPU (marked gpu; skipped without torch, CUDA, float8 dtypes or sm_90):
gemmtune.scaled_mm against a float32 reference of the dequantized operands and against
torch._scaled_mm, per-tensor, rowwise and blockwise (DeepSeek-V3's), with a bias, out=, other
scale layouts, e5m2, use_fast_accum (fast accumulation for tensor and row scales, against the
reference and torch's fast path), an f32 output (run on Hopper; refused by name where its
kernels are not built), under torch.compile, and GEMMTUNE_RECORD's lines."""
import os
import subprocess
import sys

import pytest

from conftest import hopper_float8_torch  # noqa: E402

torch = hopper_float8_torch()

import gemmtune  # noqa: E402
from conftest import PACKAGE_ENV  # noqa: E402

pytestmark = pytest.mark.gpu

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
SHAPES = [(64, 2112, 7168), (300, 256, 640), (64, 256, 7168), (300, 2112, 640)]  # M, N, K
SCALINGS = ["tensor", "row", "block"]
# Relative to the largest |reference|: a bf16 or f16 output is one rounding (2^-9 and 2^-12
# relative) of an f32 sum whose order differs from the reference's. An f32 output shows what
# float8 wgmma's accumulator loses between promotions (about 14 bits kept, DeepSeek-V3's report;
# up to 2.3e-3 of the sum's scale measured with promotion every 4 k-blocks on an H100): 4e-3,
# the library's verifier's allowance (tuner/src/checker.cpp).
TOLERANCE = {torch.bfloat16: 8e-3, torch.float16: 2e-3, torch.float32: 4e-3}
# Fast accumulation (use_fast_accum with tensor or row scales) lets wgmma sum the whole K in its
# float8 accumulator, which keeps fewer bits than f32 (DeepSeek-V3's report: about 14, a
# relative error near 2% at K = 4096 in the worst case), so its error grows with K. Relative to
# the largest |reference|, 2e-2 allows that, while a lost or repeated 128-deep K block (a fifth
# of the sum at K = 640, a 56th at 7168) still stands out.
FAST_TOLERANCE = 2e-2


def ceil_div(x, y):
    return -(-x // y)


def quantized(rows, cols, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(rows, cols, device="cuda", generator=g).to(dtype)


def scales_of(M, N, K, scaling, seed=7):
    """scale_a and scale_b in torch._scaled_mm's shapes and layouts, values in [0.5, 1.5)."""
    g = torch.Generator(device="cuda").manual_seed(seed)

    def rand(*shape):
        return torch.rand(*shape, device="cuda", generator=g) + 0.5
    if scaling == "tensor":
        return rand(()), rand(1)
    if scaling == "row":
        return rand(M, 1), rand(1, N)
    kb, nb = ceil_div(K, 128), ceil_div(N, 128)
    return rand(kb, M).t(), rand(nb, kb).t()  # both outer-dim-major


def operands(M, N, K, scaling, a_dtype=E4M3, b_dtype=E4M3):
    a = quantized(M, K, a_dtype, seed=M + K)
    b = quantized(N, K, b_dtype, seed=N + 2 * K).t()  # W.t() of a row-major (N, K) weight
    return (a, b) + scales_of(M, N, K, scaling)


def dequantized_product(a, b, scale_a, scale_b):
    """(scale_a * scale_b) a @ b in f32, each scale applied to the values it covers."""
    M, K = a.shape
    N = b.shape[1]
    a, b = a.float(), b.float()
    if scale_a.numel() == 1 and scale_b.numel() == 1:
        return (a @ b) * scale_a.reshape(()) * scale_b.reshape(())
    if scale_a.shape == (M, 1) and scale_b.shape == (1, N):
        return (a @ b) * scale_a * scale_b
    sa = scale_a.repeat_interleave(128, dim=1)[:, :K]  # (M, K)
    sb = scale_b.repeat_interleave(128, dim=0)[:K].repeat_interleave(128, dim=1)[:, :N]
    return (a * sa) @ (b * sb)


def close(got, want, dtype, tolerance=None):
    """got (of dtype) is want to within tolerance (default: dtype's rounding, TOLERANCE) of the
    largest |want|."""
    assert got.dtype == dtype and got.shape == want.shape
    tolerance = TOLERANCE[dtype] if tolerance is None else tolerance
    error = (got.float() - want.float()).abs().max() / want.float().abs().max().clamp_min(1e-6)
    assert error.item() < tolerance, f"relative error {error.item():.2e}"


def fast_tolerance(scaling, dtype=torch.bfloat16):
    """The tolerance of a use_fast_accum=True result: the fast one for tensor and row scales;
    blockwise ones keep the precise kernels, and the precise tolerance."""
    return TOLERANCE[dtype] if scaling == "block" else max(FAST_TOLERANCE, TOLERANCE[dtype])


@pytest.mark.parametrize("scaling", SCALINGS)
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_matches_the_dequantized_product(M, N, K, scaling):
    a, b, sa, sb = operands(M, N, K, scaling)
    want = dequantized_product(a, b, sa, sb)
    close(gemmtune.scaled_mm(a, b, sa, sb), want, torch.bfloat16)
    close(gemmtune.scaled_mm(a, b, sa, sb, out_dtype=torch.float16), want, torch.float16)
    assert gemmtune.problem_scaled_mm(a, b, sa, sb) == gemmtune.Problem(
        "e4m3*e4m3->bf16", "tn", N, M, K, K, K, N, False, scaling)


def torch_scaled_mm(a, b, sa, sb, **kw):
    """torch._scaled_mm, where this torch and its cuBLAS run the case: blockwise scale_b in
    torch's outer-dim-major layout, else with its K-blocks padded to 4 (the 16-byte aligned
    stride some torch versions want). A skip, with torch's messages, where it refuses both."""
    tries = [sb]
    if sb.dim() == 2 and sb.stride(0) == 1 and sb.shape[0] > 1:
        kb, nb = sb.shape
        padded = torch.empty(nb, ceil_div(kb, 4) * 4, device="cuda")[:, :kb]
        padded.copy_(sb.t())
        tries.append(padded.t())
    errors = []
    for scale_b in tries:
        try:
            return torch._scaled_mm(a, b, sa, scale_b, **kw)
        except (RuntimeError, NotImplementedError) as e:
            errors.append(str(e).splitlines()[0])
    pytest.skip(f"torch._scaled_mm refuses this case here: {errors}")


@pytest.mark.parametrize("scaling", SCALINGS)
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_matches_torch_scaled_mm(M, N, K, scaling):
    a, b, sa, sb = operands(M, N, K, scaling)
    want = torch_scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
    ours = gemmtune.scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
    # Where torch itself is off the dequantized product (on the H100, torch 2.11: blockwise with
    # M = 300 tokens, whose outer-dim-major scale_a stride is no multiple of 4), ours is checked
    # against the product alone, and the skip says by how much torch is off.
    ref = dequantized_product(a, b, sa, sb)
    torch_error = ((want.float() - ref).abs().max() / ref.abs().max().clamp_min(1e-6)).item()
    if torch_error >= TOLERANCE[torch.bfloat16]:
        close(ours, ref, torch.bfloat16)
        pytest.skip(f"torch._scaled_mm is off the dequantized product here (relative error "
                    f"{torch_error:.2e}); ours matches the product")
    close(ours, want, torch.bfloat16)
    bias = torch.randn(N, device="cuda").to(torch.bfloat16)
    want = torch_scaled_mm(a, b, sa, sb, bias=bias, out_dtype=torch.bfloat16)
    close(gemmtune.scaled_mm(a, b, sa, sb, bias=bias), want, torch.bfloat16)


@pytest.mark.parametrize("scaling", SCALINGS)
def test_bias_out_fast_accum_and_other_scale_layouts(scaling):
    M, N, K = 300, 256, 640
    a, b, sa, sb = operands(M, N, K, scaling)
    want = dequantized_product(a, b, sa, sb)
    bias = torch.randn(N, device="cuda").to(torch.float16)
    close(gemmtune.scaled_mm(a, b, sa, sb, torch.float16, bias), want + bias.float(),
          torch.float16)
    # out=: written in place, rows padded.
    out = torch.full((M, N + 8), float("nan"), dtype=torch.bfloat16, device="cuda")[:, :N]
    assert gemmtune.scaled_mm(a, b, sa, sb, out=out) is out
    close(out, want, torch.bfloat16)
    # use_fast_accum: tensor and row scales accumulate fast, with the larger error that allows
    # (FAST_TOLERANCE); blockwise keeps the precise kernels and their tolerance. Against
    # torch's fast path: test_fast_accumulation_matches_torch_scaled_mm_with_use_fast_accum.
    fast = gemmtune.scaled_mm(a, b, sa, sb, use_fast_accum=True)
    close(fast, want, torch.bfloat16, fast_tolerance(scaling))
    close(gemmtune.scaled_mm(a, b, sa, sb, torch.float16, bias, use_fast_accum=True),
          want + bias.float(), torch.float16, fast_tolerance(scaling, torch.float16))
    # Scales in other layouts (row-major blockwise ones, strided rowwise ones) are copied into
    # the library's first: the same result.
    if scaling == "row":  # every other column of wider tensors
        sa2 = torch.empty(M, 2, device="cuda")[:, ::2].copy_(sa)
        sb2 = torch.empty(1, 2 * N, device="cuda")[:, ::2].copy_(sb)
        close(gemmtune.scaled_mm(a, b, sa2, sb2), want, torch.bfloat16)
    if scaling == "block":  # row-major: scale_a is copied, scale_b read in place
        close(gemmtune.scaled_mm(a, b, sa.contiguous(), sb.contiguous()), want, torch.bfloat16)


@pytest.mark.parametrize("scaling", SCALINGS)
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_fast_accumulation_matches_torch_scaled_mm_with_use_fast_accum(M, N, K, scaling):
    a, b, sa, sb = operands(M, N, K, scaling)
    assert gemmtune.problem_scaled_mm(a, b, sa, sb, use_fast_accum=True).accumulation == (
        "precise" if scaling == "block" else "fast")
    ours = gemmtune.scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=True)
    close(ours, dequantized_product(a, b, sa, sb), torch.bfloat16, fast_tolerance(scaling))
    if scaling == "block":  # precise kernels: test_matches_torch_scaled_mm compares them
        return
    # torch._scaled_mm's fast path (cuBLASLt's FAST_ACCUM) sums in another order: each is
    # within the fast tolerance of the product, and so of the other.
    want = torch_scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=True)
    close(ours, want, torch.bfloat16, FAST_TOLERANCE)


def test_e5m2_operands():
    a, b, sa, sb = operands(64, 256, 640, "row", a_dtype=E4M3, b_dtype=E5M2)
    close(gemmtune.scaled_mm(a, b, sa, sb), dequantized_product(a, b, sa, sb), torch.bfloat16)
    assert gemmtune.problem_scaled_mm(a, b, sa, sb).dtype == "e5m2*e4m3->bf16"


@pytest.mark.parametrize("use_fast_accum", [False, True])
@pytest.mark.parametrize("scaling", SCALINGS)
def test_an_f32_output_is_the_librarys_answer(scaling, use_fast_accum):
    # Python passes a float32 output through; the library runs it on Hopper, or, where its
    # kernels are not built, refuses it by name (Error 'unsupported').
    a, b, sa, sb = operands(64, 256, 640, scaling)
    try:
        y = gemmtune.scaled_mm(a, b, sa, sb, out_dtype=torch.float32,
                               use_fast_accum=use_fast_accum)
    except gemmtune.Error as e:
        assert e.code == "unsupported", e
        assert "e4m3*e4m3->f32" in str(e), e
        return
    want = dequantized_product(a, b, sa, sb)
    close(y, want, torch.float32, fast_tolerance(scaling, torch.float32) if use_fast_accum
          else None)
    out = torch.full((64, 264), float("nan"), device="cuda")[:, :256]
    assert gemmtune.scaled_mm(a, b, sa, sb, out_dtype=torch.float32, out=out,
                              use_fast_accum=use_fast_accum) is out
    close(out, want, torch.float32, fast_tolerance(scaling, torch.float32) if use_fast_accum
          else None)


def test_select_names_the_float8_kernel():
    s = gemmtune.select_scaled_mm(*operands(64, 2112, 7168, "block"))
    assert s.family == "wgmma_sm90" and s.kernel.startswith("gemm_")


def test_errors_on_the_gpu():
    a, b, sa, sb = operands(64, 256, 640, "row")
    with pytest.raises(ValueError, match=r"scale_b is not on a CUDA GPU"):
        gemmtune.scaled_mm(a, b, sa, sb.cpu())
    with pytest.raises(ValueError, match=r"^b must be column-major"):
        gemmtune.scaled_mm(a, b.contiguous(), sa, sb)
    # Float8 with bf16 is no problem the library takes, through linear as through matmul.
    x = torch.randn(64, 640, device="cuda").to(torch.bfloat16)
    with pytest.raises(gemmtune.Error, match=r"^A is e4m3 but B is bf16: float8 multiplies "
                                             r"float8 .*gemmtune.scaled_mm") as e:
        gemmtune.linear(x, b.t())
    assert e.value.code == "invalid_argument"


def test_empty_products():
    a, b, sa, sb = operands(64, 256, 640, "tensor")
    assert gemmtune.scaled_mm(a[:0], b, sa, sb).shape == (0, 256)
    z = torch.empty(64, 0, dtype=E4M3, device="cuda")
    bias = torch.randn(256, device="cuda").to(torch.bfloat16)
    y = gemmtune.scaled_mm(z, torch.empty(256, 0, dtype=E4M3, device="cuda").t(), sa, sb,
                           bias=bias)
    assert torch.equal(y, bias.expand(64, 256))


@pytest.mark.skipif(not gemmtune.torch_operators, reason="torch < 2.4: no torch.library.custom_op")
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_under_torch_compile(backend):
    def layer(x8, w8, sx, sw, bias):
        return torch.relu(gemmtune.scaled_mm(x8, w8.t(), sx, sw, bias=bias))

    a, b, sa, sb = operands(300, 256, 640, "block")
    bias = torch.randn(256, device="cuda").to(torch.bfloat16)
    compiled = torch.compile(layer, fullgraph=True, backend=backend)
    want = torch.relu(dequantized_product(a, b, sa, sb) + bias.float())
    close(compiled(a, b.t(), sa, sb, bias), want, torch.bfloat16)


def test_gemmtune_record_records_the_scaled_problem(tmp_path):
    # A process of its own with an empty database: every problem is served untuned, so the
    # library records it, scaling, accumulation and beta included.
    shapes = tmp_path / "shapes.txt"
    script = (
        "import torch, gemmtune\n"
        "E4M3 = torch.float8_e4m3fn\n"
        "a = torch.randn(64, 7168, device='cuda').to(E4M3)\n"
        "b = torch.randn(2112, 7168, device='cuda').to(E4M3).t()\n"
        "sa, sb = torch.ones(56, 64, device='cuda').t(), torch.ones(17, 56, device='cuda').t()\n"
        "gemmtune.scaled_mm(a, b, sa, sb)\n"
        "gemmtune.scaled_mm(a, b, torch.ones(64, 1, device='cuda'), torch.ones(1, 2112, "
        "device='cuda'), bias=torch.zeros(2112, dtype=torch.bfloat16, device='cuda'))\n"
        "one = torch.ones((), device='cuda')\n"
        "gemmtune.scaled_mm(a, b, one, one, use_fast_accum=True)\n"
        "gemmtune.scaled_mm(a, b, sa, sb, use_fast_accum=True)  # blockwise: precise, listed\n"
        "torch.cuda.synchronize()\n")
    env = dict(os.environ, GEMMTUNE_RECORD=str(shapes), GEMMTUNE_DB=str(tmp_path / "tuning.db"),
               **PACKAGE_ENV)
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=600)
    lines = [line for line in shapes.read_text().splitlines() if not line.startswith("#")]
    assert lines == ["2112 64 7168 e4m3*e4m3->bf16 tn scaling=block",
                     "2112 64 7168 e4m3*e4m3->bf16 tn scaling=row beta=1",
                     "2112 64 7168 e4m3*e4m3->bf16 tn scaling=tensor accum=fast"]
