// How the library serves while it prepares: a prepared problem never waits on another problem's
// compile, concurrent first calls of one problem prepare it once, and a GPU with no rows of its
// own uses a sibling GPU's (same compute capability) before the nearest shape.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "gemmtune/cache/tuning_db.hpp"
#include "gemmtune/gemmtune.hpp"
#include "gemmtune/generator/util.hpp"
#include "gpu_support.hpp"
#include "log_capture.hpp"

namespace gemmtune {
namespace {

using Clock = std::chrono::steady_clock;

class LibraryServing : public test::GpuTest {
 protected:
  void SetUp() override {
    test::GpuTest::SetUp();
    if (IsSkipped()) return;
    options_.db_path = (dir_ / "none.db").string();  // nothing tuned: defaults, compiled here
    options_.cache_dir = (dir_ / "cache").string();  // empty: every new problem compiles
  }

  static void call(Library& lib, const Problem& p, const ProblemData& d, CUstream s) {
    lib.matmul({p.types, p.scaling, p.op_a, p.op_b}, p.m, p.n, p.k, 1.0f,
               reinterpret_cast<const void*>(d.a.ptr()), p.lda,
               reinterpret_cast<const void*>(d.b.ptr()), p.ldb, 0.0f,
               reinterpret_cast<void*>(d.c.ptr()), p.ldc, reinterpret_cast<Stream>(s));
  }

  test::TempDir dir_;
  Options options_;
};

// The review's measurement: a thread calling a prepared shape stalled 860 ms while another
// thread's first calls compiled, because one mutex was held across NVRTC. Now the served
// thread's worst call stays under 5 ms while six new shapes compile.
TEST_F(LibraryServing, APreparedProblemNeverWaitsForAnotherProblemsCompile) {
  const DataType t = device_.arch.cc >= 80 ? DataType::bf16 : DataType::f32;
  Library lib(options_);
  const Problem served = make_problem(t, Op::T, Op::N, 512, 256, 512);
  const ProblemData served_data(served, *checker_, 1, stream_->get());
  std::vector<Problem> fresh;
  std::vector<std::unique_ptr<ProblemData>> fresh_data;
  for (int i = 0; i < 6; ++i) {
    fresh.push_back(make_problem(t, i % 2 ? Op::N : Op::T, Op::N, 96 + 64 * i, 80 + 32 * i, 256));
    fresh_data.push_back(
        std::make_unique<ProblemData>(fresh.back(), *checker_, 2 + i, stream_->get()));
  }
  call(lib, served, served_data, stream_->get());  // prepared: compiled and loaded
  stream_->synchronize();

  std::atomic<bool> compiling{true};
  double compile_s = 0;
  std::thread newcomer([&] {
    ensure_context();
    StreamHandle s;
    const auto start = Clock::now();
    for (size_t i = 0; i < fresh.size(); ++i) call(lib, fresh[i], *fresh_data[i], s.get());
    s.synchronize();
    compile_s = std::chrono::duration<double>(Clock::now() - start).count();
    compiling = false;
  });
  std::vector<double> call_ms;
  {
    StreamHandle s;
    while (compiling) {
      const auto start = Clock::now();
      call(lib, served, served_data, s.get());
      call_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      s.synchronize();  // one call in flight at a time: the time measured is the call's own
    }
  }
  newcomer.join();
  ASSERT_FALSE(call_ms.empty());
  std::sort(call_ms.begin(), call_ms.end());
  const double worst = call_ms.back(), median = call_ms[call_ms.size() / 2];
  std::printf(
      "six first calls took %.2f s; %zu calls of the prepared problem meanwhile: "
      "median %.1f us, worst %.3f ms\n",
      compile_s, call_ms.size(), median * 1e3, worst);
  EXPECT_GT(compile_s, 0.2) << "the six new problems did not compile: the test shows nothing";
  EXPECT_LT(worst, 5.0) << "median " << median << " ms over " << call_ms.size() << " calls";
  for (size_t i = 0; i < fresh.size(); ++i) {
    const Verdict v = check_library(lib, fresh[i], 1.0f, 0.0f, 4);
    EXPECT_TRUE(v.ok) << fresh[i].describe() << ": " << v.message;
  }
}

// Eight threads make the first call of the same problem at once: it is compiled once (the
// others wait for that preparation), and every call is right.
TEST_F(LibraryServing, ConcurrentFirstCallsOfOneProblemPrepareItOnce) {
  const Problem p = make_problem(DataType::f32, Op::N, Op::T, 200, 136, 72);
  const ProblemData d(p, *checker_, 3, stream_->get());
  stream_->synchronize();
  Library lib(options_);
  test::LogCapture captured(spdlog::level::debug);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      ensure_context();
      StreamHandle s;
      call(lib, p, d, s.get());
      s.synchronize();
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(captured.lines_with("compiled "), 1) << captured.text();
  const Verdict v = check_library(lib, p, 1.0f, 0.0f, 5);
  EXPECT_TRUE(v.ok) << v.message;
}

// An H200 with only an H100's rows (or any GPU with only another model's of its compute
// capability) uses that row for the exact problem, and says whose it is, before the nearest
// shape tuned on itself.
TEST_F(LibraryServing, AGpuWithoutRowsUsesASiblingsForTheExactProblem) {
  const Problem p = make_problem(DataType::f32, Op::N, Op::N, 320, 192, 128);
  const Family& simt = find_family("simt");
  const KernelConfig c = simt.prune(p, device_.arch).valid.at(5);
  DeviceKey sibling = device_.key;
  sibling.name = "A sibling of " + device_.key.name;
  sibling.sms = device_.key.sms + 8;
  DeviceKey other_cc = device_.key;
  other_cc.name = "A GPU of another compute capability";
  other_cc.cc = device_.key.cc == 90 ? 80 : 90;
  {
    TuningDb db(options_.db_path);
    CandidateRecord r;
    r.kernel_name = simt.kernel_name(c);
    r.template_version = template_version(simt);
    r.config = c;
    r.status = CandidateStatus::ok;
    r.median_ms = 1.0;
    for (const DeviceKey& key : {sibling, other_cc}) {
      db.record(key, p, r);
      db.set_best(key, p, r.kernel_name, r.template_version, -1, /*complete=*/true);
    }
  }
  Library lib(options_);
  const Selection s = lib.select(p);
  EXPECT_EQ(s.source, Source::sibling) << s.note;
  EXPECT_STREQ(to_string(s.source), "sibling");
  EXPECT_EQ(s.kernel, simt.kernel_name(c));
  EXPECT_NE(s.note.find("tuned on " + sibling.name), std::string::npos) << s.note;
  const Verdict v = check_library(lib, p, 1.0f, 0.0f, 6);
  EXPECT_TRUE(v.ok) << v.message;
  // Only the exact problem borrows it; another shape gets this GPU's defaults.
  EXPECT_EQ(lib.select(make_problem(DataType::f32, Op::N, Op::N, 352, 192, 128)).source,
            Source::fallback);
}

}  // namespace
}  // namespace gemmtune
