#pragma once
// A kernel family: its templates, its typed parameters and their space, its default, cost model
// and launch plan, and one self-registration (GEMMTUNE_REGISTER_FAMILY). Families are pure
// descriptions; compiling and launching live in runtime/, choosing in tuner/, and none of those
// reads a family's parameters.
//
// Layers above see a Family through the type-erased interface below, on KernelConfigs (the
// stored form). A family is written as a FamilyOf<P>, on its own parameter struct P (params.hpp),
// which provides that interface from P's table.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gemmtune/generator/config.hpp"
#include "gemmtune/generator/cost_model.hpp"
#include "gemmtune/generator/embedded.hpp"
#include "gemmtune/generator/launch_plan.hpp"
#include "gemmtune/generator/params.hpp"

namespace gemmtune {

// The generated translation unit of one configuration.
struct KernelSource {
  std::string name;  // also the kernel's entry point
  std::string code;
  std::string hash;  // hex digest of name + code
};

// A family's search space for a problem, for people and tools: each parameter with its values,
// and each rule with what it requires.
struct SpaceSummary {
  struct Param {
    std::string name;
    std::vector<int64_t> values;
    bool refinement = false;
  };
  struct Rule {
    std::string name, description;
    std::vector<std::string> reads;
  };
  std::string family;
  std::vector<Param> params;
  std::vector<Rule> rules;
  int64_t size() const;  // points of the full product
};

// The valid configurations of a space and what each rule pruned (counted in points).
struct Pruning {
  std::vector<KernelConfig> valid;
  std::map<std::string, int64_t> pruned_by;
  int64_t pruned() const;
};

class Family {
 public:
  virtual ~Family() = default;

  virtual std::string_view name() const = 0;
  // The order of all_families(), best first: the untuned default is the first family's that
  // supports a problem, and the tuner searches them in this order.
  virtual int rank() const = 0;
  // Empty when the family can solve the problem on the architecture, otherwise the reason.
  // Asked only of problems whose kind the family takes (takes_kind_of).
  virtual std::string unsupported_reason(const Problem& problem, const ArchInfo& arch) const = 0;
  // Kinds of problem beyond one dense GEMM that a family opts into; a family that does not know
  // a kind is never asked to solve one.
  virtual bool takes_groups() const { return false; }
  // Whether its kernels apply a problem's epilogue (bias, activation) in their store.
  virtual bool takes_epilogues() const { return false; }
  // And gated ones (Epilogue::gate): D of half op(A)'s rows, gate times up.
  virtual bool takes_gated() const { return false; }

  virtual SpaceSummary space_summary(const Problem& problem, const ArchInfo& arch) const = 0;
  // The valid points of the default space, pruned while they are enumerated.
  virtual Pruning prune(const Problem& problem, const ArchInfo& arch) const = 0;
  // Empty when `config` has exactly the family's parameters, each with a value of its space for
  // the problem, and every rule holds; otherwise why not, naming the parameter or the rule.
  virtual std::string why_invalid(const KernelConfig& config, const Problem& problem,
                                  const ArchInfo& arch) const = 0;
  // The names of every rule a configuration of the family's parameters breaks, in order.
  virtual std::vector<std::string> broken_rules(const KernelConfig& config, const Problem& problem,
                                                const ArchInfo& arch) const = 0;
  // "family NAME=value ..." of every parameter that is not a refinement.
  virtual std::string structure_of(const KernelConfig& config) const = 0;
  // A configuration that is valid and reasonable for any problem the family supports.
  virtual KernelConfig default_config(const Problem& problem, const ArchInfo& arch) const = 0;
  // `config`, tuned for `tuned`, made for `problem`: each parameter that the family's spaces for
  // both problems pin to one value is derived from the problem and takes `problem`'s value.
  virtual KernelConfig with_derived_params(KernelConfig config, const Problem& tuned,
                                           const Problem& problem, const ArchInfo& arch) const = 0;

  // Kernel names say what they are: gemm_simt_f32_nn_128x128x8_w64x32_t8x8_v4_s2.
  virtual std::string kernel_name(const KernelConfig& config) const = 0;
  // The translation unit for the architecture.
  virtual std::string emit(const KernelConfig& config, const ArchInfo& arch) const = 0;
  virtual LaunchPlan plan(const KernelConfig& config, const Problem& problem,
                          const ArchInfo& arch) const = 0;
  // The templates the family's kernels are built from: the one its units include, and any its
  // launches compile (operand packing). What those include is found by scanning, so a list may
  // name only the roots; the hash of them all is the template version.
  virtual std::vector<std::string> template_files() const = 0;

