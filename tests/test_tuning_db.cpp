// TuningDb: what the tuner writes, what the runtime and gemm-db read back, and the file's
// safety: migrations, foreign or newer files, several processes, import that changes nothing
// when it fails.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include "gemmtune/cache/nearest.hpp"
#include "gemmtune/cache/tuning_db.hpp"
#include "gemmtune/generator/family.hpp"
#include "gemmtune/generator/util.hpp"
#include "support.hpp"

namespace gemmtune {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

using test::TempDir;

DeviceKey h100() {
  return {"NVIDIA H100 80GB HBM3", 90, 132, 13000, "13.0"};
}
DeviceKey a100() {
  return {"NVIDIA A100-SXM4-40GB", 80, 108, 12080, "12.8"};
}

Problem square(int64_t size, DType dtype = DType::f32, Op op_a = Op::N, Op op_b = Op::N) {
  return make_problem(dtype, op_a, op_b, size, size, size);
}

std::string simt_version() {
  return template_version(find_family("simt"));
}

// The family that serves the problem on an H100, as the tuner picks it.
const Family& family_for(const Problem& p) {
  return *families_for(p, ArchInfo::from_cc(90)).front();
}

std::string version_for(const Problem& p) {
  return template_version(family_for(p));
}

// The index-th valid point of that family's space: a row the library and an import accept
// (also on an A100: the f32 points fit its limits).
KernelConfig config_for(const Problem& p, size_t index) {
  const ArchInfo arch = ArchInfo::from_cc(90);
  const auto valid = family_for(p).prune(p, arch).valid;
  return valid.at(index % valid.size());
}

// The same problem with beta != 0.
Problem reading_c(Problem p) {
  p.reads_c = true;
  return p;
}

// The same problem as G groups that split its N columns (a mixture-of-experts layer).
Problem grouped(Problem p, int64_t groups) {
  p.groups = groups;
  return p;
}

// The same problem as G masked groups: each a count of its capacity of N / G columns.
Problem masked(Problem p, int64_t groups) {
  p.groups = groups;
  p.group_layout = GroupLayout::masked;
  return p;
}

// A float8 problem (e4m3 A and B, bf16 C and D, what gemm-tune --dtype e4m3 tunes) with its
// scaling, summed precisely (the default).
Problem float8(int64_t m, int64_t n, int64_t k, Scaling scaling = Scaling::tensor) {
  Problem p = make_problem(parse_data_types("e4m3*e4m3->bf16"), Op::T, Op::N, m, n, k);
  p.scaling = scaling;
  return p;
}

// The same float8 problem with fast accumulation: no promotion of its partial sums.
Problem fast(Problem p) {
  p.accumulation = Accumulation::fast;
  return p;
}

// The same problem with an epilogue ("bias,gelu"): its store adds a bias and activates.
Problem fused(Problem p, std::string_view epilogue) {
  p.epilogue = parse_epilogue(epilogue);
  return p;
}

// The same f32 problem computed otherwise: tf32 or 3xtf32 on tensor cores.
Problem computed(Problem p, Precision precision) {
  p.precision = precision;
  return p;
}

// The one GEMM of a problem's sizes: whose family and configs a grouped problem's records take
// here (the database does not judge whether a family computes groups).
Problem one_gemm(Problem p) {
  p.groups = 0;
  p.group_layout = GroupLayout::contiguous;
  return p;
}

CandidateRecord candidate(const Problem& p, const std::string& name, size_t index) {
  CandidateRecord c;
  c.kernel_name = name;
  c.template_version = version_for(one_gemm(p));
  c.config = config_for(one_gemm(p), index);
  return c;
}

CandidateRecord ok_candidate(const Problem& p, const std::string& name, double median_ms,
                             size_t index = 0) {
  CandidateRecord c = candidate(p, name, index);
  c.status = CandidateStatus::ok;
  c.registers = 128;
  c.spills = 0;
  c.smem_bytes = 16384;
  c.compile_ms = 210.5;
  c.median_ms = median_ms;
  c.min_ms = median_ms * 0.98;
  c.max_ms = median_ms * 1.05;
  c.runs = 20;
  c.tflops = p.flops() / (median_ms * 1e9);
  c.max_error = 3.5e-6;
  return c;
}

CandidateRecord failed_candidate(const Problem& p, const std::string& name, CandidateStatus status,
                                 const std::string& message) {
  CandidateRecord c = candidate(p, name, 2);
  c.status = status;
  c.message = message;
  return c;
}

class TuningDbTest : public ::testing::Test {
 protected:
  fs::path db_path() const { return dir_.path() / "tuning.db"; }

  // One problem with two ok candidates and a failure, the faster ok one marked best.
  void seed_problem(TuningDb& db, const DeviceKey& device, const Problem& p,
                    double fastest_ms = 1.0) {
    db.record(device, p, ok_candidate(p, "fast_" + p.shape(), fastest_ms, 0));
    db.record(device, p, ok_candidate(p, "slow_" + p.shape(), fastest_ms * 1.5, 1));
    db.record(device, p,
              failed_candidate(p, "broken_" + p.shape(), CandidateStatus::compile_error,
                               "ptxas error: too many resources"));
    db.set_best(device, p, "fast_" + p.shape(), version_for(one_gemm(p)), fastest_ms * 1.2, true);
  }

  // The export of `problems`, each tuned on an H100 by one kernel (`name(p)`) of another
  // template version: history, which an import checks against no family's space.
  std::string exported_history(const std::vector<Problem>& problems,
                               const std::function<std::string(const Problem&)>& name) {
    TuningDb db(db_path());
    for (const Problem& p : problems) {
      CandidateRecord old = ok_candidate(p, name(p), 2.0);
      old.template_version = "00000000deadbeef";
      db.record(h100(), p, old);
      db.set_best(h100(), p, old.kernel_name, old.template_version, 2.5, true);
    }
    return db.export_json({});
  }

