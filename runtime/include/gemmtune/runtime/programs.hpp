#pragma once
// Where gemmtune's programs are (gemm-tune, gemm-tune-worker): one lookup for the tuner's worker
// and the library's GEMMTUNE_TUNE=now.
#include <filesystem>
#include <string>

namespace gemmtune {

// The executable `name`: $override_env when set (which must exist), else the first found beside
// this program, in $GEMMTUNE_BIN_DIR, beside libgemmtune (its folder, then ../bin: the installed
// and the Python package's layouts), on the PATH. Throws Error(io) saying where it looked.
std::filesystem::path find_program(const std::string& name, const char* override_env);

}  // namespace gemmtune
