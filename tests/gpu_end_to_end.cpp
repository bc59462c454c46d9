// tune -> database -> gemmtune::gemm uses the tuned kernel; resume; nearest shape; fallback;
// a grouped problem timed on two routings.
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "gemmtune/gemmtune.hpp"
#include "gemmtune/generator/family.hpp"
#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/driver.hpp"
#include "gemmtune/tuner/tuner.hpp"
#include "gpu_support.hpp"

namespace gemmtune {
namespace {

class EndToEnd : public test::TuneTest {
 protected:
  // Runs the library on the problem and checks the result like any candidate.
  Verdict library_result(Library& lib, const Problem& p) {
    return check_library(lib, p, 1.25f, 0.5f, 9);
  }
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
  for (const auto& c : first.measured) {
    EXPECT_EQ(c.status, CandidateStatus::ok) << c.kernel_name << ": " << c.message;
    EXPECT_EQ(c.message.find("skewed"), std::string::npos) << "dense, timed once: " << c.message;
  }

  // An incomplete search resumes: only candidates not measured yet are measured.
  const TuneReport second = tune(p, options_);
  EXPECT_FALSE(second.from_db);
  EXPECT_EQ(second.already_measured, 4);
  EXPECT_EQ(second.measured.size(), 4u);
  std::set<std::string> names;
  for (const auto& c : first.measured) names.insert(c.kernel_name);
  for (const auto& c : second.measured)
    EXPECT_EQ(names.count(c.kernel_name), 0u) << "measured twice: " << c.kernel_name;

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

// beta != 0 reads C: another problem for the tuner and the database, whose answer for beta = 0
// serves it only as the nearest, and says so.
TEST_F(EndToEnd, ProblemsThatReadCAreTunedApart) {
  const Problem zero = make_problem(DType::f32, Op::N, Op::N, 256, 192, 128);
  Problem reads = zero;
  reads.reads_c = true;
  options_.families = {"simt"};
  options_.budget.candidates = 3;
  options_.baseline = false;
  const TuneReport first = tune(zero, options_);
  ASSERT_TRUE(first.best.has_value());
  Options lib_options;
  lib_options.db_path = options_.db_path.string();
  {
    Library lib(lib_options);
    EXPECT_EQ(lib.select(zero).source, Source::tuned);
    const Selection borrowed = lib.select(reads);
    EXPECT_EQ(borrowed.source, Source::nearest);
    EXPECT_NE(borrowed.note.find("tuned for 256x192x128 with beta = 0"), std::string::npos)
        << borrowed.note;
    EXPECT_TRUE(check_library(lib, reads, 1.25f, 0.5f).ok);
  }
  options_.beta = 0.5f;
  const TuneReport second = tune(reads, options_);
  ASSERT_TRUE(second.best.has_value());
  EXPECT_FALSE(second.from_db) << "the answer for beta = 0 was taken for a problem that reads C";
  EXPECT_EQ(second.already_measured, 0);
  const TuningDb db(options_.db_path);
  EXPECT_EQ(db.candidates(device_.key, zero).size(), 3u);
  EXPECT_EQ(db.candidates(device_.key, reads).size(), 3u);
  Library lib(lib_options);
  const Selection sel = lib.select(reads);
  EXPECT_EQ(sel.source, Source::tuned);
  EXPECT_EQ(sel.kernel, second.best->kernel_name);
  EXPECT_EQ(lib.select(zero).kernel, first.best->kernel_name);
  EXPECT_TRUE(check_library(lib, reads, 1.25f, 0.5f).ok);
  EXPECT_TRUE(check_library(lib, zero, 1.25f, 0.0f).ok);
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

// Results of this GPU under another driver or NVRTC: the library uses them for their exact
// problem, and says so, until gemm-tune tunes the problem under the versions of this process,
// which it does rather than answer from them.
TEST_F(EndToEnd, ResultsOfAnotherDriverAreUsedUntilTunedAgain) {
  const Problem p = make_problem(DType::f32, Op::N, Op::N, 320, 192, 128);
  const Family& simt = find_family("simt");
  const KernelConfig c = simt.prune(p, device_.arch).valid.at(3);
  DeviceKey older = device_.key;
  older.driver -= 10;
  older.nvrtc = "12.4";
  test::store_best(options_.db_path, older, p, simt, c);
  Options lib_options;
  lib_options.db_path = options_.db_path.string();
  Library lib(lib_options);
  const Selection before = lib.select(p);
  EXPECT_EQ(before.source, Source::other_version);
  EXPECT_STREQ(to_string(before.source), "other_version");
  EXPECT_EQ(before.kernel, simt.kernel_name(c));
  EXPECT_NE(before.note.find(fmt::format("driver {} and NVRTC 12.4", older.driver)),
            std::string::npos)
      << before.note;
  EXPECT_TRUE(library_result(lib, p).ok);
  // Another shape does not borrow it: only the exact problem.
  EXPECT_EQ(lib.select(make_problem(DType::f32, Op::N, Op::N, 352, 192, 128)).source,
            Source::fallback);

  options_.families = {"simt"};
  options_.baseline = false;
  options_.budget.candidates = 2;
  const TuneReport retuned = tune(p, options_);
  EXPECT_FALSE(retuned.from_db)
      << "a complete search under another driver is no answer for this one";
  EXPECT_EQ(retuned.measured.size(), 2u);
  lib.reload();
  EXPECT_EQ(lib.select(p).source, Source::tuned);
}

// A worker that cannot start ends the run at once, not after every queued compile (with two
// compile threads, this space takes minutes to compile).
TEST_F(EndToEnd, AWorkerThatCannotStartFailsTheRunAtOnce) {
  const Problem p = make_problem(DType::f32, Op::N, Op::N, 2048, 2048, 2048);
  ASSERT_GT(find_family("simt").prune(p, device_.arch).valid.size(), 100u);
  std::ofstream(dir_ / "dead-worker") << "#!/bin/sh\necho 'cannot open the GPU' >&2\nexit 3\n";
  std::filesystem::permissions(dir_ / "dead-worker", std::filesystem::perms::owner_all);
  options_.compile_threads = 2;
  options_.families = {"simt"};
  for (const auto& worker : {dir_ / "dead-worker", dir_ / "missing-worker"}) {
    setenv("GEMMTUNE_WORKER", worker.c_str(), 1);
    const auto start = std::chrono::steady_clock::now();
    try {
      tune(p, options_);
      ADD_FAILURE() << "tuned without a worker: " << worker;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("worker"), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15)) << worker;
  }
  unsetenv("GEMMTUNE_WORKER");
}

// Settings that allow no run still time one (a median needs one), in the timer and in a tuning run.
TEST_F(EndToEnd, TimingSettingsThatAllowNoRunStillMeasureOne) {
  const DeviceBuffer buffer(1 << 20);
  const Timer timer(device_);
  TimingSettings none;
  none.max_runs = 0;
  none.min_runs = 0;
  none.min_total_ms = 0;
  none.warmup_ms = 0;
  int launches = 0;
  const Timing t = timer.time(
      [&](CUstream s) {
        ++launches;
        GT_CU(cuMemsetD32Async(buffer.ptr(), 1, buffer.bytes() / 4, s));
      },
      stream_->get(), none);
  EXPECT_EQ(t.runs, 1);
  EXPECT_GT(t.median_ms, 0);
  EXPECT_EQ(t.min_ms, t.max_ms);
  EXPECT_EQ(launches, 3 + 1) << "three warm-up launches, one timed";

  options_.timing = none;
  options_.families = {"simt"};
  options_.baseline = false;
  options_.budget.candidates = 1;
  const TuneReport r = tune(make_problem(DType::f32, Op::N, Op::N, 96, 64, 32), options_);
  ASSERT_EQ(r.measured.size(), 1u);
  EXPECT_EQ(r.measured[0].status, CandidateStatus::ok) << r.measured[0].message;
  EXPECT_EQ(r.measured[0].runs, 1);
}

// Launches timed in turns come back in their order, each its own: the same launch twice times
// alike, and one that does twice the work times about twice as long.
TEST_F(EndToEnd, LaunchesTimedInTurnsComeBackInTheirOrder) {
  const DeviceBuffer buffer(size_t(256) << 20);
  const Timer timer(device_);
  TimingSettings s;
  s.min_total_ms = 50;
  auto fill = [&](int times) {
    return [&, times](CUstream st) {
      for (int i = 0; i < times; ++i)
        GT_CU(cuMemsetD32Async(buffer.ptr(), uint32_t(i), buffer.bytes() / 4, st));
    };
  };
  const std::vector<Timing> t = timer.time_together({fill(1), fill(2), fill(1)}, stream_->get(), s);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].runs, t[1].runs);
  EXPECT_EQ(t[0].runs, t[2].runs);
  EXPECT_GE(t[0].runs, s.min_runs);
  EXPECT_NEAR(t[2].median_ms / t[0].median_ms, 1.0, 0.03);
  EXPECT_NEAR(t[1].median_ms / t[0].median_ms, 2.0, 0.2);
}

// A grouped problem's candidates (and cuBLAS, and the final round) are timed on the uniform and a
// skewed routing of its tokens, one after the other, and ranked by the mean of the two
// (tuner/src/worker.cpp, route_timings): each candidate's message shows both medians and its
// time is their mean. Every candidate passes verification after the others were timed: timing
// never leaves the verifier's group ends routed otherwise.
TEST_F(EndToEnd, GroupedCandidatesAreRankedByTheMeanOfTwoRoutings) {
  Problem p = make_problem(DType::bf16, Op::T, Op::N, 256, 8 * 96, 512);
  p.groups = 8;
  if (families_for(p, device_.arch).empty())
    GTEST_SKIP() << "no grouped kernels on " << device_.arch.name() << " (sm_90a only)";
  options_.budget.candidates = 3;
  const TuneReport r = tune(p, options_);
  ASSERT_TRUE(r.best.has_value()) << "no candidate passed";
  ASSERT_EQ(r.measured.size(), 3u);
  for (const auto& c : r.measured) {
    ASSERT_EQ(c.status, CandidateStatus::ok) << c.kernel_name << ": " << c.message;
    double uniform = 0, skewed = 0;
    ASSERT_EQ(std::sscanf(c.message.c_str(), "uniform %lf ms, skewed %lf ms", &uniform, &skewed), 2)
        << c.kernel_name << ": " << c.message;
    EXPECT_GT(uniform, 0);
    EXPECT_GT(skewed, 0);
    EXPECT_NEAR(c.median_ms, (uniform + skewed) / 2, 1e-4) << c.message;  // printed to 4 places
    EXPECT_GE(c.runs, 2) << "a run at least on each routing";
    std::printf("%s: %s; ranked at %.4f ms\n", c.kernel_name.c_str(), c.message.c_str(),
                c.median_ms);
  }
  EXPECT_GT(r.baseline_ms, 0) << "cuBLAS grouped, on both routings: " << r.baseline_name;

  const TuningDb db(options_.db_path);
  const auto best = db.best(device_.key, p);
  ASSERT_TRUE(best.has_value());
  EXPECT_NE(best->winner.message.find("final round"), std::string::npos) << best->winner.message;
  EXPECT_NE(best->winner.message.find("skewed"), std::string::npos) << best->winner.message;
}

}  // namespace
}  // namespace gemmtune