  TempDir dir_;
};

// Importing `document` into `db` is refused as an invalid argument that says `says`.
void expect_import_refused(TuningDb& db, const Json& document, const std::string& says) {
  try {
    db.import_json(document.dump());
    ADD_FAILURE() << "imported " << document.dump();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

// Raw SQLite access, to build files that TuningDb would never write.
class RawDb {
 public:
  explicit RawDb(const fs::path& path) { sqlite3_open(path.c_str(), &db_); }
  ~RawDb() { sqlite3_close(db_); }
  void exec(const std::string& sql) {
    char* error = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
      const std::string message = error ? error : "?";
      sqlite3_free(error);
      throw std::runtime_error(message + " in: " + sql);
    }
  }
  std::string text(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr);
    std::string out;
    if (sqlite3_step(s) == SQLITE_ROW) {
      const auto* text = sqlite3_column_text(s, 0);
      out = text ? reinterpret_cast<const char*>(text) : "NULL";  // group_concat of no rows
    }
    sqlite3_finalize(s);
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
};

// The columns of the problems table's UNIQUE key, in order (the index SQLite keeps for it).
std::string key_columns(RawDb& raw) {
  return raw.text(
      "SELECT group_concat(name, ' ') FROM (SELECT name FROM pragma_index_info((SELECT name FROM "
      "sqlite_schema WHERE type = 'index' AND tbl_name = 'problems')) ORDER BY seqno)");
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST_F(TuningDbTest, RecordsCandidatesAndReadsBackEveryField) {
  TuningDb db(db_path());
  const Problem p = square(1024);
  const CandidateRecord fast = ok_candidate(p, "gemm_simt_fast", 0.5);
  db.record(h100(), p,
            failed_candidate(p, "gemm_simt_broken", CandidateStatus::fault,
                             "CUDA_ERROR_ILLEGAL_ADDRESS"));
  db.record(h100(), p, ok_candidate(p, "gemm_simt_slow", 0.9));
  db.record(h100(), p, fast);

  const auto found = db.candidates(h100(), p);
  ASSERT_EQ(found.size(), 3u);
  // ok ones by median time, then the failures.
  EXPECT_EQ(found[0].kernel_name, "gemm_simt_fast");
  EXPECT_EQ(found[1].kernel_name, "gemm_simt_slow");
  EXPECT_EQ(found[2].kernel_name, "gemm_simt_broken");
  const CandidateRecord& back = found[0];
  EXPECT_GT(back.id, 0);
  EXPECT_EQ(back.template_version, fast.template_version);
  EXPECT_EQ(back.config, fast.config);
  EXPECT_EQ(back.status, CandidateStatus::ok);
  EXPECT_EQ(back.registers, 128);
  EXPECT_EQ(back.spills, 0);
  EXPECT_EQ(back.smem_bytes, 16384);
  EXPECT_DOUBLE_EQ(back.compile_ms, 210.5);
  EXPECT_DOUBLE_EQ(back.median_ms, 0.5);
  EXPECT_DOUBLE_EQ(back.min_ms, fast.min_ms);
  EXPECT_DOUBLE_EQ(back.max_ms, fast.max_ms);
  EXPECT_EQ(back.runs, 20);
  EXPECT_DOUBLE_EQ(back.tflops, fast.tflops);
  EXPECT_DOUBLE_EQ(back.max_error, 3.5e-6);
  EXPECT_TRUE(
      std::regex_match(back.measured_at, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")))
      << back.measured_at;
  // Unknown values of a failure stay unknown.
  EXPECT_EQ(found[2].status, CandidateStatus::fault);
  EXPECT_EQ(found[2].message, "CUDA_ERROR_ILLEGAL_ADDRESS");
  EXPECT_EQ(found[2].registers, -1);
  EXPECT_EQ(found[2].median_ms, -1);

  db.set_best(h100(), p, "gemm_simt_fast", fast.template_version, 0.6, true);
  const auto best = db.best(h100(), p);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->device, h100());
  EXPECT_EQ(best->problem.describe(), p.describe());
  EXPECT_EQ(best->winner.kernel_name, "gemm_simt_fast");
  EXPECT_EQ(best->winner.config.family, "simt");
  EXPECT_DOUBLE_EQ(best->baseline_ms, 0.6);
  EXPECT_TRUE(best->complete);
  EXPECT_TRUE(best->current);
  EXPECT_FALSE(best->tuned_at.empty());
  // Another GPU, or another problem, has no best.
  EXPECT_FALSE(db.best(a100(), p));
  EXPECT_FALSE(db.best(h100(), square(2048)));
}

TEST_F(TuningDbTest, RecordingTheSameCandidateAgainReplacesIt) {
  TuningDb db(db_path());
  const Problem p = square(512);
  db.record(h100(), p, ok_candidate(p, "k", 2.0));
  db.record(h100(), p, ok_candidate(p, "k", 1.5));
  const auto found = db.candidates(h100(), p);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_DOUBLE_EQ(found[0].median_ms, 1.5);
}

TEST_F(TuningDbTest, RecordRejectsInvalidInput) {
  TuningDb db(db_path());
  const Problem p = square(512);
  Problem negative = p;
  negative.m = -1;
  CandidateRecord untimed = ok_candidate(p, "untimed", 1.0);
  untimed.median_ms = -1;
  DeviceKey nameless = h100();
  nameless.name.clear();
  for (const auto& attempt : std::vector<std::function<void()>>{
           [&] { db.record(h100(), negative, ok_candidate(p, "k", 1.0)); },
           [&] { db.record(h100(), p, untimed); },
           [&] { db.record(nameless, p, ok_candidate(p, "k", 1.0)); },
           [&] { db.record(h100(), square(512, DType::f16), ok_candidate(p, "k", 1.0)); }}) {
    try {
      attempt();
      ADD_FAILURE() << "expected Error(invalid_argument)";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
    }
  }
  EXPECT_EQ(db.stats().candidates, 0);
}

TEST_F(TuningDbTest, OnlyAVerifiedRecordedCandidateCanBeTheBest) {
  TuningDb db(db_path());
  const Problem p = square(256);
  db.record(h100(), p,
            failed_candidate(p, "wrong", CandidateStatus::wrong_result, "max error 0.5"));
  for (const char* name : {"wrong", "never_recorded"}) {
    try {
      db.set_best(h100(), p, name, simt_version(), 1.0, true);
      ADD_FAILURE() << name << " was accepted as the best";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
  EXPECT_FALSE(db.best(h100(), p));
}

TEST_F(TuningDbTest, BestIgnoresStaleTemplateVersionsAndUnknownFamilies) {
  TuningDb db(db_path());
  const Problem p = square(2048);
  CandidateRecord stale = ok_candidate(p, "stale_fastest", 0.1);
  stale.template_version = "0123456789abcdef";
  CandidateRecord foreign = ok_candidate(p, "foreign_fast", 0.2);
  foreign.config.family = "family_from_the_future";
  db.record(h100(), p, stale);
  db.record(h100(), p, foreign);
  db.set_best(h100(), p, "stale_fastest", stale.template_version, 1.0, true);
  db.set_best(h100(), p, "foreign_fast", foreign.template_version, 1.0, true);

  EXPECT_FALSE(db.best(h100(), p)) << "a result of other templates must never be used";
  EXPECT_TRUE(db.candidates(h100(), p).empty());
  EXPECT_EQ(db.candidates(h100(), p, /*all_versions=*/true).size(), 2u);
  const auto listed = db.list({});
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_FALSE(listed[0].current);
  EXPECT_FALSE(listed[1].current);
  EXPECT_EQ(db.stats().best_stale, 2);

  db.record(h100(), p, ok_candidate(p, "current_slower", 0.9));
  db.set_best(h100(), p, "current_slower", simt_version(), 1.0, false);
  const auto best = db.best(h100(), p);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->winner.kernel_name, "current_slower");
  EXPECT_TRUE(best->current);
}

TEST_F(TuningDbTest, BestsLikeReturnsTheCurrentBestOfEveryShapeOfTheLayout) {
  TuningDb db(db_path());
  for (int64_t size : {256, 1024, 4096}) seed_problem(db, h100(), square(size));
  seed_problem(db, h100(), square(1024, DType::f32, Op::T, Op::N));  // other layout
  seed_problem(db, h100(), square(1024, DType::f16));                // other dtype
  seed_problem(db, a100(), square(512));                             // other GPU
  const Problem only_failures = square(8192);
  db.record(h100(), only_failures,
            failed_candidate(only_failures, "x", CandidateStatus::timeout, "watchdog"));

  const auto like = db.bests_like(h100(), make_problem(DType::f32, Op::N, Op::N, 1024, 1024, 1024));
  ASSERT_EQ(like.size(), 3u);
  std::vector<int64_t> sizes;
  for (const auto& b : like) {
    EXPECT_EQ(b.device, h100());
    EXPECT_EQ(b.problem.layout(), "nn");
    EXPECT_EQ(b.winner.kernel_name, "fast_" + b.problem.shape());
    sizes.push_back(b.problem.m);
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{256, 1024, 4096}));
}

// Reading C changes which kernel is fastest: a problem with beta != 0 is tuned and stored apart
// from the same problem with beta = 0, and neither is ever answered with the other's results.
TEST_F(TuningDbTest, ProblemsThatDifferOnlyInReadingCAreKeptApart) {
  TuningDb db(db_path());
  const Problem p = square(1024), q = reading_c(p);
  db.record(h100(), p, ok_candidate(p, "beta0_fast", 1.0, 0));
  db.set_best(h100(), p, "beta0_fast", version_for(p), 1.1, true);
  EXPECT_FALSE(db.best(h100(), q)) << "q was never tuned";
  EXPECT_TRUE(db.candidates(h100(), q).empty());
  EXPECT_TRUE(db.bests_for(h100(), q).empty()) << "nor under other versions";

  db.record(h100(), q, ok_candidate(q, "beta1_fast", 1.4, 1));
  db.record(h100(), q, ok_candidate(q, "beta1_slow", 2.0, 2));
  EXPECT_EQ(db.candidates(h100(), p).size(), 1u);
  EXPECT_EQ(db.candidates(h100(), q).size(), 2u);
  // A winner of p's is not a candidate of q's.
  EXPECT_THROW(db.set_best(h100(), q, "beta0_fast", version_for(q), 1.1, true), Error);
  db.set_best(h100(), q, "beta1_fast", version_for(q), 1.5, true);

  const auto best_p = db.best(h100(), p), best_q = db.best(h100(), q);
  ASSERT_TRUE(best_p && best_q);
  EXPECT_EQ(best_p->winner.kernel_name, "beta0_fast");
  EXPECT_FALSE(best_p->problem.reads_c);
  EXPECT_EQ(best_q->winner.kernel_name, "beta1_fast");
  EXPECT_TRUE(best_q->problem.reads_c);
  EXPECT_EQ(best_q->problem.describe(), q.describe());
  const DbStats s = db.stats();
  EXPECT_EQ(s.problems, 2);
  EXPECT_EQ(s.best, 2);
  EXPECT_EQ(db.problems({}).size(), 2u);

  // The nearest-shape fallback sees both classes and can tell them apart.
  const auto like = db.bests_like(h100(), make_problem(DType::f32, Op::N, Op::N, 1024, 1024, 1024));
  ASSERT_EQ(like.size(), 2u);
  std::map<bool, std::string> winner_by_reads_c;
  for (const auto& b : like) winner_by_reads_c[b.problem.reads_c] = b.winner.kernel_name;
  EXPECT_EQ(winner_by_reads_c,
            (std::map<bool, std::string>{{false, "beta0_fast"}, {true, "beta1_fast"}}));
}

// A grouped problem (G experts that split N) runs other kernels than one GEMM of the same sizes:
// each is its own row, with its own candidates and winner, and is found by its groups.
TEST_F(TuningDbTest, AGroupedProblemAndOneGemmOfTheSameSizesAreDifferentRows) {
  TuningDb db(db_path());
  const Problem dense = make_problem(DType::bf16, Op::T, Op::N, 1536, 32768, 2048);
  const Problem moe = grouped(dense, 128);
  db.record(h100(), dense, ok_candidate(dense, "dense_fast", 1.0, 0));
  db.set_best(h100(), dense, "dense_fast", version_for(dense), 1.1, true);
  EXPECT_FALSE(db.best(h100(), moe)) << "the grouped problem was never tuned";
  EXPECT_TRUE(db.candidates(h100(), moe).empty());
  EXPECT_TRUE(db.bests_for(h100(), moe).empty());

  db.record(h100(), moe, ok_candidate(moe, "moe_fast", 1.4, 1));
  db.record(h100(), moe, ok_candidate(moe, "moe_slow", 2.0, 2));
  EXPECT_THROW(db.set_best(h100(), moe, "dense_fast", version_for(dense), 1.1, true), Error);
  db.set_best(h100(), moe, "moe_fast", version_for(dense), 1.5, true);

  EXPECT_EQ(RawDb(db_path()).text("SELECT group_concat(groups, ' ') FROM "
                                  "(SELECT groups FROM problems ORDER BY id)"),
            "0 128");
  EXPECT_EQ(db.candidates(h100(), dense).size(), 1u);
  EXPECT_EQ(db.candidates(h100(), moe).size(), 2u);
  const auto best_dense = db.best(h100(), dense), best_moe = db.best(h100(), moe);
  ASSERT_TRUE(best_dense && best_moe);
  EXPECT_EQ(best_dense->winner.kernel_name, "dense_fast");
  EXPECT_EQ(best_dense->problem.groups, 0);
  EXPECT_EQ(best_moe->winner.kernel_name, "moe_fast");
  EXPECT_EQ(best_moe->problem, moe);
  EXPECT_EQ(best_moe->problem.describe(), moe.describe());
  EXPECT_FALSE(db.best(h100(), grouped(dense, 64))) << "other groups, another problem";
  EXPECT_EQ(db.stats().problems, 2);

  EXPECT_EQ(db.list({}).size(), 2u);
  ASSERT_EQ(db.list({.groups = 128}).size(), 1u);
  EXPECT_EQ(db.list({.groups = 128})[0].problem, moe);
  ASSERT_EQ(db.list({.groups = 0}).size(), 1u);
  EXPECT_EQ(db.list({.groups = 0})[0].problem, dense);
  EXPECT_TRUE(db.list({.groups = 64}).empty());
  EXPECT_EQ(db.remove({.groups = 128}), 1);
  EXPECT_TRUE(db.best(h100(), dense));
  EXPECT_FALSE(db.best(h100(), moe));
}

// A masked grouped problem (each group a count of a fixed capacity) and a contiguous one of the
// same sizes and groups run other kernels: each is its own row, found by its group layout. The
// filter's layout is of grouped problems only: one GEMM, contiguous in the table, never matches.
TEST_F(TuningDbTest, AMaskedAndAContiguousProblemOfTheSameGroupsAreDifferentRows) {
  TuningDb db(db_path());
  const Problem dense = make_problem(DType::bf16, Op::T, Op::N, 1536, 32768, 2048);
  const Problem contiguous = grouped(dense, 128), decode = masked(dense, 128);
  db.record(h100(), contiguous, ok_candidate(contiguous, "contiguous_fast", 1.0, 0));
  db.set_best(h100(), contiguous, "contiguous_fast", version_for(dense), 1.1, true);
  EXPECT_FALSE(db.best(h100(), decode)) << "the masked problem was never tuned";
  EXPECT_TRUE(db.candidates(h100(), decode).empty());
  EXPECT_TRUE(db.bests_for(h100(), decode).empty());

  db.record(h100(), decode, ok_candidate(decode, "masked_fast", 1.4, 1));
  EXPECT_THROW(db.set_best(h100(), decode, "contiguous_fast", version_for(dense), 1.1, true),
               Error);
  db.set_best(h100(), decode, "masked_fast", version_for(dense), 1.5, true);
  EXPECT_EQ(RawDb(db_path()).text("SELECT group_concat(groups || ':' || group_layout, ' ') FROM "
                                  "(SELECT * FROM problems ORDER BY id)"),
            "128:contiguous 128:masked");
  const auto best_contiguous = db.best(h100(), contiguous), best_masked = db.best(h100(), decode);
  ASSERT_TRUE(best_contiguous && best_masked);
  EXPECT_EQ(best_contiguous->winner.kernel_name, "contiguous_fast");
  EXPECT_EQ(best_contiguous->problem, contiguous);
  EXPECT_EQ(best_masked->winner.kernel_name, "masked_fast");
  EXPECT_EQ(best_masked->problem, decode);
  EXPECT_EQ(best_masked->problem.describe(), decode.describe());
  EXPECT_EQ(db.candidates(h100(), decode).size(), 1u);
  EXPECT_EQ(db.stats().problems, 2);

  seed_problem(db, h100(), dense);
  EXPECT_EQ(db.list({}).size(), 3u);
  const auto only_masked = db.list({.group_layout = GroupLayout::masked});
  ASSERT_EQ(only_masked.size(), 1u);
  EXPECT_EQ(only_masked[0].problem, decode);
  const auto only_contiguous = db.list({.group_layout = GroupLayout::contiguous});
  ASSERT_EQ(only_contiguous.size(), 1u) << "grouped problems only, not one GEMM";
  EXPECT_EQ(only_contiguous[0].problem, contiguous);
  EXPECT_EQ(db.list({.groups = 128, .group_layout = GroupLayout::masked}).size(), 1u);
  EXPECT_TRUE(db.list({.groups = 0, .group_layout = GroupLayout::contiguous}).empty());
  EXPECT_EQ(db.remove({.group_layout = GroupLayout::masked}), 1);
  EXPECT_TRUE(db.best(h100(), contiguous));
  EXPECT_TRUE(db.best(h100(), dense));
  EXPECT_FALSE(db.best(h100(), decode));
}

// A float8 product summed with fast accumulation (no promotion of its partial sums) is another
// kernel with another error than the precise one of the same shape and scaling: each is its own
// row, with its own candidates and winner, found by its accumulation. The filter's accumulation
// is of tensor or row scaled problems only: the others, precise in the table, never match it.
TEST_F(TuningDbTest, AFastAndAPreciseFloat8ProblemOfTheSameShapeAreDifferentRows) {
  TuningDb db(db_path());
  const Problem precise = float8(2112, 64, 7168), quick = fast(precise);
  db.record(h100(), precise, ok_candidate(precise, "precise_fast", 1.0, 0));
  db.set_best(h100(), precise, "precise_fast", version_for(precise), 1.1, true);
  EXPECT_FALSE(db.best(h100(), quick)) << "the fast problem was never tuned";
  EXPECT_TRUE(db.candidates(h100(), quick).empty());
  EXPECT_TRUE(db.bests_for(h100(), quick).empty());

  db.record(h100(), quick, ok_candidate(quick, "fast_fast", 0.8, 1));
  db.record(h100(), quick, ok_candidate(quick, "fast_slow", 2.0, 2));
  EXPECT_THROW(db.set_best(h100(), quick, "precise_fast", version_for(precise), 1.1, true), Error);
  db.set_best(h100(), quick, "fast_fast", version_for(precise), 0.9, true);
  EXPECT_EQ(RawDb(db_path()).text("SELECT group_concat(scaling || ':' || accumulation, ' ') FROM "
                                  "(SELECT * FROM problems ORDER BY id)"),
            "tensor:precise tensor:fast");
  EXPECT_EQ(db.candidates(h100(), precise).size(), 1u);
  EXPECT_EQ(db.candidates(h100(), quick).size(), 2u);
  const auto best_precise = db.best(h100(), precise), best_fast = db.best(h100(), quick);
  ASSERT_TRUE(best_precise && best_fast);
  EXPECT_EQ(best_precise->winner.kernel_name, "precise_fast");
  EXPECT_EQ(best_precise->problem, precise);
  EXPECT_EQ(best_fast->winner.kernel_name, "fast_fast");
  EXPECT_EQ(best_fast->problem, quick);
  EXPECT_EQ(best_fast->problem.describe(), quick.describe());
  ASSERT_EQ(db.bests_for(h100(), quick).size(), 1u);
  EXPECT_EQ(db.bests_for(h100(), quick)[0].best.winner.kernel_name, "fast_fast");
  EXPECT_EQ(db.stats().problems, 2);

  // Row scaling has both too; a bf16 problem of the same shape is precise and never matches.
  const Problem row = fast(float8(2112, 64, 7168, Scaling::row));
  seed_problem(db, h100(), row);
  const Problem dense = make_problem(DType::bf16, Op::T, Op::N, 2112, 64, 7168);
  seed_problem(db, h100(), dense);
  EXPECT_EQ(db.list({}).size(), 4u);
  const auto only_fast = db.list({.accumulation = Accumulation::fast});
  ASSERT_EQ(only_fast.size(), 2u);
  EXPECT_EQ(only_fast[0].problem, row) << "'row' sorts before 'tensor'";
  EXPECT_EQ(only_fast[1].problem, quick);
  const auto only_precise = db.list({.accumulation = Accumulation::precise});
  ASSERT_EQ(only_precise.size(), 1u) << "scaled float8 only, not bf16";
  EXPECT_EQ(only_precise[0].problem, precise);
  EXPECT_EQ(db.remove({.accumulation = Accumulation::fast}), 2);
  EXPECT_TRUE(db.best(h100(), precise));
  EXPECT_TRUE(db.best(h100(), dense));
  EXPECT_FALSE(db.best(h100(), quick));
  EXPECT_FALSE(db.best(h100(), row));

  // A fast row of block scaling or of an unscaled problem never gets into the table, whoever
  // writes it; one of tensor scaling does.
  RawDb raw(db_path());
  EXPECT_THROW(raw.exec("UPDATE problems SET accumulation = 'fast' WHERE scaling = 'none'"),
               std::runtime_error);
  EXPECT_THROW(
      raw.exec("UPDATE problems SET scaling = 'block', accumulation = 'fast' WHERE id = 1"),
      std::runtime_error);
  EXPECT_NO_THROW(raw.exec("UPDATE problems SET accumulation = 'fast' WHERE id = 1"));
}

// A problem whose store adds a bias and activates (an epilogue) runs other kernels than the
// plain one of the same shape, and each epilogue others again: each is its own row, with its own
// candidates and winner, found by its epilogue. A candidate whose config applies another
// epilogue than its problem's is refused: it names another kernel.
TEST_F(TuningDbTest, AFusedAndAPlainProblemOfTheSameShapeAreDifferentRows) {
  TuningDb db(db_path());
  const Problem plain = square(1024), gelu = fused(plain, "bias,gelu");
  seed_problem(db, h100(), plain);
  EXPECT_FALSE(db.best(h100(), gelu)) << "the fused problem was never tuned";
  EXPECT_TRUE(db.candidates(h100(), gelu).empty());
  EXPECT_TRUE(db.bests_for(h100(), gelu).empty());

  db.record(h100(), gelu, ok_candidate(gelu, "gelu_fast", 1.4, 0));
  db.record(h100(), gelu, ok_candidate(gelu, "gelu_slow", 2.0, 1));
  EXPECT_THROW(db.set_best(h100(), gelu, "fast_" + plain.shape(), version_for(plain), 1.2, true),
               Error);
  db.set_best(h100(), gelu, "gelu_fast", version_for(gelu), 1.5, true);
  EXPECT_EQ(RawDb(db_path()).text("SELECT group_concat(epilogue, ' ') FROM "
                                  "(SELECT * FROM problems ORDER BY id)"),
            "none bias,gelu");
  EXPECT_EQ(db.candidates(h100(), plain).size(), 3u);
  EXPECT_EQ(db.candidates(h100(), gelu).size(), 2u);
  const auto best_plain = db.best(h100(), plain), best_gelu = db.best(h100(), gelu);
  ASSERT_TRUE(best_plain && best_gelu);
  EXPECT_EQ(best_plain->winner.kernel_name, "fast_" + plain.shape());
  EXPECT_EQ(best_gelu->winner.kernel_name, "gelu_fast");
  EXPECT_EQ(best_gelu->problem, gelu);
  EXPECT_EQ(best_gelu->problem.describe(), gelu.describe());
  EXPECT_EQ(best_gelu->winner.config.epilogue, gelu.epilogue);
  ASSERT_EQ(db.bests_for(h100(), gelu).size(), 1u);
  EXPECT_EQ(db.bests_for(h100(), gelu)[0].best.winner.kernel_name, "gelu_fast");

  // Another activation, or the bias along N, is another problem again; the filter takes the
  // epilogue in any spelling, and none is the plain problems.
  const Problem silu = fused(plain, "silu"), bias_n = fused(plain, "bias_n");
  seed_problem(db, h100(), silu);
  seed_problem(db, h100(), bias_n);
  EXPECT_EQ(db.list({}).size(), 4u);
  EXPECT_EQ(db.stats().problems, 4);
  const auto only_gelu = db.list({.epilogue = parse_epilogue("GELU,bias")});
  ASSERT_EQ(only_gelu.size(), 1u);
  EXPECT_EQ(only_gelu[0].problem, gelu);
  const auto only_plain = db.list({.epilogue = Epilogue{}});
  ASSERT_EQ(only_plain.size(), 1u);
  EXPECT_EQ(only_plain[0].problem, plain);
  EXPECT_EQ(db.problems({.m = 1024, .epilogue = parse_epilogue("bias_n")}).size(), 1u);
  EXPECT_EQ(db.remove({.epilogue = parse_epilogue("silu")}), 1);
  EXPECT_FALSE(db.best(h100(), silu));
  EXPECT_TRUE(db.best(h100(), plain));
  EXPECT_TRUE(db.best(h100(), bias_n));

  try {
    db.record(h100(), gelu, ok_candidate(plain, "plain_under_gelu", 1.0));
    ADD_FAILURE() << "recorded a plain config for a fused problem";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("config of plain_under_gelu is for epilogue none, the "
                                         "problem has epilogue bias,gelu"),
              std::string::npos)
        << e.what();
  }
}

// An f32 problem computed with tf32 or 3xtf32 runs other kernels with another error than the
// exact one of the same shape: each is its own row, with its own candidates and winner, found by
// its precision. Every problem has one in the table (exact: bf16 too), so the filter matches
// any.
TEST_F(TuningDbTest, AnExactAndATf32ProblemOfTheSameShapeAreDifferentRows) {
  TuningDb db(db_path());
  const Problem exact = square(1024), tf32 = computed(exact, Precision::tf32),
                tf32x3 = computed(exact, Precision::tf32x3);
  seed_problem(db, h100(), exact);
  EXPECT_FALSE(db.best(h100(), tf32)) << "the tf32 problem was never tuned";
  EXPECT_TRUE(db.candidates(h100(), tf32).empty());
  EXPECT_TRUE(db.bests_for(h100(), tf32).empty());

  seed_problem(db, h100(), tf32, 0.4);
  seed_problem(db, h100(), tf32x3, 0.7);
  EXPECT_EQ(RawDb(db_path()).text("SELECT group_concat(precision, ' ') FROM "
                                  "(SELECT * FROM problems ORDER BY id)"),
            "exact tf32 3xtf32");
  for (const Problem& p : {exact, tf32, tf32x3}) {
    const auto best = db.best(h100(), p);
    ASSERT_TRUE(best) << p.describe();
    EXPECT_EQ(best->problem, p);
    EXPECT_EQ(best->problem.describe(), p.describe());
    EXPECT_EQ(db.candidates(h100(), p).size(), 3u);
    ASSERT_EQ(db.bests_for(h100(), p).size(), 1u);
  }
  EXPECT_DOUBLE_EQ(db.best(h100(), tf32)->winner.median_ms, 0.4);

  const Problem dense = square(1024, DType::bf16);
  seed_problem(db, h100(), dense);
  const auto only_tf32 = db.list({.precision = Precision::tf32});
  ASSERT_EQ(only_tf32.size(), 1u);
  EXPECT_EQ(only_tf32[0].problem, tf32);
  EXPECT_EQ(db.list({.precision = Precision::exact}).size(), 2u) << "the f32 and the bf16 one";
  EXPECT_EQ(db.problems({.m = 1024, .precision = Precision::tf32x3}).size(), 1u);
  EXPECT_EQ(db.remove({.precision = Precision::tf32x3}), 1);
  EXPECT_TRUE(db.best(h100(), tf32));
  EXPECT_TRUE(db.best(h100(), exact));
  EXPECT_FALSE(db.best(h100(), tf32x3));

  // A tf32 row of a problem that is not f32 never gets into the table, whoever writes it.
  RawDb raw(db_path());
  EXPECT_THROW(raw.exec("UPDATE problems SET precision = 'tf32' WHERE type_a = 'bf16'"),
               std::runtime_error);
  EXPECT_THROW(raw.exec("UPDATE problems SET type_d = 'bf16' WHERE precision = 'tf32'"),
               std::runtime_error);
}

TEST_F(TuningDbTest, ListProblemsStatsAndRemoveFollowTheFilters) {
  TuningDb db(db_path());
  seed_problem(db, h100(), square(1024));
  seed_problem(db, h100(), square(2048));
  seed_problem(db, h100(), square(1024, DType::f16, Op::T, Op::N));
  seed_problem(db, a100(), square(1024));
  const Problem untuned = square(64);
  db.record(h100(), untuned, failed_candidate(untuned, "x", CandidateStatus::out_of_resources, ""));

  EXPECT_EQ(db.list({}).size(), 4u);
  EXPECT_EQ(db.list({.device = "h100"}).size(), 3u);  // any case
  EXPECT_EQ(db.list({.types = DataTypes::uniform(DType::f16)}).size(), 1u);
  EXPECT_EQ(db.list({.layout = "TN"}).size(), 1u);
  EXPECT_EQ(db.list({.m = 1024}).size(), 3u);
  EXPECT_EQ(db.list({.device = "A100", .m = 1024, .n = 1024, .k = 1024}).size(), 1u);
  EXPECT_EQ(db.list({.lda = 4096}).size(), 0u);
  EXPECT_EQ(db.problems({}).size(), 5u);  // the untuned one too
  EXPECT_EQ(db.problems({.m = 64}).front().second.describe(), untuned.describe());

  DbStats s = db.stats();
  EXPECT_EQ(s.devices, 2);
  EXPECT_EQ(s.problems, 4);  // a100 and h100 share f32 nn 1024
  EXPECT_EQ(s.candidates, 13);
  EXPECT_EQ(s.best, 4);
  EXPECT_EQ(s.best_stale, 0);
  using Counts = std::vector<std::pair<std::string, int64_t>>;
  EXPECT_EQ(s.by_status, (Counts{{"ok", 8}, {"compile_error", 4}, {"out_of_resources", 1}}));
  EXPECT_EQ(s.by_family, (Counts{{"simt", 10}, {"wgmma_sm90", 3}}));
  EXPECT_EQ(s.schema_version, TuningDb::kSchemaVersion);
  EXPECT_GT(s.file_bytes, 0);

  EXPECT_EQ(db.remove({.device = "a100"}), 1);
  s = db.stats();
  EXPECT_EQ(s.devices, 1);   // the A100 had nothing else
  EXPECT_EQ(s.problems, 4);  // f32 nn 1024 is still tuned on the H100
  EXPECT_EQ(db.remove({.m = 2048}), 1);
  EXPECT_EQ(db.stats().problems, 3);
  EXPECT_EQ(db.list({}).size(), 2u);
  EXPECT_TRUE(db.best(h100(), square(1024)));
  EXPECT_EQ(db.remove({}), 3);
  s = db.stats();
  EXPECT_EQ(s.devices + s.problems + s.candidates + s.best, 0);
}

// The SQL of migrations 1 to `version` of cache/schema.sql: a file as that release left it.
std::string schema_up_to(int version) {
  std::ifstream schema_file(GEMMTUNE_SOURCE_DIR "/cache/schema.sql");
  std::stringstream schema;
  schema << schema_file.rdbuf();
  const std::string text = schema.str();
  const size_t next = text.find(fmt::format("\n-- migration {}\n", version + 1));
  EXPECT_NE(next, std::string::npos) << "schema.sql has no migration " << version + 1;
  return text.substr(0, next);
}

// Creates the file at `version` of the schema (raw connection: foreign keys off, as a file
// may have been written by anything).
void create_old_file(RawDb& raw, int version) {
  raw.exec(
      fmt::format("BEGIN; {}; PRAGMA user_version = {}; COMMIT;", schema_up_to(version), version));
}

// Into a file of an old version, beside its problem 7: device 5, and candidate 3 of problem 7 as
// its winner, with `config` as the config JSON that version wrote.
void insert_old_winner(RawDb& raw, const CandidateRecord& c, const std::string& config) {
  raw.exec(fmt::format(
      "INSERT INTO devices VALUES (5, 'NVIDIA H100 80GB HBM3', 90, 132, 13000, '13.0');"
      "INSERT INTO candidates (id, device_id, problem_id, template_version, kernel_name, family, "
      "config, status, median_ms, min_ms, runs, measured_at) VALUES "
      "(3, 5, 7, '{0}', '{1}', '{2}', '{3}', 'ok', 0.75, 0.75, 10, '2025-01-02T03:04:05.000Z');"
      "INSERT INTO best VALUES (5, 7, '{0}', 3, 0.9, 1, '2025-01-02T03:05:00.000Z');",
      c.template_version, c.kernel_name, c.config.family, config));
}

// After a migration that rebuilt problems: candidate 3 still points at problem 7, no row points
// at nothing, and the tables are the schema's five.
void expect_old_winner_kept(const fs::path& path) {
  RawDb raw(path);
  EXPECT_EQ(raw.text("SELECT group_concat(id || ':' || problem_id, ' ') FROM "
                     "(SELECT id, problem_id FROM candidates ORDER BY id)"),
            "3:7");
  EXPECT_EQ(raw.text("SELECT count(*) FROM pragma_foreign_key_check"), "0");
  EXPECT_EQ(raw.text("SELECT group_concat(name, ' ') FROM (SELECT name FROM sqlite_schema "
                     "WHERE type = 'table' ORDER BY name)"),
            "best candidates devices problems tune_queue");
}

TEST_F(TuningDbTest, MigratesAVersion1FileKeepingItsRows) {
  // Build the file as release 1 of the schema left it: migration 1 only, with data.
  const Problem p = square(1024);
  const CandidateRecord c = ok_candidate(p, "gemm_simt_v1", 0.75);
  {
    RawDb raw(db_path());
    create_old_file(raw, 1);
    raw.exec(
        "INSERT INTO devices VALUES (1, 'NVIDIA H100 80GB HBM3', 90, 132, 13000, '13.0');"
        "INSERT INTO problems VALUES (7, 'f32', 'nn', 1024, 1024, 1024, 1024, 1024, 1024, 16);");
    raw.exec(fmt::format(
        "INSERT INTO candidates (id, device_id, problem_id, template_version, kernel_name, config, "
        "status, registers, median_ms, runs, measured_at) VALUES (3, 1, 7, '{}', "
        "'gemm_simt_v1', '{}', 'ok', 96, 0.75, 10, '2025-01-02T03:04:05.000Z');"
        "INSERT INTO best VALUES (1, 7, '{}', 3, 0.9, 1, '2025-01-02T03:05:00.000Z');",
        c.template_version, c.config.to_json(), c.template_version));
    ASSERT_EQ(raw.text("PRAGMA user_version"), "1");
  }

  TuningDb db(db_path());
  EXPECT_EQ(db.schema_version(), TuningDb::kSchemaVersion);
  const auto found = db.candidates(h100(), p);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].kernel_name, "gemm_simt_v1");
  EXPECT_EQ(found[0].config, c.config);
  EXPECT_EQ(found[0].registers, 96);
  EXPECT_EQ(found[0].spills, -1);
  EXPECT_EQ(found[0].measured_at, "2025-01-02T03:04:05.000Z");
  const auto best = db.best(h100(), p);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->winner.kernel_name, "gemm_simt_v1");
  EXPECT_DOUBLE_EQ(best->baseline_ms, 0.9);
  // Migration 2 filled the family column in from the config.
  EXPECT_EQ(db.stats().by_family, (std::vector<std::pair<std::string, int64_t>>{{"simt", 1}}));
  // And the file takes new rows in the new schema.
  db.record(h100(), p, ok_candidate(p, "gemm_simt_v2", 0.7));
  EXPECT_EQ(db.candidates(h100(), p).size(), 2u);
}

