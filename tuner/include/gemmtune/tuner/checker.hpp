#pragma once
// Verification on the GPU: random data, an independent double-precision reference, and the
// comparison, from templates/testing.cuh. A wrong kernel is never stored as best.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "check_args.h"
#include "gemmtune/runtime/compiler.hpp"
#include "gemmtune/runtime/kernel.hpp"
#include "gemmtune/runtime/memory.hpp"

namespace gemmtune {

struct Verdict {
  bool ok = true;
  double max_error = 0;  // largest normalized error seen (finite points)
  int64_t bad = 0;       // points out of tolerance or not finite
  int64_t points = 0;    // points checked
  std::string message;   // what failed, for people
  // Of Verifier::verify: the largest at the problem's own points alone (its other cases add more
  // points, so a larger maximum of the same rounding), as verify_problem measures a baseline.
  double problem_max_error = 0;
};

// Tolerance on |out - ref| / (|ref| + scale): above the rounding of an honest kernel with f32
// accumulation into the output's type, below what a skipped or repeated K tile produces. Throws
// Error(unsupported) for an output type the verifier does not know.
double tolerance(const DataTypes& types);
// The problem's: tf32's for precision tf32; else its types', plus, with fast float8 accumulation,
// what wgmma's narrower accumulator may lose over K (checker.cpp says how much).
double tolerance(const Problem& problem);

// The helper kernels, compiled once for the device.
class Checker {
 public:
  Checker(const Compiler& compiler, const ArchInfo& arch);
  ~Checker();

  void fill_normal(CUdeviceptr p, int64_t count, DataType type, uint64_t seed, float scale,
                   CUstream stream) const;
  // Random positive fp32 scales over four orders of magnitude (never all ones; fewer for an f16
  // output, which the largest would overflow).
  void fill_scales(CUdeviceptr p, int64_t count, uint64_t seed, DataType output,
                   CUstream stream) const;
  // NaN in every element: an element a kernel forgets to write stays NaN.
  void poison(CUdeviceptr p, int64_t count, DataType type, CUstream stream) const;
  // args: operands, points, ref/scale outputs; fills ref and scale.
  void reference(const CheckArgs& args, CUstream stream) const;
  // Compares args.out at the points with ref/scale (args.max_error/bad are scratch, reset here).
  Verdict compare(CheckArgs args, CUstream stream) const;
  int64_t count_nonfinite(CUdeviceptr p, int64_t ld, int64_t m, int64_t n, DataType type,
                          CUstream stream) const;

 private:
  CompiledKernel compiled_;
  std::unique_ptr<LoadedKernel> fill_, fill_scales_, reference_, check_, nonfinite_;
  DeviceBuffer scratch_;  // max_error (float) and counters
};

// How a grouped problem's columns (tokens) are split between its groups (experts), every column
// in one: `uniform`, each token routed to a random group (a real router's balanced case);
// `skewed`, group 0 gets ten times the mean and the rest share the others; `ragged`, the groups
// end at random columns (cuts of the n columns at G - 1 random points), with empty groups and
// ends in the middle of tiles. Float8 experts route tokens four at a time (uniform and skewed;
// routing_granule), as padded to the multiples of 4 that their baseline, a cuBLASLt call per
// group, takes with block scales (it refuses a group of 495 tokens).
enum class Routing { uniform, skewed, ragged };
// The tokens a uniform or skewed routing sends at a time: 4 for float8 with N a multiple of 4,
// else 1.
int64_t routing_granule(const Problem& problem);
// The G int32 end offsets of a routing of the problem's n columns (end[G-1] = n); a masked
// problem's G counts (each at most its capacity; half the columns routed, ragged any count).
std::vector<int32_t> group_ends_of(const Problem& problem, Routing routing, uint64_t seed);

// One problem's operands on the GPU, with random normal contents, for a scaled problem its
// random scales (Checker::fill_scales) in the layouts of scale_shape_a/b, for a grouped one the
// group ends of a routing, for an epilogue with a bias a random normal bias vector, and for one
// that keeps its pre-activation (Epilogue::aux) that output's buffer, laid out as C.
struct ProblemData {
  Problem problem;
  DeviceBuffer a, b, c, c_init;
  DeviceBuffer scale_a, scale_b;  // empty without scaling
  DeviceBuffer group_ends;        // empty unless grouped; counts when masked
  DeviceBuffer bias;              // empty without a bias (Problem::epilogue)
  DeviceBuffer aux;               // empty without a pre-activation output
  std::vector<int32_t> host_group_ends;
  ProblemData(const Problem& p, const Checker& checker, uint64_t seed, CUstream stream,
              Routing routing = Routing::uniform);
  // The columns that lie in a group: n, or fewer when a masked group is not full.
  int64_t grouped_columns() const;
  // Routes the columns anew (a grouped problem).
  void route(Routing routing, uint64_t seed, CUstream stream);
  // Before each run under test: C = C_init (beta != 0) or NaN everywhere (beta == 0), and the
  // pre-activation output NaN everywhere.
  void reset_c(const Checker& checker, float beta, CUstream stream) const;
  GemmOperands operands(float alpha, float beta) const {
    GemmOperands ops{a.ptr(), b.ptr(), c.ptr(), alpha, beta};
    ops.scale_a = scale_a.ptr();
    ops.scale_b = scale_b.ptr();
    ops.group_ends = group_ends.ptr();
    ops.bias = bias.ptr();
    ops.aux = aux.ptr();
    return ops;
  }
};

// The arguments of the reference and the check for the problem's data, alpha and beta: operands,
// sizes, types and tolerance; the points and their outputs (rows, cols, ref, scale, points) are
// the caller's. pre_activation: those of the pre-activation output (Epilogue::aux) instead, the
// same formula without the activation.
CheckArgs check_args(const ProblemData& data, float alpha, float beta, bool pre_activation = false);

// Checks a kernel on the problem being tuned (sampled points, edges included, and every
// element for NaN) and, when the problem is large (in outputs, or in bytes), on every element of
// a smaller problem with odd sizes, ld > rows, and both beta == 0 (C full of NaN) and beta != 0.
class Verifier {
 public:
  Verifier(const Checker& checker, const Problem& problem, float alpha, float beta, uint64_t seed,
           CUstream stream);
  ~Verifier();
  using RunFn = std::function<void(const Problem&, const GemmOperands&, CUstream)>;
  // `kernel_reads_c` false: the kernel was built for beta == 0 alone (LaunchGeometry::reads_c),
  // so the cases with beta != 0 are left out; such a kernel fails a problem with beta != 0.
  Verdict verify(const RunFn& run, CUstream stream, bool kernel_reads_c = true) const;
  // The check of the problem itself alone (not the smaller ones): for a baseline that may refuse
  // their odd sizes.
  Verdict verify_problem(const RunFn& run, CUstream stream) const;
  // The data of the problem itself, for timing.
  const ProblemData& data() const;

 private:
  struct Case;
  const Checker& checker_;
  std::vector<std::unique_ptr<Case>> cases_;
};

}  // namespace gemmtune
