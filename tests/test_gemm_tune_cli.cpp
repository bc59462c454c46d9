// gemm-tune and gemm-bench on bad input: a clear one-line message, a non-zero exit, no crash.
// And --dry-run --json, which needs no GPU.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <tuple>

#include "cli_common.hpp"
#include "gemmtune/cache/tuning_db.hpp"
#include "gemmtune/generator/family.hpp"
#include "support.hpp"

namespace gemmtune {
namespace {

using test::run_command;
using test::tool;

std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void expect_usage_error(const std::string& args, const std::string& message) {
  const auto r = run_command(tool("gemm-tune") + " " + args);
  EXPECT_EQ(r.signal, 0) << "crashed: " << args;
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
  EXPECT_NE(r.output.find("gemm-tune: error: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(message), std::string::npos)
      << "expected '" << message << "' in: " << r.output;
}

TEST(GemmTuneCli, BadInput) {
  expect_usage_error("", "give the shape with --m, --n and --k");
  expect_usage_error("--m -3 --n 4 --k 5", "M, N and K must be at least 1");
  expect_usage_error("--m 8 --n 8", "M, N and K must be at least 1");
  expect_usage_error("--m 8 --n 8 --k 8 --dtype f64", "unknown data type 'f64'");
  expect_usage_error("--m 8 --n 8 --k 8 --layout xn", "unknown op 'x'");
  expect_usage_error("--m 8 --n 8 --k 8 --layout nnn", "layout 'nnn'");
  expect_usage_error("--m 8 --n 8 --k 8 --lda 4", "lda (4) must be at least");
  expect_usage_error("--m 8 --n 8 --k 8 --budget lots --dry-run", "budget 'lots'");
  expect_usage_error("--m 8 --n 8 --k 8 --bogus", "--bogus");
  expect_usage_error("--m abc --n 8 --k 8", "--m");
  expect_usage_error("--shapes /nonexistent/shapes.txt", "cannot read the shapes file");
  expect_usage_error("--m 8 --n 8 --k 8 --dry-run --arch sm_99", "unknown architecture 'sm_99'");
  expect_usage_error("--m 8 --n 8 --k 8 --dtype bf16 --dry-run --families simt",
                     "family 'simt' cannot solve bf16");
  expect_usage_error("--m 8 --n 8 --k 8 --dry-run --families nope", "unknown kernel family 'nope'");
}

TEST(GemmTuneCli, MalformedShapesFileNamesTheLine) {
  test::TempDir dir;
  std::ofstream(dir / "shapes.txt") << "# comment\n64 64 64\nnot a shape\n";
  expect_usage_error("--dry-run --shapes " + (dir / "shapes.txt").string(), "shapes.txt:3");
}

TEST(GemmTuneCli, HelpExitsZero) {
  const auto r = run_command(tool("gemm-tune") + " --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("--dry-run"), std::string::npos);
}

TEST(GemmTuneCli, WithoutGpuTuningSaysSo) {
  if (cu::available()) GTEST_SKIP() << "this machine has a GPU";
  const auto r = run_command(tool("gemm-tune") + " --m 64 --n 64 --k 64");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("no GPU"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--dry-run"), std::string::npos)
      << "it points to what works: " << r.output;
}

// Runs `gemm-tune <args> --dry-run --arch <arch> --json` with an empty kernel cache and checks that
// every listed candidate of `family` compiled without spills under a name with `prefix`.
nlohmann::json expect_dry_run(const std::string& args, size_t candidates, const std::string& family,
                              const std::string& prefix, const std::string& arch = "sm_90a") {
  test::TempDir dir;
  const auto r = run_command("GEMMTUNE_CACHE_DIR=" + dir.path().string() + " " + tool("gemm-tune") +
                                 " " + args + " --dry-run --arch " + arch + " --json",
                             false);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j.at("candidates").size(), candidates);
  for (const auto& c : j.at("candidates")) {
    EXPECT_EQ(c.at("family"), family);
    EXPECT_EQ(c.at("status"), "compiled");
    EXPECT_GT(c.at("registers").get<int>(), 0);
    EXPECT_EQ(c.at("spills").get<int>(), 0);
    EXPECT_TRUE(c.at("name").get<std::string>().starts_with(prefix)) << c.at("name");
  }
  return j;
}

TEST(GemmTuneCli, DryRunJsonListsCandidates) {
  const auto j =
      expect_dry_run("--m 300 --n 200 --k 100 --budget 4", 4, "simt", "gemm_simt_f32_nn_");
  EXPECT_EQ(j.at("compiled"), 4);
  EXPECT_EQ(j.at("failed"), 0);
  EXPECT_GT(j.at("pruned").get<int>(), 0);
}

// On Hopper both tensor-core families are searched; each family's default is measured first.
TEST(GemmTuneCli, DryRunListsTheWgmmaFamilyForBf16) {
  expect_dry_run("--m 4096 --n 4096 --k 4096 --dtype bf16 --budget 3 --families wgmma_sm90", 3,
                 "wgmma_sm90", "gemm_wgmma_bf16_nn_");
  test::TempDir dir;
  const auto r = run_command(
      "GEMMTUNE_CACHE_DIR=" + dir.path().string() + " " + tool("gemm-tune") +
          " --m 4096 --n 4096 --k 4096 --dtype bf16 --dry-run --list --arch sm_90a --json",
      false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto listed = nlohmann::json::parse(r.output);
  std::set<std::string> families;
  for (const auto& c : listed.at("candidates")) families.insert(c.at("family").get<std::string>());
  EXPECT_EQ(families, (std::set<std::string>{"wgmma_sm90", "mma_sm80"}));
}

// One token through a layer: the gemv family comes first, with the most promising candidates.
nlohmann::json expect_dry_run_any(const std::string& args) {
  test::TempDir dir;
  const auto r = run_command("GEMMTUNE_CACHE_DIR=" + dir.path().string() + " " + tool("gemm-tune") +
                                 " " + args + " --dry-run --list --arch sm_90a --json",
                             false);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output);
}

TEST(GemmTuneCli, DryRunListsTheGemvFamilyForOneColumn) {
  expect_dry_run("--m 4096 --n 1 --k 4096 --dtype bf16 --layout tn --budget 3 --families gemv", 3,
                 "gemv", "gemm_gemv_bf16_tn_n1_dot_");
  // Without --families: every family's default first, the gemv family's before all others.
  const auto all =
      expect_dry_run_any("--m 4096 --n 1 --k 4096 --dtype bf16 --layout tn --budget 1");
  EXPECT_EQ(all.at("candidates").at(0).at("family"), "gemv");
}

TEST(GemmTuneCli, DryRunListsTheMmaFamilyForBf16OnAmpere) {
  const auto j = expect_dry_run("--m 4096 --n 4096 --k 4096 --dtype bf16 --layout tn --budget 3", 3,
                                "mma_sm80", "gemm_mma80_bf16_tn_", "sm_80");
  EXPECT_EQ(j.at("arch"), "sm_80");
  EXPECT_GT(j.at("pruned_by").at("widest_vector").get<int>(), 0);
}

TEST(GemmTuneCli, WgmmaNeedsHopper) {
  expect_usage_error(
      "--m 64 --n 64 --k 64 --dtype bf16 --dry-run --arch sm_80 --families wgmma_sm90",
      "family 'wgmma_sm90' cannot solve bf16 nn 64x64x64");
  const auto r = run_command(
      tool("gemm-tune") +
      " --m 64 --n 64 --k 64 --dtype bf16 --dry-run --arch sm_80 --families wgmma_sm90");
  EXPECT_NE(r.output.find("needs sm_90a"), std::string::npos) << r.output;
}

// A --db that is no gemmtune database, or a damaged one, is refused before anything runs (no GPU
// needed to see it), with what is wrong, and never written to or truncated.
TEST(GemmTuneCli, RefusesADatabaseFileThatIsNotAGemmtuneDatabase) {
  test::TempDir dir;
  std::ofstream(dir / "random.db", std::ios::binary) << test::random_bytes(20000, 7);
  std::ofstream(dir / "notes.db", std::ios::binary)
      << "remember the milk\n" + std::string(5000, 'x');
  {
    sqlite3* other = nullptr;
    ASSERT_EQ(sqlite3_open((dir / "photos.db").c_str(), &other), SQLITE_OK);
    sqlite3_exec(other,
                 "CREATE TABLE photos (id INTEGER PRIMARY KEY, path TEXT);"
                 "INSERT INTO photos (path) VALUES ('beach.jpg')",
                 nullptr, nullptr, nullptr);
    sqlite3_close(other);
  }
  {
    TuningDb db(dir / "tuning.db");
    const Problem p = make_problem(DType::f32, Op::N, Op::N, 64, 64, 64);
    const KernelConfig c = find_family("simt").default_config(p, ArchInfo::from_cc(90));
    for (int i = 0; i < 400; ++i) {
      CandidateRecord r;
      r.kernel_name = "gemm_simt_" + std::to_string(i);
      r.template_version = template_version(find_family("simt"));
      r.config = c;
      r.status = CandidateStatus::compile_error;
      r.message = std::string(200, 'm');
      db.record({"NVIDIA H100 80GB HBM3", 90, 132, 13000, "13.0"}, p, r);
    }
  }
  const std::string whole = read_bytes(dir / "tuning.db");
  std::ofstream(dir / "truncated.db", std::ios::binary) << whole.substr(0, whole.size() / 2);
  for (const auto& [name, says] :
       std::vector<std::pair<std::string, std::string>>{{"random.db", "is not an SQLite database"},
                                                        {"notes.db", "is not an SQLite database"},
                                                        {"photos.db", "another program"},
                                                        {"truncated.db", "is damaged"}}) {
    const auto path = dir / name;
    const std::string before = read_bytes(path);
    const auto r = run_command(tool("gemm-tune") + " --m 64 --n 64 --k 64 --db " + path.string());
    EXPECT_EQ(r.signal, 0) << name;
    EXPECT_EQ(r.exit_code, 1) << name << ": " << r.output;
    EXPECT_NE(r.output.find("gemm-tune: error: " + path.string()), std::string::npos)
        << name << ": " << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << name << ": " << r.output;
    EXPECT_EQ(read_bytes(path), before) << name << " was changed";
  }
}

// The test family is in no installed program: asking for it by name is an unknown family.
TEST(GemmTuneCli, TheTestFamilyIsUnknownToTheTools) {
  expect_usage_error("--m 64 --n 64 --k 64 --dry-run --families fault_injection",
                     "unknown kernel family 'fault_injection'");
}

// Anything that goes wrong compiling one candidate becomes that candidate's record, never the end
// of the run: here GEMMTUNE_DUMP_SOURCE names a file, not a folder.
TEST(GemmTuneCli, ACandidateThatCannotBeCompiledIsRecordedAndTheRunGoesOn) {
  test::TempDir dir;
  std::ofstream(dir / "a_file") << "not a folder";
  const auto r = run_command("GEMMTUNE_CACHE_DIR=" + (dir / "cache").string() +
                                 " GEMMTUNE_DUMP_SOURCE=" + (dir / "a_file").string() + " " +
                                 tool("gemm-tune") +
                                 " --m 64 --n 64 --k 64 --dry-run --arch sm_80 --budget 2 --json",
                             false);
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.exit_code, 1) << "candidates failed: " << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j.at("candidates").size(), 2u);
  EXPECT_EQ(j.at("failed"), 2);
  for (const auto& c : j.at("candidates")) {
    EXPECT_EQ(c.at("status"), "compile_error");
    EXPECT_NE(c.at("message").get<std::string>().find("GEMMTUNE_DUMP_SOURCE=" +
                                                      (dir / "a_file").string()),
              std::string::npos)
        << c.at("message");
  }
}

// ---- float8 on the command line and in shapes files ----------------------------------------

// `f` throws Error(invalid_argument) whose one-line message holds every part of `says`.
template <class F>
void expect_refused(F&& f, const std::string& what, const std::vector<std::string>& says) {
  try {
    f();
    ADD_FAILURE() << what << ": accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument) << what;
    for (const auto& part : says)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << what << ": '" << e.what() << "' does not say '" << part << "'";
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << what << ": " << e.what();
  }
}

cli::ProblemTypes types_of(const std::string& dtype, const std::string& dtype_b = "",
                           const std::string& out = "", const std::string& scaling = "") {
  return cli::problem_types({dtype, dtype_b, out, scaling});
}

TEST(CliTypes, Float8IsBothOperandsWithABf16OutputAndTensorScalesByDefault) {
  const auto e4m3 = types_of("e4m3");
  EXPECT_EQ(e4m3.types.name(), "e4m3*e4m3->bf16");
  EXPECT_EQ(e4m3.scaling, Scaling::tensor);
  EXPECT_EQ(types_of("fp8_e5m2").types.name(), "e5m2*e5m2->bf16");
  const auto mixed = types_of("e4m3", "e5m2", "f16", "block");
  EXPECT_EQ(mixed.types.name(), "e4m3*e5m2->f16");
  EXPECT_EQ(mixed.scaling, Scaling::block);
  EXPECT_EQ(types_of("e5m2", "", "f32", "row").types.name(), "e5m2*e5m2->f32");
  EXPECT_EQ(types_of("e4m3", "", "BF16", "Tensor").scaling, Scaling::tensor);
  // A*B->D names every type; its scaling is still tensor by default.
  const auto named = types_of("e4m3*e5m2->bf16+acc=f16");
  EXPECT_EQ(named.types.name(), "e4m3*e5m2->bf16+acc=f16");
  EXPECT_EQ(named.scaling, Scaling::tensor);
  // Other types: unscaled, the output of --dtype's type unless --out says otherwise.
  EXPECT_EQ(types_of("bf16").types, DataTypes::uniform(DType::bf16));
  EXPECT_EQ(types_of("bf16").scaling, Scaling::none);
  EXPECT_EQ(types_of("").types, DataTypes::uniform(DType::f32));
  EXPECT_EQ(types_of("f16", "", "f32").types.name(), "f16*f16->f32");
  EXPECT_EQ(types_of("f16", "bf16").types.name(), "f16*bf16->f16");
  EXPECT_EQ(types_of("bf16", "", "", "none").scaling, Scaling::none);
}

TEST(CliTypes, BadValuesAreNamedWithWhatIsAccepted) {
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> bad = {
      {{"q8"}, {"unknown data type 'q8'", "f32, f16, bf16, e4m3 or e5m2"}},
      {{"e4m3", "e6m1"}, {"B's type", "unknown data type 'e6m1'", "e5m2"}},
      {{"e4m3", "", "f64"}, {"unknown output type 'f64'", "bf16, f16 or f32"}},
      {{"e4m3", "", "e4m3"}, {"output type 'e4m3'", "bf16, f16 or f32"}},
      {{"e4m3", "", "", "channel"}, {"unknown scaling 'channel'", "tensor, row or block"}},
      {{"e4m3*e4m3->bf16", "e5m2"}, {"'e4m3*e4m3->bf16' names the type of every operand"}},
      {{"e4m3*e4m3->bf16", "", "f16"}, {"'e4m3*e4m3->bf16' names", "--out"}},
  };
  for (const auto& [args, says] : bad) {
    std::vector<std::string> a = args;
    a.resize(4);
    expect_refused([&] { types_of(a[0], a[1], a[2], a[3]); }, a[0] + " " + a[1] + " " + a[2], says);
  }
  // Whole problems: validate() says which combinations are not one.
  const std::vector<std::pair<cli::TypeArgs, std::string>> invalid = {
      {{"e4m3", "", "", "none"}, "e4m3*e4m3->bf16 operands take scales"},
      {{"bf16", "", "", "row"}, "scaling row is for float8 operands (e4m3, e5m2), not bf16"},
      {{"bf16", "e4m3"}, "A is bf16 but B is e4m3"},
      {{"e4m3*e4m3->e4m3"}, "D is e4m3: the output is f32, f16 or bf16"},
  };
  for (const auto& [args, says] : invalid)
    expect_refused([&] { cli::make_cli_problem(args, "tn", 64, 64, 64, 0, 0, 0); },
                   args.dtype + " " + args.scaling, {says});
}

TEST(ShapesFile, Float8LinesTakeDtypeBOutAndScaling) {
  const cli::TypeArgs command_line{};  // f32, nothing else given
  auto problem_of = [&](const std::string& line, const cli::TypeArgs& args) {
    return cli::problem_of_line(cli::parse_shape_line(line), args, "nn", 0.0f);
  };
  const Problem block = problem_of("2112 64 7168 e4m3 tn scaling=block", command_line);
  EXPECT_EQ(block.describe(),
            "e4m3*e4m3->bf16 tn 2112x64x7168 lda=7168 ldb=7168 ldc=2112 align=16 scaling=block");
  EXPECT_EQ(problem_of("64 64 64 e4m3 tn", command_line).scaling, Scaling::tensor);
  const Problem keyed =
      problem_of("64x64x128 types=e4m3 dtype_b=e5m2 out=f32 scaling=row nt beta=1", command_line);
  EXPECT_EQ(keyed.types.name(), "e4m3*e5m2->f32");
  EXPECT_EQ(keyed.scaling, Scaling::row);
  EXPECT_EQ(keyed.layout(), "nt");
  EXPECT_TRUE(keyed.reads_c);
  // The command line's options where the line gives none: here every line is float8.
  const cli::TypeArgs fp8{"e4m3", "e5m2", "f16", "block"};
  EXPECT_EQ(problem_of("64 64 64", fp8).types.name(), "e4m3*e5m2->f16");
  EXPECT_EQ(problem_of("64 64 64", fp8).scaling, Scaling::block);
  const Problem line_wins = problem_of("64 64 64 e5m2 out=bf16 scaling=tensor dtype_b=e5m2", fp8);
  EXPECT_EQ(line_wins.types.name(), "e5m2*e5m2->bf16");
  EXPECT_EQ(line_wins.scaling, Scaling::tensor);
  // A line's A*B->D takes neither the command line's B type nor its output.
  EXPECT_EQ(problem_of("64 64 64 e4m3*e4m3->f32", fp8).types.name(), "e4m3*e4m3->f32");
  // What GEMMTUNE_RECORD writes reads back.
  EXPECT_EQ(problem_of("2112 64 7168 e4m3*e4m3->bf16 tn scaling=block", command_line), block);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"64 64 64 e4m3 scaling=channel",
       "'64 64 64 e4m3 scaling=channel': unknown scaling "
       "'channel' (expected tensor, row or block"},
      {"64 64 64 e4m3 out=e5m2", "'64 64 64 e4m3 out=e5m2': output type 'e5m2'"},
      {"64 64 64 e4m3 out=f64", "unknown output type 'f64' (expected bf16, f16 or f32)"},
      {"64 64 64 e4m3 dtype_b=q4", "B's type: unknown data type 'q4'"},
      {"64 64 64 e4m3 scaling=row scaling=block", "scaling= is given twice"},
      {"64 64 64 e4m3 out=", "out= has no value"},
      {"64 64 64 e4m3*e4m3->bf16 out=f16", "names the type of every operand"},
      {"64 64 64 e4m3 scale=row",
       "unknown field 'scale' (types, dtype_b, out, scaling, accum, precision, groups, "
       "group_layout, epilogue, lda, ldb, ldc, beta)"},
  };
  for (const auto& [line, says] : bad)
    expect_refused([&] { cli::parse_shape_line(line); }, line, {says});
  // Combinations are refused with the line's place in its file.
  test::TempDir dir;
  std::ofstream(dir / "shapes.txt") << "64 64 64 e4m3 tn\n# comment\n64 64 64 bf16 scaling=row\n";
  const auto lines = cli::read_shapes_file((dir / "shapes.txt").string());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(cli::problem_of_line(lines[0], command_line, "nn", 0.0f).scaling, Scaling::tensor);
  expect_refused([&] { cli::problem_of_line(lines[1], command_line, "nn", 0.0f); }, "bf16 row",
                 {"shapes.txt:3: '64 64 64 bf16 scaling=row': scaling row is for float8"});
}

// accum= on a line, else --accum (TypeArgs::accum), chooses whether a float8 product promotes its
// sums: precise by default, fast only for tensor or row scaling. A bad value is refused with the
// line; a combination validate() refuses, with its message after the file and line.
TEST(ShapesFile, AccumLinesChooseTheAccumulationOfFloat8) {
  const cli::TypeArgs command_line{};
  auto problem_of = [](const std::string& line, const cli::TypeArgs& args) {
    return cli::problem_of_line(cli::parse_shape_line(line), args, "nn", 0.0f);
  };
  const Problem fast = problem_of("2112 64 7168 e4m3 tn accum=fast", command_line);
  EXPECT_EQ(fast.accumulation, Accumulation::fast);
  EXPECT_EQ(fast.scaling, Scaling::tensor);
  EXPECT_EQ(fast.describe(),
            "e4m3*e4m3->bf16 tn 2112x64x7168 lda=7168 ldb=7168 ldc=2112 align=16 scaling=tensor "
            "accum=fast");
  EXPECT_EQ(problem_of("64 64 64 e5m2 tn scaling=row accum=FAST", command_line).accumulation,
            Accumulation::fast);
  const Problem precise = problem_of("2112 64 7168 e4m3 tn", command_line);
  EXPECT_EQ(precise.accumulation, Accumulation::precise);
  EXPECT_NE(fast, precise);
  EXPECT_EQ(problem_of("2112 64 7168 e4m3 tn accum=precise", command_line), precise);
  // What describe() writes (and so GEMMTUNE_RECORD, with the types in full) reads back.
  EXPECT_EQ(problem_of("2112 64 7168 e4m3*e4m3->bf16 tn scaling=tensor accum=fast", command_line),
            fast);

  // --accum applies to every line that does not say otherwise.
  cli::TypeArgs fast_args{"e4m3"};
  fast_args.accum = "fast";
  EXPECT_EQ(problem_of("2112 64 7168 e4m3 tn", fast_args), fast);
  EXPECT_EQ(problem_of("2112 64 7168 e4m3 tn scaling=row", fast_args).accumulation,
            Accumulation::fast);
  EXPECT_EQ(problem_of("2112 64 7168 e4m3 tn accum=precise", fast_args), precise);
  EXPECT_EQ(problem_of("2112 64 7168 e4m3 tn scaling=block accum=precise", fast_args).scaling,
            Scaling::block);

  for (const auto& [line, says] : std::vector<std::pair<std::string, std::string>>{
           {"64 64 64 e4m3 accum=quick",
            "'64 64 64 e4m3 accum=quick': unknown accumulation 'quick' (expected precise or "
            "fast)"},
           {"64 64 64 e4m3 accum=", "'64 64 64 e4m3 accum=': accum= has no value"},
           {"64 64 64 e4m3 accum=fast accum=fast", "accum= is given twice"},
           {"64 64 64 e4m3 accumulation=fast",
            "unknown field 'accumulation' (types, dtype_b, out, scaling, accum, precision, "
            "groups, group_layout, epilogue, lda, ldb, ldc, beta)"}})
    expect_refused([&] { cli::parse_shape_line(line); }, line, {says});

  test::TempDir dir;
  std::ofstream(dir / "shapes.txt") << "64 64 64 e4m3 tn accum=fast\n"
                                       "64 64 64 bf16 tn accum=fast\n"
                                       "# block scales promote already\n"
                                       "2112 64 7168 e4m3 tn scaling=block accum=fast\n"
                                       "64 64 64 bf16 tn\n";
  const auto lines = cli::read_shapes_file((dir / "shapes.txt").string());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_TRUE(cli::problem_of_line(lines[0], command_line, "nn", 0.0f).fast_accumulation());
  expect_refused([&] { cli::problem_of_line(lines[1], command_line, "nn", 0.0f); }, "bf16 fast",
                 {"shapes.txt:2: '64 64 64 bf16 tn accum=fast': fast accumulation is for float8 "
                  "with tensor or row scaling, not bf16"});
  expect_refused([&] { cli::problem_of_line(lines[2], command_line, "nn", 0.0f); }, "block fast",
                 {"shapes.txt:4: '2112 64 7168 e4m3 tn scaling=block accum=fast': fast "
                  "accumulation is for float8 with tensor or row scaling, not scaling block"});
  // --accum fast reaches a bf16 line too: refused there, with its line.
  cli::TypeArgs fast_any{"f32"};
  fast_any.accum = "fast";
  EXPECT_FALSE(cli::problem_of_line(lines[3], command_line, "nn", 0.0f).fast_accumulation());
  expect_refused([&] { cli::problem_of_line(lines[3], fast_any, "nn", 0.0f); }, "--accum fast",
                 {"shapes.txt:5: '64 64 64 bf16 tn': fast accumulation is for float8"});
}

// precision= on a line, else --precision (TypeArgs::precision), chooses how an f32 product is
// computed: exact by default. --precision is of the file's f32 lines (a line naming other types has
// one way), a line's own precision= of its own. A bad value is refused with the line; a
// precision of other types than f32, with validate()'s message after the file and line.
TEST(ShapesFile, PrecisionLinesChooseHowF32IsComputed) {
  const cli::TypeArgs command_line{};
  auto problem_of = [](const std::string& line, const cli::TypeArgs& args) {
    return cli::problem_of_line(cli::parse_shape_line(line), args, "nn", 0.0f);
  };
  const Problem tf32 = problem_of("256 128 64 f32 precision=tf32", command_line);
  EXPECT_EQ(tf32.precision, Precision::tf32);
  EXPECT_EQ(tf32.describe(), "f32 nn 256x128x64 lda=256 ldb=64 ldc=256 align=16 precision=tf32");
  EXPECT_EQ(problem_of("256 128 64 f32 precision=3XTF32", command_line).precision,
            Precision::tf32x3);
  const Problem exact = problem_of("256 128 64 f32", command_line);
  EXPECT_EQ(exact.precision, Precision::exact);
  EXPECT_NE(tf32, exact);
  EXPECT_EQ(problem_of("256 128 64 f32 precision=exact", command_line), exact);

  cli::TypeArgs tf32_args{"f32"};
  tf32_args.precision = "tf32";
  EXPECT_EQ(problem_of("256 128 64", tf32_args), tf32);
  EXPECT_EQ(problem_of("256 128 64 f32 precision=exact", tf32_args), exact);
  EXPECT_EQ(problem_of("256 128 64 bf16", tf32_args).precision, Precision::exact);
  EXPECT_EQ(problem_of("256 128 64 e4m3 tn", tf32_args).precision, Precision::exact);

  for (const auto& [line, says] : std::vector<std::pair<std::string, std::string>>{
           {"64 64 64 f32 precision=fp32",
            "'64 64 64 f32 precision=fp32': unknown precision 'fp32' (expected exact, tf32 or "
            "3xtf32)"},
           {"64 64 64 f32 precision=", "'64 64 64 f32 precision=': precision= has no value"},
           {"64 64 64 precision=tf32 precision=tf32", "precision= is given twice"}})
    expect_refused([&] { cli::parse_shape_line(line); }, line, {says});

  test::TempDir dir;
  std::ofstream(dir / "shapes.txt") << "64 64 64 f32 precision=3xtf32\n"
                                       "64 64 64 bf16 tn precision=tf32\n";
  const auto lines = cli::read_shapes_file((dir / "shapes.txt").string());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(cli::problem_of_line(lines[0], command_line, "nn", 0.0f).precision, Precision::tf32x3);
  expect_refused([&] { cli::problem_of_line(lines[1], command_line, "nn", 0.0f); }, "bf16 tf32",
                 {"shapes.txt:2: '64 64 64 bf16 tn precision=tf32': precision tf32 is for f32 "
                  "operands, accumulator and output, not bf16"});
}

// The suite of issue 33 (shared/bench/fp8-shapes.txt, beside the checkout): every line parses.
TEST(ShapesFile, TheFloat8SuiteParses) {
  std::filesystem::path suite;
  for (const char* where : {"/shared/bench/fp8-shapes.txt", "/../shared/bench/fp8-shapes.txt"})
    if (std::filesystem::exists(std::string(GEMMTUNE_SOURCE_DIR) + where))
      suite = std::string(GEMMTUNE_SOURCE_DIR) + where;
  if (suite.empty()) GTEST_SKIP() << "no shared/bench/fp8-shapes.txt beside the checkout";
  std::set<Scaling> scalings;
  for (const auto& line : cli::read_shapes_file(suite.string())) {
    const Problem p = cli::problem_of_line(line, cli::TypeArgs{}, "nn", 0.0f);
    EXPECT_EQ(p.types.name(), "e4m3*e4m3->bf16") << line.text;
    EXPECT_EQ(p.layout(), "tn") << line.text;
    scalings.insert(p.scaling);
  }
  EXPECT_EQ(scalings, (std::set<Scaling>{Scaling::tensor, Scaling::row, Scaling::block}));
}

// gemm-tune's dry run for sm_90a of the problem of `options`: without a family for it in this
// build, it says why (`refusal`); with one, it lists candidates of it. Either way, the problem
// is the one asked for (`problem`, as describe() writes it).
void expect_dry_run_of(const std::string& options, const std::string& problem,
                       const std::string& refusal) {
  test::TempDir dir;
  const auto r = run_command("GEMMTUNE_CACHE_DIR=" + dir.path().string() + " " + tool("gemm-tune") +
                             " " + options + " --dry-run --list --arch sm_90a --json");
  EXPECT_EQ(r.signal, 0) << options;
  if (r.exit_code == 0)
    EXPECT_EQ(nlohmann::json::parse(r.output).at("problem"), problem) << options;
  else
    EXPECT_NE(r.output.find(refusal), std::string::npos) << options << ": " << r.output;
}

TEST(GemmTuneCli, Float8OptionsMakeTheScaledProblem) {
  expect_dry_run_of(
      "--m 2112 --n 64 --k 7168 --dtype e4m3 --dtype-b e5m2 --out f16 --scaling block --layout tn",
      "e4m3*e5m2->f16 tn 2112x64x7168 lda=7168 ldb=7168 ldc=2112 align=16 scaling=block",
      "no kernel family supports e4m3*e5m2->f16 tn on sm_90a");
  expect_usage_error("--m 64 --n 64 --k 64 --dtype e4m3 --out e5m2",
                     "output type 'e5m2': the output is bf16, f16 or f32");
  expect_usage_error("--m 64 --n 64 --k 64 --dtype e4m3 --out half8",
                     "unknown output type 'half8' (expected bf16, f16 or f32)");
  expect_usage_error("--m 64 --n 64 --k 64 --dtype e4m3 --scaling channel",
                     "unknown scaling 'channel' (expected tensor, row or block");
  expect_usage_error("--m 64 --n 64 --k 64 --dtype e4m3 --scaling none", "take scales");
  expect_usage_error("--m 64 --n 64 --k 64 --dtype bf16 --scaling row",
                     "scaling row is for float8 operands");
  expect_usage_error("--m 64 --n 64 --k 64 --dtype e4m3 --dtype-b bf16", "A is e4m3 but B is bf16");
  expect_usage_error("--m 64 --n 64 --k 64 --dtype 'e4m3*e4m3->bf16' --out f16",
                     "names the type of every operand");
  test::TempDir dir;
  std::ofstream(dir / "shapes.txt") << "2112 64 7168 e4m3 tn scaling=block\n64 64 64 e4m3 "
                                       "scaling=diagonal\n";
  expect_usage_error("--dry-run --shapes " + (dir / "shapes.txt").string(),
                     "shapes.txt:2: '64 64 64 e4m3 scaling=diagonal': unknown scaling 'diagonal'");
  const auto help = run_command(tool("gemm-tune") + " --help");
  for (const char* option : {"--dtype-b", "--out", "--scaling", "scaling="})
    EXPECT_NE(help.output.find(option), std::string::npos) << option << " not in --help";
  EXPECT_NE(help.output.find("default: tensor for float8"), std::string::npos) << help.output;
}

TEST(GemmTuneCli, AccumFastMakesTheFastProblem) {
  expect_dry_run_of("--m 2112 --n 64 --k 7168 --dtype e4m3 --layout tn --scaling row --accum fast",
                    "e4m3*e4m3->bf16 tn 2112x64x7168 lda=7168 ldb=7168 ldc=2112 align=16 "
                    "scaling=row accum=fast",
                    "no kernel family supports e4m3*e4m3->bf16 tn on sm_90a");
  expect_dry_run_of("--m 2112 --n 64 --k 7168 --dtype e4m3 --layout tn --accum Precise",
                    "e4m3*e4m3->bf16 tn 2112x64x7168 lda=7168 ldb=7168 ldc=2112 align=16 "
                    "scaling=tensor",
                    "no kernel family supports e4m3*e4m3->bf16 tn on sm_90a");
  expect_usage_error("--m 64 --n 64 --k 64 --dtype bf16 --accum fast",
                     "fast accumulation is for float8 with tensor or row scaling, not bf16");
  expect_usage_error(
      "--m 64 --n 64 --k 64 --dtype e4m3 --scaling block --accum fast",
      "fast accumulation is for float8 with tensor or row scaling, not scaling block");
  expect_usage_error("--m 64 --n 64 --k 64 --dtype e4m3 --accum quick",
                     "unknown accumulation 'quick' (expected precise or fast)");
  test::TempDir dir;
  std::ofstream(dir / "shapes.txt") << "64 64 64 e4m3 tn accum=fast\n64 64 64 f16 accum=fast\n";
  expect_usage_error("--dry-run --shapes " + (dir / "shapes.txt").string(),
                     "shapes.txt:2: '64 64 64 f16 accum=fast': fast accumulation is for float8");
  const auto help = run_command(tool("gemm-tune") + " --help");
  for (const char* words : {"--accum", "accum=", "use_fast_accum"})
    EXPECT_NE(help.output.find(words), std::string::npos) << words << " not in --help";
}

TEST(GemmTuneCli, PrecisionMakesTheProblemOfTensorCores) {
  const std::string f32 = "f32 nn 256x128x64 lda=256 ldb=64 ldc=256 align=16";
  expect_dry_run_of("--m 256 --n 128 --k 64 --precision tf32", f32 + " precision=tf32",
                    "no kernel family supports f32");
  expect_dry_run_of("--m 256 --n 128 --k 64 --precision 3xTF32", f32 + " precision=3xtf32",
                    "no kernel family supports f32");
  expect_dry_run_of("--m 256 --n 128 --k 64 --precision exact", f32,
                    "no kernel family supports f32");
  expect_usage_error("--m 64 --n 64 --k 64 --dtype bf16 --precision tf32",
                     "precision tf32 is for f32 operands, accumulator and output, not bf16");
  expect_usage_error("--m 64 --n 64 --k 64 --precision fp16",
                     "unknown precision 'fp16' (expected exact, tf32 or 3xtf32)");
  const auto help = run_command(tool("gemm-tune") + " --help");
  for (const char* words : {"--precision", "precision=", "FAST_TF32"})
    EXPECT_NE(help.output.find(words), std::string::npos) << words << " not in --help";
}

// gemm-bench refuses `args` before it needs a GPU, as bad usage: exit code 2, "gemm-bench:
// error: " and `says`.
void expect_bench_usage_error(const std::string& args, const std::string& says) {
  const auto r = run_command(tool("gemm-bench") + " " + args);
  EXPECT_EQ(r.signal, 0) << args;
  EXPECT_EQ(r.exit_code, 2) << args << ": " << r.output;
  EXPECT_NE(r.output.find("gemm-bench: error: "), std::string::npos) << args << ": " << r.output;
  EXPECT_NE(r.output.find(says), std::string::npos) << args << ": " << r.output;
}

TEST(GemmBenchCli, Float8OptionsAreCheckedBeforeTheGpu) {
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {"--m 64 --n 64 --k 64 --dtype e4m3 --out e4m3", "output type 'e4m3'"},
           {"--m 64 --n 64 --k 64 --dtype e4m3 --scaling sideways", "unknown scaling 'sideways'"},
           {"--m 64 --n 64 --k 64 --dtype f16 --scaling tensor", "scaling tensor is for float8"}}) {
    expect_bench_usage_error(args, says);
  }
  const auto help = run_command(tool("gemm-bench") + " --help");
  for (const char* option : {"--dtype-b", "--out", "--scaling"})
    EXPECT_NE(help.output.find(option), std::string::npos) << option << " not in --help";
}

