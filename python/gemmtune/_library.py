"""libgemmtune through ctypes: where it is, the C API's signatures, its failures as Error.

A thin layer over the C API (runtime/include/gemmtune/gemmtune.h), so that one build serves
every Python version: no compiled extension.
"""
import ctypes
import importlib.machinery
import importlib.util
import functools
import math
import os
import pathlib
import threading

# gemmtune_status codes, by their C names less the prefix.
_STATUS_CODES = {
    1: "invalid_argument",
    2: "unsupported",
    3: "no_device",
    4: "cuda",
    5: "compile",
    6: "database",
    7: "io",
    8: "timeout",
    9: "internal",
}

# gemmtune_op. The codes of the element types are the library's (type_code, type_name).
OPS = {"n": 0, "t": 1}
# gemmtune_scaling: how float8 operands are dequantized (gemmtune.h; a test reads them there).
SCALINGS = {"none": 0, "tensor": 1, "row": 2, "block": 3}
# gemmtune_group_layout: what a grouped GEMM's G int32 values are (its column ends, or counts).
GROUP_LAYOUTS = {"contiguous": 0, "masked": 1}
# gemmtune_accumulation: whether a float8 product promotes its partial sums into f32 ('precise')
# or lets wgmma accumulate the whole K ('fast': torch's use_fast_accum; tensor and row scaling).
ACCUMULATIONS = {"precise": 0, "fast": 1}
# gemmtune_precision: how an f32 product is computed: 'exact' (f32 fused multiply-adds), 'tf32'
# (tensor cores, 10-bit mantissas) or '3xtf32' (three tf32 products: exact's accuracy). A
# descriptor that sets none takes the library's (GEMMTUNE_F32_PRECISION) for f32 calls.
PRECISIONS = {"exact": 0, "tf32": 1, "3xtf32": 2}
# gemmtune_bias: none, or a vector of D's type along M (one per row of D) or along N.
BIASES = {"none": 0, "m": 1, "n": 2}
# gemmtune_activation, applied by the store after the bias (torch.nn.functional's formulas).
ACTIVATIONS = {"identity": 0, "relu": 1, "gelu": 2, "gelu_tanh": 3, "silu": 4}
# gemmtune_gate: none, or a gated epilogue (D = act(gate) * up) with op(A)'s gate and up rows as
# its two halves ([gate; up]) or interleaved (rows 2i and 2i + 1).
GATES = {"none": 0, "halves": 1, "interleaved": 2}
# An epilogue's parts by the names gemmtune::Epilogue::name() gives them ("bias,gelu").
_BIAS_NAMES = {"none": None, "m": "bias", "n": "bias_n"}
# A gated epilogue's name by its activation ("bias,swiglu,interleaved").
_GATED_NAMES = {"silu": "swiglu", "gelu": "geglu", "gelu_tanh": "geglu_tanh", "relu": "reglu"}
_GATED_ACTIVATIONS = {name: activation for activation, name in _GATED_NAMES.items()}
# gemmtune_matmul_attribute: the type of A, B, C, D and the accumulator, then op(A) and op(B),
# the scaling, the scale pointers of A and B (each a `const float*`), the groups of a grouped
# GEMM (an int32), their column end offsets or counts (a `const int32_t*`), which of the two
# they are (a gemmtune_group_layout), the accumulation (a gemmtune_accumulation), the
# epilogue's bias and activation (int32s), the bias vector (a `const void*`), D's own
# buffer (a `void*`), the epilogue's gate (an int32), the precision (a gemmtune_precision), and
# whether the pre-activation is kept (an int32) with its buffer (a `void*`).
_TYPE_ATTRIBUTES = (0, 1, 2, 3, 4)
_OP_ATTRIBUTES = (6, 7)
SCALING_ATTRIBUTE = 5
SCALE_A_POINTER, SCALE_B_POINTER = 8, 9
GROUPS_ATTRIBUTE, GROUP_ENDS_POINTER, GROUP_LAYOUT_ATTRIBUTE = 10, 11, 12
ACCUMULATION_ATTRIBUTE = 13
BIAS_ATTRIBUTE, ACTIVATION_ATTRIBUTE, BIAS_POINTER, D_POINTER = 14, 15, 16, 17
GATE_ATTRIBUTE = 18
PRECISION_ATTRIBUTE = 19
AUX_ATTRIBUTE, AUX_POINTER = 20, 21
_POINTER_SIZE = ctypes.sizeof(ctypes.c_void_p)  # what a pointer attribute's value takes


