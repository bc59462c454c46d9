#include "gemmtune/generator/util.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <mutex>

namespace gemmtune {

std::string hash_hex(std::string_view data) {
  // FNV-1a, 128-bit: offset basis and prime from the FNV reference.
  unsigned __int128 h = (unsigned __int128)0x6c62272e07bb0142ULL << 64 | 0x62b821756295c58dULL;
  const unsigned __int128 prime =
      (unsigned __int128)0x0000000001000000ULL << 64 | 0x000000000000013BULL;
  for (unsigned char c : data) {
    h ^= c;
    h *= prime;
  }
  return fmt::format("{:016x}{:016x}", uint64_t(h >> 64), uint64_t(h));
}

std::optional<std::string> env_var(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::filesystem::path cache_dir() {
  if (auto dir = env_var("GEMMTUNE_CACHE_DIR")) return *dir;
  if (auto xdg = env_var("XDG_CACHE_HOME")) return std::filesystem::path(*xdg) / "gemmtune";
  if (auto home = env_var("HOME")) return std::filesystem::path(*home) / ".cache" / "gemmtune";
  return std::filesystem::temp_directory_path() / "gemmtune";
}

std::filesystem::path default_db_path() {
  if (auto db = env_var("GEMMTUNE_DB")) return *db;
  return cache_dir() / "tuning.db";
}

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = std::make_shared<spdlog::logger>(
        "gemmtune", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    l->set_pattern("[gemmtune %l] %v");
    auto level = spdlog::level::warn;
    if (auto text = env_var("GEMMTUNE_LOG_LEVEL")) level = spdlog::level::from_str(*text);
    l->set_level(level);
    return l;
  }();
  return *logger;
}

void throw_error(Errc code, const std::string& message) {
  throw Error(code, message);
}

void throw_error_at(Errc code, const char* file, int line, const std::string& message) {
  // Caller mistakes read best without a source location; everything else carries it.
  if (code == Errc::invalid_argument || code == Errc::unsupported || code == Errc::no_device)
    throw Error(code, message);
  const char* base = file;
  for (const char* p = file; *p; ++p)
    if (*p == '/') base = p + 1;
  throw Error(code, fmt::format("{} ({}:{})", message, base, line));
}

}  // namespace gemmtune
