#pragma once
// The kernel templates, embedded into the library at build time (templates/CMakeLists.txt).
#include <string>
#include <string_view>
#include <vector>

namespace gemmtune {

struct EmbeddedFile {
  const char* path;  // relative to templates/, e.g. "simt.cuh", "ptx/wgmma.cuh"
  std::string_view content;
};

const std::vector<EmbeddedFile>& embedded_templates();
// Throws Error(internal) when no such template was embedded.
std::string_view embedded_template(std::string_view path);

}  // namespace gemmtune