// A file of release 2 (before problems.reads_c): one device, two problems, a candidate of each,
// a best row of each. Ids are not 1, 2, ... on purpose: the migration must keep them.
void create_version_2_file(const fs::path& path, const Problem& p, const Problem& q) {
  RawDb raw(path);
  create_old_file(raw, 2);
  const CandidateRecord c = ok_candidate(p, "gemm_p", 0.75);
  const CandidateRecord d = ok_candidate(q, "gemm_q", 1.25);
  raw.exec(
      fmt::format("INSERT INTO devices VALUES (5, 'NVIDIA H100 80GB HBM3', 90, 132, 13000, '13.0');"
                  "INSERT INTO problems VALUES (7, 'f32', 'nn', {0}, {0}, {0}, {0}, {0}, {0}, 16),"
                  " (9, 'f32', 'nn', {1}, {1}, {1}, {1}, {1}, {1}, 16);",
                  p.m, q.m));
  raw.exec(fmt::format(
      "INSERT INTO candidates (id, device_id, problem_id, template_version, kernel_name, family, "
      "config, status, median_ms, min_ms, runs, measured_at) VALUES "
      "(3, 5, 7, '{0}', 'gemm_p', 'simt', '{1}', 'ok', 0.75, 0.75, 10, '2025-01-02T03:04:05.000Z'),"
      "(4, 5, 9, '{0}', 'gemm_q', 'simt', '{2}', 'ok', 1.25, 1.25, 10, '2025-01-02T03:04:06.000Z');"
      "INSERT INTO best VALUES (5, 7, '{0}', 3, 0.9, 1, '2025-01-02T03:05:00.000Z'),"
      " (5, 9, '{0}', 4, 1.5, 1, '2025-01-02T03:05:01.000Z');",
      c.template_version, c.config.to_json(), d.config.to_json()));
}

