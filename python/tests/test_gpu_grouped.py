"""On a Hopper GPU (marked gpu; skipped without torch or CUDA, and but for one test without
sm_90): gemmtune.grouped_mm against a float32 reference of each group and against
torch._grouped_mm, with uniform, skewed and ragged routings (empty groups, offs[-1] < T, whose
rows past it are never written), both weight stridings, bf16 and f16; bmm against torch.bmm; a
CUDA graph captured once and replayed with other routings written into the same offs; the
custom operators under torch.compile; grouped_mm_masked against a per-group reference with
counts from 0 to the capacity (rows past a count untouched), and in a CUDA graph replayed with
three sets of counts. On GPUs before sm_80: the library's refusal, by name (from sm_80 on,
mma_sm80 serves grouped problems too)."""
import math

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU visible to torch", allow_module_level=True)

import gemmtune  # noqa: E402
from gemmtune import _torch  # noqa: E402

pytestmark = pytest.mark.gpu
torch.backends.cuda.matmul.allow_tf32 = False  # the references in full f32

HOPPER = torch.cuda.get_device_capability() == (9, 0)
hopper = pytest.mark.skipif(not HOPPER, reason="the grouped kernels are Hopper's (sm_90a)")

DTYPES = [torch.bfloat16, torch.float16]
# Relative to the largest |reference|: one rounding of the output, and f32 accumulation order.
TOLERANCE = {torch.bfloat16: 2e-2, torch.float16: 4e-3}
STRIDINGS = ["row-major", "transposed"]  # w (G, K, N) itself, or nn.Linear's (G, N, K) transposed
G, T, K, N = 8, 512, 256, 384
# The tokens of each of the G experts: sums at most T.
ROUTINGS = {
    "uniform": [64] * 8,
    "skewed": [30, 30, 300, 30, 30, 30, 30, 30],  # one expert 10x the others; offs[-1] = 510
    "ragged": [0, 37, 0, 1, 150, 0, 7, 64],  # empty groups, the first among them; offs[-1] = 259
    "last groups empty": [5, 0, 100, 0, 33, 17, 0, 0],
    "all in one": [0, 0, 0, 0, 0, 512, 0, 0],
}


def rand(*shape, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, device="cuda", generator=g).to(dtype)


def weights(groups, k, n, dtype, striding, seed=1):
    """(G, K, N) expert weights: each w[g] row-major, or nn.Linear-style (G, N, K) transposed."""
    if striding == "row-major":
        return rand(groups, k, n, dtype=dtype, seed=seed)
    return rand(groups, n, k, dtype=dtype, seed=seed).transpose(1, 2)


def ends_of(sizes):
    """torch._grouped_mm's offs: the cumulative end rows of the groups, int32 on the GPU."""
    return torch.tensor(sizes, device="cuda").cumsum(0).to(torch.int32)


def reference(x, w, offs):
    """torch._grouped_mm's definition in f32, group by group: rows offs[g-1]..offs[g] are
    x[those rows] @ w[g]; rows past offs[-1] are in no group (NaN here)."""
    out = torch.full((x.shape[0], w.shape[2]), float("nan"), device="cuda")
    begin = 0
    for g, end in enumerate(offs.tolist()):
        out[begin:end] = x[begin:end].float() @ w[g].float()
        begin = end
    return out


def close(got, want, dtype, rows=None):
    """got against want on the first `rows` rows (all by default): the rows of the groups."""
    got, want = got[:rows].float(), want[:rows].float()
    assert got.shape == want.shape
    if want.numel() == 0:
        return
    error = (got - want).abs().max() / want.abs().max().clamp_min(1e-6)
    assert error.item() < TOLERANCE[dtype], f"relative error {error.item():.2e}"


def plan_of(x, w, offs):
    return _torch._plan_grouped_mm(*(_torch._described(t) for t in (x, w, offs)), None, None)


