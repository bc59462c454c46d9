#pragma once
// Loaded kernels, and the one place that launches them (runtime/src/launcher.cpp): from a
// family's launch plan, without reading the family's parameters.
#include <cuda.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "gemmtune/generator/family.hpp"
#include "gemmtune/runtime/compiler.hpp"

namespace gemmtune {

// A module loaded into the current context, with its one kernel.
class LoadedKernel {
 public:
  // Loads the cubin and allows the kernel `dynamic_smem` bytes of dynamic shared memory.
  // Throws Error(cuda) when the module cannot be loaded.
  LoadedKernel(const CompiledKernel& compiled, uint32_t dynamic_smem);
  // The same for one of several entry points of the module.
  LoadedKernel(const CompiledKernel& compiled, std::string entry, uint32_t dynamic_smem);
  ~LoadedKernel();
  LoadedKernel(const LoadedKernel&) = delete;
  LoadedKernel& operator=(const LoadedKernel&) = delete;

  CUfunction function() const { return function_; }
  const std::string& name() const { return name_; }
  // Blocks (or clusters, for cluster launches) of this plan that fit on one SM (GPU); 0 means
  // the launch cannot run: too many registers or too much shared memory.
  int occupancy(const LaunchPlan& plan) const;
  // CTAs of this plan that can run at once on a GPU with `sms` SMs.
  uint32_t resident_ctas(const LaunchPlan& plan, int sms) const;

 private:
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  std::string name_;
};

// The operands of one GEMM call. Addresses are device pointers.
struct GemmOperands {
  CUdeviceptr a = 0, b = 0, c = 0;
  float alpha = 1.0f, beta = 0.0f;
  // D's buffer, with C's leading dimension; 0: D is written over C.
  CUdeviceptr d = 0;
  // The epilogue's bias vector (Problem::epilogue), of D's type.
  CUdeviceptr bias = 0;
  // The epilogue's pre-activation output (Epilogue::aux), laid out as D.
  CUdeviceptr aux = 0;
  // Scratch of at least LaunchPlan::workspace_bytes and zero counters of counter_bytes, when
  // the launch asks for them (Workspaces::provide keeps a pair per stream).
  CUdeviceptr workspace = 0;
  CUdeviceptr counters = 0;
  // The fp32 scales of A and B, for a problem with scaling (Problem::scaling).
  CUdeviceptr scale_a = 0, scale_b = 0;
  // A grouped problem's G int32 end offsets of its groups' columns (Problem::groups).
  CUdeviceptr group_ends = 0;
  // The copies derived from A and B (TensorMapPlan::derived, LaunchPlan::derived_operands), which
  // the launch makes: the operands as the kernel reads them (transposed) and their low parts; each
  // of derived_ld().
  CUdeviceptr a_derived = 0, b_derived = 0, a_low = 0, b_low = 0;
};

// The leading dimension of an f32 operand's derived copy of `rows` rows as stored: columns on
// 128-byte lines, where TMA reads them fastest.
inline int64_t derived_ld(int64_t rows) {
  return (rows + 31) / 32 * 32;
}

// The core every kernel's arguments hold (kernel_args.h). Throws Error(invalid_argument) for
// beta != 0 on a kernel built for beta == 0 alone (plan.reads_c false): it would compute
// alpha * AB and drop C; for a scaled problem without its scales, and a grouped one without its
// group ends.
GemmCore core_of(const LaunchPlan& plan, const Problem& problem, const GemmOperands& ops);

// The grid of a persistent launch: at most `resident` CTAs (0: no limit), and of those the fewest
// that take the same number of rounds over the work units (whole clusters throughout).
LaunchPlan persistent_grid(const LaunchPlan& plan, uint32_t resident);

// Enqueues a helper kernel (verification, packing) with any parameters (void* per parameter),
// 1-D grid and block.
void launch_raw(CUfunction function, uint32_t grid, uint32_t block, void** params, CUstream stream);

// Provides what a launch plan asks for (tensor maps, packed operands, the family's arguments),
// then launches; one per CUDA context, shared by the kernels prepared in it.
class Launcher;

// A kernel ready to run one configuration: compiled, loaded, with its context's launcher.
struct ReadyKernel {
  const Family* family = nullptr;
  KernelConfig config;
  LaunchPlan plan;  // for the problem it was prepared for (the grid depends on the shape)
  CompiledKernel compiled;
  std::shared_ptr<LoadedKernel> loaded;
  std::shared_ptr<Launcher> launcher;
  uint32_t resident_ctas = 0;  // for persistent plans: the grid is capped at this

  // Runs the kernel on a problem the plan was made for.
  void run(const LaunchPlan& plan, const Problem& problem, const GemmOperands& operands,
           CUstream stream) const;
  void run(const Problem& problem, const GemmOperands& operands, CUstream stream) const {
    run(plan, problem, operands, stream);
  }
  // The bytes of the argument struct that run() passes the kernel for operands that need no
  // packing, and a launch of such bytes alone: the bench measures what run() costs over it.
  std::vector<std::byte> arguments(const LaunchPlan& plan, const Problem& problem,
                                   const GemmOperands& operands) const;
  void launch_bare(const LaunchPlan& plan, const std::vector<std::byte>& arguments,
                   CUstream stream) const;
};

// Emits, compiles (through the disk cache) and loads one configuration for a problem.
ReadyKernel prepare_kernel(const Compiler& compiler, const KernelConfig& config,
                           const Problem& problem, const ArchInfo& arch);

}  // namespace gemmtune
