#pragma once
// What the command-line tools share: the error policy (one line on stderr, non-zero exit,
// never a core dump), aligned tables, and problem parsing.
#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gemmtune/types.hpp"

namespace gemmtune::cli {

// Runs body; turns exceptions into "<tool>: error: <message>" and exit codes:
// 2 for bad usage or input, 1 for everything else.
int guarded_main(const char* tool, const std::function<int()>& body);

// Parses argv into app; returns -1 when parsing succeeded, else the exit code to return
// (0 for --help, 2 with a one-line message for bad usage).
int parse(const char* tool, CLI::App& app, int argc, char** argv);

// An aligned text table; numeric-looking columns are right-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> header);
  void add(std::vector<std::string> row);
  std::string render(const std::string& indent = "") const;
  bool empty() const { return rows_.empty(); }

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// What --dtype and a shapes file's types take: a DataTypes name (parse_data_types).
inline constexpr const char* kTypesHelp =
    "Data types: f32, f16, bf16, e4m3 or e5m2 for every operand (e4m3, e5m2: A and B, with a "
    "bf16 output unless --out says otherwise), or A*B->D[+c=T][+acc=T] (f16*bf16->f32, "
    "e4m3*e5m2->f16)";
inline constexpr const char* kTypeBHelp =
    "B's type where it differs from --dtype's (e5m2 with --dtype e4m3); not with A*B->D";
inline constexpr const char* kOutHelp =
    "Output type (D, and C): bf16, f16 or f32 (default: bf16 for float8 operands, else "
    "--dtype's type); not with A*B->D";
inline constexpr const char* kScalingHelp =
    "Scales of float8 operands (fp32, in device memory): tensor (one per operand), row (one per "
    "row of op(A) and per column of op(B)) or block (128x128 blocks of op(A), 1x128 of op(B)); "
    "default: tensor for float8 operands, none for others";
inline constexpr const char* kAccumHelp =
    "How float8 products are summed: precise (default: partial sums promoted into f32) or fast "
    "(not promoted, as cuBLASLt's FAST_ACCUM and torch's use_fast_accum: faster, a larger error "
    "on long K), with tensor or row scaling only";
inline constexpr const char* kPrecisionHelp =
    "How f32 products are computed: exact (default: f32 on CUDA cores, SGEMM's accuracy), tf32 "
    "(tensor cores, 10-bit mantissas: cuBLAS's FAST_TF32, torch's 'high') or 3xtf32 (three tf32 "
    "products: exact's accuracy on tensor cores); f32 problems only, each tuned apart";
inline constexpr const char* kEpilogueHelp =
    "What the store applies, comma-separated: a bias (bias: one per row of D, an nn.Linear's "
    "output features; bias_n: one per column) and an activation (relu, gelu, gelu_tanh, silu): "
    "D = act(alpha AB + beta C + bias), or gated (swiglu, geglu, geglu_tanh, reglu, with "
    "interleaved for that layout); aux also stores the pre-activation (alpha AB + beta C + bias) "
    "as a second output, for an activation that is not gated; default: none";
inline constexpr const char* kShapesHelp =
    "File of shapes, one per line: 'M N K [types] [layout] [types=] [dtype_b=] [out=] "
    "[scaling=] [accum=] [precision=] [groups=] [group_layout=] [epilogue=] [lda=] [ldb=] [ldc=] "
    "[beta=]'; a line's fields replace the options of the same name (--precision: of f32 lines "
    "only); with groups=G, N is the mean columns of a group, or a masked group's capacity (the "
    "problem has G x N)";

// The types of a problem as the options (or a shapes file's line) give them, and its groups;
// empty: not given.
//   dtype    one type (A and B; also D, except that float8 operands give bf16) or A*B->D
//   dtype_b  B's type, where it is not dtype's
//   out      D's and C's type: f32, f16 or bf16
//   scaling  none, tensor, row or block (default: tensor for float8 operands, else none)
//   accum    precise (the default) or fast (Accumulation): fast for float8 with tensor or row
//            scaling only, which validate() says when the problem is made
//   precision exact (the default), tf32 or 3xtf32 (Precision): f32 problems only, which
//            validate() says when the problem is made
//   groups   G of a grouped GEMM, 0 (one GEMM, the default) to kMaxGroups; with G groups the N
//            given beside it is the mean columns (tokens) of a group: the problem has N = G x N
//   group_layout  contiguous (the default) or masked (GroupLayout), with groups only; masked, the
//            N given beside groups is a group's capacity (the problem has N = G x N again)
//   epilogue bias and activation (parse_epilogue: "bias,gelu"); none by default
// dtype_b and out go with a single type only: A*B->D names every type already.
struct TypeArgs {
  std::string dtype = "f32";
  std::string dtype_b, out, scaling, groups, group_layout, accum, epilogue, precision;
};
// Adds --dtype, --dtype-b, --out, --scaling, --accum, --precision, --groups, --group-layout and
// --epilogue to app, writing to args.
void add_type_options(CLI::App& app, TypeArgs& args);
// The types and scaling of args (dtype empty: f32). Throws Error(invalid_argument) naming the bad
// value and what is accepted.
struct ProblemTypes {
  DataTypes types;
  Scaling scaling = Scaling::none;
};
ProblemTypes problem_types(const TypeArgs& args);
// The G of --groups or groups=: 0 to kMaxGroups. Throws Error(invalid_argument) naming the text.
int64_t groups_of(const std::string& text);
// N of a problem of `groups` groups whose columns of a group are `mean` (the mean, or a masked
// group's capacity; mean itself for one GEMM); Error(invalid_argument) when that is above
// kMaxDimension.
int64_t columns_of(int64_t mean, int64_t groups);

// "8192x8192x8192" or "8192 8192 8192", optionally followed by the data types (a DataTypes name:
// bf16, f16*bf16->f32) and the layout, or by types=T and the layout; by dtype_b=, out=, scaling=,
// accum=, precision=, groups=, group_layout= and epilogue= (as --dtype-b, --out, --scaling,
// --accum, --precision, --groups, --group-layout and --epilogue), by lda=, ldb=, ldc= for leading
// dimensions other than the tight ones, and by beta= (not 0: C is read). Unknown types, output
// types, scalings, accumulations, precisions and group layouts, and bad groups, are refused here,
// naming them; accum=fast on a line that is not float8 of tensor or row scaling, and precision=
// other than exact on one that is not f32, are refused when its problem is made (validate()).
// With groups=G
// (or
// --groups) the line's N is the mean columns of a group, as the MoE suite writes it, or with
// group_layout=masked a group's capacity.
struct ShapeLine {
  int64_t m = 0, n = 0, k = 0;
  std::string dtype, layout;          // empty: the command line's; dtype is a DataTypes name
  int64_t lda = 0, ldb = 0, ldc = 0;  // 0: tight
  std::optional<float> beta;          // none: the command line's
  std::string dtype_b, out, scaling;  // empty: the command line's
  std::string accum;                  // empty: the command line's; precise or fast
  std::string precision;              // empty: the command line's (f32 lines); exact, tf32, 3xtf32
  std::string groups;                 // empty: the command line's; with G > 0, n is a group's mean
  std::string group_layout;           // empty: the command line's; masked: n is a group's capacity
  std::string epilogue;               // empty: the command line's; "bias,gelu", "none"
  std::string text;                   // the line as written, for messages ("file:3: '...'")
};
ShapeLine parse_shape_line(const std::string& line);
// Lines of a shapes file (comments with '#', blank lines ignored); throws Error(invalid_argument).
std::vector<ShapeLine> read_shapes_file(const std::string& path);

// A problem from the usual options; ld = 0 means tight; it reads C when beta != 0; with
// types.groups G > 0, n is the mean columns of a group (masked: a group's capacity) and the
// problem has N = G x n (the tight leading dimensions are of that N). A masked layout without
// groups is refused, and so are fast accumulation other than of float8 with tensor or row scaling
// and a precision other than exact of other types than f32 (validate()'s message). Throws
// Error(invalid_argument).
Problem make_cli_problem(const TypeArgs& types, const std::string& layout, int64_t m, int64_t n,
                         int64_t k, int64_t lda, int64_t ldb, int64_t ldc, float beta = 0.0f);
inline Problem make_cli_problem(const std::string& dtype, const std::string& layout, int64_t m,
                                int64_t n, int64_t k, int64_t lda, int64_t ldb, int64_t ldc,
                                float beta = 0.0f) {
  return make_cli_problem(TypeArgs{dtype}, layout, m, n, k, lda, ldb, ldc, beta);
}
// The problem of a shapes-file line: each of its types, dtype_b, out, scaling, accum, precision,
// groups, group_layout, epilogue, layout and beta, else the command line's. A line whose types are
// A*B->D takes neither --dtype-b nor --out; one of groups=0 (one GEMM) not --group-layout; one
// naming other types than f32 not --precision (the precision of the file's f32 problems).
Problem problem_of_line(const ShapeLine& line, const TypeArgs& types, const std::string& layout,
                        float beta);
inline Problem problem_of_line(const ShapeLine& line, const std::string& dtype,
                               const std::string& layout, float beta) {
  return problem_of_line(line, TypeArgs{dtype}, layout, beta);
}

std::string format_ms(double ms);

}  // namespace gemmtune::cli
