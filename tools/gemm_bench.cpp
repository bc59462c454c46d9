// gemm-bench: the library's choice against cuBLAS, shape by shape, in one process, on the same
// data, timed the same way. Every result is verified before it is timed.
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.hpp"
#include "gemmtune/gemmtune.hpp"
#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/device.hpp"
#include "gemmtune/runtime/driver.hpp"
#include "gemmtune/tuner/checker.hpp"
#include "gemmtune/tuner/cublas.hpp"
#include "gemmtune/tuner/timer.hpp"

namespace gt = gemmtune;
using nlohmann::json;

namespace {

struct Args {
  std::string suite = "default", shapes, dtype = "f32", layout = "nn", csv, db;
  int64_t m = 0, n = 0, k = 0;
  bool json = false, overhead = false;
  int device = 0;
};

// Shapes of the built-in suites, as "M N K [dtype] [layout]".
std::vector<std::string> suite(const std::string& name) {
  if (name == "default") return {"1024 1024 1024", "2048 2048 2048", "4096 4096 4096", "8192 8192 8192"};
  if (name == "small") return {"1 1 1", "17 33 65", "257 255 513", "1024 1024 1024"};
  if (name == "llm") return {"8192 8192 8192", "4096 4096 4096", "2048 2048 2048", "4096 14336 4096",
                             "8192 8192 1024", "128 8192 8192"};
  GT_THROW(gt::Errc::invalid_argument, "unknown suite '{}' (default, small, llm)", name);
}

std::vector<gt::Problem> problems_of(const Args& a) {
  std::vector<gt::cli::ShapeLine> lines;
  if (a.m || a.n || a.k)
    lines.push_back({a.m, a.n, a.k, "", ""});
  else if (!a.shapes.empty())
    lines = gt::cli::read_shapes_file(a.shapes);
  else
    for (const auto& s : suite(a.suite)) lines.push_back(gt::cli::parse_shape_line(s));
  std::vector<gt::Problem> out;
  for (const auto& l : lines)
    out.push_back(gt::cli::make_cli_problem(l.dtype.empty() ? a.dtype : l.dtype, l.layout.empty() ? a.layout : l.layout,
                                            l.m, l.n, l.k, l.lda, l.ldb, l.ldc));
  return out;
}

struct Row {
  gt::Problem problem;
  gt::Selection selection;
  gt::Timing ours, cublas;
  bool cublas_ok = false;
  double max_error = 0;
};

double tflops(const gt::Problem& p, double ms) { return ms > 0 ? p.flops() / (ms * 1e-3) / 1e12 : 0; }

Row bench_one(const gt::Problem& p, gt::Library& lib, const gt::Checker& checker, const gt::Timer& timer,
              const gt::Cublas* cublas, CUstream stream) {
  Row row;
  row.problem = p;
  const gt::Verifier verifier(checker, p, 1.0f, 0.0f, 42, stream);
  auto run = [&](const gt::Problem& q, const gt::GemmOperands& o, CUstream s) {
    lib.gemm(q.dtype, q.op_a, q.op_b, q.m, q.n, q.k, o.alpha, reinterpret_cast<const void*>(o.a), q.lda,
             reinterpret_cast<const void*>(o.b), q.ldb, o.beta, reinterpret_cast<void*>(o.c), q.ldc,
             reinterpret_cast<gt::Stream>(s));
  };
  const gt::Verdict v = verifier.verify(run, stream);
  GT_REQUIRE(v.ok, gt::Errc::internal, "the library's result is wrong on {}: {}", p.describe(), v.message);
  row.max_error = v.max_error;
  row.selection = lib.select(p);
  const gt::GemmOperands ops = verifier.data().operands(1.0f, 0.0f);
  const gt::TimingSettings settings;
  row.ours = timer.time([&](CUstream s) { run(p, ops, s); }, stream, settings);
  if (cublas && cublas->supports(p)) {
    row.cublas = timer.time([&](CUstream s) { cublas->gemm(p, ops, s); }, stream, settings);
    row.cublas_ok = true;
  }
  return row;
}

// Host time to enqueue one call through the library, minus a bare launch of the same kernel.
void measure_overhead(gt::Library& lib, const gt::Checker& checker, CUstream stream, bool as_json) {
  const gt::Problem p = gt::make_problem(gt::DType::f32, gt::Op::N, gt::Op::N, 64, 64, 64);
  const gt::ProblemData data(p, checker, 7, stream);
  const auto ops = data.operands(1.0f, 0.0f);
  auto call = [&] {
    lib.gemm(p.dtype, p.op_a, p.op_b, p.m, p.n, p.k, 1.0f, reinterpret_cast<const void*>(ops.a), p.lda,
             reinterpret_cast<const void*>(ops.b), p.ldb, 0.0f, reinterpret_cast<void*>(ops.c), p.ldc,
             reinterpret_cast<gt::Stream>(stream));
  };
  call();
  const gt::Selection sel = lib.select(p);
  const gt::DeviceInfo dev = gt::query_device(gt::current_device());
  const gt::ReadyKernel bare = gt::prepare_kernel(gt::Compiler(), gt::KernelConfig::from_json(sel.config), p, dev.arch);
  const GemmArgs args = gt::plain_args(bare.geometry, p, ops);
  auto per_call_us = [&](const std::function<void()>& enqueue) {
    std::vector<double> batches;
    for (int b = 0; b < 30; ++b) {
      GT_CU(cuStreamSynchronize(stream));
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 200; ++i) enqueue();
      batches.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 200);
    }
    GT_CU(cuStreamSynchronize(stream));
    std::sort(batches.begin(), batches.end());
    return batches[batches.size() / 2];
  };
  const double library_us = per_call_us(call);
  const double bare_us = per_call_us([&] { gt::launch_kernel(bare.loaded->function(), bare.geometry, args, stream); });
  if (as_json)
    std::cout << json{{"overhead_us", library_us - bare_us}, {"library_call_us", library_us}, {"bare_launch_us", bare_us}}.dump() << "\n";
  else
    std::cout << fmt::format("per-call overhead: library {:.2f} us, bare cuLaunchKernelEx {:.2f} us: {:.2f} us more per call\n",
                             library_us, bare_us, library_us - bare_us);
}

