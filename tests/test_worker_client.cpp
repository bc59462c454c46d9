// tuner/worker_client: the watchdog and restart logic, with stand-in workers (no GPU needed).
#include <gtest/gtest.h>

#include <fstream>

#include "gemmtune/error.hpp"
#include "gemmtune/tuner/thread_pool.hpp"
#include "gemmtune/tuner/worker.hpp"
#include "protocol.hpp"
#include "support.hpp"

namespace gemmtune {
namespace {

std::filesystem::path script(const test::TempDir& dir, const std::string& name,
                             const std::string& body) {
  const auto path = dir / name;
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

// The worker tunes the problem the tuner sent: every field of its identity crosses the pipe.
TEST(WorkerProtocol, AProblemCrossesWhole) {
  Problem grouped = make_problem(DataType::bf16, Op::T, Op::N, 1536, 8 * 128, 2048);
  grouped.groups = 128;
  grouped.group_layout = GroupLayout::masked;
  grouped.reads_c = true;
  grouped.ldc += 8;
  grouped.align = 8;
  Problem fast =
      make_problem(DataTypes{DataType::e4m3, DataType::e5m2, DataType::f16, DataType::f16}, Op::T,
                   Op::N, 4096, 64, 7168);
  fast.scaling = Scaling::row;
  fast.accumulation = Accumulation::fast;
  Problem tf32 = make_problem(DataType::f32, Op::N, Op::T, 2048, 1024, 512);
  tf32.precision = Precision::tf32;
  Problem tf32x3 = tf32;
  tf32x3.precision = Precision::tf32x3;
  Problem fused = make_problem(DataType::bf16, Op::T, Op::N, 4096, 512, 4096);
  fused.epilogue = parse_epilogue("bias,swiglu,interleaved");
  for (const Problem& p : {grouped, fast, tf32, tf32x3, fused})
    EXPECT_EQ(problem_from_json(nlohmann::json::parse(to_json(p).dump())), p) << p.describe();
}

TEST(WorkerClient, OneAnswerPerRequest) {
  test::TempDir dir;
  WorkerClient w(script(dir, "echo", "while read line; do echo \"got $line\"; done"));
  EXPECT_EQ(w.call("one", 10).value(), "got one");
  EXPECT_EQ(w.call("two", 10).value(), "got two");
  w.stop();
  EXPECT_FALSE(w.running());
}

TEST(WorkerClient, WatchdogKillsAHungWorker) {
  test::TempDir dir;
  WorkerClient w(script(dir, "hang", "read line; sleep 100"));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(w.call("work", 1.0).has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(w.failure().rfind("no answer within", 0), 0u) << w.failure();
  EXPECT_FALSE(w.running());
}

TEST(WorkerClient, ADeadWorkerIsReportedWithItsLogAndRestarted) {
  test::TempDir dir;
  const auto marker = dir / "started";
  WorkerClient w(script(dir, "dies",
                        "echo x >> " + marker.string() +
                            "\n"
                            "read line; echo \"fatal: device on fire\" >&2; exit 3"));
  EXPECT_FALSE(w.call("work", 10).has_value());
  EXPECT_NE(w.failure().find("exit code 3"), std::string::npos) << w.failure();
  EXPECT_NE(w.failure().find("device on fire"), std::string::npos) << w.failure();
  EXPECT_FALSE(w.call("again", 10).has_value());  // a new process was started for this call
  std::ifstream in(marker);
  int starts = 0;
  for (std::string l; std::getline(in, l);) ++starts;
  EXPECT_EQ(starts, 2);
}

TEST(WorkerClient, ACrashBySignalIsNamed) {
  test::TempDir dir;
  WorkerClient w(script(dir, "segv", "read line; kill -SEGV $$"));
  EXPECT_FALSE(w.call("work", 10).has_value());
  EXPECT_NE(w.failure().find("signal 11"), std::string::npos) << w.failure();
}

TEST(WorkerClient, MissingWorkerIsAClearError) {
  setenv("GEMMTUNE_WORKER", "/nonexistent/gemm-tune-worker", 1);
  try {
    find_worker();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::io);
    EXPECT_NE(std::string(e.what()).find("GEMMTUNE_WORKER"), std::string::npos);
  }
  unsetenv("GEMMTUNE_WORKER");
}

TEST(ThreadPool, RunsEveryTaskAndReturnsResults) {
  ThreadPool pool(3);
  std::vector<std::future<int>> results;
  for (int i = 0; i < 100; ++i) results.push_back(pool.submit([i] { return i * i; }));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(results[size_t(i)].get(), i * i);
}

}  // namespace
}  // namespace gemmtune
