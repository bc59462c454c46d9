// gemm-bench: the library's choice against cuBLAS, shape by shape, in one process, on the same
// data, timed the same way. Every result is verified before it is timed.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli_common.hpp"
#include "gemmtune/gemmtune.hpp"
#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/device.hpp"
#include "gemmtune/runtime/driver.hpp"
#include "gemmtune/runtime/workspace.hpp"
#include "gemmtune/tuner/checker.hpp"
#include "gemmtune/tuner/cublas.hpp"
#include "gemmtune/tuner/timer.hpp"

namespace gt = gemmtune;
using nlohmann::json;

namespace {

struct Args {
  std::string suite = "default", shapes, layout = "nn", csv, db;
  std::vector<std::string> vary;  // --vary: parameter changes to the selection, as JSON objects
  gt::cli::TypeArgs types;        // --dtype, --dtype-b, --out, --scaling, --accum, --groups, ...
  int64_t m = 0, n = 0, k = 0;
  bool json = false, overhead = false, mma_ceiling = false, read_ceiling = false;
  int device = 0;
  int repeat = 1;
  float alpha = 1.0f, beta = 0.0f;
};

// Shapes of the built-in suites, as "M N K [dtype] [layout]".
std::vector<std::string> suite(const std::string& name) {
  if (name == "default")
    return {"1024 1024 1024", "2048 2048 2048", "4096 4096 4096", "8192 8192 8192"};
  if (name == "small") return {"1 1 1", "17 33 65", "257 255 513", "1024 1024 1024"};
  if (name == "llm")
    return {"8192 8192 8192",  "4096 4096 4096", "2048 2048 2048",
            "4096 14336 4096", "8192 8192 1024", "128 8192 8192"};
  // Mid-size problems whose usual tiles leave a round of the SMs part empty (issue 37).
  if (name == "mid")
    return {"640 2048 5120 bf16 tn", "1408 4096 2048 bf16 tn", "2304 1024 4096 bf16 tn",
            "5120 640 5120 bf16 tn", "2560 2560 2560 f16 nn",  "1792 1792 1792 f16 nn"};
  GT_THROW(gt::Errc::invalid_argument, "unknown suite '{}' (default, small, llm, mid)", name);
}

// A problem and the beta it runs with (a shape's beta=, else --beta).
struct Case {
  gt::Problem problem;
  float beta = 0.0f;
};

std::vector<Case> cases_of(const Args& a) {
  std::vector<gt::cli::ShapeLine> lines;
  if (a.m || a.n || a.k)
    lines.push_back({a.m, a.n, a.k, "", ""});
  else if (!a.shapes.empty())
    lines = gt::cli::read_shapes_file(a.shapes);
  else
    for (const auto& s : suite(a.suite)) lines.push_back(gt::cli::parse_shape_line(s));
  std::vector<Case> out;
  for (const auto& l : lines)
    out.push_back(
        {gt::cli::problem_of_line(l, a.types, a.layout, a.beta), l.beta.value_or(a.beta)});
  return out;
}

struct Row {
  gt::Problem problem;
  float beta = 0.0f;
  gt::Selection selection;
  gt::Timing ours, cublas;  // the median repeat of each
  bool cublas_ok = false;
  // How the baseline applied the epilogue: cuBLASLt's own, or the GEMM then an elementwise pass
  // (timed together).
  gt::EpiloguePath cublas_path = gt::EpiloguePath::none;
  // Our largest error on the problem's own data and points, the ones cuBLAS's is measured at;
  // and over every case the verifier ran (smaller odd sizes and the other beta path too, every
  // element of them: more points, so a larger maximum of the same rounding).
  double max_error = 0;
  double max_error_all_cases = 0;
  // cuBLAS's largest error on the same data and points; -1 where it has no result.
  double cublas_error = -1;
  std::string wrong;  // why the library's result failed verification (then nothing is timed)
  std::vector<double> ratios;  // cuBLAS time / ours, one per repeat (runs in turns)
  double ratio() const { return median(ratios); }
  static double median(std::vector<double> v) {
    if (v.empty()) return -1;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  }
};

double tflops(const gt::Problem& p, double ms) {
  return ms > 0 ? p.flops() / (ms * 1e-3) / 1e12 : 0;
}

// The fewest bytes a GEMM moves: A and B read once, D written (and C read when beta != 0): a
// gated problem's D has M / 2 rows (Problem::operand_bytes counts output_rows()).
double min_bytes(const gt::Problem& p) {
  return p.operand_bytes();
}
double gbps(const gt::Problem& p, double ms) {
  return ms > 0 ? min_bytes(p) / (ms * 1e-3) / 1e9 : 0;
}
// Below this many FLOPs per byte a problem is bound by memory on a Hopper GPU (bf16 ~ 990
// TFLOP/s over ~3.35 TB/s): its GB/s is the figure that matters.
bool memory_bound(const gt::Problem& p) {
  return p.flops() / min_bytes(p) < 295;
}

gt::Timing median_timing(std::vector<gt::Timing> t) {
  std::sort(t.begin(), t.end(),
            [](const gt::Timing& a, const gt::Timing& b) { return a.median_ms < b.median_ms; });
  return t[t.size() / 2];
}

// How cuBLAS runs p (its epilogue's path), prepared outside the timing (cuBLASLt's algorithm and
// scales, for float8 and epilogues; the elementwise pass compiled); else says why not, and p has
// no baseline.
std::optional<gt::EpiloguePath> baseline_ready(const gt::Cublas* cublas, const gt::Problem& p,
                                               const gt::GemmOperands& ops, CUstream stream) {
  if (!cublas) return std::nullopt;
  try {
    return cublas->prepare(p, ops, stream);
  } catch (const gt::Error& e) {
    if (e.code() != gt::Errc::unsupported && e.code() != gt::Errc::invalid_argument) throw;
    std::cerr << "gemm-bench: cuBLAS n/a (" << e.what() << ")\n";
    return std::nullopt;
  }
}

// cuBLAS's largest error on the problem's own data and points, checked as ours is there
// (epilogue included), or -1 where it refuses it. A result out of tolerance is said on stderr.
double baseline_error(const gt::Cublas& cublas, const gt::Verifier& verifier, CUstream stream) {
  try {
    const gt::Verdict v = verifier.verify_problem(
        [&](const gt::Problem& q, const gt::GemmOperands& o, CUstream s) { cublas.gemm(q, o, s); },
        stream);
    if (!v.ok)
      std::cerr << fmt::format("gemm-bench: cuBLAS's result fails the check at {} of {} points\n",
                               v.bad, v.points);
    return v.max_error;
  } catch (const gt::Error& e) {
    if (e.code() != gt::Errc::unsupported && e.code() != gt::Errc::invalid_argument) throw;
    return -1;
  }
}

// The library's descriptor of a problem, with the scales of its data (none without scaling) and
// its groups' ends, or counts when masked (none unless grouped).
gt::MatmulDesc desc_of(const gt::Problem& p, const gt::GemmOperands& o) {
  gt::MatmulDesc desc{p.types, p.scaling, p.op_a, p.op_b};
  desc.accumulation = p.accumulation;
  desc.precision = p.precision;
  desc.scale_a = reinterpret_cast<const float*>(o.scale_a);
  desc.scale_b = reinterpret_cast<const float*>(o.scale_b);
  desc.groups = p.groups;
  desc.group_ends = reinterpret_cast<const int32_t*>(o.group_ends);
  desc.group_layout = p.group_layout;
  desc.epilogue = p.epilogue;
  desc.bias = reinterpret_cast<const void*>(o.bias);
  desc.aux = reinterpret_cast<void*>(o.aux);
  return desc;
}

// One call of the library on a problem's operands, as a program makes it.
void library_call(gt::Library& lib, const gt::Problem& q, const gt::GemmOperands& o, CUstream s) {
  lib.matmul(desc_of(q, o), q.m, q.n, q.k, o.alpha, reinterpret_cast<const void*>(o.a), q.lda,
             reinterpret_cast<const void*>(o.b), q.ldb, o.beta, reinterpret_cast<void*>(o.c), q.ldc,
             reinterpret_cast<gt::Stream>(s));
}

// Verifies the library's result, then times it and cuBLAS `repeat` times, their runs taken in
// turns (Timer::time_together), so that every ratio comes from the same clocks and temperature.
Row bench_one(const Case& c, const Args& a, gt::Library& lib, const gt::Checker& checker,
              const gt::Timer& timer, const gt::Cublas* cublas, CUstream stream) {
  const gt::Problem& p = c.problem;
  Row row;
  row.problem = p;
  row.beta = c.beta;
  const gt::Verifier verifier(checker, p, a.alpha, c.beta, 42, stream);
  auto run = [&](const gt::Problem& q, const gt::GemmOperands& o, CUstream s) {
    library_call(lib, q, o, s);
  };
  const gt::Verdict v = verifier.verify(run, stream);
  row.max_error = v.problem_max_error;
  row.max_error_all_cases = v.max_error;
  row.selection = lib.select(p);
  if (!v.ok) {
    row.wrong = v.message;
    std::cerr << "gemm-bench: WRONG RESULT from " << row.selection.kernel << ": " << v.message
              << "\n";
    return row;
  }
  // With beta != 0 every run reads the C the run before it wrote, ours and cuBLAS alike.
  const gt::GemmOperands ops = verifier.data().operands(a.alpha, c.beta);
  const gt::TimingSettings settings;
  std::vector<gt::Timing> ours, theirs;
  const std::optional<gt::EpiloguePath> path = baseline_ready(cublas, p, ops, stream);
  const bool baseline = path.has_value();
  if (baseline) {
    row.cublas_path = *path;
    row.cublas_error = baseline_error(*cublas, verifier, stream);
  }
  std::vector<gt::Timer::Launch> launches = {[&](CUstream s) { run(p, ops, s); }};
  if (baseline) launches.push_back([&](CUstream s) { cublas->gemm(p, ops, s); });
  for (int r = 0; r < std::max(1, a.repeat); ++r) {
    const std::vector<gt::Timing> t = timer.time_together(launches, stream, settings);
    ours.push_back(t.front());
    if (!baseline) continue;
    theirs.push_back(t.back());
    row.ratios.push_back(theirs.back().median_ms / ours.back().median_ms);
  }
  row.ours = median_timing(ours);
  if (baseline) {
    row.cublas = median_timing(theirs);
    row.cublas_ok = true;
  }
  return row;
}

// The library's selection for p with `change` (a JSON object of family parameters) applied.
gt::KernelConfig varied(const gt::Selection& sel, const std::string& change) {
  json config = json::parse(sel.config);
  json patch;
  try {
    patch = json::parse(change);
  } catch (const json::exception& e) {
    GT_THROW(gt::Errc::invalid_argument, "--vary '{}' is not a JSON object: {}", change, e.what());
  }
  GT_REQUIRE(patch.is_object(), gt::Errc::invalid_argument,
             "--vary '{}' is not a JSON object of parameters", change);
  config["params"].merge_patch(patch);
  return gt::KernelConfig::from_json(config.dump());
}

// The variants of the selection that --vary asks for, each checked against the family's rules
// and verified on the verifier's shapes (each run with its own plan); `refused` says why the
// others are not.
struct Variants {
  std::vector<std::string> names;
  std::vector<gt::ReadyKernel> kernels;
  std::vector<std::string> refused;
};
Variants verified_variants(const Args& a, const gt::Selection& sel, const gt::Problem& p,
                           const gt::Verifier& verifier, gt::Workspaces& workspaces,
                           const gt::DeviceInfo& dev, CUstream stream) {
  Variants v;
  for (const std::string& change : a.vary) {
    try {
      const gt::KernelConfig config = varied(sel, change);
      const std::string invalid = gt::find_family(config.family).why_invalid(config, p, dev.arch);
      if (!invalid.empty()) {
        v.refused.push_back(fmt::format("{}: {}", change, invalid));
        continue;
      }
      gt::ReadyKernel k = gt::prepare_kernel(gt::Compiler(), config, p, dev.arch);
      auto run = [&](const gt::Problem& q, const gt::GemmOperands& o, CUstream s) {
        const gt::LaunchPlan plan = k.family->plan(k.config, q, dev.arch);
        gt::GemmOperands ops = o;
        workspaces.provide(s, plan, ops);
        k.run(plan, q, ops, s);
      };
      const gt::Verdict verdict = verifier.verify(run, stream, k.plan.reads_c);
      if (!verdict.ok) {
        v.refused.push_back(fmt::format("{}: WRONG ({})", change, verdict.message));
        continue;
      }
      v.names.push_back(change + " " + k.compiled.name);
      v.kernels.push_back(std::move(k));
    } catch (const gt::Error& e) {
      if (e.code() == gt::Errc::cuda) throw;
      v.refused.push_back(fmt::format("{}: {}", change, e.what()));
    }
  }
  return v;
}

// --vary: the library's selection and each verified variant of it, timed in turns with cuBLAS
// `repeat` times; a table of each one's median time and its ratios, then the variants refused.
void bench_variants(const Case& c, const Args& a, gt::Library& lib, const gt::Checker& checker,
                    const gt::Timer& timer, const gt::Cublas* cublas, const gt::DeviceInfo& dev,
                    CUstream stream) {
  const gt::Problem& p = c.problem;
  const gt::Verifier verifier(checker, p, a.alpha, c.beta, 42, stream);
  const gt::Selection sel = lib.select(p);
  gt::Workspaces workspaces;
  const Variants v = verified_variants(a, sel, p, verifier, workspaces, dev, stream);
  const gt::GemmOperands ops = verifier.data().operands(a.alpha, c.beta);
  std::vector<gt::Timer::Launch> launches = {[&](CUstream s) { library_call(lib, p, ops, s); }};
  for (const gt::ReadyKernel& k : v.kernels)
    launches.push_back([&](CUstream s) {
      gt::GemmOperands o = ops;
      workspaces.provide(s, k.plan, o);
      k.run(k.plan, p, o, s);
    });
  const bool baseline = baseline_ready(cublas, p, ops, stream).has_value();
  if (baseline) launches.push_back([&](CUstream s) { cublas->gemm(p, ops, s); });
  std::vector<std::vector<double>> ms(launches.size());
  for (int r = 0; r < std::max(1, a.repeat); ++r) {
    const std::vector<gt::Timing> t = timer.time_together(launches, stream, gt::TimingSettings{});
    for (size_t i = 0; i < t.size(); ++i) ms[i].push_back(t[i].median_ms);
  }
  std::vector<std::string> names = {"selection " + sel.kernel};
  names.insert(names.end(), v.names.begin(), v.names.end());
  gt::cli::Table t({"kernel", "ms", "TFLOP/s", "vs selection", "vs cuBLAS"});
  const double selection_ms = Row::median(ms[0]);
  const double cublas_ms = baseline ? Row::median(ms.back()) : -1;
  for (size_t i = 0; i < names.size(); ++i) {
    const double m = Row::median(ms[i]);
    t.add({names[i], gt::cli::format_ms(m), fmt::format("{:.1f}", tflops(p, m)),
           fmt::format("{:.3f}x", selection_ms / m),
           baseline ? fmt::format("{:.3f}x", cublas_ms / m) : "-"});
  }
  std::cout << p.describe() << ", variants of the selection (median of " << a.repeat
            << " repeats, runs in turns"
            << (baseline ? ", cuBLAS " + gt::cli::format_ms(cublas_ms) + " ms" : "") << "):\n"
            << t.render("  ");
  for (const std::string& why : v.refused) std::cout << "  not timed: " << why << "\n";
}

// Host time to enqueue one call through the library, minus a bare launch of the same kernel.
void measure_overhead(gt::Library& lib, const gt::Checker& checker, CUstream stream, bool as_json) {
  const gt::Problem p = gt::make_problem(gt::DType::f32, gt::Op::N, gt::Op::N, 64, 64, 64);
  const gt::ProblemData data(p, checker, 7, stream);
  const auto ops = data.operands(1.0f, 0.0f);
  auto call = [&] {
    lib.matmul(desc_of(p, ops), p.m, p.n, p.k, 1.0f, reinterpret_cast<const void*>(ops.a), p.lda,
               reinterpret_cast<const void*>(ops.b), p.ldb, 0.0f, reinterpret_cast<void*>(ops.c),
               p.ldc, reinterpret_cast<gt::Stream>(stream));
  };
  call();
  const gt::Selection sel = lib.select(p);
  const gt::DeviceInfo dev = gt::query_device(gt::current_device());
  const gt::ReadyKernel bare =
      gt::prepare_kernel(gt::Compiler(), gt::KernelConfig::from_json(sel.config), p, dev.arch);
  const std::vector<std::byte> args = bare.arguments(bare.plan, p, ops);
  auto per_call_us = [&](const std::function<void()>& enqueue) {
    std::vector<double> batches;
    for (int b = 0; b < 30; ++b) {
      GT_CU(cuStreamSynchronize(stream));
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 200; ++i) enqueue();
      batches.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
          200);
    }
    GT_CU(cuStreamSynchronize(stream));
    std::sort(batches.begin(), batches.end());
    return batches[batches.size() / 2];
  };
  const double library_us = per_call_us(call);
  const double bare_us = per_call_us([&] { bare.launch_bare(bare.plan, args, stream); });
  if (as_json)
    std::cout << json{{"overhead_us", library_us - bare_us},
                      {"library_call_us", library_us},
                      {"bare_launch_us", bare_us}}
                     .dump()
              << "\n";
  else
    std::cout << fmt::format(
        "per-call overhead: library {:.2f} us, bare cuLaunchKernelEx {:.2f} us: {:.2f} us more per "
        "call\n",
        library_us, bare_us, library_us - bare_us);
}

