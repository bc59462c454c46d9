"""How an f32 product is computed (precision) without a GPU: the descriptor's attribute, the
problem's field and its shapes-file line, GEMMTUNE_F32_PRECISION for arrays, and for torch
tensors torch.get_float32_matmul_precision(), read at each call, with the planned calls keyed
by it. torch is a stand-in here (FakeTorch): enough of it for gemmtune._torch's calls."""
import importlib
import math
import sys
import types

import pytest

import gemmtune
from conftest import FakeCudaArray
from gemmtune import _api, _library, _operands
from gemmtune._plan import TORCH_PRECISIONS, DataTypes, Problem, call_precision
from test_types import CountingLibrary

PRECISION = 19  # GEMMTUNE_MATMUL_DESC_PRECISION
F32 = DataTypes.uniform("f32")


def test_the_descriptor_sets_the_precision_it_is_given_and_none_else():
    codes = {None: -1, "exact": 0, "tf32": 1, "3xtf32": 2}  # GEMMTUNE_PRECISION_DEFAULT: -1
    descriptors = {p: _library.descriptor(F32, "nn", precision=p) for p in codes}
    assert {p: d.get(PRECISION) for p, d in descriptors.items()} == codes
    assert len({d.handle for d in descriptors.values()}) == 4  # one per precision
    assert _library.MatmulDesc(F32, "nn", precision="TF32").get(PRECISION) == 1
    with pytest.raises(gemmtune.Error, match=r"unknown precision 'fp16' \(expected exact, tf32 "
                                             r"or 3xtf32\)"):
        _library.MatmulDesc(F32, "nn", precision="fp16")


def test_a_precision_other_than_exact_is_written_after_the_accumulation():
    p = Problem("f32", "nt", 4096, 512, 1024, 4096, 512, 4096)
    assert p.precision == "exact"
    assert p.shape_line() == "4096 512 1024 f32 nt"
    assert p._replace(precision="tf32", epilogue="bias", reads_c=True).shape_line() == \
        "4096 512 1024 f32 nt precision=tf32 epilogue=bias beta=1"


def test_the_call_precision_is_the_given_one_else_f32s_default_else_exact():
    asked = []

    def default():
        asked.append(1)
        return "tf32"
    assert call_precision(F32, "3XTF32", default) == "3xtf32"
    assert call_precision(F32, None, default) == "tf32"
    assert call_precision(DataTypes.uniform("bf16"), None, default) == "exact"
    assert call_precision(DataTypes("f32", "f32", "bf16", "bf16"), None, default) == "exact"
    assert call_precision(DataTypes.uniform("bf16"), "tf32", default) == "tf32"  # the library's no
    assert len(asked) == 1, "the default is read for f32 calls only"
    with pytest.raises(gemmtune.Error, match="unknown precision 'high'"):
        call_precision(F32, "high", default)
    assert TORCH_PRECISIONS == {"highest": "exact", "high": "tf32", "medium": "tf32"}


def arrays(typestr="<f4"):
    """x (8 x 64) and w (32 x 64) of one dtype, as CUDA arrays."""
    return (FakeCudaArray((8, 64), typestr, ptr=0x7F0000000000),
            FakeCudaArray((32, 64), typestr, ptr=0x7F0000100000))


def test_arrays_take_gemmtune_f32_precision_unless_a_call_gives_one(monkeypatch):
    x, w = arrays()
    assert gemmtune.problem_linear(x, w).precision == "exact"
    monkeypatch.setenv("GEMMTUNE_F32_PRECISION", "TF32")
    assert gemmtune.problem_linear(x, w).precision == "tf32"
    assert gemmtune.problem_linear(x, w, precision="exact").precision == "exact"
    assert gemmtune.problem(x, FakeCudaArray((64, 32), "<f4"), precision="3xtf32").precision == \
        "3xtf32"
    assert gemmtune.problem_linear(*arrays("<f2")).precision == "exact", "f16 has one way"
    monkeypatch.setenv("GEMMTUNE_F32_PRECISION", "high")
    with pytest.raises(gemmtune.Error, match=r"GEMMTUNE_F32_PRECISION=high: expected exact, tf32 "
                                             r"or 3xtf32"):
        gemmtune.problem_linear(x, w)
    assert gemmtune.problem_linear(*arrays("<f2")).precision == "exact", "read for f32 only"


