"""gated_linear without a GPU: the gated problem (M = 2I, D of I rows, ldc = I, the gated
epilogue's name), the activations and layouts it takes, the descriptor's gate attribute, the call
it makes, and the errors."""
import pytest

import gemmtune
from conftest import FakeCudaArray, no_gpu_only
from gemmtune import _api, _library
from gemmtune._plan import DataTypes, Problem
from test_epilogue import FakeBackend, header_enum
from test_types import CountingLibrary, address_value

X, W, BIAS = (2, 3, 4096), (2 * 11008, 4096), (2 * 11008,)


def test_the_gate_attribute_and_codes_are_gemmtune_hs():
    assert header_enum("GEMMTUNE_MATMUL_DESC_")["gate"] == _library.GATE_ATTRIBUTE
    assert header_enum("GEMMTUNE_GATE_") == _library.GATES


def test_gated_epilogue_names_are_the_librarys_and_read_back():
    cases = {("none", "silu", "halves"): "swiglu", ("m", "gelu", "halves"): "bias,geglu",
             ("n", "gelu_tanh", "interleaved"): "bias_n,geglu_tanh,interleaved",
             ("none", "relu", "interleaved"): "reglu,interleaved"}
    for parts, name in cases.items():
        assert _library.epilogue_name(*parts) == name
        assert _library.parse_epilogue(name) == parts
        assert _library.is_gated(name)
    assert _library.parse_epilogue("interleaved,swiglu,bias") == ("m", "silu", "interleaved")
    assert not _library.is_gated("bias,silu")
    for bad in ("swiglu,geglu", "silu,swiglu", "swiglu,interleaved,interleaved"):
        with pytest.raises(gemmtune.Error, match=f"epilogue '{bad}': unknown or repeated part"):
            _library.parse_epilogue(bad)
    with pytest.raises(gemmtune.Error, match="interleaved is the layout of a gated one"):
        _library.parse_epilogue("bias,silu,interleaved")
    with pytest.raises(gemmtune.Error, match="a gated epilogue takes silu, gelu, gelu_tanh or "
                                             "relu, not identity"):
        _library.epilogue_name("none", "identity", "halves")
    with pytest.raises(gemmtune.Error, match="unknown gate 'pairs'"):
        _library.epilogue_name("none", "silu", "pairs")


def test_gated_activations_by_name_module_and_function():
    name = _api.gated_activation_name
    for text, activation in (("silu", "silu"), ("swiglu", "silu"), ("GELU", "gelu"),
                             ("geglu", "gelu"), ("gelu_tanh", "gelu_tanh"),
                             ("geglu_tanh", "gelu_tanh"), ("relu", "relu"), ("reglu", "relu")):
        assert name(text) == name(text, "interleaved") == activation

    class SiLU:
        pass

    def gelu(x):
        return x
    assert name(SiLU()) == "silu"
    assert name(gelu) == "gelu"
    for bad in (None, "identity", "none", "swish"):
        with pytest.raises(gemmtune.Error, match="a gated linear takes 'silu' \\(SwiGLU\\)"):
            name(bad)
    with pytest.raises(gemmtune.Error, match="layout is 'pairs': 'halves'"):
        name("silu", "pairs")


def test_the_gated_problem_has_m_2i_and_d_of_i_rows():
    x, w, bias = FakeCudaArray(X), FakeCudaArray(W), FakeCudaArray(BIAS)
    p = gemmtune.problem_gated_linear(x, w)
    assert tuple(p) == ("f16", "tn", 22016, 6, 4096, 4096, 4096, 11008, False, "none", "precise",
                        "swiglu", "exact")
    assert p.output_rows == 11008
    assert p.shape_line() == "22016 6 4096 f16 tn epilogue=swiglu"  # ldc = I is tight
    p = gemmtune.problem_gated_linear(x, w, bias, activation="gelu", layout="interleaved")
    assert (p.epilogue, p.ldc, p.reads_c) == ("bias,geglu,interleaved", 11008, False)
    assert p.shape_line() == "22016 6 4096 f16 tn epilogue=bias,geglu,interleaved"
    assert gemmtune.problem_gated_linear(x, w, activation="reglu").epilogue == "reglu"
    assert gemmtune.problem_gated_linear(x, w, out_dtype="f32").dtype == "f16*f16->f32"
    wide = Problem("bf16", "tn", 22016, 6, 4096, 4096, 4096, 11010, epilogue="swiglu")
    assert wide.shape_line() == "22016 6 4096 bf16 tn epilogue=swiglu ldc=11010"


def test_gated_linear_checks_its_operands():
    x, w = FakeCudaArray(X), FakeCudaArray(W)
    with pytest.raises(gemmtune.Error, match=r"bias has shape \(11008,\); gated_linear needs "
                                             r"\(22016,\)"):
        gemmtune.problem_gated_linear(x, w, FakeCudaArray((11008,)))
    with pytest.raises(gemmtune.Error, match="w_gate_up has 11007 rows: gated_linear needs an "
                                             "even number"):
        gemmtune.problem_gated_linear(x, FakeCudaArray((11007, 4096)))
    with pytest.raises(gemmtune.Error, match="w_gate_up is 3-D"):
        gemmtune.problem_gated_linear(x, FakeCudaArray((2, 11008, 4096)))
    with pytest.raises(gemmtune.Error, match=r"x has shape \(2, 3, 4096\) and w_gate_up "
                                             r"\(22016, 2048\)"):
        gemmtune.problem_gated_linear(x, FakeCudaArray((22016, 2048)))
    with pytest.raises(gemmtune.Error, match="activation is 'swish'"):
        gemmtune.gated_linear(x, w, activation="swish")  # before anything else is looked at
    with pytest.raises(gemmtune.Error, match="layout is 'stacked'"):
        gemmtune.gated_linear(x, w, layout="stacked")
    with pytest.raises(gemmtune.Error, match="gemmtune needs M, N and K >= 1"):
        gemmtune.problem_gated_linear(FakeCudaArray((0, 4096)), w)


