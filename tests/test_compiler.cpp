// runtime/compiler: NVRTC errors, the ptxas report, the compiled-kernel cache.
#include <gtest/gtest.h>

#include <fstream>

#include "gemmtune/generator/embedded.hpp"
#include "gemmtune/generator/family.hpp"
#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/compiler.hpp"
#include "support.hpp"

namespace gemmtune {
namespace {

KernelSource tiny_kernel(const std::string& body = "p[threadIdx.x] = 1.0f;") {
  return make_source("tiny_kernel",
                     "extern \"C\" __global__ void tiny_kernel(float* p) { " + body + " }\n");
}

TEST(Ptxas, ReportIsParsed) {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
      "ptxas info    : Function properties for k\n"
      "    8 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads\n"
      "ptxas info    : Used 168 registers, used 1 barriers, 4096 bytes smem\n";
  const PtxasReport r = parse_ptxas_report(log, "k");
  EXPECT_TRUE(r.found);
  EXPECT_EQ(r.registers, 168);
  EXPECT_EQ(r.stack_frame, 8);
  EXPECT_EQ(r.spills(), 28);
  EXPECT_EQ(r.smem_static, 4096);
  EXPECT_FALSE(parse_ptxas_report(log, "other").found);
}

TEST(Compiler, ReportsRegistersOfARealCompile) {
  const CompiledKernel k = Compiler(false).compile(tiny_kernel(), ArchInfo::from_name("sm_90a"));
  EXPECT_FALSE(k.cubin.empty());
  EXPECT_TRUE(k.report.found);
  EXPECT_GT(k.report.registers, 0);
  EXPECT_EQ(k.report.spills(), 0);
  EXPECT_FALSE(k.from_cache);
}

// The tuner's helper kernels (data, reference, checks) compile for every architecture, with
// their float8 element access (fp8.h) among them.
TEST(Compiler, TheVerificationKernelsCompile) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const CompiledKernel k = Compiler(false).compile(
        make_source("gemmtune_testing", "#include \"testing.cuh\"\n"), ArchInfo::from_name(arch));
    EXPECT_FALSE(k.cubin.empty()) << arch;
    size_t without_spills = 0;  // ptxas reports each of the seven kernels
    for (size_t at = 0;
         (at = k.log.find(", 0 bytes spill stores, 0 bytes spill loads", at)) != std::string::npos;
         ++at)
      ++without_spills;
    EXPECT_EQ(without_spills, 7u) << arch << "\n" << k.log;
  }
}

TEST(Compiler, ErrorsCarryTheLogAndOptions) {
  try {
    Compiler(false).compile(tiny_kernel("this is not cuda;"), ArchInfo::from_name("sm_80"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::compile);
    const std::string what = e.what();
    EXPECT_NE(what.find("tiny_kernel"), std::string::npos);
    EXPECT_NE(what.find("--gpu-architecture=sm_80"), std::string::npos) << what;
    EXPECT_NE(what.find("error"), std::string::npos) << "the NVRTC log is attached: " << what;
  }
}

TEST(Compiler, CacheHitsAndRebuildsACorruptEntry) {
  test::TempDir dir;
  const Compiler compiler(true, dir.path());
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const CompiledKernel first = compiler.compile(tiny_kernel(), arch);
  EXPECT_FALSE(first.from_cache);
  const CompiledKernel second = compiler.compile(tiny_kernel(), arch);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.cubin, first.cubin);
  EXPECT_EQ(second.report.registers, first.report.registers);

  // Corrupt every entry: flip bytes in the middle of the file.
  int corrupted = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path())) {
    if (!e.is_regular_file()) continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(e.file_size() / 2));
    f.write("\xde\xad\xbe\xef", 4);
    ++corrupted;
  }
  ASSERT_GT(corrupted, 0);
  const CompiledKernel rebuilt = compiler.compile(tiny_kernel(), arch);
  EXPECT_FALSE(rebuilt.from_cache) << "a corrupt entry must be rebuilt, never loaded";
  EXPECT_EQ(rebuilt.cubin, first.cubin);
  EXPECT_TRUE(compiler.compile(tiny_kernel(), arch).from_cache)
      << "the rebuilt entry is stored again";
}

// A cubin depends on every template its unit includes: after an edit (or an upgrade of gemmtune,
// whose cache outlives it), the old binary must never be loaded.
TEST(Compiler, EditingAnIncludedTemplateIsACacheMiss) {
  test::TempDir dir;
  const ArchInfo arch = ArchInfo::from_name("sm_80");
  // Includes simt_args.h, which includes kernel_args.h: the edit below is two levels down.
  const KernelSource source =
      make_source("uses_common",
                  "#include \"common.cuh\"\nextern \"C\" __global__ void uses_common(float* p) {\n"
                  "  p[threadIdx.x] = gemmtune::bf16_to_f32(gemmtune::u16(threadIdx.x));\n}\n");
  const Compiler original(true, dir.path());
  ASSERT_FALSE(original.compile(source, arch).from_cache);
  ASSERT_TRUE(original.compile(source, arch).from_cache);

  test::EditableTemplates unrelated;
  unrelated.append("simt.cuh", "\n// an edit of a template the unit does not include\n");
  EXPECT_TRUE(Compiler(true, dir.path(), unrelated.files()).compile(source, arch).from_cache);

  test::EditableTemplates edited;
  edited.append("kernel_args.h", "\nstruct AddedByAnUpgrade { int x; };\n");
  const Compiler upgraded(true, dir.path(), edited.files());
  EXPECT_FALSE(upgraded.compile(source, arch).from_cache) << "a stale cubin was loaded";
  EXPECT_TRUE(upgraded.compile(source, arch).from_cache)
      << "the new build is cached under its own key";
  EXPECT_TRUE(original.compile(source, arch).from_cache)
      << "and the old one is still there for the old templates";
}

// The generated unit checks that the family's shared-memory size is the kernel's: were the two
// computations to drift apart, the candidate would not compile (rather than run out of bounds).
TEST(Compiler, ASharedMemoryMismatchStopsTheCompile) {
  const ArchInfo arch = ArchInfo::from_name("sm_80");
  const Family& simt = find_family("simt");
  const Problem p = make_problem(DType::f32, Op::N, Op::N, 256, 256, 256);
  const KernelConfig config = simt.default_config(p, arch);
  const KernelSource good = emit_source(simt, config, arch);
  const std::string expected =
      fmt::format("K::SMEM_BYTES == {}", simt.plan(config, p, arch).smem_bytes);
  const size_t at = good.code.find(expected);
  ASSERT_NE(at, std::string::npos) << good.code;
  std::string drifted = good.code;
  drifted.replace(at, expected.size(),
                  fmt::format("K::SMEM_BYTES == {}", simt.plan(config, p, arch).smem_bytes + 16));
  try {
    Compiler(false).compile(make_source(good.name, drifted), arch);
    FAIL() << "a unit whose family and kernel disagree on shared memory compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::compile);
    EXPECT_NE(std::string(e.what()).find("the family launches with"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(Compiler(false).compile(good, arch).cubin.empty());
}

TEST(Compiler, OptionsAndArchitectureArePartOfTheKey) {
  test::TempDir dir;
  const Compiler compiler(true, dir.path());
  compiler.compile(tiny_kernel(), ArchInfo::from_name("sm_90a"));
  EXPECT_FALSE(compiler.compile(tiny_kernel(), ArchInfo::from_name("sm_80")).from_cache);
}

}  // namespace
}  // namespace gemmtune
