"""grouped_mm's, grouped_mm_masked's and bmm's torch front end without a GPU (skipped without
torch): torch's strides give the plan (nn.Linear-style weights transposed, x.t(), padded rows),
the errors torch tensors get, and the fake implementations of torch.ops.gemmtune.grouped_mm,
.grouped_mm_masked and .bmm that torch.compile traces with."""
import pytest

torch = pytest.importorskip("torch")

import gemmtune  # noqa: E402
from gemmtune import Problem, _torch  # noqa: E402
from gemmtune._grouped import plan_bmm, plan_grouped_mm, plan_grouped_mm_masked  # noqa: E402

BF16, F16 = torch.bfloat16, torch.float16
T, K, N, G = 300, 512, 1024, 8


def described(*tensors):
    return [None if t is None else _torch._described(t) for t in tensors]


def grouped_problem(x, w, offs, out=None):
    return plan_grouped_mm(*described(x, w, offs), out=described(out)[0],
                           need_gpu=False).problem


def test_torch_strides_give_the_problem():
    x = torch.empty(T, K, dtype=BF16, device="meta")
    offs = torch.empty(G, dtype=torch.int32, device="meta")
    w = torch.empty(G, K, N, dtype=BF16, device="meta")
    assert grouped_problem(x, w, offs) == Problem("bf16", "nn", N, T, K, N, K, N)
    # nn.Linear-style weights (G, N, K), transposed: read in place as op(A) = T.
    wt = torch.empty(G, N, K, dtype=BF16, device="meta").transpose(1, 2)
    assert grouped_problem(x, wt, offs) == Problem("bf16", "tn", N, T, K, K, K, N)
    # A column-major x (x.t() of a (K, T) tensor) is copied: the grouped kernels read op(B) = N.
    xt = torch.empty(K, T, dtype=BF16, device="meta").t()
    plan = plan_grouped_mm(*described(xt, w, offs), need_gpu=False)
    assert plan.copy_x and plan.problem == Problem("bf16", "nn", N, T, K, N, K, N)
    # Padded rows of x and out.
    xp = torch.empty(T, K + 8, dtype=BF16, device="meta")[:, :K]
    out = torch.empty(T, N + 8, dtype=BF16, device="meta")[:, :N]
    assert grouped_problem(xp, w, offs, out) == Problem("bf16", "nn", N, T, K, N, K + 8, N + 8)
    # Every other expert: the G matrices are not lda * K apart, so w is copied.
    every_other = torch.empty(2 * G, K, N, dtype=BF16, device="meta")[::2]
    plan = plan_grouped_mm(*described(x, every_other, offs), need_gpu=False)
    assert plan.copy_w and not plan.copy_x and plan.problem.lda == N


def test_bmm_strides_give_the_problem():
    a = torch.empty(4, 64, 128, dtype=F16, device="meta")
    b = torch.empty(4, 96, 128, dtype=F16, device="meta").transpose(1, 2)
    plan = plan_bmm(*described(a, b), need_gpu=False)
    assert plan.problem == Problem("f16", "tn", 96, 256, 128, 128, 128, 96)
    assert (plan.groups, plan.copy_x, plan.copy_w, plan.shape) == (4, False, False, (4, 64, 96))
    # a.transpose(1, 2) of a (G, K, M) tensor: its rows do not flatten, so it is copied.
    at = torch.empty(4, 128, 64, dtype=F16, device="meta").transpose(1, 2)
    assert plan_bmm(*described(at, b), need_gpu=False).copy_x


