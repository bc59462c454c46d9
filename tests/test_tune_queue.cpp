// The tuning daemon's queue without a GPU: processes meet on one entry, the daemon claims the
// most costly first and only for its GPU, a dead daemon's claim goes back, the change counter
// and the results' signature tell a process that results arrived; gemm-tune --status and the
// refusals of --serve.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "gemmtune/cache/tuning_db.hpp"
#include "gemmtune/generator/family.hpp"
#include "gemmtune/tuner/serve.hpp"
#include "support.hpp"

namespace gemmtune {
namespace {

using test::run_command;
using test::TempDir;
using test::tool;

DeviceKey h100() {
  return {"NVIDIA H100 80GB HBM3", 90, 132, 13000, "13.0"};
}
DeviceKey a100() {
  return {"NVIDIA A100-SXM4-40GB", 80, 108, 12080, "12.8"};
}

Problem bf16_tn(int64_t m, int64_t n, int64_t k) {
  return make_problem(DType::bf16, Op::T, Op::N, m, n, k);
}

TEST(TuneQueue, ProcessesAskingForOneProblemMeetOnOneEntry) {
  TempDir dir;
  TuningDb first(dir.path() / "t.db"), second(dir.path() / "t.db");
  const int64_t id = first.enqueue(h100(), bf16_tn(4096, 16, 4096), 12.5);
  EXPECT_EQ(second.enqueue(h100(), bf16_tn(4096, 16, 4096), 13.0), id);
  EXPECT_NE(second.enqueue(a100(), bf16_tn(4096, 16, 4096), 13.0), id);  // another GPU
  first.add_calls(id, 7);
  second.add_calls(id, 5);
  second.add_calls(id, 0);
  const auto entry = first.queue_entry(id);
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->calls, 12);
  EXPECT_DOUBLE_EQ(entry->predicted_us, 13.0);
  EXPECT_EQ(entry->state, QueueState::queued);
  EXPECT_EQ(entry->problem, bf16_tn(4096, 16, 4096));
  EXPECT_EQ(entry->device, h100());
  EXPECT_EQ(first.queue().size(), 2u);
}

TEST(TuneQueue, TheDaemonClaimsTheMostCostlyEntryOfItsGpuOnce) {
  TempDir dir;
  TuningDb db(dir.path() / "t.db");
  const int64_t cheap = db.enqueue(h100(), bf16_tn(256, 16, 256), 3.0);
  const int64_t costly = db.enqueue(h100(), bf16_tn(8192, 16, 8192), 40.0);
  const int64_t often = db.enqueue(h100(), bf16_tn(1024, 16, 1024), 5.0);
  db.add_calls(often, 100);                               // 500 us of calls against 40
  db.enqueue(a100(), bf16_tn(8192, 8192, 8192), 9000.0);  // not this GPU's
  // Another driver and NVRTC on the same GPU model: the same daemon takes it.
  DeviceKey daemon = h100();
  daemon.driver = 13010;
  std::vector<int64_t> order;
  while (auto e = db.claim_next(daemon, "host:1")) {
    EXPECT_EQ(e->state, QueueState::tuning);
    EXPECT_EQ(e->attempts, 1);
    order.push_back(e->id);
  }
  EXPECT_EQ(order, (std::vector<int64_t>{often, costly, cheap}));
  EXPECT_FALSE(TuningDb(dir.path() / "t.db").claim_next(h100(), "host:2"));
  EXPECT_EQ(db.queue().front().state, QueueState::tuning);  // tuning first, then queued
}

TEST(TuneQueue, OnlyIdClaimsThatEntry) {
  TempDir dir;
  TuningDb db(dir.path() / "t.db");
  db.enqueue(h100(), bf16_tn(8192, 16, 8192), 40.0);
  const int64_t small = db.enqueue(h100(), bf16_tn(256, 16, 256), 3.0);
  const auto e = db.claim_next(h100(), "host:1", small);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->id, small);
  EXPECT_FALSE(db.claim_next(h100(), "host:1", small));  // claimed already
}

TEST(TuneQueue, FinishingEndsOnlyYourOwnClaim) {
  TempDir dir;
  TuningDb db(dir.path() / "t.db");
  const int64_t id = db.enqueue(h100(), bf16_tn(512, 16, 512), 4.0);
  ASSERT_TRUE(db.claim_next(h100(), "host:1"));
  EXPECT_TRUE(db.heartbeat(id, "host:1"));
  EXPECT_FALSE(db.heartbeat(id, "host:2"));
  db.finish(id, "host:2", QueueState::done, "not mine");
  EXPECT_EQ(db.queue_entry(id)->state, QueueState::tuning);
  db.finish(id, "host:1", QueueState::done, "gemm_wgmma_x 0.01 ms");
  const auto done = db.queue_entry(id);
  EXPECT_EQ(done->state, QueueState::done);
  EXPECT_EQ(done->message, "gemm_wgmma_x 0.01 ms");
  EXPECT_TRUE(done->claimed_by.empty());
  EXPECT_FALSE(db.heartbeat(id, "host:1"));
  EXPECT_THROW(db.finish(id, "host:1", QueueState::queued, ""), Error);
}

