#include "cli_common.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>

#include "gemmtune/generator/util.hpp"

namespace gemmtune::cli {

int guarded_main(const char* tool, const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    std::string msg = e.what();
    // Compile errors carry a whole log: the first line is the message.
    if (e.code() != Errc::compile && msg.find('\n') != std::string::npos)
      msg = msg.substr(0, msg.find('\n'));
    std::cerr << tool << ": error: " << msg << "\n";
    return e.code() == Errc::invalid_argument ? 2 : 1;
  } catch (const std::exception& e) {
    std::cerr << tool << ": error: " << e.what() << "\n";
    return 1;
  } catch (...) {
    std::cerr << tool << ": error: unknown failure\n";
    return 1;
  }
}

int parse(const char* tool, CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return -1;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    std::replace(msg.begin(), msg.end(), '\n', ' ');
    std::cerr << tool << ": error: " << msg << "\nRun '" << tool << " --help' for the options.\n";
    return 2;
  }
}

Table::Table(std::vector<std::string> header) : header_(std::move(header)) {}

void Table::add(std::vector<std::string> row) {
  row.resize(header_.size());
  rows_.push_back(std::move(row));
}

namespace {
bool numeric(const std::string& s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) {
                       return std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-' ||
                              c == '%' || c == 'x' || c == 'e' || c == '+';
                     }) &&
         std::isdigit(static_cast<unsigned char>(s.front() == '-' ? s[1 % s.size()] : s.front()));
}
}  // namespace

std::string Table::render(const std::string& indent) const {
  std::vector<size_t> width(header_.size());
  std::vector<bool> right(header_.size(), true);
  for (size_t i = 0; i < header_.size(); ++i) width[i] = header_[i].size();
  for (const auto& row : rows_)
    for (size_t i = 0; i < row.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
      if (!row[i].empty() && !numeric(row[i])) right[i] = false;
    }
  std::ostringstream out;
  auto line = [&](const std::vector<std::string>& row) {
    out << indent;
    for (size_t i = 0; i < row.size(); ++i) {
      const std::string pad(width[i] - row[i].size(), ' ');
      out << (i ? "  " : "")
          << (right[i] ? pad + row[i] : row[i] + (i + 1 < row.size() ? pad : ""));
    }
    out << "\n";
  };
  line(header_);
  for (const auto& row : rows_) line(row);
  return out.str();
}

namespace {

// The whole of `text` as a number, else Error(invalid_argument) naming the line.
template <typename T>
T parse_number(const std::string& line, const std::string& text) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  GT_REQUIRE(ec == std::errc() && end == text.data() + text.size() && !text.empty(),
             Errc::invalid_argument, "'{}': '{}' is not a number", line, text);
  return value;
}

int64_t parse_integer(const std::string& line, const std::string& text) {
  return parse_number<int64_t>(line, text);
}

float parse_beta(const std::string& line, const std::string& text) {
  const float beta = parse_number<float>(line, text);
  GT_REQUIRE(std::isfinite(beta), Errc::invalid_argument, "'{}': beta must be finite (got {})",
             line, text);
  return beta;
}

bool is_fp8(DataType type) {
  return type == DataType::e4m3 || type == DataType::e5m2;
}

bool names_every_type(const std::string& dtype) {
  return dtype.find('*') != std::string::npos;
}

// `what`'s type ("B's type"), any of data_types.h's.
DataType operand_type(const std::string& text, const char* what) {
  try {
    return parse_data_type(text);
  } catch (const Error& e) {
    GT_THROW(Errc::invalid_argument, "{}: {}", what, e.what());
  }
}

// The output's type: f32, f16 or bf16.
DataType output_type(const std::string& text) {
  DataType type = DataType::f32;
  try {
    type = parse_data_type(text);
  } catch (const Error&) {
    GT_THROW(Errc::invalid_argument, "unknown output type '{}' (expected bf16, f16 or f32)", text);
  }
  GT_REQUIRE(!is_fp8(type), Errc::invalid_argument,
             "output type '{}': the output is bf16, f16 or f32 (float8 is for A and B)", text);
  return type;
}

Scaling scaling_of(const std::string& text) {
  try {
    return parse_scaling(text);
  } catch (const Error&) {
    GT_THROW(Errc::invalid_argument,
             "unknown scaling '{}' (expected tensor, row or block; none for other types than "
             "float8)",
             text);
  }
}

}  // namespace