def test_masked_strides_give_the_problem():
    cap = 64
    x = torch.empty(G, cap, K, dtype=BF16, device="meta")
    counts = torch.empty(G, dtype=torch.int32, device="meta")
    wt = torch.empty(G, N, K, dtype=BF16, device="meta").transpose(1, 2)
    plan = plan_grouped_mm_masked(*described(x, wt, counts), need_gpu=False)
    assert plan.problem == Problem("bf16", "tn", N, G * cap, K, K, K, N)
    assert (plan.groups, plan.masked, plan.copy_x, plan.copy_w) == (G, True, False, False)
    assert plan.shape == (G, cap, N)
    # Padded rows of x and out are read in place; x.transpose(1, 2) of a (G, K, cap) tensor is
    # copied.
    xp = torch.empty(G, cap, K + 8, dtype=BF16, device="meta")[:, :, :K]
    out = torch.empty(G, cap, N + 8, dtype=BF16, device="meta")[:, :, :N]
    plan = plan_grouped_mm_masked(*described(xp, wt, counts), out=described(out)[0],
                                  need_gpu=False)
    assert plan.problem == Problem("bf16", "tn", N, G * cap, K, K, K + 8, N + 8)
    xt = torch.empty(G, K, cap, dtype=BF16, device="meta").transpose(1, 2)
    assert plan_grouped_mm_masked(*described(xt, wt, counts), need_gpu=False).copy_x


def cpu(*shape, dtype=BF16):
    return torch.zeros(*shape, dtype=dtype)


def test_errors_of_torch_tensors():
    x, w, offs = cpu(T, K), cpu(G, K, N), cpu(G, dtype=torch.int32)
    with pytest.raises(ValueError, match=r"^x is not on a CUDA GPU: grouped_mm multiplies tensors "
                                         r"in GPU memory \(move it with .cuda\(\)\)$") as e:
        gemmtune.grouped_mm(x, w, offs)
    assert isinstance(e.value, gemmtune.Error) and e.value.code == "invalid_argument"
    with pytest.raises(TypeError, match=r"^x has dtype float32: grouped_mm multiplies bfloat16 "
                                        r"or float16 x and w"):
        gemmtune.grouped_mm(x.float(), w.float(), offs)
    with pytest.raises(TypeError, match=r"^offs has dtype int64: the group ends are int32"):
        gemmtune.grouped_mm(x, w, offs.long())
    with pytest.raises(TypeError, match=r"^offs is a list: grouped_mm takes torch tensors$"):
        gemmtune.grouped_mm(x, w, [1, 2, 3])
    with pytest.raises(TypeError, match=r"^out_dtype is a str: grouped_mm takes a torch dtype "
                                        r"\(torch.bfloat16, torch.float16 or torch.float32\) or "
                                        r"None \(x's\)$"):
        gemmtune.grouped_mm(x, w, offs, "bf16")
    with pytest.raises(TypeError, match=r"^out_dtype is float64: grouped_mm writes bfloat16"):
        gemmtune.grouped_mm(x, w, offs, torch.float64)
    with pytest.raises(ValueError, match=r"^out must be \(T, N\) = \(300, 1024\), got shape "
                                         r"\(300, 1023\)$"):
        gemmtune.grouped_mm(x, w, offs, out=cpu(T, N - 1))
    with pytest.raises(ValueError, match=r"^w must be \(G, K, N\) = \(G, 512, N\)"):
        gemmtune.grouped_mm(x, w.transpose(1, 2), offs)
    with pytest.raises(ValueError, match=r"^a is not on a CUDA GPU: bmm multiplies tensors"):
        gemmtune.bmm(cpu(G, 64, K), w)
    with pytest.raises(TypeError, match=r"^b is a list: bmm takes torch tensors$"):
        gemmtune.bmm(cpu(G, 64, K), [3])
    with pytest.raises(TypeError, match=r"^b has dtype float16 but a has bfloat16: bmm needs a "
                                        r"and b of one dtype$"):
        gemmtune.bmm(cpu(G, 64, K), w.half())
    xm = cpu(G, 64, K)
    with pytest.raises(ValueError, match=r"^x is not on a CUDA GPU: grouped_mm_masked multiplies "
                                         r"tensors in GPU memory"):
        gemmtune.grouped_mm_masked(xm, w, offs)
    with pytest.raises(TypeError, match=r"^counts is a list: grouped_mm_masked takes torch "
                                        r"tensors$"):
        gemmtune.grouped_mm_masked(xm, w, [1] * G)
    with pytest.raises(TypeError, match=r"^out_dtype is a str: grouped_mm_masked takes a torch "
                                        r"dtype"):
        gemmtune.grouped_mm_masked(xm, w, offs, "bf16")
    with pytest.raises(TypeError, match=r"^counts has dtype int64: the group counts are int32$"):
        gemmtune.grouped_mm_masked(xm, w, offs.long())
    with pytest.raises(ValueError, match=r"^x must be a 3-D \(G, cap, K\)"):
        gemmtune.grouped_mm_masked(x, w, offs)


