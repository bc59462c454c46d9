// The ranked search (cost model order, when to stop, early stops of the timing), the cost model
// itself, and the sharding of shape lists over processes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "gemmtune/generator/cost_model.hpp"
#include "gemmtune/generator/family.hpp"
#include "gemmtune/generator/util.hpp"
#include "gemmtune/tuner/search.hpp"
#include "gemmtune/tuner/shard.hpp"
#include "gemmtune/tuner/tuner.hpp"

namespace gemmtune {
namespace {

CandidateRecord timed(double median_ms) {
  CandidateRecord c;
  c.status = CandidateStatus::ok;
  c.median_ms = median_ms;
  c.min_ms = median_ms;
  return c;
}

CandidateRecord failed() {
  CandidateRecord c;
  c.status = CandidateStatus::wrong_result;
  return c;
}

// ---- the winner ---------------------------------------------------------------------------------

CandidateRecord named(const std::string& name, CandidateRecord c) {
  c.kernel_name = name;
  return c;
}

// A default (any preferred kernel) keeps the win unless another kernel is more than the margin
// faster; failed records and slower defaults never win; without a default the fastest does.
TEST(Winner, TheDefaultStaysUnlessAnotherIsFasterByMoreThanTheMargin) {
  const std::set<std::string> defaults = {"default", "other_default"};
  const std::vector<CandidateRecord> close = {
      named("fast", timed(1.000)), named("default", timed(1.009)),
      named("other_default", timed(1.005)), named("broken", failed())};
  EXPECT_EQ(choose_winner(close, defaults, 0.01)->kernel_name, "other_default");
  EXPECT_EQ(choose_winner(close, defaults, 0.0)->kernel_name, "fast");
  const std::vector<CandidateRecord> far = {named("fast", timed(1.000)),
                                            named("default", timed(1.02))};
  EXPECT_EQ(choose_winner(far, defaults, 0.01)->kernel_name, "fast");
  EXPECT_EQ(choose_winner(far, {}, 0.5)->kernel_name, "fast");
  const std::vector<CandidateRecord> default_failed = {named("default", failed()),
                                                       named("slow", timed(2.0))};
  EXPECT_EQ(choose_winner(default_failed, defaults, 0.01)->kernel_name, "slow");
  EXPECT_FALSE(choose_winner({named("default", failed())}, defaults, 0.01).has_value());
}

// ---- RankedSearch -----------------------------------------------------------------------------

TEST(RankedSearch, NeverStopsBeforeTheMinimumNumberOfTimedCandidates) {
  SearchSettings s;
  s.min_candidates = 4;
  RankedSearch search(s);
  for (int i = 0; i < 3; ++i) search.add(1.0, timed(1.0));
  search.add(1.0, failed());  // failures do not count
  EXPECT_EQ(search.timed(), 3);
  EXPECT_FALSE(search.rest_cannot_win(100.0));
  search.add(1.0, timed(1.0));
  EXPECT_TRUE(search.rest_cannot_win(100.0));
}

TEST(RankedSearch, StopsWhenThePredictionScaledByTheBestRatioCannotBeatTheBest) {
  SearchSettings s;
  s.min_candidates = 2;
  s.stop_margin = 0.10;
  RankedSearch search(s);
  search.add(1.0, timed(1.5));  // measured 1.5x its prediction
  search.add(1.2, timed(1.2));  // exactly as predicted: the most optimistic ratio seen is 1.0
  EXPECT_DOUBLE_EQ(search.best_ms(), 1.2);
  // A candidate predicted at p could run in p * 1.0 at best: it can win while p <= 1.2 * 1.1.
  EXPECT_FALSE(search.rest_cannot_win(1.3));
  EXPECT_TRUE(search.rest_cannot_win(1.33));
  // A candidate that beat its prediction makes the search keep going longer.
  search.add(2.0, timed(1.3));  // ratio 0.65
  EXPECT_FALSE(search.rest_cannot_win(2.0));
  EXPECT_TRUE(search.rest_cannot_win(2.1));
}

TEST(RankedSearch, StopsWhenTheBestHasNotImprovedForPatienceCandidates) {
  SearchSettings s;
  s.min_candidates = 2;
  s.patience = 3;
  RankedSearch search(s);
  search.add(1.0, timed(1.0));
  search.add(1.0, timed(0.995));  // better, but by less than 1%: no improvement
  search.add(1.0, timed(1.2));
  EXPECT_FALSE(search.rest_cannot_win(1.0));
  search.add(1.0, timed(1.1));
  EXPECT_TRUE(search.rest_cannot_win(1.0)) << "three in a row without a 1% gain";
  RankedSearch again(s);
  for (double ms : {1.0, 1.2, 1.3, 0.9, 1.1})
    again.add(1.0, timed(ms));  // 0.9: a 10% gain resets it
  EXPECT_FALSE(again.rest_cannot_win(1.0));
}

TEST(RankedSearch, ExhaustiveNeverStopsAndTimesEveryCandidateFully) {
  SearchSettings s;
  s.exhaustive = true;
  s.min_candidates = 1;
  RankedSearch search(s);
  search.add(1.0, timed(1.0));
  EXPECT_FALSE(search.rest_cannot_win(1e9));
  EXPECT_EQ(search.abort_above_ms(), 0);
  EXPECT_EQ(search.enough_above_ms(), 0);
}

TEST(RankedSearch, EarlyStopsOfTheTimingFollowTheBestSoFar) {
  SearchSettings s;
  RankedSearch search(s);
  EXPECT_EQ(search.abort_above_ms(), 0) << "nothing timed yet: the first candidate is timed fully";
  search.add(1.0, timed(2.0));
  search.add(1.0, timed(1.6));
  EXPECT_DOUBLE_EQ(search.abort_above_ms(), 1.6 * (1 + s.abort_margin));
  EXPECT_DOUBLE_EQ(search.enough_above_ms(), 1.6 * (1 + s.final_margin));
}

TEST(RankedSearch, RefinementsAreEstimatedFromTheirStructuresMeasuredTimes) {
  SearchSettings s;
  s.stop_margin = 0.10;
  s.patience = 2;
  RankedSearch search(s);
  search.add(1.0, timed(1.2), "A");  // measured 1.2x its prediction
  search.add(1.0, timed(0.9), "B");  // 0.9x
  search.add(1.5, failed(), "C");    // failed: its refinements have no estimate
  EXPECT_DOUBLE_EQ(*search.estimate_ms(2.0, "A"), 2.4);
  EXPECT_DOUBLE_EQ(*search.estimate_ms(2.0, "B"), 1.8);
  EXPECT_FALSE(search.estimate_ms(1.0, "C"));
  EXPECT_FALSE(search.estimate_ms(1.0, "D")) << "never measured: ruled out in the first pass";
  search.add(2.0, timed(1.6), "B");  // a refinement measured better than its structure's ratio
  EXPECT_DOUBLE_EQ(*search.estimate_ms(2.0, "B"), 1.6);

  // The best is 0.9: refinements estimated above 0.99 cannot win, nor anything estimated slower.
  search.begin_refinements();
  EXPECT_FALSE(search.refinements_cannot_win(0.98));
  EXPECT_TRUE(search.refinements_cannot_win(1.0));
  search.add(1.0, timed(0.95), "B");
  EXPECT_FALSE(search.refinements_cannot_win(0.9));
  search.add(1.0, timed(0.92), "B");
  EXPECT_TRUE(search.refinements_cannot_win(0.9)) << "two in a row without a 1% gain";
  search.begin_refinements();
  EXPECT_FALSE(search.refinements_cannot_win(0.9)) << "patience counts afresh";
  s.exhaustive = true;
  EXPECT_FALSE(RankedSearch(s).refinements_cannot_win(1e9));
}

// Replays recorded measurements through the search, as tune() feeds it: how many are measured.
size_t measured_before_stop(const std::vector<std::pair<double, double>>& predicted_and_measured,
                            const SearchSettings& s) {
  RankedSearch search(s);
  for (size_t i = 0; i < predicted_and_measured.size(); ++i) {
    if (search.rest_cannot_win(predicted_and_measured[i].first)) return i;
    search.add(predicted_and_measured[i].first, timed(predicted_and_measured[i].second));
  }
  return predicted_and_measured.size();
}

TEST(RankedSearch, AReplayStopsAfterTheWinnerWhenTheModelRanksWell) {
  // Predictions in increasing order; the real times follow them with 5% noise, the winner third.
  std::vector<std::pair<double, double>> run;
  for (int i = 0; i < 40; ++i) {
    const double predicted = 1.0 + 0.02 * i;
    run.push_back({predicted, predicted * 1.3 * (i == 2 ? 0.95 : 1.0 + 0.05 * ((i * 7) % 3 - 1))});
  }
  SearchSettings s;
  const size_t measured = measured_before_stop(run, s);
  EXPECT_GE(measured, size_t(s.min_candidates));
  EXPECT_GT(measured, 2u) << "the winner is measured";
  EXPECT_LT(measured, run.size()) << "the search stops before the end";
  s.exhaustive = true;
  EXPECT_EQ(measured_before_stop(run, s), run.size());
}

// ---- the cost model -----------------------------------------------------------------------------

TEST(CostModel, AWaveThatSpillsByOneTileCostsAWholeTile) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  TileWork w;
  w.tile_m = 128;
  w.tile_n = 128;
  const Problem full = make_problem(DType::bf16, Op::N, Op::N, 128 * 132, 128, 8192);
  const Problem spill = make_problem(DType::bf16, Op::N, Op::N, 128 * 133, 128, 8192);
  const Cost a = roofline(full, arch, w), b = roofline(spill, arch, w);
  EXPECT_EQ(a.tiles_per_sm, 1);
  EXPECT_EQ(b.tiles_per_sm, 2);
  EXPECT_NEAR(b.compute_ms / a.compute_ms, 2.0, 1e-9);
}

TEST(CostModel, AGemvIsBoundByReadingTheMatrix) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Problem gemv = make_problem(DType::bf16, Op::T, Op::N, 16384, 1, 16384);
  TileWork w;
  w.tile_m = 64;
  w.tile_n = 8;
  const Cost c = roofline(gemv, arch, w);
  const double matrix_ms = 16384.0 * 16384 * 2 / (arch.dram_gb_per_s * 1e6);
  EXPECT_GT(c.memory_ms, c.compute_ms);
  EXPECT_GE(c.memory_ms, matrix_ms);
  EXPECT_LT(c.total_ms, 1.5 * matrix_ms);
}