TEST_F(TuningDbTest, MigratesAVersion2FileToReadsCKeepingEveryRowAndItsId) {
  const Problem p = square(1024), q = square(2048);
  create_version_2_file(db_path(), p, q);

  TuningDb db(db_path());
  EXPECT_EQ(db.schema_version(), TuningDb::kSchemaVersion);
  {
    RawDb raw(db_path());
    EXPECT_EQ(raw.text("SELECT group_concat(id || ':' || reads_c, ' ') FROM "
                       "(SELECT id, reads_c FROM problems ORDER BY id)"),
              "7:0 9:0");
    EXPECT_EQ(raw.text("SELECT group_concat(id || ':' || problem_id, ' ') FROM "
                       "(SELECT id, problem_id FROM candidates ORDER BY id)"),
              "3:7 4:9");
    EXPECT_EQ(raw.text("SELECT group_concat(problem_id || ':' || candidate_id, ' ') FROM "
                       "(SELECT problem_id, candidate_id FROM best ORDER BY problem_id)"),
              "7:3 9:4");
    EXPECT_EQ(raw.text("SELECT count(*) FROM pragma_foreign_key_check"), "0");
    // The old problems table is gone, and its rebuild has no leftover name.
    EXPECT_EQ(raw.text("SELECT group_concat(name, ' ') FROM (SELECT name FROM sqlite_schema "
                       "WHERE type = 'table' ORDER BY name)"),
              "best candidates devices problems tune_queue");
  }
  struct Expected {
    Problem problem;
    std::string winner;
    int64_t id;
  };
  for (const Expected& e : {Expected{p, "gemm_p", 3}, Expected{q, "gemm_q", 4}}) {
    const auto best = db.best(h100(), e.problem);
    ASSERT_TRUE(best) << e.problem.describe();
    EXPECT_EQ(best->winner.kernel_name, e.winner);
    EXPECT_EQ(best->winner.id, e.id);
    EXPECT_FALSE(best->problem.reads_c);
    EXPECT_FALSE(db.best(h100(), reading_c(e.problem))) << "old rows are of problems with beta = 0";
  }

  // Foreign keys are on again in this connection: deleting candidates takes their best row along.
  EXPECT_EQ(db.remove({.m = q.m}), 1);
  const DbStats s = db.stats();
  EXPECT_EQ(s.problems, 1);
  EXPECT_EQ(s.candidates, 1);
  EXPECT_EQ(s.best, 1);
  // And candidates still refer to the new problems table: deleting a problem cascades.
  RawDb raw(db_path());
  raw.exec("PRAGMA foreign_keys = ON; DELETE FROM problems WHERE id = 7");
  EXPECT_EQ(raw.text("SELECT count(*) FROM candidates"), "0");
  EXPECT_EQ(raw.text("SELECT count(*) FROM best"), "0");
}

// Gemmtune 0.1's problems had one type of every operand: a row of bf16 is, after migration 4,
// bf16 A, B, C and D with f32 accumulation, unscaled; its old config JSON still reads.
TEST_F(TuningDbTest, MigratesAVersion3FileToTypesPerOperandKeepingTheirMeaning) {
  const Problem p = square(1024, DType::bf16), q = square(2048);
  {
    RawDb raw(db_path());
    create_old_file(raw, 3);
    raw.exec(fmt::format(
        "INSERT INTO problems VALUES (7, 'bf16', 'nn', {0}, {0}, {0}, {0}, {0}, {0}, 16, 0),"
        " (9, 'f32', 'nn', {1}, {1}, {1}, {1}, {1}, {1}, 16, 1);",
        p.m, q.m));
    const CandidateRecord c = ok_candidate(p, "gemm_p", 0.75);
    // The config as gemmtune 0.1 wrote it: one "dtype".
    nlohmann::json old_config = nlohmann::json::parse(c.config.to_json());
    old_config.erase("types");
    old_config.erase("scaling");
    old_config["dtype"] = "bf16";
    insert_old_winner(raw, c, old_config.dump());
  }
  TuningDb db(db_path());
  EXPECT_EQ(db.schema_version(), TuningDb::kSchemaVersion);
  {
    RawDb raw(db_path());
    EXPECT_EQ(raw.text("SELECT group_concat(id || ':' || type_a || type_b || type_c || type_d || "
                       "type_acc || ':' || scaling || ':' || reads_c, ' ') FROM "
                       "(SELECT * FROM problems ORDER BY id)"),
              "7:bf16bf16bf16bf16f32:none:0 9:f32f32f32f32f32:none:1");
    EXPECT_EQ(raw.text("SELECT count(*) FROM pragma_foreign_key_check"), "0");
  }
  const auto best = db.best(h100(), p);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->winner.id, 3);
  EXPECT_EQ(best->problem.types, DataTypes::uniform(DType::bf16));
  EXPECT_EQ(best->winner.config.types, DataTypes::uniform(DType::bf16));
  EXPECT_EQ(best->problem.scaling, Scaling::none);
  ASSERT_EQ(db.problems({}).size(), 1u) << "problem 9 has no candidates";
  EXPECT_EQ(db.list({.types = DataTypes::uniform(DType::bf16)}).size(), 1u);
}

// Before migration 5 every problem was one GEMM: its rows, with their ids, stay, as groups = 0.
TEST_F(TuningDbTest, MigratesAVersion4FileToGroupsKeepingEveryRowAndItsId) {
  const Problem p = make_problem(DType::bf16, Op::T, Op::N, 1536, 32768, 2048), q = square(2048);
  const CandidateRecord c = ok_candidate(p, "gemm_p", 0.75);
  {
    RawDb raw(db_path());
    create_old_file(raw, 4);
    raw.exec(fmt::format(
        "INSERT INTO problems VALUES (7, 'bf16', 'bf16', 'bf16', 'bf16', 'f32', 'none', 'tn', "
        "{0}, {1}, {2}, {3}, {4}, {5}, 16, 0),"
        " (9, 'f32', 'f32', 'f32', 'f32', 'f32', 'none', 'nn', {6}, {6}, {6}, {6}, {6}, {6}, 16, "
        "1);",
        p.m, p.n, p.k, p.lda, p.ldb, p.ldc, q.m));
    insert_old_winner(raw, c, c.config.to_json());
  }
  TuningDb db(db_path());
  EXPECT_EQ(db.schema_version(), TuningDb::kSchemaVersion);
  {
    RawDb raw(db_path());
    EXPECT_EQ(raw.text("SELECT group_concat(id || ':' || layout || ':' || reads_c || ':' || "
                       "groups, ' ') FROM (SELECT * FROM problems ORDER BY id)"),
              "7:tn:0:0 9:nn:1:0");
  }
  expect_old_winner_kept(db_path());
  const auto best = db.best(h100(), p);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->winner.id, 3);
  EXPECT_EQ(best->problem, p);
  EXPECT_FALSE(db.best(h100(), grouped(p, 128))) << "old rows are of one GEMM";

  // The same sizes as 128 groups are a new row beside the old one.
  const Problem moe = grouped(p, 128);
  db.record(h100(), moe, ok_candidate(moe, "gemm_moe", 1.5));
  EXPECT_EQ(db.stats().problems, 3);
  EXPECT_EQ(db.candidates(h100(), p).size(), 1u);
  EXPECT_EQ(db.candidates(h100(), moe).size(), 1u);
  // A group count below 0 never gets into the table, whoever writes it.
  EXPECT_THROW(RawDb(db_path()).exec("UPDATE problems SET groups = -1 WHERE id = 7"),
               std::runtime_error);
}

// Before migration 6 every grouped problem was contiguous: its rows, with their ids, stay so, and
// one GEMM too. The layout joins the key: the same sizes as masked groups are a row of their own.
TEST_F(TuningDbTest, MigratesAVersion5FileToGroupLayoutsKeepingEveryRowAndItsId) {
  const Problem dense = make_problem(DType::bf16, Op::T, Op::N, 1536, 32768, 2048);
  const Problem moe = grouped(dense, 128);
  const CandidateRecord c = ok_candidate(moe, "gemm_moe", 0.75);
  {
    RawDb raw(db_path());
    create_old_file(raw, 5);
    raw.exec(fmt::format(
        "INSERT INTO problems VALUES (7, 'bf16', 'bf16', 'bf16', 'bf16', 'f32', 'none', 'tn', "
        "{0}, {1}, {2}, {3}, {4}, {5}, 16, 0, 128),"
        " (9, 'bf16', 'bf16', 'bf16', 'bf16', 'f32', 'none', 'tn', {0}, {1}, {2}, {3}, {4}, {5}, "
        "16, 0, 0);",
        dense.m, dense.n, dense.k, dense.lda, dense.ldb, dense.ldc));
    insert_old_winner(raw, c, c.config.to_json());
  }
  TuningDb db(db_path());
  EXPECT_EQ(db.schema_version(), TuningDb::kSchemaVersion);
  {
    RawDb raw(db_path());
    EXPECT_EQ(raw.text("SELECT group_concat(id || ':' || groups || ':' || group_layout, ' ') FROM "
                       "(SELECT * FROM problems ORDER BY id)"),
              "7:128:contiguous 9:0:contiguous");
    // The UNIQUE key, and the index SQLite keeps for it, end with the layout (and, since
    // migrations 7, 8 and 10, the accumulation, the epilogue and the precision).
    EXPECT_EQ(key_columns(raw),
              "type_a type_b type_c type_d type_acc scaling layout m n k lda ldb ldc align "
              "reads_c groups group_layout accumulation epilogue precision");
  }
  expect_old_winner_kept(db_path());
  const auto best = db.best(h100(), moe);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->winner.id, 3);
  EXPECT_EQ(best->problem, moe);
  EXPECT_FALSE(db.best(h100(), masked(dense, 128))) << "old grouped rows are contiguous";

  // The same sizes as 128 masked groups are a new row beside the old ones.
  const Problem decode = masked(dense, 128);
  db.record(h100(), decode, ok_candidate(decode, "gemm_decode", 1.5));
  EXPECT_EQ(db.stats().problems, 3);
  EXPECT_EQ(db.candidates(h100(), moe).size(), 1u);
  EXPECT_EQ(db.candidates(h100(), decode).size(), 1u);
  // A masked row of one GEMM never gets into the table, whoever writes it.
  EXPECT_THROW(RawDb(db_path()).exec("UPDATE problems SET group_layout = 'masked' WHERE id = 9"),
               std::runtime_error);
}

// Before migration 7 every float8 product was summed precisely: its rows, with their ids, stay
// so, and every other problem too. The accumulation joins the key: the same float8 problem with
// fast accumulation is a row of its own.
TEST_F(TuningDbTest, MigratesAVersion6FileToAccumulationKeepingEveryRowAndItsId) {
  const Problem scaled = float8(2112, 64, 7168);
  const CandidateRecord c = ok_candidate(scaled, "gemm_fp8", 0.75);
  {
    RawDb raw(db_path());
    create_old_file(raw, 6);
    raw.exec(fmt::format(
        "INSERT INTO problems VALUES (7, 'e4m3', 'e4m3', 'bf16', 'bf16', 'f32', 'tensor', 'tn', "
        "{0}, {1}, {2}, {3}, {4}, {5}, 16, 0, 0, 'contiguous'),"
        " (9, 'bf16', 'bf16', 'bf16', 'bf16', 'f32', 'none', 'tn', {0}, {1}, {2}, {3}, {4}, {5}, "
        "16, 0, 0, 'contiguous');",
        scaled.m, scaled.n, scaled.k, scaled.lda, scaled.ldb, scaled.ldc));
    insert_old_winner(raw, c, c.config.to_json());
  }
  TuningDb db(db_path());
  EXPECT_EQ(db.schema_version(), TuningDb::kSchemaVersion);
  {
    RawDb raw(db_path());
    EXPECT_EQ(raw.text("SELECT group_concat(id || ':' || scaling || ':' || accumulation, ' ') FROM "
                       "(SELECT * FROM problems ORDER BY id)"),
              "7:tensor:precise 9:none:precise");
    // The UNIQUE key, and the index SQLite keeps for it, end with the accumulation (and, since
    // migrations 8 and 10, the epilogue and the precision).
    EXPECT_EQ(key_columns(raw),
              "type_a type_b type_c type_d type_acc scaling layout m n k lda ldb ldc align "
              "reads_c groups group_layout accumulation epilogue precision");
  }
  expect_old_winner_kept(db_path());
  const auto best = db.best(h100(), scaled);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->winner.id, 3);
  EXPECT_EQ(best->problem, scaled);
  EXPECT_FALSE(best->problem.fast_accumulation());
  EXPECT_FALSE(db.best(h100(), fast(scaled))) << "old float8 rows are precise";

  // The same problem with fast accumulation is a new row beside the old ones.
  const Problem quick = fast(scaled);
  db.record(h100(), quick, ok_candidate(quick, "gemm_fp8_fast", 0.5));
  EXPECT_EQ(db.stats().problems, 3);
  EXPECT_EQ(db.candidates(h100(), scaled).size(), 1u);
  EXPECT_EQ(db.candidates(h100(), quick).size(), 1u);
  // A fast row of a problem that is not float8 never gets into the table, whoever writes it.
  EXPECT_THROW(RawDb(db_path()).exec("UPDATE problems SET accumulation = 'fast' WHERE id = 9"),
               std::runtime_error);
}

// Before migration 8 no kernel applied an epilogue: every row, with its id, becomes 'none', and
// the accumulation of migration 7 stays. The epilogue joins the key: the same problem with a
// bias and an activation is a row of its own.
TEST_F(TuningDbTest, MigratesAVersion7FileToEpiloguesKeepingEveryRowAndItsId) {
  const Problem plain = square(1024);
  const Problem quick = fast(float8(2112, 64, 7168));
  const CandidateRecord c = ok_candidate(plain, "gemm_simt_plain", 0.75);
  {
    RawDb raw(db_path());
    create_old_file(raw, 7);
    raw.exec(fmt::format(
        "INSERT INTO problems VALUES (7, 'f32', 'f32', 'f32', 'f32', 'f32', 'none', 'nn', "
        "{0}, {0}, {0}, {0}, {0}, {0}, {1}, 0, 0, 'contiguous', 'precise'),"
        " (9, 'e4m3', 'e4m3', 'bf16', 'bf16', 'f32', 'tensor', 'tn', {2}, {3}, {4}, {5}, {6}, "
        "{7}, 16, 0, 0, 'contiguous', 'fast');",
        plain.m, plain.align, quick.m, quick.n, quick.k, quick.lda, quick.ldb, quick.ldc));
    insert_old_winner(raw, c, c.config.to_json());
  }
  TuningDb db(db_path());
  EXPECT_EQ(db.schema_version(), TuningDb::kSchemaVersion);
  {
    RawDb raw(db_path());
    EXPECT_EQ(raw.text("SELECT group_concat(id || ':' || accumulation || ':' || epilogue, ' ') "
                       "FROM (SELECT * FROM problems ORDER BY id)"),
              "7:precise:none 9:fast:none");
    // The UNIQUE key, and the index SQLite keeps for it, end with the epilogue (and, since
    // migration 10, the precision).
    EXPECT_EQ(key_columns(raw),
              "type_a type_b type_c type_d type_acc scaling layout m n k lda ldb ldc align "
              "reads_c groups group_layout accumulation epilogue precision");
  }
  expect_old_winner_kept(db_path());
  const auto best = db.best(h100(), plain);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->winner.id, 3);
  EXPECT_EQ(best->problem, plain);
  EXPECT_TRUE(best->problem.epilogue.none());
  EXPECT_FALSE(db.best(h100(), fused(plain, "bias,gelu"))) << "old rows have no epilogue";

  // The same problem with an epilogue is a new row beside the old ones.
  const Problem gelu = fused(plain, "bias,gelu");
  db.record(h100(), gelu, ok_candidate(gelu, "gemm_simt_bias_gelu", 0.8));
  EXPECT_EQ(db.stats().problems, 3);
  EXPECT_EQ(db.candidates(h100(), plain).size(), 1u);
  EXPECT_EQ(db.candidates(h100(), gelu).size(), 1u);
}