class Error(Exception):
    """A gemmtune failure. `code` names its kind: 'invalid_argument', 'unsupported',
    'no_device', 'cuda', 'compile', 'database', 'io', 'timeout', 'internal',
    'library_not_found', or 'tool_not_found' (a program of the console scripts is missing).
    The message is the library's where the library found the problem."""

    def __init__(self, message, code="invalid_argument"):
        super().__init__(message)
        self.code = code


class InvalidValue(Error, ValueError):
    """A bad argument of scaled_mm (a shape, a layout, a device): a ValueError, and a
    gemmtune.Error with code 'invalid_argument'."""


class InvalidType(Error, TypeError):
    """An argument of scaled_mm of the wrong dtype or kind: a TypeError, and a gemmtune.Error
    with code 'invalid_argument'."""


def _library_candidates():
    """Where libgemmtune may be, in the order tried."""
    explicit = os.environ.get("GEMMTUNE_LIBRARY")
    if explicit:
        return [pathlib.Path(explicit)]  # said explicitly: nothing else is tried
    here = pathlib.Path(__file__).resolve().parent
    return [
        here / "lib" / "libgemmtune.so.0",  # inside the package: pip install (setup.py)
        here / "libgemmtune.so.0",  # installed next to the package
        here.parent.parent / "libgemmtune.so.0",  # cmake --install: <libdir>/python/gemmtune
        here.parent.parent / "build" / "lib" / "libgemmtune.so.0",  # the source tree's build/
        pathlib.Path("libgemmtune.so.0"),  # the loader's search path (LD_LIBRARY_PATH, ldconfig)
    ]


def bin_dir():
    """Where the programs are (gemm-tune, gemm-tune-worker, gemm-db): $GEMMTUNE_BIN_DIR, else
    the package's bin/ (pip install), else the source tree's build/bin."""
    explicit = os.environ.get("GEMMTUNE_BIN_DIR")
    if explicit:
        return pathlib.Path(explicit)
    here = pathlib.Path(__file__).resolve().parent
    packaged = here / "bin"
    return packaged if packaged.is_dir() else here.parent.parent / "build" / "bin"


def tool_path(name):
    """The program `name` in bin_dir(); Error('tool_not_found') where it is not."""
    path = bin_dir() / name
    if not path.is_file():
        raise Error(f"{path} does not exist: build it (tools/build.sh), install the package with "
                    "pip, or set GEMMTUNE_BIN_DIR to the folder of gemmtune's programs",
                    "tool_not_found")
    return path


