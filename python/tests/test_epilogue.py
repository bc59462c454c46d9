"""The epilogue without a GPU: linear's bias and activation become the problem's epilogue (the
bias along M, C no longer read), the names linear takes, the descriptor that carries the
epilogue and the bias pointer, and the errors."""
import re

import pytest

import gemmtune
from conftest import ROOT, FakeCudaArray, no_gpu_only
from gemmtune import _api, _library
from gemmtune._plan import DataTypes
from test_types import CountingLibrary, address_value


def header_enum(prefix):
    """NAME -> value of the enumerators `prefix`NAME = value in gemmtune.h."""
    text = (ROOT / "runtime" / "include" / "gemmtune" / "gemmtune.h").read_text()
    return {name.lower(): int(value)
            for name, value in re.findall(rf"\b{prefix}(\w+) = (\d+)", text)}


def test_the_epilogue_attributes_and_codes_are_gemmtune_hs():
    attributes = header_enum("GEMMTUNE_MATMUL_DESC_")
    assert attributes["bias"] == _library.BIAS_ATTRIBUTE
    assert attributes["activation"] == _library.ACTIVATION_ATTRIBUTE
    assert attributes["bias_pointer"] == _library.BIAS_POINTER
    assert attributes["d_pointer"] == _library.D_POINTER
    assert attributes["aux"] == _library.AUX_ATTRIBUTE
    assert attributes["aux_pointer"] == _library.AUX_POINTER
    assert header_enum("GEMMTUNE_BIAS_") == _library.BIASES
    assert header_enum("GEMMTUNE_ACTIVATION_") == _library.ACTIVATIONS


def test_epilogue_names_are_the_librarys_and_read_back():
    cases = {("none", "identity"): "none", ("m", "identity"): "bias", ("n", "identity"): "bias_n",
             ("none", "relu"): "relu", ("m", "gelu"): "bias,gelu",
             ("n", "gelu_tanh"): "bias_n,gelu_tanh", ("m", "silu"): "bias,silu"}
    for parts, name in cases.items():
        assert _library.epilogue_name(*parts) == name
        assert _library.parse_epilogue(name) == parts + ("none",)
    assert _library.parse_epilogue("") == ("none", "identity", "none")
    assert _library.parse_epilogue("gelu,bias") == ("m", "gelu", "none")  # any order
    assert _library.parse_epilogue("bias,") == ("m", "identity", "none")  # an empty part is none
    for bad in ("bias,bias_n", "relu,gelu", "swish", "identity"):
        with pytest.raises(gemmtune.Error, match=f"epilogue '{bad}': unknown or repeated part"):
            _library.parse_epilogue(bad)
    with pytest.raises(gemmtune.Error, match="unknown bias 'k'"):
        _library.epilogue_name("k", "relu")
    with pytest.raises(gemmtune.Error, match="unknown activation 'tanh'"):
        _library.epilogue_name("m", "tanh")


def test_activations_by_name_module_and_function():
    name = _api.activation_name
    assert name(None) == name("identity") == name("none") == "identity"
    for text in ("relu", "gelu", "gelu_tanh", "silu"):
        assert name(text) == name(text.upper()) == text
    assert name("gelu", approximate="tanh") == name("gelu_tanh", approximate="tanh") == "gelu_tanh"
    assert name("gelu", approximate="none") == "gelu"

    # torch.nn's modules are known by class name, GELU by its approximate too.
    class GELU:
        def __init__(self, approximate="none"):
            self.approximate = approximate

    class SiLU:
        pass

    class ReLU:
        pass

    assert name(GELU()) == "gelu" and name(GELU("tanh")) == "gelu_tanh"
    assert name(SiLU()) == "silu" and name(ReLU()) == "relu"

    def silu(x):  # F.silu, F.relu, F.gelu and torch.relu by their __name__
        return x

    assert name(silu) == "silu"


def test_unknown_activations_are_errors_that_list_the_known_ones():
    for bad in ("swish", "tanh", 3, lambda x: x):
        with pytest.raises(gemmtune.Error, match="expected None, 'relu', 'gelu', 'gelu_tanh' or "
                                                 "'silu'"):
            _api.activation_name(bad)
    with pytest.raises(gemmtune.Error, match="approximate='tanh' is GELU's tanh form, but the "
                                             "activation is relu"):
        _api.activation_name("relu", approximate="tanh")
    with pytest.raises(gemmtune.Error, match="approximate is 'exact': F.gelu's 'none' or 'tanh'"):
        _api.activation_name("gelu", approximate="exact")


X, W, BIAS = (2, 3, 4096), (11008, 4096), (11008,)