// The issue rate of mma.sync.m16n8k16 (m16n8k8 for tf32) from registers
// (templates/mma_ceiling.cuh): the ceiling of the mma_sm80 family on this GPU, whatever feeds it.
void measure_mma_ceiling(const gt::DeviceInfo& dev, const gt::Timer& timer, CUstream stream,
                         bool as_json) {
  const gt::Compiler compiler(false);
  const gt::CompiledKernel compiled = compiler.compile(
      gt::make_source("gemmtune_mma_ceiling", "#include \"mma_ceiling.cuh\"\n"), dev.arch);
  // 4 blocks of 8 warps per SM, each warp 8 chains of `iterations` mma: milliseconds per launch.
  const uint32_t blocks = uint32_t(4 * dev.arch.sms), threads = 256;
  int iterations = 20000;
  const gt::DeviceBuffer sink(size_t(blocks) * threads * sizeof(float));
  CUdeviceptr out = sink.ptr();
  const double mmas = double(blocks) * (threads / 32) * iterations * 8;
  gt::TimingSettings settings;
  settings.flush_l2 = false;
  json j = {{"device", dev.name},
            {"arch", dev.arch.name()},
            {"instruction", "mma.sync.aligned.m16n8k16 f32 accumulate (tf32: m16n8k8)"}};
  std::string text;
  for (const char* dtype : {"bf16", "f16", "tf32"}) {
    const double flops = mmas * 2.0 * 16 * 8 * (std::string(dtype) == "tf32" ? 8 : 16);
    const gt::LoadedKernel kernel(compiled, std::string("gemmtune_mma_ceiling_") + dtype, 0);
    void* params[] = {&iterations, &out};
    const gt::Timing t = timer.time(
        [&](CUstream s) { gt::launch_raw(kernel.function(), blocks, threads, params, s); }, stream,
        settings);
    const double tflops = flops / (t.median_ms * 1e-3) / 1e12;
    j[std::string(dtype) + "_tflops"] = tflops;
    j[std::string(dtype) + "_median_ms"] = t.median_ms;
    text += fmt::format("  {:<5} {:8.1f} TFLOP/s  ({:.3f} ms per launch, median of {} runs)\n",
                        dtype, tflops, t.median_ms, t.runs);
  }
  if (as_json)
    std::cout << j.dump(2) << "\n";
  else
    std::cout << fmt::format(
        "mma.sync.m16n8k16 (tf32: m16n8k8) from registers (f32 accumulation) on {} ({}, {} "
        "SMs):\n{}",
        dev.name, dev.arch.name(), dev.arch.sms, text);
}

