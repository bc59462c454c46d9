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

// FLOPs per clock per SM: (f32 on CUDA cores, dense f16/bf16 on tensor cores).
std::pair<double, double> flops_per_clock(int cc) {
  if (cc >= 90) return {256.0, 4096.0};
  if (cc == 80) return {128.0, 2048.0};
  if (cc >= 86) return {256.0, 1024.0};
  return {128.0, 1024.0};
}

}  // namespace

double DeviceInfo::peak_tflops(DType dtype) const {
  const auto [f32, tensor] = flops_per_clock(arch.cc);
  const double per_clock = dtype == DType::f32 ? f32 : tensor;
  return per_clock * arch.sms * sm_clock_khz * 1e3 / 1e12;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return fmt::format("{}.{}", major, minor);
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
  d.arch.cc = major * 10 + minor;
  d.arch.arch_specific = d.arch.cc == 90;  // sm_90a: wgmma and setmaxnreg
  d.arch.sms = attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  d.arch.smem_per_block = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  d.arch.smem_per_sm = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  d.arch.regs_per_sm = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  d.arch.max_threads_per_block = attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  d.l2_bytes = attribute(dev, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  d.sm_clock_khz = attribute(dev, CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
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
  int count = 0;
  GT_CU(cuDeviceGetCount(&count));
  GT_REQUIRE(count > 0, Errc::no_device, "no GPU: the CUDA driver found no device");
  CUdevice dev;
  GT_CU(cuDeviceGet(&dev, 0));
  // Retained for the life of the process, as the CUDA runtime does.
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