// --accum is checked before the GPU. Fast accumulation itself is refused until the library's
// MatmulDesc carries it: gemm-bench would time the precise kernel under the fast problem's name.
TEST(GemmBenchCli, AccumIsCheckedBeforeTheGpu) {
  for (const auto& [args, code, says] : std::vector<std::tuple<std::string, int, std::string>>{
           {"--m 64 --n 64 --k 64 --dtype e4m3 --accum quick", 2, "unknown accumulation 'quick'"},
           {"--m 64 --n 64 --k 64 --dtype f16 --accum fast", 2,
            "fast accumulation is for float8 with tensor or row scaling, not f16"},
           {"--m 64 --n 64 --k 64 --dtype e4m3 --scaling block --accum fast", 2,
            "not scaling block"}}) {
    const auto r = run_command(tool("gemm-bench") + " " + args);
    EXPECT_EQ(r.signal, 0) << args;
    EXPECT_EQ(r.exit_code, code) << args << ": " << r.output;
    EXPECT_NE(r.output.find("gemm-bench: error: "), std::string::npos) << args << ": " << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << args << ": " << r.output;
  }
  const std::string help = run_command(tool("gemm-bench") + " --help").output;
  EXPECT_NE(help.find("--accum"), std::string::npos);
  EXPECT_NE(help.find("accum="), std::string::npos) << "the shapes file's key";
}

