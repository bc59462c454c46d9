// Merging tuning databases (TuningDb::merge, gemm-db merge): shard databases merge into the
// choices of one run, in any order; every candidate is kept; ties are broken the same way
// everywhere; files that are not gemmtune databases are refused; concurrent merges lose nothing.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <fstream>
#include <map>
#include <random>

#include "gemmtune/cache/tuning_db.hpp"
#include "gemmtune/generator/family.hpp"
#include "gemmtune/generator/util.hpp"
#include "support.hpp"

namespace gemmtune {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

DeviceKey h100() {
  return {"NVIDIA H100 80GB HBM3", 90, 132, 13000, "13.0"};
}
DeviceKey h200() {
  return {"NVIDIA H200", 90, 132, 13000, "13.0"};
}

// Real configurations of a family for the problem, so that every record is one gemm-tune writes.
std::vector<CandidateRecord> candidates_of(const Problem& p, size_t count) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Family& family = *families_for(p, arch).front();
  const auto valid = family.prune(p, arch).valid;
  std::vector<CandidateRecord> out;
  for (size_t i = 0; i < std::min(count, valid.size()); ++i) {
    CandidateRecord c;
    c.config = valid[i];
    c.kernel_name = family.kernel_name(c.config);
    c.template_version = template_version(family);
    out.push_back(c);
  }
  return out;
}

// Timings drawn from a seed, with exact ties on purpose (medians and minimums on a coarse grid).
void time_candidates(std::vector<CandidateRecord>& candidates, std::mt19937& rng) {
  std::uniform_int_distribution<int> steps(10, 14);
  for (size_t i = 0; i < candidates.size(); ++i) {
    CandidateRecord& c = candidates[i];
    if (i % 7 == 3) {
      c.status = CandidateStatus::wrong_result;
      c.message = "max error 1e-1";
      continue;
    }
    c.status = CandidateStatus::ok;
    c.median_ms = 0.1 * steps(rng);
    c.min_ms = c.median_ms * (steps(rng) >= 12 ? 0.99 : 0.98);
    c.max_ms = c.median_ms * 1.05;
    c.runs = 20;
  }
}

// What tune() does with a problem: record every candidate, then mark the fastest as the best.
void tune_into(TuningDb& db, const DeviceKey& device, const Problem& p,
               const std::vector<CandidateRecord>& cands, bool complete = true) {
  std::optional<CandidateRecord> best;
  for (const auto& c : cands) {
    db.record(device, p, c);
    if (c.status == CandidateStatus::ok && (!best || ranks_before(c, *best))) best = c;
  }
  if (best) db.set_best(device, p, best->kernel_name, best->template_version, 2.0, complete);
}

struct Workload {
  std::vector<Problem> problems;
  std::vector<std::vector<CandidateRecord>> candidates;  // by problem
};

Workload llm_like_workload() {
  Workload w;
  std::mt19937 rng(7);
  for (const auto& [m, n, k, dtype] :
       std::vector<std::tuple<int, int, int, DType>>{{4096, 4096, 4096, DType::bf16},
                                                     {11008, 4096, 4096, DType::bf16},
                                                     {4096, 1, 4096, DType::bf16},
                                                     {6144, 32, 4096, DType::bf16},
                                                     {1024, 1024, 1024, DType::f32},
                                                     {500, 300, 700, DType::bf16},
                                                     {2500, 3500, 4500, DType::bf16}}) {
    w.problems.push_back(make_problem(dtype, Op::T, Op::N, m, n, k));
    auto cands = candidates_of(w.problems.back(), 24);
    time_candidates(cands, rng);
    w.candidates.push_back(std::move(cands));
  }
  return w;
}

std::map<std::string, std::string> winners(const TuningDb& db, const DeviceKey& device,
                                           const Workload& w) {
  std::map<std::string, std::string> out;
  for (const auto& p : w.problems) {
    const auto best = db.best(device, p);
    out[p.describe()] = best ? best->winner.kernel_name : "(none)";
  }
  return out;
}

// The problem's winner after merging a, then b, into dir/ab.db, and b, then a, into dir/ba.db.
std::pair<std::string, std::string> merged_both_ways(const fs::path& dir, const TuningDb& a,
                                                     const TuningDb& b, const Problem& p) {
  TuningDb ab(dir / "ab.db"), ba(dir / "ba.db");
  ab.merge(a);
  ab.merge(b);
  ba.merge(b);
  ba.merge(a);
  return {ab.best(h100(), p)->winner.kernel_name, ba.best(h100(), p)->winner.kernel_name};
}