TEST(CostModel, OccupancyIsLimitedByThreadsSharedMemoryAndRegisters) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  EXPECT_EQ(ctas_per_sm(arch, 256, 0, 0), 8);              // 2048 threads
  EXPECT_EQ(ctas_per_sm(arch, 128, 100 * 1024, 0), 2);     // 228 KB of shared memory
  EXPECT_EQ(ctas_per_sm(arch, 256, 0, 250), 1);            // 256 x 256 registers
  EXPECT_EQ(ctas_per_sm(arch, 1024, 200 * 1024, 255), 1);  // never below one
}

// The structure (search.hpp) of a listed candidate.
std::string structure_of(const DryRunEntry& e, const Problem&, const ArchInfo&) {
  return find_family(e.family).structure_of(e.config);
}

// The structures of the winners measured on the H200 and H100 are among the first the model
// ranks, so that a ranked search measures them before it may stop (docs/PERF.md, 'The ranked
// search measures every structure before refining').
TEST(CostModel, MeasuredWinnersAreAmongTheFirstCandidates) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const std::vector<std::pair<Problem, std::string>> winners = {
      {make_problem(DType::f32, Op::N, Op::N, 8192, 8192, 8192),
       "gemm_simt_f32_nn_256x128x16_w64x64_t16x8_v4_s2"},
      {make_problem(DType::f32, Op::N, Op::N, 4096, 4096, 4096),
       "gemm_simt_f32_nn_128x256x8_w64x64_t16x8_v4_s2"},
      {make_problem(DType::f32, Op::N, Op::N, 1024, 1024, 1024),
       "gemm_simt_f32_nn_128x64x16_w64x32_t8x8_v4_s2"},
      {make_problem(DType::bf16, Op::N, Op::N, 8192, 8192, 8192),
       "gemm_wgmma_bf16_nn_256x128x64_s3_wg2_c1x1_ws_rm_tmastore"},
      // H100: one wave of tiles, TMA stores through two of four chunk buffers (0.98x cuBLAS).
      {make_problem(DType::bf16, Op::N, Op::N, 2048, 2048, 2048),
       "gemm_wgmma_bf16_nn_256x128x64_s4_wg2_c1x1_ws_rm_tmastore"},
      // H100: lda 500 is not 16-byte aligned; wgmma's packing kernel costs more than it gains.
      {make_problem(DType::bf16, Op::N, Op::N, 500, 300, 700),
       "gemm_mma80_bf16_nn_64x64x64_w32x32_s5_g8_v4_splitk2"},
  };
  for (const auto& [problem, name] : winners) {
    const DryRunReport plan = dry_run(problem, arch, 1, {}, {}, 0, false);
    const auto winner = std::find_if(plan.candidates.begin(), plan.candidates.end(),
                                     [&](const DryRunEntry& e) { return e.name == name; });
    ASSERT_NE(winner, plan.candidates.end()) << name << " is not a valid candidate";
    const std::string structure = structure_of(*winner, problem, arch);
    size_t rank = 0;
    while (structure_of(plan.candidates[rank], problem, arch) != structure) ++rank;
    EXPECT_FALSE(plan.candidates[rank].refinement);
    EXPECT_LT(rank, size_t(SearchSettings{}.min_candidates))
        << name << "'s structure ranks " << rank + 1;
  }
}

