#include "gemmtune/tuner/shard.hpp"

#include <charconv>

#include "gemmtune/generator/util.hpp"

namespace gemmtune {
namespace {

std::optional<int> whole_number(std::string_view text) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

Shard make_shard(std::string_view index, std::string_view count, std::string source) {
  const auto i = whole_number(index), n = whole_number(count);
  GT_REQUIRE(i && n && *n >= 1 && *i >= 0 && *i < *n, Errc::invalid_argument,
             "shard {}/{} (from {}): need 0 <= I < N, whole numbers", index, count, source);
  return Shard{*i, *n, std::move(source)};
}

// Rank and size variables of the launchers, in the order they are tried.
struct Launcher {
  const char* rank;
  const char* size;
  const char* only_with;  // set only where this variable is set too (nullptr: always)
};
constexpr Launcher kLaunchers[] = {
    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_ID"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", nullptr},
    {"PMI_RANK", "PMI_SIZE", nullptr},
    {"RANK", "WORLD_SIZE", nullptr},
};

}  // namespace

std::vector<size_t> Shard::items(size_t size) const {
  std::vector<size_t> out;
  for (size_t i = size_t(index); i < size; i += size_t(count)) out.push_back(i);
  return out;
}

Shard Shard::parse(std::string_view text) {
  const size_t slash = text.find('/');
  GT_REQUIRE(slash != std::string_view::npos, Errc::invalid_argument,
             "--shard '{}': expected I/N, e.g. 0/4", text);
  return make_shard(text.substr(0, slash), text.substr(slash + 1), "--shard");
}

Shard Shard::from_environment(const Getenv& getenv) {
  for (const Launcher& l : kLaunchers) {
    const auto rank = getenv(l.rank), size = getenv(l.size);
    if (!rank || !size || (l.only_with && !getenv(l.only_with))) continue;
    return make_shard(*rank, *size, fmt::format("{}/{}", l.rank, l.size));
  }
  return Shard{};
}

std::string expand_shard_pattern(std::string_view pattern, const Shard& shard) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
    } else if (pattern[i + 1] == 't') {
      out += std::to_string(shard.index);
      ++i;
    } else if (pattern[i + 1] == '%') {
      out += '%';
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

}  // namespace gemmtune