TEST(GemmBenchCli, PrecisionIsCheckedBeforeTheGpu) {
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {"--m 64 --n 64 --k 64 --precision tf16", "unknown precision 'tf16'"},
           {"--m 64 --n 64 --k 64 --dtype f16 --precision tf32",
            "precision tf32 is for f32 operands, accumulator and output, not f16"}}) {
    expect_bench_usage_error(args, says);
  }
  const std::string help = run_command(tool("gemm-bench") + " --help").output;
  EXPECT_NE(help.find("--precision"), std::string::npos);
  EXPECT_NE(help.find("precision="), std::string::npos) << "the shapes file's key";
}

TEST(GemmBenchCli, BadInput) {
  for (const std::string args :
       {"--suite nope", "--m 0 --n 4 --k 4", "--dtype q8", "--bogus", "--read-ceiling --dtype q8",
        "--read-ceiling --shapes /nonexistent/shapes.txt"}) {
    const auto r = run_command(tool("gemm-bench") + " " + args);
    EXPECT_EQ(r.signal, 0) << args;
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.output.find("gemm-bench: error: "), std::string::npos) << args << ": " << r.output;
  }
}

// ---- grouped problems (mixture of experts) -------------------------------------------------

// With groups, N on the command line and in a shapes file is the mean columns (tokens) of a
// group, as the MoE suite writes it: the problem has G x N columns, and the tight leading
// dimensions of that N.
TEST(ShapesFile, AGroupedLineGivesTheMeanColumnsOfAGroup) {
  const cli::TypeArgs command_line{};
  auto problem_of = [](const std::string& line, const cli::TypeArgs& args) {
    return cli::problem_of_line(cli::parse_shape_line(line), args, "nn", 0.0f);
  };
  const Problem moe = problem_of("1536 256 2048 bf16 tn groups=128", command_line);
  EXPECT_EQ(moe.m, 1536);
  EXPECT_EQ(moe.n, 32768);
  EXPECT_EQ(moe.k, 2048);
  EXPECT_EQ(moe.groups, 128);
  EXPECT_EQ(moe.describe(),
            "bf16 tn 1536x32768x2048 lda=2048 ldb=2048 ldc=1536 align=16 groups=128");
  // op(B) = T: B's leading dimension is N, of all the groups.
  const Problem nt = problem_of("64x100x64 f16 nt groups=8 beta=1", command_line);
  EXPECT_EQ(nt.n, 800);
  EXPECT_EQ(nt.ldb, 800);
  EXPECT_TRUE(nt.reads_c);
  // --groups applies to every line that does not say otherwise; groups=0 is one GEMM.
  cli::TypeArgs grouped{"bf16"};
  grouped.groups = "32";
  EXPECT_EQ(problem_of("4096 512 7168 bf16 tn", grouped).n, 32 * 512);
  EXPECT_EQ(problem_of("4096 512 7168 bf16 tn", grouped).groups, 32);
  EXPECT_EQ(problem_of("4096 512 7168 bf16 tn groups=8", grouped).groups, 8);
  const Problem one_gemm = problem_of("4096 512 7168 bf16 tn groups=0", grouped);
  EXPECT_EQ(one_gemm.groups, 0);
  EXPECT_EQ(one_gemm.n, 512);
  EXPECT_EQ(problem_of("4096 512 7168 bf16 tn", command_line).groups, 0);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"64 64 64 groups=-1", "'64 64 64 groups=-1': groups must be 0 (one GEMM) or 1 to 4096"},
      {"64 64 64 groups=4097", "groups must be 0 (one GEMM) or 1 to 4096 (got 4097)"},
      {"64 64 64 groups=99999999999999999999", "or 1 to 4096 (got 99999999999999999999)"},
      {"64 64 64 groups=many", "groups 'many' is not a number (expected 0 for one GEMM"},
      {"64 64 64 groups=8x", "groups '8x' is not a number"},
      {"64 64 64 groups=", "groups= has no value"},
      {"64 64 64 groups=8 groups=16", "groups= is given twice"},
  };
  for (const auto& [line, says] : bad)
    expect_refused([&] { cli::parse_shape_line(line); }, line, {says});
  expect_refused([&] { problem_of("64 1073741824 64 groups=2", command_line); }, "too many",
                 {"2 groups of 1073741824 columns make N = 2 x 1073741824, above the largest N"});
  expect_refused([&] { problem_of("64 64 64 bf16 groups=8 epilogue=bias", command_line); },
                 "epilogue", {"grouped problems with an epilogue are not supported yet"});
}

