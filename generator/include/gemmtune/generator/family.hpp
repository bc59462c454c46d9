#pragma once
// A kernel family: one template file, its search space, how to name, emit and launch a point.
// Families are pure descriptions; compiling and launching live in runtime/.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gemmtune/generator/config.hpp"
#include "gemmtune/generator/cost_model.hpp"
#include "gemmtune/generator/embedded.hpp"
#include "gemmtune/generator/search_space.hpp"

namespace gemmtune {

// A TMA tensor map that a launch needs for one operand, as it is stored (column-major, ld):
// the box one copy moves, in elements along the stored rows (contiguous) and columns.
struct TensorMapNeed {
  bool needed = false;
  uint32_t box_rows = 0, box_cols = 0;
};

enum class Operand { a = 0, b = 1, c = 2 };

// Whether TMA can read an operand whose columns are `ld` elements apart in place: each column
// must start on 16 bytes (its address too, which only the runtime knows). One that cannot is
// packed into an aligned copy first (LaunchGeometry::maps).
inline bool tma_ld_aligned(int64_t ld, DataType type) {
  return ld * element_bytes(type) % 16 == 0;
}

// Everything a launch of one configuration on one problem needs; the runtime provides it without
// knowing the family's parameters.
struct LaunchGeometry {
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  std::array<uint32_t, 3> cluster{1, 1, 1};
  uint32_t smem_bytes = 0;            // dynamic shared memory
  uint32_t tiles_m = 1, tiles_n = 1;  // output tiles, for the kernel's tile scheduler
  // Persistent kernels loop over `work_units` (tiles, or cluster-sized groups of tiles). The
  // runtime sizes their grid: no more CTAs than can be resident at once (clusters may not fit on
  // every SM), and no more than the fewest that finish in the same number of rounds (all
  // resident CTAs when work_units is 0: stream-K spreads the work over every one).
  bool persistent = false;
  uint32_t work_units = 0;
  // Scratch the kernel needs (split-K partial sums), passed as GemmArgs::workspace; and counters
  // (tiles reduced in parts), passed as GemmArgs::counters, zero at launch and left zero by every
  // kernel. The runtime allocates both once per device and stream.
  uint64_t workspace_bytes = 0;
  uint64_t counter_bytes = 0;
  // Tensor maps by Operand, passed as GemmArgs::map_a/b/c. A and B read through TMA need
  // 16-byte aligned addresses and leading dimensions: the runtime packs an operand that is not
  // into an aligned copy first. C's map (TMA stores, and TMA loads of C when beta != 0) is
  // made only when C is aligned, and then GEMM_ARGS_MAP_C is set; otherwise the kernel stores
  // from registers.
  std::array<TensorMapNeed, 3> maps{};
  // Divisors of the kernel's tile mapping (raster_divisors of templates/raster.h for grouped
  // tiles), passed with their multipliers as GemmArgs::divisors: a kernel's division by a launch
  // value costs ~20 dependent instructions, and a CTA's first load waits on the mapping.
  uint32_t divisors[2] = {1, 1};
  // Whether the kernel can apply beta != 0. One built for beta == 0 alone has no code that reads
  // C; the runtime refuses to launch it with beta != 0 (plain_args), and the verifier checks it
  // with beta == 0 only.
  bool reads_c = true;

  const TensorMapNeed& map(Operand operand) const { return maps[size_t(operand)]; }
  TensorMapNeed& map(Operand operand) { return maps[size_t(operand)]; }
};

// `ctas` as a grid's x extent; throws Error(invalid_argument) when a grid cannot hold that many
// (2^31 - 1), rather than let the count wrap. Families' geometry() sizes grids with it.
uint32_t grid_extent(int64_t ctas);

// The generated translation unit of one configuration.
struct KernelSource {
  std::string name;  // also the kernel's entry point
  std::string code;
  std::string hash;  // hex digest of name + code
};

class Family {
 public:
  virtual ~Family() = default;

