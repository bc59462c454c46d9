#pragma once
// The kernel templates, embedded into the library at build time (templates/CMakeLists.txt), and
// which of them a piece of code depends on.
#include <string>
#include <string_view>
#include <vector>

namespace gemmtune {

struct EmbeddedFile {
  const char* path;  // relative to templates/, e.g. "simt.cuh", "ptx/wgmma.cuh"
  std::string_view content;
};

const std::vector<EmbeddedFile>& embedded_templates();

// The names in the `#include "..."` lines of a source, in order (also those inside #if blocks:
// counting a header too many is safe, one too few is not).
std::vector<std::string> quoted_includes(std::string_view code);
// The templates of `files` that `roots` name, and those they include, transitively: sorted paths.
// Include names are matched against the paths exactly, as NVRTC matches its in-memory headers;
// a name that is no template (a system header) is not followed.
std::vector<std::string> template_closure(
    const std::vector<std::string>& roots,
    const std::vector<EmbeddedFile>& files = embedded_templates());
// 32 hex digits over the paths and contents of template_closure(quoted_includes(code)): with the
// code itself, everything a compiled unit is built from.
std::string included_templates_digest(
    std::string_view code, const std::vector<EmbeddedFile>& files = embedded_templates());
// The same digest over a closure (sorted paths, as template_closure returns them).
std::string templates_digest(const std::vector<std::string>& closure,
                             const std::vector<EmbeddedFile>& files = embedded_templates());

}  // namespace gemmtune
