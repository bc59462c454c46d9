#include "gemmtune/generator/search_space.hpp"

namespace gemmtune {

int Pruning::pruned() const {
  int total = 0;
  for (const auto& [name, count] : pruned_by) total += count;
  return total;
}

int64_t SearchSpace::size() const {
  int64_t total = 1;
  for (const auto& p : params) total *= int64_t(p.values.size());
  return total;
}

std::vector<KernelConfig> SearchSpace::enumerate(const Problem& problem) const {
  std::vector<KernelConfig> out;
  const int64_t total = size();
  out.reserve(size_t(total));
  for (int64_t index = 0; index < total; ++index) {
    KernelConfig c{family, problem.dtype, problem.op_a, problem.op_b, {}};
    int64_t rest = index;
    // Last parameter varies fastest.
    for (auto it = params.rbegin(); it != params.rend(); ++it) {
      const int64_t count = int64_t(it->values.size());
      c.params[it->name] = it->values[size_t(rest % count)];
      rest /= count;
    }
    out.push_back(std::move(c));
  }
  return out;
}

const Constraint* SearchSpace::first_violation(const KernelConfig& config, const Problem& problem,
                                               const ArchInfo& arch) const {
  for (const auto& c : constraints)
    if (!c.holds(config, problem, arch)) return &c;
  return nullptr;
}

Pruning SearchSpace::prune(const Problem& problem, const ArchInfo& arch) const {
  Pruning result;
  for (auto& config : enumerate(problem)) {
    if (const Constraint* broken = first_violation(config, problem, arch))
      ++result.pruned_by[broken->name];
    else
      result.valid.push_back(std::move(config));
  }
  return result;
}

}  // namespace gemmtune
