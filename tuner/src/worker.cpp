// The worker process: verifies and times candidates on the GPU, one request at a time.
#include "gemmtune/tuner/worker.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/device.hpp"
#include "gemmtune/runtime/driver.hpp"
#include "gemmtune/runtime/workspace.hpp"
#include "gemmtune/tuner/checker.hpp"
#include "gemmtune/tuner/cublas.hpp"
#include "gemmtune/tuner/timer.hpp"
#include "nvml.hpp"
#include "protocol.hpp"

namespace gemmtune {
namespace {

using nlohmann::json;

// A routing a grouped problem is timed on: its group ends, in device memory of their own.
struct TimedRouting {
  Routing routing;
  DeviceBuffer ends;
};

const char* name_of(Routing r) {
  switch (r) {
    case Routing::uniform:
      return "uniform";
    case Routing::skewed:
      return "skewed";
    case Routing::ragged:
      return "ragged";
  }
  return "?";
}

// True when the context can no longer be used: the process must exit after answering.
bool context_poisoned() {
  const CUresult r = cu::api().cuCtxSynchronize();
  return cu::is_sticky(r);
}

class Worker {
 public:
  json setup(const json& request) {
    const auto start = std::chrono::steady_clock::now();
    // The tuner names its GPU; a worker started by an older tuner uses the first one.
    make_current(request.value("device", 0));
    device_ = query_device(current_device());
    problem_ = problem_from_json(request.at("problem"));
    alpha_ = request.at("alpha");
    beta_ = request.at("beta");
    timing_ = timing_from_json(request.at("timing"));
    checker_ = std::make_unique<Checker>(compiler_, device_.arch);
    stream_ = std::make_unique<StreamHandle>();
    timer_ = std::make_unique<Timer>(device_);
    const uint64_t seed = request.at("seed");
    verifier_ =
        std::make_unique<Verifier>(*checker_, problem_, alpha_, beta_, seed, stream_->get());
    route_timings(seed);
    settle(request.value("settle_ms", 0.0));
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return {{"event", "ready"}, {"device", device_.name}, {"setup_ms", ms}};
  }

  // Times already verified candidates again (final round), and cuBLAS when asked, their runs
  // taken in turns: a comparison between them that the clocks' drift does not decide. A grouped
  // problem's are taken in turns on each timed routing, one after the other; each time is the
  // mean over the routings (mean_over_routings).
  json retime(const json& request) {
    std::vector<ReadyKernel> kernels;
    for (const json& config : request.at("configs"))
      kernels.push_back(prepare_kernel(compiler_, KernelConfig::from_json(config.dump()), problem_,
                                       device_.arch));
    json cublas = {{"available", false}};
    std::vector<std::vector<Timing>> routed(kernels.size() + 1);  // cuBLAS's last
    for (size_t r = 0; r < routing_count(); ++r) {
      const GemmOperands ops = timing_operands(r);
      // cuBLAS prepared for this routing's ends, outside the timing; unavailable on one routing
      // is unavailable.
      if (request.value("baseline", false) && (r == 0 || cublas.at("available")))
        cublas = cublas_status(ops, r);
      std::vector<Timer::Launch> launches;
      for (const ReadyKernel& k : kernels)
        launches.push_back([&](CUstream s) { with_workspace(k.plan, problem_, ops, s, k); });
      if (cublas.at("available"))
        launches.push_back([&](CUstream s) { cublas_->gemm(problem_, ops, s); });
      const std::vector<Timing> t = timer_->time_together(launches, stream_->get(), timing_);
      for (size_t i = 0; i < kernels.size(); ++i) routed[i].push_back(t[i]);
      if (cublas.at("available")) routed.back().push_back(t.back());
    }
    json answer = {{"event", "timings"}, {"timings", json::array()}, {"baseline", cublas}};
    for (size_t i = 0; i < kernels.size(); ++i)
      answer["timings"].push_back(to_json(mean_over_routings(routed[i])));
    if (cublas.at("available")) add_timing(answer["baseline"], routed.back());
    return answer;
  }

