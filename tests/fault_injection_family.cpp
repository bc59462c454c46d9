// The fault-injection family (fault_injection_family.hpp): MODE 1 writes to an invalid address,
// MODE 2 never finishes.
#include "fault_injection_family.hpp"

#include <fmt/format.h>

namespace gemmtune::test {
namespace {

class FaultInjectionFamily final : public Family {
 public:
  std::string_view name() const override { return "fault_injection"; }
  std::string unsupported_reason(const Problem&, const ArchInfo&) const override { return {}; }
  SearchSpace space(const Problem&, const ArchInfo&) const override {
    SearchSpace s;
    s.family = "fault_injection";
    s.params = {{"MODE", {1, 2}}};
    return s;
  }
  KernelConfig default_config(const Problem& p, const ArchInfo&) const override {
    return KernelConfig{"fault_injection", p.types, p.scaling, p.op_a, p.op_b, {{"MODE", 1}}};
  }
  std::string kernel_name(const KernelConfig& c) const override {
    return fmt::format("gemm_fault_injection_{}_mode{}", c.at("MODE") == 1 ? "fault" : "hang",
                       c.at("MODE"));
  }
  std::string emit(const KernelConfig& c) const override {
    const std::string body =
        c.at("MODE") == 1
            ? "  *reinterpret_cast<volatile int*>(8ull + args.c * 0) = 1;  // illegal address\n"
            : "  while (clock64() >= 0) __nanosleep(1000);  // never finishes: the clock is "
              "64-bit\n";
    return fmt::format(
        "#include \"gemm_args.h\"\n"
        "extern \"C\" __global__ void {}(const __grid_constant__ GemmArgs args) {{\n{}}}\n",
        kernel_name(c), body);
  }
  LaunchGeometry geometry(const KernelConfig&, const Problem&, const ArchInfo&) const override {
    LaunchGeometry g;
    g.block = {32, 1, 1};
    return g;
  }
  std::vector<std::string> template_files() const override { return {"gemm_args.h"}; }
};

}  // namespace

const Family& fault_injection_family() {
  static const FaultInjectionFamily family;
  return family;
}

}  // namespace gemmtune::test
