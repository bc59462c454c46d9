#pragma once
// What the tests parameterized over all_families() run on: problems of every class the families
// have code paths for, and a bounded sample of a family's space for one of them, so that the
// tests' time does not grow with the spaces.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "gemmtune/generator/family.hpp"

namespace gemmtune::test {

// The architectures the families target, by name.
inline std::vector<std::string> sample_arches() {
  return {"sm_80", "sm_90a"};
}

// Problems of each class (large, ragged, decode either way round, small, latency-bound, a vector
// either way round, an unaligned leading dimension, beta != 0), in every layout and in the types
// the families compute (and one mixed pair no production family has). A family takes the ones
// it supports.
inline std::vector<Problem> sample_problems(const std::vector<std::string>& layouts = {
                                                "nn", "nt", "tn", "tt"}) {
  const int64_t shapes[][3] = {{4096, 4096, 4096}, {1000, 3000, 5000}, {6144, 24, 4096},
                               {24, 6144, 4096},   {500, 300, 700},    {768, 128, 768},
                               {4096, 1, 4096},    {1, 4096, 4096}};
  const DataTypes types[] = {DataTypes::uniform(DataType::f32),
                             DataTypes::uniform(DataType::f16),
                             DataTypes::uniform(DataType::bf16),
                             {DataType::f16, DataType::bf16, DataType::f32, DataType::f32}};
  std::vector<Problem> out;
  for (const DataTypes& t : types)
    for (const std::string& layout : layouts) {
      for (const auto& s : shapes)
        out.push_back(make_problem(t, parse_op(layout[0]), parse_op(layout[1]), s[0], s[1], s[2]));
      Problem unaligned = make_problem(t, parse_op(layout[0]), parse_op(layout[1]), 301, 203, 107);
      unaligned.lda += 1;
      unaligned.align = alignment_class(t, nullptr, nullptr, nullptr, unaligned.lda, unaligned.ldb,
                                        unaligned.ldc);
      out.push_back(unaligned);
      Problem reading = make_problem(t, parse_op(layout[0]), parse_op(layout[1]), 2048, 2048, 1024);
      reading.reads_c = true;
      out.push_back(reading);
    }
  // Float8, K-major both (tn, the layout its kernels read), one class per scaling mode, and a
  // ragged one with an f32 output.
  if (std::find(layouts.begin(), layouts.end(), "tn") != layouts.end()) {
    const DataTypes fp8{DataType::e4m3, DataType::e4m3, DataType::bf16, DataType::bf16};
    const std::tuple<Scaling, int64_t, int64_t, int64_t, DataType> scaled[] = {
        {Scaling::tensor, 4096, 4096, 4096, DataType::bf16},
        {Scaling::row, 6144, 24, 4096, DataType::bf16},
        {Scaling::block, 2112, 64, 7168, DataType::bf16},
        {Scaling::row, 1000, 3000, 5000, DataType::f32}};
    for (const auto& [scaling, m, n, k, output] : scaled) {
      DataTypes out_types = fp8;
      out_types.c = out_types.d = output;
      Problem p = make_problem(out_types, Op::T, Op::N, m, n, k);
      p.scaling = scaling;
      out.push_back(p);
    }
    Problem fast = make_problem(fp8, Op::T, Op::N, 8192, 2048, 8192);
    fast.scaling = Scaling::row;
    fast.accumulation = Accumulation::fast;
    out.push_back(fast);
    // f32 on tensor cores (tf32, 3xTF32): large, ragged, decode, small, and beta != 0.
    const int64_t f32_shapes[][3] = {
        {4096, 4096, 4096}, {1000, 3000, 5000}, {6144, 24, 4096}, {500, 300, 700}};
    for (const Precision precision : {Precision::tf32, Precision::tf32x3}) {
      for (const auto& s : f32_shapes) {
        Problem p = make_problem(DataType::f32, Op::T, Op::N, s[0], s[1], s[2]);
        p.precision = precision;
        out.push_back(p);
      }
      Problem reading = make_problem(DataType::f32, Op::T, Op::N, 2048, 2048, 1024);
      reading.precision = precision;
      reading.reads_c = true;
      out.push_back(reading);
    }
  }
  // Epilogues: a bias and an activation on a large problem and a decode one; gated ones (SwiGLU,
  // GeGLU) where the weights are stored along K, their two layouts, decode (one token: gemv's)
  // and prefill.
  if (std::find(layouts.begin(), layouts.end(), "tn") != layouts.end()) {
    const std::tuple<int64_t, int64_t, int64_t, const char*> fused[] = {
        {4096, 4096, 4096, "bias,gelu"},
        {6144, 24, 4096, "bias_n,silu"},
        {22016, 8, 4096, "swiglu"},
        {22016, 1, 4096, "bias,swiglu"},
        {1000, 1, 700, "geglu_tanh,interleaved"},
        {4096, 2048, 4096, "bias,geglu,interleaved"},
        {1000, 300, 700, "swiglu,interleaved"}};
    for (const auto& [m, n, k, epilogue] : fused) {
      Problem p = make_problem(DataType::bf16, Op::T, Op::N, m, n, k);
      p.epilogue = parse_epilogue(epilogue);
      p.ldc = p.output_rows();
      out.push_back(p);
    }
    // f32 gated (simt's, and gemv's with one token).
    for (const auto& [m, n, k, epilogue] : {std::tuple{1000, 300, 700, "bias,swiglu"},
                                            std::tuple{4096, 1, 4096, "geglu,interleaved"}}) {
      Problem p = make_problem(DataType::f32, Op::T, Op::N, m, n, k);
      p.epilogue = parse_epilogue(epilogue);
      p.ldc = p.output_rows();
      out.push_back(p);
    }
  }
  // Grouped (mixture-of-experts layers): decode, prefill, and a layout of torch._grouped_mm's;
  // float8 experts, block-scaled (DeepSeek-V3's prefill) and row-scaled decode.
  const DataTypes fp8{DataType::e4m3, DataType::e4m3, DataType::bf16, DataType::bf16};
  const std::tuple<DataTypes, Scaling, const char*, int64_t, int64_t, int64_t, int64_t> grouped[] =
      {{DataTypes::uniform(DataType::bf16), Scaling::none, "tn", 1536, 8, 2048, 128},
       {DataTypes::uniform(DataType::bf16), Scaling::none, "tn", 4096, 512, 7168, 32},
       {DataTypes::uniform(DataType::f16), Scaling::none, "nn", 1000, 200, 520, 8},
       {fp8, Scaling::block, "tn", 4096, 512, 7168, 32},
       {fp8, Scaling::row, "tn", 1536, 8, 2048, 128}};
  for (const auto& [types, scaling, layout, m, mean, k, groups] : grouped) {
    if (std::find(layouts.begin(), layouts.end(), layout) == layouts.end()) continue;
    Problem p = make_problem(types, parse_op(layout[0]), parse_op(layout[1]), m, mean * groups, k);
    p.scaling = scaling;
    p.groups = groups;
    out.push_back(p);
  }
  return out;
}

// A configuration of `family` as a point of the full product of its space's values: index `i`
// of each parameter's values (for points the enumeration never yields).
inline KernelConfig point_of(const SpaceSummary& space, const Problem& p,
                             const std::vector<size_t>& index) {
  KernelConfig c{space.family, p.types, p.scaling, p.op_a, p.op_b, {}, p.epilogue};
  for (size_t i = 0; i < space.params.size(); ++i)
    c.params[space.params[i].name] = space.params[i].values[index[i]];
  return c;
}

// The valid points next to the edge of each rule: a point whose neighbour (one parameter moved to
// the next or previous value its space lists) breaks the rule. At the edges of the resource rules
// (shared memory, registers, accumulators) sit the configurations most likely to spill.
inline std::vector<KernelConfig> boundary_points(const Family& family, const Problem& p,
                                                 const ArchInfo& arch,
                                                 const std::vector<KernelConfig>& valid,
                                                 size_t per_rule) {
  const SpaceSummary space = family.space_summary(p, arch);
  std::map<std::string, size_t> found;
  std::vector<KernelConfig> out;
  // A spread of at most 256 valid points is searched: enough to find each rule's edge.
  const size_t stride = std::max<size_t>(1, valid.size() / 256);
  for (size_t i = 0; i < valid.size(); i += stride) {
    const KernelConfig& v = valid[i];
    for (const auto& param : space.params) {
      const auto& values = param.values;
      const auto at = std::find(values.begin(), values.end(), v.at(param.name));
      for (int step : {-1, 1}) {
        const auto index = (at - values.begin()) + step;
        if (index < 0 || index >= int64_t(values.size())) continue;
        KernelConfig neighbour = v;
        neighbour.params[param.name] = values[size_t(index)];
        bool taken = false;
        for (const std::string& rule : family.broken_rules(neighbour, p, arch))
          if (!taken && found[rule] < per_rule) {
            ++found[rule];
            out.push_back(v);
            taken = true;
          }
      }
    }
  }
  return out;
}

// The valid points that take every value of every parameter at least once.
inline std::vector<KernelConfig> covering_points(const std::vector<KernelConfig>& valid) {
  std::set<std::pair<std::string, int64_t>> seen;
  std::vector<KernelConfig> out;
  for (const KernelConfig& c : valid) {
    bool fresh = false;
    for (const auto& kv : c.params) fresh |= seen.insert(kv).second;
    if (fresh) out.push_back(c);
  }
  return out;
}

// A sample of the family's valid points for the problem: its default, the covering points, and
// the boundary points of each rule; at most `cap`, in that order, without repeats.
inline std::vector<KernelConfig> sample_points(const Family& family, const Problem& p,
                                               const ArchInfo& arch, size_t cap) {
  const std::vector<KernelConfig> valid = family.prune(p, arch).valid;
  std::vector<KernelConfig> candidates = {family.default_config(p, arch)};
  for (const auto& c : covering_points(valid)) candidates.push_back(c);
  for (const auto& c : boundary_points(family, p, arch, valid, 1)) candidates.push_back(c);
  std::set<std::string> names;
  std::vector<KernelConfig> out;
  for (const auto& c : candidates)
    if (out.size() < cap && names.insert(family.kernel_name(c)).second) out.push_back(c);
  return out;
}

}  // namespace gemmtune::test
