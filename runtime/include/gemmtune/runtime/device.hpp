#pragma once
// The GPU: what it is (for database keys), what it can do (for pruning and compiling), and the
// context gemmtune works in.
#include <cuda.h>

#include <cstdint>
#include <string>

#include "gemmtune/cache/tuning_db.hpp"
#include "gemmtune/generator/config.hpp"

namespace gemmtune {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  std::string pci_bus_id;
  ArchInfo arch;
  DeviceKey key;
  int64_t l2_bytes = 0;
  int64_t memory_bytes = 0;
  int sm_clock_khz = 0;  // the clock the driver reports (boost)

  // Datasheet-style peaks from SM count and clock: f32 on CUDA cores (tf32 and 3xTF32's on tensor
  // cores: ArchInfo::flops_per_clock_per_sm), f16/bf16 dense on tensor cores. For "% of peak"
  // columns; measured ceilings: docs/PERF.md, 'The best Hopper kernels run at about 70% of the bf16
  // peak' and 'mma.sync on the H100 peaks at two thirds of the wgmma rate'.
  double peak_tflops(const Problem& problem) const;
};

// "13.0": the NVRTC this process loaded.
std::string nvrtc_version();

// How many GPUs the driver sees.
int device_count();

// Everything about one device; needs the driver, not a context.
DeviceInfo query_device(int ordinal);

// The context to work in: the calling thread's current context, else the primary context of
// device 0 made current (as the CUDA runtime does), so gemmtune and cudaMalloc'd memory agree.
CUcontext ensure_context();
// Makes the primary context of GPU `ordinal` current on this thread (the tuner's worker
// measures on the GPU it is told to).
CUcontext make_current(int ordinal);
// The ordinal of the device of the current context (after ensure_context()).
int current_device();

// Makes the primary context of GPU `ordinal` (the one the CUDA runtime and PyTorch use for it)
// current in this thread for the scope, then restores the thread's previous context, so that a
// caller such as PyTorch keeps the current device it had. ordinal < 0: leaves the thread as it is.
class DeviceScope {
 public:
  explicit DeviceScope(int ordinal);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  CUcontext previous_ = nullptr;
  bool switched_ = false;
};

}  // namespace gemmtune
