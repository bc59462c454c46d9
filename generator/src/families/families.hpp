#pragma once
// The families this build knows. Each lives in its own file beside this one.
#include "gemmtune/generator/family.hpp"

namespace gemmtune {

const Family& gemv_family();
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

const Family& simt_family();
const Family& wgmma_sm90_family();
const Family& mma_sm80_family();

}  // namespace gemmtune
