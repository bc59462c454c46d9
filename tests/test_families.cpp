// What every family must keep, whatever its parameters: tests parameterized over all_families(),
// so that a new family is checked by registering it. No GPU needed.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "family_samples.hpp"
#include "gemmtune/generator/family.hpp"
#include "support.hpp"

namespace gemmtune {
namespace {

std::vector<std::string> family_names() {
  std::vector<std::string> names;
  for (const Family* f : all_families()) names.emplace_back(f->name());
  return names;
}

class EveryFamily : public ::testing::TestWithParam<std::string> {
 protected:
  const Family& family() const { return find_family(GetParam()); }
  // The sample problems the family supports on the architecture.
  std::vector<Problem> problems(const ArchInfo& arch, const std::vector<std::string>& layouts = {
                                                          "nn", "nt", "tn", "tt"}) const {
    std::vector<Problem> out;
    for (const Problem& p : test::sample_problems(layouts))
      if (why_unsupported(family(), p, arch).empty()) out.push_back(p);
    return out;
  }
};

// The library runs a family's default where nothing is tuned: it must be a valid point of the
// family's space for every problem the family supports.
TEST_P(EveryFamily, DefaultsArePointsOfTheSpace) {
  int checked = 0;
  for (const std::string& name : test::sample_arches()) {
    const ArchInfo arch = ArchInfo::from_name(name);
    for (const Problem& p : problems(arch)) {
      const KernelConfig c = family().default_config(p, arch);
      EXPECT_EQ(family().why_invalid(c, p, arch), "")
          << family().kernel_name(c) << " for " << p.describe() << " on " << name;
      EXPECT_EQ(why_unusable(c, p, arch), "") << family().kernel_name(c);
      ++checked;
    }
  }
  EXPECT_GT(checked, 0) << family().name() << " supports none of the sample problems";
}

// The enumeration checks each rule as soon as the parameters it reads are set: a rule that reads
// a parameter it does not declare would prune with that parameter unset. So each valid point's
// rules must hold, and points of the full product picked at random must be valid exactly when
// they break no rule (the enumeration's verdict equals the rules' own).
TEST_P(EveryFamily, PruningWhileEnumeratingAgreesWithTheRules) {
  std::mt19937_64 random(7);
  for (const std::string& name : test::sample_arches()) {
    const ArchInfo arch = ArchInfo::from_name(name);
    for (const Problem& p : problems(arch, {"nn", "tn"})) {
      const Pruning pruning = family().prune(p, arch);
      const SpaceSummary space = family().space_summary(p, arch);
      ASSERT_EQ(int64_t(pruning.valid.size()) + pruning.pruned(), space.size()) << p.describe();
      std::set<std::string> valid;
      for (const KernelConfig& c : pruning.valid) {
        EXPECT_TRUE(family().broken_rules(c, p, arch).empty()) << family().kernel_name(c);
        valid.insert(c.to_json());
      }
      for (int draw = 0; draw < 2000; ++draw) {
        std::vector<size_t> index;
        for (const auto& param : space.params) index.push_back(random() % param.values.size());
        const KernelConfig c = test::point_of(space, p, index);
        const bool holds = family().broken_rules(c, p, arch).empty();
        ASSERT_EQ(valid.count(c.to_json()) > 0, holds)
            << c.params_text() << " for " << p.describe() << " on " << name
            << (holds ? ": valid, but the enumeration pruned it" : ": enumerated, but invalid");
      }
    }
  }
}

// The kernel name is the entry point and the key of every cache: no two points of any family
// share one, and one name is one unit.
TEST(Families, KernelNamesAreUniqueAcrossAllFamilies) {
  for (const std::string& name : test::sample_arches()) {
    const ArchInfo arch = ArchInfo::from_name(name);
    std::map<std::string, std::string> unit_of;  // name -> hash of the unit
    for (const Family* f : all_families())
      for (const Problem& p : test::sample_problems({"nn", "tt"})) {
        if (!why_unsupported(*f, p, arch).empty()) continue;
        for (const KernelConfig& c : f->prune(p, arch).valid) {
          const KernelSource src = emit_source(*f, c, arch);
          const auto [it, added] = unit_of.emplace(src.name, src.hash);
          EXPECT_TRUE(added || it->second == src.hash)
              << src.name << " names two different units (" << f->name() << ")";
        }
      }
    EXPECT_GT(unit_of.size(), 1000u) << name;
  }
}

// What the runtime provides from a plan it must be able to provide: a grid, blocks and shared
// memory within the architecture's limits, and an argument struct that holds what the plan
// writes into it (the unit itself asserts its size, threads and shared memory: a compile is that
// check, test_compile_families).
TEST_P(EveryFamily, LaunchPlansFitTheArchitectureAndTheirArguments) {
  for (const std::string& name : test::sample_arches()) {
    const ArchInfo arch = ArchInfo::from_name(name);
    for (const Problem& p : problems(arch, {"nn", "tn"}))
      for (const KernelConfig& c : test::sample_points(family(), p, arch, 24)) {
        const LaunchPlan g = family().plan(c, p, arch);
        const std::string what = family().kernel_name(c) + " for " + p.describe();
        EXPECT_GE(g.grid[0] * g.grid[1] * g.grid[2], 1u) << what;
        EXPECT_LE(g.threads(), uint32_t(arch.max_threads_per_block)) << what;
        EXPECT_EQ(g.threads() % 32, 0u) << what;
        EXPECT_LE(int64_t(g.smem_bytes), arch.smem_per_block) << what;
        EXPECT_EQ(g.grid[0] % g.cluster_size(), 0u) << what;
        EXPECT_GT(g.args.bytes, 0u) << what;
        EXPECT_LE(g.args.core + sizeof(GemmCore), g.args.bytes) << what;
        for (const TensorMapPlan& m : g.maps) {
          EXPECT_EQ(m.offset % 64, 0u) << what;
          EXPECT_LE(m.offset + sizeof(GemmTensorMap), g.args.bytes) << what;
          EXPECT_GT(m.box_rows * m.box_cols, 0u) << what;
        }
        for (const ArgsBlock& block : g.blocks)
          EXPECT_LE(block.offset + block.bytes.size(), g.args.bytes) << what;
      }
  }
}

// The table drives the unit: every parameter of the space is a constant of struct Config, with
// the point's value.
TEST_P(EveryFamily, TheUnitCarriesEveryParameter) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  for (const Problem& p : problems(arch, {"tn"})) {
    const KernelConfig c = family().default_config(p, arch);
    const std::string code = family().emit(c, arch);
    for (const auto& [param, value] : c.params) {
      const bool found =
          code.find(fmt::format(" {} = {};", param, value)) != std::string::npos ||
          code.find(fmt::format(" {} = {};", param, value ? "true" : "false")) != std::string::npos;
      EXPECT_TRUE(found) << param << "=" << value << " not in\n" << code;
    }
    EXPECT_NE(code.find(family().kernel_name(c)), std::string::npos);
  }
}

// The stored form (KernelConfig, its JSON) gives back the same kernel; a structure leaves out
// exactly the refinements.
TEST_P(EveryFamily, TheStoredFormAndTheStructureFollowTheTable) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  for (const Problem& p : problems(arch, {"nn"})) {
    const KernelConfig c = family().default_config(p, arch);
    const KernelConfig back = KernelConfig::from_json(c.to_json());
    EXPECT_EQ(back, c);
    EXPECT_EQ(family().kernel_name(back), family().kernel_name(c));
    const std::string structure = family().structure_of(c);
    for (const auto& param : family().space_summary(p, arch).params)
      EXPECT_EQ(structure.find(" " + param.name + "=") != std::string::npos, !param.refinement)
          << param.name << " in " << structure;
  }
}

INSTANTIATE_TEST_SUITE_P(AllFamilies, EveryFamily, ::testing::ValuesIn(family_names()),
                         [](const auto& test) { return test.param; });

}  // namespace
}  // namespace gemmtune