  // The cost model (cost_model.hpp): what one CTA computes, and the predicted time. The tuner
  // measures candidates in this order and stops when the model says that the rest cannot win.
  virtual TileWork tile_work(const KernelConfig& config, const Problem& problem,
                             const ArchInfo& arch) const = 0;
  virtual double predicted_ms(const KernelConfig& config, const Problem& problem,
                              const ArchInfo& arch) const = 0;
};

// What a family's unit_of() says of its generated unit; generated_unit() writes the rest, which
// is the same for every family: the template's include, struct Config (the table's parameters,
// then the family's derived constants), K = the kernel over it, the checks (the shared-memory
// figure, the argument struct's layout), and the extern "C" entry that runs K.
struct UnitSource {
  std::string_view header;  // the template, e.g. "wgmma_sm90.cuh"
  // Code after the header's include: the kernel itself, for a family whose kernel is not among
  // the embedded templates (one that exists only in a test's binary).
  std::string prelude;
  std::string_view kernel;         // its kernel class template, e.g. "gemmtune::wgmma_sm90::Kernel"
  std::string derived;             // more struct Config members, "  static constexpr ...;\n" lines
  std::string checks;              // lines after K is declared (smem_static_assert())
  std::string_view launch_bounds;  // __launch_bounds__'s arguments, e.g. "K::THREADS, 1"
  std::string_view body;           // the entry's body: its dynamic shared memory, then K::run
};

// A line for a generated unit that stops its compile unless the kernel's shared-memory size
// (`expression`, e.g. "K::SMEM_BYTES") equals `bytes`, what the family's plan launches it with:
// the two computations cannot drift apart unnoticed.
std::string smem_static_assert(std::string_view expression, int64_t bytes);
// The same for the threads of a block: the kernel's K::THREADS must be what the plan launches.
std::string threads_static_assert(int64_t threads);
// struct Config's lines of the problem's epilogue, the same in every family's unit:
// "  static constexpr int BIAS = 1, ACTIVATION = 2, GATE = 0, AUX = 0;" (the enumerators' values,
// epilogue_op.cuh).
std::string epilogue_constants(const Epilogue& epilogue);
// What a kernel's name ends with for the epilogue: "" for none, else "_bias_gelu".
std::string epilogue_suffix(const Epilogue& epilogue);
// The unit: `constants` are struct Config's member lines.
std::string generated_unit(const std::string& name, const std::string& constants,
                           const UnitSource& unit, const ArgsLayout& args);

// The part of a family written on its parameter struct P. What it defines, typed, gives the
// type-erased interface; its own code never reads a parameter by name.
template <class P>
class FamilyOf : public Family {
 public:
  using Config = FamilyConfig<P>;

  // ---- what a family defines ----
  virtual Space<P> space(const Problem& problem, const ArchInfo& arch) const = 0;
  virtual Config default_of(const Problem& problem, const ArchInfo& arch) const = 0;
  virtual std::string name_of(const Config& config) const = 0;
  virtual UnitSource unit_of(const Config& config, const ArchInfo& arch) const = 0;
  virtual LaunchPlan plan_of(const Config& config, const Problem& problem,
                             const ArchInfo& arch) const = 0;
  // Its argument struct's layout (every plan_of's args).
  virtual ArgsLayout args_layout() const = 0;
  // The cost model: by default a tile per CTA as the plan launches it.
  virtual TileWork work_of(const Config& config, const Problem& problem,
                           const ArchInfo& arch) const;
  virtual double predicted(const Config& config, const Problem& problem,
                           const ArchInfo& arch) const {
    return roofline(problem, arch, work_of(config, problem, arch)).total_ms;
  }

  // ---- the type-erased interface, from P's table ----
  SpaceSummary space_summary(const Problem& problem, const ArchInfo& arch) const final;
  Pruning prune(const Problem& problem, const ArchInfo& arch) const final;
  std::string why_invalid(const KernelConfig& config, const Problem& problem,
                          const ArchInfo& arch) const final;
  std::vector<std::string> broken_rules(const KernelConfig& config, const Problem& problem,
                                        const ArchInfo& arch) const final;
  std::string structure_of(const KernelConfig& config) const final;
  KernelConfig default_config(const Problem& problem, const ArchInfo& arch) const final {
    return stored(default_of(problem, arch));
  }
  KernelConfig with_derived_params(KernelConfig config, const Problem& tuned,
                                   const Problem& problem, const ArchInfo& arch) const final;
  std::string kernel_name(const KernelConfig& config) const final {
    return full_name(typed(config));
  }
  std::string emit(const KernelConfig& config, const ArchInfo& arch) const final;
  LaunchPlan plan(const KernelConfig& config, const Problem& problem,
                  const ArchInfo& arch) const final {
    return plan_of(typed(config), problem, arch);
  }
  TileWork tile_work(const KernelConfig& config, const Problem& problem,
                     const ArchInfo& arch) const final {
    return work_of(typed(config), problem, arch);
  }
  double predicted_ms(const KernelConfig& config, const Problem& problem,
                      const ArchInfo& arch) const final {
    return predicted(typed(config), problem, arch);
  }

