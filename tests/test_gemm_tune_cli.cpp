// gemm-tune and gemm-bench on bad input: a clear one-line message, a non-zero exit, no crash.
// And --dry-run --json, which needs no GPU.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "support.hpp"

namespace gemmtune {
namespace {

using test::run_command;
using test::tool;

void expect_usage_error(const std::string& args, const std::string& message) {
  const auto r = run_command(tool("gemm-tune") + " " + args);
  EXPECT_EQ(r.signal, 0) << "crashed: " << args;
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
  EXPECT_NE(r.output.find("gemm-tune: error: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(message), std::string::npos) << "expected '" << message << "' in: " << r.output;
}

TEST(GemmTuneCli, BadInput) {
  expect_usage_error("", "give the shape with --m, --n and --k");
  expect_usage_error("--m -3 --n 4 --k 5", "M, N and K must be at least 1");
  expect_usage_error("--m 8 --n 8", "M, N and K must be at least 1");
  expect_usage_error("--m 8 --n 8 --k 8 --dtype f64", "unknown dtype 'f64'");
  expect_usage_error("--m 8 --n 8 --k 8 --layout xn", "unknown op 'x'");
  expect_usage_error("--m 8 --n 8 --k 8 --layout nnn", "layout 'nnn'");
  expect_usage_error("--m 8 --n 8 --k 8 --lda 4", "lda (4) must be at least");
  expect_usage_error("--m 8 --n 8 --k 8 --budget lots --dry-run", "budget 'lots'");
  expect_usage_error("--m 8 --n 8 --k 8 --bogus", "--bogus");
  expect_usage_error("--m abc --n 8 --k 8", "--m");
  expect_usage_error("--shapes /nonexistent/shapes.txt", "cannot read the shapes file");
  expect_usage_error("--m 8 --n 8 --k 8 --dry-run --arch sm_99", "unknown architecture 'sm_99'");
  expect_usage_error("--m 8 --n 8 --k 8 --dtype bf16 --dry-run --families simt", "family 'simt' cannot solve bf16");
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
  EXPECT_NE(r.output.find("--dry-run"), std::string::npos) << "it points to what works: " << r.output;
}

// Runs `gemm-tune <args> --dry-run --arch sm_90a --json` with an empty kernel cache and checks that
// every listed candidate of `family` compiled without spills under a name with `prefix`.
nlohmann::json expect_dry_run(const std::string& args, size_t candidates, const std::string& family,
                              const std::string& prefix) {
  test::TempDir dir;
  const auto r = run_command("GEMMTUNE_CACHE_DIR=" + dir.path().string() + " " + tool("gemm-tune") + " " + args +
                                 " --dry-run --arch sm_90a --json",
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
  const auto j = expect_dry_run("--m 300 --n 200 --k 100 --budget 4", 4, "simt", "gemm_simt_f32_nn_");
  EXPECT_EQ(j.at("compiled"), 4);
  EXPECT_EQ(j.at("failed"), 0);
  EXPECT_GT(j.at("pruned").get<int>(), 0);
}

TEST(GemmTuneCli, DryRunListsTheWgmmaFamilyForBf16) {
  expect_dry_run("--m 4096 --n 4096 --k 4096 --dtype bf16 --budget 3", 3, "wgmma_sm90", "gemm_wgmma_bf16_nn_");
}

// One token through a layer: the gemv family comes first, with the most promising candidates.
TEST(GemmTuneCli, DryRunListsTheGemvFamilyForOneColumn) {
  expect_dry_run("--m 4096 --n 1 --k 4096 --dtype bf16 --layout tn --budget 3", 3, "gemv", "gemm_gemv_bf16_tn_n1_dot_");
}

TEST(GemmTuneCli, Bf16NeedsHopperForTheWgmmaFamily) {
  const auto r = run_command(tool("gemm-tune") + " --m 64 --n 64 --k 64 --dtype bf16 --dry-run --arch sm_80");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("no kernel family supports bf16 nn on sm_80"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("needs sm_90a"), std::string::npos) << r.output;
}

TEST(GemmBenchCli, BadInput) {
  for (const std::string args : {"--suite nope", "--m 0 --n 4 --k 4", "--dtype q8", "--bogus"}) {
    const auto r = run_command(tool("gemm-bench") + " " + args);
    EXPECT_EQ(r.signal, 0) << args;
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.output.find("gemm-bench: error: "), std::string::npos) << args << ": " << r.output;
  }
}

}  // namespace
}  // namespace gemmtune
