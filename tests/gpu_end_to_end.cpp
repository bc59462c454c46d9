// tune -> database -> gemmtune::gemm uses the tuned kernel; resume; nearest shape; fallback.
#include <cstdlib>

#include "gemmtune/gemmtune.hpp"
#include "gemmtune/tuner/tuner.hpp"
#include "gpu_support.hpp"

namespace gemmtune {
namespace {

class EndToEnd : public test::GpuTest {
 protected:
  void SetUp() override {
    test::GpuTest::SetUp();
    if (IsSkipped()) return;
    setenv("GEMMTUNE_CACHE_DIR", (dir_ / "cache").c_str(), 1);
    options_.db_path = dir_ / "tuning.db";
    options_.timing.min_runs = 5;
    options_.timing.min_total_ms = 5;
    options_.timing.warmup_ms = 5;
    options_.candidate_timeout_s = 60;
    options_.settle_ms = 0;
  }

  // Runs the library on the problem and checks the result like any candidate.
  Verdict library_result(Library& lib, const Problem& p) { return check_library(lib, p, 1.25f, 0.5f, 9); }

  test::TempDir dir_;
  TuneOptions options_;
};

TEST_F(EndToEnd, TunedKernelIsStoredAndUsedByTheLibrary) {
  const Problem p = make_problem(DType::f32, Op::N, Op::T, 512, 384, 256);
  options_.budget.candidates = 4;
  const TuneReport first = tune(p, options_);
  ASSERT_TRUE(first.best.has_value()) << "no candidate passed";
  EXPECT_FALSE(first.from_db);
  EXPECT_EQ(first.measured.size(), 4u);
  EXPECT_FALSE(first.complete) << "a budget of 4 does not cover the space";
  EXPECT_GT(first.baseline_ms, 0) << first.baseline_name;
  for (const auto& c : first.measured) EXPECT_EQ(c.status, CandidateStatus::ok) << c.kernel_name << ": " << c.message;

  // An incomplete search resumes: only candidates not measured yet are measured.
  const TuneReport second = tune(p, options_);
  EXPECT_FALSE(second.from_db);
  EXPECT_EQ(second.already_measured, 4);
  EXPECT_EQ(second.measured.size(), 4u);
  std::set<std::string> names;
  for (const auto& c : first.measured) names.insert(c.kernel_name);
  for (const auto& c : second.measured) EXPECT_EQ(names.count(c.kernel_name), 0u) << "measured twice: " << c.kernel_name;

  const TuningDb db(options_.db_path);
  const auto best = db.best(device_.key, p);
  ASSERT_TRUE(best.has_value());
  // The winner and cuBLAS were timed again, interleaved, in the final round.
  EXPECT_NE(best->winner.message.find("final round"), std::string::npos) << best->winner.message;
  EXPECT_GT(best->baseline_ms, 0);
  EXPECT_EQ(best->winner.kernel_name, second.best->kernel_name);
  EXPECT_EQ(db.candidates(device_.key, p).size(), 8u);

  Options lib_options;
  lib_options.db_path = options_.db_path.string();
  Library lib(lib_options);
  const Selection sel = lib.select(p);
  EXPECT_EQ(sel.source, Source::tuned);
  EXPECT_EQ(sel.kernel, best->winner.kernel_name);
  const Verdict v = library_result(lib, p);
  EXPECT_TRUE(v.ok) << v.message;

  // Another shape with the same dtype and layout borrows the nearest tuned kernel.
  const Problem near = make_problem(DType::f32, Op::N, Op::T, 640, 384, 256);
  const Selection near_sel = lib.select(near);
  EXPECT_EQ(near_sel.source, Source::nearest);
  EXPECT_NE(near_sel.note.find("512x384x256"), std::string::npos) << near_sel.note;
  EXPECT_TRUE(library_result(lib, near).ok);

  // Another layout has nothing tuned: the built-in default.
  const Problem other = make_problem(DType::f32, Op::T, Op::T, 640, 384, 256);
  EXPECT_EQ(lib.select(other).source, Source::fallback);
  EXPECT_TRUE(library_result(lib, other).ok);
}

TEST_F(EndToEnd, CompleteSearchAnswersFromTheDatabaseAndForceRetunes) {
  const Problem p = make_problem(DType::f32, Op::N, Op::N, 96, 80, 64);
  options_.families = {"simt"};
  options_.baseline = false;
  const TuneReport full = tune(p, options_);
  ASSERT_TRUE(full.best.has_value());
  EXPECT_TRUE(full.complete);
  const auto start = std::chrono::steady_clock::now();
  const TuneReport again = tune(p, options_);
  EXPECT_TRUE(again.from_db);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(again.best->kernel_name, full.best->kernel_name);

  options_.force = true;
  options_.budget.candidates = 2;
  const TuneReport forced = tune(p, options_);
  EXPECT_FALSE(forced.from_db);
  EXPECT_EQ(forced.measured.size(), 2u);
}

}  // namespace
}  // namespace gemmtune