def test_linear_with_a_bias_reads_no_c_and_has_the_bias_along_m():
    x, w, bias = FakeCudaArray(X), FakeCudaArray(W), FakeCudaArray(BIAS)
    p = gemmtune.problem_linear(x, w, bias)
    assert tuple(p) == ("f16", "tn", 11008, 6, 4096, 4096, 4096, 11008, False, "none", "precise",
                        "bias", "exact")
    assert p.shape_line() == "11008 6 4096 f16 tn epilogue=bias"
    p = gemmtune.problem_linear(x, w, bias, activation="gelu", approximate="tanh")
    assert (p.epilogue, p.reads_c) == ("bias,gelu_tanh", False)
    assert p.shape_line() == "11008 6 4096 f16 tn epilogue=bias,gelu_tanh"
    assert gemmtune.problem_linear(x, w, activation="silu").epilogue == "silu"
    assert gemmtune.problem_linear(x, w).epilogue == "none"
    assert gemmtune.problem_linear(x, w, out_dtype="f32", activation="relu").dtype == \
        "f16*f16->f32"


def test_linear_checks_its_bias_and_activation():
    x, w = FakeCudaArray(X), FakeCudaArray(W)
    with pytest.raises(gemmtune.Error, match=r"bias has shape \(4096,\); linear needs \(11008,\)"):
        gemmtune.problem_linear(x, w, FakeCudaArray((4096,)))
    with pytest.raises(gemmtune.Error, match="activation is 'swish'"):
        gemmtune.problem_linear(x, w, activation="swish")
    with pytest.raises(gemmtune.Error, match="activation is 'swish'"):
        gemmtune.linear(x, w, activation="swish")  # before anything else is looked at


def test_a_descriptor_carries_the_epilogue_and_this_threads_carries_the_bias():
    types = DataTypes.uniform("bf16")
    desc = _library.descriptor(types, "tn", epilogue="bias,silu")
    assert desc is _library.descriptor(types, "tn", epilogue="bias,silu")  # kept
    assert (desc.get(_library.BIAS_ATTRIBUTE), desc.get(_library.ACTIVATION_ATTRIBUTE)) == (1, 4)
    plain = _library.descriptor(types, "tn")
    assert plain is not desc
    assert (plain.get(_library.BIAS_ATTRIBUTE), plain.get(_library.ACTIVATION_ATTRIBUTE)) == (0, 0)
    own = _library.bias_descriptor(types, "tn", "bias_n,gelu")
    assert own is _library.bias_descriptor(types, "tn", "bias_n,gelu")  # this thread's, kept
    assert (own.get(_library.BIAS_ATTRIBUTE), own.get(_library.ACTIVATION_ATTRIBUTE)) == (2, 2)
    assert own.get_pointer(_library.BIAS_POINTER) == 0
    own.set_bias(0x7F0000500000)
    own.set_d(0x7F0000600000)
    assert own.get_pointer(_library.BIAS_POINTER) == 0x7F0000500000
    assert own.get_pointer(_library.D_POINTER) == 0x7F0000600000
    own.set_d(0)
    assert own.get_pointer(_library.D_POINTER) == 0
    with pytest.raises(gemmtune.Error, match="unknown or repeated part 'tanh'"):
        _library.MatmulDesc(types, "tn", epilogue="bias,tanh")


class FakeResult(FakeCudaArray):
    def reshape(self, shape):
        assert tuple(shape) == self.__cuda_array_interface__["shape"]
        return self


class FakeBackend:
    """_ArrayBackend with results of FakeCudaArray: enough to reach the library call."""
    allocate = staticmethod(lambda like, view, m, n, dtype: FakeResult(
        (m, n), {"f16": "<f2", "f32": "<f4"}[dtype], ptr=0x7F0000200000))
    default_stream = staticmethod(lambda ops: 0)
    rows = staticmethod(lambda x, view: _api.rows_view(view))
    bias_vector = _api._ArrayBackend.bias_vector


def test_linear_passes_the_bias_to_the_epilogue_and_beta_0(monkeypatch):
    counting = CountingLibrary(_library.library())
    monkeypatch.setattr(_library, "_lib", counting)
    x = FakeCudaArray((6, 64), "<f2", ptr=0x7F0000000000)
    w = FakeCudaArray((32, 64), "<f2", ptr=0x7F0000100000)
    bias = FakeCudaArray((32,), "<f2", ptr=0x7F0000300000)
    for activation in ("gelu", "relu"):
        y = _api.run_linear(x, w, bias, None, FakeBackend, activation=activation)
        assert y.__cuda_array_interface__["shape"] == (6, 32)
        device, handle, m, n, k, alpha_p, a, lda, b, ldb, beta_p, c, ldc, stream = \
            counting.matmuls[-1]
        assert (m, n, k, a, b, c) == (32, 6, 64, 0x7F0000100000, 0x7F0000000000, 0x7F0000200000)
        assert (address_value(alpha_p), address_value(beta_p)) == (1.0, 0.0)  # C is not read
        desc = _library.bias_descriptor(DataTypes.uniform("f16"), "tn", f"bias,{activation}")
        assert handle == desc.handle
        assert desc.get_pointer(_library.BIAS_POINTER) == 0x7F0000300000
    # Without a bias: the descriptor kept for the epilogue, no pointer.
    _api.run_linear(x, w, None, None, FakeBackend, activation="silu")
    handle = counting.matmuls[-1][1]
    assert handle == _library.descriptor(DataTypes.uniform("f16"), "tn", epilogue="silu").handle


