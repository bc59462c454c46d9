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
    KernelConfig c{family, problem.types, problem.scaling, problem.op_a, problem.op_b, {}};
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
  // One configuration updated in place, odometer-style (last parameter fastest, as enumerate()),
  // and copied only when valid: spaces of 10^5 points prune in milliseconds.
  Pruning result;
  KernelConfig c{family, problem.types, problem.scaling, problem.op_a, problem.op_b, {}};
  std::vector<size_t> digit(params.size(), 0);
  std::vector<int64_t*> slot;
  for (const auto& p : params) {
    if (p.values.empty()) return result;
    slot.push_back(&(c.params[p.name] = p.values.front()));
  }
  for (int64_t index = 0, total = size(); index < total; ++index) {
    if (const Constraint* broken = first_violation(c, problem, arch))
      ++result.pruned_by[broken->name];
    else
      result.valid.push_back(c);
    for (size_t i = params.size(); i-- > 0;) {  // next point
      if (++digit[i] < params[i].values.size()) {
        *slot[i] = params[i].values[digit[i]];
        break;
      }
      digit[i] = 0;
      *slot[i] = params[i].values.front();
    }
  }
  return result;
}

std::string SearchSpace::structure_of(const KernelConfig& config) const {
  std::string out = family;
  for (const auto& p : params)
    if (!p.refinement) out += " " + p.name + "=" + std::to_string(config.at(p.name));
  return out;
}

}  // namespace gemmtune