def _declare(lib):
    i64, f32, ptr, i32 = ctypes.c_int64, ctypes.c_float, ctypes.c_void_p, ctypes.c_int
    status = ctypes.c_int
    lib.gemmtune_gemm_on_device.argtypes = [
        i32, i32, i32, i32, i64, i64, i64, f32, ptr, i64, ptr, i64, f32, ptr, i64, ptr]
    lib.gemmtune_gemm_on_device.restype = status
    lib.gemmtune_gemm.argtypes = lib.gemmtune_gemm_on_device.argtypes[1:]
    lib.gemmtune_gemm.restype = status
    lib.gemmtune_select.argtypes = [
        i32, i32, i32, i32, i64, i64, i64, ptr, i64, ptr, i64, f32, ptr, i64,
        ctypes.POINTER(ctypes.c_char_p)]
    lib.gemmtune_select.restype = status
    lib.gemmtune_record_problem.argtypes = [
        ctypes.c_char_p, i32, i32, i32, i64, i64, i64, i64, i64, f32, i64, ctypes.POINTER(i32)]
    lib.gemmtune_record_problem.restype = status
    # The package calls these: a descriptor carries the types of every operand.
    # alpha and beta are `const float*`: declared as addresses, so that the calls pass the
    # addresses of constants (scalar()) without building a pointer object each time.
    lib.gemmtune_matmul.argtypes = [
        i32, ptr, i64, i64, i64, ptr, ptr, i64, ptr, i64, ptr, ptr, i64, ptr]
    lib.gemmtune_matmul.restype = status
    lib.gemmtune_matmul_select.argtypes = [
        i32, ptr, i64, i64, i64, ptr, i64, ptr, i64, f32, ptr, i64,
        ctypes.POINTER(ctypes.c_char_p)]
    lib.gemmtune_matmul_select.restype = status
    lib.gemmtune_matmul_record_problem.argtypes = [
        ctypes.c_char_p, ptr, i64, i64, i64, i64, i64, f32, i64, ctypes.POINTER(i32)]
    lib.gemmtune_matmul_record_problem.restype = status
    lib.gemmtune_matmul_desc_create.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    lib.gemmtune_matmul_desc_create.restype = status
    lib.gemmtune_matmul_desc_destroy.argtypes = [ptr]
    lib.gemmtune_matmul_desc_destroy.restype = status
    lib.gemmtune_matmul_desc_set_attribute.argtypes = [ptr, i32, ptr, ctypes.c_size_t]
    lib.gemmtune_matmul_desc_set_attribute.restype = status
    lib.gemmtune_matmul_desc_get_attribute.argtypes = [
        ptr, i32, ptr, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
    lib.gemmtune_matmul_desc_get_attribute.restype = status
    lib.gemmtune_data_type_from_name.argtypes = [ctypes.c_char_p, ctypes.POINTER(i32)]
    lib.gemmtune_data_type_from_name.restype = status
    lib.gemmtune_data_type_name.argtypes = [i32]
    lib.gemmtune_data_type_name.restype = ctypes.c_char_p
    lib.gemmtune_last_error.argtypes = []
    lib.gemmtune_last_error.restype = ctypes.c_char_p
    return lib


_lib = None


def library():
    """The loaded libgemmtune (loaded on first use); Error('library_not_found') if none loads."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for path in _library_candidates():
        if path.is_absolute() and not path.exists():
            tried.append(f"{path} (no such file)")
            continue
        try:
            _lib = _declare(ctypes.CDLL(str(path)))
            return _lib
        except (OSError, AttributeError) as e:
            tried.append(f"{path} ({e})")
    raise Error("cannot load libgemmtune; build it (tools/build.sh) or set GEMMTUNE_LIBRARY to "
                "its path. Tried: " + "; ".join(tried), "library_not_found")


_native = None  # gemmtune_native bound to the loaded library, False when there is none


def beside_library(name):
    """The file `name` in the loaded libgemmtune's folder, where its compiled companions are
    built and installed (gemmtune_native, gemmtune_torch)."""
    return pathlib.Path(library_path()).resolve().parent / name


def _load_native(lib):
    """gemmtune_native (python/native) from the loaded library's folder, bound to its
    gemmtune_matmul; None without it, or with GEMMTUNE_NO_NATIVE set."""
    if os.environ.get("GEMMTUNE_NO_NATIVE"):
        return None
    path = beside_library("gemmtune_native.abi3.so")
    if not path.exists():
        return None
    try:
        loader = importlib.machinery.ExtensionFileLoader("gemmtune_native", str(path))
        spec = importlib.util.spec_from_file_location("gemmtune_native", path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        module.bind(ctypes.cast(lib.gemmtune_matmul, ctypes.c_void_p).value)
        return module
    except (ImportError, OSError):
        return None


def matmul_function():
    """What the planned calls call gemmtune_matmul through, every argument an int: the compiled
    module where there is one, else ctypes."""
    global _native
    if _native is None:
        _native = _load_native(library()) or False
    return _native.matmul if _native else library().gemmtune_matmul


def library_path():
    """The file libgemmtune was loaded from."""
    return library()._name


def check(status):
    """Raises Error with the library's message unless status is GEMMTUNE_SUCCESS."""
    if status != 0:
        message = library().gemmtune_last_error().decode("utf-8", "replace")
        raise Error(message, _STATUS_CODES.get(status, "internal"))


# ---------------------------------------------------------------------------------------------
# Element types: their codes are the library's (data_types.h), never spelled here.


@functools.lru_cache(maxsize=None)  # known names only (errors are not remembered): a few dozen
def type_code(name):
    """The library's code of an element type: 'f32', 'f16', 'bf16', 'e4m3', 'e5m2', or an alias
    the library knows ('float16', 'bfloat16', 'float8_e4m3fn', ...). Error for other names."""
    code = ctypes.c_int(-1)
    check(library().gemmtune_data_type_from_name(name.encode(), ctypes.byref(code)))
    return code.value


@functools.lru_cache(maxsize=None)
def type_name(name):
    """The canonical name of an element type given by any name the library knows:
    type_name('bfloat16') == 'bf16'."""
    return library().gemmtune_data_type_name(type_code(name)).decode()


# ---------------------------------------------------------------------------------------------
# Epilogues: "none", or the parts of gemmtune::Epilogue::name(): "bias" (along M), "bias_n",
# then an activation ("relu", "gelu", "gelu_tanh", "silu"), joined by commas: "bias,gelu"; a gated
# one names its activation as the gated form ("swiglu", "geglu", "geglu_tanh", "reglu") and adds
# "interleaved" for that layout: "bias,swiglu,interleaved"; "aux" last where the pre-activation is
# kept as a second output: "bias,gelu,aux".


def epilogue_name(bias="none", activation="identity", gate="none", aux=False):
    """The name of an epilogue of a bias ('none', 'm', 'n'), an activation and a gate ('none',
    'halves', 'interleaved'), with aux its pre-activation kept, as the library writes it:
    epilogue_name('m', 'gelu') == 'bias,gelu', epilogue_name('none', 'silu', 'interleaved') ==
    'swiglu,interleaved', epilogue_name('m', 'gelu', aux=True) == 'bias,gelu,aux'."""
    if bias not in BIASES:
        raise Error(f"unknown bias '{bias}' (expected none, m or n)")
    if activation not in ACTIVATIONS:
        raise Error(f"unknown activation '{activation}' (expected "
                    f"{', '.join(ACTIVATIONS)})")
    if gate not in GATES:
        raise Error(f"unknown gate '{gate}' (expected none, halves or interleaved)")
    if gate != "none" and activation not in _GATED_NAMES:
        raise Error(f"a gated epilogue takes silu, gelu, gelu_tanh or relu, not {activation}")
    parts = [_BIAS_NAMES[bias]] if bias != "none" else []
    if gate != "none":
        parts.append(_GATED_NAMES[activation])
    elif activation != "identity":
        parts.append(activation)
    parts += ["interleaved"] if gate == "interleaved" else []
    if aux:
        if activation == "identity" or gate != "none":
            raise Error("aux (the pre-activation as a second output) is for an activation that "
                        f"is not gated, not {','.join(parts) or 'none'}")
        parts.append("aux")
    return ",".join(parts) or "none"


@functools.lru_cache(maxsize=None)  # a few dozen names at most
def parse_epilogue(name):
    """(bias, activation, gate) of an epilogue's name: parse_epilogue('bias,gelu') ==
    ('m', 'gelu', 'none'), parse_epilogue('swiglu,interleaved') == ('none', 'silu',
    'interleaved'); 'none' and '' are ('none', 'identity', 'none'). An 'aux' part (the
    pre-activation kept: keeps_pre_activation) leaves the three as they are."""
    bias, activation, gate, interleaved = "none", "identity", "none", False
    for part in filter(None, name.split(",")):
        if part in ("bias", "bias_n") and bias == "none":
            bias = "m" if part == "bias" else "n"
        elif part in ACTIVATIONS and part != "identity" and activation == "identity":
            activation = part
        elif part in _GATED_ACTIVATIONS and activation == "identity":
            activation, gate = _GATED_ACTIVATIONS[part], "halves"
        elif part == "interleaved" and not interleaved:
            interleaved = True
        elif part == "aux":
            pass  # keeps_pre_activation; the library checks it has an activation
        elif part != "none":
            raise Error(f"epilogue '{name}': unknown or repeated part '{part}' (expected bias or "
                        "bias_n, then relu, gelu, gelu_tanh or silu, or a gated swiglu, geglu, "
                        "geglu_tanh or reglu with interleaved)")
    if interleaved and gate == "none":
        raise Error(f"epilogue '{name}': interleaved is the layout of a gated one (swiglu, ...)")
    return bias, activation, "interleaved" if interleaved else gate


def is_gated(name):
    """Whether an epilogue's name is of a gated one (D of M / 2 rows)."""
    return parse_epilogue(name)[2] != "none"


def keeps_pre_activation(name):
    """Whether an epilogue's name keeps its pre-activation as a second output ('aux')."""
    return "aux" in name.split(",")


# ---------------------------------------------------------------------------------------------
# Precisions


def checked_precision(precision):
    """precision ('exact', 'tf32', '3xtf32', any case) as the library names it; Error for
    others."""
    name = precision.lower() if isinstance(precision, str) else precision
    if name not in PRECISIONS:
        raise Error(f"unknown precision {precision!r} (expected exact, tf32 or 3xtf32)")
    return name


def library_f32_precision():
    """The library's precision of f32 calls that set none: $GEMMTUNE_F32_PRECISION, else
    'exact'. Error naming the variable for a bad value, as the library's."""
    setting = os.environ.get("GEMMTUNE_F32_PRECISION") or "exact"
    if setting.lower() not in PRECISIONS:
        raise Error(f"GEMMTUNE_F32_PRECISION={setting}: expected exact, tf32 or 3xtf32")
    return setting.lower()


# ---------------------------------------------------------------------------------------------
# Matmul descriptors


class MatmulDesc:
    """A gemmtune_matmul_desc with the types, ops, scaling, group layout, accumulation,
    epilogue and precision (None: the library's) of a problem; destroyed with this object.
    Those never change once it is made; the scale pointers of a scaled descriptor do
    (set_scales), the groups of a grouped one (set_groups) and the bias of one with a bias
    (set_bias), so such a descriptor belongs to one thread (scaled_descriptor,
    grouped_descriptor, bias_descriptor)."""

    def __init__(self, types, layout, scaling="none", group_layout="contiguous",
                 accumulation="precise", epilogue="none", precision=None):
        lib = library()
        if scaling not in SCALINGS:
            raise Error(f"unknown scaling '{scaling}' (expected none, tensor, row or block)")
        if group_layout not in GROUP_LAYOUTS:
            raise Error(f"unknown group layout '{group_layout}' (expected contiguous or masked)")
        if accumulation not in ACCUMULATIONS:
            raise Error(f"unknown accumulation '{accumulation}' (expected precise or fast)")
        values = [type_code(t) for t in types] + [OPS[op] for op in layout]
        attributes = _TYPE_ATTRIBUTES + _OP_ATTRIBUTES
        if scaling != "none":
            values.append(SCALINGS[scaling])
            attributes += (SCALING_ATTRIBUTE,)
        if group_layout != "contiguous":
            values.append(GROUP_LAYOUTS[group_layout])
            attributes += (GROUP_LAYOUT_ATTRIBUTE,)
        if accumulation != "precise":  # the library checks the problem when it is called
            values.append(ACCUMULATIONS[accumulation])
            attributes += (ACCUMULATION_ATTRIBUTE,)
        bias, activation, gate = parse_epilogue(epilogue)
        if (bias, activation, gate) != ("none", "identity", "none"):
            values += [BIASES[bias], ACTIVATIONS[activation]]
            attributes += (BIAS_ATTRIBUTE, ACTIVATION_ATTRIBUTE)
        if gate != "none":
            values.append(GATES[gate])
            attributes += (GATE_ATTRIBUTE,)
        if keeps_pre_activation(epilogue):
            values.append(1)
            attributes += (AUX_ATTRIBUTE,)
        if precision is not None:  # exact too: else the library's default would be the call's
            values.append(PRECISIONS[checked_precision(precision)])
            attributes += (PRECISION_ATTRIBUTE,)
        handle = ctypes.c_void_p()
        check(lib.gemmtune_matmul_desc_create(ctypes.byref(handle)))
        self._lib, self.handle = lib, handle.value
        # Where set_bias puts the bias's address for the library to read: made once, as a bias is
        # set on every call of a planned linear with one.
        self._bias = ctypes.c_void_p()
        self._bias_address = ctypes.addressof(self._bias)
        for attribute, value in zip(attributes, values):
            value = ctypes.c_int32(value)
            check(lib.gemmtune_matmul_desc_set_attribute(
                self.handle, attribute, ctypes.byref(value), ctypes.sizeof(value)))

    def set_scales(self, scale_a, scale_b):
        """The device addresses of the fp32 scales of A and B (ints), read by the next call."""
        for attribute, address in ((SCALE_A_POINTER, scale_a), (SCALE_B_POINTER, scale_b)):
            self._set_pointer(attribute, address)

    def set_groups(self, groups, ends):
        """G, the groups of the next call (0: one GEMM), and the device address of their G int32
        column end offsets, or counts for a masked descriptor (an int), which the kernel reads
        when it runs."""
        value = ctypes.c_int32(groups)
        check(self._lib.gemmtune_matmul_desc_set_attribute(
            self.handle, GROUPS_ATTRIBUTE, ctypes.byref(value), ctypes.sizeof(value)))
        self._set_pointer(GROUP_ENDS_POINTER, ends)

    def set_bias(self, address):
        """The device address of the bias vector (an int; of D's type, contiguous), read by the
        next call."""
        self._bias.value = address  # this thread's descriptor: no other call sees the slot change
        status = self._lib.gemmtune_matmul_desc_set_attribute(
            self.handle, BIAS_POINTER, self._bias_address, _POINTER_SIZE)
        if status:
            check(status)

    def set_d(self, address):
        """The device address of D's own buffer (an int; 0: D is written over C)."""
        self._set_pointer(D_POINTER, address)

    def set_aux(self, address):
        """The device address of the pre-activation's buffer (an int; laid out as D, 16-byte
        aligned), written by the next call of an epilogue with aux."""
        self._set_pointer(AUX_POINTER, address)

    def _set_pointer(self, attribute, address):
        pointer = ctypes.c_void_p(address)
        check(self._lib.gemmtune_matmul_desc_set_attribute(
            self.handle, attribute, ctypes.byref(pointer), ctypes.sizeof(pointer)))

    def get(self, attribute):
        """The int32 value of a gemmtune_matmul_attribute (for tests)."""
        value, written = ctypes.c_int32(-1), ctypes.c_size_t(0)
        check(self._lib.gemmtune_matmul_desc_get_attribute(
            self.handle, attribute, ctypes.byref(value), ctypes.sizeof(value),
            ctypes.byref(written)))
        return value.value

    def get_pointer(self, attribute):
        """The address a pointer attribute holds, 0 for NULL (for tests)."""
        value, written = ctypes.c_void_p(), ctypes.c_size_t(0)
        check(self._lib.gemmtune_matmul_desc_get_attribute(
            self.handle, attribute, ctypes.byref(value), ctypes.sizeof(value),
            ctypes.byref(written)))
        return value.value or 0

    def __del__(self):
        handle = getattr(self, "handle", None)
        if handle:
            self._lib.gemmtune_matmul_desc_destroy(handle)


def descriptor(types, layout, scaling="none", accumulation="precise", epilogue="none",
               precision=None):
    """The descriptor of a problem's types (A, B, C, D, accumulator names), layout ('tn'),
    scaling, accumulation, epilogue ('bias,gelu') and precision ('tf32'; None: the library's),
    made once and kept: the calls pass its handle. Without scale or bias pointers: for calls of
    unscaled problems without a bias, select and record."""
    return _kept_descriptor(types, layout, scaling, accumulation, epilogue, precision)


@functools.lru_cache(maxsize=None)  # keyed by valid types and layouts only: a few at most
def _kept_descriptor(types, layout, scaling, accumulation, epilogue, precision):
    # Positional arguments only: one key for a descriptor however descriptor() was called.
    return MatmulDesc(types, layout, scaling, accumulation=accumulation, epilogue=epilogue,
                      precision=precision)


_thread = threading.local()


def _thread_descriptor(key, group_layout="contiguous", accumulation="precise",
                       epilogue="none", precision=None):
    """This thread's descriptor of key = (types, layout, scaling, kind, ...), made on first use;
    the key tells apart every descriptor that differs (its group layout, its accumulation, its
    epilogue, its precision)."""
    descriptors = getattr(_thread, "descriptors", None)
    if descriptors is None:
        descriptors = _thread.descriptors = {}
    desc = descriptors.get(key)
    if desc is None:
        desc = descriptors[key] = MatmulDesc(key[0], key[1], key[2], group_layout, accumulation,
                                             epilogue, precision)
    return desc


def scaled_descriptor(types, layout, scaling, accumulation="precise"):
    """A descriptor of this thread for scaled calls of an accumulation ('precise', or 'fast'
    for tensor and row scaling), whose scale pointers each call sets (set_scales) just before it
    runs: no other thread sees them change."""
    return _thread_descriptor((tuple(types), layout, scaling, "scaled", accumulation),
                              accumulation=accumulation)


def scaled_grouped_descriptor(types, layout, scaling, accumulation="precise"):
    """A descriptor of this thread for grouped float8 calls (contiguous groups), whose scale
    pointers, groups and group ends each call sets (set_scales, set_groups) just before it
    runs."""
    return _thread_descriptor((tuple(types), layout, scaling, "scaled_grouped", accumulation),
                              accumulation=accumulation)


def bias_descriptor(types, layout, epilogue, precision=None):
    """A descriptor of this thread for calls with an epilogue that has a bias ('bias,gelu') or
    keeps its pre-activation ('gelu,aux'), and a precision (None: the library's), whose bias and
    aux pointers each call sets (set_bias, set_aux) just before it runs: no other thread sees
    them change."""
    return _thread_descriptor((tuple(types), layout, "none", "bias", epilogue, precision),
                              epilogue=epilogue, precision=precision)


def grouped_descriptor(types, layout, group_layout="contiguous"):
    """A descriptor of this thread for grouped calls of a group layout ('contiguous': the
    values are column ends; 'masked': counts), whose groups and group values each call sets
    (set_groups) just before it runs: no other thread sees them change."""
    return _thread_descriptor((tuple(types), layout, "none", group_layout), group_layout)


# alpha and beta as gemmtune_matmul takes them: addresses of host floats. 1 and 0 are nearly
# every call's, so those are constants; other values get a float of their own for the call.
_ONE, _ZERO = ctypes.c_float(1.0), ctypes.c_float(0.0)
_ONE_ADDRESS, _ZERO_ADDRESS = ctypes.addressof(_ONE), ctypes.addressof(_ZERO)


def scalar(value):
    """value as a `const float*` argument; it lives until the call returns."""
    if value == 1.0:
        return _ONE_ADDRESS
    if value == 0.0 and math.copysign(1.0, value) > 0:  # -0.0 is itself (alpha = -0 gives -0)
        return _ZERO_ADDRESS
    return ctypes.byref(ctypes.c_float(value))
