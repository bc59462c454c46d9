// gemm-db report --html: one self-contained page with a plot per GPU view and per problem,
// rendered in headless Chromium to check that every plot was drawn.
// GEMMTUNE_REPORT_SCREENSHOT=FILE.png keeps a screenshot of the page (docs/report.png).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "gemmtune/cache/tuning_db.hpp"
#include "gemmtune/generator/family.hpp"
#include "gemmtune/generator/util.hpp"
#include "support.hpp"

namespace gemmtune {
namespace {

namespace fs = std::filesystem;
using test::run_command;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = text.find(from, at)) != std::string::npos; at += to.size())
    text.replace(at, from.size(), to);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

int count(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = 0; (at = text.find(part, at)) != std::string::npos; at += part.size()) ++n;
  return n;
}

std::string quoted(const fs::path& path) {
  return fmt::format("'{}'", path.string());
}

// The chromium command line of the issue: headless, no network of its own, a fresh profile.
std::string chromium(const fs::path& profile, const std::string& action, const fs::path& page) {
  return fmt::format(
      "timeout 180 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
      "--disable-background-networking --disable-component-update --disable-sync "
      "--user-data-dir={} {} file://{} 2>/dev/null",
      quoted(profile), action, page.string());
}

// The fixture's rows name only tile sizes. Import takes a current row only when its config is a
// valid point of its family for its problem, so each "@family" row gets one, a different one per
// candidate as a tuning run records them, with the kernel name that goes with it.
void make_configs_real(nlohmann::json& document) {
  for (auto& e : document["entries"]) {
    const auto& q = e["problem"];
    Problem p = make_problem(
        q.contains("types") ? parse_data_types(q["types"].get<std::string>())
                            : DataTypes::uniform(parse_data_type(q["dtype"].get<std::string>())),
        parse_op(q["layout"].get<std::string>()[0]), parse_op(q["layout"].get<std::string>()[1]),
        q["m"], q["n"], q["k"]);
    p.lda = q["lda"], p.ldb = q["ldb"], p.ldc = q["ldc"], p.align = q["align"];
    const ArchInfo arch = ArchInfo::from_cc(e["device"]["cc"]);
    std::map<std::string, std::string> renamed;
    size_t next = 0;
    for (auto& c : e["candidates"]) {
      if (!c["template_version"].get<std::string>().starts_with("@")) continue;
      const Family& family = find_family(c["config"]["family"].get<std::string>());
      // Pruning a skinny problem's space takes seconds: once per family, problem and GPU (it was
      // once per candidate, 12-24 times, ~230 s a test).
      static std::map<std::string, std::vector<KernelConfig>> valid_of;
      auto [at, added] =
          valid_of.try_emplace(fmt::format("{} {} {}", family.name(), p.describe(), arch.name()));
      if (added) at->second = family.prune(p, arch).valid;
      const std::vector<KernelConfig>& valid = at->second;
      ASSERT_GT(valid.size(), next) << p.describe();
      const KernelConfig& point = valid[next++];
      renamed[c["kernel_name"]] = family.kernel_name(point);
      c["kernel_name"] = family.kernel_name(point);
      c["config"] = nlohmann::json::parse(point.to_json());
    }
    for (auto& b : e["best"])
      if (renamed.count(b["kernel_name"])) b["kernel_name"] = renamed[b["kernel_name"]];
  }
}

// The demo database (tests/data/report-demo.json: illustrative numbers), with valid configs and
// this build's template versions in place of the fixture's "@family", so that its rows are current.
class GemmDbReport : public ::testing::Test {
 protected:
  void SetUp() override {
    nlohmann::json document = nlohmann::json::parse(
        read_text(fs::path(GEMMTUNE_SOURCE_DIR) / "tests/data/report-demo.json"));
    make_configs_real(document);
    std::string json = document.dump();
    for (const char* family : {"simt", "wgmma_sm90"})
      replace_all(json, fmt::format("\"@{}\"", family),
                  fmt::format("\"{}\"", template_version(find_family(family))));
    TuningDb(db()).import_json(json);
  }

