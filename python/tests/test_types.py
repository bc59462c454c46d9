"""Per-operand types without a GPU: the codes come from the library (data_types.h), operands of
different dtypes make one problem with the types where the operands go, the result's dtype
follows the documented rule, and calls pass a descriptor made once."""
import ctypes
import re

import pytest

import gemmtune
from conftest import ROOT, FakeCudaArray, FakeDLPack, no_gpu_only
from gemmtune import _api, _library
from gemmtune._plan import DataTypes

NAMES = ("f32", "f16", "bf16", "e4m3", "e5m2")
# gemmtune_matmul_attribute
A_TYPE, B_TYPE, C_TYPE, D_TYPE, ACC_TYPE, SCALING, OP_A, OP_B = range(8)


def header_codes():
    """GEMMTUNE_TYPE_<NAME> of templates/data_types.h, the one definition of the codes."""
    text = (ROOT / "templates" / "data_types.h").read_text()
    return {name.lower(): int(code)
            for name, code in re.findall(r"#define GEMMTUNE_TYPE_(\w+) (\d+)", text)
            if name != "COUNT"}


def test_the_codes_are_the_librarys_and_data_types_hs():
    assert not hasattr(_library, "DTYPES")  # no table of codes in Python
    codes = header_codes()
    assert sorted(codes) == sorted(NAMES)
    for name in NAMES:
        assert _library.type_code(name) == codes[name]
        assert _library.type_name(name) == name
    # The library's aliases, torch's and NumPy's dtype names among them.
    for alias, name in (("float32", "f32"), ("half", "f16"), ("bfloat16", "bf16"),
                        ("float8_e4m3fn", "e4m3"), ("FLOAT8_E5M2", "e5m2")):
        assert _library.type_name(alias) == name
        assert _library.type_code(alias) == codes[name]


def test_an_unknown_type_name_is_the_librarys_error():
    with pytest.raises(gemmtune.Error, match=r"unknown data type 'f64' \(expected f32, f16, bf16, "
                                             r"e4m3 or e5m2\)") as e:
        _library.type_code("f64")
    assert e.value.code == "invalid_argument"


def test_a_descriptor_holds_the_types_and_ops():
    types = DataTypes("e4m3", "e5m2", "bf16", "bf16")
    desc = _library.descriptor(types, "tn")
    assert desc is _library.descriptor(DataTypes("e4m3", "e5m2", "bf16", "bf16"), "tn")  # kept
    codes = header_codes()
    assert [desc.get(a) for a in (A_TYPE, B_TYPE, C_TYPE, D_TYPE, ACC_TYPE)] == [
        codes["e4m3"], codes["e5m2"], codes["bf16"], codes["bf16"], codes["f32"]]
    assert (desc.get(SCALING), desc.get(OP_A), desc.get(OP_B)) == (0, 1, 0)
    other = _library.MatmulDesc(DataTypes.uniform("f16"), "nt")
    assert other.handle != desc.handle
    assert [other.get(a) for a in range(8)] == [codes["f16"]] * 4 + [codes["f32"], 0, 0, 1]
    del other  # destroyed with the object (the library frees it; nothing to see but no crash)


def problem(a_type, b_type, **kw):
    """The problem of x @ w.T for x (8 x 64) of a_type and w (32 x 64) of b_type (DLPack codes)."""
    x = FakeDLPack((8, 64), code=a_type[0], bits=a_type[1])
    w = FakeDLPack((32, 64), code=b_type[0], bits=b_type[1])
    return gemmtune.problem_linear(x, w, **kw)


BF16, F16, F32, E4M3, E5M2 = (4, 16), (2, 16), (2, 32), (10, 8), (12, 8)


def test_operands_of_different_dtypes_make_one_problem_with_the_types_swapped():
    # Row-major x @ w.T is the column-major w . x: A is w, of w's type.
    p = problem(F16, BF16)
    assert tuple(p) == ("bf16*f16->f16", "tn", 32, 8, 64, 64, 64, 32, False, "none", "precise",
                        "none", "exact")
    assert p.types == DataTypes("bf16", "f16", "f16", "f16")
    assert problem(E5M2, E4M3).dtype == "e4m3*e5m2->bf16"
    assert problem(F16, F32).dtype == "f32*f16->f16"