// Four kernels of 16 bf16 shapes whose 256x128 tiles leave part of the last wave idle, measured on
// the H100 (cuBLAS time / ours, the mean of two rounds; docs/PERF.md, 'A partial last wave: the
// default costs rounds times tile area'): the default of the time (stream-K, mostly of 256x128
// tiles), the same tiles data-parallel, 128x192 with three consumer warpgroups, 192x128 with
// register stores. A kernel listed twice is one pair less.
// The model orders at least four in five of the pairs that differ by 2% or more as measured, so
// that a ranked search measures the fast ones first (the model before its fit, which took
// stream-K as perfectly balanced, ordered 31 of the 86; docs/PERF.md, 'The cost model is fitted
// to measured timings').
TEST(CostModel, OrdersTheTilingsOfAPartialWaveAsMeasured) {
  struct Measured {
    const char* layout;
    int64_t m, n, k;
    std::vector<std::pair<const char*, double>>
        kernels;  // name after gemm_wgmma_bf16_<layout>_, ratio
  };
  const std::vector<Measured> shapes = {
      {"nn",
       4608,
       3072,
       4096,
       {{"256x128x64_s4_wg2_c1x2_ws_rm_streamk_tmastore", 0.810},
        {"256x128x64_s4_wg2_c1x2_ws_rm_tmastore", 0.880},
        {"128x192x64_s5_wg3_c2x1_ws_rm_tmastore", 0.890},
        {"192x128x64_s4_wg2_c1x2_ws_rm", 0.820}}},
      {"nn",
       6656,
       1536,
       1024,
       {{"256x128x64_s4_wg2_c1x2_ws_rm_streamk_tmastore", 0.630},
        {"256x128x64_s4_wg2_c1x2_ws_rm_tmastore", 0.905},
        {"128x192x64_s5_wg3_c2x1_ws_rm_tmastore", 0.880},
        {"192x128x64_s4_wg2_c1x2_ws_rm", 0.640}}},
      {"nn",
       7168,
       1024,
       8192,
       {{"256x128x64_s4_wg2_c1x2_ws_rm_streamk_tmastore", 0.715},
        {"256x128x64_s4_wg2_c1x2_ws_rm_tmastore", 1.010},
        {"128x192x64_s5_wg3_c2x1_ws_rm_tmastore", 0.870},
        {"192x128x64_s4_wg2_c1x2_ws_rm", 0.850}}},
      {"tn",
       10240,
       2560,
       1024,
       {{"256x128x64_s4_wg2_c1x2_ws_rm_streamk_tmastore", 0.820},
        {"256x128x64_s4_wg2_c1x2_ws_rm_tmastore", 0.950},
        {"128x192x64_s5_wg3_c2x1_ws_rm_tmastore", 0.945},
        {"192x128x64_s4_wg2_c1x2_ws_rm", 0.680}}},
      {"tn",
       1024,
       2560,
       4096,
       {{"256x128x64_s4_wg2_c1x1_ws_rn_streamk_tmastore", 0.590},
        {"256x128x64_s4_wg2_c1x1_ws_rn_tmastore", 0.760},
        {"128x192x64_s5_wg3_c1x1_ws_rn_tmastore", 0.900},
        {"192x128x64_s4_wg2_c1x1_ws_rn", 0.800}}},
      {"tn",
       1024,
       4608,
       4096,
       {{"192x128x64_s4_wg2_c1x1_ws_rn_streamk", 0.500},
        {"192x128x64_s4_wg2_c1x1_ws_rn", 0.695},
        {"128x192x64_s5_wg3_c1x1_ws_rn_tmastore", 0.840},
        {"192x128x64_s4_wg2_c1x1_ws_rn", 0.695}}},
      {"tn",
       1536,
       1536,
       4096,
       {{"256x128x64_s4_wg2_c1x1_ws_rm_streamk_tmastore", 0.660},
        {"256x128x64_s4_wg2_c1x1_ws_rm_tmastore", 0.695},
        {"128x192x64_s5_wg3_c1x1_ws_rm_tmastore", 0.845},
        {"192x128x64_s4_wg2_c1x1_ws_rm", 0.750}}},
      {"tn",
       1536,
       3584,
       4096,
       {{"128x192x64_s5_wg3_c1x1_ws_rn_streamk_tmastore", 0.485},
        {"128x192x64_s5_wg3_c1x1_ws_rn_tmastore", 0.880},
        {"128x192x64_s5_wg3_c1x1_ws_rn_tmastore", 0.890},
        {"192x128x64_s4_wg2_c1x1_ws_rn", 0.805}}},
      {"tn",
       2048,
       14848,
       4096,
       {{"256x128x64_s4_wg2_c1x2_ws_rn_streamk_tmastore", 1.035},
        {"256x128x64_s4_wg2_c1x2_ws_rn_tmastore", 0.990},
        {"128x192x64_s5_wg3_c2x1_ws_rn_tmastore", 1.015},
        {"192x128x64_s4_wg2_c1x2_ws_rn", 0.945}}},
      {"tn",
       2048,
       1536,
       1024,
       {{"256x128x64_s4_wg2_c1x1_ws_rm_streamk_tmastore", 0.480},
        {"256x128x64_s4_wg2_c1x1_ws_rm_tmastore", 0.850},
        {"128x192x64_s5_wg3_c1x1_ws_rm_tmastore", 0.970},
        {"192x128x64_s4_wg2_c1x1_ws_rm", 0.740}}},
      {"tn",
       2048,
       7168,
       4096,
       {{"256x128x64_s4_wg2_c1x2_ws_rn_streamk_tmastore", 0.880},
        {"256x128x64_s4_wg2_c1x2_ws_rn_tmastore", 0.960},
        {"128x192x64_s5_wg3_c2x1_ws_rn_tmastore", 0.975},
        {"192x128x64_s4_wg2_c1x2_ws_rn", 0.910}}},
      {"tn",
       2560,
       2560,
       4096,
       {{"256x128x64_s4_wg2_c1x1_ws_rm_streamk_tmastore", 0.705},
        {"256x128x64_s4_wg2_c1x1_ws_rm_tmastore", 0.875},
        {"128x192x64_s5_wg3_c2x1_ws_rm_tmastore", 0.770},
        {"192x128x64_s4_wg2_c1x2_ws_rm", 0.705}}},
      {"tn",
       3072,
       3584,
       8192,
       {{"256x128x64_s4_wg2_c1x2_ws_rn_streamk_tmastore", 0.665},
        {"256x128x64_s4_wg2_c1x2_ws_rn_tmastore", 0.915},
        {"128x192x64_s5_wg3_c2x1_ws_rn_tmastore", 0.880},
        {"192x128x64_s4_wg2_c1x2_ws_rn", 0.860}}},
      {"tn",
       3584,
       4096,
       4096,
       {{"256x128x64_s4_wg2_c1x2_ws_rn_streamk_tmastore", 0.880},
        {"256x128x64_s4_wg2_c1x2_ws_rn_tmastore", 0.960},
        {"128x192x64_s5_wg3_c2x1_ws_rn_tmastore", 0.975},
        {"192x128x64_s4_wg2_c1x2_ws_rn", 0.900}}},
      {"tn",
       5120,
       2560,
       4096,
       {{"256x128x64_s4_wg2_c1x2_ws_rm_streamk_tmastore", 0.945},
        {"256x128x64_s4_wg2_c1x2_ws_rm_tmastore", 0.870},
        {"128x192x64_s5_wg3_c2x1_ws_rm_tmastore", 0.890},
        {"192x128x64_s4_wg2_c1x2_ws_rm", 0.820}}},
      {"tn",
       8704,
       1536,
       8192,
       {{"256x128x64_s4_wg2_c1x2_ws_rm_streamk_tmastore", 0.960},
        {"256x128x64_s4_wg2_c1x2_ws_rm_tmastore", 0.860},
        {"128x192x64_s5_wg3_c2x1_ws_rm_tmastore", 0.880},
        {"192x128x64_s4_wg2_c1x2_ws_rm", 0.860}}},
  };
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  int pairs = 0, agree = 0;
  for (const Measured& s : shapes) {
    const Problem p =
        make_problem(DType::bf16, parse_op(s.layout[0]), parse_op(s.layout[1]), s.m, s.n, s.k);
    std::map<std::string, double> predicted;
    for (const DryRunEntry& e : dry_run(p, arch, 1, {}, {}, 0, false).candidates)
      predicted[e.name] = e.predicted_ms;
    auto predicted_of = [&](const char* kernel) {
      const std::string name = fmt::format("gemm_wgmma_bf16_{}_{}", s.layout, kernel);
      EXPECT_TRUE(predicted.count(name)) << name << " is not a candidate";
      return predicted[name];
    };
    for (size_t i = 0; i < s.kernels.size(); ++i)
      for (size_t j = i + 1; j < s.kernels.size(); ++j) {
        const auto& [a, ratio_a] = s.kernels[i];
        const auto& [b, ratio_b] = s.kernels[j];
        if (std::string_view(a) == b || std::abs(ratio_a - ratio_b) < 0.02) continue;
        ++pairs;
        agree += (ratio_a > ratio_b) == (predicted_of(a) < predicted_of(b));
      }
  }
  EXPECT_EQ(pairs, 86);
  EXPECT_GE(5 * agree, 4 * pairs) << agree << " of " << pairs << " pairs in the measured order";
}

