#pragma once
// The families this build knows. Each lives in its own file beside this one.
#include <algorithm>
#include <initializer_list>

#include "gemmtune/generator/family.hpp"

namespace gemmtune {

const Family& gemv_family();
const Family& simt_family();
const Family& wgmma_sm90_family();
const Family& mma_sm80_family();

// Whether the problem has one of `types` for every operand, f32 accumulation and no scaling:
// what the families of this build compute.
inline bool one_type_of(const Problem& p, std::initializer_list<DataType> types) {
  return p.types.is_uniform() && p.scaling == Scaling::none &&
         std::find(types.begin(), types.end(), p.types.a) != types.end();
}

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Shape classes the tensor-core families choose by (K splits, pipeline depth, tile sizes).
// Fewer 128 x 128 tiles than SMs.
inline bool few_tiles(const Problem& p, const ArchInfo& arch) {
  return ceil_div(p.m, 128) * ceil_div(p.n, 128) < arch.sms;
}
// Even 64 x 64 tiles fill less than half the SMs: every CTA waits through its chain of loads, and
// narrower tiles, deeper pipelines or parts of K buy CTAs that wait through shorter ones (cuBLAS
// runs bf16 tn 768x128x768 on 64 CTAs of wgmma N 24, 500x300x700 split in K; ncu on the H100).
inline bool latency_bound(const Problem& p, const ArchInfo& arch) {
  return 2 * ceil_div(p.m, 64) * ceil_div(p.n, 64) < arch.sms;
}

}  // namespace gemmtune