def test_the_result_dtype_rule():
    # a's (x's) dtype when it is f32, f16 or bf16, whatever b's.
    assert problem(F32, F32).dtype == "f32"
    assert problem(F32, BF16).types.d == "f32"
    assert problem(F16, F32).types.d == "f16"
    assert _api.result_dtype("f16", "e5m2") == "f16"
    # Float8 is never an output: a float8 a gives bf16, as gemm-tune's --dtype e4m3 means.
    assert problem(E4M3, E4M3).dtype == "e4m3*e4m3->bf16"
    assert problem(E4M3, E5M2).types.d == "bf16"
    assert _api.result_dtype("e5m2", "e4m3") == "bf16"
    assert _api.result_dtype("e4m3", "f16") == "bf16"
    # out_dtype says otherwise: by name (any the library knows), or a torch or NumPy dtype.
    assert problem(BF16, BF16, out_dtype="f32").dtype == "bf16*bf16->f32"
    assert problem(E4M3, E4M3, out_dtype="float16").dtype == "e4m3*e4m3->f16"
    assert problem(BF16, BF16, out_dtype="bf16").dtype == "bf16"

    class TorchLikeDtype:  # str(torch.float32) == 'torch.float32'
        def __str__(self):
            return "torch.float32"

    class NumpyLikeDtype:
        name = "float16"

    assert problem(BF16, F16, out_dtype=TorchLikeDtype()).types.d == "f32"
    assert problem(BF16, F16, out_dtype=NumpyLikeDtype()).types.d == "f16"
    with pytest.raises(gemmtune.Error, match=r"out_dtype is 'f64': unknown data type 'f64'"):
        problem(BF16, F16, out_dtype="f64")


def test_out_decides_the_result_dtype():
    a, b = FakeCudaArray((4, 8), "<f2"), FakeCudaArray((8, 3), "<f4")
    p = gemmtune.problem(a, b, FakeCudaArray((4, 3), "<f4"))
    assert p.types == DataTypes("f32", "f16", "f32", "f32")
    assert gemmtune.problem(a, b, FakeCudaArray((4, 3), "<f4"), out_dtype="float32") == p
    with pytest.raises(gemmtune.Error, match="out is f32 but out_dtype is f16: the result is "
                                             "written into out"):
        gemmtune.problem(a, b, FakeCudaArray((4, 3), "<f4"), out_dtype="f16")


def test_dlpack_float8_codes():
    # kDLFloat8_e4m3fn (10) and kDLFloat8_e5m2 (12) are gemmtune's; kDLFloat8_e4m3 (8, with
    # infinities) is not.
    x = FakeDLPack((8, 64), code=10, bits=8)
    assert gemmtune.problem(x, FakeDLPack((64, 16), code=12, bits=8)).dtype == "e5m2*e4m3->bf16"
    with pytest.raises(gemmtune.Error, match=r"b has dtype \(DLPack code 8, 8 bits, 1 lanes\): "
                                             r"gemmtune supports .*float8_e4m3fn") as e:
        gemmtune.problem(x, FakeDLPack((64, 16), code=8, bits=8))
    assert e.value.code == "unsupported"


def test_record_writes_per_operand_types(tmp_path):
    path = tmp_path / "shapes.txt"
    p = problem(F16, BF16)
    assert gemmtune.record(p, path)
    assert gemmtune.record(p._replace(reads_c=True), path)
    assert not gemmtune.record(p, path)  # listed already
    # Float8 with its scaling, as scaled_mm's problems have one.
    fp8 = problem(E4M3, E5M2)._replace(scaling="row")
    assert gemmtune.record(fp8, path)
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    # The library's line is Problem.shape_line's: the same names, in the same format.
    assert lines == [p.shape_line(), p._replace(reads_c=True).shape_line(), fp8.shape_line()]
    assert lines == ["32 8 64 bf16*f16->f16 tn", "32 8 64 bf16*f16->f16 tn beta=1",
                     "32 8 64 e5m2*e4m3->bf16 tn scaling=row"]


def test_the_library_refuses_float8_without_scales_or_with_bf16(tmp_path):
    # Float8 multiplies float8 only, and takes scales: record() says what the library says.
    path = tmp_path / "shapes.txt"
    with pytest.raises(gemmtune.Error, match=r"^A is e4m3 but B is bf16: float8 multiplies "
                                             r"float8 \(e4m3 or e5m2 each\)$") as e:
        gemmtune.record(problem(BF16, E4M3), path)
    assert e.value.code == "invalid_argument"
    with pytest.raises(gemmtune.Error, match=r"^e4m3\*e4m3->bf16 operands take scales: a scaling "
                                             r"of tensor, row or block$"):
        gemmtune.record(problem(E4M3, E4M3), path)
    with pytest.raises(gemmtune.Error, match=r"^scaling block is for float8 operands \(e4m3, "
                                             r"e5m2\), not bf16$"):
        gemmtune.record(problem(BF16, BF16)._replace(scaling="block"), path)
    with pytest.raises(gemmtune.Error, match=r"record: unknown scaling 'blocks' \(expected none, "
                                             r"tensor, row or block\)"):
        gemmtune.record(problem(E4M3, E4M3)._replace(scaling="blocks"), path)
    assert not path.exists()


def test_record_reports_the_librarys_errors_naming_the_types(tmp_path):
    path = tmp_path / "shapes.txt"
    with pytest.raises(gemmtune.Error, match="C is f16 but D is bf16") as e:
        gemmtune.record(gemmtune.Problem("e4m3*e5m2->bf16+c=f16", "tn", 64, 8, 32, 32, 32, 64),
                        path)
    assert e.value.code == "invalid_argument"
    with pytest.raises(gemmtune.Error, match="record: unknown data type 'int8'"):
        gemmtune.record(gemmtune.Problem("int8", "tn", 64, 8, 32, 32, 32, 64), path)
    with pytest.raises(gemmtune.Error, match="record: .* is not a gemmtune problem"):
        gemmtune.record(gemmtune.Problem("bf16", "tx", 64, 8, 32, 32, 32, 64), path)
    assert not path.exists()