// Untuned problems take the first family's default, unless its launch packs an operand and
// another family's default is predicted faster: small unaligned problems go to mma_sm80, large
// unaligned ones stay with wgmma_sm90 (the packing is a small part of their time), and aligned
// ones never leave the first family, even where another one's default is predicted faster
// (gemv's measured bandwidth beats what the model gives it on 28672x1x8192).
TEST(CostModel, UntunedDefaultAvoidsPackingOnlyWhereItPays) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  auto family_of = [&](const Problem& p) {
    return untuned_default(families_for(p, arch), p, arch).family;
  };
  const Problem small = make_problem(DType::bf16, Op::N, Op::N, 500, 300, 700);
  ASSERT_LT(small.align, 16);
  EXPECT_EQ(family_of(small), "mma_sm80");
  EXPECT_EQ(untuned_default(families_for(small, arch), small, arch).at("SPLITS"), 2);
  EXPECT_EQ(family_of(make_problem(DType::bf16, Op::N, Op::N, 2500, 3500, 4500)), "wgmma_sm90");
  EXPECT_EQ(family_of(make_problem(DType::bf16, Op::N, Op::N, 512, 320, 704)),
            "wgmma_sm90");  // aligned
  const Problem gemv = make_problem(DType::bf16, Op::T, Op::N, 28672, 1, 8192);
  const KernelConfig wgmma = find_family("wgmma_sm90").default_config(gemv, arch);
  ASSERT_LT(
      find_family("wgmma_sm90").predicted_ms(wgmma, gemv, arch),
      find_family("gemv").predicted_ms(find_family("gemv").default_config(gemv, arch), gemv, arch));
  EXPECT_EQ(family_of(gemv), "gemv");
  EXPECT_EQ(family_of(make_problem(DType::f32, Op::N, Op::N, 500, 300, 700)), "simt");
}