  virtual std::string_view name() const = 0;
  // Empty when the family can solve the problem on the architecture, otherwise the reason.
  virtual std::string unsupported_reason(const Problem& problem, const ArchInfo& arch) const = 0;
  // The default search space for a problem.
  virtual SearchSpace space(const Problem& problem, const ArchInfo& arch) const = 0;
  // A configuration that is valid and reasonable for any problem the family supports.
  virtual KernelConfig default_config(const Problem& problem, const ArchInfo& arch) const = 0;
  // Kernel names say what they are: gemm_simt_f32_nn_128x128x8_w64x32_t8x8_v4_s2.
  virtual std::string kernel_name(const KernelConfig& config) const = 0;
  // The translation unit: a small preamble of constants that instantiates the template.
  virtual std::string emit(const KernelConfig& config) const = 0;
  virtual LaunchGeometry geometry(const KernelConfig& config, const Problem& problem,
                                  const ArchInfo& arch) const = 0;
  // The templates the family's kernels are built from: the one its units include, and any its
  // launcher compiles (operand packing). What those include is found by scanning, so a list may
  // name only the roots; the hash of them all is the template version.
  virtual std::vector<std::string> template_files() const = 0;
  // The cost model (cost_model.hpp). tile_work describes what one CTA computes; the default
  // reads the launch geometry, and a family refines it with its calibration (efficiency of the
  // main loop, overheads). predicted_ms is the predicted time of the kernel: the tuner measures
  // candidates in this order and stops when the model says that the rest cannot win.
  virtual TileWork tile_work(const KernelConfig& config, const Problem& problem,
                             const ArchInfo& arch) const;
  virtual double predicted_ms(const KernelConfig& config, const Problem& problem,
                              const ArchInfo& arch) const;
};

// A translation unit with its hash (of name and code).
KernelSource make_source(std::string name, std::string code);
// Name, code and hash of one configuration.
KernelSource emit_source(const Family& family, const KernelConfig& config);
// Hex hash of the paths and contents of the family's templates and of everything they include
// (template_closure): results from another version are never reused. `files` stands in for the
// embedded templates in tests.
std::string template_version(const Family& family,
                             const std::vector<EmbeddedFile>& files = embedded_templates());

// A line for a generated unit that stops its compile unless the kernel's shared-memory size
// (`expression`, e.g. "K::SMEM_BYTES") equals `bytes`, what the family's geometry launches it
// with: the two computations cannot drift apart unnoticed. Every family's emit() uses it (gemv's
// where the size is a constant of the kernel: axpy).
std::string smem_static_assert(std::string_view expression, int64_t bytes);

// What a family's emit() says of its generated unit; generated_unit() writes the rest, which is
// the same for every family: the template's include, struct Config, K = the kernel over it, the
// checks, and the extern "C" entry that runs K.
struct UnitSource {
  std::string name;                // the entry point: the family's kernel_name()
  std::string_view header;         // the template, e.g. "wgmma_sm90.cuh"
  std::string_view kernel;         // its kernel class template, e.g. "gemmtune::wgmma_sm90::Kernel"
  std::string config;              // struct Config's members, "  static constexpr ...;\n" lines
  std::string checks;              // lines after K is declared (smem_static_assert())
  std::string_view launch_bounds;  // __launch_bounds__'s arguments, e.g. "K::THREADS, 1"
  std::string_view body;           // the entry's body: its dynamic shared memory, then K::run
};
std::string generated_unit(const UnitSource& unit);

// The production families of this build, best first: the only ones searched, and the only ones a
// tuning database or an imported file may name.
const std::vector<const Family*>& all_families();
// The production family of that name, or nullptr.
const Family* production_family(std::string_view name);
// A production family, or one registered with register_family(); throws Error(invalid_argument).
const Family& find_family(std::string_view name);
// Makes find_family() find `family` too, in this process. For tests, whose own binaries carry
// families that misbehave on purpose (tests/fault_injection_family.cpp): an installed build has
// none, and production_family() never returns them. `family` must outlive the process's use.
void register_family(const Family& family);

// Empty when `config` can run `problem` on `arch`: it names a production family that supports the
// problem there, with the problem's dtype and ops, exactly the family's parameters, each with a
// value of the family's search space, and every constraint holds. Otherwise why not, for people.
// Rows of a tuning database pass this before the library (or an import) trusts them.
std::string why_unusable(const KernelConfig& config, const Problem& problem, const ArchInfo& arch);

// `config`, tuned for `tuned`, made for `problem`: each parameter that the family's spaces for
// both problems pin to one value is derived from the problem (wgmma's RASTER, READS_C) and takes
// the value `problem` gives it. So a winner tuned with beta = 0 can serve a call with beta != 0
// as the nearest shape, and the reverse. What either space searches stays as tuned (why_unusable
// then says whether it suits `problem`); a config of a family this build lacks comes back as is.
KernelConfig with_derived_params(KernelConfig config, const Problem& tuned, const Problem& problem,
                                 const ArchInfo& arch);
// Families that can solve the problem on the architecture, best first.
std::vector<const Family*> families_for(const Problem& problem, const ArchInfo& arch);
// The configuration for a problem nobody tuned, from `families` (best first, not empty): the
// first one's default, unless its launch must pack an operand first (a tensor map over an
// operand not 16-byte aligned) and the cost model predicts another family's default faster.
// Small unaligned problems lose more to the packing kernel than TMA gains them: bf16 nn
// 500x300x700 (lda 500) ran 15 us on wgmma_sm90's default, 10 us on mma_sm80's (H100).
KernelConfig untuned_default(const std::vector<const Family*>& families, const Problem& problem,
                             const ArchInfo& arch);

}  // namespace gemmtune
