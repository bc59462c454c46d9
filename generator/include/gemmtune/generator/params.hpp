#pragma once
// A family's parameters, typed: a struct of int64_t members with one table that names them, and
// its search space as data (each parameter's values and the named rules a point must keep),
// enumerated with every rule checked as soon as the parameters it reads are set.
//
//   struct SimtParams {
//     int64_t bm, bn, ...;
//     static constexpr std::array fields = {
//         ParamField<SimtParams>{"BM", &SimtParams::bm}, ...};
//   };
//
// The table drives everything that names a parameter: the stored KernelConfig and its JSON, the
// search space, the emitted unit's constants, a kernel's structure and the reasons a stored
// configuration is refused. A family's code reads `config.bm`, never a string.
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "gemmtune/generator/config.hpp"
#include "gemmtune/generator/util.hpp"

namespace gemmtune {

template <class P>
struct ParamField {
  std::string_view name;  // as stored and emitted: "BM"
  int64_t P::*member;
  // A refinement tunes a kernel without changing its structure (pipeline depth, cluster shape,
  // raster group, how C is stored): the cost model cannot rank its values reliably, so the tuner
  // measures each structure once first, and refinements only of the fastest structures.
  bool refinement = false;
  // Emitted as `static constexpr bool` rather than int (the template takes a flag).
  bool flag = false;
  // Added after configurations were stored: one stored without it takes P's default value (the
  // member's initializer), which is what those kernels were.
  bool defaulted = false;
};

// A point of a family's space: what the kernel computes (from the problem) and its parameters.
template <class P>
struct FamilyConfig : P {
  DataTypes types;
  Scaling scaling = Scaling::none;
  Op op_a = Op::N;
  Op op_b = Op::N;
  Epilogue epilogue;