// The fastest plain read of `bytes` (templates/read_ceiling.cuh) over a few launch shapes, timed
// like the GEMMs (the L2 flushed before each run).
gt::Timing time_read(const gt::LoadedKernel& kernel, CUdeviceptr data, size_t bytes,
                     CUdeviceptr sink, const gt::DeviceInfo& dev, const gt::Timer& timer,
                     CUstream stream) {
  unsigned long long vectors = bytes / 16;
  std::optional<gt::Timing> best;
  for (const uint32_t per_sm : {2u, 4u})
    for (const uint32_t threads : {512u, 1024u}) {
      void* params[] = {&data, &vectors, &sink};
      const uint32_t blocks = per_sm * uint32_t(dev.arch.sms);
      const gt::Timing t = timer.time(
          [&](CUstream s) { gt::launch_raw(kernel.function(), blocks, threads, params, s); },
          stream, gt::TimingSettings{});
      if (!best || t.median_ms < best->median_ms) best = t;
    }
  return *best;
}

// A memory-bound problem's read ceiling: a plain read of as many bytes as it moves at least (A, B
// and C once; C twice where it reads C), and cuBLAS's time on it (-1: no baseline).
struct ReadCeiling {
  size_t bytes = 0;
  double read_ms = -1, cublas_ms = -1;
};

