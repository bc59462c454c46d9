// A candidate that faults and one that hangs are recorded as such, and the run goes on.
// The misbehaving family exists only in test binaries: this test registers it here and measures
// with the test worker, which has it too.
#include <cstdlib>

#include "fault_injection_family.hpp"
#include "gemmtune/tuner/tuner.hpp"
#include "gpu_support.hpp"

namespace gemmtune {
namespace {

class FaultIsolation : public test::GpuTest {};

TEST_F(FaultIsolation, FaultAndHangAreRecordedAndSurvived) {
  test::TempDir dir;
  setenv("GEMMTUNE_CACHE_DIR", (dir / "cache").c_str(), 1);
  setenv("GEMMTUNE_WORKER", test::tool("gemmtune-test-worker").c_str(), 1);
  register_family(test::fault_injection_family());
  const Problem p = make_problem(DType::f32, Op::N, Op::N, 256, 256, 256);
  TuneOptions o;
  o.db_path = dir / "tuning.db";
  o.baseline = false;
  o.only_extra = true;
  o.candidate_timeout_s = 15;
  o.timing.min_runs = 5;
  o.timing.min_total_ms = 5;
  o.settle_ms = 0;
  const Family& faults = find_family("fault_injection");
  const Family& simt = find_family("simt");
  KernelConfig fault = faults.default_config(p, device_.arch), hang = fault;
  hang.params["MODE"] = 2;
  o.extra = {fault, hang, simt.default_config(p, device_.arch)};

  const auto start = std::chrono::steady_clock::now();
  const TuneReport r = tune(p, o);
  ASSERT_EQ(r.measured.size(), 3u);
  EXPECT_EQ(r.measured[0].status, CandidateStatus::fault) << r.measured[0].message;
  EXPECT_NE(r.measured[0].message.find("ILLEGAL_ADDRESS"), std::string::npos)
      << r.measured[0].message;
  EXPECT_EQ(r.measured[1].status, CandidateStatus::timeout) << r.measured[1].message;
  EXPECT_EQ(r.measured[2].status, CandidateStatus::ok) << r.measured[2].message;
  ASSERT_TRUE(r.best.has_value());
  EXPECT_EQ(r.best->config.family, "simt");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(120));

  // All three are in the database; the failures are never the best.
  const TuningDb db(o.db_path);
  const auto all = db.candidates(device_.key, p);
  EXPECT_EQ(all.size(), 3u);
  EXPECT_EQ(db.best(device_.key, p)->winner.config.family, "simt");
  unsetenv("GEMMTUNE_WORKER");
}

}  // namespace
}  // namespace gemmtune