  fs::path db() const { return dir_ / "tuning.db"; }
  fs::path page() const { return dir_ / "report.html"; }

  test::CommandResult report(const std::string& extra = "") const {
    return run_command(fmt::format("{} --db {} report --html {} {}", test::tool("gemm-db"),
                                   quoted(db()), quoted(page()), extra));
  }

  // Stores `p` as tuned on an H100: one measured candidate (simt's default made for p's types,
  // scaling, ops and epilogue, so that the row needs no family of its kind) as its best.
  void store_tuned(const Problem& p, const std::string& kernel, double ms, double baseline_ms) {
    const Problem f32 = make_problem(DType::f32, Op::N, Op::N, 256, 256, 256);
    const Family& simt = find_family("simt");
    CandidateRecord c;
    c.kernel_name = kernel;
    c.template_version = template_version(simt);
    c.config = simt.default_config(f32, ArchInfo::from_cc(90));
    c.config.types = p.types;
    c.config.scaling = p.scaling;
    c.config.op_a = p.op_a;
    c.config.op_b = p.op_b;
    c.config.epilogue = p.epilogue;
    c.status = CandidateStatus::ok;
    c.median_ms = c.min_ms = c.max_ms = ms;
    c.tflops = p.flops() / (ms * 1e9);
    TuningDb tdb(db());
    const DeviceKey h100{"NVIDIA H100 80GB HBM3", 90, 132, 13000, "13.0"};
    tdb.record(h100, p, c);
    tdb.set_best(h100, p, c.kernel_name, c.template_version, baseline_ms, true);
  }

  // The report chosen by `filter` is of one problem, tuned on one GPU, labelled `label` (as the
  // HTML escapes it) in its own section and in the GPU's table.
  void expect_one_problem_labelled(const std::string& filter, const std::string& label) const {
    const auto run = report(filter);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_TRUE(contains(run.output, "1 GPUs, 1 problems, 1 candidates")) << run.output;
    const std::string html = read_text(page());
    EXPECT_TRUE(contains(html, fmt::format("<h4>{}</h4>", label))) << html.substr(0, 4000);
    EXPECT_GE(count(html, label), 2) << "the GPU's table names it too: " << label;
  }

  test::TempDir dir_;
};

TEST_F(GemmDbReport, WritesOneSelfContainedPage) {
  const auto run = report();
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // 2 GPUs; per GPU two plots, and one per problem with a candidate that passed: 10 + 4.
  // The stale row's 6 candidates are of old templates: shown as the stale row only.
  EXPECT_TRUE(contains(run.output, "2 GPUs, 14 problems, 257 candidates, 18 charts")) << run.output;
  const std::string html = read_text(page());
  // Nothing is fetched: no external scripts, styles, images or frames.
  EXPECT_FALSE(std::regex_search(html, std::regex(R"(\b(src|href)\s*=)"))) << "external resource";
  EXPECT_FALSE(contains(html, "<link"));
  EXPECT_TRUE(contains(html, "Chart.js v3")) << "Chart.js is not inlined";
  EXPECT_EQ(count(html, "<canvas"), 18);
  for (const char* expected :
       {"NVIDIA H100 80GB HBM3", "NVIDIA H200", "bf16 tn 11008x4096x4096", "f32 nn 4096x4096x4096",
        "winner: ", "faster than the runner-up", "no winner yet",  // the unfinished problem
        "Stale results", "0f1e2d3c4b5a6978",                       // the stale row
        "failed candidates", "out_of_resources"})
    EXPECT_TRUE(contains(html, expected)) << expected;
}