void add_type_options(CLI::App& app, TypeArgs& args) {
  app.add_option("--dtype", args.dtype, kTypesHelp)->capture_default_str();
  app.add_option("--dtype-b", args.dtype_b, kTypeBHelp);
  app.add_option("--out", args.out, kOutHelp);
  app.add_option("--scaling", args.scaling, kScalingHelp);
  app.add_option("--accum", args.accum, kAccumHelp);
  app.add_option("--precision", args.precision, kPrecisionHelp);
  app.add_option("--epilogue", args.epilogue, kEpilogueHelp);
  app.add_option("--groups", args.groups,
                 fmt::format("Groups of a grouped GEMM (mixture of experts: G matrices of A share "
                             "M and K, the columns of B and C are split between them), 1 to {}; "
                             "0: one GEMM (default). With G groups --n (and a shapes file's N) is "
                             "the mean columns (tokens) of a group: the problem has N = G x --n",
                             kMaxGroups));
  app.add_option("--group-layout", args.group_layout,
                 "How the groups split the columns, with --groups: contiguous (default: group g "
                 "owns the columns up to its end, G int32 ends in device memory) or masked (each "
                 "group a fixed capacity of columns, of which it uses its count, G int32 counts in "
                 "device memory: a decode step in a CUDA graph); masked, --n (and a shapes file's "
                 "N) is the capacity of a group: the problem has N = G x --n");
}

ProblemTypes problem_types(const TypeArgs& args) {
  const std::string dtype = args.dtype.empty() ? "f32" : args.dtype;
  ProblemTypes out;
  if (names_every_type(dtype)) {
    GT_REQUIRE(args.dtype_b.empty() && args.out.empty(), Errc::invalid_argument,
               "'{}' names the type of every operand: B's type (--dtype-b, dtype_b=) and the "
               "output type (--out, out=) go with one type (--dtype e4m3 --dtype-b e5m2 --out f16)",
               dtype);
    out.types = parse_data_types(dtype);
  } else {
    const DataType a = parse_data_type(dtype);
    const DataType b = args.dtype_b.empty() ? a : operand_type(args.dtype_b, "B's type");
    const bool fp8 = is_fp8(a) || is_fp8(b);
    const DataType d = !args.out.empty() ? output_type(args.out) : fp8 ? DataType::bf16 : a;
    out.types = DataTypes{a, b, d, d};
  }
  const bool fp8 = is_fp8(out.types.a) || is_fp8(out.types.b);
  out.scaling = !args.scaling.empty() ? scaling_of(args.scaling)
                : fp8                 ? Scaling::tensor
                                      : Scaling::none;
  return out;
}

int64_t groups_of(const std::string& text) {
  int64_t groups = -1;
  const char* end = text.data() + text.size();
  const auto [stop, ec] = std::from_chars(text.data(), end, groups);
  GT_REQUIRE(
      !text.empty() && stop == end && ec != std::errc::invalid_argument, Errc::invalid_argument,
      "groups '{}' is not a number (expected 0 for one GEMM, or 1 to {} groups)", text, kMaxGroups);
  GT_REQUIRE(ec == std::errc() && groups >= 0 && groups <= kMaxGroups, Errc::invalid_argument,
             "groups must be 0 (one GEMM) or 1 to {} (got {})", kMaxGroups, text);
  return groups;
}

int64_t columns_of(int64_t mean, int64_t groups) {
  if (groups == 0) return mean;
  // Checked before it is multiplied: a mean near 2^63 must not wrap around.
  GT_REQUIRE(mean <= kMaxDimension / groups, Errc::invalid_argument,
             "{} groups of {} columns make N = {} x {}, above the largest N ({})", groups, mean,
             groups, mean, kMaxDimension);
  return mean * groups;
}

