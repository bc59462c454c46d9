#pragma once
// The launcher of TMA families: builds (and caches) the tensor maps of A and B, packs operands
// that TMA cannot read in place into an aligned workspace, then launches.
#include <map>
#include <memory>
#include <mutex>

#include "gemmtune/runtime/kernel.hpp"

namespace gemmtune {

class TmaLauncher final : public Launcher {
 public:
  TmaLauncher(Compiler compiler, ArchInfo arch);
  ~TmaLauncher() override;
  void launch(const LoadedKernel& kernel, const KernelConfig& config, const LaunchGeometry& geometry,
              const Problem& problem, const GemmOperands& operands, CUstream stream) override;

 private:
  struct MapKey;
  GemmTensorMap tensor_map(const MapKey& key, bool cache);
  CUdeviceptr pack(CUdeviceptr src, int64_t rows, int64_t cols, int64_t ld, int64_t packed_ld, CUstream stream);

  Compiler compiler_;
  ArchInfo arch_;
  std::mutex mutex_;
  std::map<MapKey, GemmTensorMap> maps_;
  CompiledKernel pack_compiled_;
  std::unique_ptr<LoadedKernel> pack_;
};

}  // namespace gemmtune