TEST_F(GemmDbReport, FiltersChooseWhatThePageShows) {
  const auto run = report("--device h200 --dtype bf16");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "1 GPUs, 3 problems")) << run.output;
  const std::string html = read_text(page());
  EXPECT_FALSE(contains(html, "NVIDIA H100"));
  EXPECT_FALSE(contains(html, "<h4>f16 nn 8192x8192x8192"));
  EXPECT_TRUE(contains(html, "<h4>bf16 nn 8192x8192x8192"));
}

// --types (and --dtype, its uniform form) and --scaling choose problems; a mixed-types problem is
// labelled with its types (escaped: "->" is HTML).
TEST_F(GemmDbReport, TypesAndScalingChooseAndLabelTheProblems) {
  auto run = report("--device h200 --types bf16");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "1 GPUs, 3 problems")) << run.output;
  run = report("--scaling none");
  EXPECT_TRUE(contains(run.output, "2 GPUs, 14 problems")) << run.output;
  run = report("--types 'f16*bf16->f32'");
  EXPECT_TRUE(contains(run.output, "0 GPUs, 0 problems")) << run.output;
  EXPECT_TRUE(contains(read_text(page()), "No tuning results match"));

  const Problem mixed =
      make_problem(parse_data_types("f16*bf16->f32"), Op::N, Op::N, 256, 256, 256);
  const Problem f32 = make_problem(DType::f32, Op::N, Op::N, 256, 256, 256);
  const ArchInfo arch = ArchInfo::from_cc(90);
  const Family& simt = find_family("simt");
  CandidateRecord c;
  c.kernel_name = "gemm_mixed_256";
  c.template_version = template_version(simt);
  c.config = simt.default_config(f32, arch);
  c.config.types = mixed.types;
  c.status = CandidateStatus::ok;
  c.median_ms = c.min_ms = c.max_ms = 0.01;
  c.tflops = mixed.flops() / (c.median_ms * 1e9);
  {
    TuningDb tdb(db());
    const DeviceKey h100{"NVIDIA H100 80GB HBM3", 90, 132, 13000, "13.0"};
    tdb.record(h100, mixed, c);
    tdb.set_best(h100, mixed, c.kernel_name, c.template_version, 0.012, true);
  }
  run = report("--types 'f16*bf16->f32'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "1 GPUs, 1 problems, 1 candidates")) << run.output;
  const std::string html = read_text(page());
  EXPECT_TRUE(contains(html, "<h4>f16*bf16-&gt;f32 nn 256x256x256</h4>")) << html.substr(0, 4000);
  EXPECT_FALSE(contains(html, "bf16 tn 11008x4096x4096"));
  run = report("--dtype f32");
  EXPECT_FALSE(contains(read_text(page()), "gemm_mixed_256")) << "--dtype f32 is uniform f32";
}

// A float8 problem is labelled with its types and scaling, in the GPU's table and its own
// section, and chosen by --scaling.
TEST_F(GemmDbReport, Float8ProblemsShowTheirScaling) {
  Problem fp8 = make_problem(parse_data_types("e4m3*e4m3->bf16"), Op::T, Op::N, 2112, 64, 7168);
  fp8.scaling = Scaling::block;
  store_tuned(fp8, "gemm_fp8_block_2112", 0.02, 0.025);
  expect_one_problem_labelled("--scaling block",
                              "e4m3*e4m3-&gt;bf16 tn 2112x64x7168 scaling=block");
  EXPECT_TRUE(contains(read_text(page()), "gemm_fp8_block_2112"));
  auto run = report("--dtype e4m3 --scaling tensor");
  EXPECT_TRUE(contains(run.output, "0 GPUs, 0 problems")) << run.output;
  run = report("--dtype e4m3");
  EXPECT_TRUE(contains(run.output, "1 GPUs, 1 problems")) << run.output;
  run = report();
  EXPECT_TRUE(contains(run.output, " GPUs, 15 problems")) << run.output;
}