std::string ratio(const Row& r) {
  return r.cublas_ok ? fmt::format("{:.2f}x", r.cublas.median_ms / r.ours.median_ms) : "-";
}

void write_csv(const std::string& path, const std::vector<Row>& rows, const gt::DeviceInfo& dev) {
  std::ofstream out(path);
  GT_REQUIRE(out, gt::Errc::io, "cannot write {}", path);
  out << "device,dtype,layout,m,n,k,kernel,source,ours_ms,ours_tflops,cublas_ms,cublas_tflops,ratio,max_error\n";
  for (const auto& r : rows)
    out << fmt::format("\"{}\",{},{},{},{},{},{},{},{:.6f},{:.2f},{:.6f},{:.2f},{:.4f},{:.3g}\n", dev.name,
                       gt::to_string(r.problem.dtype), r.problem.layout(), r.problem.m, r.problem.n, r.problem.k,
                       r.selection.kernel, gt::to_string(r.selection.source), r.ours.median_ms,
                       tflops(r.problem, r.ours.median_ms), r.cublas_ok ? r.cublas.median_ms : -1.0,
                       tflops(r.problem, r.cublas.median_ms), r.cublas_ok ? r.cublas.median_ms / r.ours.median_ms : -1.0,
                       r.max_error);
}

int run(const Args& a) {
  const auto problems = problems_of(a);
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
  std::vector<Row> rows;
  gt::cli::Table t({"problem", "kernel", "source", "ms", "TFLOP/s", "cuBLAS ms", "cuBLAS TFLOP/s", "vs cuBLAS"});
  for (const auto& p : problems) {
    std::cerr << "gemm-bench: " << p.describe() << "\n";
    rows.push_back(bench_one(p, lib, checker, timer, cublas.get(), stream.get()));
    const Row& r = rows.back();
    t.add({p.describe(), r.selection.kernel, gt::to_string(r.selection.source), gt::cli::format_ms(r.ours.median_ms),
           fmt::format("{:.1f}", tflops(p, r.ours.median_ms)),
           r.cublas_ok ? gt::cli::format_ms(r.cublas.median_ms) : "-",
           r.cublas_ok ? fmt::format("{:.1f}", tflops(p, r.cublas.median_ms)) : "-", ratio(r)});
  }
  if (!a.csv.empty()) write_csv(a.csv, rows, dev);
  if (a.json) {
    json j = json::array();
    for (const auto& r : rows)
      j.push_back({{"problem", r.problem.describe()}, {"kernel", r.selection.kernel},
                   {"source", gt::to_string(r.selection.source)}, {"ours_ms", r.ours.median_ms},
                   {"cublas_ms", r.cublas_ok ? json(r.cublas.median_ms) : json(nullptr)},
                   {"ratio", r.cublas_ok ? json(r.cublas.median_ms / r.ours.median_ms) : json(nullptr)}});
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << fmt::format("{} ({}, {} SMs){}\n", dev.name, dev.arch.name(), dev.arch.sms,
                             cublas ? ", baseline " + cublas->version() : "")
              << t.render("  ") << "vs cuBLAS = cuBLAS time / ours (above 1: faster than cuBLAS)\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gemm-bench: gemmtune's kernels against cuBLAS over a list of shapes"};
  Args a;
  app.add_option("--suite", a.suite, "Built-in shapes: default, small, llm")->capture_default_str();
  app.add_option("--shapes", a.shapes, "File of shapes, one per line: 'M N K [dtype] [layout]'");
  app.add_option("--m", a.m, "One shape instead of a suite");
  app.add_option("--n", a.n);
  app.add_option("--k", a.k);
  app.add_option("--dtype", a.dtype, "f32, f16 or bf16")->capture_default_str();
  app.add_option("--layout", a.layout, "nn, nt, tn or tt")->capture_default_str();
  app.add_option("--csv", a.csv, "Also write the results as CSV to this file");
  app.add_option("--db", a.db, "Tuning database (default: $GEMMTUNE_DB or ~/.cache/gemmtune/tuning.db)");
  app.add_flag("--overhead", a.overhead, "Measure the library's per-call overhead over a bare launch");
  app.add_flag("--json", a.json, "JSON on stdout");
  if (int rc = gt::cli::parse("gemm-bench", app, argc, argv); rc >= 0) return rc;
  return gt::cli::guarded_main("gemm-bench", [&] { return run(a); });
}