// Before migration 10 every f32 problem was computed exactly: every row, with its id, becomes
// 'exact'. The precision joins the key: the same problem with tf32 is a row of its own. A
// problem queued before, asked again, meets its entry (its JSON gains the precision).
TEST_F(TuningDbTest, MigratesAVersion9FileToPrecisionsKeepingEveryRowAndItsId) {
  const Problem plain = square(1024), dense = square(2048, DType::bf16);
  const CandidateRecord c = ok_candidate(plain, "gemm_simt_plain", 0.75);
  // The queued problem as version 9 wrote it: without a precision.
  nlohmann::ordered_json queued = nlohmann::ordered_json::parse(json_of(plain));
  ASSERT_EQ(queued.back(), "exact") << "json_of writes the precision last";
  queued.erase("precision");
  {
    RawDb raw(db_path());
    create_old_file(raw, 9);
    raw.exec(fmt::format(
        "INSERT INTO problems VALUES (7, 'f32', 'f32', 'f32', 'f32', 'f32', 'none', 'nn', "
        "{0}, {0}, {0}, {0}, {0}, {0}, {1}, 0, 0, 'contiguous', 'precise', 'none'),"
        " (9, 'bf16', 'bf16', 'bf16', 'bf16', 'f32', 'none', 'nn', {2}, {2}, {2}, {2}, {2}, {2}, "
        "16, 0, 0, 'contiguous', 'precise', 'none');"
        "INSERT INTO tune_queue (id, device, problem, gpu, cc, sms, requested_at, updated_at) "
        "VALUES (4, '{3}', '{4}', 'NVIDIA H100 80GB HBM3', 90, 132, '2025-01-02T03:04:05.000Z', "
        "'2025-01-02T03:04:05.000Z');",
        plain.m, plain.align, dense.m, json_of(h100()), queued.dump()));
    insert_old_winner(raw, c, c.config.to_json());
  }
  TuningDb db(db_path());
  EXPECT_EQ(db.schema_version(), TuningDb::kSchemaVersion);
  {
    RawDb raw(db_path());
    EXPECT_EQ(raw.text("SELECT group_concat(id || ':' || epilogue || ':' || precision, ' ') "
                       "FROM (SELECT * FROM problems ORDER BY id)"),
              "7:none:exact 9:none:exact");
    // The UNIQUE key, and the index SQLite keeps for it, end with the precision.
    EXPECT_EQ(key_columns(raw),
              "type_a type_b type_c type_d type_acc scaling layout m n k lda ldb ldc align "
              "reads_c groups group_layout accumulation epilogue precision");
    EXPECT_EQ(raw.text("SELECT problem FROM tune_queue WHERE id = 4"), json_of(plain));
  }
  expect_old_winner_kept(db_path());
  const auto best = db.best(h100(), plain);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->winner.id, 3);
  EXPECT_EQ(best->problem, plain);
  const Problem tf32 = computed(plain, Precision::tf32);
  EXPECT_FALSE(db.best(h100(), tf32)) << "old rows are exact";
  EXPECT_EQ(db.enqueue(h100(), plain, 1.0), 4);
  EXPECT_NE(db.enqueue(h100(), tf32, 1.0), 4);

  // The same problem with tf32 is a new row beside the old ones.
  db.record(h100(), tf32, ok_candidate(tf32, "gemm_tf32", 0.3));
  EXPECT_EQ(db.stats().problems, 3);
  EXPECT_EQ(db.candidates(h100(), plain).size(), 1u);
  EXPECT_EQ(db.candidates(h100(), tf32).size(), 1u);
  // A tf32 row of a problem that is not f32 never gets into the table, whoever writes it.
  EXPECT_THROW(RawDb(db_path()).exec("UPDATE problems SET precision = 'tf32' WHERE id = 9"),
               std::runtime_error);
}

TEST_F(TuningDbTest, AMigrationLeavingRowsThatPointAtNothingIsRefused) {
  const Problem p = square(1024), q = square(2048);
  create_version_2_file(db_path(), p, q);
  // Written by something with foreign keys off: candidate 4 refers to a problem that is gone.
  RawDb(db_path()).exec("DELETE FROM problems WHERE id = 9");
  try {
    TuningDb db(db_path());
    ADD_FAILURE() << "migrated a file with a dangling reference";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::database) << e.what();
    const std::string message = e.what();
    EXPECT_NE(message.find(db_path().string() + " cannot be upgraded to schema version 3"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("foreign_key_check"), std::string::npos) << message;
  }
  RawDb raw(db_path());
  EXPECT_EQ(raw.text("PRAGMA user_version"), "2") << "the migration was rolled back";
  EXPECT_EQ(raw.text("SELECT count(*) FROM candidates"), "2");
}

void expect_database_error(const fs::path& path, const std::string& words) {
  try {
    TuningDb db(path);
    ADD_FAILURE() << "opened " << path;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::database) << e.what();
    const std::string message = e.what();
    EXPECT_NE(message.find(path.string()), std::string::npos) << message;
    EXPECT_NE(message.find(words), std::string::npos) << message;
  }
}

TEST_F(TuningDbTest, RefusesAFileOfANewerSchemaVersion) {
  { TuningDb db(db_path()); }
  const int newer = TuningDb::kSchemaVersion + 1;
  { RawDb(db_path()).exec(fmt::format("PRAGMA user_version = {}", newer)); }
  expect_database_error(db_path(), "newer");
  EXPECT_EQ(RawDb(db_path()).text("PRAGMA user_version"), std::to_string(newer));
}

TEST_F(TuningDbTest, RefusesAFileThatIsNotSqlite) {
  const std::string garbage =
      "this is not a database, it is a shopping list\n" + std::string(8192, 'x');
  std::ofstream(db_path()) << garbage;
  expect_database_error(db_path(), "SQLITE_NOTADB");
  EXPECT_EQ(file_bytes(db_path()), garbage) << "the file was changed";
}

TEST_F(TuningDbTest, RefusesAnotherProgramsSqliteFileWithoutTouchingIt) {
  { RawDb(db_path()).exec("CREATE TABLE photos (id INTEGER PRIMARY KEY, path TEXT)"); }
  const std::string before = file_bytes(db_path());
  expect_database_error(db_path(), "another program");
  EXPECT_EQ(file_bytes(db_path()), before);
  EXPECT_FALSE(fs::exists(db_path().string() + "-wal"));
}

// A truncated file (a full disk, a copy cut short): a writer refuses it when it opens it (SQLite's
// quick_check), a reader (the library) when a query meets a missing page; either way an
// Error(database) that says the file is damaged, and the file stays as it was.
TEST_F(TuningDbTest, ATruncatedFileIsDamagedForWritersAndReaders) {
  Problem last;
  {
    TuningDb db(db_path());
    for (int64_t m = 64; m < 364; ++m) {
      last = make_problem(DType::f32, Op::N, Op::N, m, 64, 64);
      CandidateRecord c = ok_candidate(last, fmt::format("k{}", m), 1.0);
      c.message = std::string(300, 'm');
      db.record(h100(), last, c);
    }
    db.set_best(h100(), last, fmt::format("k{}", last.m), version_for(last), -1, true);
  }
  const std::string whole = file_bytes(db_path());
  const fs::path truncated = dir_.path() / "truncated.db";
  std::ofstream(truncated, std::ios::binary) << whole.substr(0, whole.size() / 2);
  expect_database_error(truncated, "is damaged");
  try {
    const TuningDb reader(truncated, TuningDb::Mode::read_only);
    reader.best(h100(), last);
    reader.list({});
    ADD_FAILURE() << "read a truncated file";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::database) << e.what();
    EXPECT_NE(std::string(e.what()).find(truncated.string() + " is damaged"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(file_bytes(truncated), whole.substr(0, whole.size() / 2));
}

TEST_F(TuningDbTest, ReadOnlyModeNeverCreatesAFile) {
  try {
    TuningDb db(db_path(), TuningDb::Mode::read_only);
    ADD_FAILURE() << "opened a database that does not exist";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::database);
    EXPECT_NE(std::string(e.what()).find("no tuning database"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(db_path()));
}

TEST_F(TuningDbTest, ReadOnlyModeReadsButDoesNotWrite) {
  const Problem p = square(128);
  {
    TuningDb db(db_path());
    seed_problem(db, h100(), p);
  }
  TuningDb reader(db_path(), TuningDb::Mode::read_only);
  EXPECT_TRUE(reader.best(h100(), p));
  EXPECT_THROW(reader.record(h100(), p, ok_candidate(p, "new", 1.0)), Error);
}

// Two tuning processes share one database: nobody's results are lost.
TEST_F(TuningDbTest, TwoProcessesWritingAtOnceLoseNothing) {
  constexpr int kPerProcess = 200;
  const Problem p = square(1024);
  std::vector<pid_t> children;
  for (const char* prefix : {"a", "b"}) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // The child opens the file itself (fork before opening anything) and reports by exit code.
      int code = 0;
      try {
        TuningDb db(db_path());
        for (int i = 0; i < kPerProcess; ++i)
          db.record(h100(), p, ok_candidate(p, fmt::format("{}_{}", prefix, i), 1.0 + i));
      } catch (const std::exception& e) {
        fprintf(stderr, "child %s: %s\n", prefix, e.what());
        code = 1;
      }
      std::_Exit(code);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
  TuningDb db(db_path());
  EXPECT_EQ(db.candidates(h100(), p).size(), 2u * kPerProcess);
  EXPECT_EQ(db.stats().devices, 1);
  EXPECT_EQ(db.stats().problems, 1);
}

// A database with a bit of everything: failures, unknowns, a stale best, several devices.
void seed_varied(TuningDb& db) {
  const Problem p = square(1024);
  const Problem t = square(333, DType::f32, Op::T, Op::T);  // an A100 has no bf16 family here
  db.record(h100(), p, ok_candidate(p, "fast", 0.5));
  db.record(h100(), p, ok_candidate(p, "slow", 0.8));
  db.record(h100(), p,
            failed_candidate(p, "broken", CandidateStatus::compile_error, "line 1\nline 2"));
  CandidateRecord stale = ok_candidate(p, "old", 0.4);
  stale.template_version = "00000000deadbeef";
  db.record(h100(), p, stale);
  db.set_best(h100(), p, "fast", simt_version(), 0.55, true);
  db.set_best(h100(), p, "old", stale.template_version, -1, false);
  db.record(a100(), t, ok_candidate(t, "only", 3.25));
  db.set_best(a100(), t, "only", simt_version(), -1, false);
}

TEST_F(TuningDbTest, ExportThenImportIntoAFreshDatabaseGivesTheSameExport) {
  std::string exported;
  {
    TuningDb db(db_path());
    seed_varied(db);
    exported = db.export_json({});
  }
  const Json document = Json::parse(exported);
  EXPECT_EQ(document["format"], "gemmtune-db");
  EXPECT_EQ(document["entries"].size(), 2u);

  TuningDb fresh(dir_.path() / "fresh.db");
  const ImportSummary summary = fresh.import_json(exported);
  EXPECT_EQ(summary.devices, 2);
  EXPECT_EQ(summary.problems, 2);
  EXPECT_EQ(summary.candidates, 5);
  EXPECT_EQ(summary.best, 3);
  EXPECT_EQ(fresh.export_json({}), exported);
  // Importing the same file again changes nothing.
  const ImportSummary again = fresh.import_json(exported);
  EXPECT_EQ(again.devices + again.problems + again.candidates + again.best, 0);
  EXPECT_EQ(fresh.export_json({}), exported);
  // The filter applies to export too.
  EXPECT_EQ(Json::parse(fresh.export_json({.device = "A100"}))["entries"].size(), 1u);
}

TEST_F(TuningDbTest, ExportAndImportKeepWhetherAProblemReadsC) {
  const Problem p = square(1024), q = reading_c(p);
  std::string exported;
  {
    TuningDb db(db_path());
    seed_problem(db, h100(), p, 1.0);
    seed_problem(db, h100(), q, 2.0);
    exported = db.export_json({});
  }
  const Json document = Json::parse(exported);
  ASSERT_EQ(document["entries"].size(), 2u);
  EXPECT_EQ(document["entries"][0]["problem"]["reads_c"], false);
  EXPECT_EQ(document["entries"][1]["problem"]["reads_c"], true);
  // reads_c did not raise the format (3 is for groups, 4 for their layout, 5 for accumulation,
  // 6 for the epilogue, 7 for the precision): absent, it means false.
  EXPECT_EQ(document["version"], 7);

  TuningDb fresh(dir_.path() / "fresh.db");
  EXPECT_EQ(fresh.import_json(exported).problems, 2);
  EXPECT_EQ(fresh.export_json({}), exported);
  ASSERT_TRUE(fresh.best(h100(), q));
  EXPECT_TRUE(fresh.best(h100(), q)->problem.reads_c);
  EXPECT_DOUBLE_EQ(fresh.best(h100(), q)->winner.median_ms, 2.0);
  EXPECT_DOUBLE_EQ(fresh.best(h100(), p)->winner.median_ms, 1.0);
}

// An export of a build before reads_c has no such field: its problems did not read C.
TEST_F(TuningDbTest, ImportingAProblemWithoutReadsCTakesItAsNotReadingC) {
  const Problem p = square(1024), q = reading_c(p);
  Json document;
  {
    TuningDb db(db_path());
    seed_problem(db, h100(), q);
    document = Json::parse(db.export_json({}));
  }
  document["entries"][0]["problem"].erase("reads_c");
  TuningDb fresh(dir_.path() / "fresh.db");
  fresh.import_json(document.dump());
  ASSERT_TRUE(fresh.best(h100(), p));
  EXPECT_FALSE(fresh.best(h100(), p)->problem.reads_c);
  EXPECT_FALSE(fresh.best(h100(), q));

  document["entries"][0]["problem"]["reads_c"] = 1;
  try {
    fresh.import_json(document.dump());
    ADD_FAILURE() << "imported reads_c = 1";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("entries[0].problem.reads_c: expected true or false"),
              std::string::npos)
        << e.what();
  }
}

// The groups of a problem survive export and import; an export without them (format 1 or 2)
// is of problems of one GEMM. The grouped candidates are of another template version: history,
// which an import keeps without asking whether a family of this build runs groups.
TEST_F(TuningDbTest, ExportAndImportKeepTheGroupsOfAProblem) {
  const Problem dense = make_problem(DType::bf16, Op::T, Op::N, 1536, 32768, 2048);
  const Problem moe = grouped(dense, 128);
  std::string exported;
  {
    TuningDb db(db_path());
    seed_problem(db, h100(), dense, 1.0);
    CandidateRecord old = ok_candidate(moe, "moe_fast", 2.0);
    old.template_version = "00000000deadbeef";
    db.record(h100(), moe, old);
    db.set_best(h100(), moe, "moe_fast", old.template_version, 2.5, true);
    exported = db.export_json({});
  }
  Json document = Json::parse(exported);
  EXPECT_EQ(document["version"], 7);
  ASSERT_EQ(document["entries"].size(), 2u);
  EXPECT_EQ(document["entries"][0]["problem"]["groups"], 0);
  EXPECT_EQ(document["entries"][1]["problem"]["groups"], 128);
  EXPECT_EQ(document["entries"][1]["problem"]["n"], 32768) << "N of all the groups";

  TuningDb fresh(dir_.path() / "fresh.db");
  EXPECT_EQ(fresh.import_json(exported).problems, 2);
  EXPECT_EQ(fresh.export_json({}), exported);
  const auto listed = fresh.list({.groups = 128});
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].problem, moe);
  EXPECT_EQ(listed[0].winner.kernel_name, "moe_fast");
  EXPECT_EQ(Json::parse(fresh.export_json({.groups = 0}))["entries"].size(), 1u);

  // A format 2 export has no groups: one GEMM.
  document["version"] = 2;
  document["entries"][1]["problem"].erase("groups");
  TuningDb older(dir_.path() / "older.db");
  older.import_json(document.dump());
  EXPECT_TRUE(older.list({.groups = 128}).empty());
  ASSERT_EQ(older.list({.groups = 0}).size(), 2u) << "two best rows of one GEMM";

  for (const auto& [groups, says] :
       {std::pair{Json(-1), "entries[1].problem.groups: must be at least 0 (got -1)"},
        std::pair{Json(4097), "entries[1].problem: groups must be 0 (one GEMM) or 1 to 4096"},
        std::pair{Json("8"), "entries[1].problem.groups: expected an integer"}}) {
    document["entries"][1]["problem"]["groups"] = groups;
    try {
      fresh.import_json(document.dump());
      ADD_FAILURE() << "imported groups " << groups;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
}

// The group layout of a problem survives export and import; an export without it (formats 1 to
// 3) is of contiguous groups. A bad layout, a masked one without groups and a masked N that the
// groups do not divide are refused, saying where. The candidates are of another template version
// (history), as in the test of the groups above.
TEST_F(TuningDbTest, ExportAndImportKeepTheGroupLayoutOfAProblem) {
  const Problem dense = make_problem(DType::bf16, Op::T, Op::N, 1536, 32768, 2048);
  const Problem contiguous = grouped(dense, 128), decode = masked(dense, 128);
  const std::string exported = exported_history({contiguous, decode}, [](const Problem& p) {
    return fmt::format("moe_{}", to_string(p.group_layout));
  });
  Json document = Json::parse(exported);
  EXPECT_EQ(document["version"], 7);
  ASSERT_EQ(document["entries"].size(), 2u);
  EXPECT_EQ(document["entries"][0]["problem"]["group_layout"], "contiguous");
  EXPECT_EQ(document["entries"][1]["problem"]["group_layout"], "masked");
  EXPECT_EQ(document["entries"][1]["problem"]["n"], 32768) << "G times the capacity";

  TuningDb fresh(dir_.path() / "fresh.db");
  EXPECT_EQ(fresh.import_json(exported).problems, 2);
  EXPECT_EQ(fresh.export_json({}), exported);
  const auto listed = fresh.list({.group_layout = GroupLayout::masked});
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].problem, decode);
  EXPECT_EQ(listed[0].winner.kernel_name, "moe_masked");
  const Json masked_only =
      Json::parse(fresh.export_json({.group_layout = GroupLayout::masked}))["entries"];
  ASSERT_EQ(masked_only.size(), 1u);
  EXPECT_EQ(masked_only[0]["problem"]["group_layout"], "masked");

  // A format 3 export has no group layouts: its groups are contiguous.
  Json older_document = document;
  older_document["version"] = 3;
  older_document["entries"].erase(0);
  older_document["entries"][0]["problem"].erase("group_layout");
  TuningDb older(dir_.path() / "older.db");
  older.import_json(older_document.dump());
  EXPECT_TRUE(older.list({.group_layout = GroupLayout::masked}).empty());
  const auto as_contiguous = older.list({});
  ASSERT_EQ(as_contiguous.size(), 1u);
  EXPECT_EQ(as_contiguous[0].problem, contiguous);

  struct Bad {
    Json groups, n, group_layout;
    const char* says;
  };
  for (const Bad& bad :
       {Bad{128, 32768, "diagonal",
            "entries[1].problem.group_layout: unknown group layout 'diagonal' (expected "
            "contiguous or masked)"},
        Bad{128, 32768, 1, "entries[1].problem.group_layout: expected a string, got number"},
        Bad{0, 32768, "masked", "entries[1].problem: a masked group layout needs groups"},
        Bad{128, 32769, "masked", "entries[1].problem: masked: N (32769) must be"}}) {
    Json changed = document;
    Json& problem = changed["entries"][1]["problem"];
    problem["groups"] = bad.groups;
    problem["n"] = bad.n;
    problem["group_layout"] = bad.group_layout;
    expect_import_refused(fresh, changed, bad.says);
  }
}

