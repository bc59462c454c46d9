#pragma once
// Small shared helpers: hashing, environment knobs, logging, error throwing.
#include <spdlog/spdlog.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "gemmtune/error.hpp"

namespace gemmtune {

// 128-bit FNV-1a, as 32 hex digits: cache keys and source hashes.
std::string hash_hex(std::string_view data);

// GEMMTUNE_* environment knobs (README lists them).
std::optional<std::string> env_var(const char* name);
std::filesystem::path
cache_dir();  // GEMMTUNE_CACHE_DIR, else $XDG_CACHE_HOME/gemmtune, else ~/.cache/gemmtune
std::filesystem::path default_db_path();  // GEMMTUNE_DB, else cache_dir()/tuning.db

// The library's logger (stderr), level from GEMMTUNE_LOG_LEVEL (default: warn).
spdlog::logger& log();

[[noreturn]] void throw_error(Errc code, const std::string& message);
[[noreturn]] void throw_error_at(Errc code, const char* file, int line, const std::string& message);

}  // namespace gemmtune

#define GT_THROW(code, ...) \
  ::gemmtune::throw_error_at(code, __FILE__, __LINE__, fmt::format(__VA_ARGS__))
#define GT_REQUIRE(cond, code, ...)           \
  do {                                        \
    if (!(cond)) GT_THROW(code, __VA_ARGS__); \
  } while (0)
