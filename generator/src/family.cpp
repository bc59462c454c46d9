#include "gemmtune/generator/family.hpp"

#include <algorithm>
#include <mutex>

#include "families/families.hpp"
#include "gemmtune/generator/util.hpp"

namespace gemmtune {

TileWork Family::tile_work(const KernelConfig& config, const Problem& problem, const ArchInfo& arch) const {
  const LaunchGeometry g = geometry(config, problem, arch);
  TileWork w;
  w.tile_m = (problem.m + g.tiles_m - 1) / g.tiles_m;
  w.tile_n = (problem.n + g.tiles_n - 1) / g.tiles_n;
  const int64_t threads = int64_t(g.block[0]) * g.block[1] * g.block[2];
  w.ctas_per_sm = g.persistent ? 1 : ctas_per_sm(arch, threads, g.smem_bytes, 0);
  w.tile_overhead_us = 1.0 + epilogue_us(arch, w.tile_m, w.tile_n, problem.dtype);
  return w;
}

double Family::predicted_ms(const KernelConfig& config, const Problem& problem, const ArchInfo& arch) const {
  return roofline(problem, arch, tile_work(config, problem, arch)).total_ms;
}

uint32_t grid_extent(int64_t ctas) {
  constexpr int64_t max_grid_x = (int64_t(1) << 31) - 1;
  GT_REQUIRE(ctas >= 1 && ctas <= max_grid_x, Errc::invalid_argument,
             "the problem needs {} thread blocks, more than a grid holds (2^31 - 1)", ctas);
  return uint32_t(ctas);
}

KernelSource make_source(std::string name, std::string code) {
  KernelSource src{std::move(name), std::move(code), {}};
  src.hash = hash_hex(src.name + '\n' + src.code);
  return src;
}

KernelSource emit_source(const Family& family, const KernelConfig& config) {
  return make_source(family.kernel_name(config), family.emit(config));
}

std::string template_version(const Family& family, const std::vector<EmbeddedFile>& files) {
  const std::vector<std::string> roots = family.template_files();
  const std::vector<std::string> closure = template_closure(roots, files);
  for (const auto& root : roots)
    GT_REQUIRE(std::binary_search(closure.begin(), closure.end(), root), Errc::internal,
               "family {} names template '{}', which was not embedded", family.name(), root);
  return templates_digest(closure, files).substr(0, 16);
}

std::string smem_static_assert(std::string_view expression, int64_t bytes) {
  return fmt::format(
      "static_assert({0} == {1}, \"the family launches with {1} bytes of shared memory, the kernel "
      "uses {0}\");\n",
      expression, bytes);
}

const std::vector<const Family*>& all_families() {
  // Best first: when several families solve a problem, the tuner searches all of them, and the
  // library's untuned default is the first one's. gemv serves only N == 1 or M == 1; on sm_90
  // wgmma_sm90 serves bf16/f16 before mma_sm80; on sm_80-89 mma_sm80 serves them.
  static const std::vector<const Family*> families = {&gemv_family(), &wgmma_sm90_family(), &mma_sm80_family(),
                                                      &simt_family()};
  return families;
}

const Family* production_family(std::string_view name) {
  for (const Family* f : all_families())
    if (f->name() == name) return f;
  return nullptr;
}

namespace {

struct Registered {
  std::mutex mutex;
  std::vector<const Family*> families;
};

Registered& registered() {
  static Registered r;
  return r;
}

}  // namespace

void register_family(const Family& family) {
  Registered& r = registered();
  std::lock_guard lock(r.mutex);
  if (std::find(r.families.begin(), r.families.end(), &family) == r.families.end())
    r.families.push_back(&family);
}

const Family& find_family(std::string_view name) {
  if (const Family* f = production_family(name)) return *f;
  Registered& r = registered();
  std::lock_guard lock(r.mutex);
  for (const Family* f : r.families)
    if (f->name() == name) return *f;
  GT_THROW(Errc::invalid_argument, "unknown kernel family '{}'", name);
}

std::vector<const Family*> families_for(const Problem& problem, const ArchInfo& arch) {
  std::vector<const Family*> out;
  for (const Family* f : all_families())
    if (f->unsupported_reason(problem, arch).empty()) out.push_back(f);
  return out;
}

namespace {

std::string family_names() {
  std::string out;
  for (const Family* f : all_families()) out += fmt::format("{}{}", out.empty() ? "" : ", ", f->name());
  return out;
}

std::string values_text(const std::vector<int64_t>& values) {
  std::string out;
  for (int64_t v : values) out += fmt::format("{}{}", out.empty() ? "" : ", ", v);
  return out;
}

// Empty when the config has exactly the space's parameters, each with one of its values.
std::string why_not_a_point(const KernelConfig& config, const SearchSpace& space) {
  for (const auto& param : space.params) {
    auto it = config.params.find(param.name);
    if (it == config.params.end()) return fmt::format("parameter {} is missing", param.name);
    if (std::find(param.values.begin(), param.values.end(), it->second) == param.values.end())
      return fmt::format("{}={} is not among the values of the {} family ({})", param.name, it->second,
                         space.family, values_text(param.values));
  }
  for (const auto& [name, value] : config.params) {
    const bool known = std::any_of(space.params.begin(), space.params.end(),
                                   [&](const Param& p) { return p.name == name; });
    if (!known) return fmt::format("the {} family has no parameter {}", space.family, name);
  }
  return {};
}

}  // namespace

std::string why_unusable(const KernelConfig& config, const Problem& problem, const ArchInfo& arch) {
  const Family* family = production_family(config.family);
  if (family == nullptr)
    return fmt::format("unknown kernel family '{}' (this build has {})", config.family, family_names());
  if (std::string why = family->unsupported_reason(problem, arch); !why.empty()) return why;
  if (config.dtype != problem.dtype || config.op_a != problem.op_a || config.op_b != problem.op_b)
    return fmt::format("the config is for {} {}, the problem is {} {}", to_string(config.dtype),
                       std::string{to_char(config.op_a), to_char(config.op_b)}, to_string(problem.dtype),
                       problem.layout());
  const SearchSpace space = family->space(problem, arch);
  if (std::string why = why_not_a_point(config, space); !why.empty()) return why;
  if (const Constraint* broken = space.first_violation(config, problem, arch))
    return fmt::format("breaks constraint {} ({}) for {} on {}", broken->name, broken->description,
                       problem.describe(), arch.name());
  return {};
}

}  // namespace gemmtune
