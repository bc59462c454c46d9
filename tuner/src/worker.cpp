// The worker process: verifies and times candidates on the GPU, one request at a time.
#include "gemmtune/tuner/worker.hpp"

#include <chrono>
#include <iostream>
#include <memory>

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
    verifier_ = std::make_unique<Verifier>(*checker_, problem_, alpha_, beta_, request.at("seed"),
                                           stream_->get());
    settle(request.value("settle_ms", 0.0));
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return {{"event", "ready"}, {"device", device_.name}, {"setup_ms", ms}};
  }

  // Times already verified candidates again (final round), and cuBLAS when asked, their runs
  // taken in turns: a comparison between them that the clocks' drift does not decide.
  json retime(const json& request) {
    std::vector<ReadyKernel> kernels;
    for (const json& config : request.at("configs"))
      kernels.push_back(prepare_kernel(compiler_, KernelConfig::from_json(config.dump()), problem_,
                                       device_.arch));
    const GemmOperands ops = operands_with_fresh_c();
    std::vector<Timer::Launch> launches;
    for (const ReadyKernel& k : kernels)
      launches.push_back([&](CUstream s) { with_workspace(k.plan, problem_, ops, s, k); });
    const json cublas =
        request.value("baseline", false) ? cublas_status(ops) : json{{"available", false}};
    if (cublas.at("available"))
      launches.push_back([&](CUstream s) { cublas_->gemm(problem_, ops, s); });
    const std::vector<Timing> t = timer_->time_together(launches, stream_->get(), timing_);
    json answer = {{"event", "timings"}, {"timings", json::array()}, {"baseline", cublas}};
    for (size_t i = 0; i < kernels.size(); ++i) answer["timings"].push_back(to_json(t[i]));
    if (cublas.at("available")) answer["baseline"].update(to_json(t.back()));
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

  json baseline() {
    const GemmOperands ops = operands_with_fresh_c();
    json answer = cublas_status(ops);
    answer["event"] = "baseline";
    if (!answer.at("available")) return answer;
    answer.update(to_json(timer_->time([&](CUstream s) { cublas_->gemm(problem_, ops, s); },
                                       stream_->get(), timing_)));
    return answer;
  }

 private:
  // Whether cuBLAS can time the problem here (its name), or why not (a message): the rules it
  // documents, then for float8 cuBLASLt's heuristic, which prepares it for these operands
  // (Cublas::prepare: its algorithm, its layout of the scales) outside any timing.
  json cublas_status(const GemmOperands& ops) {
    if (!cublas_) cublas_ = Cublas::load();
    if (!cublas_) return {{"available", false}, {"message", Cublas::why_not()}};
    try {
      cublas_->prepare(problem_, ops, stream_->get());
    } catch (const Error& e) {
      if (e.code() != Errc::unsupported && e.code() != Errc::invalid_argument) throw;
      return {{"available", false}, {"message", e.what()}};
    }
    return {{"available", true}, {"name", cublas_->version()}};
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

  Timing time_kernel(const ReadyKernel& kernel, const TimingSettings& timing) {
    const GemmOperands ops = operands_with_fresh_c();
    return timer_->time([&](CUstream s) { with_workspace(kernel.plan, problem_, ops, s, kernel); },
                        stream_->get(), timing);
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
    const Timing t = time_kernel(kernel, timing);
    rec.status = CandidateStatus::ok;
    rec.median_ms = t.median_ms;
    rec.min_ms = t.min_ms;
    rec.max_ms = t.max_ms;
    rec.runs = t.runs;
    rec.tflops = problem_.flops() / (t.median_ms * 1e-3) / 1e12;
    if (t.stopped_early)
      rec.message = fmt::format(
          "timing stopped after {} runs: slower than the best so far, it cannot win", t.runs);
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
