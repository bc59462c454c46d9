#pragma once
// NVRTC: generated source -> cubin for one architecture, with the ptxas report parsed and the
// result kept in the on-disk kernel cache.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gemmtune/cache/kernel_cache.hpp"
#include "gemmtune/generator/config.hpp"
#include "gemmtune/generator/embedded.hpp"
#include "gemmtune/generator/family.hpp"

namespace gemmtune {

struct PtxasReport {
  int registers = -1;
  int spill_stores = -1;  // bytes
  int spill_loads = -1;   // bytes
  int stack_frame = -1;   // bytes
  int smem_static = -1;   // bytes
  bool found = false;     // the log had a report for the kernel
  int spills() const { return spill_stores + spill_loads; }
};
// Reads the `-Xptxas=-v` lines that belong to kernel `name` in an NVRTC log.
PtxasReport parse_ptxas_report(std::string_view log, std::string_view name);

struct CompiledKernel {
  std::string name;  // entry point
  std::string cubin;
  PtxasReport report;
  std::string log;
  double compile_ms = 0;      // of the NVRTC call that produced it
  double compile_cpu_ms = 0;  // CPU time of that call (0 when loaded from the cache)
  bool from_cache = false;
};

class Compiler {
 public:
  // Kernels are cached under cache_dir (default cache_dir()/kernels); no disk cache when
  // use_cache is false. Units include `templates` (tests substitute edited ones); the cache key
  // covers the contents of every one a unit includes.
  explicit Compiler(bool use_cache = true, std::optional<std::filesystem::path> cache_dir = {},
                    std::vector<EmbeddedFile> templates = embedded_templates());

  // Throws Error(compile) with the NVRTC log and the options when the source does not compile.
  // Thread-safe: NVRTC programs are independent.
  CompiledKernel compile(const KernelSource& source, const ArchInfo& arch) const;
  std::vector<std::string> options(const ArchInfo& arch) const;
  const KernelCache* cache() const { return cache_ ? &*cache_ : nullptr; }

 private:
  CompiledKernel compile_uncached(const KernelSource& source, const ArchInfo& arch) const;
  std::vector<EmbeddedFile> templates_;
  std::optional<KernelCache> cache_;
};

}  // namespace gemmtune
