#pragma once
// GEMMTUNE_RECORD: the problems a program needed and had no tuned kernel for, written as lines
// of gemm-tune's shapes file, so that `gemm-tune --shapes FILE` tunes exactly those.
#include <filesystem>
#include <string>

#include "gemmtune/types.hpp"

namespace gemmtune {

// "11008 8 4096 bf16 tn", then the scaling where there is one ("scaling=block": float8) and
// "accum=fast" after it where a float8 problem accumulates fast (precise writes nothing),
// "precision=tf32" (or 3xtf32) where an f32 problem is computed so (exact writes nothing), the
// groups where it is grouped ("1536 256 2048 bf16 tn groups=128": N is then the mean columns of a
// group, N / G rounded up; "... groups=128 group_layout=masked": N is a group's capacity, N / G),
// the epilogue where there is one ("epilogue=bias,gelu"; none writes nothing), lda=, ldb=, ldc=
// where they are not tight, "beta=1" where it reads C
// (gemm-tune then tunes it apart), then a comment: "align=N" where the pointers were less aligned
// than the leading dimensions (a shapes file cannot say so), "n=N" where N / G was rounded up.
std::string shape_line(const Problem& problem);

// Appends shape_line(problem) to file (creating it and its folder) unless a line of the file
// already names the problem. Several processes may record into one file at once: each holds an
// exclusive lock (flock) while it reads the file again and appends. Returns true when it
// appended. Throws Error(io) when the file cannot be read or written.
bool record_shape(const std::filesystem::path& file, const Problem& problem);

}  // namespace gemmtune