ReadCeiling read_ceiling(const gt::Problem& p, const gt::LoadedKernel& kernel, CUdeviceptr sink,
                         const gt::DeviceInfo& dev, const gt::Checker& checker,
                         const gt::Timer& timer, const gt::Cublas* cublas, CUstream stream) {
  ReadCeiling r;
  r.bytes = size_t(min_bytes(p));
  const gt::DeviceBuffer data(r.bytes);
  GT_CU(cuMemsetD32Async(data.ptr(), 0x3f803f80u, r.bytes / 4,
                         stream));  // bf16 ones: any pattern reads alike
  r.read_ms = time_read(kernel, data.ptr(), r.bytes, sink, dev, timer, stream).median_ms;
  if (cublas && cublas->supports(p)) {
    const gt::ProblemData pd(p, checker, 42, stream);
    // With beta = 1 where the problem reads C: the bytes above count C twice, and so does cuBLAS.
    const gt::GemmOperands ops = pd.operands(1.0f, p.reads_c ? 1.0f : 0.0f);
    if (baseline_ready(cublas, p, ops, stream))
      r.cublas_ms =
          timer.time([&](CUstream s) { cublas->gemm(p, ops, s); }, stream, gt::TimingSettings{})
              .median_ms;
  }
  return r;
}

// For each memory-bound problem, its read ceiling: cuBLAS time / read time is the most a kernel
// that moves those bytes could gain over cuBLAS there. Compute-bound problems are skipped.
void measure_read_ceiling(const std::vector<gt::Problem>& problems, const gt::DeviceInfo& dev,
                          const gt::Checker& checker, const gt::Timer& timer,
                          const gt::Cublas* cublas, CUstream stream, bool as_json) {
  const gt::Compiler compiler(false);
  const gt::CompiledKernel compiled = compiler.compile(
      gt::make_source("gemmtune_read_ceiling", "#include \"read_ceiling.cuh\"\n"), dev.arch);
  const gt::LoadedKernel kernel(compiled, "gemmtune_read_ceiling", 0);
  const gt::DeviceBuffer sink(sizeof(uint32_t));
  gt::cli::Table t({"problem", "MB", "read ms", "GB/s", "cuBLAS ms", "cuBLAS / read"});
  json rows = json::array();
  for (const auto& p : problems) {
    if (!memory_bound(p)) continue;
    const ReadCeiling r = read_ceiling(p, kernel, sink.ptr(), dev, checker, timer, cublas, stream);
    const bool baseline = r.cublas_ms > 0;
    t.add({p.describe(), fmt::format("{:.1f}", r.bytes / 1e6), gt::cli::format_ms(r.read_ms),
           fmt::format("{:.0f}", gbps(p, r.read_ms)),
           baseline ? gt::cli::format_ms(r.cublas_ms) : "-",
           baseline ? fmt::format("{:.2f}x", r.cublas_ms / r.read_ms) : "-"});
    rows.push_back({{"problem", p.describe()},
                    {"bytes", r.bytes},
                    {"read_ms", r.read_ms},
                    {"read_gbps", gbps(p, r.read_ms)},
                    {"cublas_ms", baseline ? json(r.cublas_ms) : json(nullptr)}});
  }
  if (as_json) {
    std::cout << json{{"device", dev.name}, {"arch", dev.arch.name()}, {"rows", rows}}.dump(2)
              << "\n";
    return;
  }
  std::cout << fmt::format(
                   "a plain read of each memory-bound problem's bytes on {} ({}, {} SMs), the L2 "
                   "flushed first:\n",
                   dev.name, dev.arch.name(), dev.arch.sms)
            << t.render("  ")
            << "cuBLAS / read = the most a kernel that moves these bytes could gain over cuBLAS\n";
  if (rows.empty()) std::cout << "(no memory-bound problem in the list)\n";
}

