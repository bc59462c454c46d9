#include "gemmtune/generator/family.hpp"

#include <algorithm>

#include "families/families.hpp"
#include "gemmtune/generator/embedded.hpp"
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

KernelSource make_source(std::string name, std::string code) {
  KernelSource src{std::move(name), std::move(code), {}};
  src.hash = hash_hex(src.name + '\n' + src.code);
  return src;
}

KernelSource emit_source(const Family& family, const KernelConfig& config) {
  return make_source(family.kernel_name(config), family.emit(config));
}

std::string_view embedded_template(std::string_view path) {
  for (const auto& f : embedded_templates())
    if (path == f.path) return f.content;
  GT_THROW(Errc::internal, "template '{}' was not embedded at build time", path);
}

std::string template_version(const Family& family) {
  std::string all;
  for (const auto& path : family.template_files()) {
    all += path;
    all += '\n';
    all += embedded_template(path);
  }
  return hash_hex(all).substr(0, 16);
}

const std::vector<const Family*>& all_families() {
  // Best first: when several families solve a problem, the tuner searches all of them. On sm_90
  // wgmma_sm90 serves bf16/f16 before mma_sm80; on sm_80-89 mma_sm80 serves them.
  static const std::vector<const Family*> families = {&wgmma_sm90_family(), &mma_sm80_family(), &simt_family()};
  return families;
}

const Family& find_family(std::string_view name) {
  for (const Family* f : all_families())
    if (f->name() == name) return *f;
  if (name == fault_injection_family().name()) return fault_injection_family();
  GT_THROW(Errc::invalid_argument, "unknown kernel family '{}'", name);
}

std::vector<const Family*> families_for(const Problem& problem, const ArchInfo& arch) {
  std::vector<const Family*> out;
  for (const Family* f : all_families())
    if (f->unsupported_reason(problem, arch).empty()) out.push_back(f);
  return out;
}

}  // namespace gemmtune