def test_a_precision_of_other_types_than_f32_is_the_librarys_refusal():
    with pytest.raises(gemmtune.Error, match="precision tf32 is for f32 operands, accumulator and "
                                             "output, not f16") as e:
        gemmtune.select_linear(*arrays("<f2"), precision="tf32")
    assert e.value.code == "invalid_argument"


def test_a_call_passes_the_descriptor_of_its_precision(monkeypatch):
    counting = CountingLibrary(_library.library())
    monkeypatch.setattr(_library, "_lib", counting)
    x, b = FakeCudaArray((8, 64), "<f4"), FakeCudaArray((64, 32), "<f4", ptr=0x7F0000100000)
    out = FakeCudaArray((8, 32), "<f4", ptr=0x7F0000200000)
    for precision, env in ((None, "exact"), ("tf32", "exact"), (None, "3xtf32"), ("exact", "tf32")):
        monkeypatch.setenv("GEMMTUNE_F32_PRECISION", env)
        gemmtune.matmul(x, b, out=out, precision=precision)
        handle = counting.matmuls[-1][1]
        assert handle == _library.descriptor(F32, "nn", precision=precision or env).handle


def test_a_recorded_problem_says_its_precision(tmp_path):
    path = tmp_path / "shapes.txt"
    p = Problem("f32", "nn", 64, 48, 32, 64, 32, 64, precision="tf32")
    assert gemmtune.record(p, path)
    assert gemmtune.record(p._replace(precision="exact"), path)
    assert not gemmtune.record(p, path)
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    assert lines == ["64 48 32 f32 nn precision=tf32", "64 48 32 f32 nn"]


# ---------------------------------------------------------------------------------------------
# torch tensors: a stand-in torch


class FakeDtype:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"torch.{self.name}"


class FakeDevice:
    type, index = "cuda", 0

    def __eq__(self, other):
        return isinstance(other, FakeDevice)

    def __hash__(self):
        return 0


class FakeTensor:
    """A row-major CUDA tensor with an address and nothing behind it."""

    def __init__(self, shape, dtype, ptr=0x7F0000000000):
        self.shape, self.dtype, self._ptr, self.device = tuple(shape), dtype, ptr, FakeDevice()
        self.requires_grad = False

    def stride(self):
        strides, size = [], 1
        for extent in reversed(self.shape):
            strides.insert(0, size)
            size *= extent
        return tuple(strides)

    def data_ptr(self):
        return self._ptr

    def dim(self):
        return len(self.shape)

    def get_device(self):
        return 0

    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape
        known = math.prod(extent for extent in shape if extent != -1)
        return FakeTensor(tuple(math.prod(self.shape) // known if extent == -1 else extent
                                for extent in shape), self.dtype, self._ptr)


class FakeTorch(types.ModuleType):
    """torch as far as gemmtune._torch's matmul and linear reach, with a matmul precision setting
    whose reads are counted."""

    def __init__(self):
        super().__init__("torch")
        self.float32, self.float16, self.bfloat16 = map(FakeDtype, ("float32", "float16",
                                                                     "bfloat16"))
        self.Tensor, self.__version__ = FakeTensor, "0.0-fake"
        self._C, self.library = types.SimpleNamespace(), types.SimpleNamespace()
        self.cuda = types.SimpleNamespace(
            current_stream=lambda device: types.SimpleNamespace(cuda_stream=0))
        self.nn = types.ModuleType("torch.nn")
        self.nn.Parameter = type("Parameter", (FakeTensor,), {})
        self.nn.functional = types.ModuleType("torch.nn.functional")
        for name in ("gelu", "silu", "linear"):
            setattr(self.nn.functional, name, lambda *args, **kw: None)
        self.relu = self.matmul = self.is_autocast_enabled = lambda *args, **kw: False
        self.setting, self.reads = "highest", 0

    def get_float32_matmul_precision(self):
        self.reads += 1
        return self.setting

    def set_float32_matmul_precision(self, setting):
        self.setting = setting

    def empty(self, shape, dtype, device):
        return FakeTensor(shape, dtype, ptr=0x7F0000400000)


