#include "gemmtune/generator/cost_model.hpp"

#include <algorithm>
#include <cmath>

namespace gemmtune {
namespace {

constexpr double kLaunchMs = 0.004;        // launch and first-wave ramp, the same for every kernel
constexpr double kL2OverDram = 3.0;        // L2 bandwidth over DRAM bandwidth (Ampere, Hopper)
constexpr double kSmBytesPerClock = 64.0;  // what one SM can pull from L2 per clock
constexpr double kLatencyUs = 0.8;         // from issuing a load to its data, DRAM

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

int max_threads_per_sm(const ArchInfo& arch) {
  return arch.cc == 86 || arch.cc == 89 ? 1536 : 2048;
}

}  // namespace

int ctas_per_sm(const ArchInfo& arch, int64_t threads, int64_t smem_bytes,
                int64_t registers_per_thread) {
  int64_t fit = 32;
  if (threads > 0) fit = std::min<int64_t>(fit, max_threads_per_sm(arch) / threads);
  // Each block also holds 1 KB of shared memory reserved by the system.
  if (smem_bytes > 0) fit = std::min<int64_t>(fit, arch.smem_per_sm / (smem_bytes + 1024));
  if (registers_per_thread > 0 && threads > 0) {
    const int64_t per_thread = ceil_div(registers_per_thread, 8) * 8;  // allocated in units of 8
    fit = std::min<int64_t>(fit, arch.regs_per_sm / (per_thread * threads));
  }
  return int(std::max<int64_t>(fit, 1));
}

int64_t group_columns(const Problem& p) {
  return std::max<int64_t>(1, ceil_div(p.n, p.group_count()));
}

Cost roofline(const Problem& p, const ArchInfo& arch, const TileWork& w) {
  Cost cost;
  const int64_t splits = std::max<int64_t>(w.k_splits, 1);
  const int64_t k_slice = ceil_div(p.k, splits);
  cost.tiles =
      ceil_div(p.m, w.tile_m) * ceil_div(group_columns(p), w.tile_n) * p.group_count() * splits;
  cost.tiles_per_sm = ceil_div(cost.tiles, arch.sms);
  // Tiles on the busiest SM: whole tiles, or an even share of them when the work is balanced.
  // Balancing gains nothing below a wave: a tile split over two SMs ends when both halves and
  // their sum are done, and the SMs that data-parallel tiles leave idle lend their power to the
  // busy ones (docs/PERF.md, 'Stream-K loses to data-parallel tiles below one wave').
  const double busiest =
      w.balanced ? std::max(double(cost.tiles) / arch.sms, 1.0) : double(cost.tiles_per_sm);

  // An SM that holds fewer CTAs than the configuration was made for hides latency less well.
  const double resident = double(std::min<int64_t>(cost.tiles_per_sm, w.ctas_per_sm));
  const double efficiency = w.efficiency * std::sqrt(resident / std::max(w.ctas_per_sm, 1));
  const double rate =
      w.flops_per_clock > 0 ? w.flops_per_clock : arch.flops_per_clock_per_sm(p.types);
  const double sm_flops_per_ms = rate * arch.clock_ghz * 1e6;
  const double tile_flops = 2.0 * double(w.tile_m) * double(w.tile_n) * double(k_slice);
  cost.compute_ms = busiest * tile_flops / (sm_flops_per_ms * efficiency);

  const double a_bytes = element_bytes(p.types.a), b_bytes = element_bytes(p.types.b);
  const double dram_bytes_per_ms = arch.dram_gb_per_s * 1e6;
  const double unique_bytes = double(p.m * p.k * p.group_count()) * a_bytes +
                              double(p.k * p.n) * b_bytes +
                              double(p.m * p.n) * element_bytes(p.types.d) + w.workspace_bytes;
  const double tile_bytes =
      (double(w.tile_m) * a_bytes + double(w.tile_n) * b_bytes) * double(k_slice) * w.l2_traffic;
  const double dram_ms = unique_bytes / dram_bytes_per_ms;
  const double l2_ms = double(cost.tiles) * tile_bytes / (kL2OverDram * dram_bytes_per_ms);
  double sm_bytes_per_ms = kSmBytesPerClock * arch.clock_ghz * 1e6;
  if (w.bytes_in_flight > 0)
    sm_bytes_per_ms = std::min(sm_bytes_per_ms, resident * w.bytes_in_flight / kLatencyUs * 1e3);
  const double sm_ms = busiest * tile_bytes / sm_bytes_per_ms;
  cost.memory_ms = std::max({dram_ms, l2_ms, sm_ms});

  cost.overhead_ms = std::ceil(busiest) * w.tile_overhead_us * 1e-3 + kLaunchMs + w.setup_us * 1e-3;
  cost.total_ms = std::max(cost.compute_ms, cost.memory_ms) + cost.overhead_ms;
  return cost;
}

double epilogue_us(const ArchInfo& arch, int64_t tile_m, int64_t tile_n, DataType output) {
  // Every SM stores at once at the end of a wave: each gets its share of DRAM bandwidth.
  const double bytes = double(tile_m * tile_n * element_bytes(output));
  return bytes / (arch.dram_gb_per_s * 1e3 / arch.sms);
}

}  // namespace gemmtune