ShapeLine parse_shape_line(const std::string& raw) {
  std::istringstream words(raw);
  std::vector<std::string> tokens;
  for (std::string w; words >> w;) tokens.push_back(w);
  ShapeLine s;
  s.text = fmt::format("'{}'", raw);
  // The shape: "MxNxK" as one word, or three words.
  std::string dims = tokens.empty() ? "" : tokens[0];
  if (dims.find('x') == std::string::npos && tokens.size() >= 3)
    dims = tokens[0] + "x" + tokens[1] + "x" + tokens[2];
  std::replace(dims.begin(), dims.end(), 'x', ' ');
  std::istringstream shape(dims);
  std::string rest;
  if (!(shape >> s.m >> s.n >> s.k) || (shape >> rest))
    GT_THROW(Errc::invalid_argument,
             "'{}' is not a shape (expected 'M N K' or 'MxNxK', then optional types, layout, "
             "types=, accum=, precision=, groups=, group_layout=, epilogue=, lda=, ldb=, ldc=, "
             "beta=)",
             raw);
  std::vector<std::string> positional;  // the types, then the layout
  bool types_key = false;
  for (size_t next = tokens[0].find('x') == std::string::npos ? 3 : 1; next < tokens.size();
       ++next) {
    const std::string& t = tokens[next];
    // key=value; a mixed-types name has '=' too ("e4m3*e4m3->bf16+acc=f16"), but never a key of
    // letters only before it.
    const auto eq = t.find('=');
    const bool keyed = eq != std::string::npos && eq > 0 &&
                       std::all_of(t.begin(), t.begin() + std::ptrdiff_t(eq), [](char ch) {
                         return std::isalpha(static_cast<unsigned char>(ch)) || ch == '_';
                       });
    if (!keyed) {
      positional.push_back(t);
      continue;
    }
    const std::string key = t.substr(0, eq);
    const std::string text = t.substr(eq + 1);
    if (key == "types") {
      GT_REQUIRE(!types_key, Errc::invalid_argument, "'{}': types= is given twice", raw);
      types_key = true;
      s.dtype = text;
    } else if (key == "dtype_b" || key == "out" || key == "scaling" || key == "accum" ||
               key == "precision" || key == "groups" || key == "group_layout" ||
               key == "epilogue") {
      std::string& field = key == "dtype_b"     ? s.dtype_b
                           : key == "out"       ? s.out
                           : key == "scaling"   ? s.scaling
                           : key == "accum"     ? s.accum
                           : key == "precision" ? s.precision
                           : key == "groups"    ? s.groups
                           : key == "epilogue"  ? s.epilogue
                                                : s.group_layout;
      GT_REQUIRE(field.empty(), Errc::invalid_argument, "'{}': {}= is given twice", raw, key);
      GT_REQUIRE(!text.empty(), Errc::invalid_argument, "'{}': {}= has no value", raw, key);
      field = text;
    } else if (key == "beta")
      s.beta = parse_beta(raw, text);
    else if (key == "lda")
      s.lda = parse_integer(raw, text);
    else if (key == "ldb")
      s.ldb = parse_integer(raw, text);
    else if (key == "ldc")
      s.ldc = parse_integer(raw, text);
    else
      GT_THROW(Errc::invalid_argument,
               "'{}': unknown field '{}' (types, dtype_b, out, scaling, accum, precision, groups, "
               "group_layout, epilogue, lda, ldb, ldc, beta)",
               raw, key);
  }
  // Positional: the types and the layout, or only the layout after types=.
  const size_t allowed = types_key ? 1 : 2;
  GT_REQUIRE(positional.size() <= allowed, Errc::invalid_argument,
             "'{}': unexpected '{}' (after the shape: {}the layout, then key=value fields)", raw,
             positional[allowed], types_key ? "" : "the types, ");
  if (!types_key && !positional.empty()) s.dtype = positional[0];
  if (positional.size() == allowed) s.layout = positional.back();
  // Each value is checked here, so that a bad one is refused with its line (the command line's
  // options join them later: a line's B type alone is checked with its own types, if any).
  try {
    if (types_key || !s.dtype.empty()) parse_data_types(s.dtype);
    if (!s.dtype_b.empty()) operand_type(s.dtype_b, "B's type");
    if (!s.out.empty()) output_type(s.out);
    if (!s.scaling.empty()) scaling_of(s.scaling);
    if (!s.accum.empty()) parse_accumulation(s.accum);
    if (!s.precision.empty()) parse_precision(s.precision);
    if (!s.epilogue.empty()) parse_epilogue(s.epilogue);
    if (!s.groups.empty()) groups_of(s.groups);
    if (!s.group_layout.empty()) parse_group_layout(s.group_layout);
    if (!s.dtype.empty()) problem_types({s.dtype, s.dtype_b, s.out, s.scaling});
  } catch (const Error& e) {
    GT_THROW(Errc::invalid_argument, "'{}': {}", raw, e.what());
  }
  return s;
}

std::vector<ShapeLine> read_shapes_file(const std::string& path) {
  std::ifstream in(path);
  GT_REQUIRE(in, Errc::invalid_argument, "cannot read the shapes file '{}'", path);
  std::vector<ShapeLine> shapes;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      shapes.push_back(parse_shape_line(line));
      shapes.back().text = fmt::format("{}:{}: {}", path, number, shapes.back().text);
    } catch (const Error& e) {
      GT_THROW(Errc::invalid_argument, "{}:{}: {}", path, number, e.what());
    }
  }
  GT_REQUIRE(!shapes.empty(), Errc::invalid_argument, "the shapes file '{}' lists no shapes", path);
  return shapes;
}