TEST(TuneQueue, AskedAgainADoneProblemWaitsAgainAFailedOneStaysFailed) {
  TempDir dir;
  TuningDb db(dir.path() / "t.db");
  const int64_t done = db.enqueue(h100(), bf16_tn(512, 16, 512), 4.0);
  const int64_t failed = db.enqueue(h100(), bf16_tn(640, 16, 640), 4.0);
  db.claim_next(h100(), "host:1", done);
  db.finish(done, "host:1", QueueState::done, "ok");
  db.claim_next(h100(), "host:1", failed);
  db.finish(failed, "host:1", QueueState::failed, "no candidate passed");
  db.enqueue(h100(), bf16_tn(512, 16, 512), 4.0);
  db.enqueue(h100(), bf16_tn(640, 16, 640), 4.0);
  EXPECT_EQ(db.queue_entry(done)->state, QueueState::queued);
  EXPECT_EQ(db.queue_entry(failed)->state, QueueState::failed);
  EXPECT_EQ(db.retry_failed(), 1);
  EXPECT_EQ(db.queue_entry(failed)->state, QueueState::queued);
  EXPECT_TRUE(db.queue_entry(failed)->message.empty());
}

TEST(TuneQueue, ADeadDaemonsClaimGoesBackAndIsResumed) {
  TempDir dir;
  TuningDb db(dir.path() / "t.db");
  const int64_t id = db.enqueue(h100(), bf16_tn(512, 16, 512), 4.0);
  // A child process claims, then dies without finishing (kill -9 of the daemon).
  const pid_t child = fork();
  if (child == 0) {
    TuningDb(dir.path() / "t.db").claim_next(h100(), claimer_id());
    _exit(0);
  }
  ASSERT_GT(child, 0);
  int status = 0;
  waitpid(child, &status, 0);
  const auto claimed = db.queue_entry(id);
  ASSERT_EQ(claimed->state, QueueState::tuning);
  ASSERT_NE(claimed->claimed_by, claimer_id());
  EXPECT_TRUE(claim_is_gone(claimed->claimed_by, claimed->heartbeat, 600));
  EXPECT_FALSE(claim_is_gone(claimer_id(), claimed->heartbeat, 600));  // alive, fresh
  EXPECT_FALSE(claim_is_gone("elsewhere:1", claimed->heartbeat, 600));
  EXPECT_TRUE(claim_is_gone("elsewhere:1", claimed->heartbeat - 601, 600));
  EXPECT_TRUE(claim_is_gone("elsewhere:1", -1, 600));
  const int released = db.release_claims([](const std::string& claimer, double heartbeat) {
    return claim_is_gone(claimer, heartbeat, 600);
  });
  EXPECT_EQ(released, 1);
  const auto again = db.claim_next(h100(), claimer_id());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->id, id);
  EXPECT_EQ(again->attempts, 2);
}

TEST(TuneQueue, TheChangeCounterMovesOnlyForOtherConnections) {
  TempDir dir;
  TuningDb watcher(dir.path() / "t.db"), writer(dir.path() / "t.db");
  const int64_t before = watcher.data_version();
  watcher.enqueue(h100(), bf16_tn(512, 16, 512), 4.0);  // its own commit
  EXPECT_EQ(watcher.data_version(), before);
  const std::string signature = watcher.results_signature();
  writer.enqueue(h100(), bf16_tn(640, 16, 640), 4.0);
  EXPECT_NE(watcher.data_version(), before);
  EXPECT_EQ(watcher.results_signature(), signature);  // a queue write is no result
  // A best row is.
  const Problem p = bf16_tn(512, 16, 512);
  const Family& family = *families_for(p, ArchInfo::from_cc(90)).front();
  CandidateRecord c;
  c.config = family.default_config(p, ArchInfo::from_cc(90));
  c.kernel_name = family.kernel_name(c.config);
  c.template_version = template_version(family);
  c.median_ms = c.min_ms = c.max_ms = 0.01;
  c.runs = 10;
  writer.record(h100(), p, c);
  writer.set_best(h100(), p, c.kernel_name, c.template_version, 0.012, true);
  EXPECT_NE(watcher.results_signature(), signature);
}

TEST(TuneQueue, StatusShowsTheQueue) {
  TempDir dir;
  const auto path = dir.path() / "t.db";
  {
    TuningDb db(path);
    const int64_t id = db.enqueue(h100(), bf16_tn(4096, 16, 4096), 12.5);
    db.add_calls(id, 30);
  }
  const auto table = run_command(tool("gemm-tune") + " --status --db " + path.string());
  EXPECT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.output.find("1 entry"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("queued"), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("4096x16x4096"), std::string::npos) << table.output;
  const auto json = run_command(tool("gemm-tune") + " --status --json --db " + path.string());
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const auto doc = nlohmann::json::parse(json.output.substr(json.output.find('{')));
  ASSERT_EQ(doc["queue"].size(), 1u);
  EXPECT_EQ(doc["queue"][0]["calls"], 30);
  EXPECT_EQ(doc["queue"][0]["state"], "queued");
  EXPECT_DOUBLE_EQ(doc["queue"][0]["priority"].get<double>(), 30 * 12.5);
}

TEST(TuneQueue, ServeRefusesWhatItCannotDo) {
  TempDir dir;
  const std::string db = " --db " + (dir.path() / "t.db").string();
  const auto missing = run_command(tool("gemm-tune") + " --status" + db);
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("nothing was queued there"), std::string::npos) << missing.output;
  const auto shape = run_command(tool("gemm-tune") + " --serve --m 64 --n 64 --k 64" + db);
  EXPECT_EQ(shape.exit_code, 2) << shape.output;
  EXPECT_NE(shape.output.find("takes its problems from the queue"), std::string::npos)
      << shape.output;
  const auto once = run_command(tool("gemm-tune") + " --once --m 64 --n 64 --k 64" + db);
  EXPECT_EQ(once.exit_code, 2) << once.output;
  EXPECT_NE(once.output.find("go with --serve"), std::string::npos) << once.output;
}

}  // namespace
}  // namespace gemmtune