// The MoE suite (shared/bench/moe-shapes.txt, beside the checkout): every line parses, and each
// unscaled one is G groups of its N columns on average.
TEST(ShapesFile, TheMoeSuiteParses) {
  std::filesystem::path suite;
  for (const char* where : {"/shared/bench/moe-shapes.txt", "/../shared/bench/moe-shapes.txt"})
    if (std::filesystem::exists(std::string(GEMMTUNE_SOURCE_DIR) + where))
      suite = std::string(GEMMTUNE_SOURCE_DIR) + where;
  if (suite.empty()) GTEST_SKIP() << "no shared/bench/moe-shapes.txt beside the checkout";
  int scaled = 0;
  for (const auto& line : cli::read_shapes_file(suite.string())) {
    ASSERT_FALSE(line.groups.empty()) << line.text;
    const Problem p = cli::problem_of_line(line, cli::TypeArgs{}, "nn", 0.0f);
    EXPECT_EQ(p.n, p.groups * line.n) << line.text;
    EXPECT_EQ(p.layout(), "tn") << line.text;
    scaled += p.scaling != Scaling::none;
  }
  EXPECT_GT(scaled, 0);  // grouped float8 experts (DeepSeek-V3's)
}

TEST(GemmTuneCli, GroupsMakeTheGroupedProblemOfTheMeanN) {
  expect_dry_run_of("--m 1536 --n 256 --k 2048 --dtype bf16 --layout tn --groups 128",
                    "bf16 tn 1536x32768x2048 lda=2048 ldb=2048 ldc=1536 align=16 groups=128",
                    "has no grouped kernels");
  expect_usage_error("--m 64 --n 64 --k 64 --groups -1",
                     "groups must be 0 (one GEMM) or 1 to 4096 (got -1)");
  expect_usage_error("--m 64 --n 64 --k 64 --groups 5000",
                     "groups must be 0 (one GEMM) or 1 to 4096 (got 5000)");
  expect_usage_error("--m 64 --n 64 --k 64 --groups many", "groups 'many' is not a number");
  expect_usage_error("--m 64 --n 1073741824 --k 64 --groups 2", "above the largest N");
  // Grouped float8 experts (DeepSeek-V3's decode): candidates, not a refusal.
  test::TempDir dir;
  const auto fp8 =
      run_command("GEMMTUNE_CACHE_DIR=" + dir.path().string() + " " + tool("gemm-tune") +
                  " --m 4096 --n 8 --k 7168 --dtype e4m3 --layout tn --scaling block "
                  "--groups 32 --dry-run --list --arch sm_90a --json");
  ASSERT_EQ(fp8.exit_code, 0) << fp8.output;
  EXPECT_EQ(nlohmann::json::parse(fp8.output).at("problem"),
            "e4m3*e4m3->bf16 tn 4096x256x7168 lda=7168 ldb=7168 ldc=4096 align=16 scaling=block "
            "groups=32");
  const auto help = run_command(tool("gemm-tune") + " --help");
  for (const char* words : {"--groups", "groups=", "mean columns"})
    EXPECT_NE(help.output.find(words), std::string::npos) << words << " not in --help";
}

