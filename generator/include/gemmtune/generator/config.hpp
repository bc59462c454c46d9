#pragma once
// KernelConfig: one point of a family's search space, and ArchInfo: the target it is built for.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "gemmtune/types.hpp"

namespace gemmtune {

// What a kernel is compiled for and what limits it must respect. Filled from the GPU by the
// runtime, or from a name ("sm_90a") for dry runs without a GPU. A default-constructed one
// describes no GPU (compute capability 0): every family refuses it.
struct ArchInfo {
  int cc = 0;                  // compute capability as major*10 + minor
  bool arch_specific = false;  // the 'a' targets (sm_90a): wgmma, setmaxnreg
  int sms = 0;
  int64_t smem_per_block = 0;  // opt-in maximum per block, bytes
  int64_t smem_per_sm = 0;
  int regs_per_sm = 0;
  int max_threads_per_block = 0;
  // Ceilings of the cost model (cost_model.hpp): the clock under load, DRAM bandwidth, L2 size.
  double clock_ghz = 0;
  double dram_gb_per_s = 0;
  int64_t l2_bytes = 0;

  std::string name() const;  // "sm_90a", "sm_80"
  // Dense FLOPs per clock and SM: f32 on CUDA cores, f16/bf16 (f32 accumulation) on tensor cores.
  double flops_per_clock_per_sm(const DataTypes& types) const;
  // The same of f32 operands read as tf32 by the tensor cores: half the 16-bit rate.
  double tf32_flops_per_clock_per_sm() const;
  // The rate of a problem as its precision computes it: its types', or for f32 on tensor cores
  // tf32's (a third of it for 3xTF32, whose three products make one).
  double flops_per_clock_per_sm(const Problem& problem) const;
  // Typical figures of a named architecture; throws Error(invalid_argument) for unknown names.
  static ArchInfo from_name(std::string_view name);
  // The target the runtime compiles for on a GPU of compute capability `cc` (sm_90a on Hopper),
  // with its typical figures; an architecture this build does not know gets sm_90's limits.
  // For judging stored results by the GPU they name, without that GPU.
  static ArchInfo from_cc(int cc);
};

// One point of a family's search space, as it is stored and exchanged: the family, what the
// kernel computes (the problem's types, scaling and layout) and the family's parameters by name.
struct KernelConfig {
  std::string family;
  DataTypes types;
  Scaling scaling = Scaling::none;
  Op op_a = Op::N;
  Op op_b = Op::N;
  std::map<std::string, int64_t> params;
  // What the store applies: the problem's, like the types (gemmtune/types.hpp, Epilogue). Last,
  // so that {family, types, scaling, op_a, op_b, params} initializes the rest.
  Epilogue epilogue;

  int64_t at(std::string_view param) const;  // throws Error(internal) when the param is missing
  std::string params_text() const;           // "BK=8 BM=128 ..." (sorted by name)
  std::string layout() const { return {to_char(op_a), to_char(op_b)}; }
  // {"family":..,"types":..,"scaling":..,"layout":..,"params":{..}}, with "epilogue":"bias,gelu"
  // where there is one (a config without the key has none)
  std::string to_json() const;
  // Reads to_json(), and gemmtune 0.1's {"family","dtype","layout","params"} (one type of all
  // operands). Throws Error(invalid_argument).
  static KernelConfig from_json(std::string_view json);
  bool operator==(const KernelConfig&) const = default;
};

}  // namespace gemmtune