// The accumulation of a problem survives export and import; an export without it (formats 1 to
// 4) is of precise problems, and this build refuses a newer format. A bad accumulation, and a
// fast one of block scaling or of an unscaled problem, are refused, saying where. The candidates
// are of another template version (history), as in the test of the groups above.
TEST_F(TuningDbTest, ExportAndImportKeepTheAccumulationOfAProblem) {
  const Problem precise = float8(2112, 64, 7168), quick = fast(precise);
  const std::string exported = exported_history({precise, quick}, [](const Problem& p) {
    return fmt::format("fp8_{}", to_string(p.accumulation));
  });
  Json document = Json::parse(exported);
  EXPECT_EQ(document["version"], 7);
  ASSERT_EQ(document["entries"].size(), 2u);
  // By the key's columns: 'fast' sorts before 'precise'.
  EXPECT_EQ(document["entries"][0]["problem"]["accumulation"], "fast");
  EXPECT_EQ(document["entries"][1]["problem"]["accumulation"], "precise");

  TuningDb fresh(dir_.path() / "fresh.db");
  EXPECT_EQ(fresh.import_json(exported).problems, 2);
  EXPECT_EQ(fresh.export_json({}), exported);
  const auto listed = fresh.list({.accumulation = Accumulation::fast});
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].problem, quick);
  EXPECT_EQ(listed[0].winner.kernel_name, "fp8_fast");
  const Json fast_only =
      Json::parse(fresh.export_json({.accumulation = Accumulation::fast}))["entries"];
  ASSERT_EQ(fast_only.size(), 1u);
  EXPECT_EQ(fast_only[0]["problem"]["accumulation"], "fast");

  // A format 4 export has no accumulation: its problems are precise.
  Json older_document = document;
  older_document["version"] = 4;
  older_document["entries"].erase(1);
  older_document["entries"][0]["problem"].erase("accumulation");
  TuningDb older(dir_.path() / "older.db");
  older.import_json(older_document.dump());
  EXPECT_TRUE(older.list({.accumulation = Accumulation::fast}).empty());
  const auto as_precise = older.list({});
  ASSERT_EQ(as_precise.size(), 1u);
  EXPECT_EQ(as_precise[0].problem, precise);
  EXPECT_EQ(as_precise[0].winner.kernel_name, "fp8_fast");

  // A newer format may hold what this build cannot tell apart.
  Json newer_document = document;
  newer_document["version"] = 8;
  try {
    fresh.import_json(newer_document.dump());
    ADD_FAILURE() << "imported format 8";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("version 8 is newer than this build reads (7)"),
              std::string::npos)
        << e.what();
  }

  struct Bad {
    Json types, scaling, accumulation;
    const char* says;
  };
  for (const Bad& bad :
       {Bad{"e4m3*e4m3->bf16", "tensor", "quick",
            "entries[0].problem.accumulation: unknown accumulation 'quick' (expected precise or "
            "fast)"},
        Bad{"e4m3*e4m3->bf16", "tensor", 1,
            "entries[0].problem.accumulation: expected a string, got number"},
        Bad{"e4m3*e4m3->bf16", "block", "fast",
            "entries[0].problem: fast accumulation is for float8 with tensor or row scaling, not "
            "scaling block"},
        Bad{"bf16", "none", "fast",
            "entries[0].problem: fast accumulation is for float8 with tensor or row scaling, not "
            "bf16"}}) {
    Json changed = document;
    Json& problem = changed["entries"][0]["problem"];
    problem["types"] = bad.types;
    problem["scaling"] = bad.scaling;
    problem["accumulation"] = bad.accumulation;
    expect_import_refused(fresh, changed, bad.says);
  }
}

// The epilogue of a problem survives export and import, in any spelling it is given; an export
// without it (formats 1 to 5) is of problems without one, and this build refuses a newer format.
// A bad epilogue, one of a grouped problem, and a config of another epilogue than its problem's
// are refused, saying where. The candidates are of another template version (history), as in
// the test of the groups above.
TEST_F(TuningDbTest, ExportAndImportKeepTheEpilogueOfAProblem) {
  const Problem plain = square(1024), gelu = fused(plain, "bias,gelu");
  const std::string exported =
      exported_history({plain, gelu}, [](const Problem& p) { return "simt_" + p.epilogue.name(); });
  Json document = Json::parse(exported);
  EXPECT_EQ(document["version"], 7);
  ASSERT_EQ(document["entries"].size(), 2u);
  // By the key's columns: 'bias,gelu' sorts before 'none'.
  EXPECT_EQ(document["entries"][0]["problem"]["epilogue"], "bias,gelu");
  EXPECT_EQ(document["entries"][0]["candidates"][0]["config"]["epilogue"], "bias,gelu");
  EXPECT_EQ(document["entries"][1]["problem"]["epilogue"], "none");

  TuningDb fresh(dir_.path() / "fresh.db");
  EXPECT_EQ(fresh.import_json(exported).problems, 2);
  EXPECT_EQ(fresh.export_json({}), exported);
  const auto listed = fresh.list({.epilogue = gelu.epilogue});
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].problem, gelu);
  EXPECT_EQ(listed[0].winner.kernel_name, "simt_bias,gelu");
  const Json fused_only = Json::parse(fresh.export_json({.epilogue = gelu.epilogue}))["entries"];
  ASSERT_EQ(fused_only.size(), 1u);
  EXPECT_EQ(fused_only[0]["problem"]["epilogue"], "bias,gelu");

  // Another spelling of the same epilogue is read as its name.
  Json spelled = document;
  spelled["entries"][0]["problem"]["epilogue"] = "GELU,bias";
  TuningDb respelled(dir_.path() / "respelled.db");
  respelled.import_json(spelled.dump());
  EXPECT_EQ(respelled.export_json({}), exported);

  // A format 5 export has no epilogue: its problems have none.
  Json older_document = document;
  older_document["version"] = 5;
  older_document["entries"].erase(0);
  older_document["entries"][0]["problem"].erase("epilogue");
  TuningDb older(dir_.path() / "older.db");
  older.import_json(older_document.dump());
  const auto as_plain = older.list({});
  ASSERT_EQ(as_plain.size(), 1u);
  EXPECT_EQ(as_plain[0].problem, plain);
  EXPECT_TRUE(older.list({.epilogue = gelu.epilogue}).empty());

  // A newer format may hold what this build cannot tell apart.
  Json newer_document = document;
  newer_document["version"] = 8;
  try {
    fresh.import_json(newer_document.dump());
    ADD_FAILURE() << "imported format 8";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("version 8 is newer than this build reads (7)"),
              std::string::npos)
        << e.what();
  }

  struct Bad {
    Json epilogue;
    int64_t groups;
    const char* says;
  };
  for (const Bad& bad :
       {Bad{"swish", 0,
            "entries[0].problem.epilogue: unknown epilogue part 'swish' (expected bias, bias_n, "
            "relu, gelu, gelu_tanh, silu, identity, or a gated swiglu, geglu, geglu_tanh, reglu "
            "with interleaved, and aux, comma-separated)"},
        Bad{"bias,aux", 0,
            "entries[0].problem.epilogue: epilogue bias,aux: aux (the pre-activation as a second "
            "output) is for an activation that is not gated"},
        Bad{1, 0, "entries[0].problem.epilogue: expected a string, got number"},
        Bad{"bias,bias_n", 0, "entries[0].problem.epilogue: epilogue: more than one bias"},
        Bad{"bias,gelu", 8, "grouped problems with an epilogue are not supported yet"},
        // The problem of a format-5 reader: a fused entry read as the plain problem.
        Bad{nullptr, 0,
            "entries[0].candidates[0]: config of simt_bias,gelu is for epilogue bias,gelu, the "
            "problem has epilogue none"},
        Bad{"bias,relu", 0,
            "entries[0].candidates[0]: config of simt_bias,gelu is for epilogue bias,gelu, the "
            "problem has epilogue bias,relu"}}) {
    Json changed = document;
    Json& problem = changed["entries"][0]["problem"];
    problem["epilogue"] = bad.epilogue;
    problem["groups"] = bad.groups;
    expect_import_refused(fresh, changed, bad.says);
  }
  EXPECT_EQ(fresh.export_json({}), exported) << "a refused import changes nothing";
}

// The precision of a problem survives export and import, written last; an export without it
// (formats 1 to 6) is of exact problems. A bad precision, and tf32 of a problem that is not f32,
// are refused, saying where. The candidates are of another template version (history), as in
// the test of the groups above.
TEST_F(TuningDbTest, ExportAndImportKeepThePrecisionOfAProblem) {
  const Problem exact = square(1024), tf32x3 = computed(exact, Precision::tf32x3);
  const std::string exported = exported_history({exact, tf32x3}, [](const Problem& p) {
    return fmt::format("simt_{}", to_string(p.precision));
  });
  Json document = Json::parse(exported);
  EXPECT_EQ(document["version"], 7);
  ASSERT_EQ(document["entries"].size(), 2u);
  // By the key's columns: '3xtf32' sorts before 'exact'.
  EXPECT_EQ(document["entries"][0]["problem"]["precision"], "3xtf32");
  EXPECT_EQ(document["entries"][1]["problem"]["precision"], "exact");

  TuningDb fresh(dir_.path() / "fresh.db");
  EXPECT_EQ(fresh.import_json(exported).problems, 2);
  EXPECT_EQ(fresh.export_json({}), exported);
  const auto listed = fresh.list({.precision = Precision::tf32x3});
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].problem, tf32x3);
  EXPECT_EQ(listed[0].winner.kernel_name, "simt_3xtf32");

  // A format 6 export has no precision: its problems are exact.
  Json older_document = document;
  older_document["version"] = 6;
  older_document["entries"].erase(1);
  older_document["entries"][0]["problem"].erase("precision");
  TuningDb older(dir_.path() / "older.db");
  older.import_json(older_document.dump());
  const auto as_exact = older.list({});
  ASSERT_EQ(as_exact.size(), 1u);
  EXPECT_EQ(as_exact[0].problem, exact);
  EXPECT_EQ(as_exact[0].winner.kernel_name, "simt_3xtf32");

  struct Bad {
    Json types, precision;
    const char* says;
  };
  for (const Bad& bad :
       {Bad{"f32", "fast",
            "entries[0].problem.precision: unknown precision 'fast' (expected exact, tf32 or "
            "3xtf32)"},
        Bad{"f32", 1, "entries[0].problem.precision: expected a string, got number"},
        Bad{"bf16", "tf32",
            "entries[0].problem: precision tf32 is for f32 operands, accumulator and output, not "
            "bf16"}}) {
    Json changed = document;
    Json& problem = changed["entries"][0]["problem"];
    problem["types"] = bad.types;
    problem["precision"] = bad.precision;
    expect_import_refused(fresh, changed, bad.says);
  }
  EXPECT_EQ(fresh.export_json({}), exported) << "a refused import changes nothing";
}

