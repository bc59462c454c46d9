// A family that exists only in tests (mixed_family.cpp: f16 * bf16 -> f32, its own parameter
// struct and kernel argument) goes the whole way a production family goes: enumerated, tuned on
// the GPU, stored, listed by gemm-db, served by the library. Nothing outside tests/ knows it.
#include <nlohmann/json.hpp>

#include "gemmtune/gemmtune.hpp"
#include "gpu_support.hpp"
#include "mixed_family.hpp"

namespace gemmtune {
namespace {

class TestFamily : public test::TuneTest {};

TEST_F(TestFamily, IsEnumeratedTunedStoredListedAndServed) {
  // The worker that measures candidates must know the family: the test worker links it too.
  setenv("GEMMTUNE_WORKER", test::tool("gemmtune-test-worker").c_str(), 1);
  Problem p = make_problem(test::mixed_family_types(), Op::T, Op::N, 333, 97, 129);
  p.reads_c = true;  // beta != 0: the kernel reads C in f32 and writes D over it

  // Enumerated: it is the family for these types, on this GPU, with a space of its own.
  const std::vector<const Family*> families = families_for(p, device_.arch);
  ASSERT_EQ(families.size(), 1u);
  ASSERT_EQ(families.front(), &test::mixed_family());
  EXPECT_GT(test::mixed_family().prune(p, device_.arch).valid.size(), 3u);

  // Tuned: every candidate verified against the reference (f16 and bf16 read as such, f32 out)
  // and timed; cuBLAS has no such GEMM and says so.
  options_.beta = 0.5f;
  const TuneReport r = tune(p, options_);
  ASSERT_TRUE(r.best.has_value()) << r.error;
  EXPECT_EQ(r.best->config.family, "mixed_f16_bf16");
  EXPECT_GT(r.measured.size(), 3u);
  for (const CandidateRecord& c : r.measured)
    EXPECT_EQ(c.status, CandidateStatus::ok) << c.kernel_name << ": " << c.message;
  EXPECT_LT(r.baseline_ms, 0);
  EXPECT_NE(r.baseline_name.find("no f16*bf16->f32 GEMM"), std::string::npos) << r.baseline_name;

  // Stored, with its types.
  {
    const TuningDb db(options_.db_path);
    const auto best = db.best(device_.key, p);
    ASSERT_TRUE(best.has_value());
    EXPECT_EQ(best->winner.kernel_name, r.best->kernel_name);
    EXPECT_EQ(best->problem.types, test::mixed_family_types());
  }

  // Listed by gemm-db, which does not have the family (it says so rather than call it stale).
  const auto listed =
      test::run_command(test::tool("gemm-db") + " list --json --db " + options_.db_path.string());
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  const nlohmann::json rows = nlohmann::json::parse(listed.output);
  ASSERT_EQ(rows.size(), 1u) << listed.output;
  EXPECT_EQ(rows[0]["problem"]["types"], "f16*bf16->f32") << listed.output;
  EXPECT_EQ(rows[0]["winner"]["config"]["family"], "mixed_f16_bf16") << listed.output;

  // Served by the library: the tuned kernel, and a correct result through the public API.
  Options lib_options;
  lib_options.db_path = options_.db_path.string();
  Library lib(lib_options);
  const Selection sel = lib.select(p);
  EXPECT_EQ(sel.source, Source::tuned) << sel.note;
  EXPECT_EQ(sel.kernel, r.best->kernel_name);
  const Verdict v = check_library(lib, p, 1.25f, 0.5f, 9);
  EXPECT_TRUE(v.ok) << v.message;
  unsetenv("GEMMTUNE_WORKER");
}

}  // namespace
}  // namespace gemmtune