  json measure(const json& request) {
    settle(request.value("settle_ms", 0.0));  // the GPU idled while the tuner waited on a compile
    CandidateRecord rec;
    rec.config = KernelConfig::from_json(request.at("config").dump());
    const Family& family = find_family(rec.config.family);
    rec.kernel_name = family.kernel_name(rec.config);
    rec.template_version = template_version(family);
    TimingSettings timing = timing_;
    timing.abort_above_ms = request.value("abort_above_ms", 0.0);
    timing.enough_above_ms = request.value("enough_above_ms", 0.0);
    measure_into(rec, family, timing);
    json answer = {{"event", "result"}, {"id", request.at("id")}, {"candidate", to_json(rec)}};
    return answer;
  }

  // cuBLAS timed as the candidates are: on each timed routing, its time the mean over them.
  json baseline() {
    json answer;
    std::vector<Timing> routed;
    for (size_t r = 0; r < routing_count(); ++r) {
      const GemmOperands ops = timing_operands(r);
      answer = cublas_status(ops, r);
      answer["event"] = "baseline";
      if (!answer.at("available")) return answer;
      routed.push_back(timer_->time([&](CUstream s) { cublas_->gemm(problem_, ops, s); },
                                    stream_->get(), timing_));
    }
    add_timing(answer, routed);
    return answer;
  }

 private:
  // Whether cuBLAS can time the problem here (its name), or why not (a message): the rules it
  // documents, then for float8 cuBLASLt's heuristic, which prepares it for these operands
  // (Cublas::prepare: its algorithm, its layout of the scales; a grouped problem's sizes, read
  // from the ends of `ops`) outside any timing. `routing`: the timed routing of `ops`, named in
  // the message when cuBLAS refused a routing after the first.
  json cublas_status(const GemmOperands& ops, size_t routing = 0) {
    if (!cublas_) cublas_ = Cublas::load();
    if (!cublas_) return {{"available", false}, {"message", Cublas::why_not()}};
    try {
      cublas_->prepare(problem_, ops, stream_->get());
    } catch (const Error& e) {
      if (e.code() != Errc::unsupported && e.code() != Errc::invalid_argument) throw;
      std::string why = e.what();
      if (routing > 0 && routing < routings_.size())  // on uniform it was possible
        why += fmt::format(" (the {} routing)", name_of(routings_[routing].routing));
      return {{"available", false}, {"message", why}};
    }
    return {{"available", true}, {"name", cublas_->version()}};
  }

  // Tuning a grouped problem times each candidate, cuBLAS and the final round on two routings
  // of its tokens, uniform (each token to a random expert) and skewed (one expert ten times the
  // mean; issue 34: "a routing drawn like a real one"), one timing after the other, and ranks by
  // the mean of the two (mean_over_routings): a kernel that skew slows down pays for it. One
  // group has no skew: uniform alone. Their ends are made once, here, with the same seeds for
  // every candidate (a restarted worker makes the same), each in a buffer of its own: timing
  // never reads the verifier's ends, which its reference was computed on and which verification
  // may leave routed otherwise (ragged). A dense problem has none and is timed once, on the
  // verifier's data, as always.
  void route_timings(uint64_t seed) {
    routings_.clear();
    if (!problem_.grouped()) return;
    for (Routing routing : {Routing::uniform, Routing::skewed}) {
      if (routing == Routing::skewed && problem_.groups < 2) break;
      const std::vector<int32_t> host =
          group_ends_of(problem_, routing, seed * 13 + 5 + routings_.size());
      TimedRouting timed{routing, DeviceBuffer(host.size() * sizeof(int32_t))};
      GT_CU(cuMemcpyHtoDAsync(timed.ends.ptr(), host.data(), timed.ends.bytes(), stream_->get()));
      stream_->synchronize();  // before `host` goes
      routings_.push_back(std::move(timed));
    }
  }
  size_t routing_count() const { return std::max<size_t>(routings_.size(), 1); }

