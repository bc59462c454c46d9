#include "gemmtune/generator/family.hpp"

#include <algorithm>

#include "families/families.hpp"
#include "gemmtune/generator/embedded.hpp"
#include "gemmtune/generator/util.hpp"

namespace gemmtune {

double Family::prior(const KernelConfig&, const Problem&, const ArchInfo&) const { return 0.0; }

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
  // Best first: when several families solve a problem, the tuner searches all of them, and the
  // library's untuned default is the first one's. gemv serves only N == 1 or M == 1.
  static const std::vector<const Family*> families = {&gemv_family(), &wgmma_sm90_family(), &simt_family()};
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
