#pragma once
// A search space written as data: parameters with their values, and named constraints that a
// configuration must satisfy. A pruned configuration says which constraint pruned it.
//
// A parameter is a refinement when it tunes a kernel without changing its structure (pipeline
// depth, cluster shape, raster group, how C is stored): the cost model cannot rank its values
// reliably. The tuner measures each structure (the values of the other parameters) once first,
// and refinements only of the structures that measured among the fastest.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gemmtune/generator/config.hpp"

namespace gemmtune {

struct Param {
  std::string name;
  std::vector<int64_t> values;
  bool refinement = false;  // see above
};

struct Constraint {
  std::string name;         // short identifier: "smem_fits", "threads_per_block"
  std::string description;  // what it requires, for people
  std::function<bool(const KernelConfig&, const Problem&, const ArchInfo&)> holds;
};

struct Pruning {
  std::vector<KernelConfig> valid;
  std::map<std::string, int> pruned_by;  // constraint name -> count
  int pruned() const;
};

struct SearchSpace {
  std::string family;
  std::vector<Param> params;
  std::vector<Constraint> constraints;

  // Size of the full cartesian product of the parameter values.
  int64_t size() const;
  // Every point of the product, in a fixed order, for the problem's dtype and ops.
  std::vector<KernelConfig> enumerate(const Problem& problem) const;
  // The first constraint that the configuration breaks, or nullptr when it is valid.
  const Constraint* first_violation(const KernelConfig& config, const Problem& problem,
                                    const ArchInfo& arch) const;
  // Enumerate, then keep the valid points and count the others by constraint.
  Pruning prune(const Problem& problem, const ArchInfo& arch) const;
  // The configuration's structure: "NAME=value" of every parameter that is not a refinement.
  std::string structure_of(const KernelConfig& config) const;
};

}  // namespace gemmtune