  // The operands of the timing on timed routing `r` (of routing_count()), C back at its first
  // values.
  GemmOperands timing_operands(size_t r) {
    GemmOperands ops = operands_with_fresh_c();
    if (r < routings_.size()) ops.group_ends = routings_[r].ends.ptr();
    return ops;
  }

  // The time over the routings into `answer` (mean_over_routings), and each routing's median
  // when there are several.
  void add_timing(json& answer, const std::vector<Timing>& routed) const {
    answer.update(to_json(mean_over_routings(routed)));
    if (routed.size() < 2) return;
    answer["routings"] = json::object();
    for (size_t r = 0; r < routed.size(); ++r)
      answer["routings"][name_of(routings_[r].routing)] = routed[r].median_ms;
  }

  // "uniform 0.1234 ms, skewed 0.1301 ms": what skew costs, for people; empty for one routing.
  std::string routings_text(const std::vector<Timing>& routed) const {
    std::string text;
    if (routed.size() < 2) return text;
    for (size_t r = 0; r < routed.size(); ++r)
      text += fmt::format("{}{} {:.4f} ms", r ? ", " : "", name_of(routings_[r].routing),
                          routed[r].median_ms);
    return text;
  }

  void measure_into(CandidateRecord& rec, const Family& family, const TimingSettings& timing) {
    std::unique_ptr<ReadyKernel> kernel;
    try {
      kernel = std::make_unique<ReadyKernel>(
          prepare_kernel(compiler_, rec.config, problem_, device_.arch));
    } catch (const Error& e) {
      rec.status = e.code() == Errc::compile ? CandidateStatus::compile_error
                                             : CandidateStatus::out_of_resources;
      rec.message = e.what();
      return;
    }
    const PtxasReport& report = kernel->compiled.report;
    rec.registers = report.registers;
    rec.spills = report.found ? report.spills() : -1;
    rec.smem_bytes = int(kernel->plan.smem_bytes) + std::max(0, report.smem_static);
    rec.compile_ms = kernel->compiled.compile_ms;
    if (kernel->loaded->occupancy(kernel->plan) == 0) {
      rec.status = CandidateStatus::out_of_resources;
      rec.message = fmt::format("no block fits an SM ({} registers, {} bytes shared memory)",
                                rec.registers, rec.smem_bytes);
      return;
    }
    workspaces_.clear();  // a wrong kernel measured before must not leave counters to this one
    try {
      const Verdict v = verifier_->verify(
          [&](const Problem& p, const GemmOperands& ops, CUstream s) {
            with_workspace(family.plan(rec.config, p, device_.arch), p, ops, s, *kernel);
          },
          stream_->get(), kernel->plan.reads_c);
      rec.max_error = v.max_error;
      if (!v.ok) {
        rec.status = CandidateStatus::wrong_result;
        rec.message = v.message;
        return;
      }
      time_into(rec, *kernel, timing);
    } catch (const Error& e) {
      if (e.code() != Errc::cuda) throw;
      poisoned_ = context_poisoned();
      rec.status = poisoned_ ? CandidateStatus::fault : CandidateStatus::out_of_resources;
      rec.message = e.what();
    }
  }

  // Runs the kernel with the workspace its launch asks for.
  void with_workspace(const LaunchPlan& plan, const Problem& p, GemmOperands ops, CUstream s,
                      const ReadyKernel& kernel) {
    workspaces_.provide(s, plan, ops);
    kernel.run(plan, p, ops, s);
  }

  // The problem's operands, C back at its first values (beta != 0 reads it), so that every
  // timing starts from the same data.
  GemmOperands operands_with_fresh_c() {
    const ProblemData& data = verifier_->data();
    data.reset_c(*checker_, beta_, stream_->get());
    return data.operands(alpha_, beta_);
  }

