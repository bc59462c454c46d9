#pragma once
// SM clock and temperature through NVML, loaded at run time when present: timing results note
// the clock they ran at, so that a throttled measurement can be recognised.
#include <optional>
#include <string>

namespace gemmtune {

struct ClockSample {
  unsigned sm_mhz = 0;
  unsigned temperature_c = 0;
};

// nullopt when NVML is missing or does not know the device (by PCI bus id).
std::optional<ClockSample> sample_clocks(const std::string& pci_bus_id);

}  // namespace gemmtune
