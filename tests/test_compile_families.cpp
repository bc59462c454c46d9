// Every candidate of every default search space compiles with NVRTC, without spills, for the
// architectures the families target. No GPU needed: this is what ptxas reports.
#include <gtest/gtest.h>

#include <cstdlib>

#include "gemmtune/runtime/compiler.hpp"
#include "gemmtune/tuner/tuner.hpp"

namespace gemmtune {
namespace {

class CompileFamilies : public ::testing::Test {
 protected:
  // Compile for real: a cached result would prove nothing about this build.
  void SetUp() override { setenv("GEMMTUNE_NO_KERNEL_CACHE", "1", 1); }
};

void expect_all_compile(DType dtype, const char* layout, const char* arch, const char* family) {
  const Problem p = make_problem(dtype, parse_op(layout[0]), parse_op(layout[1]), 4096, 4096, 4096);
  const DryRunReport r = dry_run(p, ArchInfo::from_name(arch), 0, {family});
  ASSERT_GT(r.candidates.size(), 0u) << "no candidates for " << p.describe();
  EXPECT_EQ(r.failed, 0);
  for (const auto& c : r.candidates) {
    EXPECT_EQ(c.status, "compiled") << c.name << ": " << c.message.substr(0, 2000);
    EXPECT_EQ(c.spills, 0) << c.name << " spills on " << arch << " (" << c.registers << " registers)";
    EXPECT_GT(c.registers, 0) << c.name << ": no ptxas report";
  }
}

TEST_F(CompileFamilies, SimtSm90aNN) { expect_all_compile(DType::f32, "nn", "sm_90a", "simt"); }
TEST_F(CompileFamilies, SimtSm90aNT) { expect_all_compile(DType::f32, "nt", "sm_90a", "simt"); }
TEST_F(CompileFamilies, SimtSm90aTN) { expect_all_compile(DType::f32, "tn", "sm_90a", "simt"); }
TEST_F(CompileFamilies, SimtSm90aTT) { expect_all_compile(DType::f32, "tt", "sm_90a", "simt"); }
TEST_F(CompileFamilies, SimtSm80NN) { expect_all_compile(DType::f32, "nn", "sm_80", "simt"); }
TEST_F(CompileFamilies, SimtSm80NT) { expect_all_compile(DType::f32, "nt", "sm_80", "simt"); }
TEST_F(CompileFamilies, SimtSm80TN) { expect_all_compile(DType::f32, "tn", "sm_80", "simt"); }
TEST_F(CompileFamilies, SimtSm80TT) { expect_all_compile(DType::f32, "tt", "sm_80", "simt"); }

TEST_F(CompileFamilies, WgmmaBf16NN) { expect_all_compile(DType::bf16, "nn", "sm_90a", "wgmma_sm90"); }
TEST_F(CompileFamilies, WgmmaBf16NT) { expect_all_compile(DType::bf16, "nt", "sm_90a", "wgmma_sm90"); }
TEST_F(CompileFamilies, WgmmaBf16TN) { expect_all_compile(DType::bf16, "tn", "sm_90a", "wgmma_sm90"); }
TEST_F(CompileFamilies, WgmmaBf16TT) { expect_all_compile(DType::bf16, "tt", "sm_90a", "wgmma_sm90"); }
TEST_F(CompileFamilies, WgmmaF16NN) { expect_all_compile(DType::f16, "nn", "sm_90a", "wgmma_sm90"); }

TEST_F(CompileFamilies, HelperKernelsCompile) {
  const Compiler compiler(false);
  const KernelSource pack = make_source("gemmtune_pack16", "#include \"pack.cuh\"\n");
  EXPECT_FALSE(compiler.compile(pack, ArchInfo::from_name("sm_90a")).cubin.empty());
}

TEST_F(CompileFamilies, VerificationKernelsCompile) {
  const Compiler compiler(false);
  const KernelSource s = make_source("gemmtune_testing", "#include \"testing.cuh\"\n");
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const CompiledKernel k = compiler.compile(s, ArchInfo::from_name(arch));
    EXPECT_FALSE(k.cubin.empty());
  }
}

}  // namespace
}  // namespace gemmtune
