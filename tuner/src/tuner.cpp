// Orchestration of a tuning run.
#include "gemmtune/tuner/tuner.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <future>
#include <set>

#include "gemmtune/generator/family.hpp"
#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/compiler.hpp"
#include "gemmtune/tuner/thread_pool.hpp"
#include "gemmtune/tuner/worker.hpp"
#include "protocol.hpp"

namespace gemmtune {
namespace {

std::atomic<bool> g_stop{false};

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Planned {
  const Family* family;
  KernelConfig config;
  std::string name;
};

// Valid configurations of every family that applies, most promising first, then the extras.
std::vector<Planned> plan(const Problem& problem, const ArchInfo& arch, const std::vector<std::string>& only,
                          const std::vector<KernelConfig>& extra, bool only_extra, int& enumerated,
                          std::map<std::string, int>& pruned_by) {
  std::vector<Planned> out;
  for (const auto& name : only) {
    const Family& family = find_family(name);  // throws for unknown names
    const std::string why = family.unsupported_reason(problem, arch);
    GT_REQUIRE(why.empty(), Errc::invalid_argument, "family '{}' cannot solve {} on {}: {}", name,
               problem.describe(), arch.name(), why);
  }
  if (!only_extra) {
    for (const Family* family : families_for(problem, arch)) {
      if (!only.empty() && std::find(only.begin(), only.end(), family->name()) == only.end()) continue;
      const SearchSpace space = family->space(problem, arch);
      Pruning pruning = space.prune(problem, arch);
      enumerated += int(space.size());
      for (const auto& [name, count] : pruning.pruned_by) pruned_by[name] += count;
      std::vector<std::pair<double, Planned>> scored;
      for (auto& c : pruning.valid)
        scored.push_back({family->prior(c, problem, arch), Planned{family, c, family->kernel_name(c)}});
      std::stable_sort(scored.begin(), scored.end(), [](auto& a, auto& b) { return a.first > b.first; });
      // The family's default is its known good point for the shape class: measured first, so that
      // a budget never leaves the tuned kernel slower than the untuned call.
      const std::string default_name = family->kernel_name(family->default_config(problem, arch));
      std::stable_partition(scored.begin(), scored.end(), [&](auto& s) { return s.second.name == default_name; });
      for (auto& [score, p] : scored) out.push_back(std::move(p));
    }
  }
  for (const auto& c : extra) {
    const Family& family = find_family(c.family);
    out.push_back(Planned{&family, c, family.kernel_name(c)});
    ++enumerated;
  }
  return out;
}

struct CompileOutcome {
  std::optional<CompiledKernel> kernel;
  std::string error;
};

// Whatever goes wrong with one candidate (NVRTC, a dump folder that cannot be written, memory)
// becomes its record, never the end of the run.
CompileOutcome compile_one(const Compiler& compiler, const Planned& p, const ArchInfo& arch) {
  CompileOutcome out;
  try {
    out.kernel = compiler.compile(emit_source(*p.family, p.config), arch);
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

CandidateRecord failed_record(const Planned& p, CandidateStatus status, const std::string& message) {
  CandidateRecord r;
  r.kernel_name = p.name;
  r.template_version = template_version(*p.family);
  r.config = p.config;
  r.status = status;
  r.message = message;
  return r;
}

// The worker process with its problem set up; restarted after a fault or a timeout.
class Measurer {
 public:
  Measurer(const Problem& problem, const TuneOptions& options)
      : client_(find_worker()), problem_(problem), options_(options) {}
  ~Measurer() { client_.stop(); }

  // Starts the worker and sets the problem up; throws Error(cuda) when it cannot.
  void start() { ensure_ready(); }

  CandidateRecord measure(const Planned& p, int id) {
    ensure_ready();
    const nlohmann::json request = {{"cmd", "measure"}, {"id", id},
                                    {"config", nlohmann::json::parse(p.config.to_json())}};
    auto answer = client_.call(request.dump(), options_.candidate_timeout_s);
    if (!answer) {
      ready_ = false;
      const bool timed_out = client_.failure().starts_with("no answer");
      return failed_record(p, timed_out ? CandidateStatus::timeout : CandidateStatus::fault, client_.failure());
    }
    const auto j = nlohmann::json::parse(*answer);
    if (j.value("exiting", false)) {  // its context is poisoned: the next candidate gets a new worker
      client_.stop();
      ready_ = false;
    }
    if (j.at("event") != "result") {
      return failed_record(p, CandidateStatus::fault, "worker error: " + j.value("message", std::string("?")));
    }
    return candidate_from_json(j.at("candidate"));
  }

  // Timing only, for a candidate that was verified before; nullopt when the worker failed.
  std::optional<Timing> retime(const KernelConfig& config) {
    ensure_ready();
    const nlohmann::json request = {{"cmd", "retime"}, {"config", nlohmann::json::parse(config.to_json())}};
    auto answer = client_.call(request.dump(), options_.candidate_timeout_s);
    if (!answer) {
      ready_ = false;
      return std::nullopt;
    }
    const auto j = nlohmann::json::parse(*answer);
    if (j.at("event") != "timing") return std::nullopt;
    return Timing{j.at("median_ms"), j.at("min_ms"), j.at("max_ms"), j.at("runs")};
  }

  // cuBLAS in the same process, on the same data, timed the same way.
  std::pair<double, std::string> baseline() {
    ensure_ready();
    auto answer = client_.call(R"({"cmd":"baseline"})", options_.candidate_timeout_s);
    if (!answer) {
      ready_ = false;
      return {-1, "cuBLAS baseline failed: " + client_.failure()};
    }
    const auto j = nlohmann::json::parse(*answer);
    if (!j.value("available", false)) return {-1, j.value("message", std::string("cuBLAS unavailable"))};
    return {j.at("median_ms").get<double>(), j.at("name").get<std::string>()};
  }

 private:
  void ensure_ready() {
    if (ready_ && client_.running()) return;
    const nlohmann::json setup = {{"cmd", "setup"},           {"problem", to_json(problem_)},
                                  {"alpha", options_.alpha},  {"beta", options_.beta},
                                  {"seed", options_.seed},    {"timing", to_json(options_.timing)},
                                  {"settle_ms", options_.settle_ms}};
    auto answer = client_.call(setup.dump(), options_.setup_timeout_s);
    GT_REQUIRE(answer, Errc::cuda, "the measuring worker could not start: {}", client_.failure());
    const auto j = nlohmann::json::parse(*answer);
    GT_REQUIRE(j.at("event") == "ready", Errc::cuda, "the measuring worker could not set up {}: {}",
               problem_.describe(), j.value("message", std::string("?")));
    ready_ = true;
  }

  WorkerClient client_;
  Problem problem_;
  const TuneOptions& options_;
  bool ready_ = false;
};

void notify(const TuneOptions& o, Progress p) {
  if (o.progress) o.progress(p);
}

void phase(const TuneOptions& o, std::string text) {
  Progress p;
  p.text = std::move(text);
  notify(o, p);
}

// Times the fastest candidates and cuBLAS again, interleaved, `rounds` times; each keeps its
// best round. Updates the records (and the database) with those timings.
// The verified candidates of the problem on this device, fastest first, that this build can run:
// whatever else a database holds (an imported or edited row) is never retimed or crowned.
std::vector<CandidateRecord> runnable_ok(const TuningDb& db, const TuneReport& report) {
  std::vector<CandidateRecord> out;
  for (auto& c : db.candidates(report.device.key, report.problem))
    if (c.status == CandidateStatus::ok && why_unusable(c.config, report.problem, report.device.arch).empty())
      out.push_back(std::move(c));
  return out;
}

void final_round(Measurer& measurer, TuningDb& db, const TuneReport& report, const TuneOptions& o,
                 double& baseline_ms, std::string& baseline_name) {
  std::vector<CandidateRecord> top = runnable_ok(db, report);
  if (int(top.size()) > o.final_candidates) top.resize(size_t(std::max(0, o.final_candidates)));
  if (top.empty() || o.final_rounds <= 0) return;
  phase(o, fmt::format("final round: the {} fastest{} timed again, {} rounds", top.size(),
                       o.baseline ? " and cuBLAS" : "", o.final_rounds));
  std::vector<std::optional<Timing>> best(top.size());
  double best_baseline = -1;
  for (int round = 0; round < o.final_rounds && !stop_requested(); ++round) {
    for (size_t i = 0; i < top.size(); ++i) {
      const auto t = measurer.retime(top[i].config);
      if (t && (!best[i] || t->median_ms < best[i]->median_ms)) best[i] = t;
    }
    if (o.baseline) {
      const auto [ms, name] = measurer.baseline();
      baseline_name = name;
      if (ms > 0 && (best_baseline < 0 || ms < best_baseline)) best_baseline = ms;
    }
  }
  if (best_baseline > 0) baseline_ms = best_baseline;
  for (size_t i = 0; i < top.size(); ++i) {
    if (!best[i]) continue;
    CandidateRecord& c = top[i];
    c.median_ms = best[i]->median_ms;
    c.min_ms = best[i]->min_ms;
    c.max_ms = best[i]->max_ms;
    c.runs = best[i]->runs;
    c.tflops = report.problem.flops() / (c.median_ms * 1e-3) / 1e12;
    c.message = "timed again in the final round" + (c.message.empty() ? "" : "; " + c.message);
    db.record(report.device.key, report.problem, c);
  }
}

// Throws Error(unsupported) saying why no family can solve the problem on the architecture.
void require_family(const Problem& problem, const ArchInfo& arch) {
  if (!families_for(problem, arch).empty()) return;
  std::string why;
  for (const Family* f : all_families())
    why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", f->name(), f->unsupported_reason(problem, arch));
  GT_THROW(Errc::unsupported, "no kernel family supports {} {} on {} ({})", to_string(problem.dtype), problem.layout(),
           arch.name(), why);
}

}  // namespace

Budget Budget::parse(std::string_view text) {
  Budget b;
  if (text.empty()) return b;
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  const std::string_view unit(end, size_t(text.data() + text.size() - end));
  GT_REQUIRE(ec == std::errc() && value > 0, Errc::invalid_argument,
             "budget '{}' must be a positive number of candidates (40) or seconds (300s, 5m, 1h)", text);
  if (unit.empty() || unit == "c") {
    GT_REQUIRE(value == double(int(value)), Errc::invalid_argument, "budget '{}': a whole number of candidates", text);
    b.candidates = int(value);
  } else if (unit == "s") {
    b.seconds = value;
  } else if (unit == "m") {
    b.seconds = value * 60;
  } else if (unit == "h") {
    b.seconds = value * 3600;
  } else {
    GT_THROW(Errc::invalid_argument, "budget '{}': unknown unit '{}' (use s, m, h, or none for candidates)", text, unit);
  }
  return b;
}

std::string Budget::describe() const {
  if (seconds) return fmt::format("{:.0f} s", *seconds);
  if (candidates) return fmt::format("{} candidates", *candidates);
  return "unlimited";
}

void request_stop() noexcept { g_stop.store(true); }
bool stop_requested() noexcept { return g_stop.load(); }

namespace {

// The valid configurations still to measure: without those this device measured before
// (resume), cut to the candidate budget. Sets the counts of the report; returns the planned
// list and how many were left before the budget.
std::pair<std::vector<Planned>, size_t> plan_run(TuningDb& db, TuneReport& report, const TuneOptions& o) {
  auto planned = plan(report.problem, report.device.arch, o.families, o.extra, o.only_extra, report.enumerated,
                      report.pruned_by);
  for (const auto& [name, count] : report.pruned_by) report.pruned += count;
  std::set<std::string> done;
  if (!o.force)
    for (const auto& c : db.candidates(report.device.key, report.problem)) done.insert(c.kernel_name);
  std::erase_if(planned, [&](const Planned& p) {
    const bool skip = done.count(p.name) > 0;
    report.already_measured += skip;
    return skip;
  });
  const size_t left = planned.size();
  if (o.budget.candidates && planned.size() > size_t(*o.budget.candidates)) planned.resize(size_t(*o.budget.candidates));
  report.to_measure = int(planned.size());
  return {std::move(planned), left};
}

// Sets a flag when it goes out of scope, however that happens.
struct SetOnExit {
  std::atomic<bool>& flag;
  ~SetOnExit() { flag = true; }
};

// Compiles everything on a thread pool and measures in order as compiles finish, recording each
// result as it arrives; then the final round against cuBLAS.
void measure_all(const std::vector<Planned>& planned, TuningDb& db, TuneReport& report, const TuneOptions& o,
                 Clock::time_point start) {
  const ArchInfo& arch = report.device.arch;
  const Compiler compiler;
  std::atomic<bool> cancelled{false};
  ThreadPool pool(o.compile_threads);
  // However this function ends, compiles still queued are not needed: the pool's destructor must
  // not wait for them (a failure would otherwise surface only after every compile).
  const SetOnExit cancel_queued{cancelled};
  std::vector<std::future<CompileOutcome>> compiled;
  for (const auto& p : planned)
    compiled.push_back(pool.submit([&compiler, &p, &arch, &cancelled] {
      return cancelled ? CompileOutcome{{}, "cancelled"} : compile_one(compiler, p, arch);
    }));
  // The worker starts while the first candidates compile; one that cannot start fails the run now.
  Measurer measurer(report.problem, o);
  measurer.start();
  double best_ms = -1;
  for (size_t i = 0; i < planned.size(); ++i) {
    const bool over_time = o.budget.seconds && seconds_since(start) > *o.budget.seconds;
    if (stop_requested() || over_time) {
      report.interrupted = true;
      phase(o, stop_requested() ? "stopping on request" : "time budget spent");
      break;
    }
    CompileOutcome outcome = compiled[i].get();
    CandidateRecord rec;
    if (!outcome.kernel) {
      rec = failed_record(planned[i], CandidateStatus::compile_error, outcome.error);
      ++report.compile_failed;
    } else {
      rec = measurer.measure(planned[i], int(i));
    }
    db.record(report.device.key, report.problem, rec);
    if (rec.status == CandidateStatus::ok && (best_ms < 0 || rec.median_ms < best_ms)) best_ms = rec.median_ms;
    report.measured.push_back(rec);
    Progress p;
    p.kind = Progress::Kind::candidate;
    p.index = int(i) + 1;
    p.total = int(planned.size());
    p.candidate = &report.measured.back();
    p.best_ms = best_ms;
    notify(o, p);
  }
  cancelled = true;  // compiles still queued are not needed any more
  if (stop_requested() || (!o.baseline && o.final_rounds <= 0)) return;
  final_round(measurer, db, report, o, report.baseline_ms, report.baseline_name);
  if (o.baseline && report.baseline_ms < 0) {  // nothing to compare in a final round
    phase(o, "timing cuBLAS on the same problem");
    std::tie(report.baseline_ms, report.baseline_name) = measurer.baseline();
  }
}

}  // namespace

TuneReport tune(const Problem& problem, const TuneOptions& options, int ordinal) {
  validate(problem);
  const auto start = Clock::now();
  TuneReport report;
  report.problem = problem;
  report.device = query_device(ordinal);
  TuningDb db(options.db_path.empty() ? default_db_path() : options.db_path);

  // A complete search answers from the database; an incomplete one resumes.
  if (!options.force && options.extra.empty()) {
    if (auto best = db.best(report.device.key, problem); best && best->complete) {
      report.from_db = true;
      report.best = best->winner;
      report.baseline_ms = best->baseline_ms;
      report.complete = true;
      report.seconds = seconds_since(start);
      return report;
    }
  }
  if (options.extra.empty()) require_family(problem, report.device.arch);

  const auto [planned, left] = plan_run(db, report, options);
  phase(options, fmt::format("{}: {} configurations, {} pruned, {} measured before, {} to measure (budget: {})",
                             problem.describe(), report.enumerated, report.pruned, report.already_measured,
                             report.to_measure, options.budget.describe()));
  measure_all(planned, db, report, options, start);

  report.complete = !report.interrupted && planned.size() == left;
  if (auto ranked = runnable_ok(db, report); !ranked.empty()) report.best = std::move(ranked.front());
  if (report.best)
    db.set_best(report.device.key, problem, report.best->kernel_name, report.best->template_version,
                report.baseline_ms, report.complete);
  report.seconds = seconds_since(start);
  return report;
}

DryRunReport dry_run(const Problem& problem, const ArchInfo& arch, unsigned compile_threads,
                     const std::vector<std::string>& families,
                     const std::function<void(const Progress&)>& progress, int max_candidates, bool compile) {
  validate(problem);
  require_family(problem, arch);
  const auto start = Clock::now();
  DryRunReport report;
  report.problem = problem;
  report.arch = arch.name();
  auto planned = plan(problem, arch, families, {}, false, report.enumerated, report.pruned_by);
  for (const auto& [name, count] : report.pruned_by) report.pruned += count;
  if (max_candidates > 0 && planned.size() > size_t(max_candidates)) planned.resize(size_t(max_candidates));
  const Compiler compiler;
  std::vector<std::future<CompileOutcome>> futures;
  ThreadPool pool(compile_threads);
  for (const auto& p : planned)
    if (compile) futures.push_back(pool.submit([&compiler, &p, &arch] { return compile_one(compiler, p, arch); }));
  for (size_t i = 0; i < planned.size(); ++i) {
    DryRunEntry e;
    e.name = planned[i].name;
    e.family = std::string(planned[i].family->name());
    e.config = planned[i].config;
    if (!compile) {
      e.status = "listed";
      report.candidates.push_back(std::move(e));
      continue;
    }
    CompileOutcome outcome = futures[i].get();
    if (outcome.kernel) {
      const PtxasReport& r = outcome.kernel->report;
      e.status = "compiled";
      e.registers = r.registers;
      e.spills = r.found ? r.spills() : -1;
      e.smem_bytes = int(planned[i].family->geometry(planned[i].config, problem, arch).smem_bytes) +
                     std::max(0, r.smem_static);
      e.compile_ms = outcome.kernel->compile_ms;
      e.from_cache = outcome.kernel->from_cache;
      ++report.compiled;
    } else {
      e.status = "compile_error";
      e.message = outcome.error;
      ++report.failed;
    }
    report.candidates.push_back(std::move(e));
    if (progress) {
      Progress p;
      p.kind = Progress::Kind::phase;
      p.index = int(i) + 1;
      p.total = int(planned.size());
      p.text = fmt::format("[{}/{}] {} {}", i + 1, planned.size(), report.candidates.back().name,
                           report.candidates.back().status);
      progress(p);
    }
  }
  report.seconds = seconds_since(start);
  return report;
}

}  // namespace gemmtune
