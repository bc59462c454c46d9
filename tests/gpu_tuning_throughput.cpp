// On the GPU: the ranked search stops early and still finds a verified winner; --exhaustive
// measures everything; timing stops early for slow candidates; several GPUs share a list, each
// problem tuned once (skipped below two GPUs).
#include <set>

#include "gemmtune/tuner/tuner.hpp"
#include "gpu_support.hpp"

namespace gemmtune {
namespace {

class TuningThroughput : public test::TuneTest {
 protected:
  void SetUp() override {
    test::TuneTest::SetUp();
    options_.baseline = false;
  }
};

TEST_F(TuningThroughput, RankedSearchStopsEarlyWithAVerifiedWinner) {
  const Problem p = make_problem(DType::f32, Op::N, Op::N, 512, 384, 256);
  const DryRunReport plan = dry_run(p, device_.arch, 0, {"simt"}, {}, 0, false);
  options_.families = {"simt"};
  const TuneReport ranked = tune(p, options_);
  ASSERT_TRUE(ranked.best) << "no winner";
  EXPECT_TRUE(ranked.stopped_by_model)
      << ranked.measured.size() << " of " << plan.candidates.size();
  EXPECT_TRUE(ranked.complete);
  EXPECT_LT(ranked.measured.size(), plan.candidates.size());
  EXPECT_GE(ranked.measured.size(), size_t(options_.search.min_candidates));
  EXPECT_EQ(ranked.measured.size() + size_t(ranked.ruled_out), plan.candidates.size());
  int stopped_early = 0;
  for (const auto& c : ranked.measured)
    stopped_early += c.message.find("timing stopped after") != std::string::npos;
  std::cout << "ranked: " << ranked.measured.size() << " of " << plan.candidates.size()
            << " measured, " << stopped_early << " timings stopped early, " << ranked.seconds
            << " s\n";

  // A ranked search that ended answers from the database; --exhaustive measures the rest.
  EXPECT_TRUE(tune(p, options_).from_db);
  options_.search.exhaustive = true;
  const TuneReport all = tune(p, options_);
  EXPECT_FALSE(all.from_db);
  EXPECT_EQ(all.measured.size(), size_t(ranked.ruled_out));
  EXPECT_TRUE(all.complete);
  for (const auto& c : all.measured)
    EXPECT_EQ(c.message.find("timing stopped after"), std::string::npos) << c.kernel_name;
}

TEST_F(TuningThroughput, EveryGpuOfTheHostSharesTheList) {
  const int gpus = device_count();
  std::vector<int> ordinals;
  for (int i = 0; i < gpus; ++i) ordinals.push_back(i);
  std::vector<Problem> problems;
  for (int size : {256, 320, 384, 448})
    problems.push_back(make_problem(DType::f32, Op::N, Op::N, size, size, 128));
  options_.budget.candidates = 3;
  std::set<std::string> reported;
  const auto reports = tune_on_devices(problems, options_, ordinals, [&](const TuneReport& r) {
    EXPECT_TRUE(reported.insert(r.device.key.name + " " + r.problem.describe()).second)
        << "reported twice";
  });
  std::set<DeviceKey, bool (*)(const DeviceKey&, const DeviceKey&)> models(
      [](const DeviceKey& a, const DeviceKey& b) { return json_of(a) < json_of(b); });
  for (int i : ordinals) models.insert(query_device(i).key);
  ASSERT_EQ(reports.size(), problems.size() * models.size())
      << "each model tunes the whole list once";
  const TuningDb db(options_.db_path);
  for (const auto& r : reports) {
    EXPECT_TRUE(r.error.empty()) << r.error;
    ASSERT_TRUE(r.best) << r.problem.describe();
    EXPECT_EQ(r.measured.size(), 3u) << "measured once, by one GPU";
    EXPECT_EQ(db.candidates(r.device.key, r.problem).size(), 3u);
  }
  if (gpus < 2)
    GTEST_SKIP() << "one GPU here: the list was tuned on it alone (two or more GPUs share it)";
}

}  // namespace
}  // namespace gemmtune
