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
    "Data types: f32, f16, bf16, e4m3 or e5m2 for every operand, or A*B->D[+c=T][+acc=T] "
    "(f16*bf16->f32)";
inline constexpr const char* kShapesHelp =
    "File of shapes, one per line: 'M N K [types] [layout] [types=] [lda=] [ldb=] [ldc=] [beta=]'";

// "8192x8192x8192" or "8192 8192 8192", optionally followed by the data types (a DataTypes name:
// bf16, f16*bf16->f32) and the layout, or by types=T and the layout; by lda=, ldb=, ldc= for
// leading dimensions other than the tight ones, and by beta= (not 0: C is read). Unknown types
// are refused here, naming them.
struct ShapeLine {
  int64_t m = 0, n = 0, k = 0;
  std::string dtype, layout;          // empty: the command line's; dtype is a DataTypes name
  int64_t lda = 0, ldb = 0, ldc = 0;  // 0: tight
  std::optional<float> beta;          // none: the command line's
};
ShapeLine parse_shape_line(const std::string& line);
// Lines of a shapes file (comments with '#', blank lines ignored); throws Error(invalid_argument).
std::vector<ShapeLine> read_shapes_file(const std::string& path);

// A problem from the usual options; ld = 0 means tight; it reads C when beta != 0. Throws
// Error(invalid_argument).
Problem make_cli_problem(const std::string& dtype, const std::string& layout, int64_t m, int64_t n,
                         int64_t k, int64_t lda, int64_t ldb, int64_t ldc, float beta = 0.0f);
// The problem of a shapes-file line, the command line's dtype, layout and beta where the line
// gives none.
Problem problem_of_line(const ShapeLine& line, const std::string& dtype, const std::string& layout,
                        float beta);

std::string format_ms(double ms);

}  // namespace gemmtune::cli
