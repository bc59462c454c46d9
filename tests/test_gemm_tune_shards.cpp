// gemm-tune on many hosts, without a GPU: --shard and the launchers' variables pick each
// process's part of a shape list (checked with --dry-run --list, which compiles nothing), and the
// options of the ranked search and of several GPUs say clearly what is wrong with them.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "support.hpp"

namespace gemmtune {
namespace {

using test::run_command;
using test::tool;

const char* kShapes =
    "# prefill and decode\n"
    "4096 4096 4096 bf16 tn\n6144 4096 4096 bf16 tn\n4096 1 4096 bf16 tn\n11008 8 4096 bf16 tn\n"
    "2048 2048 2048 bf16 nn\n1024 1024 1024 f32 nn\n500 300 700 bf16 nn\n";

// The problems a `gemm-tune --dry-run --list` run lists, with the given environment and options.
std::vector<std::string> planned_problems(const std::string& env, const std::string& args,
                                          const test::TempDir& dir) {
  const auto r = run_command(env + " " + tool("gemm-tune") +
                                 " --dry-run --list --arch sm_90a --json --shapes " +
                                 (dir / "shapes.txt").string() + " " + args,
                             false);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> out;
  if (r.output.empty()) return out;
  const auto j = nlohmann::json::parse(r.output);
  if (j.contains("problems"))
    for (const auto& p : j.at("problems")) out.push_back(p.at("problem"));
  else
    out.push_back(j.at("problem"));
  return out;
}

class GemmTuneShards : public ::testing::Test {
 protected:
  void SetUp() override { std::ofstream(dir_ / "shapes.txt") << kShapes; }
  test::TempDir dir_;
};

TEST_F(GemmTuneShards, ShardsOfTheListCoverItExactlyOnce) {
  const auto all = planned_problems("", "", dir_);
  ASSERT_EQ(all.size(), 7u);
  for (int count : {1, 2, 3, 7, 9}) {
    std::multiset<std::string> seen;
    for (int index = 0; index < count; ++index)
      for (const auto& p : planned_problems(
               "", "--shard " + std::to_string(index) + "/" + std::to_string(count), dir_))
        seen.insert(p);
    EXPECT_EQ(seen.size(), all.size()) << count << " shards";
    for (const auto& p : all) EXPECT_EQ(seen.count(p), 1u) << p << " in " << count << " shards";
  }
}

TEST_F(GemmTuneShards, LaunchersVariablesChooseTheShard) {
  const auto by_flag = planned_problems("", "--shard 1/3", dir_);
  EXPECT_EQ(planned_problems("SLURM_STEP_ID=0 SLURM_PROCID=1 SLURM_NTASKS=3", "", dir_), by_flag);
  EXPECT_EQ(planned_problems("OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=3", "", dir_), by_flag);
  EXPECT_EQ(planned_problems("RANK=1 WORLD_SIZE=3", "", dir_), by_flag);
  // --shard wins over the environment; a batch script's job-wide Slurm variables do not shard.
  EXPECT_EQ(planned_problems("RANK=1 WORLD_SIZE=3", "--shard 0/1", dir_).size(), 7u);
  EXPECT_EQ(planned_problems("SLURM_PROCID=1 SLURM_NTASKS=3", "", dir_).size(), 7u);
}

TEST_F(GemmTuneShards, SaysWhichShardItTunes) {
  const auto r =
      run_command("SLURM_STEP_ID=0 SLURM_PROCID=2 SLURM_NTASKS=3 " + tool("gemm-tune") +
                  " --dry-run --list --arch sm_90a --shapes " + (dir_ / "shapes.txt").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("shard 2/3 (from SLURM_PROCID/SLURM_NTASKS): 2 of 7 shapes"),
            std::string::npos)
      << r.output;
  // More processes than shapes: the extra ones have nothing to do, and say so.
  const auto idle = run_command(tool("gemm-tune") +
                                " --dry-run --list --arch sm_90a --m 64 --n 64 --k 64 --shard 1/2");
  EXPECT_EQ(idle.exit_code, 0) << idle.output;
  EXPECT_NE(idle.output.find("this shard has no shapes"), std::string::npos) << idle.output;
}

TEST_F(GemmTuneShards, BadShardsAndDevicesAreUsageErrors) {
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {"--shard 3/3", "need 0 <= I < N"},
           {"--shard x", "expected I/N"},
           {"--device 1 --devices all", "either --device or --devices"},
           {"--margin -1", "--margin"}}) {
    const auto r =
        run_command(tool("gemm-tune") + " --dry-run --list --m 64 --n 64 --k 64 " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << args << "\n" << r.output;
  }
  const auto env = run_command("RANK=4 WORLD_SIZE=2 " + tool("gemm-tune") +
                               " --dry-run --list --m 64 --n 64 --k 64");
  EXPECT_EQ(env.exit_code, 2) << env.output;
  EXPECT_NE(env.output.find("RANK/WORLD_SIZE"), std::string::npos) << env.output;
}

TEST_F(GemmTuneShards, ListShowsCandidatesInTheCostModelsOrderWithoutCompiling) {
  const auto r = run_command(
      "GEMMTUNE_CACHE_DIR=" + (dir_ / "cache").string() + " " + tool("gemm-tune") +
          " --dry-run --list --arch sm_90a --m 8192 --n 8192 --k 8192 --dtype bf16 --json",
      false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_GT(j.at("candidates").size(), 10u);
  // Each family's default first (wgmma_sm90 and mma_sm80 on Hopper), then one point of each
  // other structure, then the other points, each part in the cost model's order.
  double last = 0;
  bool refinements = false;
  for (size_t i = 0; i < j.at("candidates").size(); ++i) {
    const auto& c = j.at("candidates")[i];
    EXPECT_EQ(c.at("status"), "listed");
    const bool refinement = c.at("refinement");
    EXPECT_TRUE(refinement || !refinements) << "structures come first";
    if (i > 2 && refinement == refinements) {
      EXPECT_GE(c.at("predicted_ms").get<double>(), last);
    }
    refinements = refinement;
    last = c.at("predicted_ms");
  }
  EXPECT_TRUE(refinements) << "the wgmma space has refinements (stages, clusters, raster groups)";
  EXPECT_FALSE(std::filesystem::exists(dir_ / "cache" / "kernels")) << "--list compiles nothing";
}

}  // namespace
}  // namespace gemmtune
