#pragma once
// Launches any family's kernel from its launch plan: the argument struct the plan lays out (the
// core, the tensor maps it names, made through the Driver API and cached, the family's blocks),
// an aligned copy of any operand a required map cannot read in place, the copies the plan derives
// from an operand (read through its maps or its core), the persistent grid.
#include <array>
#include <map>
#include <memory>
#include <mutex>

#include "gemmtune/runtime/kernel.hpp"
#include "gemmtune/runtime/workspace.hpp"

namespace gemmtune {

// The Driver API's launch configuration of a plan with this grid: its blocks, shared memory and,
// for a plan of clusters, the cluster attribute (held here, so that `config.attrs` stays valid).
struct LaunchConfig {
  LaunchConfig(const LaunchPlan& plan, const std::array<uint32_t, 3>& grid, CUstream stream);
  LaunchConfig(const LaunchConfig&) = delete;
  LaunchConfig& operator=(const LaunchConfig&) = delete;
  CUlaunchConfig config{};
  CUlaunchAttribute cluster{};
};

class Launcher {
 public:
  Launcher(Compiler compiler, ArchInfo arch);
  ~Launcher();
  // Enqueues the kernel on the stream. `resident` caps a persistent plan's grid (0: no cap).
  void launch(const LoadedKernel& kernel, uint32_t resident, const LaunchPlan& plan,
              const Problem& problem, const GemmOperands& operands, CUstream stream);
  // The argument struct of a launch whose operands need no packing (plan.args.bytes of `out`).
  void fill_arguments(std::byte* out, const LaunchPlan& plan, const Problem& problem,
                      const GemmOperands& operands);
  // Enqueues the kernel with argument bytes made before.
  static void launch_arguments(const LoadedKernel& kernel, uint32_t resident,
                               const LaunchPlan& plan, const std::byte* arguments, CUstream stream);

 private:
  struct MapKey;
  struct Operands;
  GemmTensorMap tensor_map(const MapKey& key);
  const LoadedKernel& packer();
  void pack_unaligned(const LaunchPlan& plan, Operands& o, CUstream stream);
  void derive(const LaunchPlan& plan, Operands& o, CUstream stream);
  void set_derived_map(std::byte* args, const TensorMapPlan& m, const Problem& p,
                       const GemmOperands& ops);
  static void read_derived(GemmCore& core, const DerivedOperand& d, const Problem& p,
                           const GemmOperands& ops);
  CUdeviceptr pack(Operand operand, CUdeviceptr src, int64_t rows, int64_t cols, int64_t ld,
                   int64_t packed_ld, int element_bytes, CUstream stream);

  Compiler compiler_;
  ArchInfo arch_;
  std::mutex maps_mutex_;  // held while a map is looked up or encoded, microseconds
  std::map<MapKey, GemmTensorMap> maps_;
  // The packing kernel, compiled on the first call that packs; other calls do not wait for it.
  std::once_flag packer_once_;
  CompiledKernel packer_compiled_;
  std::unique_ptr<LoadedKernel> packer_;
  std::unique_ptr<LoadedKernel> deriver_;  // of the packer's module
  // Packed copies, a buffer per stream and operand. A call that packs holds packing_ from its
  // first copy to its launch: another thread's call on the same stream must not overwrite the
  // copies in between.
  StreamBuffers packed_;
  std::mutex packing_;
};

}  // namespace gemmtune
