#pragma once
// Provides what a family's launch plan asks for (LaunchGeometry): tensor maps of the operands
// (made through the Driver API and cached), an aligned copy of an operand TMA cannot read in
// place, the workspace pointer; then launches. It never reads a family's parameters.
#include <map>
#include <memory>
#include <mutex>

#include "gemmtune/runtime/kernel.hpp"
#include "gemmtune/runtime/workspace.hpp"

namespace gemmtune {

class Launcher {
 public:
  Launcher(Compiler compiler, ArchInfo arch);
  ~Launcher();
  void launch(const LoadedKernel& kernel, const LaunchGeometry& geometry, const Problem& problem,
              const GemmOperands& operands, CUstream stream);

 private:
  struct MapKey;
  GemmTensorMap tensor_map(const MapKey& key);
  CUdeviceptr pack(Operand operand, CUdeviceptr src, int64_t rows, int64_t cols, int64_t ld,
                   int64_t packed_ld, CUstream stream);

  Compiler compiler_;
  ArchInfo arch_;
  std::mutex mutex_;
  std::map<MapKey, GemmTensorMap> maps_;
  CompiledKernel pack_compiled_;
  std::unique_ptr<LoadedKernel> pack_;
  // Packed copies, a buffer per stream and operand. A call that packs holds packing_ from its
  // first copy to its launch: another thread's call on the same stream must not overwrite the
  // copies in between.
  StreamBuffers packed_;
  std::mutex packing_;
};

}  // namespace gemmtune