@pytest.fixture
def torch(monkeypatch):
    """The stand-in torch, with gemmtune._torch imported over it as gemmtune's torch_api; gone
    again after the test. Every gemmtune_matmul is recorded, not run."""
    fake = FakeTorch()
    for name, module in (("torch", fake), ("torch.nn", fake.nn),
                         ("torch.nn.functional", fake.nn.functional)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(_operands, "TORCH_TENSOR", _operands.TORCH_TENSOR)
    monkeypatch.setattr(_operands, "torch_dtype_name", _operands.torch_dtype_name)
    monkeypatch.delitem(sys.modules, "gemmtune._torch", raising=False)
    torch_api = importlib.import_module("gemmtune._torch")
    monkeypatch.setattr(_api, "torch_api", torch_api)
    monkeypatch.setattr(_library, "_lib", CountingLibrary(_library.library()))
    monkeypatch.setattr(_library, "_native", False)
    yield fake
    sys.modules.pop("gemmtune._torch", None)
    if hasattr(gemmtune, "_torch"):
        delattr(gemmtune, "_torch")


def last_handle():
    return _library.library().matmuls[-1][1]


def handle_of(precision, layout="nn"):
    """The handle of the kept f32 descriptor of a layout and precision."""
    return _library.descriptor(F32, layout, precision=precision).handle


def test_torchs_setting_is_the_precision_of_f32_tensors(torch):
    a, b = FakeTensor((64, 32), torch.float32), FakeTensor((32, 16), torch.float32)
    for setting, precision in TORCH_PRECISIONS.items():
        torch.set_float32_matmul_precision(setting)
        assert gemmtune.problem(a, b).precision == precision
        assert gemmtune.problem(a, b, precision="3xtf32").precision == "3xtf32"
    bf16 = FakeTensor((64, 32), torch.bfloat16), FakeTensor((32, 16), torch.bfloat16)
    reads = torch.reads
    assert gemmtune.problem(*bf16).precision == "exact"
    assert torch.reads == reads, "read for f32 calls only"


def test_a_change_of_torchs_setting_between_calls_changes_the_problem(torch, monkeypatch):
    monkeypatch.setenv("GEMMTUNE_F32_PRECISION", "3xtf32")  # not torch tensors' default
    a, b = FakeTensor((64, 32), torch.float32), FakeTensor((32, 16), torch.float32)
    planned = len(sys.modules["gemmtune._torch"]._PLANS)
    for setting, precision in (("highest", "exact"), ("highest", "exact"), ("high", "tf32"),
                               ("high", "tf32"), ("highest", "exact"), ("medium", "tf32")):
        torch.set_float32_matmul_precision(setting)
        gemmtune.matmul(a, b)
        assert last_handle() == handle_of(precision), setting
    assert len(sys.modules["gemmtune._torch"]._PLANS) == planned + 3, "a plan per setting"
    gemmtune.matmul(a, b, precision="exact")  # given: torch's setting ('medium') is not it
    assert last_handle() == handle_of("exact")
    x, w = FakeTensor((8, 32), torch.float32), FakeTensor((16, 32), torch.float32)
    for setting, precision in (("high", "tf32"), ("highest", "exact"), ("high", "tf32")):
        torch.set_float32_matmul_precision(setting)
        gemmtune.linear(x, w)
        assert last_handle() == handle_of(precision, "tn")


def test_bf16_calls_never_read_torchs_setting(torch):
    a, b = FakeTensor((64, 32), torch.bfloat16), FakeTensor((32, 16), torch.bfloat16)
    x, w = FakeTensor((8, 32), torch.bfloat16), FakeTensor((16, 32), torch.bfloat16)
    for _ in range(2):  # planned, then the fast path
        gemmtune.matmul(a, b)
        gemmtune.linear(x, w)
    assert torch.reads == 0
    assert last_handle() == _library.descriptor(DataTypes.uniform("bf16"), "tn").handle
