#include "nvml.hpp"

#include <dlfcn.h>

namespace gemmtune {
namespace {

// The few NVML entry points used, declared here: nvml.h is not part of every toolkit.
struct Nvml {
  int (*init)() = nullptr;
  int (*by_bus_id)(const char*, void**) = nullptr;
  int (*clock)(void*, int, unsigned*) = nullptr;
  int (*temperature)(void*, int, unsigned*) = nullptr;
  bool ok = false;
};

const Nvml& nvml() {
  static const Nvml api = [] {
    Nvml n;
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return n;
    n.init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    n.by_bus_id = reinterpret_cast<int (*)(const char*, void**)>(
        dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    n.clock =
        reinterpret_cast<int (*)(void*, int, unsigned*)>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    n.temperature =
        reinterpret_cast<int (*)(void*, int, unsigned*)>(dlsym(lib, "nvmlDeviceGetTemperature"));
    n.ok = n.init && n.by_bus_id && n.clock && n.temperature && n.init() == 0;
    return n;
  }();
  return api;
}

}  // namespace

std::optional<ClockSample> sample_clocks(const std::string& pci_bus_id) {
  const Nvml& n = nvml();
  if (!n.ok || pci_bus_id.empty()) return std::nullopt;
  void* device = nullptr;
  if (n.by_bus_id(pci_bus_id.c_str(), &device) != 0) return std::nullopt;
  ClockSample s;
  constexpr int kClockSm = 1, kTemperatureGpu = 0;
  if (n.clock(device, kClockSm, &s.sm_mhz) != 0) return std::nullopt;
  n.temperature(device, kTemperatureGpu, &s.temperature_c);
  return s;
}

}  // namespace gemmtune
