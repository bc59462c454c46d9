// The compiled-kernel cache: one file per key, written atomically, checked before it is used.
//
// Entry layout (native byte order; the key already includes the format version):
//   "GTKCACHE" | u32 format version | key | i32 registers, spills, smem_static, stack_frame |
//   f64 compile_ms | log | cubin | 32 hex digits: hash_hex of every byte before them
// where key, log and cubin are a u64 length followed by that many bytes.
#include "gemmtune/cache/kernel_cache.hpp"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstring>
#include <fstream>
#include <iterator>

#include "gemmtune/generator/util.hpp"

namespace gemmtune {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kMagic = "GTKCACHE";
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kChecksumSize = 32;  // hash_hex digits

// Appends fixed-size values and length-prefixed byte strings.
class Writer {
 public:
  template <class T>
  void value(T v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void bytes(std::string_view data) {
    value(uint64_t(data.size()));
    out_.append(data);
  }
  void raw(std::string_view data) { out_.append(data); }
  std::string& str() { return out_; }

 private:
  std::string out_;
};

// Reads what Writer wrote; a read past the end means the entry is truncated.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  std::string_view raw(size_t size) {
    GT_REQUIRE(size <= in_.size(), Errc::io, "truncated");
    const std::string_view out = in_.substr(0, size);
    in_.remove_prefix(size);
    return out;
  }
  template <class T>
  T value() {
    T v;
    std::memcpy(&v, raw(sizeof v).data(), sizeof v);
    return v;
  }
  std::string bytes() { return std::string(raw(value<uint64_t>())); }
  bool at_end() const { return in_.empty(); }

 private:
  std::string_view in_;
};

std::string encode(const std::string& key, const CachedKernel& k) {
  Writer w;
  w.raw(kMagic);
  w.value(kFormatVersion);
  w.bytes(key);
  for (int32_t v : {k.registers, k.spills, k.smem_static, k.stack_frame}) w.value(v);
  w.value(k.compile_ms);
  w.bytes(k.log);
  w.bytes(k.cubin);
  w.raw(hash_hex(w.str()));
  return std::move(w.str());
}

// Throws Error(io) saying what is wrong with the entry.
CachedKernel decode(std::string_view entry, const std::string& key) {
  GT_REQUIRE(entry.size() >= kMagic.size() + sizeof(uint32_t) + kChecksumSize, Errc::io,
             "truncated ({} bytes)", entry.size());
  GT_REQUIRE(entry.starts_with(kMagic), Errc::io, "not a gemmtune kernel cache entry");
  const std::string_view body = entry.substr(0, entry.size() - kChecksumSize);
  Reader r(body);
  r.raw(kMagic.size());
  const auto version = r.value<uint32_t>();
  GT_REQUIRE(version == kFormatVersion, Errc::io, "format version {}, expected {}", version,
             kFormatVersion);
  GT_REQUIRE(entry.substr(body.size()) == hash_hex(body), Errc::io,
             "checksum mismatch (truncated or damaged)");
  const std::string stored_key = r.bytes();
  GT_REQUIRE(stored_key == key, Errc::io, "written for key {}", stored_key);
  CachedKernel k;
  k.registers = r.value<int32_t>();
  k.spills = r.value<int32_t>();
  k.smem_static = r.value<int32_t>();
  k.stack_frame = r.value<int32_t>();
  k.compile_ms = r.value<double>();
  k.log = r.bytes();
  k.cubin = r.bytes();
  GT_REQUIRE(r.at_end(), Errc::io, "unexpected bytes after the cubin");
  GT_REQUIRE(!k.cubin.empty(), Errc::io, "empty cubin");
  return k;
}

// Unique in the folder across processes and threads, so that writers never share a temp file.
fs::path temp_path_for(const fs::path& target) {
  static std::atomic<uint64_t> counter{0};
  return target.parent_path() /
         fmt::format(".{}.{}-{}.tmp", target.filename().string(), ::getpid(), counter++);
}

// Readers see the old entry or the new one, never half of one: rename is atomic.
void write_atomically(const fs::path& target, const std::string& bytes) {
  fs::create_directories(target.parent_path());
  const fs::path temp = temp_path_for(target);
  try {
    {
      std::ofstream out(temp, std::ios::binary | std::ios::trunc);
      GT_REQUIRE(out, Errc::io, "cannot create {}", temp.string());
      out.write(bytes.data(), std::streamsize(bytes.size()));
      out.close();
      GT_REQUIRE(out, Errc::io, "cannot write {}", temp.string());
    }
    fs::rename(temp, target);
  } catch (...) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    throw;
  }
}

// nullopt when there is no entry (a plain miss) or it cannot be read.
std::optional<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    log().warn("kernel cache: cannot read {}; compiling again", path.string());
    return std::nullopt;
  }
  return bytes;
}

void discard(const fs::path& path, std::string_view why) {
  log().warn("kernel cache: removing bad entry {}: {}", path.string(), why);
  std::error_code ignored;
  fs::remove(path, ignored);
}

bool is_file_name(const std::string& key) {
  if (key.empty() || key.size() > 128) return false;
  for (unsigned char ch : key)
    if (!std::isalnum(ch) && ch != '_' && ch != '-') return false;
  return true;
}

}  // namespace

KernelCache::KernelCache(fs::path dir) : dir_(std::move(dir)) {}

fs::path KernelCache::default_dir() {
  return cache_dir() / "kernels";
}

std::string KernelCache::key(const KeyParts& k) {
  // Length prefixes keep the parts apart: ("a b", "c") and ("a", "b c") get different keys.
  std::string text = fmt::format("gemmtune kernel cache v{}", kFormatVersion);
  for (std::string_view part : {k.source_hash, k.templates_hash, k.options, k.nvrtc, k.arch})
    text += fmt::format("|{}:{}", part.size(), part);
  return hash_hex(text);
}

fs::path KernelCache::path_of(const std::string& key) const {
  GT_REQUIRE(is_file_name(key), Errc::invalid_argument,
             "kernel cache key '{}' is not a file name ([0-9A-Za-z_-], at most 128)", key);
  return dir_ / (key + ".kernel");
}

std::optional<CachedKernel> KernelCache::load(const std::string& key) const {
  const fs::path path = path_of(key);
  const auto bytes = read_file(path);
  if (!bytes) return std::nullopt;
  try {
    return decode(*bytes, key);
  } catch (const Error& e) {
    discard(path, e.what());
    return std::nullopt;
  }
}

void KernelCache::store(const std::string& key, const CachedKernel& kernel) const {
  const fs::path path = path_of(key);
  try {
    write_atomically(path, encode(key, kernel));
  } catch (const std::exception& e) {
    // A cache that cannot be written is only slower.
    log().warn("kernel cache: cannot store {}: {}", path.string(), e.what());
  }
}

}  // namespace gemmtune