TEST(DbMerge, ShardDatabasesMergeIntoTheChoicesOfOneRunInAnyOrder) {
  TempDir dir;
  const Workload w = llm_like_workload();
  TuningDb single(dir / "single.db");
  for (size_t i = 0; i < w.problems.size(); ++i)
    tune_into(single, h100(), w.problems[i], w.candidates[i]);

  for (int shards : {1, 2, 3, 5}) {
    std::vector<std::unique_ptr<TuningDb>> parts;
    for (int s = 0; s < shards; ++s)
      parts.push_back(std::make_unique<TuningDb>(dir / fmt::format("s{}-{}.db", shards, s)));
    for (size_t i = 0; i < w.problems.size(); ++i)
      tune_into(*parts[i % size_t(shards)], h100(), w.problems[i], w.candidates[i]);
    TuningDb forward(dir / fmt::format("forward{}.db", shards)),
        backward(dir / fmt::format("backward{}.db", shards));
    for (int s = 0; s < shards; ++s) forward.merge(*parts[size_t(s)]);
    for (int s = shards - 1; s >= 0; --s) backward.merge(*parts[size_t(s)]);
    EXPECT_EQ(winners(forward, h100(), w), winners(single, h100(), w)) << shards << " shards";
    EXPECT_EQ(winners(backward, h100(), w), winners(single, h100(), w))
        << shards << " shards, reversed";
    EXPECT_EQ(forward.stats().candidates, single.stats().candidates);
    EXPECT_EQ(forward.stats().best, single.stats().best);
    for (const auto& p : w.problems) EXPECT_TRUE(forward.best(h100(), p)->complete) << p.describe();
  }
}

TEST(DbMerge, EveryCandidateIsKeptAndTheBestIsChosenAgainOverAllOfThem) {
  TempDir dir;
  const Problem p = make_problem(DType::bf16, Op::T, Op::N, 4096, 4096, 4096);
  auto cands = candidates_of(p, 10);
  for (size_t i = 0; i < cands.size(); ++i) {
    cands[i].status = CandidateStatus::ok;
    cands[i].median_ms = cands[i].min_ms = 1.0 + 0.1 * double(i);
    cands[i].runs = 20;
  }
  // Two runs of one problem measured different halves; the second's best is slower, but its
  // search was complete, and it measured cuBLAS.
  const std::vector<CandidateRecord> first(cands.begin(), cands.begin() + 5),
      second(cands.begin() + 5, cands.end());
  TuningDb a(dir / "a.db"), b(dir / "b.db"), out(dir / "out.db");
  tune_into(a, h100(), p, first, false);
  tune_into(b, h100(), p, second, true);
  out.merge(b);
  out.merge(a);
  EXPECT_EQ(out.candidates(h100(), p).size(), 10u);
  const auto best = out.best(h100(), p);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->winner.kernel_name, cands[0].kernel_name);
  EXPECT_TRUE(best->complete) << "one of the two searches was complete";

  // Merging again changes nothing.
  const ImportSummary again = out.merge(a);
  EXPECT_EQ(again.candidates, 0);
  EXPECT_EQ(again.best, 0);
}

// gemm-tune keeps a family's default when another kernel beat it by kWinnerMargin or less; a
// merge keeps that choice, in either order, and takes the fastest where it is faster by more.
TEST(DbMerge, AWinnerWithinTheMarginOfTheFastestStaysChosen) {
  TempDir dir;
  const Problem p = make_problem(DType::bf16, Op::T, Op::N, 4096, 4096, 4096);
  auto cands = candidates_of(p, 4);
  const double times[] = {1.000, 1.005, 1.2, 1.3};  // cands[1], the named winner, is within 1%
  for (size_t i = 0; i < cands.size(); ++i) {
    cands[i].status = CandidateStatus::ok;
    cands[i].median_ms = cands[i].min_ms = times[i];
    cands[i].runs = 20;
  }
  TuningDb a(dir / "a.db"), b(dir / "b.db");
  for (const auto& c : {cands[0], cands[1]}) a.record(h100(), p, c);
  a.set_best(h100(), p, cands[1].kernel_name, cands[1].template_version, 2.0, true);
  tune_into(b, h100(), p, {cands[2], cands[3]});
  const auto [ab, ba] = merged_both_ways(dir.path(), a, b, p);
  EXPECT_EQ(ab, cands[1].kernel_name);
  EXPECT_EQ(ba, cands[1].kernel_name);

  // A named winner 2% behind the fastest gives way to it.
  TuningDb c(dir / "c.db"), out(dir / "out.db");
  auto slower = cands[1];
  slower.median_ms = slower.min_ms = 1.02;
  for (const auto& x : {cands[0], slower}) c.record(h100(), p, x);
  c.set_best(h100(), p, slower.kernel_name, slower.template_version, 2.0, true);
  out.merge(c);
  EXPECT_EQ(out.best(h100(), p)->winner.kernel_name, cands[0].kernel_name);
}