@pytest.mark.skipif(not gemmtune.torch_operators, reason="torch < 2.4: no torch.library.custom_op")
@pytest.mark.parametrize("out_dtype", [None, torch.float32], ids=str)
def test_the_fake_implementations_give_the_results_shape_and_dtype(out_dtype):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x, w, offs = cpu(T, K), cpu(G, K, N), cpu(G, dtype=torch.int32)
        y = torch.ops.gemmtune.grouped_mm(x, w, offs, out_dtype)
        assert (tuple(y.shape), y.dtype) == ((T, N), out_dtype or BF16)
        y = torch.ops.gemmtune.grouped_mm(x, w.transpose(1, 2).contiguous().transpose(1, 2), offs)
        assert (tuple(y.shape), y.dtype) == ((T, N), BF16)
        with pytest.raises(RuntimeError, match="x's columns != w's K"):
            torch.ops.gemmtune.grouped_mm(x, cpu(G, K + 1, N), offs)
        with pytest.raises(RuntimeError, match="offs must have one end per group of w"):
            torch.ops.gemmtune.grouped_mm(x, w, offs[:3])
        y = torch.ops.gemmtune.bmm(cpu(G, 64, K, dtype=F16), cpu(G, K, 96, dtype=F16))
        assert (tuple(y.shape), y.dtype) == ((G, 64, 96), F16)
        with pytest.raises(RuntimeError, match="a's K != b's K"):
            torch.ops.gemmtune.bmm(cpu(G, 64, K), cpu(G, K + 1, 96))
        with pytest.raises(RuntimeError, match="a's G != b's G"):
            torch.ops.gemmtune.bmm(cpu(G, 64, K), cpu(G + 1, K, 96))
        y = torch.ops.gemmtune.grouped_mm_masked(cpu(G, 64, K), w, offs, out_dtype)
        assert (tuple(y.shape), y.dtype) == ((G, 64, N), out_dtype or BF16)
        with pytest.raises(RuntimeError, match="x's K != w's K"):
            torch.ops.gemmtune.grouped_mm_masked(cpu(G, 64, K + 1), w, offs)
        with pytest.raises(RuntimeError, match="x's G != w's G"):
            torch.ops.gemmtune.grouped_mm_masked(cpu(G + 1, 64, K), w, offs)
        with pytest.raises(RuntimeError, match=r"counts must be \(G,\), one per group"):
            torch.ops.gemmtune.grouped_mm_masked(cpu(G, 64, K), w, offs[:3])
    # Meta tensors take the same implementations.
    meta = {"device": "meta", "dtype": BF16}
    y = torch.ops.gemmtune.grouped_mm(torch.empty(T, K, **meta), torch.empty(G, K, N, **meta),
                                      torch.empty(G, dtype=torch.int32, device="meta"), out_dtype)
    assert (y.device.type, tuple(y.shape), y.dtype) == ("meta", (T, N), out_dtype or BF16)
    y = torch.ops.gemmtune.bmm(torch.empty(G, 64, K, **meta), torch.empty(G, K, 96, **meta))
    assert (y.device.type, tuple(y.shape), y.dtype) == ("meta", (G, 64, 96), BF16)
    y = torch.ops.gemmtune.grouped_mm_masked(torch.empty(G, 64, K, **meta),
                                             torch.empty(G, K, N, **meta),
                                             torch.empty(G, dtype=torch.int32, device="meta"),
                                             out_dtype)
    assert (y.device.type, tuple(y.shape), y.dtype) == ("meta", (G, 64, N), out_dtype or BF16)
