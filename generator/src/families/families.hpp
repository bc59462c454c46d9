#pragma once
// The families this build knows. Each lives in its own file beside this one.
#include "gemmtune/generator/family.hpp"

namespace gemmtune {

const Family& gemv_family();
const Family& simt_family();
const Family& wgmma_sm90_family();
// For tests of fault isolation only: found by find_family, never in all_families().
const Family& fault_injection_family();

}  // namespace gemmtune
