"""scaled_grouped_mm without a GPU or torch: float8 experts (x (T, K), w (G, K, N) with each
w[g] column-major, offs) become the library's grouped tn problem with w as its A; the scales'
shapes give the scaling, and each goes to its operand in the layouts of gemmtune/types.hpp (the
groups' scales of A one after another), copied where torch's tensor is laid out otherwise; bad
arguments are ValueError or TypeError naming the argument."""
import pytest

import gemmtune
from conftest import no_gpu_only
from gemmtune import _api
from gemmtune._library import InvalidType, InvalidValue
from gemmtune._scaled import Tensor
from gemmtune._scaled_grouped import plan_scaled_grouped_mm

T, K, N, G = 300, 640, 2112, 8
KB, NB = 5, 17  # ceil(K / 128), ceil(N / 128)


def tokens(t=T, dtype="e4m3"):
    return Tensor((t, K), (K, 1), dtype, 0)


def weights(dtype="e4m3"):  # W.transpose(1, 2) of a contiguous (G, N, K) W
    return Tensor((G, K, N), (N * K, 1, K), dtype, 0)


def ends():
    return Tensor((G,), (1,), "int32", 0)


def scales(scaling):
    """(scale_x, scale_w) of the scaling, laid out as the library reads them."""
    if scaling == "tensor":
        return Tensor((), (), "f32", 0), Tensor((G,), (1,), "f32", 0)
    if scaling == "row":
        return Tensor((T,), (1,), "f32", 0), Tensor((G, N), (N, 1), "f32", 0)
    return Tensor((T, KB), (1, T), "f32", 0), Tensor((G, KB, NB), (KB * NB, NB, 1), "f32", 0)


@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
def test_the_problem_is_grouped_tn_with_w_as_a(scaling):
    sx, sw = scales(scaling)
    plan = plan_scaled_grouped_mm(tokens(), weights(), sx, sw, ends(), "bf16", need_gpu=False)
    p = plan.problem
    assert (p.layout, p.m, p.n, p.k, p.lda, p.ldb, p.ldc) == ("tn", N, T, K, K, K, N)
    assert (p.dtype, p.scaling, p.accumulation) == ("e4m3*e4m3->bf16", scaling, "precise")
    assert plan.groups == G and plan.shape == (T, N)
    assert plan.types.name == "e4m3*e4m3->bf16"
    assert plan.scale_a.argument == "scale_w" and plan.scale_b.argument == "scale_x"
    assert not plan.scale_a.copy and not plan.scale_b.copy
    # The library's shapes (scale_shape_a/b): the G groups' scales of A one after another.
    want = {"tensor": ((1, G), (1, 1)), "row": ((N, G), (T, 1)), "block": ((NB, KB * G), (T, KB))}
    assert ((plan.scale_a.rows, plan.scale_a.cols), (plan.scale_b.rows, plan.scale_b.cols)) == \
        want[scaling]


def test_scales_in_other_layouts_are_copied():
    _, sw = scales("block")
    sx_rows = Tensor((T, KB), (KB, 1), "f32", 0)  # row-major: the library reads it transposed
    sw_t = Tensor((G, KB, NB), (KB * NB, 1, KB), "f32", 0)
    plan = plan_scaled_grouped_mm(tokens(), weights(), sx_rows, sw_t, ends(), "bf16",
                                  need_gpu=False)
    assert plan.scale_b.copy and plan.scale_b.layout == "outer-dim-major"
    assert plan.scale_a.copy and plan.scale_a.layout == "contiguous"
    sx, _ = scales("row")
    strided_w = Tensor((G, N), (1, G), "f32", 0)
    assert plan_scaled_grouped_mm(tokens(), weights(), sx, strided_w, ends(), "bf16",
                                  need_gpu=False).scale_a.copy


def test_fast_accumulation_is_for_tensor_and_row_scales():
    for scaling, want in (("tensor", "fast"), ("row", "fast"), ("block", "precise")):
        sx, sw = scales(scaling)
        plan = plan_scaled_grouped_mm(tokens(), weights(), sx, sw, ends(), "bf16",
                                      need_gpu=False, use_fast_accum=True)
        assert plan.problem.accumulation == want