TEST_F(TuningDbTest, ImportMergesAndTheNewerMeasurementWins) {
  TuningDb db(db_path());
  const Problem p = square(1024);
  db.record(h100(), p, ok_candidate(p, "k", 1.0));
  Json document = Json::parse(db.export_json({}));
  Json& imported = document["entries"][0]["candidates"][0];

  imported["median_ms"] = 5.0;
  imported["measured_at"] = "2000-01-01T00:00:00.000Z";  // older: must not win
  EXPECT_EQ(db.import_json(document.dump()).candidates, 0);
  EXPECT_DOUBLE_EQ(db.candidates(h100(), p)[0].median_ms, 1.0);

  imported["median_ms"] = 0.5;
  imported["measured_at"] = "2999-01-01T00:00:00.000Z";  // newer: replaces
  imported["kernel_name"] = "k";
  Json other = imported;
  other["kernel_name"] = "from_machine_b";
  document["entries"][0]["candidates"].push_back(other);
  const ImportSummary summary = db.import_json(document.dump());
  EXPECT_EQ(summary.candidates, 2);
  const auto found = db.candidates(h100(), p);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_DOUBLE_EQ(found[0].median_ms, 0.5);
}

struct BadDocument {
  std::string name;
  std::function<void(Json&)> spoil;  // applied to one entry of a valid document
  std::string expected;              // part of the error message
};

// Each spoiled document (entries[entry] spoiled) is refused with Error(invalid_argument) saying
// where, and the database stays as it was.
void expect_each_refused(TuningDb& db, const Json& valid, size_t entry,
                         const std::vector<BadDocument>& cases) {
  const std::string before = db.export_json({});
  for (const auto& bad : cases) {
    Json document = valid;
    bad.spoil(document["entries"][entry]);
    try {
      db.import_json(document.dump());
      ADD_FAILURE() << bad.name << ": imported";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << bad.name;
      EXPECT_NE(std::string(e.what()).find(bad.expected), std::string::npos)
          << bad.name << ": " << e.what();
    }
    EXPECT_EQ(db.export_json({}), before) << bad.name << " changed the database";
  }
}

TEST_F(TuningDbTest, MalformedImportThrowsSayingWhereAndChangesNothing) {
  TuningDb db(db_path());
  seed_varied(db);
  const std::string before = db.export_json({});
  Json valid = Json::parse(before);
  // A valid new entry first: it must not be written when a later one is bad.
  Json extra = valid["entries"][1];
  extra["problem"]["m"] = 77;
  extra["problem"]["lda"] = 77;
  extra["problem"]["ldc"] = 77;
  valid["entries"].insert(valid["entries"].begin(), extra);
  ASSERT_EQ(valid["entries"][2]["device"]["name"], h100().name);

  const std::vector<BadDocument> cases = {
      {"wrong type", [](Json& e) { e["problem"]["k"] = "big"; },
       "entries[2].problem.k: expected an integer, got string"},
      {"unknown status", [](Json& e) { e["candidates"][0]["status"] = "okk"; },
       "entries[2].candidates[0].status: unknown status 'okk'"},
      {"negative M", [](Json& e) { e["problem"]["m"] = -5; },
       "entries[2].problem: M must be at least 1 (got -5)"},
      {"missing field", [](Json& e) { e["device"].erase("sms"); },
       "entries[2].device: missing required field 'sms'"},
      {"negative time", [](Json& e) { e["candidates"][1]["median_ms"] = -2.0; },
       "entries[2].candidates[1].median_ms: must be at least 0"},
      {"failed winner",
       [](Json& e) {
         e["best"][0]["kernel_name"] = "broken";
         e["best"][0]["template_version"] = simt_version();
       },
       "only an ok candidate can be the best"},
      {"unknown type", [](Json& e) { e["problem"]["types"] = "f64"; },
       "entries[2].problem.types: unknown data type 'f64'"},
  };
  expect_each_refused(db, valid, 2, cases);
  for (const std::string& text : {std::string("{\"format\": \"gemmtune-db\", \"version\": 1,"),
                                  std::string("[1, 2, 3]"), std::string("{\"format\": \"csv\"}")}) {
    EXPECT_THROW(db.import_json(text), Error) << text;
    EXPECT_EQ(db.export_json({}), before);
  }
  try {
    db.import_json("{\"format\": \"gemmtune-db\", \"version\": 1, \"entries\": [}");
    ADD_FAILURE() << "imported a syntax error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
  }
}

// An import names only production families; the runnable rows (this build's template version)
// must be valid points of their family for the problem. Anything else is refused, saying where.
TEST_F(TuningDbTest, ImportAcceptsOnlyConfigsThisBuildCanRun) {
  TuningDb db(db_path());
  seed_varied(db);
  const std::string before = db.export_json({});
  const Json valid = Json::parse(before);
  ASSERT_EQ(valid["entries"][1]["device"]["name"], h100().name);
  ASSERT_EQ(valid["entries"][1]["candidates"][0]["kernel_name"], "old");   // a stale version
  ASSERT_EQ(valid["entries"][1]["candidates"][1]["kernel_name"], "fast");  // this build's

  const std::vector<BadDocument> cases = {
      {"the test family",
       [](Json& e) { e["candidates"][0]["config"]["family"] = "fault_injection"; },
       "entries[1].candidates[0].config.family: unknown kernel family 'fault_injection' (this "
       "build has "},
      {"an unknown family", [](Json& e) { e["candidates"][1]["config"]["family"] = "mma_sm70"; },
       "entries[1].candidates[1].config.family: unknown kernel family 'mma_sm70'"},
      {"a value outside the space",
       [](Json& e) { e["candidates"][1]["config"]["params"]["VEC"] = 8; },
       "entries[1].candidates[1].config: VEC=8 is not among the values of the simt family (1, 2, "
       "4)"},
      {"a missing parameter", [](Json& e) { e["candidates"][1]["config"]["params"].erase("TM"); },
       "entries[1].candidates[1].config: parameter TM is missing"},
      {"an extra parameter", [](Json& e) { e["candidates"][1]["config"]["params"]["EVIL"] = 1; },
       "entries[1].candidates[1].config: the simt family has no parameter EVIL"},
      {"a broken constraint", [](Json& e) { e["candidates"][1]["config"]["params"]["VEC"] = 1; },
       "entries[1].candidates[1].config: breaks constraint widest_vector"},
      {"a family that cannot solve the problem",
       [](Json& e) {
         e["candidates"][1]["config"] =
             Json::parse(config_for(square(1024, DType::bf16), 0).to_json());
         e["candidates"][1]["config"]["types"] = "f32";
         e["candidates"][1]["template_version"] = template_version(find_family("wgmma_sm90"));
       },
       "entries[1].candidates[1].config: precision exact: the wgmma family computes f32 on tensor "
       "cores"},
  };
  expect_each_refused(db, valid, 1, cases);

  // A stale row (another template version) is history, never run: its parameters may be of an
  // older space, as long as its family is one of this build's.
  Json document = valid;
  Json& stale = document["entries"][1]["candidates"][0];
  stale["config"]["params"]["RETIRED"] = 3;
  stale["measured_at"] = "2999-01-01T00:00:00.000Z";
  EXPECT_EQ(db.import_json(document.dump()).candidates, 1);
}

// The rows of one tier of bests_for(), in its order.
std::vector<BestRecord> of_tier(BestTier tier, const TuningDb& db, const DeviceKey& device,
                                const Problem& p) {
  std::vector<BestRecord> out;
  for (const TieredBest& t : db.bests_for(device, p))
    if (t.tier == tier) out.push_back(t.best);
  return out;
}

TEST_F(TuningDbTest, BestsUnderOtherVersionsAreOfTheSameGpuAndProblem) {
  TuningDb db(db_path());
  const Problem p = square(1024);
  DeviceKey older_driver = h100(), older_nvrtc = h100(), other_sms = h100();
  older_driver.driver = 12080;
  older_nvrtc.nvrtc = "12.8";
  other_sms.sms = 114;  // an H100 PCIe is another GPU
  seed_problem(db, older_driver, p, 2.0);
  seed_problem(db, other_sms, p, 0.5);
  seed_problem(db, older_driver, square(2048));  // another problem
  EXPECT_FALSE(db.best(h100(), p)) << "nothing under this driver and NVRTC";

  auto found = of_tier(BestTier::other_version, db, h100(), p);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].device, older_driver);
  EXPECT_EQ(found[0].winner.kernel_name, "fast_" + p.shape());

  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // tuned_at has milliseconds
  seed_problem(db, older_nvrtc, p, 3.0);                      // tuned later: first
  found = of_tier(BestTier::other_version, db, h100(), p);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].device, older_nvrtc);
  EXPECT_EQ(found[1].device, older_driver);
  // The exact key is never among them, and a result of other templates never is.
  seed_problem(db, h100(), p);
  EXPECT_EQ(of_tier(BestTier::other_version, db, h100(), p).size(), 2u);
  EXPECT_TRUE(of_tier(BestTier::other_version, db, older_driver, p).size() == 2u);
  const Problem q = square(4096);
  CandidateRecord stale = ok_candidate(q, "stale", 1.0);
  stale.template_version = "0123456789abcdef";
  db.record(older_driver, q, stale);
  db.set_best(older_driver, q, "stale", stale.template_version, -1, true);
  EXPECT_TRUE(of_tier(BestTier::other_version, db, h100(), q).empty());
}

DeviceKey h200() {
  return {"NVIDIA H200", 90, 132, 13000, "13.0"};
}
DeviceKey h100_pcie() {
  return {"NVIDIA H100 PCIe", 90, 114, 13000, "13.0"};
}

// Devices and winners of a tiered list, to compare lists in one line.
std::vector<std::string> summary(const std::vector<TieredBest>& list) {
  std::vector<std::string> out;
  for (const auto& t : list)
    out.push_back(fmt::format("{} {} {} {}", to_string(t.tier), t.best.device.name,
                              t.best.device.nvrtc, t.best.winner.kernel_name));
  return out;
}

// The sibling tier: an H200 without rows of its own uses those of other GPUs of compute capability
// 9.0, the most recently tuned first, but only after every row of its own; never an A100's.
TEST_F(TuningDbTest, BestsForPutsTheGpusOwnRowsBeforeSiblingsAndNeverAnotherCc) {
  TuningDb db(db_path());
  const Problem p = square(1024);
  auto later = [] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); };
  seed_problem(db, h100(), p, 2.0);
  later();
  seed_problem(db, h100_pcie(), p, 3.0);
  later();
  seed_problem(db, a100(), p, 0.1);             // the newest and fastest, but of cc 8.0
  seed_problem(db, h200(), reading_c(p), 0.1);  // another problem
  EXPECT_EQ(summary(db.bests_for(h200(), p)),
            (std::vector<std::string>{"sibling NVIDIA H100 PCIe 13.0 fast_1024x1024x1024",
                                      "sibling NVIDIA H100 80GB HBM3 13.0 fast_1024x1024x1024"}));
  // A row of its own under another NVRTC comes before every sibling, however recent they are.
  DeviceKey h200_older = h200();
  h200_older.nvrtc = "12.8";
  seed_problem(db, h200_older, p, 5.0);
  later();
  seed_problem(db, h100(), p, 1.5);  // the H100 tunes again: now the most recent sibling
  EXPECT_EQ(summary(db.bests_for(h200(), p)),
            (std::vector<std::string>{"other_version NVIDIA H200 12.8 fast_1024x1024x1024",
                                      "sibling NVIDIA H100 80GB HBM3 13.0 fast_1024x1024x1024",
                                      "sibling NVIDIA H100 PCIe 13.0 fast_1024x1024x1024"}));
  // Its own row under its versions comes first of all.
  seed_problem(db, h200(), p, 9.0);
  const auto all = db.bests_for(h200(), p);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].tier, BestTier::tuned);
  EXPECT_EQ(all[0].best.device, h200());
  EXPECT_DOUBLE_EQ(all[0].best.winner.median_ms, 9.0);
  // Then its own row under another NVRTC, then the siblings, the most recently tuned first.
  EXPECT_EQ(all[1].best.device, h200_older);
  EXPECT_EQ(all[2].best.device, h100());
  EXPECT_EQ(all[3].best.device, h100_pcie());
  // The A100 sees none of them: its compute capability has only its own row.
  EXPECT_EQ(summary(db.bests_for(a100(), p)),
            (std::vector<std::string>{"tuned NVIDIA A100-SXM4-40GB 12.8 fast_1024x1024x1024"}));
}

// A sibling whose only row is stale (other templates) serves nothing.
TEST_F(TuningDbTest, BestsForNeverReturnsAStaleRow) {
  TuningDb db(db_path());
  const Problem p = square(1024);
  CandidateRecord stale = ok_candidate(p, "stale", 0.5);
  stale.template_version = "0123456789abcdef";
  db.record(h100(), p, stale);
  db.set_best(h100(), p, "stale", stale.template_version, -1, true);
  EXPECT_TRUE(db.bests_for(h200(), p).empty());
  seed_problem(db, h100_pcie(), p, 4.0);
  EXPECT_EQ(summary(db.bests_for(h200(), p)),
            (std::vector<std::string>{"sibling NVIDIA H100 PCIe 13.0 fast_1024x1024x1024"}));
}

