// Finding gemmtune's programs beside the process, the library, or on the PATH.
#include "gemmtune/runtime/programs.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <sstream>
#include <vector>

#include "gemmtune/generator/util.hpp"

namespace gemmtune {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> program_folders() {
  std::vector<fs::path> out;
  std::error_code ec;
  if (auto self = fs::read_symlink("/proc/self/exe", ec); !ec) out.push_back(self.parent_path());
  if (auto dir = env_var("GEMMTUNE_BIN_DIR")) out.emplace_back(*dir);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&find_program), &info) != 0 && info.dli_fname) {
    const fs::path lib = fs::weakly_canonical(info.dli_fname, ec).parent_path();
    out.push_back(lib);
    out.push_back(lib.parent_path() / "bin");
  }
  if (auto path = env_var("PATH")) {
    std::stringstream dirs(*path);
    for (std::string dir; std::getline(dirs, dir, ':');)
      if (!dir.empty()) out.emplace_back(dir);
  }
  return out;
}

}  // namespace

fs::path find_program(const std::string& name, const char* override_env) {
  if (auto path = env_var(override_env)) {
    GT_REQUIRE(fs::exists(*path), Errc::io, "{}={} does not exist", override_env, *path);
    return *path;
  }
  for (const fs::path& dir : program_folders())
    if (::access((dir / name).c_str(), X_OK) == 0) return dir / name;
  GT_THROW(Errc::io,
           "cannot find {} (beside this program, in GEMMTUNE_BIN_DIR, beside libgemmtune, or on "
           "the PATH); set {} to its path",
           name, override_env);
}

}  // namespace gemmtune