Problem make_cli_problem(const TypeArgs& types, const std::string& layout, int64_t m, int64_t n,
                         int64_t k, int64_t lda, int64_t ldb, int64_t ldc, float beta) {
  GT_REQUIRE(layout.size() == 2, Errc::invalid_argument, "layout '{}' must be nn, nt, tn or tt",
             layout);
  GT_REQUIRE(m >= 1 && n >= 1 && k >= 1, Errc::invalid_argument,
             "M, N and K must be at least 1 (got {}x{}x{})", m, n, k);
  const ProblemTypes t = problem_types(types);
  const int64_t groups = types.groups.empty() ? 0 : groups_of(types.groups);
  const GroupLayout group_layout =
      types.group_layout.empty() ? GroupLayout::contiguous : parse_group_layout(types.group_layout);
  GT_REQUIRE(group_layout == GroupLayout::contiguous || groups > 0, Errc::invalid_argument,
             "the masked group layout needs groups (--groups G or groups=G; N is then the "
             "capacity of a group); one GEMM has no group layout");
  // With groups, n is the mean columns of a group (the MoE suite's N), or a masked group's
  // capacity: the tight leading dimensions are of all the groups' columns.
  Problem p =
      make_problem(t.types, parse_op(layout[0]), parse_op(layout[1]), m, columns_of(n, groups), k);
  p.scaling = t.scaling;
  // validate() below refuses fast accumulation other than of float8 with tensor or row scaling.
  p.accumulation = types.accum.empty() ? Accumulation::precise : parse_accumulation(types.accum);
  // validate() below refuses a precision other than exact of other types than f32.
  p.precision = types.precision.empty() ? Precision::exact : parse_precision(types.precision);
  p.groups = groups;
  p.group_layout = group_layout;
  p.epilogue = parse_epilogue(types.epilogue);
  p.ldc = std::max<int64_t>(1, p.output_rows());  // tight: D's rows, M / 2 when gated
  if (lda) p.lda = lda;
  if (ldb) p.ldb = ldb;
  if (ldc) p.ldc = ldc;
  p.align = alignment_class(p.types, nullptr, nullptr, nullptr, p.lda, p.ldb, p.ldc);
  p.reads_c = beta != 0.0f;
  validate(p);
  return p;
}

Problem problem_of_line(const ShapeLine& line, const TypeArgs& types, const std::string& layout,
                        float beta) {
  TypeArgs t = types;
  if (!line.dtype.empty()) {
    t.dtype = line.dtype;
    // A*B->D on the line names every type: the command line's B and output types are not its.
    if (names_every_type(line.dtype)) {
      t.dtype_b.clear();
      t.out.clear();
    }
  }
  if (!line.dtype_b.empty()) t.dtype_b = line.dtype_b;
  if (!line.out.empty()) t.out = line.out;
  if (!line.scaling.empty()) t.scaling = line.scaling;
  if (!line.accum.empty()) t.accum = line.accum;
  if (!line.precision.empty()) t.precision = line.precision;
  if (!line.epilogue.empty()) t.epilogue = line.epilogue;
  if (!line.groups.empty()) t.groups = line.groups;
  if (!line.group_layout.empty()) t.group_layout = line.group_layout;
  try {
    // A line of one GEMM among the command line's masked groups: it has no group layout.
    if (line.group_layout.empty() && !line.groups.empty() && groups_of(line.groups) == 0)
      t.group_layout.clear();
    // The command line's precision is of f32 lines: a line naming other types has the one way.
    if (line.precision.empty() && !line.dtype.empty() && !t.precision.empty() &&
        problem_types(t).types != DataTypes::uniform(DataType::f32))
      t.precision.clear();
    return make_cli_problem(t, line.layout.empty() ? layout : line.layout, line.m, line.n, line.k,
                            line.lda, line.ldb, line.ldc, line.beta.value_or(beta));
  } catch (const Error& e) {
    if (line.text.empty()) throw;
    throw Error(e.code(), fmt::format("{}: {}", line.text, e.what()));
  }
}

std::string format_ms(double ms) {
  if (ms < 0) return "-";
  if (ms < 0.1) return fmt::format("{:.4f}", ms);
  if (ms < 10) return fmt::format("{:.3f}", ms);
  return fmt::format("{:.2f}", ms);
}

}  // namespace gemmtune::cli
