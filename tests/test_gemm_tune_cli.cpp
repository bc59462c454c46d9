// gemm-tune and gemm-bench on bad input: a clear one-line message, a non-zero exit, no crash.
// And --dry-run --json, which needs no GPU.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

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

}  // namespace
}  // namespace gemmtune