def test_a_descriptor_carries_the_gate():
    types = DataTypes.uniform("bf16")
    desc = _library.descriptor(types, "tn", epilogue="bias,swiglu,interleaved")
    assert (desc.get(_library.BIAS_ATTRIBUTE), desc.get(_library.ACTIVATION_ATTRIBUTE),
            desc.get(_library.GATE_ATTRIBUTE)) == (1, 4, 2)
    assert _library.descriptor(types, "tn", epilogue="geglu").get(_library.GATE_ATTRIBUTE) == 1
    assert _library.descriptor(types, "tn", epilogue="bias,gelu").get(_library.GATE_ATTRIBUTE) == 0
    own = _library.bias_descriptor(types, "tn", "bias,reglu")
    assert (own.get(_library.ACTIVATION_ATTRIBUTE), own.get(_library.GATE_ATTRIBUTE)) == (1, 1)


def test_gated_linear_makes_one_call_into_d_of_i_columns(monkeypatch):
    counting = CountingLibrary(_library.library())
    monkeypatch.setattr(_library, "_lib", counting)
    x = FakeCudaArray((6, 64), "<f2", ptr=0x7F0000000000)
    w = FakeCudaArray((64, 64), "<f2", ptr=0x7F0000100000)  # 2I = 64: I = 32
    bias = FakeCudaArray((64,), "<f2", ptr=0x7F0000300000)
    for activation, layout, name in (("silu", "halves", "bias,swiglu"),
                                     ("gelu_tanh", "interleaved", "bias,geglu_tanh,interleaved")):
        y = _api.run_gated_linear(x, w, bias, None, FakeBackend, activation=activation,
                                  layout=layout)
        assert y.__cuda_array_interface__["shape"] == (6, 32)
        device, handle, m, n, k, alpha_p, a, lda, b, ldb, beta_p, c, ldc, stream = \
            counting.matmuls[-1]
        assert (m, n, k, lda, ldb, ldc) == (64, 6, 64, 64, 64, 32)
        assert (a, b, c) == (0x7F0000100000, 0x7F0000000000, 0x7F0000200000)
        assert (address_value(alpha_p), address_value(beta_p)) == (1.0, 0.0)
        desc = _library.bias_descriptor(DataTypes.uniform("f16"), "tn", name)
        assert handle == desc.handle
        assert desc.get_pointer(_library.BIAS_POINTER) == 0x7F0000300000
    _api.run_gated_linear(x, w, None, None, FakeBackend, activation="relu", layout="halves")
    handle = counting.matmuls[-1][1]
    assert handle == _library.descriptor(DataTypes.uniform("f16"), "tn", epilogue="reglu").handle


class ArrayBackend(FakeBackend):
    finish_gated = _api._ArrayBackend.finish_gated


def test_arrays_without_features_are_refused():
    x, w = FakeCudaArray((6, 0), "<f2"), FakeCudaArray((64, 0), "<f2")
    with pytest.raises(gemmtune.Error, match="x has no features"):
        _api.run_gated_linear(x, w, None, None, ArrayBackend)


@no_gpu_only
def test_without_a_gpu_select_gated_linear_raises_the_librarys_no_device_error():
    x, w, bias = FakeCudaArray((6, 64)), FakeCudaArray((64, 64)), FakeCudaArray((64,))
    with pytest.raises(gemmtune.Error, match="^no GPU: ") as e:
        gemmtune.select_gated_linear(x, w, bias, activation="geglu", layout="interleaved")
    assert e.value.code == "no_device"


def test_record_writes_the_gated_epilogue_with_ldc_i_tight(tmp_path):
    for p in (Problem("bf16", "tn", 22016, 8, 4096, 4096, 4096, 11008, epilogue="swiglu"),
              Problem("bf16", "tn", 22016, 8, 4096, 4096, 4096, 11016,
                      epilogue="bias,geglu,interleaved")):
        assert gemmtune.record(p, tmp_path / "shapes.txt")
        lines = [line for line in (tmp_path / "shapes.txt").read_text().splitlines()
                 if not line.startswith("#")]
        assert lines[-1] == p.shape_line()
    assert lines == ["22016 8 4096 bf16 tn epilogue=swiglu",
                     "22016 8 4096 bf16 tn epilogue=bias,geglu,interleaved ldc=11016"]


def test_the_operator_fakes_the_gated_shape():
    torch = pytest.importorskip("torch")
    if not gemmtune.torch_operators:
        pytest.skip("torch < 2.4: no custom operators")
    x = torch.empty(2, 3, 64, dtype=torch.bfloat16, device="meta")  # the fake implementation's
    w = torch.empty(128, 64, dtype=torch.bfloat16, device="meta")
    y = torch.ops.gemmtune.gated_linear(x, w, None, "silu", "interleaved")
    assert (tuple(y.shape), y.dtype) == ((2, 3, 64), torch.bfloat16)
    meta = torch.empty(5, 64, dtype=torch.float16, device="meta")
    p = gemmtune.problem_gated_linear(meta, torch.empty(128, 64, dtype=torch.float16,
                                                        device="meta"))
    assert (p.m, p.n, p.k, p.ldc, p.epilogue) == (128, 5, 64, 64, "swiglu")
