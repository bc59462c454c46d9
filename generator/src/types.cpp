#include "gemmtune/types.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <tuple>
#include <vector>

#include "gemmtune/generator/util.hpp"

namespace gemmtune {

const char* errc_name(Errc code) noexcept {
  switch (code) {
    case Errc::invalid_argument:
      return "invalid_argument";
    case Errc::unsupported:
      return "unsupported";
    case Errc::no_device:
      return "no_device";
    case Errc::cuda:
      return "cuda";
    case Errc::compile:
      return "compile";
    case Errc::database:
      return "database";
    case Errc::io:
      return "io";
    case Errc::timeout:
      return "timeout";
    case Errc::internal:
      return "internal";
  }
  return "unknown";
}

std::string_view to_string(DataType type) noexcept {
  switch (type) {
    case DataType::f32:
      return "f32";
    case DataType::f16:
      return "f16";
    case DataType::bf16:
      return "bf16";
    case DataType::e4m3:
      return "e4m3";
    case DataType::e5m2:
      return "e5m2";
  }
  return "?";
}

char to_char(Op op) noexcept {
  return op == Op::N ? 'n' : 't';
}

int element_bytes(DataType type) noexcept {
  switch (type) {
    case DataType::f32:
      return 4;
    case DataType::f16:
    case DataType::bf16:
      return 2;
    case DataType::e4m3:
    case DataType::e5m2:
      return 1;
  }
  return 4;
}

namespace {

std::string lower(std::string_view text) {
  std::string t(text);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  return t;
}

}  // namespace

DataType parse_data_type(std::string_view text) {
  const std::string t = lower(text);
  if (t == "f32" || t == "fp32" || t == "float" || t == "float32" || t == "s") return DataType::f32;
  if (t == "f16" || t == "fp16" || t == "half" || t == "float16" || t == "h") return DataType::f16;
  if (t == "bf16" || t == "bfloat16") return DataType::bf16;
  if (t == "e4m3" || t == "fp8_e4m3" || t == "float8_e4m3fn") return DataType::e4m3;
  if (t == "e5m2" || t == "fp8_e5m2" || t == "float8_e5m2") return DataType::e5m2;
  GT_THROW(Errc::invalid_argument, "unknown data type '{}' (expected f32, f16, bf16, e4m3 or e5m2)",
           text);
}

Op parse_op(char c) {
  if (c == 'n' || c == 'N') return Op::N;
  if (c == 't' || c == 'T') return Op::T;
  GT_THROW(Errc::invalid_argument, "unknown op '{}' (expected n or t)", c);
}

std::string_view to_string(Scaling scaling) noexcept {
  switch (scaling) {
    case Scaling::none:
      return "none";
    case Scaling::tensor:
      return "tensor";
    case Scaling::row:
      return "row";
    case Scaling::block:
      return "block";
  }
  return "?";
}

Scaling parse_scaling(std::string_view text) {
  for (Scaling s : {Scaling::none, Scaling::tensor, Scaling::row, Scaling::block})
    if (lower(text) == to_string(s)) return s;
  GT_THROW(Errc::invalid_argument, "unknown scaling '{}' (expected none, tensor, row or block)",
           text);
}

std::string_view to_string(GroupLayout layout) noexcept {
  return layout == GroupLayout::masked ? "masked" : "contiguous";
}

GroupLayout parse_group_layout(std::string_view text) {
  for (GroupLayout l : {GroupLayout::contiguous, GroupLayout::masked})
    if (lower(text) == to_string(l)) return l;
  GT_THROW(Errc::invalid_argument, "unknown group layout '{}' (expected contiguous or masked)",
           text);
}

std::string_view to_string(Accumulation accumulation) noexcept {
  return accumulation == Accumulation::fast ? "fast" : "precise";
}

Accumulation parse_accumulation(std::string_view text) {
  for (Accumulation a : {Accumulation::precise, Accumulation::fast})
    if (lower(text) == to_string(a)) return a;
  GT_THROW(Errc::invalid_argument, "unknown accumulation '{}' (expected precise or fast)", text);
}

std::string_view to_string(Precision precision) noexcept {
  switch (precision) {
    case Precision::exact:
      return "exact";
    case Precision::tf32:
      return "tf32";
    case Precision::tf32x3:
      return "3xtf32";
  }
  return "exact";
}

Precision parse_precision(std::string_view text) {
  for (Precision p : {Precision::exact, Precision::tf32, Precision::tf32x3})
    if (lower(text) == to_string(p)) return p;
  GT_THROW(Errc::invalid_argument, "unknown precision '{}' (expected exact, tf32 or 3xtf32)", text);
}

std::string_view to_string(Activation activation) noexcept {
  switch (activation) {
    case Activation::identity:
      return "identity";
    case Activation::relu:
      return "relu";
    case Activation::gelu:
      return "gelu";
    case Activation::gelu_tanh:
      return "gelu_tanh";
    case Activation::silu:
      return "silu";
  }
  return "?";
}

namespace {

// A gated epilogue's name by its activation: SwiGLU's SiLU, GeGLU's GELU, ReGLU's ReLU.
constexpr std::pair<std::string_view, Activation> kGatedNames[] = {
    {"swiglu", Activation::silu},
    {"geglu", Activation::gelu},
    {"geglu_tanh", Activation::gelu_tanh},
    {"reglu", Activation::relu}};

std::string_view gated_name(Activation activation) {
  for (const auto& [name, a] : kGatedNames)
    if (a == activation) return name;
  return "?";
}

}  // namespace

namespace {

// A pre-activation output needs an activation before which to keep the value, and one value
// (not a gate's and an up's).
void check_aux(const Epilogue& e) {
  GT_REQUIRE(!e.aux || (e.activation != Activation::identity && !e.gated()), Errc::invalid_argument,
             "epilogue {}: aux (the pre-activation as a second output) is for an activation that "
             "is not gated (relu, gelu, gelu_tanh, silu)",
             e.name());
}

}  // namespace

std::string Epilogue::name() const {
  if (none()) return "none";
  std::vector<std::string_view> parts;
  if (bias != Bias::none) parts.push_back(bias == Bias::m ? "bias" : "bias_n");
  if (gated())
    parts.push_back(gated_name(activation));
  else if (activation != Activation::identity)
    parts.push_back(to_string(activation));
  if (gate == Gate::interleaved) parts.push_back("interleaved");
  if (aux) parts.push_back("aux");
  return fmt::format("{}", fmt::join(parts, ","));
}

Epilogue parse_epilogue(std::string_view text) {
  Epilogue e;
  if (lower(text) == "none") return e;
  bool has_bias = false, has_activation = false, interleaved = false;
  auto set_activation = [&](Activation a) {
    GT_REQUIRE(!has_activation, Errc::invalid_argument,
               "epilogue: more than one activation (a gated name is one)");
    e.activation = a;
    has_activation = true;
  };
  for (bool more = !text.empty(); more;) {
    const size_t comma = text.find(',');
    const std::string part = lower(text.substr(0, comma));
    more = comma != std::string_view::npos;  // "bias," ends with an empty part, refused below
    text = more ? text.substr(comma + 1) : "";
    if (part == "bias" || part == "bias_m" || part == "bias_n") {
      GT_REQUIRE(!has_bias, Errc::invalid_argument, "epilogue: more than one bias");
      e.bias = part == "bias_n" ? Bias::n : Bias::m;
      has_bias = true;
      continue;
    }
    if (part == "interleaved") {
      interleaved = true;
      continue;
    }
    if (part == "aux") {
      GT_REQUIRE(!e.aux, Errc::invalid_argument, "epilogue: aux twice");
      e.aux = true;
      continue;
    }
    bool known = false;
    for (Activation a : {Activation::identity, Activation::relu, Activation::gelu,
                         Activation::gelu_tanh, Activation::silu})
      if (part == to_string(a)) set_activation(a), known = true;
    for (const auto& [name, a] : kGatedNames)
      if (part == name) set_activation(a), e.gate = Gate::halves, known = true;
    GT_REQUIRE(known, Errc::invalid_argument,
               "unknown epilogue part '{}' (expected bias, bias_n, relu, gelu, gelu_tanh, silu, "
               "identity, or a gated swiglu, geglu, geglu_tanh, reglu with interleaved, and aux, "
               "comma-separated)",
               part);
  }
  GT_REQUIRE(!interleaved || e.gated(), Errc::invalid_argument,
             "epilogue: interleaved is the layout of a gated one (swiglu, geglu, ...)");
  if (interleaved) e.gate = Gate::interleaved;
  check_aux(e);
  return e;
}

namespace {

int64_t blocks_of(int64_t extent) {
  return (extent + kScaleBlock - 1) / kScaleBlock;
}

// An operand's scales: one, one per its `rows` (row), or per 128 K values of `block_rows` (block).
ScaleShape scale_shape(Scaling scaling, int64_t rows, int64_t block_rows, int64_t k) {
  switch (scaling) {
    case Scaling::none:
      return {};
    case Scaling::tensor:
      return {1, 1};
    case Scaling::row:
      return {rows, 1};
    case Scaling::block:
      return {block_rows, blocks_of(k)};
  }
  return {};
}

}  // namespace

ScaleShape scale_shape_a(const Problem& p) {
  ScaleShape s = scale_shape(p.scaling, p.m, blocks_of(p.m), p.k);  // 128 x 128 blocks of op(A)
  s.cols *= p.group_count();  // a grouped problem's groups one after another
  return s;
}

ScaleShape scale_shape_b(const Problem& p) {
  return scale_shape(p.scaling, p.n, p.n, p.k);  // 1 x 128 of each column of op(B)
}

std::string DataTypes::name() const {
  if (is_uniform()) return std::string(to_string(a));
  std::string out = fmt::format("{}*{}->{}", to_string(a), to_string(b), to_string(d));
  if (c != d) out += fmt::format("+c={}", to_string(c));
  if (acc != DataType::f32) out += fmt::format("+acc={}", to_string(acc));
  return out;
}

std::string DataTypes::token() const {
  if (is_uniform()) return std::string(to_string(a));
  std::string out = fmt::format("{}_{}_{}", to_string(a), to_string(b), to_string(d));
  if (c != d) out += fmt::format("_c{}", to_string(c));
  if (acc != DataType::f32) out += fmt::format("_acc{}", to_string(acc));
  return out;
}

DataTypes parse_data_types(std::string_view text) {
  const size_t star = text.find('*');
  if (star == std::string_view::npos) return DataTypes::uniform(parse_data_type(text));
  const size_t arrow = text.find("->", star);
  GT_REQUIRE(arrow != std::string_view::npos, Errc::invalid_argument,
             "data types '{}': expected A*B->D (e4m3*e5m2->bf16) or one type", text);
  DataTypes t;
  t.a = parse_data_type(text.substr(0, star));
  t.b = parse_data_type(text.substr(star + 1, arrow - star - 1));
  std::string_view rest = text.substr(arrow + 2);
  const size_t plus = rest.find('+');
  t.d = t.c = parse_data_type(rest.substr(0, plus));
  while (plus != std::string_view::npos && !rest.empty()) {
    rest = rest.substr(rest.find('+') + 1);
    const size_t next = rest.find('+');
    const std::string_view part = rest.substr(0, next);
    if (part.starts_with("c="))
      t.c = parse_data_type(part.substr(2));
    else if (part.starts_with("acc="))
      t.acc = parse_data_type(part.substr(4));
    else
      GT_THROW(Errc::invalid_argument, "data types '{}': unknown part '{}' (expected c= or acc=)",
               text, part);
    if (next == std::string_view::npos) break;
  }
  return t;
}

std::string Problem::layout() const {
  return {to_char(op_a), to_char(op_b)};
}

double Problem::operand_bytes() const {
  return double(m) * double(k) * double(group_count()) * element_bytes(types.a) +
         double(k) * double(n) * element_bytes(types.b) +
         double(output_rows()) * double(n) * (reads_c ? element_bytes(types.c) : 0) +
         double(output_rows()) * double(n) * element_bytes(types.d) * (epilogue.aux ? 2 : 1) +
         bias_bytes();
}

double Problem::bias_bytes() const {
  const Bias bias = epilogue.bias;
  return bias == Bias::none ? 0.0 : double(bias == Bias::m ? m : n) * element_bytes(types.d);
}

std::string Problem::shape() const {
  return fmt::format("{}x{}x{}", m, n, k);
}

std::string Problem::beta_mark() const {
  return reads_c ? " beta!=0" : "";
}

std::string Problem::describe() const {
  const std::string scaled = scaling == Scaling::none
                                 ? ""
                                 : fmt::format(" scaling={}{}", to_string(scaling),
                                               fast_accumulation() ? " accum=fast" : "");
  const std::string precise =
      precision == Precision::exact ? "" : fmt::format(" precision={}", to_string(precision));
  const std::string grouping =
      grouped() ? fmt::format(" groups={}{}", groups, masked() ? " masked" : "") : "";
  const std::string epilogued = epilogue.none() ? "" : " epilogue=" + epilogue.name();
  return fmt::format("{} {} {} lda={} ldb={} ldc={} align={}{}{}{}{}{}", types.name(), layout(),
                     shape(), lda, ldb, ldc, align, scaled, precise, grouping, epilogued,
                     beta_mark());
}

ColumnRange group_columns(const Problem& p, const int32_t* values, int64_t g) {
  if (p.masked()) {
    const int64_t begin = g * p.group_capacity();
    return {begin, begin + values[g]};
  }
  return {g > 0 ? values[g - 1] : 0, values[g]};
}

size_t ProblemHash::operator()(const Problem& p) const noexcept {
  size_t h = 0;
  for (int64_t v : {int64_t(p.types.a),
                    int64_t(p.types.b),
                    int64_t(p.types.c),
                    int64_t(p.types.d),
                    int64_t(p.types.acc),
                    int64_t(p.scaling),
                    int64_t(p.op_a),
                    int64_t(p.op_b),
                    p.m,
                    p.n,
                    p.k,
                    p.lda,
                    p.ldb,
                    p.ldc,
                    int64_t(p.align),
                    int64_t(p.reads_c),
                    p.groups,
                    int64_t(p.group_layout),
                    int64_t(p.accumulation),
                    int64_t(p.precision),
                    int64_t(p.epilogue.bias),
                    int64_t(p.epilogue.activation),
                    int64_t(p.epilogue.gate),
                    int64_t(p.epilogue.aux)})
    h = h * 1000003u ^ size_t(v);
  return h;
}

Problem make_problem(DataTypes types, Op op_a, Op op_b, int64_t m, int64_t n, int64_t k) {
  Problem p;
  p.types = types;
  p.op_a = op_a;
  p.op_b = op_b;
  p.m = m;
  p.n = n;
  p.k = k;
  p.lda = std::max<int64_t>(1, p.rows_a());
  p.ldb = std::max<int64_t>(1, p.rows_b());
  p.ldc = std::max<int64_t>(1, m);
  p.align = alignment_class(types, nullptr, nullptr, nullptr, p.lda, p.ldb, p.ldc);
  return p;
}

namespace {

// Bytes from the first element of a stored rows x cols matrix to one past its last, or -1 when
// that does not fit in 62 bits (no memory is that large; the kernels' 64-bit offsets stay exact).
int64_t span_bytes(int64_t rows, int64_t cols, int64_t ld, int esize) {
  const unsigned __int128 elements = (unsigned __int128)(cols - 1) * uint64_t(ld) + uint64_t(rows);
  const unsigned __int128 bytes = elements * unsigned(esize);
  return bytes >> 62 ? -1 : int64_t(bytes);
}

bool is_fp8(DataType type) {
  return type == DataType::e4m3 || type == DataType::e5m2;
}

// Float8 operands come with their scales, and only they have scales (cuBLASLt's rule).
void validate_scaling(const Problem& p) {
  const bool fp8 = is_fp8(p.types.a) || is_fp8(p.types.b);
  GT_REQUIRE(!fp8 || (is_fp8(p.types.a) && is_fp8(p.types.b)), Errc::invalid_argument,
             "A is {} but B is {}: float8 multiplies float8 (e4m3 or e5m2 each)",
             to_string(p.types.a), to_string(p.types.b));
  GT_REQUIRE(!fp8 || p.scaling != Scaling::none, Errc::invalid_argument,
             "{} operands take scales: a scaling of tensor, row or block", p.types.name());
  GT_REQUIRE(fp8 || p.scaling == Scaling::none, Errc::invalid_argument,
             "scaling {} is for float8 operands (e4m3, e5m2), not {}", to_string(p.scaling),
             p.types.name());
  GT_REQUIRE(!is_fp8(p.types.d), Errc::invalid_argument, "D is {}: the output is f32, f16 or bf16",
             to_string(p.types.d));
  GT_REQUIRE(!p.fast_accumulation() || fp8, Errc::invalid_argument,
             "fast accumulation is for float8 with tensor or row scaling, not {}", p.types.name());
  GT_REQUIRE(!p.fast_accumulation() || p.scaling != Scaling::block, Errc::invalid_argument,
             "fast accumulation is for float8 with tensor or row scaling, not scaling block: block "
             "scales multiply each 128-deep K block's sum, a promotion already");
}

}  // namespace

void validate(const Problem& p) {
  GT_REQUIRE(p.m >= 1, Errc::invalid_argument, "M must be at least 1 (got {})", p.m);
  GT_REQUIRE(p.n >= 1, Errc::invalid_argument, "N must be at least 1 (got {})", p.n);
  GT_REQUIRE(p.k >= 1, Errc::invalid_argument, "K must be at least 1 (got {})", p.k);
  GT_REQUIRE(p.m <= kMaxDimension && p.n <= kMaxDimension && p.k <= kMaxDimension,
             Errc::invalid_argument, "M, N and K must be at most 2^30 = {} each (got {})",
             kMaxDimension, p.shape());
  GT_REQUIRE(p.lda >= p.rows_a(), Errc::invalid_argument,
             "lda ({}) must be at least the rows of A as stored ({}: op(A)={}, {})", p.lda,
             p.rows_a(), to_char(p.op_a), p.op_a == Op::N ? "M" : "K");
  GT_REQUIRE(p.ldb >= p.rows_b(), Errc::invalid_argument,
             "ldb ({}) must be at least the rows of B as stored ({}: op(B)={}, {})", p.ldb,
             p.rows_b(), to_char(p.op_b), p.op_b == Op::N ? "K" : "N");
  GT_REQUIRE(!p.epilogue.gated() || p.epilogue.activation != Activation::identity,
             Errc::invalid_argument, "a gated epilogue needs an activation of its gate");
  GT_REQUIRE(!p.epilogue.gated() || (p.m % 2 == 0 && !p.reads_c), Errc::invalid_argument,
             "epilogue {}: a gated epilogue takes an even M (gate and up rows; D has M / 2) and "
             "reads no C (beta = 0), got M = {}{}",
             p.epilogue.name(), p.m, p.reads_c ? " and beta != 0" : "");
  check_aux(p.epilogue);
  GT_REQUIRE(p.ldc >= p.output_rows(), Errc::invalid_argument,
             "ldc ({}) must be at least D's rows ({}{})", p.ldc, p.output_rows(),
             p.epilogue.gated() ? ": M / 2, gated" : ": M");
  GT_REQUIRE(p.groups >= 0 && p.groups <= kMaxGroups, Errc::invalid_argument,
             "groups must be 0 (one GEMM) or 1 to {} (got {})", kMaxGroups, p.groups);
  GT_REQUIRE(p.group_layout == GroupLayout::contiguous || p.grouped(), Errc::invalid_argument,
             "a masked group layout needs groups");
  GT_REQUIRE(!p.masked() || p.n % p.groups == 0, Errc::invalid_argument,
             "masked: N ({}) must be the {} groups' capacity times G", p.n, p.groups);
  GT_REQUIRE(!p.grouped() || p.epilogue.none(), Errc::invalid_argument,
             "{}: grouped problems with an epilogue are not supported yet", p.describe());
  for (const auto& [name, rows, cols, ld, type] :
       {std::tuple{'A', p.rows_a(), p.cols_a_stored(), p.lda, p.types.a},
        std::tuple{'B', p.rows_b(), p.cols_b(), p.ldb, p.types.b},
        std::tuple{'C', p.output_rows(), p.n, p.ldc, p.types.c}})
    GT_REQUIRE(span_bytes(rows, cols, ld, element_bytes(type)) >= 0, Errc::invalid_argument,
               "{} spans more than 2^62 bytes (ld {} x {} columns): no GPU holds that", name, ld,
               cols);
  // The library writes D over C: one buffer, so one type, until D has a buffer of its own.
  GT_REQUIRE(p.types.c == p.types.d, Errc::invalid_argument,
             "C is {} but D is {}: D is written over C, so they must be one type",
             to_string(p.types.c), to_string(p.types.d));
  validate_scaling(p);
  GT_REQUIRE(p.precision == Precision::exact || p.types == DataTypes::uniform(DataType::f32),
             Errc::invalid_argument,
             "precision {} is for f32 operands, accumulator and output, not {}: other types have "
             "one way of being computed",
             to_string(p.precision), p.types.name());
  GT_REQUIRE(p.align >= 1 && p.align <= 16 && (p.align & (p.align - 1)) == 0,
             Errc::invalid_argument, "alignment class must be a power of two in 1..16 (got {})",
             p.align);
}

int alignment_class(const DataTypes& types, const void* a, const void* b, const void* c,
                    int64_t lda, int64_t ldb, int64_t ldc) noexcept {
  uint64_t bits = reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
                  reinterpret_cast<uintptr_t>(c) | uint64_t(lda) * element_bytes(types.a) |
                  uint64_t(ldb) * element_bytes(types.b) | uint64_t(ldc) * element_bytes(types.c) |
                  16u;
  return int(bits & (~bits + 1));  // lowest set bit, at most 16
}

int alignment_class(const DataTypes& types, const void* a, const void* b, const void* c,
                    const void* d, bool reads_c, int64_t lda, int64_t ldb, int64_t ldc) noexcept {
  const int of_c = alignment_class(types, a, b, c, lda, ldb, ldc);
  if (d == nullptr || d == c) return of_c;
  const int of_d = alignment_class(types, a, b, d, lda, ldb, ldc);
  return reads_c ? std::min(of_c, of_d) : of_d;
}

}  // namespace gemmtune
