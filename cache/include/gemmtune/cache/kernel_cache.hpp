#pragma once
// The compiled-kernel cache on disk: one file per key (everything a cubin depends on), written
// atomically (temp file, then rename) and checked on load. A corrupt or foreign entry is removed
// and reported as a miss, never loaded.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace gemmtune {

struct CachedKernel {
  std::string cubin;       // the bytes nvrtcGetCUBIN returned
  int registers = -1;      // from the ptxas report
  int spills = -1;         // spill stores + spill loads, bytes
  int smem_static = -1;    // static shared memory, bytes
  int stack_frame = -1;    // bytes
  std::string log;         // the NVRTC/ptxas log
  double compile_ms = -1;  // how long the original compile took
};

class KernelCache {
 public:
  // Entries live under dir (default: cache_dir()/kernels); the folder is created on store.
  explicit KernelCache(std::filesystem::path dir = default_dir());
  static std::filesystem::path default_dir();  // cache_dir()/kernels (GEMMTUNE_CACHE_DIR)

  // What a compiled kernel depends on; a change to any part is another key.
  struct KeyParts {
    std::string_view source_hash;     // the generated unit: name and code
    std::string_view templates_hash;  // contents of every template the unit includes, transitively
    std::string_view options;         // NVRTC options
    std::string_view nvrtc;           // NVRTC's version (and build)
    std::string_view arch;            // the target, e.g. sm_90a
  };
  static std::string key(const KeyParts& parts);

  // A missing entry is a miss; a corrupt, truncated or foreign one is removed, logged as a
  // warning and also reported as a miss. Never throws for I/O trouble.
  std::optional<CachedKernel> load(const std::string& key) const;
  // Never throws for I/O trouble (a cache that cannot be written is only slower): logs a warning.
  void store(const std::string& key, const CachedKernel& kernel) const;
  // Throws Error(invalid_argument) for keys that are not file names ([0-9A-Za-z_-], at most 128).
  std::filesystem::path path_of(const std::string& key) const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

}  // namespace gemmtune