std::string ratio(const Row& r) {
  if (!r.cublas_ok) return "-";
  if (r.ratios.size() < 2) return fmt::format("{:.2f}x", r.ratio());
  const auto [lo, hi] = std::minmax_element(r.ratios.begin(), r.ratios.end());
  return fmt::format("{:.2f}x ({:.2f}-{:.2f})", r.ratio(), *lo, *hi);
}

// Geometric mean and worst of the ratios, over every row with a baseline.
std::pair<double, double> summary(const std::vector<Row>& rows) {
  double log_sum = 0, worst = 0;
  int n = 0;
  for (const auto& r : rows) {
    if (!r.cublas_ok || !r.wrong.empty()) continue;
    log_sum += std::log(r.ratio());
    worst = n == 0 ? r.ratio() : std::min(worst, r.ratio());
    ++n;
  }
  return {n ? std::exp(log_sum / n) : -1, worst};
}

void write_csv(const std::string& path, const std::vector<Row>& rows, const gt::DeviceInfo& dev) {
  std::ofstream out(path);
  GT_REQUIRE(out, gt::Errc::io, "cannot write {}", path);
  out << "device,dtype,layout,m,n,k,kernel,source,ours_ms,ours_tflops,ours_gbps,cublas_ms,cublas_"
         "tflops,ratio,"
         "ratio_min,ratio_max,repeats,max_error,beta,scaling,epilogue,cublas_epilogue,"
         "max_error_all_cases,cublas_error\n";
  for (const auto& r : rows) {
    const double lo = r.ratios.empty() ? -1 : *std::min_element(r.ratios.begin(), r.ratios.end());
    const double hi = r.ratios.empty() ? -1 : *std::max_element(r.ratios.begin(), r.ratios.end());
    out << fmt::format(
        "\"{}\",{},{},{},{},{},{},{},{:.6f},{:.2f},{:.1f},{:.6f},{:.2f},{:.4f},{:.4f},{:.4f},{},{:."
        "3g},{},{},{},{},{:.3g},{:.3g}\n",
        dev.name, r.problem.types.name(), r.problem.layout(), r.problem.m, r.problem.n, r.problem.k,
        r.selection.kernel, gt::to_string(r.selection.source), r.ours.median_ms,
        tflops(r.problem, r.ours.median_ms), gbps(r.problem, r.ours.median_ms),
        r.cublas_ok ? r.cublas.median_ms : -1.0, tflops(r.problem, r.cublas.median_ms),
        r.cublas_ok ? r.ratio() : -1.0, lo, hi, r.ratios.size(), r.max_error, r.beta,
        gt::to_string(r.problem.scaling), r.problem.epilogue.name(),
        r.cublas_ok ? gt::to_string(r.cublas_path) : "-", r.max_error_all_cases, r.cublas_error);
  }
}