TEST(CostModel, EveryValidCandidateOfTheSuiteGetsAFinitePositiveTimeInAFixedOrder) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  for (const Problem& p : {make_problem(DType::bf16, Op::T, Op::N, 4096, 1, 4096),
                           make_problem(DType::bf16, Op::T, Op::N, 28672, 64, 8192),
                           make_problem(DType::bf16, Op::N, Op::N, 2500, 3500, 4500),
                           make_problem(DType::f32, Op::T, Op::T, 500, 300, 700)}) {
    const DryRunReport a = dry_run(p, arch, 1, {}, {}, 0, false),
                       b = dry_run(p, arch, 1, {}, {}, 0, false);
    ASSERT_FALSE(a.candidates.empty());
    ASSERT_EQ(a.candidates.size(), b.candidates.size());
    // Each family's default first; then the first point of every other structure, then the
    // structures' other points, each part in the cost model's order.
    const size_t defaults = families_for(p, arch).size();
    std::set<std::string> structures;
    for (size_t i = 0; i < a.candidates.size(); ++i) {
      const DryRunEntry& c = a.candidates[i];
      EXPECT_EQ(c.name, b.candidates[i].name) << "the order is the same in every run";
      EXPECT_TRUE(std::isfinite(c.predicted_ms) && c.predicted_ms > 0);
      EXPECT_EQ(c.refinement, !structures.insert(structure_of(c, p, arch)).second) << c.name;
      if (i > defaults && c.refinement == a.candidates[i - 1].refinement) {
        EXPECT_LE(a.candidates[i - 1].predicted_ms, c.predicted_ms);
      }
      if (i > 0) {
        EXPECT_TRUE(c.refinement || !a.candidates[i - 1].refinement) << "structures come first";
      }
      EXPECT_EQ(c.status, "listed");
    }
  }
}

