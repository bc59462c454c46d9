// Lookups in the embedded templates, and the include graph between them: what a generated unit
// (or a family) is built from, for cache keys and template versions.
#include "gemmtune/generator/embedded.hpp"

#include <set>

#include "gemmtune/generator/util.hpp"

namespace gemmtune {
namespace {

std::string_view trim_left(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

// The quoted name of an `#include "name"` line, or empty.
std::string_view include_of(std::string_view line) {
  line = trim_left(line);
  if (!line.starts_with('#')) return {};
  line = trim_left(line.substr(1));
  if (!line.starts_with("include")) return {};
  line = trim_left(line.substr(7));
  if (!line.starts_with('"')) return {};
  const size_t close = line.find('"', 1);
  return close == std::string_view::npos ? std::string_view{} : line.substr(1, close - 1);
}

const EmbeddedFile* find_file(std::string_view path, const std::vector<EmbeddedFile>& files) {
  for (const auto& f : files)
    if (path == f.path) return &f;
  return nullptr;
}

}  // namespace

std::vector<std::string> quoted_includes(std::string_view code) {
  std::vector<std::string> names;
  while (!code.empty()) {
    const size_t end = code.find('\n');
    const std::string_view name = include_of(code.substr(0, end));
    if (!name.empty()) names.emplace_back(name);
    code.remove_prefix(end == std::string_view::npos ? code.size() : end + 1);
  }
  return names;
}

std::vector<std::string> template_closure(const std::vector<std::string>& roots,
                                          const std::vector<EmbeddedFile>& files) {
  std::set<std::string> seen;
  std::vector<std::string> pending = roots;
  while (!pending.empty()) {
    const std::string name = std::move(pending.back());
    pending.pop_back();
    const EmbeddedFile* file = find_file(name, files);
    if (file == nullptr || !seen.insert(name).second) continue;
    for (auto& included : quoted_includes(file->content)) pending.push_back(std::move(included));
  }
  return {seen.begin(), seen.end()};
}

std::string templates_digest(const std::vector<std::string>& closure,
                             const std::vector<EmbeddedFile>& files) {
  std::string all;
  for (const auto& path : closure) {
    const EmbeddedFile* file = find_file(path, files);
    GT_REQUIRE(file != nullptr, Errc::internal, "template '{}' is not among the templates", path);
    // Length prefixes keep path and content apart, and one file from the next.
    all += fmt::format("{}:{}|{}:", path.size(), path, file->content.size());
    all += file->content;
    all += '|';
  }
  return hash_hex(all);
}

std::string included_templates_digest(std::string_view code,
                                      const std::vector<EmbeddedFile>& files) {
  return templates_digest(template_closure(quoted_includes(code), files), files);
}

}  // namespace gemmtune