TEST(DbMerge, TiesAreBrokenTheSameWayByEveryReader) {
  TempDir dir;
  const Problem p = make_problem(DType::bf16, Op::N, Op::N, 2048, 2048, 2048);
  auto cands = candidates_of(p, 4);
  for (auto& c : cands) {
    c.status = CandidateStatus::ok;
    c.median_ms = 0.5;
    c.min_ms = 0.49;
    c.runs = 20;
  }
  const std::string first_by_name =
      std::min_element(cands.begin(), cands.end(), [](auto& x, auto& y) {
        return x.kernel_name < y.kernel_name;
      })->kernel_name;
  TuningDb a(dir / "a.db"), b(dir / "b.db");
  tune_into(a, h100(), p, {cands[0], cands[1]});
  tune_into(b, h100(), p, {cands[2], cands[3]});
  const auto [ab_winner, ba_winner] = merged_both_ways(dir.path(), a, b, p);
  EXPECT_EQ(ab_winner, first_by_name);
  EXPECT_EQ(ba_winner, first_by_name);
  const TuningDb ab(dir / "ab.db");
  // The database lists a problem's candidates in the same order.
  EXPECT_EQ(ab.candidates(h100(), p).front().kernel_name, first_by_name);
  EXPECT_TRUE(ranks_before(ab.candidates(h100(), p)[0], ab.candidates(h100(), p)[1]));
}

TEST(DbMerge, ResultsOfDifferentGpusStayApart) {
  TempDir dir;
  const Workload w = llm_like_workload();
  TuningDb a(dir / "a.db"), b(dir / "b.db"), out(dir / "out.db");
  tune_into(a, h100(), w.problems[0], w.candidates[0]);
  auto other = w.candidates[0];
  std::reverse(other.begin(), other.end());
  for (size_t i = 0; i < other.size(); ++i) other[i].median_ms = other[i].min_ms = 1.0 + double(i);
  tune_into(b, h200(), w.problems[0], other);
  out.merge(a);
  out.merge(b);
  EXPECT_EQ(out.stats().devices, 2);
  EXPECT_EQ(out.best(h100(), w.problems[0])->winner.kernel_name,
            a.best(h100(), w.problems[0])->winner.kernel_name);
  EXPECT_EQ(out.best(h200(), w.problems[0])->winner.kernel_name,
            b.best(h200(), w.problems[0])->winner.kernel_name);
}

// A problem with beta != 0 and the same problem with beta = 0 are tuned apart (reading C changes
// the fastest kernel); merging keeps the two classes, their candidates and their winners apart.
TEST(DbMerge, ProblemsThatReadCAndThoseThatDoNotStayApart) {
  TempDir dir;
  const Workload w = llm_like_workload();
  const Problem p = w.problems[0];
  Problem q = p;
  q.reads_c = true;
  // The candidates of the problem that reads C (the Hopper family builds them with READS_C = 1),
  // timed in the order opposite to the others', so that the two winners differ.
  auto other = candidates_of(q, w.candidates[0].size());
  std::reverse(other.begin(), other.end());
  for (size_t i = 0; i < other.size(); ++i) other[i].median_ms = other[i].min_ms = 1.0 + double(i);
  TuningDb a(dir / "a.db"), b(dir / "b.db"), out(dir / "out.db");
  tune_into(a, h100(), p, w.candidates[0]);
  tune_into(b, h100(), q, other);
  ASSERT_NE(a.best(h100(), p)->winner.kernel_name, b.best(h100(), q)->winner.kernel_name);
  out.merge(a);
  out.merge(b);
  EXPECT_EQ(out.stats().problems, 2);
  EXPECT_EQ(out.stats().best, 2);
  EXPECT_EQ(out.candidates(h100(), p).size(), a.candidates(h100(), p).size());
  EXPECT_EQ(out.candidates(h100(), q).size(), b.candidates(h100(), q).size());
  EXPECT_EQ(out.best(h100(), p)->winner.kernel_name, a.best(h100(), p)->winner.kernel_name);
  EXPECT_EQ(out.best(h100(), q)->winner.kernel_name, b.best(h100(), q)->winner.kernel_name);
  EXPECT_FALSE(out.best(h100(), p)->problem.reads_c);
  EXPECT_TRUE(out.best(h100(), q)->problem.reads_c);
}