// Masked groups (each a fixed capacity of columns, of which it uses its count): N on the command
// line and in a shapes file is then the capacity of a group, and the problem has G x N columns
// again. A line's group_layout= replaces --group-layout; a line of one GEMM (groups=0) has none.
TEST(ShapesFile, AMaskedLineGivesTheCapacityOfAGroup) {
  const cli::TypeArgs command_line{};
  auto problem_of = [](const std::string& line, const cli::TypeArgs& args) {
    return cli::problem_of_line(cli::parse_shape_line(line), args, "nn", 0.0f);
  };
  const Problem decode =
      problem_of("1536 256 2048 bf16 tn groups=128 group_layout=masked", command_line);
  EXPECT_EQ(decode.n, 32768);
  EXPECT_EQ(decode.groups, 128);
  EXPECT_TRUE(decode.masked());
  EXPECT_EQ(decode.group_capacity(), 256);
  EXPECT_EQ(decode.describe(),
            "bf16 tn 1536x32768x2048 lda=2048 ldb=2048 ldc=1536 align=16 groups=128 masked");
  EXPECT_EQ(problem_of("1536 256 2048 bf16 tn groups=128 group_layout=contiguous", command_line),
            problem_of("1536 256 2048 bf16 tn groups=128", command_line));

  cli::TypeArgs masked{"bf16"};
  masked.groups = "32";
  masked.group_layout = "masked";
  const Problem from_options = problem_of("4096 64 7168 bf16 tn", masked);
  EXPECT_EQ(from_options.n, 32 * 64);
  EXPECT_TRUE(from_options.masked());
  EXPECT_TRUE(problem_of("4096 64 7168 bf16 tn groups=8", masked).masked());
  EXPECT_FALSE(problem_of("4096 64 7168 bf16 tn group_layout=contiguous", masked).masked());
  const Problem one_gemm = problem_of("4096 64 7168 bf16 tn groups=0", masked);
  EXPECT_EQ(one_gemm.groups, 0);
  EXPECT_EQ(one_gemm.group_layout, GroupLayout::contiguous);
  EXPECT_EQ(one_gemm.n, 64);

  for (const auto& [line, says] : std::vector<std::pair<std::string, std::string>>{
           {"64 64 64 groups=8 group_layout=diagonal",
            "unknown group layout 'diagonal' (expected contiguous or masked)"},
           {"64 64 64 group_layout=", "group_layout= has no value"},
           {"64 64 64 group_layout=masked group_layout=masked", "group_layout= is given twice"}})
    expect_refused([&] { cli::parse_shape_line(line); }, line, {says});
  for (const std::string line :
       {"64 64 64 group_layout=masked", "64 64 64 groups=0 group_layout=masked"})
    expect_refused([&] { problem_of(line, command_line); }, line,
                   {fmt::format("'{}': the masked group layout needs groups", line)});
  cli::TypeArgs masked_alone{"bf16"};
  masked_alone.group_layout = "masked";
  expect_refused([&] { problem_of("64 64 64", masked_alone); }, "--group-layout alone",
                 {"the masked group layout needs groups (--groups G or groups=G"});
}