// A grouped problem is labelled with its groups, in the GPU's table and its own section, and
// chosen by --groups.
TEST_F(GemmDbReport, GroupedProblemsShowTheirGroups) {
  Problem moe = make_problem(DType::bf16, Op::T, Op::N, 1536, 8 * 256, 2048);
  moe.groups = 8;
  store_tuned(moe, "gemm_moe_1536", 0.03, 0.035);
  expect_one_problem_labelled("--groups 8", "bf16 tn 1536x2048x2048 groups=8");
  auto run = report("--groups 0");
  EXPECT_TRUE(contains(run.output, "2 GPUs, 14 problems")) << run.output;
  run = report();
  EXPECT_TRUE(contains(run.output, " GPUs, 15 problems")) << run.output;
}

// A masked grouped problem is labelled "groups=G masked", as describe() says it, and chosen by
// --group-layout (the demo's problems are all of one GEMM: no layout).
TEST_F(GemmDbReport, MaskedProblemsShowTheirGroupLayout) {
  Problem decode = make_problem(DType::bf16, Op::T, Op::N, 1536, 8 * 256, 2048);
  decode.groups = 8;
  decode.group_layout = GroupLayout::masked;
  store_tuned(decode, "gemm_decode_1536", 0.03, 0.035);
  expect_one_problem_labelled("--group-layout masked", "bf16 tn 1536x2048x2048 groups=8 masked");
  const auto run = report("--group-layout contiguous");
  EXPECT_TRUE(contains(run.output, "0 GPUs, 0 problems")) << run.output;
}

// --accum chooses problems by their accumulation: the demo's are all precise (no float8).
TEST_F(GemmDbReport, AccumChoosesTheProblems) {
  auto run = report("--accum precise");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "2 GPUs, 14 problems")) << run.output;
  EXPECT_FALSE(contains(read_text(page()), "accum=")) << "precise is not written out";
  run = report("--accum fast");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(contains(run.output, "0 GPUs, 0 problems")) << run.output;
  EXPECT_TRUE(contains(read_text(page()), "No tuning results match"));
  run = report("--accum quick");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, "unknown accumulation 'quick' (expected precise or fast)"))
      << run.output;
}

// A float8 problem of fast accumulation is labelled "accum=fast" after its scaling, as describe()
// says it, and chosen by --accum. It needs the database to store the accumulation in the
// problem's key (schema version 7): before that, the problem is stored as the precise one.
TEST_F(GemmDbReport, FastAccumulationProblemsShowTheirAccumulation) {
  if (TuningDb::kSchemaVersion < 7)
    GTEST_SKIP() << "the database stores no accumulation before schema version 7";
  Problem fast = make_problem(parse_data_types("e4m3*e4m3->bf16"), Op::T, Op::N, 2112, 64, 7168);
  fast.scaling = Scaling::row;
  fast.accumulation = Accumulation::fast;
  store_tuned(fast, "gemm_fp8_fast_2112", 0.02, 0.025);
  expect_one_problem_labelled("--accum fast",
                              "e4m3*e4m3-&gt;bf16 tn 2112x64x7168 scaling=row accum=fast");
  EXPECT_TRUE(contains(read_text(page()), "gemm_fp8_fast_2112"));
  const auto run = report("--accum precise");
  EXPECT_TRUE(contains(run.output, "2 GPUs, 14 problems")) << run.output;
}

// An f32 problem computed with tf32 is labelled "precision=tf32" after its types, as describe()
// says it, and chosen by --precision (the demo's problems are all exact).
TEST_F(GemmDbReport, Tf32ProblemsShowTheirPrecision) {
  Problem tf32 = make_problem(DType::f32, Op::N, Op::N, 4096, 512, 1024);
  tf32.precision = Precision::tf32;
  store_tuned(tf32, "gemm_tf32_4096", 0.02, 0.025);
  expect_one_problem_labelled("--precision tf32", "f32 nn 4096x512x1024 precision=tf32");
  EXPECT_TRUE(contains(read_text(page()), "gemm_tf32_4096"));
  auto run = report("--precision exact");
  EXPECT_TRUE(contains(run.output, "2 GPUs, 14 problems")) << run.output;
  EXPECT_FALSE(contains(read_text(page()), "precision=tf32")) << "the tf32 one is left out";
  run = report("--precision 3xtf32");
  EXPECT_TRUE(contains(run.output, "0 GPUs, 0 problems")) << run.output;
}