// ---- shards -------------------------------------------------------------------------------------

TEST(Shard, ShardsCoverAListExactlyOnceForAnyCount) {
  for (size_t size = 0; size <= 23; ++size)
    for (int count = 1; count <= 9; ++count) {
      std::multiset<size_t> seen;
      for (int index = 0; index < count; ++index) {
        const Shard shard{index, count, "test"};
        for (size_t item : shard.items(size)) {
          EXPECT_TRUE(shard.contains(item));
          seen.insert(item);
        }
      }
      ASSERT_EQ(seen.size(), size) << size << " items in " << count << " shards";
      for (size_t item = 0; item < size; ++item) EXPECT_EQ(seen.count(item), 1u);
    }
}

TEST(Shard, ParsesIndexOverCount) {
  const Shard s = Shard::parse("2/5");
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.count, 5);
  EXPECT_TRUE(s.sharded());
  EXPECT_FALSE(Shard::parse("0/1").sharded());
  for (const char* bad : {"5/5", "-1/3", "1", "a/b", "1/0", "1/2/3", "1/ 2"})
    EXPECT_THROW(Shard::parse(bad), Error) << bad;
}

Shard::Getenv environment(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

TEST(Shard, ReadsTheRankAndSizeThatLaunchersSet) {
  const Shard slurm = Shard::from_environment(
      environment({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}, {"SLURM_STEP_ID", "0"}}));
  EXPECT_EQ(slurm.index, 3);
  EXPECT_EQ(slurm.count, 4);
  EXPECT_EQ(slurm.source, "SLURM_PROCID/SLURM_NTASKS");
  const Shard mpi = Shard::from_environment(
      environment({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
  EXPECT_EQ(mpi.index, 1);
  EXPECT_EQ(mpi.count, 2);
  const Shard pmi = Shard::from_environment(environment({{"PMI_RANK", "0"}, {"PMI_SIZE", "8"}}));
  EXPECT_EQ(pmi.count, 8);
  const Shard torch = Shard::from_environment(environment({{"RANK", "5"}, {"WORLD_SIZE", "6"}}));
  EXPECT_EQ(torch.index, 5);
  EXPECT_FALSE(Shard::from_environment(environment({})).sharded());
  // A batch script has the job's SLURM_PROCID and SLURM_NTASKS too; only a step (srun) shards.
  EXPECT_FALSE(Shard::from_environment(environment({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}}))
                   .sharded());
  EXPECT_THROW(Shard::from_environment(environment({{"RANK", "6"}, {"WORLD_SIZE", "6"}})), Error);
}

TEST(Shard, PatternsNameOneDatabasePerShard) {
  const Shard s{3, 8, "test"};
  EXPECT_EQ(expand_shard_pattern("db-%t.db", s), "db-3.db");
  EXPECT_EQ(expand_shard_pattern("/tmp/100%%/%t/%t.db", s), "/tmp/100%/3/3.db");
  EXPECT_EQ(expand_shard_pattern("plain.db", s), "plain.db");
  EXPECT_EQ(expand_shard_pattern("odd%x%", s), "odd%x%");
}

}  // namespace
}  // namespace gemmtune
