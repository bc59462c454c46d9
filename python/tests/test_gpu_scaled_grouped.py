"""On a Hopper GPU (marked gpu; skipped without torch, CUDA, float8 dtypes or sm_90):
gemmtune.scaled_grouped_mm (float8 experts) against a float32 reference of each group's
dequantized operands, per-tensor, rowwise and blockwise (DeepSeek-V3's), with empty groups,
groups ending mid-tile, rows past the last end left as they were, scales copied from other
layouts, and the custom operator's fake shape."""
import pytest

from conftest import hopper_float8_torch  # noqa: E402

torch = hopper_float8_torch()

import gemmtune  # noqa: E402

pytestmark = pytest.mark.gpu

E4M3 = torch.float8_e4m3fn
TOLERANCE = 8e-3  # of the largest |reference|: one bf16 rounding of a differently ordered sum


def ceil_div(x, y):
    return -(-x // y)


def experts(T, K, N, G, scaling, seed=3):
    """x, w (each w[g] column-major), scale_x, scale_w and their dequantized float32 x and w."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(T, K, device="cuda", generator=g).to(E4M3)
    W = torch.randn(G, N, K, device="cuda", generator=g).to(E4M3)
    w = W.transpose(1, 2)

    def rand(*shape):
        return torch.rand(*shape, device="cuda", generator=g) * 3.9 + 0.1
    kb, nb = ceil_div(K, 128), ceil_div(N, 128)
    if scaling == "tensor":
        sx, sw = rand(()), rand(G)
        xs, ws = sx.expand(T, K), sw.view(G, 1, 1).expand(G, K, N)
    elif scaling == "row":
        sx, sw = rand(T), rand(G, N)
        xs, ws = sx.view(T, 1).expand(T, K), sw.view(G, 1, N).expand(G, K, N)
    else:
        sx, sw = rand(kb, T).t(), rand(G, kb, nb)  # scale_x outer-dim-major
        xs = sx.repeat_interleave(128, 1)[:, :K]
        ws = sw.repeat_interleave(128, 1).repeat_interleave(128, 2)[:, :K, :N]
    return x, w, sx, sw, x.float() * xs, w.float() * ws


def reference(xd, wd, offs):
    out = torch.zeros(xd.shape[0], wd.shape[2], device="cuda")
    start = 0
    for g, end in enumerate(offs.tolist()):
        out[start:end] = xd[start:end] @ wd[g]
        start = end
    return out


@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
@pytest.mark.parametrize("T,K,N,G", [(300, 640, 2112, 8), (64, 7168, 512, 4), (37, 200, 300, 5)])
def test_each_group_is_its_scaled_product(scaling, T, K, N, G):
    x, w, sx, sw, xd, wd = experts(T, K, N, G, scaling)
    torch.manual_seed(T + G)
    cuts = sorted(torch.randint(0, T - 3, (G - 1,)).tolist()) + [T - 3]  # 3 rows in no group
    cuts[0] = 0  # an empty first group
    offs = torch.tensor(cuts, dtype=torch.int32, device="cuda")
    out = torch.full((T, N), float("nan"), dtype=torch.bfloat16, device="cuda")
    got = gemmtune.scaled_grouped_mm(x, w, sx, sw, offs, out=out)
    assert got is out
    ref = reference(xd, wd, offs)
    scale = ref[: T - 3].abs().max().item()
    error = (got[: T - 3].float() - ref[: T - 3]).abs().max().item() / scale
    assert error <= TOLERANCE, f"{scaling} {T}x{K}x{N} G={G}: error {error:.3g}"
    assert torch.isnan(got[T - 3:].float()).all(), "rows past the last end were written"


def test_scales_in_other_layouts_are_copied():
    T, K, N, G = 256, 512, 384, 4
    x, w, sx, sw, xd, wd = experts(T, K, N, G, "block")
    offs = torch.tensor([64, 128, 200, 256], dtype=torch.int32, device="cuda")
    want = gemmtune.scaled_grouped_mm(x, w, sx, sw, offs)
    other = gemmtune.scaled_grouped_mm(x, w, sx.contiguous(), sw.transpose(1, 2).contiguous()
                                       .transpose(1, 2), offs)
    assert torch.equal(want, other)
    ref = reference(xd, wd, offs)
    assert (want.float() - ref).abs().max().item() <= TOLERANCE * ref.abs().max().item()


def test_the_operator_has_a_fake_shape():
    if not gemmtune.torch_operators:
        pytest.skip("torch.ops.gemmtune needs torch >= 2.4")
    T, K, N, G = 64, 256, 256, 2
    x, w, sx, sw, _, _ = experts(T, K, N, G, "row")
    offs = torch.tensor([32, 64], dtype=torch.int32, device="cuda")
    eager = gemmtune.scaled_grouped_mm(x, w, sx, sw, offs)
    op = torch.ops.gemmtune.scaled_grouped_mm(x, w, sx, sw, offs, torch.bfloat16)
    assert torch.equal(eager, op)
    compiled = torch.compile(lambda *a: gemmtune.scaled_grouped_mm(*a), fullgraph=True)
    assert torch.equal(compiled(x, w, sx, sw, offs), eager)
