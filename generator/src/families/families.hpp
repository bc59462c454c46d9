#pragma once
// The families this build knows. Each lives in its own file beside this one.
#include "gemmtune/generator/family.hpp"

namespace gemmtune {

const Family& simt_family();
const Family& wgmma_sm90_family();

}  // namespace gemmtune
