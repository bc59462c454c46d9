#include "gemmtune/runtime/device.hpp"

#include <nvrtc.h>

#include <map>
#include <mutex>

#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/driver.hpp"

namespace gemmtune {
namespace {

int attribute(CUdevice dev, CUdevice_attribute attr) {
  int value = 0;
  GT_CU(cuDeviceGetAttribute(&value, attr, dev));
  return value;
}

}  // namespace

double DeviceInfo::peak_tflops(const Problem& problem) const {
  return arch.flops_per_clock_per_sm(problem) * arch.sms * sm_clock_khz * 1e3 / 1e12;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return fmt::format("{}.{}", major, minor);
}

int device_count() {
  int count = 0;
  GT_CU(cuDeviceGetCount(&count));
  return count;
}

DeviceInfo query_device(int ordinal) {
  CUdevice dev;
  GT_CU(cuDeviceGet(&dev, ordinal));
  DeviceInfo d;
  d.ordinal = ordinal;
  char name[256] = {};
  GT_CU(cuDeviceGetName(name, sizeof(name), dev));
  d.name = name;
  const int major = attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  const int minor = attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  // The typical figures of the architecture (sm_90a on Hopper: wgmma and setmaxnreg), then what
  // this GPU says of itself.
  d.arch = ArchInfo::from_cc(major * 10 + minor);
  d.arch.sms = attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  d.arch.smem_per_block = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  d.arch.smem_per_sm = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  d.arch.regs_per_sm = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  d.arch.max_threads_per_block = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  d.l2_bytes = attribute(dev, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  d.sm_clock_khz = attribute(dev, CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  // The cost model's ceilings: DRAM moves two words per memory clock (DDR) over the bus.
  d.arch.clock_ghz = d.sm_clock_khz * 1e-6;
  const double memory_khz = attribute(dev, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  const double bus_bits = attribute(dev, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  if (memory_khz > 0 && bus_bits > 0)
    d.arch.dram_gb_per_s = memory_khz * 1e3 * 2 * bus_bits / 8 / 1e9;
  if (d.l2_bytes > 0) d.arch.l2_bytes = d.l2_bytes;
  size_t total = 0;
  GT_CU(cuDeviceTotalMem(&total, dev));
  d.memory_bytes = int64_t(total);
  char bus[64] = {};
  if (cu::api().cuDeviceGetPCIBusId) cu::api().cuDeviceGetPCIBusId(bus, sizeof(bus), dev);
  d.pci_bus_id = bus;
  int driver = 0;
  GT_CU(cuDriverGetVersion(&driver));
  d.key = DeviceKey{d.name, d.arch.cc, d.arch.sms, driver, nvrtc_version()};
  return d;
}

CUcontext ensure_context() {
  CUcontext ctx = nullptr;
  GT_CU(cuCtxGetCurrent(&ctx));
  if (ctx != nullptr) return ctx;
  return make_current(0);
}

CUcontext make_current(int ordinal) {
  const int count = device_count();
  GT_REQUIRE(count > 0, Errc::no_device, "no GPU: the CUDA driver found no device");
  GT_REQUIRE(ordinal >= 0 && ordinal < count, Errc::invalid_argument,
             "there is no GPU {} (this machine has {})", ordinal, count);
  CUdevice dev;
  GT_CU(cuDeviceGet(&dev, ordinal));
  // Retained for the life of the process, as the CUDA runtime does.
  CUcontext ctx = nullptr;
  GT_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  GT_CU(cuCtxSetCurrent(ctx));
  return ctx;
}

int current_device() {
  CUdevice dev;
  GT_CU(cuCtxGetDevice(&dev));
  return int(dev);
}

namespace {

// Retained once per device for the life of the process, as the CUDA runtime does.
CUcontext primary_context(int ordinal) {
  static std::mutex mutex;
  static std::map<int, CUcontext> retained;
  std::lock_guard lock(mutex);
  if (auto it = retained.find(ordinal); it != retained.end()) return it->second;
  int count = 0;
  GT_CU(cuDeviceGetCount(&count));
  GT_REQUIRE(count > 0, Errc::no_device, "no GPU: the CUDA driver found no device");
  GT_REQUIRE(ordinal < count, Errc::invalid_argument, "there is no GPU {} (this machine has {})",
             ordinal, count);
  CUdevice dev;
  GT_CU(cuDeviceGet(&dev, ordinal));
  CUcontext ctx = nullptr;
  GT_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  return retained.emplace(ordinal, ctx).first->second;
}

}  // namespace

DeviceScope::DeviceScope(int ordinal) {
  if (ordinal < 0) return;
  const CUcontext target = primary_context(ordinal);
  GT_CU(cuCtxGetCurrent(&previous_));
  if (previous_ == target) return;
  GT_CU(cuCtxSetCurrent(target));
  switched_ = true;
}

DeviceScope::~DeviceScope() {
  if (switched_) cu::api().cuCtxSetCurrent(previous_);
}

}  // namespace gemmtune