// The rule itself, over rows made by hand: whatever their order, one row per device key (its
// fastest current one), own rows first, then siblings by recency; nothing stale, of another
// compute capability or of another problem.
TEST_F(TuningDbTest, RankBestsForIsOneRuleWhateverTheOrderOfTheRows) {
  const Problem p = square(1024);
  auto row = [&](const DeviceKey& device, const std::string& kernel, double ms,
                 const std::string& tuned_at, bool current = true,
                 const Problem& q = square(1024)) {
    BestRecord b;
    b.device = device;
    b.problem = q;
    b.winner = ok_candidate(q, kernel, ms);
    b.tuned_at = tuned_at;
    b.current = current;
    return b;
  };
  DeviceKey h200_older = h200();
  h200_older.driver = 12080;
  std::vector<BestRecord> rows = {
      row(h100(), "h100_simt", 2.0, "2026-01-03T00:00:00.000Z"),
      row(h100(), "h100_wgmma", 1.0, "2026-01-01T00:00:00.000Z"),  // same GPU, faster: its row
      row(h100_pcie(), "pcie", 1.0, "2026-01-02T00:00:00.000Z"),
      row(h100_pcie(), "pcie_stale", 0.1, "2026-01-09T00:00:00.000Z", false),
      row(a100(), "a100", 0.1, "2026-01-09T00:00:00.000Z"),
      row(h200(), "h200_other_problem", 0.1, "2026-01-09T00:00:00.000Z", true, reading_c(p)),
      row(h200_older, "h200_older_driver", 7.0, "2025-01-01T00:00:00.000Z"),
  };
  const auto ranked = rank_bests_for(h200(), p, rows);
  // The H100's fastest row was tuned on 01-01, the PCIe's on 01-02: the PCIe comes first.
  EXPECT_EQ(summary(ranked),
            (std::vector<std::string>{"other_version NVIDIA H200 13.0 h200_older_driver",
                                      "sibling NVIDIA H100 PCIe 13.0 pcie",
                                      "sibling NVIDIA H100 80GB HBM3 13.0 h100_wgmma"}));
  std::reverse(rows.begin(), rows.end());
  EXPECT_EQ(summary(rank_bests_for(h200(), p, rows)), summary(ranked));
  std::swap(rows[1], rows[4]);
  EXPECT_EQ(summary(rank_bests_for(h200(), p, rows)), summary(ranked));
  // Seen from the H100: its own row, then its siblings.
  EXPECT_EQ(summary(rank_bests_for(h100(), p, rows)),
            (std::vector<std::string>{"tuned NVIDIA H100 80GB HBM3 13.0 h100_wgmma",
                                      "sibling NVIDIA H100 PCIe 13.0 pcie",
                                      "sibling NVIDIA H200 13.0 h200_older_driver"}));
  EXPECT_TRUE(rank_bests_for(h200(), square(2048), rows).empty());
  EXPECT_EQ(to_string(BestTier::sibling), "sibling");
}

// Types per operand are part of a problem's key: a mixed-types problem is stored, read back and
// filtered as such (the database does not judge whether a family computes it).
TEST_F(TuningDbTest, AMixedTypesProblemIsStoredListedAndFilteredByItsTypes) {
  TuningDb db(db_path());
  const DataTypes mixed = parse_data_types("f16*bf16->f32");
  const Problem uniform = square(1024, DType::f16);
  Problem p = square(1024);
  p.types = mixed;
  CandidateRecord c = ok_candidate(square(1024), "mixed", 1.0);
  c.config.types = mixed;
  db.record(h100(), p, c);
  db.set_best(h100(), p, "mixed", c.template_version, -1, true);
  seed_problem(db, h100(), square(1024));  // f32, the same shape

  EXPECT_EQ(RawDb(db_path()).text("SELECT type_a || ' ' || type_b || ' ' || type_c || ' ' || "
                                  "type_d || ' ' || type_acc || ' ' || scaling FROM problems "
                                  "WHERE type_a = 'f16'"),
            "f16 bf16 f32 f32 f32 none");
  ASSERT_TRUE(db.best(h100(), p));
  EXPECT_EQ(db.best(h100(), p)->problem.types, mixed);
  EXPECT_EQ(db.best(h100(), p)->winner.config.types, mixed);
  EXPECT_FALSE(db.best(h100(), uniform)) << "f16 for every operand is another problem";
  const auto listed = db.list({.types = mixed});
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].problem, p);
  EXPECT_EQ(db.list({.types = DataTypes::uniform(DType::f32)}).size(), 1u);
  EXPECT_TRUE(db.list({.types = DataTypes::uniform(DType::f16)}).empty());
  EXPECT_TRUE(db.list({.types = parse_data_types("bf16*f16->f32")}).empty());
  const Json exported = Json::parse(db.export_json({.types = mixed}));
  ASSERT_EQ(exported["entries"].size(), 1u);
  EXPECT_EQ(exported["entries"][0]["problem"]["types"], "f16*bf16->f32");
  EXPECT_EQ(exported["entries"][0]["problem"]["scaling"], "none");
  EXPECT_EQ(db.remove({.types = mixed}), 1);
  EXPECT_EQ(db.list({}).size(), 1u);
}

// The nearest-shape fallback never crosses groups: a grouped problem borrows only a winner of
// the same groups, M, K, types and layout (only N, the tokens, may differ); one GEMM never
// borrows a grouped problem's, nor the reverse.
TEST_F(TuningDbTest, TheNearestTunedShapeNeverCrossesGroups) {
  TuningDb db(db_path());
  const Problem dense = make_problem(DType::bf16, Op::T, Op::N, 1536, 128 * 256, 2048);
  const Problem call = grouped(dense, 128);
  const Problem fewer_tokens =
      grouped(make_problem(DType::bf16, Op::T, Op::N, 1536, 128 * 200, 2048), 128);
  const Problem other_m =
      grouped(make_problem(DType::bf16, Op::T, Op::N, 2048, 128 * 256, 2048), 128);
  const Problem other_groups = grouped(dense, 64);
  for (const Problem& p : {dense, fewer_tokens, other_m, other_groups}) seed_problem(db, h100(), p);

  const auto like = db.bests_like(h100(), call);
  ASSERT_EQ(like.size(), 2u) << "the rows of 128 groups";
  for (const auto& b : like) EXPECT_EQ(b.problem.groups, 128) << b.problem.describe();
  const auto anything = [](const BestRecord&, const KernelConfig&) { return true; };
  const auto nearest = nearest_best(like, call, ArchInfo::from_cc(90), anything);
  ASSERT_TRUE(nearest);
  EXPECT_EQ(nearest->best.problem, fewer_tokens);

  EXPECT_TRUE(std::isinf(shape_distance(call, dense)));
  EXPECT_TRUE(std::isinf(shape_distance(call, other_groups)));
  EXPECT_TRUE(std::isinf(shape_distance(call, other_m))) << "other experts: only N may differ";
  EXPECT_FALSE(std::isinf(shape_distance(call, fewer_tokens)));
  // Even given every row, a grouped call finds none but its own groups'.
  const auto all = db.list({});
  ASSERT_EQ(all.size(), 4u);
  EXPECT_FALSE(nearest_best(all, grouped(dense, 32), ArchInfo::from_cc(90), anything));

  // One GEMM of the same sizes sees only rows of one GEMM.
  const auto dense_like = db.bests_like(h100(), dense);
  ASSERT_EQ(dense_like.size(), 1u);
  EXPECT_EQ(dense_like[0].problem, dense);
  const Problem near_dense = make_problem(DType::bf16, Op::T, Op::N, 1600, 128 * 256, 2048);
  const auto from_all = nearest_best(all, near_dense, ArchInfo::from_cc(90), anything);
  ASSERT_TRUE(from_all);
  EXPECT_EQ(from_all->best.problem, dense);
}

// Nor across group layouts: a masked problem borrows only a masked winner of the same groups, M
// and K (only the capacity may differ); a contiguous one never borrows a masked one's, nor the
// reverse.
TEST_F(TuningDbTest, TheNearestTunedShapeNeverCrossesGroupLayouts) {
  TuningDb db(db_path());
  const Problem dense = make_problem(DType::bf16, Op::T, Op::N, 1536, 128 * 256, 2048);
  const Problem call = masked(dense, 128);
  const Problem smaller_capacity =
      masked(make_problem(DType::bf16, Op::T, Op::N, 1536, 128 * 200, 2048), 128);
  const Problem contiguous = grouped(dense, 128);
  for (const Problem& p : {dense, smaller_capacity, contiguous}) seed_problem(db, h100(), p);

  const auto like = db.bests_like(h100(), call);
  ASSERT_EQ(like.size(), 1u) << "the rows of 128 masked groups";
  EXPECT_EQ(like[0].problem, smaller_capacity);
  const auto anything = [](const BestRecord&, const KernelConfig&) { return true; };
  const auto nearest = nearest_best(like, call, ArchInfo::from_cc(90), anything);
  ASSERT_TRUE(nearest);
  EXPECT_EQ(nearest->best.problem, smaller_capacity);

  EXPECT_TRUE(std::isinf(shape_distance(call, contiguous)));
  EXPECT_TRUE(std::isinf(shape_distance(contiguous, call)));
  EXPECT_FALSE(std::isinf(shape_distance(call, smaller_capacity)));
  // Even given every row, a contiguous call finds only the contiguous row of its own sizes.
  const auto all = db.list({});
  ASSERT_EQ(all.size(), 3u);
  const Problem fewer_tokens =
      grouped(make_problem(DType::bf16, Op::T, Op::N, 1536, 128 * 200, 2048), 128);
  const auto from_all = nearest_best(all, fewer_tokens, ArchInfo::from_cc(90), anything);
  ASSERT_TRUE(from_all);
  EXPECT_EQ(from_all->best.problem, contiguous);
  const auto contiguous_like = db.bests_like(h100(), contiguous);
  ASSERT_EQ(contiguous_like.size(), 1u);
  EXPECT_EQ(contiguous_like[0].problem, contiguous);
}

// Nor across accumulations: a fast float8 problem borrows only a fast winner of its scaling (of
// a near shape), a precise one only a precise winner, never the other's.
TEST_F(TuningDbTest, TheNearestTunedShapeNeverCrossesAccumulations) {
  TuningDb db(db_path());
  const Problem call = fast(float8(4096, 256, 7168));
  const Problem fewer_tokens = fast(float8(4096, 200, 7168));
  const Problem precise = float8(4096, 256, 7168);
  for (const Problem& p : {fewer_tokens, precise}) seed_problem(db, h100(), p);

  const auto like = db.bests_like(h100(), call);
  ASSERT_EQ(like.size(), 1u) << "the fast rows of tensor scaling";
  EXPECT_EQ(like[0].problem, fewer_tokens);
  const auto anything = [](const BestRecord&, const KernelConfig&) { return true; };
  const auto nearest = nearest_best(like, call, ArchInfo::from_cc(90), anything);
  ASSERT_TRUE(nearest);
  EXPECT_EQ(nearest->best.problem, fewer_tokens);

  EXPECT_TRUE(std::isinf(shape_distance(call, precise))) << "the same shape, summed otherwise";
  EXPECT_TRUE(std::isinf(shape_distance(precise, call)));
  EXPECT_FALSE(std::isinf(shape_distance(call, fewer_tokens)));
  // Even given every row, a precise call finds only the precise row, though a fast one is nearer.
  const auto all = db.list({});
  ASSERT_EQ(all.size(), 2u);
  const Problem precise_call = float8(4096, 208, 7168);
  const auto from_all = nearest_best(all, precise_call, ArchInfo::from_cc(90), anything);
  ASSERT_TRUE(from_all);
  EXPECT_EQ(from_all->best.problem, precise);
  const auto precise_like = db.bests_like(h100(), precise_call);
  ASSERT_EQ(precise_like.size(), 1u);
  EXPECT_EQ(precise_like[0].problem, precise);
}

// Nor across precisions: a tf32 problem borrows only a tf32 winner (of a near shape), an exact
// one only an exact winner, never the other's, however near its shape.
TEST_F(TuningDbTest, TheNearestTunedShapeNeverCrossesPrecisions) {
  TuningDb db(db_path());
  auto f32 = [](int64_t n) { return make_problem(DType::f32, Op::N, Op::N, 4096, n, 4096); };
  const Problem call = computed(f32(256), Precision::tf32);
  const Problem fewer_tokens = computed(f32(200), Precision::tf32);
  const Problem three = computed(f32(240), Precision::tf32x3);
  const Problem exact = f32(256);
  for (const Problem& p : {fewer_tokens, three, exact}) seed_problem(db, h100(), p);

  const auto like = db.bests_like(h100(), call);
  ASSERT_EQ(like.size(), 1u) << "the rows of its precision";
  EXPECT_EQ(like[0].problem, fewer_tokens);
  EXPECT_TRUE(std::isinf(shape_distance(call, exact))) << "the same shape, computed otherwise";
  EXPECT_TRUE(std::isinf(shape_distance(exact, call)));
  EXPECT_TRUE(std::isinf(shape_distance(call, three)));
  EXPECT_FALSE(std::isinf(shape_distance(call, fewer_tokens)));
  // Even given every row, each call finds only the rows of its own precision.
  const auto anything = [](const BestRecord&, const KernelConfig&) { return true; };
  const auto all = db.list({});
  ASSERT_EQ(all.size(), 3u);
  const auto from_all = nearest_best(all, call, ArchInfo::from_cc(90), anything);
  ASSERT_TRUE(from_all);
  EXPECT_EQ(from_all->best.problem, fewer_tokens);
  const auto exact_like = db.bests_like(h100(), f32(208));
  ASSERT_EQ(exact_like.size(), 1u);
  EXPECT_EQ(exact_like[0].problem, exact);
}

// Nor across epilogues: a fused problem borrows only a winner of its own epilogue (of a near
// shape), a plain one only a plain winner, never another's, however near its shape.
TEST_F(TuningDbTest, TheNearestTunedShapeNeverCrossesEpilogues) {
  TuningDb db(db_path());
  auto bf16 = [](int64_t n) { return make_problem(DType::bf16, Op::T, Op::N, 4096, n, 4096); };
  const Problem call = fused(bf16(256), "bias,gelu");
  const Problem fewer_tokens = fused(bf16(200), "bias,gelu");
  const Problem relu = fused(bf16(240), "bias,relu");
  const Problem plain = bf16(256);
  for (const Problem& p : {fewer_tokens, relu, plain}) seed_problem(db, h100(), p);

  const auto like = db.bests_like(h100(), call);
  ASSERT_EQ(like.size(), 1u) << "the rows of its epilogue";
  EXPECT_EQ(like[0].problem, fewer_tokens);
  const auto anything = [](const BestRecord&, const KernelConfig&) { return true; };
  const auto nearest = nearest_best(like, call, ArchInfo::from_cc(90), anything);
  ASSERT_TRUE(nearest);
  EXPECT_EQ(nearest->best.problem, fewer_tokens);
  EXPECT_EQ(nearest->config.epilogue, call.epilogue);

  EXPECT_TRUE(std::isinf(shape_distance(call, plain))) << "the same shape, another store";
  EXPECT_TRUE(std::isinf(shape_distance(plain, call)));
  EXPECT_TRUE(std::isinf(shape_distance(call, relu))) << "another activation";
  EXPECT_FALSE(std::isinf(shape_distance(call, fewer_tokens)));
  // Even given every row, each call finds only the rows of its own epilogue.
  const auto all = db.list({});
  ASSERT_EQ(all.size(), 3u);
  const auto from_all = nearest_best(all, call, ArchInfo::from_cc(90), anything);
  ASSERT_TRUE(from_all);
  EXPECT_EQ(from_all->best.problem, fewer_tokens);
  const Problem plain_call = bf16(208);
  const auto plain_from_all = nearest_best(all, plain_call, ArchInfo::from_cc(90), anything);
  ASSERT_TRUE(plain_from_all);
  EXPECT_EQ(plain_from_all->best.problem, plain);
  const auto plain_like = db.bests_like(h100(), plain_call);
  ASSERT_EQ(plain_like.size(), 1u);
  EXPECT_EQ(plain_like[0].problem, plain);
}

}  // namespace
}  // namespace gemmtune
