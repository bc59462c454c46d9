// gemm-tune: tune GEMM shapes on this GPU, see the winner beside cuBLAS, store it.
#include <csignal>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.hpp"
#include "gemmtune/cache/tuning_db.hpp"
#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/driver.hpp"
#include "gemmtune/tuner/tuner.hpp"

namespace gt = gemmtune;
using nlohmann::json;

namespace {

struct Args {
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  std::string dtype = "f32", layout = "nn";
  float alpha = 1.0f, beta = 0.0f;
  std::string db, budget, shapes, arch, families;
  int top = 5;
  bool json = false, force = false, dry_run = false, list_only = false, no_baseline = false;
  double timeout = 60;
  unsigned threads = 0;
  int device = 0;
  uint64_t seed = 1;
};

void add_options(CLI::App& app, Args& a) {
  app.add_option("--m", a.m, "Rows of op(A) and C");
  app.add_option("--n", a.n, "Columns of op(B) and C");
  app.add_option("--k", a.k, "Columns of op(A), rows of op(B)");
  app.add_option("--dtype", a.dtype, "f32, f16 or bf16")->capture_default_str();
  app.add_option("--layout", a.layout, "op(A)op(B): nn, nt, tn or tt")->capture_default_str();
  app.add_option("--lda", a.lda, "Leading dimension of A (default: rows of A as stored)");
  app.add_option("--ldb", a.ldb, "Leading dimension of B (default: rows of B as stored)");
  app.add_option("--ldc", a.ldc, "Leading dimension of C (default: M)");
  app.add_option("--alpha", a.alpha, "alpha")->capture_default_str();
  app.add_option("--beta", a.beta, "beta (0: C is never read)")->capture_default_str();
  app.add_option("--shapes", a.shapes, "File of shapes, one per line: 'M N K [dtype] [layout]'");
  app.add_option("--db", a.db, "Tuning database (default: $GEMMTUNE_DB or ~/.cache/gemmtune/tuning.db)");
  app.add_option("--budget", a.budget, "Stop after this many candidates (40) or this long (300s, 5m)");
  app.add_option("--top", a.top, "How many of the best candidates to show")->capture_default_str()->check(CLI::Range(0, 10000));
  app.add_option("--families", a.families, "Only these kernel families (comma-separated)");
  app.add_option("--timeout", a.timeout, "Seconds a candidate may take before it counts as hung")->capture_default_str()->check(CLI::Range(0.1, 86400.0));
  app.add_option("--threads", a.threads, "Compile threads (default: one per core)");
  app.add_option("--device", a.device, "GPU ordinal")->capture_default_str()->check(CLI::Range(0, 63));
  app.add_option("--seed", a.seed, "Seed of the random test data")->capture_default_str();
  app.add_option("--arch", a.arch, "Architecture for --dry-run: sm_80, sm_86, sm_89, sm_90, sm_90a (default: the GPU's, else sm_90a)");
  app.add_flag("--dry-run", a.dry_run, "No GPU: enumerate, prune and compile the candidates, report ptxas figures");
  app.add_flag("--list", a.list_only, "With --dry-run: list the candidates (and their parameters) without compiling");
  app.add_flag("--force", a.force, "Tune again even if the database has the shape");
  app.add_flag("--no-baseline", a.no_baseline, "Do not time cuBLAS");
  app.add_flag("--json", a.json, "Print JSON on stdout instead of tables");
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::vector<gt::Problem> problems_of(const Args& a) {
  std::vector<gt::Problem> out;
  if (!a.shapes.empty()) {
    GT_REQUIRE(a.m == 0 && a.n == 0 && a.k == 0, gt::Errc::invalid_argument,
               "give either --shapes or --m/--n/--k, not both");
    for (const auto& s : gt::cli::read_shapes_file(a.shapes))
      out.push_back(gt::cli::make_cli_problem(s.dtype.empty() ? a.dtype : s.dtype,
                                              s.layout.empty() ? a.layout : s.layout, s.m, s.n, s.k, s.lda, s.ldb, s.ldc));
    return out;
  }
  GT_REQUIRE(a.m != 0 || a.n != 0 || a.k != 0, gt::Errc::invalid_argument,
             "give the shape with --m, --n and --k (or a file with --shapes)");
  out.push_back(gt::cli::make_cli_problem(a.dtype, a.layout, a.m, a.n, a.k, a.lda, a.ldb, a.ldc));
  return out;
}

void print_progress(const gt::Progress& p) {
  if (p.kind == gt::Progress::Kind::phase) {
    std::cerr << "gemm-tune: " << p.text << "\n";
    return;
  }
  const gt::CandidateRecord& c = *p.candidate;
  const std::string timing = c.status == gt::CandidateStatus::ok
                                 ? fmt::format("{:>9} ms {:7.1f} TFLOP/s", gt::cli::format_ms(c.median_ms), c.tflops)
                                 : std::string(30, ' ');
  std::cerr << fmt::format("[{:>4}/{}] {:<16} {} {}{}\n", p.index, p.total, gt::to_string(c.status), timing,
                           c.kernel_name, c.median_ms > 0 && c.median_ms == p.best_ms ? "  *best" : "");
}

// ---- dry run -------------------------------------------------------------------------------

json dry_run_json(const gt::DryRunReport& r) {
  json cands = json::array();
  for (const auto& c : r.candidates)
    cands.push_back({{"name", c.name}, {"family", c.family}, {"config", c.config.params}, {"status", c.status},
                     {"registers", c.registers},
                     {"spills", c.spills}, {"smem_bytes", c.smem_bytes}, {"compile_ms", c.compile_ms},
                     {"cached", c.from_cache}, {"message", c.message}});
  return {{"problem", r.problem.describe()}, {"arch", r.arch}, {"enumerated", r.enumerated},
          {"pruned", r.pruned}, {"pruned_by", r.pruned_by}, {"compiled", r.compiled},
          {"failed", r.failed}, {"seconds", r.seconds}, {"candidates", cands}};
}

void print_dry_run(const gt::DryRunReport& r) {
  gt::cli::Table t({"kernel", "family", "status", "regs", "spills", "smem", "compile ms"});
  std::vector<double> times;
  int spilling = 0;
  for (const auto& c : r.candidates) {
    t.add({c.name, c.family, c.status, std::to_string(c.registers), std::to_string(c.spills),
           std::to_string(c.smem_bytes), fmt::format("{:.0f}{}", c.compile_ms, c.from_cache ? " (cached)" : "")});
    if (c.status == "compiled" && !c.from_cache) times.push_back(c.compile_ms);
    spilling += c.spills > 0;
  }
  std::cout << "dry run: " << r.problem.describe() << " for " << r.arch << "\n" << t.render("  ");
  std::sort(times.begin(), times.end());
  std::cout << fmt::format(
      "{} configurations: {} pruned, {} compiled, {} failed, {} with spills; {} compiled now, median {:.0f} ms; {:.1f} s\n",
      r.enumerated, r.pruned, r.compiled, r.failed, spilling, times.size(),
      times.empty() ? 0.0 : times[times.size() / 2], r.seconds);
  for (const auto& [name, count] : r.pruned_by) std::cout << fmt::format("  pruned by {}: {}\n", name, count);
}

int run_dry(const Args& a, const std::vector<gt::Problem>& problems) {
  std::string arch = a.arch;
  if (arch.empty()) arch = gt::cu::available() ? gt::query_device(a.device).arch.name() : "sm_90a";
  const gt::ArchInfo info = gt::ArchInfo::from_name(arch);
  const gt::Budget budget = gt::Budget::parse(a.budget);
  GT_REQUIRE(!budget.seconds, gt::Errc::invalid_argument, "--dry-run takes a budget in candidates, not time");
  json all = json::array();
  int failed = 0;
  for (const auto& p : problems) {
    const auto report = gt::dry_run(p, info, a.threads, split(a.families), print_progress, budget.candidates.value_or(0),
                                    !a.list_only);
    failed += report.failed;
    if (a.json)
      all.push_back(dry_run_json(report));
    else
      print_dry_run(report);
  }
  if (a.json) std::cout << (all.size() == 1 ? all[0] : json{{"problems", all}}).dump(2) << "\n";
  return failed ? 1 : 0;
}

// ---- tuning --------------------------------------------------------------------------------

std::string ratio_text(double baseline_ms, double ms) {
  return baseline_ms > 0 && ms > 0 ? fmt::format("{:.2f}x", baseline_ms / ms) : "-";
}

json candidate_json(const gt::CandidateRecord& c) {
  return {{"kernel", c.kernel_name}, {"family", c.config.family}, {"status", gt::to_string(c.status)},
          {"median_ms", c.median_ms}, {"min_ms", c.min_ms}, {"max_ms", c.max_ms}, {"tflops", c.tflops},
          {"registers", c.registers}, {"spills", c.spills}, {"config", json::parse(c.config.to_json())}};
}

json tune_json(const gt::TuneReport& r, const std::vector<gt::CandidateRecord>& top) {
  json j = {{"problem", r.problem.describe()}, {"device", r.device.name}, {"arch", r.device.arch.name()},
            {"from_db", r.from_db}, {"complete", r.complete}, {"interrupted", r.interrupted},
            {"seconds", r.seconds}, {"enumerated", r.enumerated}, {"pruned", r.pruned},
            {"already_measured", r.already_measured}, {"measured", r.measured.size()},
            {"baseline_ms", r.baseline_ms}, {"baseline", r.baseline_name}};
  if (r.best) {
    j["best"] = candidate_json(*r.best);
    j["peak_fraction"] = r.best->tflops / r.device.peak_tflops(r.problem.dtype);
    j["ratio_to_cublas"] = r.baseline_ms > 0 ? json(r.baseline_ms / r.best->median_ms) : json(nullptr);
  }
  j["top"] = json::array();
  for (const auto& c : top) j["top"].push_back(candidate_json(c));
  return j;
}

void print_tune(const gt::TuneReport& r, const std::vector<gt::CandidateRecord>& top) {
  const double peak = r.device.peak_tflops(r.problem.dtype);
  std::cout << fmt::format("{} on {} ({}, {} SMs)\n", r.problem.describe(), r.device.name, r.device.arch.name(),
                           r.device.arch.sms);
  gt::cli::Table t({"rank", "kernel", "ms", "TFLOP/s", "% peak", "vs cuBLAS"});
  int rank = 0;
  for (const auto& c : top)
    t.add({std::to_string(++rank), c.kernel_name, gt::cli::format_ms(c.median_ms), fmt::format("{:.1f}", c.tflops),
           fmt::format("{:.0f}%", 100 * c.tflops / peak), ratio_text(r.baseline_ms, c.median_ms)});
  if (r.baseline_ms > 0) {
    const double tflops = r.problem.flops() / (r.baseline_ms * 1e-3) / 1e12;
    t.add({"", r.baseline_name, gt::cli::format_ms(r.baseline_ms), fmt::format("{:.1f}", tflops),
           fmt::format("{:.0f}%", 100 * tflops / peak), "1.00x"});
  }
  if (!t.empty()) std::cout << t.render("  ");
  if (!r.best) {
    std::cout << "no candidate passed verification: nothing stored\n";
    return;
  }
  const auto& b = *r.best;
  std::cout << fmt::format("winner: {} ({}) {} ms, {:.1f} TFLOP/s, {:.0f}% of the {:.0f} TFLOP/s peak", b.kernel_name,
                           b.config.family, gt::cli::format_ms(b.median_ms), b.tflops, 100 * b.tflops / peak, peak);
  if (r.baseline_ms > 0)
    std::cout << fmt::format("; cuBLAS {} ms; ratio {} (cuBLAS time / ours)", gt::cli::format_ms(r.baseline_ms),
                             ratio_text(r.baseline_ms, b.median_ms));
  else if (!r.baseline_name.empty())
    std::cout << "; no cuBLAS baseline: " << r.baseline_name;
  std::cout << "\n";
  if (r.from_db) {
    std::cout << fmt::format("answered from the database in {:.3f} s ({} search); --force tunes again\n",
                             r.seconds, r.complete ? "complete" : "partial");
  } else {
    int failures = 0;
    for (const auto& c : r.measured) failures += c.status != gt::CandidateStatus::ok;
    std::cout << fmt::format("measured {} candidates ({} failed, {} measured before, {} pruned) in {:.1f} s{}\n",
                             r.measured.size(), failures, r.already_measured, r.pruned, r.seconds,
                             r.interrupted ? "; interrupted: run again to measure the rest" : "");
  }
}

std::vector<gt::CandidateRecord> top_candidates(const gt::TuningDb& db, const gt::TuneReport& r, int top) {
  std::vector<gt::CandidateRecord> out;
  for (auto& c : db.candidates(r.device.key, r.problem))
    if (c.status == gt::CandidateStatus::ok && int(out.size()) < top) out.push_back(std::move(c));
  return out;
}

extern "C" void on_interrupt(int) {
  gt::request_stop();
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the program at once
}

// A --db that is not a gemmtune database, or a damaged one, is refused before anything is tuned
// (and without a GPU), and left exactly as it is: TuningDb checks a file before it writes to it.
void check_database(const std::filesystem::path& path) {
  if (std::filesystem::exists(path)) gt::TuningDb checked(path);
}

int run_tune(const Args& a, const std::vector<gt::Problem>& problems) {
  const std::filesystem::path db_path = a.db.empty() ? gt::default_db_path() : std::filesystem::path(a.db);
  check_database(db_path);
  GT_REQUIRE(gt::cu::available(), gt::Errc::no_device, "no GPU: {} (--dry-run compiles without one)",
             gt::cu::unavailable_reason());
  const gt::DeviceInfo device = gt::query_device(a.device);
  GT_REQUIRE(a.arch.empty() || gt::ArchInfo::from_name(a.arch).name() == device.arch.name(), gt::Errc::invalid_argument,
             "--arch {} does not match the GPU ({}): --arch is for --dry-run", a.arch, device.arch.name());
  gt::TuneOptions options;
  options.db_path = db_path;
  options.budget = gt::Budget::parse(a.budget);
  options.force = a.force;
  options.alpha = a.alpha;
  options.beta = a.beta;
  options.seed = a.seed;
  options.compile_threads = a.threads;
  options.candidate_timeout_s = a.timeout;
  options.baseline = !a.no_baseline;
  options.families = split(a.families);
  options.progress = print_progress;
  std::signal(SIGINT, on_interrupt);

  json all = json::array();
  gt::cli::Table summary({"problem", "winner", "ms", "TFLOP/s", "cuBLAS ms", "vs cuBLAS", "source"});
  for (const auto& p : problems) {
    if (gt::stop_requested()) break;
    const gt::TuneReport report = gt::tune(p, options, a.device);
    const gt::TuningDb db(options.db_path);
    const auto top = top_candidates(db, report, a.top);
    if (a.json) {
      all.push_back(tune_json(report, top));
    } else {
      print_tune(report, top);
      if (report.best)
        summary.add({p.describe(), report.best->kernel_name, gt::cli::format_ms(report.best->median_ms),
                     fmt::format("{:.1f}", report.best->tflops), gt::cli::format_ms(report.baseline_ms),
                     ratio_text(report.baseline_ms, report.best->median_ms), report.from_db ? "database" : "tuned"});
    }
  }
  if (a.json) std::cout << (all.size() == 1 ? all[0] : json{{"problems", all}}).dump(2) << "\n";
  if (!a.json && problems.size() > 1) std::cout << "\nsummary\n" << summary.render("  ");
  if (!a.json) std::cout << "database: " << options.db_path.string() << "\n";
  return gt::stop_requested() ? 130 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gemm-tune: tune GEMM shapes for this GPU, compare with cuBLAS, store the winner"};
  Args args;
  add_options(app, args);
  if (int rc = gt::cli::parse("gemm-tune", app, argc, argv); rc >= 0) return rc;
  return gt::cli::guarded_main("gemm-tune", [&] {
    const auto problems = problems_of(args);
    return args.dry_run ? run_dry(args, problems) : run_tune(args, problems);
  });
}