class CountingLibrary:
    """libgemmtune with every call counted, and gemmtune_matmul recorded instead of run."""

    def __init__(self, lib):
        self.lib, self.calls, self.matmuls = lib, [], []

    def gemmtune_matmul(self, *args):
        self.calls.append("gemmtune_matmul")
        self.matmuls.append(args)
        return 0

    def __getattr__(self, name):
        function = getattr(self.lib, name)

        def counted(*args):
            self.calls.append(name)
            return function(*args)
        return counted


def address_value(pointer):
    """The float a `const float*` argument points to (an address or a byref() object)."""
    if isinstance(pointer, int):
        return ctypes.c_float.from_address(pointer).value
    return pointer._obj.value


def test_a_call_passes_its_descriptor_and_makes_one_library_call(monkeypatch):
    counting = CountingLibrary(_library.library())
    monkeypatch.setattr(_library, "_lib", counting)
    # x (8 x 64, f16) @ w.T with w (32 x 64, f32) into a row-major out (8 x 32, f16): the GEMM
    # is w . x with A = w.
    x = FakeCudaArray((8, 64), "<f2", ptr=0x7F0000000000)
    w = FakeCudaArray((64, 32), "<f4", strides=(4, 64 * 4), ptr=0x7F0000100000)  # w.T
    out = FakeCudaArray((8, 32), "<f2", ptr=0x7F0000200000)
    for alpha, beta in ((1.0, 0.0), (0.5, 2.0), (1.0, 0.0)):
        before = len(counting.calls)
        gemmtune.matmul(x, w, out=out, alpha=alpha, beta=beta, stream=7)
        assert counting.calls[before:][-1] == "gemmtune_matmul"
        device, handle, m, n, k, alpha_p, a, lda, b, ldb, beta_p, c, ldc, stream = \
            counting.matmuls[-1]
        assert (m, n, k, a, lda, b, ldb, c, ldc, stream) == (
            32, 8, 64, 0x7F0000100000, 64, 0x7F0000000000, 64, 0x7F0000200000, 32, 7)
        assert (address_value(alpha_p), address_value(beta_p)) == (alpha, beta)
        desc = _library.descriptor(DataTypes("f32", "f16", "f16", "f16"), "tn")
        assert handle == desc.handle
    # The descriptor was made on the first call only: the later calls are one library call each.
    first = counting.calls.index("gemmtune_matmul")
    assert counting.calls[first + 1:] == ["gemmtune_matmul"] * 2
    # -0.0 stays -0.0 (no constant stands in for it).
    gemmtune.matmul(x, w, out=out, alpha=-0.0)
    alpha_p = counting.matmuls[-1][5]
    assert str(address_value(alpha_p)) == "-0.0"


def test_a_float8_call_with_bf16_is_refused_with_the_librarys_message():
    # e4m3 weights with bf16 activations are no problem the library takes: it says so before
    # any GPU is touched (fake addresses are safe here, GPU or not), and the package adds where
    # float8 operands go.
    x = FakeDLPack((8, 64), code=4, bits=16)
    w = FakeDLPack((32, 64), code=10, bits=8)
    out = FakeDLPack((8, 32), code=4, bits=16)
    message = (r"^A is e4m3 but B is bf16: float8 multiplies float8 \(e4m3 or e5m2 each\) "
               r"\(float8 operands go through gemmtune.scaled_mm, with their scales\)$")
    with pytest.raises(gemmtune.Error, match=message) as e:
        gemmtune.matmul(x, FakeDLPack((64, 32), code=10, bits=8), out=out)
    assert e.value.code == "invalid_argument"
    with pytest.raises(gemmtune.Error, match=message) as e:
        gemmtune.select_linear(x, w)
    assert e.value.code == "invalid_argument"
    # Float8 on both sides still needs the scales that only scaled_mm passes.
    with pytest.raises(gemmtune.Error, match=r"^e4m3\*e4m3->bf16 operands take scales: .*"
                                             r"gemmtune.scaled_mm") as e:
        gemmtune.matmul(FakeDLPack((8, 64), code=10, bits=8),
                        FakeDLPack((64, 32), code=10, bits=8), out=out)
    assert e.value.code == "invalid_argument"


@no_gpu_only
def test_without_a_gpu_a_mixed_call_raises_the_librarys_no_device_error():
    x = FakeDLPack((8, 64), code=2, bits=16)  # f16
    w = FakeDLPack((32, 64), code=2, bits=32)  # f32
    out = FakeDLPack((8, 32), code=2, bits=16)
    with pytest.raises(gemmtune.Error, match="^no GPU: ") as e:
        gemmtune.matmul(x, FakeDLPack((64, 32), code=2, bits=32), out=out)
    assert e.value.code == "no_device"
    with pytest.raises(gemmtune.Error, match="^no GPU: ") as e:
        gemmtune.select_linear(x, w)
    assert e.value.code == "no_device"