def test_the_pre_activation_is_a_second_output_of_the_same_call(monkeypatch):
    assert _library.epilogue_name("m", "gelu", aux=True) == "bias,gelu,aux"
    assert _library.parse_epilogue("bias,gelu,aux") == ("m", "gelu", "none")
    assert _library.keeps_pre_activation("bias,gelu,aux")
    assert not _library.keeps_pre_activation("bias,gelu")
    with pytest.raises(gemmtune.Error, match="aux .* is for an activation that is not gated"):
        _library.epilogue_name("m", "identity", aux=True)
    counting = CountingLibrary(_library.library())
    monkeypatch.setattr(_library, "_lib", counting)
    addresses = iter((0x7F0000200000, 0x7F0000400000))

    class TwoResults(FakeBackend):
        allocate = staticmethod(lambda like, view, m, n, dtype: FakeResult(
            (m, n), "<f2", ptr=next(addresses)))

    x = FakeCudaArray((6, 64), "<f2", ptr=0x7F0000000000)
    w = FakeCudaArray((32, 64), "<f2", ptr=0x7F0000100000)
    bias = FakeCudaArray((32,), "<f2", ptr=0x7F0000300000)
    y, z = _api.run_linear(x, w, bias, None, TwoResults, activation="gelu",
                           keep_pre_activation=True)
    assert (y.__cuda_array_interface__["data"][0], z.__cuda_array_interface__["data"][0]) == (
        0x7F0000200000, 0x7F0000400000)
    handle, c = counting.matmuls[-1][1], counting.matmuls[-1][11]
    desc = _library.bias_descriptor(DataTypes.uniform("f16"), "tn", "bias,gelu,aux")
    assert (handle, c) == (desc.handle, 0x7F0000200000)
    assert desc.get(_library.AUX_ATTRIBUTE) == 1
    assert desc.get_pointer(_library.AUX_POINTER) == 0x7F0000400000
    assert desc.get_pointer(_library.BIAS_POINTER) == 0x7F0000300000
    assert _library.descriptor(DataTypes.uniform("f16"), "tn", "none").get(
        _library.AUX_ATTRIBUTE) == 0
    with pytest.raises(gemmtune.Error, match="return_pre_activation needs an activation"):
        _api.run_linear(x, w, bias, None, TwoResults, keep_pre_activation=True)


def test_a_bias_the_kernel_cannot_read_is_converted_or_refused():
    x, w = FakeCudaArray((6, 64), "<f2"), FakeCudaArray((32, 64), "<f2")
    # An f32 bias of an f16 result, and a strided one: only torch and CuPy are converted.
    for bias, what in ((FakeCudaArray((32,), "<f4"), "bias is f32 with stride 1"),
                       (FakeCudaArray((32,), "<f2", strides=(4,)), "bias is f16 with stride 2")):
        with pytest.raises(gemmtune.Error, match=f"{what}, but the kernel reads a contiguous bias "
                                                 r"of the result's dtype \(f16\)"):
            _api.run_linear(x, w, bias, None, FakeBackend)
    # A bias on another GPU than x.
    x0 = FakeCudaArray((6, 64), "<f2", dlpack_device=(2, 0))
    w0 = FakeCudaArray((32, 64), "<f2", dlpack_device=(2, 0))
    bias1 = FakeCudaArray((32,), "<f2", dlpack_device=(2, 1))
    with pytest.raises(gemmtune.Error, match="x is on GPU 0 but bias is on GPU 1"):
        _api.run_linear(x0, w0, bias1, None, FakeBackend)
    with pytest.raises(gemmtune.Error, match="x is on GPU 0 but bias is on GPU 1"):
        gemmtune.select_linear(x0, w0, bias1)


@no_gpu_only
def test_without_a_gpu_select_linear_raises_the_librarys_no_device_error():
    x, w, bias = FakeCudaArray((6, 64)), FakeCudaArray((32, 64)), FakeCudaArray((32,))
    with pytest.raises(gemmtune.Error, match="^no GPU: ") as e:
        gemmtune.select_linear(x, w, bias, activation="gelu")
    assert e.value.code == "no_device"


def test_record_writes_the_epilogue(tmp_path):
    p = gemmtune.Problem("bf16", "tn", 4096, 8, 4096, 4096, 4096, 4096, epilogue="bias,gelu")
    assert gemmtune.record(p, tmp_path / "shapes.txt")
    lines = (tmp_path / "shapes.txt").read_text().splitlines()
    assert lines[-1] == p.shape_line() == "4096 8 4096 bf16 tn epilogue=bias,gelu"


def test_record_refuses_an_epilogue_the_library_does_not_know(tmp_path):
    p = gemmtune.Problem("bf16", "tn", 4096, 8, 4096, 4096, 4096, 4096, epilogue="bias,tanh")
    with pytest.raises(gemmtune.Error, match="record: epilogue 'bias,tanh'"):
        gemmtune.record(p, tmp_path / "shapes.txt")
