"""Row-major calls as the column-major GEMM gemmtune runs (cuBLAS semantics).

A row-major C = A @ B is, read column-major, C^T = B^T A^T: the operands swap places and each
one's strides say whether it is read as stored (op 'n') or transposed (op 't'). A transposed
view is only another pair of strides, so it costs no copy. The operands' types swap with them:
a row-major x @ w.T is the column-major w . x, whose A is of w's type. Pure Python: testable
anywhere.
"""
from typing import NamedTuple, Optional, Tuple

from ._library import Error, checked_precision, is_gated


class DataTypes(NamedTuple):
    """The element type of each operand by name ('f32', 'f16', 'bf16', 'e4m3', 'e5m2'), as the
    library's gemmtune::DataTypes: C is added with beta, D is the result (written over C, so of
    C's type), acc is the accumulator."""
    a: str
    b: str
    c: str
    d: str
    acc: str = "f32"

    @classmethod
    def uniform(cls, dtype):
        """Every operand of one type, f32 accumulation: what a dtype alone means."""
        return cls(dtype, dtype, dtype, dtype)

    def is_uniform(self):
        return self == DataTypes.uniform(self.a)

    @property
    def name(self):
        """As the library, gemm-tune's shapes file and the tuning database write them: 'bf16'
        for uniform types, else 'A*B->D', then '+c=T' and '+acc=T' where C differs from D and
        the accumulator from f32: 'e4m3*e5m2->bf16'."""
        if self.is_uniform():
            return self.a
        text = f"{self.a}*{self.b}->{self.d}"
        if self.c != self.d:
            text += f"+c={self.c}"
        if self.acc != "f32":
            text += f"+acc={self.acc}"
        return text

    @classmethod
    def parse(cls, text):
        """DataTypes from a name (the inverse of .name); the library checks the types' names."""
        if "*" not in text:
            return cls.uniform(text)
        a, _, rest = text.partition("*")
        b, arrow, rest = rest.partition("->")
        if not arrow:
            raise Error(f"data types '{text}': expected A*B->D (e4m3*e5m2->bf16) or one type")
        d, *parts = rest.split("+")
        c, acc = d, "f32"
        for part in parts:
            if part.startswith("c="):
                c = part[2:]
            elif part.startswith("acc="):
                acc = part[4:]
            else:
                raise Error(f"data types '{text}': unknown part '{part}' (expected c= or acc=)")
        return cls(a, b, c, d, acc)

    def swapped(self):
        """The types of the transposed product (B^T A^T): A's and B's trade places."""
        return self._replace(a=self.b, b=self.a)


class Problem(NamedTuple):
    """The column-major GEMM of a call: what gemm-tune tunes and the tuning database keys."""
    dtype: str  # the types' name (DataTypes.name): 'bf16' when all are bf16, or 'e4m3*e5m2->bf16'
    layout: str  # op(A) op(B): 'nn', 'nt', 'tn', 'tt'
    m: int
    n: int
    k: int
    lda: int
    ldb: int
    ldc: int
    reads_c: bool = False  # beta != 0: tuned and stored apart from the problem that does not
    # How float8 operands are dequantized: 'none' (other types), 'tensor', 'row' or 'block'
    # (gemmtune/types.hpp, Scaling): part of the problem, tuned and stored apart.
    scaling: str = "none"
    # How a float8 product sums over K: 'precise' (its partial sums promoted into f32) or 'fast'
    # (wgmma accumulates the whole K: torch's use_fast_accum, tensor and row scaling only;
    # gemmtune/types.hpp, Accumulation): part of the problem, tuned and stored apart.
    accumulation: str = "precise"
    # What the store applies: 'none', or a bias ('bias' along M, 'bias_n' along N) and an
    # activation ('relu', 'gelu', 'gelu_tanh', 'silu') joined by commas: 'bias,gelu'; or a gated
    # one ('swiglu', 'geglu', 'geglu_tanh', 'reglu', then 'interleaved' for that layout), whose
    # D has M / 2 rows (gemmtune/types.hpp, Epilogue). Part of the problem, tuned and stored apart.
    epilogue: str = "none"
    # How an f32 product is computed: 'exact' (every other problem too), 'tf32' or '3xtf32' (tensor
    # cores; gemmtune/types.hpp, Precision). Part of the problem, tuned and stored apart.
    precision: str = "exact"

    @property
    def output_rows(self):
        """D's rows: M, or M / 2 with a gated epilogue (act(gate) * up)."""
        return self.m // 2 if is_gated(self.epilogue) else self.m

    @property
    def types(self):
        """The type of each operand (a DataTypes): A and B are the GEMM's, not the call's."""
        return DataTypes.parse(self.dtype)

    def shape_line(self):
        """The problem as a line of gemm-tune's shapes file, as GEMMTUNE_RECORD writes it:
        the scaling where there is one, accum=fast where it accumulates fast, the precision where
        it is not exact, the epilogue where there is one, leading dimensions only where they are
        not tight, then beta=1 if it reads C."""
        tight = (self.m if self.layout[0] == "n" else self.k,
                 self.k if self.layout[1] == "n" else self.n, self.output_rows)
        extra = "" if self.scaling == "none" else f" scaling={self.scaling}"
        extra += "" if self.accumulation == "precise" else f" accum={self.accumulation}"
        extra += "" if self.precision == "exact" else f" precision={self.precision}"
        extra += "" if self.epilogue == "none" else f" epilogue={self.epilogue}"
        extra += "".join(f" {name}={ld}" for name, ld, tight_ld in
                         zip(("lda", "ldb", "ldc"), (self.lda, self.ldb, self.ldc), tight)
                         if ld != tight_ld)
        beta = " beta=1" if self.reads_c else ""
        return f"{self.m} {self.n} {self.k} {self.dtype} {self.layout}{extra}{beta}"