TEST(GemmTuneCli, AMaskedLayoutMakesTheProblemOfTheCapacity) {
  // --n is a group's capacity: 128 groups of 256 columns.
  expect_dry_run_of(
      "--m 1536 --n 256 --k 2048 --dtype bf16 --layout tn --groups 128 --group-layout masked",
      "bf16 tn 1536x32768x2048 lda=2048 ldb=2048 ldc=1536 align=16 groups=128 masked",
      "no kernel family supports bf16 tn");
  expect_usage_error("--m 64 --n 64 --k 64 --group-layout masked",
                     "the masked group layout needs groups (--groups G");
  expect_usage_error("--m 64 --n 64 --k 64 --groups 0 --group-layout masked",
                     "the masked group layout needs groups");
  expect_usage_error("--m 64 --n 64 --k 64 --groups 8 --group-layout ragged",
                     "unknown group layout 'ragged' (expected contiguous or masked)");
  expect_usage_error("--m 64 --n 1073741824 --k 64 --groups 2 --group-layout masked",
                     "above the largest N");
  const auto help = run_command(tool("gemm-tune") + " --help");
  for (const char* words : {"--group-layout", "group_layout=", "capacity"})
    EXPECT_NE(help.output.find(words), std::string::npos) << words << " not in --help";
}

TEST(GemmBenchCli, GroupsAreCheckedBeforeTheGpu) {
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {"--m 64 --n 64 --k 64 --groups 4097", "or 1 to 4096 (got 4097)"},
           {"--m 64 --n 64 --k 64 --groups x", "groups 'x' is not a number"},
           {"--m 64 --n 64 --k 64 --group-layout masked", "the masked group layout needs groups"},
           {"--m 64 --n 64 --k 64 --groups 8 --group-layout x", "unknown group layout 'x'"}}) {
    expect_bench_usage_error(args, says);
  }
  const std::string help = run_command(tool("gemm-bench") + " --help").output;
  EXPECT_NE(help.find("--groups"), std::string::npos);
  EXPECT_NE(help.find("--group-layout"), std::string::npos);
}

}  // namespace
}  // namespace gemmtune