// A problem whose store applies an epilogue is labelled "epilogue=bias,gelu" after its shape, as
// describe() says it, and chosen by --epilogue (the demo's problems have none).
TEST_F(GemmDbReport, FusedProblemsShowTheirEpilogue) {
  Problem gelu = make_problem(DType::bf16, Op::T, Op::N, 4096, 8, 11008);
  gelu.epilogue = parse_epilogue("bias,gelu");
  store_tuned(gelu, "gemm_bias_gelu_4096", 0.03, 0.035);
  expect_one_problem_labelled("--epilogue gelu,bias", "bf16 tn 4096x8x11008 epilogue=bias,gelu");
  EXPECT_TRUE(contains(read_text(page()), "gemm_bias_gelu_4096"));
  auto run = report("--epilogue none");
  EXPECT_TRUE(contains(run.output, "2 GPUs, 14 problems")) << run.output;
  EXPECT_FALSE(contains(read_text(page()), "epilogue=")) << "none is not written out";
  run = report("--epilogue swish");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, "unknown epilogue part 'swish'")) << run.output;
}

TEST_F(GemmDbReport, BadUsageIsOneLineAndANonZeroExit) {
  auto run = run_command(fmt::format("{} --db {} report", test::tool("gemm-db"), quoted(db())));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(contains(run.output, "--html is required")) << run.output;
  run = run_command(fmt::format("{} --db {} report --html {}", test::tool("gemm-db"),
                                quoted(dir_ / "none.db"), quoted(page())));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "no tuning database at")) << run.output;
  run = run_command(fmt::format("{} --db {} report --html {}", test::tool("gemm-db"), quoted(db()),
                                quoted(dir_ / "no/such/folder/r.html")));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(run.output, "cannot write")) << run.output;
}

TEST_F(GemmDbReport, ChromiumDrawsEveryPlot) {
  if (run_command("command -v chromium").exit_code != 0)
    GTEST_SKIP() << "no chromium here (tools/setup.sh installs it)";
  ASSERT_EQ(report().exit_code, 0);
  const auto dom = run_command(chromium(dir_ / "profile", "--dump-dom", page()), false);
  ASSERT_EQ(dom.exit_code, 0) << dom.output.substr(0, 2000);
  EXPECT_FALSE(contains(dom.output, "data-report-error"))
      << dom.output.substr(dom.output.find("data-report-error"), 300);
  // The page's script counts the charts it made and the pixels each canvas got.
  EXPECT_TRUE(contains(dom.output, "data-charts=\"18\"")) << "charts were not all made";
  const std::regex painted(R"re(data-painted="(\d+)")re");
  int canvases = 0;
  for (auto it = std::sregex_iterator(dom.output.begin(), dom.output.end(), painted);
       it != std::sregex_iterator(); ++it, ++canvases)
    EXPECT_GT(std::stoi((*it)[1]), 500) << "canvas " << canvases << " is (nearly) blank";
  EXPECT_EQ(canvases, 18);

  if (const auto keep = env_var("GEMMTUNE_REPORT_SCREENSHOT")) {
    const auto shot = run_command(chromium(
        dir_ / "profile2",
        "--hide-scrollbars --window-size=1240,2300 --screenshot=" + fs::absolute(*keep).string(),
        page()));
    EXPECT_EQ(shot.exit_code, 0) << shot.output;
    EXPECT_TRUE(fs::exists(*keep));
  }
}

}  // namespace
}  // namespace gemmtune