class Plan(NamedTuple):
    problem: Problem
    swap: bool  # True: the GEMM's A is the call's b (C is row-major), False: A is a
    types: DataTypes  # the GEMM's (swapped with A and B): problem.types, not parsed again


def storage(rows, cols, s0, s1):
    """How a rows x cols matrix with element strides (s0, s1) reads column-major:
    (True, ld): row-major, i.e. its transpose stored column-major with leading dimension ld;
    (False, ld): column-major with ld; None: neither (no dimension with stride 1)."""
    if rows == 1 and cols == 1:
        return True, 1
    if cols == 1 and s0 == 1:  # a column: tight column-major aligns best
        return False, rows
    if s1 == 1 and (rows == 1 or s0 >= cols):
        return True, s0 if rows > 1 else cols
    if s0 == 1 and (cols == 1 or s1 >= rows):
        return False, s1 if cols > 1 else rows
    if rows == 1 and s1 >= 1:  # one row with a stride: column-major 1 x cols, ld = stride
        return False, s1
    if cols == 1 and s0 >= 1:  # one column with a stride: row-major rows x 1
        return True, s0
    return None


def _matrix(name, shape, strides):
    if len(shape) != 2:
        raise Error(f"{name} is {len(shape)}-D (shape {tuple(shape)}): gemmtune.matmul takes 2-D "
                    "matrices (gemmtune.linear takes leading batch dimensions)")
    layout = storage(shape[0], shape[1], strides[0], strides[1])
    if layout is None:
        raise Error(f"{name} has strides {tuple(strides)} (in elements) for shape {tuple(shape)}: "
                    "gemmtune needs a unit stride in one dimension (a row-major or column-major "
                    f"matrix, or a transposed view of one); pass {name}.contiguous()")
    return layout


def shape_text(shape):
    return "x".join(str(s) for s in shape)


def check_shapes(a_shape, b_shape, c_shape: Optional[Tuple[int, ...]]):
    """Errors for operands that do not multiply; returns (m, n, k)."""
    for name, shape in (("a", a_shape), ("b", b_shape), ("out", c_shape)):
        if shape is not None and len(shape) != 2:
            _matrix(name, shape, (1,) * len(shape))
    m, k = a_shape
    if b_shape[0] != k:
        raise Error(f"a is {shape_text(a_shape)} and b is {shape_text(b_shape)}: a's columns must "
                    "equal b's rows")
    n = b_shape[1]
    if c_shape is not None and tuple(c_shape) != (m, n):
        raise Error(f"out is {shape_text(c_shape)}, but a @ b is {m}x{n}")
    return m, n, k


def plan_matmul(types, a_shape, a_strides, b_shape, b_strides, c_strides=None,
                precision="exact"):
    """The GEMM for row-major C = A @ B (all sizes >= 1). types: the DataTypes of the call's
    operands (a, b, out), or one type's name for all. c_strides None: a new row-major C.
    precision: the problem's (call_precision)."""
    if isinstance(types, str):
        types = DataTypes.uniform(types)
    m, n, k = check_shapes(a_shape, b_shape, None)
    a_rows, lda = _matrix("a", a_shape, a_strides)
    b_rows, ldb = _matrix("b", b_shape, b_strides)
    c_rows, ldc = (True, n) if c_strides is None else _matrix("out", (m, n), c_strides)
    # An operand is read as stored ('n') when it is laid out as C is, else transposed ('t').
    def op(rows):
        return "n" if rows == c_rows else "t"
    if c_rows:  # C^T = B^T A^T: b is the GEMM's A, with its type
        types = types.swapped()
        problem = Problem(types.name, op(b_rows) + op(a_rows), n, m, k, ldb, lda, ldc,
                          precision=precision)
    else:
        problem = Problem(types.name, op(a_rows) + op(b_rows), m, n, k, lda, ldb, ldc,
                          precision=precision)
    return Plan(problem, c_rows, types)


# torch.get_float32_matmul_precision()'s settings as gemmtune's precisions: 'highest' is f32's
# own (exact); 'high' allows tf32; 'medium' allows bf16 products too, which gemmtune has no f32
# kernels of: tf32, its nearest.
TORCH_PRECISIONS = {"highest": "exact", "high": "tf32", "medium": "tf32"}
_F32 = DataTypes.uniform("f32")


def call_precision(types, precision, default):
    """The precision of a call of these types (a DataTypes): `precision` where given (any
    case; the library refuses one other than exact of other types than f32); else, of f32
    operands and result, default() (torch's setting for torch tensors, else the library's,
    GEMMTUNE_F32_PRECISION); else 'exact', other types' one way."""
    if precision is not None:
        return checked_precision(precision)
    return default() if types == _F32 else "exact"


def descriptor_precision(types, precision):
    """The precision a descriptor of a problem of these types sets: none (the library's one way)
    for exact of other types than f32, whose descriptors stay as they were; else the problem's
    (the library refuses one other than exact of other types)."""
    return None if precision == "exact" and types != _F32 else precision