  // The problem's part of a configuration, with P's members as P's default initializers leave
  // them.
  static FamilyConfig of(const Problem& p) {
    FamilyConfig c{};
    c.types = p.types;
    c.scaling = p.scaling;
    c.op_a = p.op_a;
    c.op_b = p.op_b;
    c.epilogue = p.epilogue;
    return c;
  }
  bool a_t() const { return op_a == Op::T; }
  bool b_t() const { return op_b == Op::T; }
};

template <class P>
constexpr size_t param_count() {
  return P::fields.size();
}

template <class P>
size_t field_index(int64_t P::*member) {
  for (size_t i = 0; i < P::fields.size(); ++i)
    if (P::fields[i].member == member) return i;
  throw_error(Errc::internal, "a parameter member is not in its family's table");
}

// A configuration that must hold, with its name (for the counts of what it pruned and for the
// reason a stored configuration is refused), and the parameters it reads: the enumeration checks
// it as soon as they are all set. A rule that reads a parameter it does not list would be
// checked with that parameter unset, and a rule must be safe to evaluate on any point of the
// product (it cannot count on another rule holding): tests/test_families.cpp checks every
// family's rules on random points against what the enumeration kept.
template <class P>
struct Rule {
  std::string_view name;
  std::string_view description;
  std::vector<int64_t P::*> reads;
  bool (*holds)(const FamilyConfig<P>& config, const Problem& problem, const ArchInfo& arch);
};

// Both lists of parameters, for a rule that reads what two helpers read.
template <class P>
std::vector<int64_t P::*> operator+(std::vector<int64_t P::*> a,
                                    const std::vector<int64_t P::*>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

template <class P>
struct Space {
  std::array<std::vector<int64_t>, param_count<P>()> values;
  std::vector<Rule<P>> rules;

  void set(int64_t P::*member, std::vector<int64_t> v) { values[field_index(member)] = v; }
  const std::vector<int64_t>& of(int64_t P::*member) const { return values[field_index(member)]; }
  int64_t size() const {
    int64_t total = 1;
    for (const auto& v : values) total *= int64_t(v.size());
    return total;
  }
  // The first rule the configuration breaks, in the rules' order, or nullptr.
  const Rule<P>* first_violation(const FamilyConfig<P>& c, const Problem& p,
                                 const ArchInfo& a) const {
    for (const auto& rule : rules)
      if (!rule.holds(c, p, a)) return &rule;
    return nullptr;
  }
};

// The valid points of a space and how many points each rule pruned (a rule that fails for a
// partial point prunes every point below it: their count is what it is charged).
template <class P>
struct TypedPruning {
  std::vector<FamilyConfig<P>> valid;
  std::map<std::string, int64_t> pruned_by;
};

namespace detail {

template <class P>
struct Enumeration {
  const Space<P>& space;
  const Problem& problem;
  const ArchInfo& arch;
  // rules_at[i]: the rules whose last parameter read is field i, in the rules' order.
  std::array<std::vector<const Rule<P>*>, param_count<P>()> rules_at;
  std::array<int64_t, param_count<P>() + 1> below;  // points under a choice of fields 0..i-1
  TypedPruning<P> out;
  FamilyConfig<P> point;

  void walk(size_t i) {
    if (i == param_count<P>()) {
      out.valid.push_back(point);
      return;
    }
    for (const int64_t value : space.values[i]) {
      point.*(P::fields[i].member) = value;
      if (const Rule<P>* broken = first_broken(i))
        out.pruned_by[std::string(broken->name)] += below[i + 1];
      else
        walk(i + 1);
    }
  }
  const Rule<P>* first_broken(size_t i) const {
    for (const Rule<P>* rule : rules_at[i])
      if (!rule->holds(point, problem, arch)) return rule;
    return nullptr;
  }
};

}  // namespace detail

// Every valid point of the space for the problem, in a fixed order (the table's first field
// slowest, each field's values in the order the space lists them).
template <class P>
TypedPruning<P> enumerate_valid(const Space<P>& space, const FamilyConfig<P>& start,
                                const Problem& problem, const ArchInfo& arch) {
  constexpr size_t n = param_count<P>();
  detail::Enumeration<P> e{space, problem, arch, {}, {}, {}, start};
  std::vector<const Rule<P>*> constant;  // rules of the problem alone
  for (const auto& rule : space.rules) {
    size_t last = 0;
    bool any = false;
    for (const auto member : rule.reads) {
      last = std::max(last, field_index(member));
      any = true;
    }
    (any ? e.rules_at[last] : constant).push_back(&rule);
  }
  e.below[n] = 1;
  for (size_t i = n; i-- > 0;) e.below[i] = e.below[i + 1] * int64_t(space.values[i].size());
  for (const Rule<P>* rule : constant)
    if (!rule->holds(start, problem, arch)) {
      e.out.pruned_by[std::string(rule->name)] = e.below[0];
      return e.out;
    }
  if (e.below[0] > 0) e.walk(0);
  return e.out;
}

// The stored form of a typed configuration, and back.
template <class P>
KernelConfig to_kernel_config(std::string_view family, const FamilyConfig<P>& c) {
  KernelConfig k{std::string(family), c.types, c.scaling, c.op_a, c.op_b, {}, c.epilogue};
  for (const auto& f : P::fields) k.params[std::string(f.name)] = c.*(f.member);
  return k;
}

// Empty when `config` has exactly P's parameters, else which is missing or unknown.
template <class P>
std::string why_not_params_of(const KernelConfig& config, std::string_view family) {
  for (const auto& f : P::fields)
    if (!f.defaulted && !config.params.count(std::string(f.name)))
      return fmt::format("parameter {} is missing", f.name);
  for (const auto& [name, value] : config.params) {
    bool known = false;
    for (const auto& f : P::fields) known = known || f.name == name;
    if (!known) return fmt::format("the {} family has no parameter {}", family, name);
  }
  return {};
}

// Throws Error(internal) when the parameters are not P's (stored configurations are checked with
// why_not_params_of() first).
template <class P>
FamilyConfig<P> from_kernel_config(const KernelConfig& k, std::string_view family) {
  const std::string why = why_not_params_of<P>(k, family);
  GT_REQUIRE(why.empty(), Errc::internal, "config of family '{}': {}", family, why);
  FamilyConfig<P> c{};
  c.types = k.types;
  c.scaling = k.scaling;
  c.op_a = k.op_a;
  c.op_b = k.op_b;
  c.epilogue = k.epilogue;
  for (const auto& f : P::fields) {
    const auto it = k.params.find(std::string(f.name));
    c.*(f.member) = it != k.params.end() ? it->second : P{}.*(f.member);
  }
  return c;
}

}  // namespace gemmtune