@hopper
@pytest.mark.parametrize("routing", list(ROUTINGS))
@pytest.mark.parametrize("striding", STRIDINGS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matches_a_per_group_reference(dtype, striding, routing):
    x = rand(T, K, dtype=dtype, seed=2)
    w = weights(G, K, N, dtype, striding)
    offs = ends_of(ROUTINGS[routing])
    end = sum(ROUTINGS[routing])
    # Both stridings are read in place: 'nn' and 'tn'.
    plan = plan_of(x, w, offs)
    assert plan.problem.layout == ("nn" if striding == "row-major" else "tn")
    assert not plan.copy_x and not plan.copy_w
    want = reference(x, w, offs)
    y = gemmtune.grouped_mm(x, w, offs)
    assert y.shape == (T, N) and y.dtype == dtype
    close(y, want, dtype, end)
    # out=: the groups' rows written in place; the rows past offs[-1] never are.
    out = torch.full((T, N), float("nan"), dtype=dtype, device="cuda")
    assert gemmtune.grouped_mm(x, w, offs, out=out) is out
    close(out, want, dtype, end)
    assert out[end:].isnan().all()


def f32_or_refused(call):
    """An f32 result, where the library has such kernels; else None, its refusal naming the
    types."""
    try:
        y = call()
    except gemmtune.Error as e:
        assert e.code == "unsupported" and "->f32" in str(e), e
        return None
    assert y.dtype == torch.float32
    return y


@hopper
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_other_layouts_and_outputs(dtype):
    offs = ends_of(ROUTINGS["ragged"])
    end = sum(ROUTINGS["ragged"])
    x, w = rand(T, K, dtype=dtype, seed=3), weights(G, K, N, dtype, "row-major", seed=4)
    want = reference(x, w, offs)
    # A column-major x (read in place, op(B) = T), padded rows of x and w, a padded out.
    xt = x.t().contiguous().t()
    close(gemmtune.grouped_mm(xt, w, offs), want, dtype, end)
    xp = torch.empty(T, K + 8, dtype=dtype, device="cuda")[:, :K].copy_(x)
    wp = torch.empty(G, K, N + 8, dtype=dtype, device="cuda")[:, :, :N].copy_(w)
    out = torch.empty(T, N + 8, dtype=dtype, device="cuda")[:, :N]
    close(gemmtune.grouped_mm(xp, wp, offs, out=out), want, dtype, end)
    assert not plan_of(xp, wp, offs).copy_w
    # Every other expert of a larger stack: the matrices are not lda * K apart, so w is copied.
    w2 = torch.empty(2 * G, K, N, dtype=dtype, device="cuda")[::2].copy_(w)
    assert plan_of(x, w2, offs).copy_w
    close(gemmtune.grouped_mm(x, w2, offs), want, dtype, end)
    y = f32_or_refused(lambda: gemmtune.grouped_mm(x, w, offs, out_dtype=torch.float32))
    if y is not None:
        close(y, want, dtype, end)


def torch_grouped_mm(x, w, offs):
    """torch._grouped_mm, where this torch runs the case; a skip with its message where not."""
    grouped_mm = getattr(torch, "_grouped_mm", None)
    if grouped_mm is None:
        pytest.skip(f"torch {torch.__version__} has no torch._grouped_mm")
    try:
        return grouped_mm(x, w, offs=offs)
    except (RuntimeError, NotImplementedError, TypeError) as e:
        pytest.skip(f"torch._grouped_mm refuses this case here: {str(e).splitlines()[0]}")


@hopper
@pytest.mark.parametrize("routing", ["uniform", "skewed", "ragged"])
@pytest.mark.parametrize("striding", STRIDINGS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_matches_torch_grouped_mm(dtype, striding, routing):
    x = rand(T, K, dtype=dtype, seed=5)
    w = weights(G, K, N, dtype, striding, seed=6)
    offs = ends_of(ROUTINGS[routing])
    end = sum(ROUTINGS[routing])
    want = torch_grouped_mm(x, w, offs)
    assert want.shape == (T, N)
    close(gemmtune.grouped_mm(x, w, offs), want, dtype, end)


BMM_SHAPES = [(4, 64, 128, 96), (3, 17, 40, 24), (8, 1, 256, 128), (2, 130, 64, 200)]  # G M K N


@hopper
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("groups,m,k,n", BMM_SHAPES)
def test_bmm_matches_torch_bmm(dtype, groups, m, k, n):
    a, b = rand(groups, m, k, dtype=dtype, seed=7), rand(groups, k, n, dtype=dtype, seed=8)
    want = torch.bmm(a.float(), b.float())
    y = gemmtune.bmm(a, b)
    assert y.shape == (groups, m, n) and y.dtype == dtype
    close(y, want, dtype)
    # b transposed (read in place), a transposed (copied), out= with padded rows.
    bt = b.transpose(1, 2).contiguous().transpose(1, 2)
    at = a.transpose(1, 2).contiguous().transpose(1, 2)
    close(gemmtune.bmm(a, bt), want, dtype)
    close(gemmtune.bmm(at, b), want, dtype)
    out = torch.empty(groups, m, n + 8, dtype=dtype, device="cuda")[:, :, :n]
    assert gemmtune.bmm(a, bt, out=out) is out
    close(out, want, dtype)
    close(torch.bmm(a, b), want, dtype)  # torch's own rounding is as far off


@hopper
def test_empty_products():
    dtype = torch.bfloat16
    x, w, offs = rand(T, K, dtype=dtype, seed=9), weights(G, K, N, dtype, "row-major"), \
        ends_of(ROUTINGS["ragged"])
    assert gemmtune.grouped_mm(x[:0], w, torch.zeros(G, dtype=torch.int32, device="cuda")).shape \
        == (0, N)
    # K = 0: each group's rows are sums over nothing; rows past offs[-1] are left alone.
    out = torch.full((T, N), 7.0, dtype=dtype, device="cuda")
    gemmtune.grouped_mm(x[:, :0], w[:, :0], offs, out=out)
    end = sum(ROUTINGS["ragged"])
    assert (out[:end] == 0).all() and (out[end:] == 7).all()
    assert (gemmtune.bmm(x[:64, :0].expand(2, 64, 0), w[:2, :0]) == 0).all()


def warm_up(call):
    """call() outside any capture, so that the library loads the kernel before a graph captures
    the call: on a side stream, as torch recommends."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()


@hopper
def test_a_captured_graph_replays_other_routings():
    dtype = torch.bfloat16
    x, w = rand(T, K, dtype=dtype, seed=10), weights(G, K, N, dtype, "transposed", seed=11)
    offs = ends_of(ROUTINGS["uniform"])
    warm_up(lambda: gemmtune.grouped_mm(x, w, offs))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = gemmtune.grouped_mm(x, w, offs)
    # The kernel reads the ends when it runs: each replay follows what offs holds then.
    for routing in ("skewed", "ragged", "all in one"):
        offs.copy_(ends_of(ROUTINGS[routing]))
        graph.replay()
        torch.cuda.synchronize()
        close(y, reference(x, w, offs), dtype, sum(ROUTINGS[routing]))


@hopper
def test_bmm_in_a_captured_graph_makes_its_own_ends():
    dtype = torch.float16
    groups, m, k, n = 6, 48, 256, 128  # no other test's (G, M): no uniform ends are kept yet
    a, b = rand(groups, m, k, dtype=dtype, seed=12), rand(groups, k, n, dtype=dtype, seed=13)
    key = (groups, m, a.device.index)
    assert key not in _torch._UNIFORM_ENDS
    # Warm up with the same problem through grouped_mm (the kernel loads), leaving bmm's ends
    # to be made inside the capture.
    ends = torch.arange(1, groups + 1, dtype=torch.int32, device="cuda") * m
    gemmtune.grouped_mm(a.reshape(groups * m, k), b, ends)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = gemmtune.bmm(a, b)
    assert key not in _torch._UNIFORM_ENDS  # the graph's own: written when it replays
    a.copy_(rand(groups, m, k, dtype=dtype, seed=14))
    graph.replay()
    torch.cuda.synchronize()
    close(y, torch.bmm(a.float(), b.float()), dtype)
    close(gemmtune.bmm(a, b), torch.bmm(a.float(), b.float()), dtype)  # eager: made and kept
    assert key in _torch._UNIFORM_ENDS


@hopper
@pytest.mark.skipif(not gemmtune.torch_operators, reason="torch < 2.4: no torch.library.custom_op")
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_under_torch_compile(backend):
    def experts(x, w1, w2, offs, a, b):
        h = torch.relu(gemmtune.grouped_mm(x, w1, offs))
        return gemmtune.grouped_mm(h, w2, offs), gemmtune.bmm(a, b) * 2

    dtype = torch.bfloat16
    x = rand(T, K, dtype=dtype, seed=15)
    w1 = weights(G, K, N, dtype, "transposed", seed=16)
    w2 = weights(G, N, K, dtype, "row-major", seed=17)
    a, b = rand(4, 64, 128, dtype=dtype, seed=18), rand(4, 128, 96, dtype=dtype, seed=19)
    offs = ends_of(ROUTINGS["ragged"])
    end = sum(ROUTINGS["ragged"])
    compiled = torch.compile(experts, fullgraph=True, backend=backend)
    y, z = compiled(x, w1, w2, offs, a, b)
    h = torch.relu(reference(x, w1, offs)).to(dtype)  # rounded as the call's h is
    close(y, reference(h, w2, offs), dtype, end)
    assert y.shape == (T, K) and z.shape == (4, 64, 96)
    close(z, 2 * torch.bmm(a.float(), b.float()), dtype)
    # Another routing, the same compiled function: offs is an input, read when the kernel runs.
    offs = ends_of(ROUTINGS["skewed"])
    end = sum(ROUTINGS["skewed"])
    y, _ = compiled(x, w1, w2, offs, a, b)
    h = torch.relu(reference(x, w1, offs)).to(dtype)
    close(y, reference(h, w2, offs), dtype, end)


@pytest.mark.skipif(torch.cuda.get_device_capability() >= (8, 0),
                    reason="mma_sm80 has grouped kernels from sm_80 on")
def test_gpus_before_sm80_refuse_grouped_problems_by_name():
    x, w = rand(T, K, dtype=torch.bfloat16, seed=20), weights(G, K, N, torch.bfloat16, "row-major")
    with pytest.raises(gemmtune.Error) as e:
        gemmtune.grouped_mm(x, w, ends_of(ROUTINGS["uniform"]))
    assert e.value.code == "unsupported" and "no kernel family supports" in str(e.value), e.value
    with pytest.raises(gemmtune.Error) as e:
        gemmtune.grouped_mm_masked(x.view(G, T // G, K), w, counts_of(COUNTS["mixed"]))
    assert e.value.code == "unsupported" and "no kernel family supports" in str(e.value), e.value


# ---------------------------------------------------------------------------------------------
# grouped_mm_masked: x (G, CAP, K), counts[g] of each group's CAP rows are tokens

CAP = 64  # T // G: the same x viewed as (G, CAP, K)
COUNTS = {
    "mixed": [0, 64, 5, 64, 0, 37, 1, 63],  # empty groups, full ones, rows ending mid-tile
    "all full": [64] * 8,
    "all empty": [0] * 8,
    "one token each": [1] * 8,
    "first and last": [64, 0, 0, 0, 0, 0, 0, 17],
}


def counts_of(sizes):
    return torch.tensor(sizes, dtype=torch.int32, device="cuda")


def in_groups(counts, cap):
    """(G, cap) bool: the rows of the groups, r < counts[g]."""
    return torch.arange(cap, device="cuda") < counts.unsqueeze(1)


def masked_reference(x, w, counts):
    """The definition in f32: out[g, :counts[g]] = x[g, :counts[g]] @ w[g]; NaN past a count."""
    out = torch.full((x.shape[0], x.shape[1], w.shape[2]), float("nan"), device="cuda")
    for g, count in enumerate(counts.tolist()):
        out[g, :count] = x[g, :count].float() @ w[g].float()
    return out


def close_masked(got, want, counts, dtype, untouched=None):
    """got against want on the groups' rows; the rows past a count hold `untouched` (NaN: never
    written), where given."""
    rows = in_groups(counts, got.shape[1])
    close(got[rows], want[rows], dtype)
    if untouched is not None:
        rest = got[~rows].float()
        kept = rest.isnan() if math.isnan(untouched) else rest == untouched
        assert kept.all(), "rows past a count were written"


@hopper
@pytest.mark.parametrize("counts_name", list(COUNTS))
@pytest.mark.parametrize("striding", STRIDINGS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_masked_matches_a_per_group_reference(dtype, striding, counts_name):
    x = rand(G, CAP, K, dtype=dtype, seed=21)
    w = weights(G, K, N, dtype, striding, seed=22)
    counts = counts_of(COUNTS[counts_name])
    plan = _torch._plan_grouped_mm_masked(*(_torch._described(t) for t in (x, w, counts)), None,
                                          None)
    assert plan.masked and plan.problem.layout == ("nn" if striding == "row-major" else "tn")
    assert not plan.copy_x and not plan.copy_w
    want = masked_reference(x, w, counts)
    y = gemmtune.grouped_mm_masked(x, w, counts)
    assert y.shape == (G, CAP, N) and y.dtype == dtype
    close_masked(y, want, counts, dtype)
    # out=: the groups' rows written in place, the rows past a count left as they were.
    out = torch.full((G, CAP, N), float("nan"), dtype=dtype, device="cuda")
    assert gemmtune.grouped_mm_masked(x, w, counts, out=out) is out
    close_masked(out, want, counts, dtype, untouched=float("nan"))
    zeros = torch.zeros(G, CAP, N, dtype=dtype, device="cuda")
    gemmtune.grouped_mm_masked(x, w, counts, out=zeros)
    close_masked(zeros, want, counts, dtype, untouched=0.0)


@hopper
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_masked_other_layouts_and_outputs(dtype):
    counts = counts_of(COUNTS["mixed"])
    x, w = rand(G, CAP, K, dtype=dtype, seed=23), weights(G, K, N, dtype, "row-major", seed=24)
    want = masked_reference(x, w, counts)
    # Padded rows of x, w and out: read and written in place.
    xp = torch.empty(G, CAP, K + 8, dtype=dtype, device="cuda")[:, :, :K].copy_(x)
    wp = torch.empty(G, K, N + 8, dtype=dtype, device="cuda")[:, :, :N].copy_(w)
    out = torch.full((G, CAP, N + 8), float("nan"), dtype=dtype, device="cuda")[:, :, :N]
    close_masked(gemmtune.grouped_mm_masked(xp, wp, counts, out=out), want, counts, dtype,
                 untouched=float("nan"))
    # x.transpose(1, 2) of a (G, K, CAP) tensor: its rows do not flatten, so it is copied.
    xt = x.transpose(1, 2).contiguous().transpose(1, 2)
    plan = _torch._plan_grouped_mm_masked(*(_torch._described(t) for t in (xt, w, counts)), None,
                                          None)
    assert plan.copy_x
    close_masked(gemmtune.grouped_mm_masked(xt, w, counts), want, counts, dtype)
    y = f32_or_refused(lambda: gemmtune.grouped_mm_masked(x, w, counts, out_dtype=torch.float32))
    if y is not None:
        close_masked(y, want, counts, dtype)
    # K = 0: the groups' rows are sums over nothing; the rows past a count are left alone.
    out = torch.full((G, CAP, N), 7.0, dtype=dtype, device="cuda")
    gemmtune.grouped_mm_masked(x[:, :, :0], w[:, :0], counts, out=out)
    rows = in_groups(counts, CAP)
    assert (out[rows] == 0).all() and (out[~rows] == 7).all()


@hopper
def test_a_captured_masked_graph_replays_other_counts():
    dtype = torch.bfloat16
    x, w = rand(G, CAP, K, dtype=dtype, seed=25), weights(G, K, N, dtype, "transposed", seed=26)
    counts = counts_of(COUNTS["all full"])
    out = torch.empty(G, CAP, N, dtype=dtype, device="cuda")
    warm_up(lambda: gemmtune.grouped_mm_masked(x, w, counts, out=out))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gemmtune.grouped_mm_masked(x, w, counts, out=out)
    # The kernel reads the counts when it runs: each replay follows what counts holds then, and
    # writes no row past them.
    for name in ("mixed", "first and last", "one token each"):
        counts.copy_(counts_of(COUNTS[name]))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        close_masked(out, masked_reference(x, w, counts), counts, dtype, untouched=float("nan"))


@hopper
@pytest.mark.skipif(not gemmtune.torch_operators, reason="torch < 2.4: no torch.library.custom_op")
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_masked_under_torch_compile(backend):
    def experts(x, w, counts):
        return gemmtune.grouped_mm_masked(x, w, counts) * 2

    dtype = torch.bfloat16
    x, w = rand(G, CAP, K, dtype=dtype, seed=27), weights(G, K, N, dtype, "transposed", seed=28)
    compiled = torch.compile(experts, fullgraph=True, backend=backend)
    for name in ("mixed", "first and last"):  # counts are an input, read when the kernel runs
        counts = counts_of(COUNTS[name])
        y = compiled(x, w, counts)
        assert y.shape == (G, CAP, N) and y.dtype == dtype
        close_masked(y, 2 * masked_reference(x, w, counts), counts, dtype)