// Two problems of the same sizes that are tuned apart (p one GEMM or contiguous groups, q other
// groups or another layout of them; or p a precise float8 product, q a fast one; or p plain, q
// fused with an epilogue), each tuned into a file of its own: merging keeps their candidates and
// winners apart, and each filter finds its own. Their candidates are of another template version:
// history, which a merge keeps without asking whether a family runs groups or fast accumulation.
void expect_merged_apart(const Problem& p, const Problem& q,
                         const std::vector<CandidateRecord>& measured, const DbFilter& only_p,
                         const DbFilter& only_q) {
  TempDir dir;
  auto history = [](std::vector<CandidateRecord> cands) {
    for (auto& c : cands) c.template_version = "00000000deadbeef";
    return cands;
  };
  auto other = history(measured);
  std::reverse(other.begin(), other.end());
  for (auto& c : other) c.config.epilogue = q.epilogue;  // a config names its kernel's store
  for (size_t i = 0; i < other.size(); ++i) other[i].median_ms = other[i].min_ms = 1.0 + double(i);
  TuningDb a(dir / "a.db"), b(dir / "b.db"), out(dir / "out.db");
  tune_into(a, h100(), p, history(measured));
  tune_into(b, h100(), q, other);
  const std::string winner_p = a.list({})[0].winner.kernel_name;
  const std::string winner_q = b.list({})[0].winner.kernel_name;
  ASSERT_NE(winner_p, winner_q);
  out.merge(a);
  out.merge(b);
  EXPECT_EQ(out.stats().problems, 2);
  EXPECT_EQ(out.stats().best, 2);
  EXPECT_EQ(out.candidates(h100(), p, true).size(), measured.size());
  EXPECT_EQ(out.candidates(h100(), q, true).size(), other.size());
  const auto listed_p = out.list(only_p), listed_q = out.list(only_q);
  ASSERT_EQ(listed_p.size(), 1u);
  ASSERT_EQ(listed_q.size(), 1u);
  EXPECT_EQ(listed_p[0].problem, p);
  EXPECT_EQ(listed_p[0].winner.kernel_name, winner_p);
  EXPECT_EQ(listed_q[0].problem, q);
  EXPECT_EQ(listed_q[0].winner.kernel_name, winner_q);
}

// A grouped problem (G experts that split N) and one GEMM of the same sizes are tuned apart.
TEST(DbMerge, GroupedProblemsAndOneGemmOfTheSameSizesStayApart) {
  const Workload w = llm_like_workload();
  const Problem p = w.problems[0];
  Problem q = p;
  q.groups = 8;
  expect_merged_apart(p, q, w.candidates[0], {.groups = 0}, {.groups = 8});
}

// So are masked groups (each a count of a fixed capacity) and contiguous ones of the same sizes.
TEST(DbMerge, MaskedAndContiguousGroupsOfTheSameSizesStayApart) {
  const Workload w = llm_like_workload();
  Problem p = w.problems[0];
  p.groups = 8;
  Problem q = p;
  q.group_layout = GroupLayout::masked;
  expect_merged_apart(p, q, w.candidates[0], {.group_layout = GroupLayout::contiguous},
                      {.group_layout = GroupLayout::masked});
}

// So are float8 products summed with fast accumulation and precise ones of the same shape and
// scaling: other kernels, with another error.
TEST(DbMerge, FastAndPreciseFloat8ProblemsOfTheSameShapeStayApart) {
  Problem p = make_problem(parse_data_types("e4m3*e4m3->bf16"), Op::T, Op::N, 4096, 256, 7168);
  p.scaling = Scaling::tensor;
  Problem q = p;
  q.accumulation = Accumulation::fast;
  std::mt19937 rng(11);
  auto measured = candidates_of(p, 24);
  time_candidates(measured, rng);
  expect_merged_apart(p, q, measured, {.accumulation = Accumulation::precise},
                      {.accumulation = Accumulation::fast});
}

