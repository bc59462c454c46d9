#pragma once
// A kernel family defined only in tests (mixed_family.cpp): f16 * bf16 -> f32, with a parameter
// struct and a kernel argument of its own. It registers itself in the binaries that link it.
#include "gemmtune/generator/family.hpp"

namespace gemmtune::test {

const Family& mixed_family();
// The types it computes: A f16, B bf16, C and D f32, f32 accumulation.
DataTypes mixed_family_types();

}  // namespace gemmtune::test