  // ---- for the family's own code ----
  KernelConfig stored(const Config& config) const { return to_kernel_config(name(), config); }
  std::string full_name(const Config& c) const { return name_of(c) + epilogue_suffix(c.epilogue); }
  Config typed(const KernelConfig& config) const { return from_kernel_config<P>(config, name()); }
  // The valid points of the space, typed.
  TypedPruning<P> valid_points(const Problem& problem, const ArchInfo& arch) const {
    return enumerate_valid(space(problem, arch), Config::of(problem), problem, arch);
  }
};

// A translation unit with its hash (of name and code).
KernelSource make_source(std::string name, std::string code);
// Name, code and hash of one configuration for the architecture.
KernelSource emit_source(const Family& family, const KernelConfig& config, const ArchInfo& arch);
// Hex hash of the paths and contents of the family's templates and of everything they include
// (template_closure): results from another version are never reused. `files` stands in for the
// embedded templates in tests.
std::string template_version(const Family& family,
                             const std::vector<EmbeddedFile>& files = embedded_templates());

// ---- the registry ----

// Adds a family to all_families() from now on, in this process (at most once; its name must be
// new). Production families call it through GEMMTUNE_REGISTER_FAMILY in their own file; a
// family that exists only in tests registers the same way in the test binaries that have it.
// `family` must outlive the process's use of it.
void register_family(const Family& family);
// The families of this process, by rank: the only ones searched, and the only ones a tuning
// database or an imported file may name.
std::vector<const Family*> all_families();
// The family of that name, or nullptr.
const Family* family_named(std::string_view name);
// The family of that name; throws Error(invalid_argument) naming the families there are.
const Family& find_family(std::string_view name);

// In a family's .cpp: registers `object` (a const Family&) when the program starts.
#define GEMMTUNE_REGISTER_FAMILY(object)                        \
  namespace {                                                   \
  [[maybe_unused]] const bool gemmtune_family_registered = [] { \
    ::gemmtune::register_family(object);                        \
    return true;                                                \
  }();                                                          \
  }

// Empty when `config` can run `problem` on `arch`: it names a registered family that supports the
// problem there, with the problem's types, scaling and ops, and is a valid point of its space.
// Otherwise why not, for people. Rows of a tuning database pass this before the library (or an
// import) trusts them.
std::string why_unusable(const KernelConfig& config, const Problem& problem, const ArchInfo& arch);
// with_derived_params of the config's family; a config of a family this process lacks comes
// back as is.
KernelConfig with_derived_params(KernelConfig config, const Problem& tuned, const Problem& problem,
                                 const ArchInfo& arch);
// Whether the family takes problems of this kind (grouped ones only if it takes_groups(), ones
// with an epilogue only if it takes_epilogues(), gated ones only if it takes_gated()).
bool takes_kind_of(const Family& family, const Problem& problem);
// unsupported_reason, or why the family does not take problems of this kind.
std::string why_unsupported(const Family& family, const Problem& problem, const ArchInfo& arch);
// Families that can solve the problem on the architecture, best first.
std::vector<const Family*> families_for(const Problem& problem, const ArchInfo& arch);
// The configuration for a problem nobody tuned, from `families` (best first, not empty): the
// first one's default, unless its launch must pack an operand first (a tensor map over an
// operand not 16-byte aligned) and the cost model predicts another family's default faster.
// Small unaligned problems lose more to the packing kernel than TMA gains them (docs/PERF.md,
// 'Split-K makes mma_sm80 the kernel of small unaligned problems').
KernelConfig untuned_default(const std::vector<const Family*>& families, const Problem& problem,
                             const ArchInfo& arch);

// ---- FamilyOf's definitions ----

template <class P>
TileWork FamilyOf<P>::work_of(const Config& config, const Problem& problem,
                              const ArchInfo& arch) const {
  const LaunchPlan g = plan_of(config, problem, arch);
  TileWork w;
  w.tile_m = (problem.m + g.tiles_m - 1) / g.tiles_m;
  w.tile_n = (problem.n + g.tiles_n - 1) / g.tiles_n;
  w.ctas_per_sm = g.persistent ? 1 : ctas_per_sm(arch, g.threads(), g.smem_bytes, 0);
  w.tile_overhead_us = 1.0 + epilogue_us(arch, w.tile_m, w.tile_n, problem.types.d);
  return w;
}

template <class P>
SpaceSummary FamilyOf<P>::space_summary(const Problem& problem, const ArchInfo& arch) const {
  const Space<P> s = space(problem, arch);
  SpaceSummary out;
  out.family = std::string(name());
  for (size_t i = 0; i < P::fields.size(); ++i)
    out.params.push_back({std::string(P::fields[i].name), s.values[i], P::fields[i].refinement});
  for (const auto& rule : s.rules) {
    SpaceSummary::Rule r{std::string(rule.name), std::string(rule.description), {}};
    for (const auto member : rule.reads)
      r.reads.push_back(std::string(P::fields[field_index(member)].name));
    out.rules.push_back(std::move(r));
  }
  return out;
}

template <class P>
Pruning FamilyOf<P>::prune(const Problem& problem, const ArchInfo& arch) const {
  TypedPruning<P> typed_points = valid_points(problem, arch);
  Pruning out;
  out.pruned_by = std::move(typed_points.pruned_by);
  out.valid.reserve(typed_points.valid.size());
  for (const Config& c : typed_points.valid) out.valid.push_back(stored(c));
  return out;
}

template <class P>
std::string FamilyOf<P>::why_invalid(const KernelConfig& config, const Problem& problem,
                                     const ArchInfo& arch) const {
  if (std::string why = why_not_params_of<P>(config, name()); !why.empty()) return why;
  const Space<P> s = space(problem, arch);
  const Config c = typed(config);
  for (size_t i = 0; i < P::fields.size(); ++i) {
    const auto& values = s.values[i];
    const int64_t v = c.*(P::fields[i].member);
    if (std::find(values.begin(), values.end(), v) == values.end()) {
      std::string listed;
      for (int64_t x : values) listed += fmt::format("{}{}", listed.empty() ? "" : ", ", x);
      return fmt::format("{}={} is not among the values of the {} family ({})", P::fields[i].name,
                         v, name(), listed);
    }
  }
  if (const Rule<P>* broken = s.first_violation(c, problem, arch))
    return fmt::format("breaks constraint {} ({}) for {} on {}", broken->name, broken->description,
                       problem.describe(), arch.name());
  return {};
}

template <class P>
std::vector<std::string> FamilyOf<P>::broken_rules(const KernelConfig& config,
                                                   const Problem& problem,
                                                   const ArchInfo& arch) const {
  const Config c = typed(config);
  std::vector<std::string> out;
  for (const auto& rule : space(problem, arch).rules)
    if (!rule.holds(c, problem, arch)) out.emplace_back(rule.name);
  return out;
}

template <class P>
std::string FamilyOf<P>::structure_of(const KernelConfig& config) const {
  const Config c = typed(config);
  std::string out(name());
  for (const auto& f : P::fields)
    if (!f.refinement) out += fmt::format(" {}={}", f.name, c.*(f.member));
  return out;
}

template <class P>
KernelConfig FamilyOf<P>::with_derived_params(KernelConfig config, const Problem& tuned,
                                              const Problem& problem, const ArchInfo& arch) const {
  if (!why_unsupported(*this, tuned, arch).empty() ||
      !why_unsupported(*this, problem, arch).empty() ||
      !why_not_params_of<P>(config, name()).empty())
    return config;
  const Space<P> before = space(tuned, arch), after = space(problem, arch);
  for (size_t i = 0; i < P::fields.size(); ++i)
    if (after.values[i].size() == 1 && before.values[i].size() == 1)
      config.params[std::string(P::fields[i].name)] = after.values[i].front();
  return config;
}

template <class P>
std::string FamilyOf<P>::emit(const KernelConfig& config, const ArchInfo& arch) const {
  const Config c = typed(config);
  std::string constants;
  for (const auto& f : P::fields)
    constants +=
        fmt::format("  static constexpr {} {} = {};\n", f.flag ? "bool" : "int", f.name,
                    f.flag ? (c.*(f.member) ? "true" : "false") : std::to_string(c.*(f.member)));
  constants += epilogue_constants(c.epilogue);
  return generated_unit(full_name(c), constants, unit_of(c, arch), args_layout());
}

}  // namespace gemmtune