  // The kernel's timing on each timed routing, the early stops of each such that the candidate
  // stops only when its mean over the routings cannot win (stops_for_routing).
  std::vector<Timing> time_kernel(const ReadyKernel& kernel, const TimingSettings& timing) {
    std::vector<Timing> routed;
    for (size_t r = 0; r < routing_count(); ++r) {
      const GemmOperands ops = timing_operands(r);
      routed.push_back(
          timer_->time([&](CUstream s) { with_workspace(kernel.plan, problem_, ops, s, kernel); },
                       stream_->get(), stops_for_routing(timing, routed, int(routing_count()))));
    }
    return routed;
  }

  // Keeps the GPU busy for a while before the first measurement, so that the first candidates
  // are not timed on a cooler (faster-clocked) GPU than the last ones.
  void settle(double ms) {
    if (ms <= 0) return;
    const ProblemData& data = verifier_->data();
    const GemmOperands ops = data.operands(alpha_, beta_);
    const bool cublas = cublas_status(ops).at("available");
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
               .count() < ms) {
      for (int i = 0; i < 10; ++i) {
        if (cublas)
          cublas_->gemm(problem_, ops, stream_->get());
        else
          GT_CU(cuMemsetD32Async(data.c.ptr(), 0, data.c.bytes() / 4, stream_->get()));
      }
      stream_->synchronize();
    }
  }

  void time_into(CandidateRecord& rec, const ReadyKernel& kernel, const TimingSettings& timing) {
    const std::vector<Timing> routed = time_kernel(kernel, timing);
    const Timing t = mean_over_routings(routed);
    rec.status = CandidateStatus::ok;
    rec.median_ms = t.median_ms;
    rec.min_ms = t.min_ms;
    rec.max_ms = t.max_ms;
    rec.runs = t.runs;
    rec.tflops = problem_.flops() / (t.median_ms * 1e-3) / 1e12;
    rec.message = routings_text(routed);
    if (t.stopped_early)
      rec.message +=
          fmt::format("{}timing stopped after {} runs: slower than the best so far, it cannot win",
                      rec.message.empty() ? "" : "; ", t.runs);
    if (kernel.plan.persistent)
      rec.message += fmt::format("{}persistent grid of {} CTAs", rec.message.empty() ? "" : "; ",
                                 persistent_grid(kernel.plan, kernel.resident_ctas).grid[0]);
    if (auto clocks = sample_clocks(device_.pci_bus_id))
      rec.message +=
          fmt::format("{}SM clock {} MHz, {} C after timing", rec.message.empty() ? "" : "; ",
                      clocks->sm_mhz, clocks->temperature_c);
  }

 public:
  bool poisoned() const { return poisoned_; }

 private:
  Compiler compiler_;
  DeviceInfo device_;
  Problem problem_;
  float alpha_ = 1, beta_ = 0;
  TimingSettings timing_;
  std::unique_ptr<Checker> checker_;
  std::unique_ptr<StreamHandle> stream_;
  std::unique_ptr<Timer> timer_;
  std::unique_ptr<Verifier> verifier_;
  std::vector<TimedRouting> routings_;  // a grouped problem's (route_timings); none when dense
  std::unique_ptr<Cublas> cublas_;
  Workspaces workspaces_;
  bool poisoned_ = false;
};

}  // namespace

int run_worker(std::istream& in, std::ostream& out) {
  Worker worker;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json answer;
    try {
      const json request = json::parse(line);
      const std::string cmd = request.at("cmd");
      if (cmd == "quit") return 0;
      if (cmd == "setup")
        answer = worker.setup(request);
      else if (cmd == "measure")
        answer = worker.measure(request);
      else if (cmd == "baseline")
        answer = worker.baseline();
      else if (cmd == "retime")
        answer = worker.retime(request);
      else
        answer = {{"event", "error"}, {"message", "unknown command '" + cmd + "'"}};
    } catch (const std::exception& e) {
      answer = {{"event", "error"}, {"message", e.what()}};
    }
    // The CUDA context is unusable after a sticky error: say so, then exit.
    if (worker.poisoned()) answer["exiting"] = true;
    out << answer.dump() << std::endl;
    if (worker.poisoned()) return 3;
  }
  return 0;
}

}  // namespace gemmtune
