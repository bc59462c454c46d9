// gemm-db, run as a user runs it: readable output, JSON for scripts, and one clear line with a
// non-zero exit for every kind of bad input, never a crash.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "cli_common.hpp"
#include "gemmtune/cache/tuning_db.hpp"
#include "gemmtune/generator/family.hpp"
#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/device.hpp"
#include "gemmtune/runtime/driver.hpp"
#include "support.hpp"

namespace gemmtune {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

using test::TempDir;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void write_text_file(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

struct Outcome {
  int exit_code = -1;
  int signal = 0;  // the signal that killed gemm-db, if one did
  std::string out, err;
};

std::string quoted(const std::string& arg) {
  std::string out = "'";
  for (char ch : arg) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

// An H100 under this machine's NVRTC and driver (when it has one): gemm-db lists its rows as
// current here.
DeviceKey this_machines_h100() {
  int driver = 13000;
  if (cu::available()) cu::api().cuDriverGetVersion(&driver);
  return {"NVIDIA H100 80GB HBM3", 90, 132, driver, nvrtc_version()};
}
const DeviceKey kH100 = this_machines_h100();

// A valid point of the family that serves the problem on an H100 (simt for f32, wgmma for
// f16): rows that the library and an import accept. The family's default, a point of its space
// (pruning the whole wgmma space for every row made each test take 12 s).
KernelConfig config_for(const Problem& p) {
  const ArchInfo arch = ArchInfo::from_cc(90);
  return families_for(p, arch).front()->default_config(p, arch);
}

std::string version_for(const Problem& p) {
  return template_version(find_family(config_for(p).family));
}

CandidateRecord candidate(const Problem& p, const std::string& name, CandidateStatus status,
                          double median_ms) {
  CandidateRecord c;
  c.kernel_name = name;
  c.template_version = version_for(p);
  c.config = config_for(p);
  c.status = status;
  c.median_ms = median_ms;
  c.min_ms = median_ms;
  c.max_ms = median_ms;
  c.tflops = median_ms > 0 ? p.flops() / (median_ms * 1e9) : -1;
  c.registers = 96;
  c.message = status == CandidateStatus::ok ? "" : "ptxas: too much shared data";
  return c;
}

class GemmDbCli : public ::testing::Test {
 protected:
  void SetUp() override {
    TuningDb db(db_path());
    for (const Problem& p : {f32_2048, f16_1024}) {
      db.record(kH100, p, candidate(p, "gemm_simt_fast_" + p.shape(), CandidateStatus::ok, 2.0));
      db.record(kH100, p, candidate(p, "gemm_simt_slow_" + p.shape(), CandidateStatus::ok, 2.5));
      db.record(kH100, p,
                candidate(p, "gemm_simt_broken_" + p.shape(), CandidateStatus::compile_error, -1));
      db.set_best(kH100, p, "gemm_simt_fast_" + p.shape(), version_for(p), 2.5, true);
    }
  }

  fs::path db_path() const { return dir_.path() / "tuning.db"; }
  fs::path file(const std::string& name) const { return dir_.path() / name; }

  // Stores candidate c of p as its complete best on the H100, cuBLAS at cublas_ms.
  void store_best(const Problem& p, const CandidateRecord& c, double cublas_ms) const {
    TuningDb db(db_path());
    db.record(kH100, p, c);
    db.set_best(kH100, p, c.kernel_name, c.template_version, cublas_ms, true);
  }

  // Runs gemm-db on the test database; stdout and stderr kept apart.
  Outcome gemm_db(const std::vector<std::string>& args, const fs::path& db = {}) const {
    const fs::path err = dir_.path() / "stderr.txt";
    // exec: a crash of gemm-db shows as a signal in the status, not as the shell's exit code.
    std::string command =
        fmt::format("exec {} --db {} 2>{}", quoted(test::tool("gemm-db")),
                    quoted((db.empty() ? db_path() : db).string()), quoted(err.string()));
    for (const auto& arg : args) command += fmt::format(" {}", quoted(arg));
    Outcome run;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr) return run;
    char buffer[4096];
    for (size_t got; (got = fread(buffer, 1, sizeof buffer, pipe)) > 0;)
      run.out.append(buffer, got);
    const int status = ::pclose(pipe);
    if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) run.signal = WTERMSIG(status);
    run.err = read_text(err);
    return run;
  }

  std::string export_all() const { return gemm_db({"export"}).out; }

  // Each case (gemm-db's arguments, and words of the error) is refused as bad usage: exit code 2,
  // "gemm-db: error: " and the words on stderr.
  using UsageCases = std::vector<std::pair<std::vector<std::string>, std::string>>;
  void expect_usage_errors(const UsageCases& cases) const {
    for (const auto& [args, says] : cases) {
      const Outcome bad = gemm_db(args);
      EXPECT_EQ(bad.exit_code, 2) << args[1] << ": " << bad.err;
      EXPECT_NE(bad.err.find("gemm-db: error: "), std::string::npos) << bad.err;
      EXPECT_NE(bad.err.find(says), std::string::npos) << bad.err;
    }
  }

  const Problem f32_2048 = make_problem(DType::f32, Op::N, Op::N, 2048, 2048, 2048);
  const Problem f16_1024 = make_problem(DType::f16, Op::T, Op::N, 1024, 1024, 1024);
  TempDir dir_;
};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_F(GemmDbCli, ListShowsEveryBestWithItsRatioToCublas) {
  const Outcome run = gemm_db({"list"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(contains(run.out, "NVIDIA H100 80GB HBM3"));
  EXPECT_TRUE(contains(run.out, "gemm_simt_fast_2048x2048x2048"));
  EXPECT_TRUE(contains(run.out, "gemm_simt_fast_1024x1024x1024"));
  EXPECT_TRUE(contains(run.out, "1.25x")) << run.out;  // cuBLAS 2.5 ms / ours 2.0 ms
  EXPECT_TRUE(contains(run.out, "current"));
  EXPECT_TRUE(run.err.empty()) << run.err;
}

TEST_F(GemmDbCli, ListFiltersAndPrintsJson) {
  const Outcome run = gemm_db({"list", "--dtype", "f16", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Json rows = Json::parse(run.out);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["winner"]["kernel_name"], "gemm_simt_fast_1024x1024x1024");
  EXPECT_EQ(rows[0]["problem"]["layout"], "tn");
  EXPECT_DOUBLE_EQ(rows[0]["cublas_ratio"].get<double>(), 1.25);
  EXPECT_EQ(rows[0]["current"], true);
  EXPECT_EQ(Json::parse(gemm_db({"--json", "list", "--m", "4096"}).out).size(), 0u);
}

// The same shape tuned with beta != 0 is a problem of its own: listed apart, marked, filtered.
TEST_F(GemmDbCli, ProblemsThatReadCAreListedApartAndFilteredByBeta) {
  Problem reads_c = f32_2048;
  reads_c.reads_c = true;
  {
    TuningDb db(db_path());
    db.record(kH100, reads_c, candidate(reads_c, "gemm_simt_beta1", CandidateStatus::ok, 2.2));
    db.set_best(kH100, reads_c, "gemm_simt_beta1", version_for(reads_c), 2.5, true);
  }
  const Outcome all = gemm_db({"list"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_TRUE(contains(all.out, "2048x2048x2048 beta!=0")) << all.out;
  const Json reading = Json::parse(gemm_db({"list", "--beta", "1", "--json"}).out);
  ASSERT_EQ(reading.size(), 1u);
  EXPECT_EQ(reading[0]["winner"]["kernel_name"], "gemm_simt_beta1");
  EXPECT_EQ(reading[0]["problem"]["reads_c"], true);
  const Json not_reading =
      Json::parse(gemm_db({"list", "--beta", "0", "--m", "2048", "--json"}).out);
  ASSERT_EQ(not_reading.size(), 1u);
  EXPECT_EQ(not_reading[0]["winner"]["kernel_name"], "gemm_simt_fast_2048x2048x2048");
  // delete takes only the class asked for.
  const Outcome removed = gemm_db({"delete", "--m", "2048", "--beta", "0.5"});
  ASSERT_EQ(removed.exit_code, 0) << removed.err;
  const Json left = Json::parse(gemm_db({"list", "--m", "2048", "--json"}).out);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0]["problem"]["reads_c"], false);
}

TEST_F(GemmDbCli, ShowRanksCandidatesAndSaysWhyTheWinnerWon) {
  const Outcome run = gemm_db({"show", "--m", "2048", "--n", "2048", "--k", "2048"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const size_t fast = run.out.find("gemm_simt_fast_2048");
  const size_t slow = run.out.find("gemm_simt_slow_2048");
  const size_t broken = run.out.find("gemm_simt_broken_2048");
  ASSERT_NE(broken, std::string::npos) << run.out;
  EXPECT_LT(fast, slow);
  EXPECT_LT(slow, broken);
  EXPECT_TRUE(contains(run.out, "compile_error"));
  EXPECT_TRUE(contains(run.out, "ptxas: too much shared data"));
  EXPECT_TRUE(contains(run.out, "25.0% faster than the runner-up gemm_simt_slow_2048")) << run.out;
  EXPECT_TRUE(contains(run.out, "1.25x cuBLAS"));
  EXPECT_FALSE(contains(run.out, "1024x1024x1024"));
}

// After a template change the earlier candidates are stale: show leaves them out and says how
// many, and --all-versions shows them.
TEST_F(GemmDbCli, ShowCountsTheStaleCandidatesItLeavesOut) {
  {
    TuningDb db(db_path());
    CandidateRecord old =
        candidate(f32_2048, "gemm_simt_older_templates", CandidateStatus::ok, 1.5);
    old.template_version = "an-earlier-template";
    db.record(kH100, f32_2048, old);
  }
  const Outcome run = gemm_db({"show", "--m", "2048", "--n", "2048", "--k", "2048"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_FALSE(contains(run.out, "gemm_simt_older_templates")) << run.out;
  EXPECT_TRUE(contains(
      run.out, "1 candidate measured with other templates left out (--all-versions shows them)"))
      << run.out;
  const Outcome all =
      gemm_db({"show", "--m", "2048", "--n", "2048", "--k", "2048", "--all-versions"});
  EXPECT_TRUE(contains(all.out, "gemm_simt_older_templates")) << all.out;
  EXPECT_FALSE(contains(all.out, "left out")) << all.out;
}

TEST_F(GemmDbCli, ShowJsonListsTheCandidatesInOrder) {
  const Outcome run = gemm_db({"show", "--m", "1024", "--n", "1024", "--k", "1024", "--layout",
                               "tn", "--dtype", "f16", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Json shown = Json::parse(run.out);
  ASSERT_EQ(shown.size(), 1u);
  ASSERT_EQ(shown[0]["candidates"].size(), 3u);
  EXPECT_EQ(shown[0]["candidates"][0]["status"], "ok");
  EXPECT_EQ(shown[0]["candidates"][2]["status"], "compile_error");
  EXPECT_EQ(shown[0]["best"]["winner"]["kernel_name"], "gemm_simt_fast_1024x1024x1024");
}

TEST_F(GemmDbCli, StatsCountsTheRows) {
  const Outcome text = gemm_db({"stats"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(contains(text.out, "schema version"));
  EXPECT_TRUE(contains(text.out, "6 (ok 4, compile_error 2)")) << text.out;
  const Json stats = Json::parse(gemm_db({"stats", "--json"}).out);
  EXPECT_EQ(stats["schema_version"], TuningDb::kSchemaVersion);
  EXPECT_EQ(stats["devices"], 1);
  EXPECT_EQ(stats["problems"], 2);
  EXPECT_EQ(stats["candidates"], 6);
  EXPECT_EQ(stats["by_status"]["compile_error"], 2);
  EXPECT_EQ(stats["best"], 2);
  EXPECT_GT(stats["file_bytes"].get<int64_t>(), 0);
}

TEST_F(GemmDbCli, ExportThenImportElsewhereMergesEverything) {
  const fs::path exported = file("export.json");
  ASSERT_EQ(gemm_db({"export", "--output", exported.string()}).exit_code, 0);
  const Outcome into_new = gemm_db({"import", exported.string()}, file("other.db"));
  ASSERT_EQ(into_new.exit_code, 0) << into_new.err;
  EXPECT_TRUE(contains(into_new.out, "6 candidates and 2 best rows added or updated"))
      << into_new.out;
  EXPECT_EQ(gemm_db({"export"}, file("other.db")).out, read_text(exported));
  const Json summary = Json::parse(gemm_db({"import", exported.string(), "--json"}).out);
  EXPECT_EQ(summary["candidates"], 0) << "nothing is newer the second time";
}

// What a model ships: the rows of its recorded workload only, found as gemm-tune tunes the lines.
TEST_F(GemmDbCli, ExportOfAShapesFileHasExactlyItsProblems) {
  write_text_file(file("workload.txt"), "# recorded\n1024 1024 1024 f16 tn\n4096 8 4096 bf16 tn\n");
  const Outcome run = gemm_db({"export", "--shapes", file("workload.txt").string()});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const Json entries = Json::parse(run.out)["entries"];
  ASSERT_EQ(entries.size(), 1u);  // 2048^3 f32 is not in the workload; 4096x8x4096 was not tuned
  EXPECT_EQ(entries[0]["problem"]["m"], 1024);
  EXPECT_EQ(entries[0]["problem"]["layout"], "tn");
  EXPECT_EQ(entries[0]["candidates"].size(), 3u);
  const Outcome missing = gemm_db({"export", "--shapes", file("none.txt").string()});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_TRUE(contains(missing.err, "none.txt")) << missing.err;
}

// A database on a read-only file system (a model's shared folder) is read where SQLite cannot
// make WAL's -shm file beside it. Needs a private mount namespace (unshare -m): skipped without.
TEST_F(GemmDbCli, ADatabaseOnAReadOnlyFileSystemIsRead) {
  const fs::path mount = file("ro");
  fs::create_directories(mount);
  const std::string script = fmt::format(
      "mount -t tmpfs none {0} && cp {1} {0}/t.db && mount -o remount,ro {0} && "
      "{2} --db {0}/t.db list --json && {3} --status --db {0}/t.db",
      quoted(mount.string()), quoted(db_path().string()), quoted(test::tool("gemm-db")),
      quoted(test::tool("gemm-tune")));
  const auto r = test::run_command("unshare -m sh -c " + quoted(script));
  if (r.exit_code != 0 && (contains(r.output, "unshare") || contains(r.output, "mount:")))
    GTEST_SKIP() << "no private mount namespace here: " << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "gemm_simt_fast_2048x2048x2048")) << r.output;
  EXPECT_TRUE(contains(r.output, "0 entries")) << r.output;
}

TEST_F(GemmDbCli, DeleteRemovesTheMatchingProblems) {
  const Outcome run = gemm_db({"delete", "--dtype", "f16"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(contains(run.out, "deleted 1 tuned problem")) << run.out;
  const std::string listed = gemm_db({"list"}).out;
  EXPECT_FALSE(contains(listed, "1024x1024x1024"));
  EXPECT_TRUE(contains(listed, "2048x2048x2048"));
  EXPECT_EQ(Json::parse(gemm_db({"delete", "--all", "--json"}).out)["deleted"], 1);
}

// Bad input: one "gemm-db: error:" line, a non-zero exit, no crash, and no change to the data.
struct BadInput {
  std::string name;
  std::vector<std::string> args;
  int exit_code;
  std::string says;
};

TEST_F(GemmDbCli, BadInputGivesOneClearErrorAndChangesNothing) {
  write_text_file(file("malformed.json"), "{\"format\": \"gemmtune-db\", \"entries\": [");
  Json spoiled = Json::parse(export_all());
  spoiled["entries"][1]["candidates"][0]["status"] = "okk";
  write_text_file(file("bad_status.json"), spoiled.dump());
  const std::string before = export_all();

  const std::vector<BadInput> cases = {
      {"unknown subcommand", {"bogus"}, 2, "bogus"},
      {"no subcommand", {}, 2, "subcommand is required"},
      {"negative size", {"list", "--m", "-5"}, 2, "--m: must be a positive integer"},
      {"unknown dtype", {"list", "--dtype", "f64"}, 2, "unknown data type 'f64'"},
      {"unknown type among types",
       {"list", "--types", "f16*f64->f32"},
       2,
       "unknown data type 'f64' (expected f32, f16, bf16, e4m3 or e5m2)"},
      {"types without their output", {"export", "--types", "f16*bf16"}, 2, "expected A*B->D"},
      {"mixed types given as dtype",
       {"delete", "--dtype", "f16*bf16->f32"},
       2,
       "--dtype names one type of every operand; mixed types go with --types"},
      {"dtype and types", {"list", "--dtype", "f16", "--types", "f16"}, 2, "excludes"},
      {"unknown scaling", {"delete", "--scaling", "channel"}, 2, "unknown scaling 'channel'"},
      {"cc without for-gpu", {"list", "--cc", "90"}, 2, "requires --for-gpu"},
      {"for-gpu and device", {"list", "--for-gpu", "h100", "--device", "h100"}, 2, "excludes"},
      {"bad cc", {"list", "--for-gpu", "NVIDIA L4", "--cc", "8.x"}, 2, "--cc '8.x': expected"},
      {"a GPU without rows, without cc",
       {"list", "--for-gpu", "NVIDIA L4"},
       2,
       "--for-gpu 'NVIDIA L4': no GPU of that name has rows in"},
      {"unknown layout", {"list", "--layout", "xy"}, 2, "unknown layout 'xy'"},
      {"missing import file", {"import", file("missing.json").string()}, 2, "missing.json"},
      {"malformed JSON", {"import", file("malformed.json").string()}, 2, "not valid JSON"},
      {"unknown status",
       {"import", file("bad_status.json").string()},
       2,
       "entries[1].candidates[0].status: unknown status 'okk'"},
      {"delete without filter", {"delete"}, 2, "needs a filter"},
      {"show without shape", {"show", "--m", "5"}, 2, "--n"},
      {"show of an untuned shape",
       {"show", "--m", "5", "--n", "5", "--k", "5"},
       1,
       "no candidates recorded"},
  };
  for (const auto& bad : cases) {
    const Outcome run = gemm_db(bad.args);
    EXPECT_EQ(run.signal, 0) << bad.name << ": killed by signal " << run.signal;
    EXPECT_EQ(run.exit_code, bad.exit_code) << bad.name << ": " << run.err;
    EXPECT_TRUE(run.err.starts_with("gemm-db: error: ")) << bad.name << ": " << run.err;
    EXPECT_TRUE(contains(run.err.substr(0, run.err.find('\n')), bad.says))
        << bad.name << ": " << run.err;
    // One error line (a hint to run --help may follow it).
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n') -
                  int(contains(run.err, "--help' for the options")),
              1)
        << bad.name << ": " << run.err;
  }
  EXPECT_EQ(export_all(), before);
}

TEST_F(GemmDbCli, ReadingADatabaseThatDoesNotExistSaysSoAndCreatesNothing) {
  const fs::path missing = file("nothing_here.db");
  for (const std::string subcommand : {"list", "stats", "export"}) {
    const Outcome run = gemm_db({subcommand}, missing);
    EXPECT_EQ(run.exit_code, 1) << subcommand;
    EXPECT_TRUE(contains(run.err, "no tuning database at " + missing.string() + " yet")) << run.err;
  }
  EXPECT_FALSE(fs::exists(missing));
  // A failed import does not leave an empty database behind either.
  write_text_file(file("malformed.json"), "not json");
  EXPECT_EQ(gemm_db({"import", file("malformed.json").string()}, missing).exit_code, 2);
  EXPECT_FALSE(fs::exists(missing));
}

TEST_F(GemmDbCli, AFileThatIsNotADatabaseIsAnErrorNotACrash) {
  write_text_file(file("notes.db"), std::string(5000, 'n'));
  const Outcome run = gemm_db({"list"}, file("notes.db"));
  EXPECT_EQ(run.signal, 0);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(contains(
      run.err, "gemm-db: error: " + file("notes.db").string() + " is not an SQLite database"))
      << run.err;
  EXPECT_TRUE(contains(run.err, "SQLITE_NOTADB")) << run.err;
}

// Results of this GPU under another driver or NVRTC are the library's fallback for their exact
// problem: list says so, apart from current and stale ones.
TEST_F(GemmDbCli, ListShowsResultsOfAnotherDriverOrNvrtcAsSuch) {
  DeviceKey older = kH100;
  older.nvrtc = "11.8";
  {
    TuningDb db(db_path());
    db.record(older, f32_2048,
              candidate(f32_2048, "gemm_simt_under_11_8", CandidateStatus::ok, 3.0));
    db.set_best(older, f32_2048, "gemm_simt_under_11_8", version_for(f32_2048), -1, true);
  }
  const Json rows = Json::parse(gemm_db({"list", "--json"}).out);
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& row : rows)
    EXPECT_EQ(row["state"], row["device"]["nvrtc"] == "11.8" ? "other version" : "current")
        << row.dump();
  const Outcome text = gemm_db({"list", "--m", "2048"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const std::string line = text.out.substr(text.out.find("gemm_simt_under_11_8"));
  EXPECT_TRUE(contains(line.substr(0, line.find('\n')), "other version")) << text.out;
  EXPECT_TRUE(contains(text.out, "other version: tuned under another CUDA driver or NVRTC"))
      << text.out;
}

// A row of a family gemm-db was not built with (a test's, or a newer build's) is listed as such,
// not as stale: its templates are not older, they are absent.
TEST_F(GemmDbCli, ListNamesAFamilyThisBuildLacks) {
  const Problem p = make_problem(DType::f32, Op::T, Op::N, 96, 96, 96);
  CandidateRecord c = candidate(p, "gemm_from_elsewhere", CandidateStatus::ok, 0.5);
  c.config.family = "family_from_elsewhere";
  c.template_version = "0123456789abcdef";
  store_best(p, c, -1);
  const Json rows = Json::parse(gemm_db({"list", "--json", "--m", "96"}).out);
  ASSERT_EQ(rows.size(), 1u) << rows.dump();
  EXPECT_EQ(rows[0]["state"], "not in this build") << rows.dump();
  EXPECT_EQ(rows[0]["winner"]["config"]["family"], "family_from_elsewhere") << rows.dump();
}

// A damaged file, random bytes and another program's SQLite file: every subcommand says what is
// wrong in one line, exits 1, and leaves the file exactly as it was.
TEST_F(GemmDbCli, ADamagedOrForeignFileIsRefusedSayingWhatIsWrong) {
  const std::string good = read_text(db_path());
  ASSERT_GT(good.size(), 8192u);
  write_text_file(file("truncated.db"), good.substr(0, good.size() / 2));
  write_text_file(file("random.db"), test::random_bytes(20000, 7));
  {
    sqlite3* other = nullptr;
    ASSERT_EQ(sqlite3_open(file("photos.db").c_str(), &other), SQLITE_OK);
    sqlite3_exec(other, "CREATE TABLE photos (id INTEGER PRIMARY KEY, path TEXT)", nullptr, nullptr,
                 nullptr);
    sqlite3_close(other);
  }
  write_text_file(file("export.json"), export_all());
  const std::vector<std::pair<std::string, std::string>> files = {
      {"truncated.db", "is damaged"},
      {"random.db", "is not an SQLite database"},
      {"photos.db", "another program"}};
  const std::vector<std::vector<std::string>> commands = {
      {"list"},
      {"stats"},
      {"export"},
      {"show", "--m", "2048", "--n", "2048", "--k", "2048"},
      {"import", file("export.json").string()},
      {"delete", "--all"}};
  for (const auto& [name, says] : files) {
    const std::string before = read_text(file(name));
    for (const auto& args : commands) {
      const Outcome run = gemm_db(args, file(name));
      const std::string what = name + " " + args[0];
      EXPECT_EQ(run.signal, 0) << what;
      EXPECT_EQ(run.exit_code, 1) << what << ": " << run.err;
      EXPECT_TRUE(run.err.starts_with("gemm-db: error: ")) << what << ": " << run.err;
      EXPECT_TRUE(contains(run.err, file(name).string())) << what << ": " << run.err;
      EXPECT_TRUE(contains(run.err, says)) << what << ": " << run.err;
      EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << what << ": " << run.err;
      EXPECT_EQ(read_text(file(name)), before) << what << " changed the file";
      EXPECT_FALSE(fs::exists(file(name).string() + "-wal")) << what;
    }
  }
}

TEST_F(GemmDbCli, ImportRefusesTheTestFamilyAndChangesNothing) {
  Json document = Json::parse(export_all());
  document["entries"][0]["candidates"][0]["config"]["family"] = "fault_injection";
  write_text_file(file("planted.json"), document.dump());
  const std::string before = export_all();
  const Outcome run = gemm_db({"import", file("planted.json").string()});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_TRUE(contains(
      run.err, "entries[0].candidates[0].config.family: unknown kernel family 'fault_injection'"))
      << run.err;
  EXPECT_EQ(export_all(), before);
}

// A mixed-types problem next to the fixture's uniform ones: listed, shown, counted, filtered,
// exported and deleted by its types. The database does not judge whether a family computes it, so
// a simt row with the types changed stands in for a tuned one.
TEST_F(GemmDbCli, ProblemsAreShownAndFilteredByTheirTypes) {
  Problem mixed = make_problem(parse_data_types("f16*bf16->f32"), Op::N, Op::N, 512, 512, 512);
  {
    TuningDb db(db_path());
    CandidateRecord c = candidate(f32_2048, "gemm_mixed_512", CandidateStatus::ok, 1.0);
    c.config.types = mixed.types;
    db.record(kH100, mixed, c);
    db.set_best(kH100, mixed, "gemm_mixed_512", c.template_version, 1.1, true);
  }
  const Outcome text = gemm_db({"list"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(contains(text.out, "  f16*bf16->f32  nn  ")) << text.out;

  const Json rows = Json::parse(gemm_db({"list", "--types", "f16*bf16->f32", "--json"}).out);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["problem"]["types"], "f16*bf16->f32");
  EXPECT_EQ(rows[0]["problem"]["scaling"], "none");
  EXPECT_EQ(rows[0]["winner"]["kernel_name"], "gemm_mixed_512");
  // --dtype T and --types T are every operand T: neither takes the mixed problem.
  for (const char* option : {"--dtype", "--types"}) {
    const Json f16 = Json::parse(gemm_db({"list", option, "f16", "--json"}).out);
    ASSERT_EQ(f16.size(), 1u) << option;
    EXPECT_EQ(f16[0]["problem"]["types"], "f16") << option;
  }
  EXPECT_EQ(Json::parse(gemm_db({"list", "--types", "bf16*f16->f32", "--json"}).out).size(), 0u);
  EXPECT_EQ(Json::parse(gemm_db({"list", "--scaling", "none", "--json"}).out).size(), 3u);

  const Outcome shown = gemm_db({"show", "--m", "512", "--n", "512", "--k", "512"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_TRUE(contains(shown.out, "f16*bf16->f32 nn 512x512x512 lda=512")) << shown.out;
  const Outcome not_f16 =
      gemm_db({"show", "--m", "512", "--n", "512", "--k", "512", "--types", "f16", "--json"});
  EXPECT_EQ(not_f16.exit_code, 1) << "show --types f16 found the mixed problem: " << not_f16.out;
  EXPECT_TRUE(contains(not_f16.err, "no candidates recorded")) << not_f16.err;

  const Outcome stats = gemm_db({"stats"});
  EXPECT_TRUE(contains(stats.out, "3 (f16 1, f16*bf16->f32 1, f32 1)")) << stats.out;
  const Json stats_json = Json::parse(gemm_db({"stats", "--json"}).out);
  EXPECT_EQ(stats_json["by_types"]["f16*bf16->f32"], 1);
  EXPECT_EQ(stats_json["by_types"]["f32"], 1);

  const Json exported =
      Json::parse(gemm_db({"export", "--types", "f16*bf16->f32", "--scaling", "none"}).out);
  ASSERT_EQ(exported["entries"].size(), 1u);
  EXPECT_EQ(exported["entries"][0]["problem"]["types"], "f16*bf16->f32");

  const Outcome removed = gemm_db({"delete", "--types", "f16*bf16->f32"});
  ASSERT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_TRUE(contains(removed.out, "deleted 1 tuned problem")) << removed.out;
  const std::string left = gemm_db({"list"}).out;
  EXPECT_FALSE(contains(left, "gemm_mixed_512"));
  EXPECT_TRUE(contains(left, "gemm_simt_fast_1024x1024x1024"));
  EXPECT_TRUE(contains(left, "gemm_simt_fast_2048x2048x2048"));
}

// Float8 problems, one shape tuned with two scalings: two problems, each shown with its scaling
// by list, show, stats and list --for-gpu, and chosen by --scaling and --dtype e4m3 (what
// gemm-tune --dtype e4m3 tunes: e4m3*e4m3->bf16).
TEST_F(GemmDbCli, Float8ProblemsAreShownWithTheirScaling) {
  Problem block = make_problem(parse_data_types("e4m3*e4m3->bf16"), Op::T, Op::N, 2112, 64, 7168);
  block.scaling = Scaling::block;
  Problem tensor = block;
  tensor.scaling = Scaling::tensor;
  {
    TuningDb db(db_path());
    for (const Problem& p : {block, tensor}) {
      const std::string name = fmt::format("gemm_fp8_{}", to_string(p.scaling));
      CandidateRecord c = candidate(f32_2048, name, CandidateStatus::ok, 0.05);
      c.config.types = p.types;
      c.config.scaling = p.scaling;
      c.config.op_a = p.op_a;
      c.config.op_b = p.op_b;
      db.record(kH100, p, c);
      db.set_best(kH100, p, name, c.template_version, 0.06, true);
    }
  }
  const Outcome text = gemm_db({"list"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(contains(text.out, "  e4m3*e4m3->bf16 scaling=block   tn  ")) << text.out;
  EXPECT_TRUE(contains(text.out, "  e4m3*e4m3->bf16 scaling=tensor  tn  ")) << text.out;

  const Json blocks = Json::parse(gemm_db({"list", "--scaling", "block", "--json"}).out);
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0]["problem"]["types"], "e4m3*e4m3->bf16");
  EXPECT_EQ(blocks[0]["problem"]["scaling"], "block");
  EXPECT_EQ(blocks[0]["winner"]["kernel_name"], "gemm_fp8_block");
  EXPECT_EQ(Json::parse(gemm_db({"list", "--dtype", "e4m3", "--json"}).out).size(), 2u);
  EXPECT_EQ(Json::parse(gemm_db({"list", "--types", "e4m3", "--json"}).out).size(), 2u);
  EXPECT_EQ(
      Json::parse(
          gemm_db({"list", "--types", "e4m3*e4m3->bf16", "--scaling", "tensor", "--json"}).out)
          .size(),
      1u);
  EXPECT_EQ(
      Json::parse(gemm_db({"list", "--dtype", "e4m3", "--scaling", "row", "--json"}).out).size(),
      0u);
  EXPECT_EQ(Json::parse(gemm_db({"list", "--dtype", "e5m2", "--json"}).out).size(), 0u);

  const Outcome shown =
      gemm_db({"show", "--m", "2112", "--n", "64", "--k", "7168", "--scaling", "block"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_TRUE(contains(shown.out,
                       "e4m3*e4m3->bf16 tn 2112x64x7168 lda=7168 ldb=7168 ldc=2112 "
                       "align=16 scaling=block"))
      << shown.out;
  EXPECT_TRUE(contains(shown.out, "gemm_fp8_block"));
  EXPECT_FALSE(contains(shown.out, "gemm_fp8_tensor"));
  const Json both = Json::parse(
      gemm_db({"show", "--m", "2112", "--n", "64", "--k", "7168", "--dtype", "e4m3", "--json"})
          .out);
  ASSERT_EQ(both.size(), 2u);
  std::set<std::string> scalings;
  for (const auto& p : both) scalings.insert(p["problem"]["scaling"].get<std::string>());
  EXPECT_EQ(scalings, (std::set<std::string>{"block", "tensor"}));

  const Outcome stats = gemm_db({"stats"});
  EXPECT_TRUE(contains(stats.out, "e4m3*e4m3->bf16 scaling=block 1")) << stats.out;
  EXPECT_TRUE(contains(stats.out, "e4m3*e4m3->bf16 scaling=tensor 1")) << stats.out;
  const Outcome used = gemm_db({"list", "--for-gpu", "H100"});
  ASSERT_EQ(used.exit_code, 0) << used.err;
  EXPECT_TRUE(contains(used.out, "e4m3*e4m3->bf16 scaling=block")) << used.out;
}

// A grouped problem (8 experts that split N) is a problem of its own beside one GEMM of the same
// sizes: listed with its groups, found by --groups, where --n is the mean N of a group as
// gemm-tune's --n is.
TEST_F(GemmDbCli, GroupedProblemsAreShownAndFilteredByTheirGroups) {
  Problem moe = f16_1024;
  moe.groups = 8;  // 8 groups of 128 columns on average
  {
    TuningDb db(db_path());
    // The records of one GEMM's family: the database does not judge who computes groups.
    db.record(kH100, moe, candidate(f16_1024, "gemm_moe_fast", CandidateStatus::ok, 3.0));
    db.record(kH100, moe, candidate(f16_1024, "gemm_moe_slow", CandidateStatus::ok, 4.0));
    db.set_best(kH100, moe, "gemm_moe_fast", version_for(f16_1024), 3.3, true);
  }
  const Outcome all = gemm_db({"list"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_TRUE(contains(all.out, "  1024x1024x1024 groups=8  ")) << all.out;
  EXPECT_TRUE(contains(all.out, "  1024x1024x1024  ")) << all.out;
  const Json grouped = Json::parse(gemm_db({"list", "--groups", "8", "--json"}).out);
  ASSERT_EQ(grouped.size(), 1u);
  EXPECT_EQ(grouped[0]["problem"]["groups"], 8);
  EXPECT_EQ(grouped[0]["problem"]["n"], 1024) << "N of all the groups";
  EXPECT_EQ(grouped[0]["winner"]["kernel_name"], "gemm_moe_fast");
  const Json one_gemm = Json::parse(gemm_db({"list", "--groups", "0", "--json"}).out);
  ASSERT_EQ(one_gemm.size(), 2u);
  for (const auto& row : one_gemm) EXPECT_EQ(row["problem"]["groups"], 0);
  EXPECT_TRUE(Json::parse(gemm_db({"list", "--groups", "16", "--json"}).out).empty());

  // show: --n with --groups is a group's mean, as gemm-tune was given it.
  const Outcome shown =
      gemm_db({"show", "--m", "1024", "--n", "128", "--k", "1024", "--groups", "8"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_TRUE(
      contains(shown.out, "f16 tn 1024x1024x1024 lda=1024 ldb=1024 ldc=1024 align=16 groups=8"))
      << shown.out;
  EXPECT_TRUE(contains(shown.out, "gemm_moe_slow"));
  EXPECT_FALSE(contains(shown.out, "gemm_simt_fast_1024x1024x1024")) << shown.out;
  const Json both =
      Json::parse(gemm_db({"show", "--m", "1024", "--n", "1024", "--k", "1024", "--json"}).out);
  EXPECT_EQ(both.size(), 2u) << "without --groups, every problem of N = 1024";
  const Outcome used = gemm_db({"list", "--for-gpu", "H100"});
  ASSERT_EQ(used.exit_code, 0) << used.err;
  EXPECT_TRUE(contains(used.out, "1024x1024x1024 groups=8")) << used.out;

  const Outcome exported = gemm_db({"export", "--groups", "8"});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(Json::parse(exported.out)["entries"].size(), 1u);
  expect_usage_errors(
      {{{"list", "--groups", "-2"}, "groups must be 0 (one GEMM) or 1 to 4096 (got -2)"},
       {{"list", "--groups", "x"}, "groups 'x' is not a number"},
       {{"show", "--m", "8", "--n", "1073741824", "--k", "8", "--groups", "2"},
        "above the largest N"}});
  const Outcome removed = gemm_db({"delete", "--groups", "8"});
  ASSERT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_TRUE(contains(removed.out, "deleted 1 tuned problem")) << removed.out;
  EXPECT_EQ(Json::parse(gemm_db({"list", "--json"}).out).size(), 2u);
}

// A masked grouped problem (8 groups, each a capacity of 128 columns) is a problem of its own
// beside the contiguous one of the same sizes: listed as "groups=8 masked", found by --group-layout
// (grouped problems only), where --n with --groups is a group's capacity as gemm-tune's --n is.
TEST_F(GemmDbCli, MaskedProblemsAreShownAndFilteredByTheirGroupLayout) {
  Problem moe = f16_1024;
  moe.groups = 8;
  Problem decode = moe;
  decode.group_layout = GroupLayout::masked;
  {
    TuningDb db(db_path());
    for (const auto& [p, name] : {std::pair{moe, "gemm_moe"}, std::pair{decode, "gemm_decode"}}) {
      db.record(kH100, p, candidate(f16_1024, name, CandidateStatus::ok, 3.0));
      db.set_best(kH100, p, name, version_for(f16_1024), 3.3, true);
    }
  }
  const Outcome all = gemm_db({"list"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_TRUE(contains(all.out, "  1024x1024x1024 groups=8 masked  ")) << all.out;
  EXPECT_TRUE(contains(all.out, "  1024x1024x1024 groups=8  ")) << all.out;
  const Json masked = Json::parse(gemm_db({"list", "--group-layout", "masked", "--json"}).out);
  ASSERT_EQ(masked.size(), 1u);
  EXPECT_EQ(masked[0]["problem"]["group_layout"], "masked");
  EXPECT_EQ(masked[0]["problem"]["n"], 1024) << "G times the capacity";
  EXPECT_EQ(masked[0]["winner"]["kernel_name"], "gemm_decode");
  const Json contiguous =
      Json::parse(gemm_db({"list", "--group-layout", "contiguous", "--json"}).out);
  ASSERT_EQ(contiguous.size(), 1u) << "grouped problems only, not the problems of one GEMM";
  EXPECT_EQ(contiguous[0]["winner"]["kernel_name"], "gemm_moe");
  EXPECT_EQ(Json::parse(gemm_db({"list", "--groups", "8", "--json"}).out).size(), 2u);

  const Outcome shown = gemm_db({"show", "--m", "1024", "--n", "128", "--k", "1024", "--groups",
                                 "8", "--group-layout", "masked"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_TRUE(contains(shown.out,
                       "f16 tn 1024x1024x1024 lda=1024 ldb=1024 ldc=1024 align=16 groups=8 masked"))
      << shown.out;
  EXPECT_TRUE(contains(shown.out, "gemm_decode"));
  EXPECT_FALSE(contains(shown.out, "gemm_moe")) << shown.out;
  const Outcome used = gemm_db({"list", "--for-gpu", "H100", "--group-layout", "masked"});
  ASSERT_EQ(used.exit_code, 0) << used.err;
  EXPECT_TRUE(contains(used.out, "1024x1024x1024 groups=8 masked")) << used.out;
  const Outcome exported = gemm_db({"export", "--group-layout", "masked"});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(Json::parse(exported.out)["entries"].size(), 1u);

  expect_usage_errors({{{"list", "--group-layout", "ragged"},
                        "unknown group layout 'ragged' (expected contiguous or masked)"},
                       {{"list", "--groups", "0", "--group-layout", "masked"},
                        "--group-layout is of grouped problems: not with --groups 0"}});
  const Outcome removed = gemm_db({"delete", "--group-layout", "masked"});
  ASSERT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_TRUE(contains(removed.out, "deleted 1 tuned problem")) << removed.out;
  EXPECT_EQ(Json::parse(gemm_db({"list", "--json"}).out).size(), 3u);
}

// --accum chooses problems by their accumulation, as gemm-tune --accum made them: the fixture's
// problems are all precise. DbFilter has no accumulation, so export and delete take --accum only
// where it leaves nothing out, as with --scaling. Needs nothing of the database but what it had.
TEST_F(GemmDbCli, TheAccumFilterKeepsPreciseProblemsAndIsChecked) {
  EXPECT_EQ(Json::parse(gemm_db({"list", "--accum", "precise", "--json"}).out).size(), 2u);
  EXPECT_EQ(
      Json::parse(gemm_db({"list", "--accum", "Precise", "--dtype", "f16", "--json"}).out).size(),
      1u);
  EXPECT_TRUE(Json::parse(gemm_db({"list", "--accum", "fast", "--json"}).out).empty());
  const Outcome none = gemm_db({"list", "--accum", "fast"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_TRUE(contains(none.out, "no best configurations match")) << none.out;
  EXPECT_FALSE(contains(gemm_db({"list"}).out, "accum=")) << "precise is not written out";
  EXPECT_FALSE(contains(gemm_db({"stats"}).out, "accum="));
  const Outcome not_shown =
      gemm_db({"show", "--m", "2048", "--n", "2048", "--k", "2048", "--accum", "fast"});
  EXPECT_EQ(not_shown.exit_code, 1);
  EXPECT_TRUE(contains(not_shown.err, "no candidates recorded")) << not_shown.err;
  const Outcome shown =
      gemm_db({"show", "--m", "2048", "--n", "2048", "--k", "2048", "--accum", "precise"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_TRUE(contains(shown.out, "gemm_simt_fast_2048x2048x2048")) << shown.out;

  const Outcome exported = gemm_db({"export", "--accum", "precise"});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(Json::parse(exported.out)["entries"].size(), 2u);
  const std::string before = export_all();
  expect_usage_errors(
      {{{"list", "--accum", "quick"}, "unknown accumulation 'quick' (expected precise or fast)"},
       {{"delete", "--scaling", "tensor", "--accum", "precise"},
        "--scaling tensor: export and delete cannot yet leave out"}});
  EXPECT_EQ(export_all(), before) << "a refused delete deletes nothing";
  const Outcome removed = gemm_db({"delete", "--accum", "precise", "--dtype", "f16"});
  ASSERT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_TRUE(contains(removed.out, "deleted 1 tuned problem")) << removed.out;
  const Outcome usage = gemm_db({"delete"});
  EXPECT_TRUE(contains(usage.err, "--scaling, --accum, --precision, --layout")) << usage.err;
}

// A float8 problem of fast accumulation is a problem of its own beside the precise one of the
// same shape and scaling: shown "scaling=tensor accum=fast" as describe() says it, and chosen by
// --accum. It needs the database to store the accumulation in the problem's key (schema version
// 7): before that, the fast problem is stored as the precise one.
TEST_F(GemmDbCli, FastAccumulationProblemsAreShownApartAndFilteredByAccum) {
  if (TuningDb::kSchemaVersion < 7)
    GTEST_SKIP() << "the database stores no accumulation before schema version 7";
  Problem precise = make_problem(parse_data_types("e4m3*e4m3->bf16"), Op::T, Op::N, 2112, 64, 7168);
  precise.scaling = Scaling::tensor;
  Problem fast = precise;
  fast.accumulation = Accumulation::fast;
  {
    TuningDb db(db_path());
    for (const auto& [p, name] :
         {std::pair{precise, "gemm_fp8_precise"}, std::pair{fast, "gemm_fp8_fast"}}) {
      CandidateRecord c = candidate(f32_2048, name, CandidateStatus::ok, 0.05);
      c.config.types = p.types;
      c.config.scaling = p.scaling;
      c.config.op_a = p.op_a;
      c.config.op_b = p.op_b;
      db.record(kH100, p, c);
      db.set_best(kH100, p, name, c.template_version, 0.06, true);
    }
  }
  const Outcome text = gemm_db({"list"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(contains(text.out, "  e4m3*e4m3->bf16 scaling=tensor accum=fast  tn  ")) << text.out;
  EXPECT_TRUE(contains(text.out, "  e4m3*e4m3->bf16 scaling=tensor             tn  ")) << text.out;
  const Json fast_rows = Json::parse(gemm_db({"list", "--accum", "fast", "--json"}).out);
  ASSERT_EQ(fast_rows.size(), 1u);
  EXPECT_EQ(fast_rows[0]["winner"]["kernel_name"], "gemm_fp8_fast");
  const Json precise_rows =
      Json::parse(gemm_db({"list", "--dtype", "e4m3", "--accum", "precise", "--json"}).out);
  ASSERT_EQ(precise_rows.size(), 1u);
  EXPECT_EQ(precise_rows[0]["winner"]["kernel_name"], "gemm_fp8_precise");
  EXPECT_EQ(Json::parse(gemm_db({"list", "--scaling", "tensor", "--json"}).out).size(), 2u);

  const Outcome shown =
      gemm_db({"show", "--m", "2112", "--n", "64", "--k", "7168", "--accum", "fast"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_TRUE(contains(shown.out,
                       "e4m3*e4m3->bf16 tn 2112x64x7168 lda=7168 ldb=7168 ldc=2112 align=16 "
                       "scaling=tensor accum=fast\n"))
      << shown.out;
  EXPECT_TRUE(contains(shown.out, "gemm_fp8_fast"));
  EXPECT_FALSE(contains(shown.out, "gemm_fp8_precise")) << shown.out;
  const Outcome stats = gemm_db({"stats"});
  EXPECT_TRUE(contains(stats.out, "e4m3*e4m3->bf16 scaling=tensor 1")) << stats.out;
  EXPECT_TRUE(contains(stats.out, "e4m3*e4m3->bf16 scaling=tensor accum=fast 1")) << stats.out;
  const Outcome used = gemm_db({"list", "--for-gpu", "H100", "--accum", "fast"});
  ASSERT_EQ(used.exit_code, 0) << used.err;
  EXPECT_TRUE(contains(used.out, "e4m3*e4m3->bf16 scaling=tensor accum=fast")) << used.out;
  EXPECT_FALSE(contains(used.out, "gemm_fp8_precise")) << used.out;
  // The database keys fast problems: export and delete take one of the two.
  const Json exported = Json::parse(gemm_db({"export", "--accum", "fast"}).out);
  ASSERT_EQ(exported["entries"].size(), 1u);
  EXPECT_EQ(exported["entries"][0]["problem"]["accumulation"], "fast") << exported.dump();
  expect_usage_errors({{{"delete", "--dtype", "e4m3", "--accum", "precise"},
                        "--accum precise: export and delete cannot yet leave out"}});
  const Outcome removed = gemm_db({"delete", "--accum", "fast"});
  ASSERT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_TRUE(contains(removed.out, "deleted 1 tuned problem")) << removed.out;
  EXPECT_EQ(Json::parse(gemm_db({"list", "--json"}).out).size(), 3u) << "the precise one stays";
}

// A problem whose store applies an epilogue is a problem of its own beside the plain one of the
// same shape: shown "epilogue=bias,gelu" after its shape as describe() says it, and chosen by
// --epilogue (none: the plain problems). The database keys the epilogue (schema version 8), so
// export and delete take --epilogue there, whatever else they match.
TEST_F(GemmDbCli, FusedProblemsAreShownApartAndFilteredByEpilogue) {
  Problem gelu = f32_2048;
  gelu.epilogue = parse_epilogue("bias,gelu");
  store_best(gelu, candidate(gelu, "gemm_simt_bias_gelu", CandidateStatus::ok, 2.2), 2.5);
  const Outcome text = gemm_db({"list"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(contains(text.out, "  2048x2048x2048 epilogue=bias,gelu  ")) << text.out;
  EXPECT_TRUE(contains(text.out, "  2048x2048x2048                     ")) << text.out;
  const Json fused_rows = Json::parse(gemm_db({"list", "--epilogue", "gelu,BIAS", "--json"}).out);
  ASSERT_EQ(fused_rows.size(), 1u);
  EXPECT_EQ(fused_rows[0]["winner"]["kernel_name"], "gemm_simt_bias_gelu");
  EXPECT_EQ(fused_rows[0]["problem"]["epilogue"], "bias,gelu");
  EXPECT_EQ(Json::parse(gemm_db({"list", "--epilogue", "none", "--json"}).out).size(), 2u);
  EXPECT_EQ(Json::parse(gemm_db({"list", "--m", "2048", "--json"}).out).size(), 2u);
  const Outcome none = gemm_db({"list", "--epilogue", "silu"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_TRUE(contains(none.out, "no best configurations match")) << none.out;

  const Outcome shown =
      gemm_db({"show", "--m", "2048", "--n", "2048", "--k", "2048", "--epilogue", "bias,gelu"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_TRUE(contains(shown.out,
                       "f32 nn 2048x2048x2048 lda=2048 ldb=2048 ldc=2048 align=16 "
                       "epilogue=bias,gelu\n"))
      << shown.out;
  EXPECT_TRUE(contains(shown.out, "gemm_simt_bias_gelu"));
  EXPECT_FALSE(contains(shown.out, "gemm_simt_fast_2048x2048x2048")) << shown.out;
  const Outcome used = gemm_db({"list", "--for-gpu", "H100", "--epilogue", "bias,gelu"});
  ASSERT_EQ(used.exit_code, 0) << used.err;
  EXPECT_TRUE(contains(used.out, "2048x2048x2048 epilogue=bias,gelu")) << used.out;
  EXPECT_FALSE(contains(used.out, "gemm_simt_fast_2048x2048x2048")) << used.out;

  const Json exported = Json::parse(gemm_db({"export", "--epilogue", "bias,gelu"}).out);
  ASSERT_EQ(exported["entries"].size(), 1u);
  EXPECT_EQ(exported["entries"][0]["problem"]["epilogue"], "bias,gelu") << exported.dump();
  EXPECT_EQ(Json::parse(gemm_db({"export", "--epilogue", "none"}).out)["entries"].size(), 2u);
  const std::string before = export_all();
  expect_usage_errors({{{"list", "--epilogue", "swish"}, "unknown epilogue part 'swish'"},
                       {{"delete", "--epilogue", "bias,bias_n"}, "epilogue: more than one bias"}});
  EXPECT_EQ(export_all(), before) << "a refused delete deletes nothing";
  const Outcome removed = gemm_db({"delete", "--epilogue", "bias,gelu"});
  ASSERT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_TRUE(contains(removed.out, "deleted 1 tuned problem")) << removed.out;
  EXPECT_EQ(Json::parse(gemm_db({"list", "--json"}).out).size(), 2u) << "the plain ones stay";
  const Outcome usage = gemm_db({"delete"});
  EXPECT_TRUE(contains(usage.err, "--group-layout, --epilogue, --beta")) << usage.err;
}

// An f32 problem computed with tf32 is a problem of its own beside the exact one of the same
// shape: shown "f32 precision=tf32" as describe() says it, and chosen by --precision (exact: every
// other problem, f16's too). The database keys the precision (schema version 10), so export and
// delete take --precision there, whatever else they match.
TEST_F(GemmDbCli, Tf32ProblemsAreShownApartAndFilteredByPrecision) {
  Problem tf32 = f32_2048;
  tf32.precision = Precision::tf32;
  store_best(tf32, candidate(tf32, "gemm_tf32", CandidateStatus::ok, 0.4), 0.5);
  const Outcome text = gemm_db({"list"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(contains(text.out, "  f32 precision=tf32  nn  ")) << text.out;
  const Json tf32_rows = Json::parse(gemm_db({"list", "--precision", "TF32", "--json"}).out);
  ASSERT_EQ(tf32_rows.size(), 1u);
  EXPECT_EQ(tf32_rows[0]["winner"]["kernel_name"], "gemm_tf32");
  EXPECT_EQ(tf32_rows[0]["problem"]["precision"], "tf32");
  EXPECT_EQ(Json::parse(gemm_db({"list", "--precision", "exact", "--json"}).out).size(), 2u);
  EXPECT_TRUE(Json::parse(gemm_db({"list", "--precision", "3xtf32", "--json"}).out).empty());

  const Outcome shown =
      gemm_db({"show", "--m", "2048", "--n", "2048", "--k", "2048", "--precision", "tf32"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_TRUE(contains(shown.out,
                       "f32 nn 2048x2048x2048 lda=2048 ldb=2048 ldc=2048 align=16 "
                       "precision=tf32\n"))
      << shown.out;
  EXPECT_TRUE(contains(shown.out, "gemm_tf32"));
  EXPECT_FALSE(contains(shown.out, "gemm_simt_fast_2048x2048x2048")) << shown.out;
  EXPECT_TRUE(contains(gemm_db({"stats"}).out, "f32 precision=tf32 1"));
  const Outcome used = gemm_db({"list", "--for-gpu", "H100", "--precision", "tf32"});
  ASSERT_EQ(used.exit_code, 0) << used.err;
  EXPECT_TRUE(contains(used.out, "f32 precision=tf32")) << used.out;
  EXPECT_FALSE(contains(used.out, "gemm_simt_fast_2048x2048x2048")) << used.out;

  const Json exported = Json::parse(gemm_db({"export", "--precision", "tf32"}).out);
  ASSERT_EQ(exported["entries"].size(), 1u);
  EXPECT_EQ(exported["entries"][0]["problem"]["precision"], "tf32") << exported.dump();
  EXPECT_EQ(Json::parse(gemm_db({"export", "--precision", "exact"}).out)["entries"].size(), 2u);
  const std::string before = export_all();
  expect_usage_errors({{{"list", "--precision", "fp16"},
                        "unknown precision 'fp16' (expected exact, tf32 or 3xtf32)"},
                       {{"delete", "--precision", "tf16"}, "unknown precision 'tf16'"}});
  EXPECT_EQ(export_all(), before) << "a refused delete deletes nothing";
  const Outcome removed = gemm_db({"delete", "--precision", "tf32"});
  ASSERT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_TRUE(contains(removed.out, "deleted 1 tuned problem")) << removed.out;
  EXPECT_EQ(Json::parse(gemm_db({"list", "--json"}).out).size(), 2u) << "the exact ones stay";
}

// An export of format 1 names one "dtype" per problem and config and has no groups, group
// layouts, accumulations, epilogues nor precisions: it imports as every operand of that type with
// f32 accumulation, unscaled, one GEMM, precise, without an epilogue, exact, and exports again as
// the current format, exactly as the database it came from.
TEST_F(GemmDbCli, AFormat1ExportImportsWithItsMeaningAndExportsAsTheCurrentFormat) {
  const std::string current = export_all();
  Json old = Json::parse(current);
  ASSERT_EQ(old["version"], 7);
  old["version"] = 1;
  for (auto& entry : old["entries"]) {
    Json& problem = entry["problem"];
    const std::string type = problem["types"];
    ASSERT_EQ(type.find('*'), std::string::npos) << "the fixture's problems are uniform";
    problem.erase("types");
    problem.erase("scaling");
    problem.erase("groups");
    problem.erase("group_layout");
    problem.erase("accumulation");
    problem.erase("epilogue");
    problem.erase("precision");
    problem["dtype"] = type;
    for (auto& c : entry["candidates"]) {
      c["config"].erase("types");
      c["config"].erase("scaling");
      c["config"]["dtype"] = type;
    }
  }
  ASSERT_FALSE(contains(old.dump(), "\"types\""));
  write_text_file(file("format1.json"), old.dump(2));
  const Outcome imported = gemm_db({"import", file("format1.json").string()}, file("fresh.db"));
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_EQ(gemm_db({"export"}, file("fresh.db")).out, current);
  const Json f16 = Json::parse(gemm_db({"list", "--types", "f16", "--json"}, file("fresh.db")).out);
  ASSERT_EQ(f16.size(), 1u);
  EXPECT_EQ(f16[0]["problem"]["types"], "f16");
  EXPECT_EQ(f16[0]["winner"]["config"]["types"], "f16");
  // An unknown dtype in a format-1 file says where.
  old["entries"][0]["problem"]["dtype"] = "f64";
  write_text_file(file("bad_format1.json"), old.dump());
  const Outcome bad = gemm_db({"import", file("bad_format1.json").string()}, file("fresh.db"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(contains(bad.err, "entries[0].problem.dtype: unknown data type 'f64'")) << bad.err;
}

// `list --for-gpu`: per problem, the row the library uses on that GPU: its own when it has one
// (under this machine's versions, else another), else the most recently tuned one of another GPU
// of its compute capability; never a row of another compute capability.
TEST_F(GemmDbCli, ListForGpuUsesASiblingsRowOnlyWhenTheGpuHasNoneOfItsOwn) {
  DeviceKey h200 = kH100, pcie = kH100, a100 = kH100, h100_older = kH100;
  h200.name = "NVIDIA H200";
  pcie.name = "NVIDIA H100 PCIe";
  pcie.sms = 114;
  a100 = {"NVIDIA A100-SXM4-80GB", 80, 108, kH100.driver, kH100.nvrtc};
  h100_older.nvrtc = "11.8";
  const Problem f32_1024 = make_problem(DType::f32, Op::N, Op::N, 1024, 1024, 1024);
  const Problem f32_512 = make_problem(DType::f32, Op::N, Op::N, 512, 512, 512);
  const Problem f32_256 = make_problem(DType::f32, Op::N, Op::N, 256, 256, 256);
  auto tune = [&](const DeviceKey& device, const Problem& p, const std::string& kernel) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // tuned_at has milliseconds
    TuningDb db(db_path());
    db.record(device, p, candidate(p, kernel, CandidateStatus::ok, 1.0));
    db.set_best(device, p, kernel, version_for(p), -1, true);
  };
  // (SetUp tuned f32_2048 and f16_1024 on the H100.)
  tune(h200, f32_2048, "h200_own_2048");
  tune(kH100, f32_1024, "h100_1024");
  tune(pcie, f32_1024, "pcie_1024");  // later than the H100's
  tune(a100, f32_512, "a100_512");    // another compute capability only
  tune(h100_older, f32_256, "h100_older_nvrtc_256");
  tune(h200, f32_256, "h200_256");  // later, but a sibling's row for the H100

  auto used_on = [&](const std::vector<std::string>& gpu) {
    std::vector<std::string> args = {"list", "--json", "--for-gpu"};
    args.insert(args.end(), gpu.begin(), gpu.end());
    const Outcome run = gemm_db(args);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    std::map<std::string, std::string> out;  // shape -> source and kernel
    for (const auto& row : Json::parse(run.out.empty() ? "[]" : run.out))
      out[fmt::format("{} {}", row["problem"]["types"].get<std::string>(),
                      row["problem"]["m"].get<int64_t>())] =
          fmt::format("{} {}", row["source"].get<std::string>(),
                      row["winner"]["kernel_name"].get<std::string>());
    return out;
  };
  using Used = std::map<std::string, std::string>;
  EXPECT_EQ(used_on({"NVIDIA H200"}), (Used{{"f32 2048", "tuned h200_own_2048"},
                                            {"f16 1024", "sibling gemm_simt_fast_1024x1024x1024"},
                                            {"f32 1024", "sibling pcie_1024"},
                                            {"f32 256", "tuned h200_256"}}));
  EXPECT_EQ(used_on({"NVIDIA H100 80GB HBM3"}),
            (Used{{"f32 2048", "tuned gemm_simt_fast_2048x2048x2048"},
                  {"f16 1024", "tuned gemm_simt_fast_1024x1024x1024"},
                  {"f32 1024", "tuned h100_1024"},
                  {"f32 256", "other_version h100_older_nvrtc_256"}}));
  // A GPU with no rows at all, named with its compute capability: siblings only, the newest.
  EXPECT_EQ(used_on({"NVIDIA GH200 480GB", "--cc", "9.0"}),
            (Used{{"f32 2048", "sibling h200_own_2048"},
                  {"f16 1024", "sibling gemm_simt_fast_1024x1024x1024"},
                  {"f32 1024", "sibling pcie_1024"},
                  {"f32 256", "sibling h200_256"}}));
  EXPECT_EQ(used_on({"a100"}), (Used{{"f32 512", "tuned a100_512"}}));
  EXPECT_EQ(used_on({"NVIDIA L4", "--cc", "89"}), Used{});
  // Filters apply.
  EXPECT_EQ(used_on({"h200", "--types", "f16"}),
            (Used{{"f16 1024", "sibling gemm_simt_fast_1024x1024x1024"}}));

  const Outcome text = gemm_db({"list", "--for-gpu", "h200"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  auto line_of = [&](const std::string& kernel) {
    const size_t at = text.out.find(kernel);
    if (at == std::string::npos) return std::string();
    const size_t begin = text.out.rfind('\n', at) + 1;
    return text.out.substr(begin, text.out.find('\n', at) - begin);
  };
  EXPECT_TRUE(contains(text.out, "what the library uses on NVIDIA H200 (cc 9.0, 132 SMs)"))
      << text.out;
  EXPECT_TRUE(contains(line_of("pcie_1024"), "sibling (tuned on NVIDIA H100 PCIe)")) << text.out;
  EXPECT_TRUE(contains(line_of("gemm_simt_fast_1024x1024x1024"),
                       "sibling (tuned on NVIDIA H100 80GB HBM3)"))
      << text.out;
  EXPECT_TRUE(contains(line_of("h200_own_2048"), " tuned ")) << text.out;
  EXPECT_TRUE(contains(text.out, "1 problem tuned only on GPUs of other compute capabilities"))
      << text.out;
  EXPECT_FALSE(contains(text.out, "a100_512")) << text.out;

  const Outcome several = gemm_db({"list", "--for-gpu", "h100"});
  EXPECT_EQ(several.exit_code, 2);
  EXPECT_TRUE(contains(several.err,
                       "matches several GPUs in " + db_path().string() +
                           ": NVIDIA H100 80GB HBM3 (cc 90, 132 SMs), NVIDIA H100 PCIe (cc 90, "
                           "114 SMs); give the whole name, --cc or --sms"))
      << several.err;
  EXPECT_EQ(used_on({"h100", "--sms", "114"}).at("f32 1024"), "tuned pcie_1024");
  // Without --for-gpu, list shows every row as before.
  EXPECT_EQ(Json::parse(gemm_db({"list", "--json"}).out).size(), 8u);
}

// The shapes files of gemm-tune and gemm-bench (tools/cli_common): the types of a line are a
// DataTypes name, positional or as types=, and an unknown one is refused naming it and the line.
TEST(ShapesFile, ALineNamesItsTypesPositionallyOrWithTypesEquals) {
  auto problem_of = [](const std::string& line) {
    return cli::problem_of_line(cli::parse_shape_line(line), "f32", "nn", 0.0f);
  };
  EXPECT_EQ(problem_of("64 64 64").types, DataTypes::uniform(DType::f32));
  EXPECT_EQ(problem_of("64x64x64 bf16 tn").types, DataTypes::uniform(DType::bf16));
  EXPECT_EQ(problem_of("64x64x64 bf16 tn").layout(), "tn");
  const Problem mixed = problem_of("64 64 64 f16*bf16->f32 nt beta=1");
  EXPECT_EQ(mixed.types.name(), "f16*bf16->f32");
  EXPECT_EQ(mixed.layout(), "nt");
  EXPECT_TRUE(mixed.reads_c);
  // A name with '=' in it is still the types, not a field.
  EXPECT_EQ(problem_of("64 64 64 e4m3*e5m2->bf16+acc=f16").types.name(), "e4m3*e5m2->bf16+acc=f16");
  const Problem keyed = problem_of("64 64 64 types=e4m3*e4m3->f16 tn ldc=80");
  EXPECT_EQ(keyed.types.name(), "e4m3*e4m3->f16");
  EXPECT_EQ(keyed.layout(), "tn");
  EXPECT_EQ(keyed.ldc, 80);
  EXPECT_EQ(problem_of("64 64 64 tt types=f16").types, DataTypes::uniform(DType::f16));
  EXPECT_EQ(problem_of("64 64 64 tt types=f16").layout(), "tt");

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"64 64 64 f64 tn", "'64 64 64 f64 tn': unknown data type 'f64' (expected f32, f16, bf16"},
      {"64 64 64 types=q8", "'64 64 64 types=q8': unknown data type 'q8'"},
      {"64 64 64 f16*bf16 nn", "data types 'f16*bf16': expected A*B->D"},
      {"64 64 64 types=f16 types=bf16", "types= is given twice"},
      {"64 64 64 types= tn", "'64 64 64 types= tn': unknown data type ''"},
      {"64 64 64 bf16 tn nt", "unexpected 'nt'"},
      {"64 64 64 types=bf16 tn nt", "unexpected 'nt'"},
      {"64 64 64 dtype=bf16",
       "unknown field 'dtype' (types, dtype_b, out, scaling, accum, precision, groups, "
       "group_layout, epilogue, lda, ldb, ldc, beta)"},
  };
  for (const auto& [line, says] : bad) {
    try {
      cli::parse_shape_line(line);
      ADD_FAILURE() << line << ": accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << line;
      EXPECT_TRUE(contains(e.what(), says)) << line << ": " << e.what();
      EXPECT_FALSE(contains(e.what(), "\n")) << line << ": " << e.what();
    }
  }
  TempDir dir;
  write_text_file(dir / "shapes.txt", "# model A\n64 64 64 bf16\n128 128 128 e4m3*e5m2->f64\n");
  try {
    cli::read_shapes_file((dir / "shapes.txt").string());
    ADD_FAILURE() << "read a shapes file with an unknown type";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(),
                         "shapes.txt:3: '128 128 128 e4m3*e5m2->f64': unknown data "
                         "type 'f64'"))
        << e.what();
  }
}

}  // namespace
}  // namespace gemmtune