int run(const Args& a) {
  const std::vector<Case> cases = cases_of(a);
  GT_REQUIRE(gt::cu::available(), gt::Errc::no_device, "no GPU: {}", gt::cu::unavailable_reason());
  gt::ensure_context();
  const gt::DeviceInfo dev = gt::query_device(gt::current_device());
  gt::Options options;
  options.db_path = a.db;
  gt::Library lib(options);
  const gt::Checker checker(gt::Compiler(), dev.arch);
  const gt::Timer timer(dev);
  const gt::StreamHandle stream;
  const auto cublas = gt::Cublas::load();
  if (!cublas) std::cerr << "gemm-bench: no cuBLAS baseline: " << gt::Cublas::why_not() << "\n";
  if (a.overhead) {
    measure_overhead(lib, checker, stream.get(), a.json);
    return 0;
  }
  if (a.mma_ceiling) {
    measure_mma_ceiling(dev, timer, stream.get(), a.json);
    return 0;
  }
  if (a.read_ceiling) {
    std::vector<gt::Problem> problems;
    for (const Case& c : cases) problems.push_back(c.problem);
    measure_read_ceiling(problems, dev, checker, timer, cublas.get(), stream.get(), a.json);
    return 0;
  }
  std::vector<Row> rows;
  // The baseline's epilogue column only where some shape has an epilogue.
  const bool epilogues = std::any_of(cases.begin(), cases.end(),
                                     [](const Case& c) { return !c.problem.epilogue.none(); });
  std::vector<std::string> columns = {"problem",   "kernel", "source",      "ms",
                                      "TFLOP/s",   "GB/s",   "cuBLAS ms",   "cuBLAS TFLOP/s",
                                      "vs cuBLAS", "error",  "cuBLAS error"};
  if (epilogues) columns.push_back("cuBLAS epilogue");
  gt::cli::Table t(columns);
  for (const Case& c : cases) {
    const gt::Problem& p = c.problem;
    std::cerr << "gemm-bench: " << p.describe() << "\n";
    if (!a.vary.empty()) {
      bench_variants(c, a, lib, checker, timer, cublas.get(), dev, stream.get());
      continue;
    }
    rows.push_back(bench_one(c, a, lib, checker, timer, cublas.get(), stream.get()));
    const Row& r = rows.back();
    std::vector<std::string> cells = {
        p.describe(),
        r.selection.kernel,
        std::string(gt::to_string(r.selection.source)),
        gt::cli::format_ms(r.ours.median_ms),
        fmt::format("{:.1f}", tflops(p, r.ours.median_ms)),
        memory_bound(p) ? fmt::format("{:.0f}", gbps(p, r.ours.median_ms)) : "",
        r.cublas_ok ? gt::cli::format_ms(r.cublas.median_ms) : "-",
        r.cublas_ok ? fmt::format("{:.1f}", tflops(p, r.cublas.median_ms)) : "-",
        r.wrong.empty() ? ratio(r) : "WRONG",
        fmt::format("{:.2g}", r.max_error),
        r.cublas_error >= 0 ? fmt::format("{:.2g}", r.cublas_error) : "-"};
    if (epilogues) cells.push_back(r.cublas_ok ? std::string(gt::to_string(r.cublas_path)) : "-");
    t.add(cells);
  }
  if (!a.vary.empty()) return 0;  // each shape printed its variants' table
  const auto [geomean, worst] = summary(rows);
  const auto wrong =
      std::count_if(rows.begin(), rows.end(), [](const Row& r) { return !r.wrong.empty(); });
  if (!a.csv.empty()) write_csv(a.csv, rows, dev);
  if (a.json) {
    json j = json::array();
    for (const auto& r : rows)
      j.push_back({{"problem", r.problem.describe()},
                   {"kernel", r.selection.kernel},
                   {"source", gt::to_string(r.selection.source)},
                   {"ours_ms", r.ours.median_ms},
                   {"beta", r.beta},
                   {"ours_gbps", gbps(r.problem, r.ours.median_ms)},
                   {"ours_tflops", tflops(r.problem, r.ours.median_ms)},
                   {"scaling", gt::to_string(r.problem.scaling)},
                   {"max_error", r.max_error},
                   {"max_error_all_cases", r.max_error_all_cases},
                   {"cublas_error", r.cublas_error >= 0 ? json(r.cublas_error) : json(nullptr)},
                   {"cublas_ms", r.cublas_ok ? json(r.cublas.median_ms) : json(nullptr)},
                   {"ratio", r.cublas_ok ? json(r.ratio()) : json(nullptr)},
                   {"ratios", r.ratios}});
    for (size_t i = 0; i < rows.size(); ++i)  // only where there is an epilogue
      if (!rows[i].problem.epilogue.none()) {
        j[i]["epilogue"] = rows[i].problem.epilogue.name();
        j[i]["cublas_epilogue"] = rows[i].cublas_ok
                                      ? json(std::string(gt::to_string(rows[i].cublas_path)))
                                      : json(nullptr);
      }
    std::cout << json{{"rows", j}, {"geomean", geomean}, {"worst", worst}}.dump(2) << "\n";
  } else {
    std::cout << fmt::format("{} ({}, {} SMs){}{}\n", dev.name, dev.arch.name(), dev.arch.sms,
                             cublas ? ", baseline " + cublas->version() : "",
                             a.alpha != 1.0f || a.beta != 0.0f
                                 ? fmt::format(", alpha {} beta {}", a.alpha, a.beta)
                                 : "")
              << t.render("  ") << "vs cuBLAS = cuBLAS time / ours (above 1: faster than cuBLAS)"
              << (a.repeat > 1
                      ? fmt::format("; median of {} repeats, runs in turns (min-max)", a.repeat)
                      : "")
              << "\n";
    if (epilogues)
      std::cout << "cuBLAS epilogue: cublaslt = cuBLASLt's own (CUBLASLT_EPILOGUE_*); gemm+pass = "
                   "the GEMM, then one elementwise pass over D (bias, activation); gemm+gated "
                   "pass = the whole M x N GEMM into a buffer (F.linear), then one pass writing "
                   "act(gate) * up into D (M / 2 rows); each timed together\n";
    if (geomean > 0)
      std::cout << fmt::format("geometric mean {:.3f}x, worst {:.3f}x over {} shapes\n", geomean,
                               worst, rows.size() - wrong);
    if (wrong)
      std::cout << fmt::format("{} shapes gave WRONG results (stderr says which)\n", wrong);
  }
  return wrong ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gemm-bench: gemmtune's kernels against cuBLAS over a list of shapes"};
  Args a;
  app.add_option("--suite", a.suite, "Built-in shapes: default, small, llm, mid")
      ->capture_default_str();
  app.add_option("--shapes", a.shapes, gt::cli::kShapesHelp);
  app.add_option("--m", a.m, "One shape instead of a suite");
  app.add_option("--n", a.n);
  app.add_option("--k", a.k);
  gt::cli::add_type_options(app, a.types);
  app.add_option("--layout", a.layout, "nn, nt, tn or tt")->capture_default_str();
  app.add_option("--alpha", a.alpha, "C = alpha * op(A) * op(B) + beta * C")->capture_default_str();
  app.add_option("--beta", a.beta,
                 "Not 0: every run reads C as well (a shape's beta= overrides it)")
      ->capture_default_str();
  app.add_option("--csv", a.csv, "Also write the results as CSV to this file");
  app.add_option("--db", a.db,
                 "Tuning database (default: $GEMMTUNE_DB or ~/.cache/gemmtune/tuning.db)");
  app.add_option(
         "--repeat", a.repeat,
         "Compare ours and cuBLAS (their runs in turns) this many times; report the median ratio")
      ->check(CLI::Range(1, 100));
  app.add_flag("--overhead", a.overhead,
               "Measure the library's per-call overhead over a bare launch");
  app.add_flag(
      "--mma-ceiling", a.mma_ceiling,
      "Measure the mma.sync rate from registers, bf16, f16 and tf32 (the mma_sm80 ceiling)");
  app.add_flag("--read-ceiling", a.read_ceiling,
               "For the memory-bound shapes: time a plain read of their bytes against cuBLAS (the "
               "most a kernel could gain)");
  app.add_option("--vary", a.vary,
                 "Also time the library's selection with these parameters changed, a JSON object "
                 "each ('{\"STAGES\": 6}'; repeatable): each verified, then timed in turns with "
                 "the selection and cuBLAS");
  app.add_flag("--json", a.json, "JSON on stdout");
  if (int rc = gt::cli::parse("gemm-bench", app, argc, argv); rc >= 0) return rc;
  return gt::cli::guarded_main("gemm-bench", [&] { return run(a); });
}