// So are problems whose store applies an epilogue (a bias, an activation) and the plain ones of
// the same shape, and two epilogues of it: other kernels, computing another D.
TEST(DbMerge, FusedAndPlainProblemsOfTheSameShapeStayApart) {
  const Problem p = make_problem(DType::bf16, Op::T, Op::N, 4096, 256, 4096);
  Problem q = p;
  q.epilogue = parse_epilogue("bias,gelu");
  std::mt19937 rng(13);
  auto measured = candidates_of(p, 24);
  time_candidates(measured, rng);
  expect_merged_apart(p, q, measured, {.epilogue = Epilogue{}}, {.epilogue = q.epilogue});
  Problem r = p;
  r.epilogue = parse_epilogue("silu");
  auto fused = candidates_of(q, 24);
  time_candidates(fused, rng);
  expect_merged_apart(q, r, fused, {.epilogue = q.epilogue}, {.epilogue = r.epilogue});
}

// ---- gemm-db merge --------------------------------------------------------------------------

std::string merge_command(const fs::path& out, const std::vector<fs::path>& inputs) {
  std::string cmd = fmt::format("{} merge {}", test::tool("gemm-db"), out.string());
  for (const auto& in : inputs) cmd += fmt::format(" {}", in.string());
  return cmd;
}

TEST(GemmDbMerge, MergesFilesAndSaysWhat) {
  TempDir dir;
  const Workload w = llm_like_workload();
  {
    TuningDb a(dir / "a.db"), b(dir / "b.db");
    for (size_t i = 0; i < w.problems.size(); ++i)
      tune_into(i % 2 ? b : a, h100(), w.problems[i], w.candidates[i]);
  }
  const auto r = test::run_command(merge_command(dir / "out.db", {dir / "a.db", dir / "b.db"}));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("merged " + (dir / "a.db").string()), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(fmt::format("{} problems", w.problems.size())), std::string::npos)
      << r.output;
  TuningDb out(dir / "out.db");
  size_t total = 0;
  for (const auto& c : w.candidates) total += c.size();
  EXPECT_EQ(out.stats().candidates, int64_t(total));
}

TEST(GemmDbMerge, RefusesFilesThatAreNotGemmtuneDatabasesBeforeWritingAnything) {
  TempDir dir;
  const Workload w = llm_like_workload();
  {
    TuningDb good(dir / "good.db");
    tune_into(good, h100(), w.problems[0], w.candidates[0]);
  }
  std::ofstream(dir / "notes.txt") << "not a database at all\n" << std::string(4096, 'x');
  {
    sqlite3* foreign = nullptr;
    sqlite3_open((dir / "photos.db").c_str(), &foreign);
    sqlite3_exec(foreign, "CREATE TABLE photos (id INTEGER PRIMARY KEY)", nullptr, nullptr,
                 nullptr);
    sqlite3_close(foreign);
  }
  for (const auto& [bad, says] :
       std::vector<std::pair<std::string, std::string>>{{"notes.txt", "SQLITE_NOTADB"},
                                                        {"photos.db", "another program"},
                                                        {"missing.db", "no tuning database"}}) {
    const auto r = test::run_command(merge_command(dir / "out.db", {dir / "good.db", dir / bad}));
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("gemm-db: error: cannot merge " + (dir / bad).string()),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(dir / "out.db")) << "nothing is written when an input is bad";
  }
  const auto self = test::run_command(merge_command(dir / "good.db", {dir / "good.db"}));
  EXPECT_EQ(self.exit_code, 2) << self.output;
  EXPECT_NE(self.output.find("into itself"), std::string::npos) << self.output;
}

TEST(GemmDbMerge, TwoConcurrentMergesIntoOneFileLoseNothing) {
  TempDir dir;
  const Workload w = llm_like_workload();
  {
    TuningDb a(dir / "a.db"), b(dir / "b.db");
    for (size_t i = 0; i < w.problems.size(); ++i)
      tune_into(i % 2 ? b : a, h100(), w.problems[i], w.candidates[i]);
  }
  size_t total = 0;
  for (const auto& c : w.candidates) total += c.size();
  TuningDb single(dir / "single.db");
  for (size_t i = 0; i < w.problems.size(); ++i)
    tune_into(single, h100(), w.problems[i], w.candidates[i]);
  for (int round = 0; round < 3; ++round) {
    const fs::path out = dir / fmt::format("out{}.db", round);
    const auto r = test::run_command(
        "(" + merge_command(out, {dir / "a.db"}) + " & " + merge_command(out, {dir / "b.db"}) +
        " & wait) > " + (dir / "log.txt").string() + " 2>&1; cat " + (dir / "log.txt").string());
    EXPECT_EQ(r.output.find("error"), std::string::npos) << r.output;
    TuningDb merged(out);
    EXPECT_EQ(merged.stats().candidates, int64_t(total)) << r.output;
    EXPECT_EQ(winners(merged, h100(), w), winners(single, h100(), w));
  }
}

}  // namespace
}  // namespace gemmtune
