// The fault-injection family (fault_injection_family.hpp): MODE 1 writes to an invalid address,
// MODE 2 never finishes. Its kernel is written here, not among the templates.
#include "fault_injection_family.hpp"

#include <fmt/format.h>

namespace gemmtune::test {
namespace {

struct FaultParams {
  int64_t mode = 1;
  static constexpr std::array fields = {ParamField<FaultParams>{"MODE", &FaultParams::mode}};
};
using Config = FamilyConfig<FaultParams>;

// One argument struct: the core alone.
struct FaultArgs {
  GemmCore core;
};

constexpr const char* kKernel = R"(struct FaultArgs {
  GemmCore core;
};
template <class Cfg>
struct FaultKernel {
  static __device__ void run(const FaultArgs& args) {
    if (Cfg::MODE == 1)
      *reinterpret_cast<volatile int*>(8ull + args.core.c * 0) = 1;  // illegal address
    else
      while (clock64() >= 0) __nanosleep(1000);  // never finishes: the clock is 64-bit
  }
};
)";

class FaultInjectionFamily final : public FamilyOf<FaultParams> {
 public:
  std::string_view name() const override { return "fault_injection"; }
  int rank() const override { return 1000; }
  // Never searched and never a winner: a test measures its configurations as extra candidates.
  std::string unsupported_reason(const Problem&, const ArchInfo&) const override {
    return "the fault-injection family runs only as a test's extra candidate";
  }
  Space<FaultParams> space(const Problem&, const ArchInfo&) const override {
    Space<FaultParams> s;
    s.set(&FaultParams::mode, {1, 2});
    return s;
  }
  Config default_of(const Problem& p, const ArchInfo&) const override {
    Config c = Config::of(p);
    c.mode = 1;
    return c;
  }
  std::string name_of(const Config& c) const override {
    return fmt::format("gemm_fault_injection_{}_mode{}", c.mode == 1 ? "fault" : "hang", c.mode);
  }
  UnitSource unit_of(const Config&, const ArchInfo&) const override {
    return {"kernel_args.h", kKernel, "FaultKernel", "", "", "32", "  K::run(args);\n"};
  }
  ArgsLayout args_layout() const override {
    return {"FaultArgs",
            sizeof(FaultArgs),
            offsetof(FaultArgs, core),
            {GEMMTUNE_ARGS_MEMBER(FaultArgs, core)}};
  }
  LaunchPlan plan_of(const Config&, const Problem&, const ArchInfo&) const override {
    LaunchPlan g;
    g.block = {32, 1, 1};
    g.args = args_layout();
    return g;
  }
  std::vector<std::string> template_files() const override { return {"kernel_args.h"}; }
};

}  // namespace

const Family& fault_injection_family() {
  static const FaultInjectionFamily family;
  return family;
}

}  // namespace gemmtune::test