def test_empty_problems_have_no_problem():
    sx, sw = scales("tensor")
    assert plan_scaled_grouped_mm(tokens(0), weights(), sx, sw, ends(), "bf16",
                                  need_gpu=False).problem is None


def expect(error, words, *args, **kwargs):
    with pytest.raises(error) as raised:
        plan_scaled_grouped_mm(*args, need_gpu=False, **kwargs)
    for w in words:
        assert w in str(raised.value), str(raised.value)


def test_bad_arguments_say_what_they_must_be():
    sx, sw = scales("block")
    expect(InvalidValue, ["x must be a 2-D (T, K)"], Tensor((2, T, K), (T * K, K, 1), "e4m3", 0),
           weights(), sx, sw, ends(), "bf16")
    expect(InvalidValue, ["w must be (G, K, N) = (G, 640, N)"], tokens(),
           Tensor((G, N, K), (N * K, K, 1), "e4m3", 0), sx, sw, ends(), "bf16")
    expect(InvalidValue, ["offs must be (G,) = (8,)"], tokens(), weights(), sx, sw,
           Tensor((G + 1,), (1,), "int32", 0), "bf16")
    expect(InvalidType, ["x has dtype bfloat16", "gemmtune.grouped_mm takes"],
           tokens(dtype="bf16"), weights(), sx, sw, ends(), "bf16")
    expect(InvalidType, ["offs has dtype int64"], tokens(), weights(), sx, sw,
           Tensor((G,), (1,), "int64", 0), "bf16")
    expect(InvalidType, ["out_dtype is float64"], tokens(), weights(), sx, sw, ends(), "float64")
    expect(InvalidValue, ["scale_x has shape (300, 6) and scale_w (8, 5, 17)", "blockwise"],
           tokens(), weights(), Tensor((T, 6), (1, T), "f32", 0), sw, ends(), "bf16")
    expect(InvalidValue, ["w must be (G, K, N) with each w[g] column-major"], tokens(),
           Tensor((G, K, N), (K * N, N, 1), "e4m3", 0), sx, sw, ends(), "bf16")
    expect(InvalidValue, ["x must be row-major"], Tensor((T, K), (1, T), "e4m3", 0), weights(),
           sx, sw, ends(), "bf16")


def test_without_torch_it_says_so():
    if gemmtune._torch_module is not None:
        pytest.skip("torch is importable here")
    with pytest.raises(gemmtune.Error, match="takes torch tensors"):
        gemmtune.scaled_grouped_mm(None, None, None, None, None)


def test_the_library_wants_the_groups_scales_of_a():
    """The library checks the call before a GPU is needed: without the scale pointers it names
    the groups' scales of A it wants."""
    sx, sw = scales("block")
    plan = plan_scaled_grouped_mm(tokens(), weights(), sx, sw, ends(), "bf16", need_gpu=False)
    plan = plan._replace(device=0)
    with pytest.raises(gemmtune.Error, match=r"scaling block needs the scales of A: .* \(a device "
                                             r"pointer to 17 x 40 fp32 scales: the 8 groups' 17 x "
                                             r"5 one after another\)") as e:
        _api.run_scaled_grouped(plan, 0x7F0000000000, 0x7F0001000000,
                                {"scale_x": 0x7F0004000000, "scale_w": 0}, 0x7F0003000000,
                                0x7F0002000000, 0)
    assert e.value.code == "invalid_argument"


@no_gpu_only
def test_without_a_gpu_the_library_takes_the_problem_and_says_no_gpu():
    for scaling in ("tensor", "row", "block"):
        sx, sw = scales(scaling)
        plan = plan_scaled_grouped_mm(tokens(), weights(), sx, sw, ends(), "bf16", need_gpu=False)
        plan = plan._replace(device=0)
        with pytest.raises(gemmtune.Error, match="^no GPU: ") as e:
            _api.run_scaled_grouped(plan, 0x7F0000000000, 0x7F0001000000,
                                    {"scale_x": 0x7F0004000000, "scale_w": 0x7F0005000000},
                                    0x7F0003000000, 0x7F0002000000, 0)
        assert e.value.code == "no_device"
