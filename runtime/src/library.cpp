// The public API: look the configuration up once per problem (database, nearest tuned shape,
// built-in default), compile or load it once per context, then launch.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <unordered_map>

#include "gemmtune/cache/tuning_db.hpp"
#include "gemmtune/gemmtune.hpp"
#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/device.hpp"
#include "gemmtune/runtime/kernel.hpp"
#include "gemmtune/runtime/shape_recorder.hpp"
#include "gemmtune/runtime/workspace.hpp"

namespace gemmtune {

const char* to_string(Source source) noexcept {
  switch (source) {
    case Source::tuned:
      return "tuned";
    case Source::other_version:
      return "other_version";
    case Source::nearest:
      return "nearest";
    case Source::fallback:
      return "fallback";
  }
  return "?";
}

namespace {

// What a problem resolved to: a ready kernel and the geometry for that problem.
struct Choice {
  std::shared_ptr<const ReadyKernel> kernel;
  LaunchGeometry geometry;
  Selection selection;
};

struct DeviceState {
  DeviceInfo info;
  // Shared so that a call holds its choice without copying it (and reload() can clear the map).
  std::unordered_map<Problem, std::shared_ptr<const Choice>, ProblemHash> choices;
  std::map<std::string, std::shared_ptr<const ReadyKernel>> kernels;  // by kernel name
  Workspaces workspaces;  // split-K partial sums and counters, one buffer per stream
};

// What a problem tuned with the other beta class costs in the nearest-shape search: as much as
// a dimension 1.25x away. The shape decides most of the choice (tiles against waves) and reading
// C shifts it (docs/PERF.md, run 178: tuned with beta = 1, bf16 8192x8192x1024 picks a 192x128
// tile, with beta = 0 a 256x128 one): the same shape tuned with the other beta is preferred to
// shapes tuned with the same beta more than 1.25x away, and closer ones to it.
const double kOtherBetaDistance = std::log(1.25);

// Sum of |log| size ratios, plus kOtherBetaDistance when one reads C and the other does not;
// infinite when any dimension differs by more than 2x, where a tile tuned for one shape says
// little about the other (a 4096^3 winner fills 1024^3 badly).
double shape_distance(const Problem& a, const Problem& b) {
  double total = a.reads_c == b.reads_c ? 0 : kOtherBetaDistance;
  for (auto [x, y] : {std::pair{a.m, b.m}, std::pair{a.n, b.n}, std::pair{a.k, b.k}}) {
    const double d = std::abs(std::log(double(x) / double(y)));
    if (d > std::log(2.0) + 1e-9) return std::numeric_limits<double>::infinity();
    total += d;
  }
  return total;
}

bool fits(const KernelConfig& config, const Problem& problem, const ArchInfo& arch) {
  return why_unusable(config, problem, arch).empty();
}

// Whether a stored best may be used at all: a production family, and a valid point of its space
// for the problem it was tuned for. A row that is not (a database edited or written elsewhere) is
// skipped with a warning; test families are never run.
bool trustworthy(const BestRecord& best, const ArchInfo& arch) {
  const std::string why = why_unusable(best.winner.config, best.problem, arch);
  if (!why.empty())
    log().warn("tuning database: not using {} ({}) for {}: {}", best.winner.kernel_name,
               best.winner.config.family, best.problem.describe(), why);
  return why.empty();
}

std::string versions_note(const DeviceKey& tuned, const DeviceKey& here) {
  return fmt::format(
      "tuned on this GPU under driver {} and NVRTC {} (this process: driver {}, NVRTC {}); "
      "gemm-tune re-tunes it for these",
      tuned.driver, tuned.nvrtc, here.driver, here.nvrtc);
}

// " with beta = 0" / " with beta != 0" where the tuned problem's class is not the call's.
std::string beta_note(const Problem& call, const Problem& tuned) {
  if (call.reads_c == tuned.reads_c) return "";
  return tuned.reads_c ? " with beta != 0" : " with beta = 0";
}

// GEMMTUNE_RECORD must never fail a call: a warning says why the file was not written.
void record_untuned(const std::string& file, const Problem& p) {
  try {
    record_shape(file, p);
  } catch (const Error& e) {
    log().warn("{}", e.what());
  }
}

// The families a library may use (Options::families, else GEMMTUNE_FAMILIES); empty: all.
// Unknown names throw Error(invalid_argument).
std::vector<std::string> family_filter(const Options& options) {
  std::string list = options.families;
  if (list.empty()) list = env_var("GEMMTUNE_FAMILIES").value_or("");
  std::vector<std::string> names;
  for (size_t start = 0; start <= list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    if (comma > start)
      names.push_back(std::string(find_family(list.substr(start, comma - start)).name()));
    start = comma + 1;
  }
  return names;
}

bool allowed(const std::vector<std::string>& only, std::string_view family) {
  return only.empty() || std::find(only.begin(), only.end(), family) != only.end();
}

}  // namespace

struct Library::Impl {
  Options options;
  std::vector<std::string> only_families;  // empty: every family
  Compiler compiler;
  std::mutex mutex;
  std::map<CUcontext, DeviceState> devices;
  std::unique_ptr<TuningDb> db;
  bool db_opened = false;
  // GEMMTUNE_RECORD: the shapes file listing the problems served without a tuned kernel.
  const std::optional<std::string> record_file = env_var("GEMMTUNE_RECORD");

  explicit Impl(Options o)
      : options(std::move(o)),
        only_families(family_filter(options)),
        compiler(true, options.cache_dir.empty()
                           ? std::optional<std::filesystem::path>{}
                           : std::optional<std::filesystem::path>{
                                 std::filesystem::path(options.cache_dir) / "kernels"}) {}

  // The database, opened once, read-only; none when it does not exist yet or cannot be read.
  TuningDb* database() {
    if (db_opened) return db.get();
    db_opened = true;
    if (!options.use_database) return nullptr;
    const std::filesystem::path path =
        options.db_path.empty() ? default_db_path() : std::filesystem::path(options.db_path);
    if (!std::filesystem::exists(path)) return nullptr;
    try {
      db = std::make_unique<TuningDb>(path, TuningDb::Mode::read_only);
    } catch (const Error& e) {
      log().warn("tuning database {} not used ({}); using the built-in defaults", path.string(),
                 e.what());
    }
    return db.get();
  }

  DeviceState& device_state(CUcontext ctx) {
    auto [it, added] = devices.try_emplace(ctx);
    if (added) it->second.info = query_device(current_device());
    return it->second;
  }

  // Database (this GPU and software; this GPU under another driver or NVRTC; the nearest tuned
  // shape), then the untuned default (the best family's, generator/family.hpp).
  std::pair<KernelConfig, Selection> pick(const DeviceInfo& dev, const Problem& p) {
    auto families = families_for(p, dev.arch);
    std::erase_if(families, [&](const Family* f) { return !allowed(only_families, f->name()); });
    GT_REQUIRE(!families.empty(), Errc::unsupported, "no kernel family{} supports {} {} on {} ({})",
               only_families.empty() ? "" : " of GEMMTUNE_FAMILIES / Options::families",
               p.types.name(), p.layout(), dev.name, dev.arch.name());
    auto usable = [&](const KernelConfig& c) {
      return allowed(only_families, c.family) && fits(c, p, dev.arch);
    };
    Selection sel;
    if (TuningDb* tdb = database()) {
      try {
        if (auto best = tdb->best(dev.key, p); best && trustworthy(*best, dev.arch) &&
                                               allowed(only_families, best->winner.config.family)) {
          sel.source = Source::tuned;
          return {best->winner.config, sel};
        }
        for (const auto& other : tdb->bests_under_other_versions(dev.key, p)) {
          if (!trustworthy(other, dev.arch) || !allowed(only_families, other.winner.config.family))
            continue;
          sel.source = Source::other_version;
          sel.note = versions_note(other.device, dev.key);
          return {other.winner.config, sel};
        }
        // A winner of another shape, its derived parameters made for this one
        // (with_derived_params).
        const BestRecord* nearest = nullptr;
        KernelConfig nearest_config;
        double nearest_distance = std::numeric_limits<double>::max();
        const auto like = tdb->bests_like(dev.key, p);
        for (const auto& b : like) {
          const double d = shape_distance(p, b.problem);
          if (!std::isfinite(d) || d >= nearest_distance || !trustworthy(b, dev.arch)) continue;
          KernelConfig adapted = with_derived_params(b.winner.config, b.problem, p, dev.arch);
          if (!usable(adapted)) continue;
          nearest = &b;
          nearest_config = std::move(adapted);
          nearest_distance = d;
        }
        if (nearest) {
          sel.source = Source::nearest;
          sel.note = "tuned for " + nearest->problem.shape() + beta_note(p, nearest->problem);
          return {nearest_config, sel};
        }
      } catch (const Error& e) {
        // A damaged file can open fine and fail only here: say so once, then do without it.
        log().warn("tuning database {} cannot be read ({}); using the built-in defaults",
                   db->path().string(), e.what());
        db.reset();
      }
    }
    sel.source = Source::fallback;
    sel.note = "no tuned kernel for this GPU, dtype and layout";
    return {untuned_default(families, p, dev.arch), sel};
  }

  std::shared_ptr<const ReadyKernel> ready(DeviceState& state, const KernelConfig& config,
                                           const Problem& p) {
    const Family& family = find_family(config.family);
    const std::string name = family.kernel_name(config);
    auto it = state.kernels.find(name);
    if (it != state.kernels.end()) return it->second;
    auto kernel =
        std::make_shared<const ReadyKernel>(prepare_kernel(compiler, config, p, state.info.arch));
    state.kernels.emplace(name, kernel);
    return kernel;
  }

  Choice resolve(DeviceState& state, const Problem& p) {
    auto [config, sel] = pick(state.info, p);
    std::shared_ptr<const ReadyKernel> kernel;
    try {
      kernel = ready(state, config, p);
    } catch (const Error& e) {
      if (sel.source == Source::fallback) throw;
      // A stored configuration that no longer builds or loads must not break the call.
      log().warn("tuned kernel {} unusable ({}); using the default", config.to_json(), e.what());
      config = find_family(config.family).default_config(p, state.info.arch);
      sel = Selection{};
      sel.note = "the tuned kernel could not be loaded";
      kernel = ready(state, config, p);
    }
    Choice c;
    c.kernel = kernel;
    c.geometry = kernel->family->geometry(config, p, state.info.arch);
    c.selection = sel;
    c.selection.kernel = kernel->family->kernel_name(config);
    c.selection.family = config.family;
    c.selection.config = config.to_json();
    // Once per problem and context: choice_for() keeps what this returns.
    if (record_file && c.selection.source != Source::tuned) record_untuned(*record_file, p);
    return c;
  }

  // The choice for the problem, and the workspaces of the current context.
  std::pair<std::shared_ptr<const Choice>, Workspaces*> choice_for(const Problem& p) {
    CUcontext ctx = ensure_context();
    std::lock_guard lock(mutex);
    DeviceState& state = device_state(ctx);
    auto it = state.choices.find(p);
    if (it != state.choices.end()) return {it->second, &state.workspaces};
    auto c = std::make_shared<const Choice>(resolve(state, p));
    state.choices.emplace(p, c);
    return {c, &state.workspaces};
  }
};

Library::Library(Options options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Library::~Library() = default;

void Library::matmul(const MatmulDesc& desc, int64_t m, int64_t n, int64_t k, float alpha,
                     const void* a, int64_t lda, const void* b, int64_t ldb, float beta, void* c,
                     int64_t ldc, Stream stream) {
  Problem p;
  p.types = desc.types;
  p.scaling = desc.scaling;
  p.op_a = desc.op_a;
  p.op_b = desc.op_b;
  p.m = m;
  p.n = n;
  p.k = k;
  p.lda = lda;
  p.ldb = ldb;
  p.ldc = ldc;
  p.align = alignment_class(p.types, a, b, c, lda, ldb, ldc);
  p.reads_c = beta != 0.0f;
  validate(p);
  GT_REQUIRE(a != nullptr, Errc::invalid_argument, "A is a null pointer");
  GT_REQUIRE(b != nullptr, Errc::invalid_argument, "B is a null pointer");
  GT_REQUIRE(c != nullptr, Errc::invalid_argument, "C is a null pointer");
  GT_REQUIRE(std::isfinite(alpha) && std::isfinite(beta), Errc::invalid_argument,
             "alpha and beta must be finite (got {} and {})", alpha, beta);
  const auto [choice, workspaces] = impl_->choice_for(p);
  const auto cu_stream = reinterpret_cast<CUstream>(stream);
  GemmOperands ops{CUdeviceptr(a), CUdeviceptr(b), CUdeviceptr(c), alpha, beta};
  workspaces->provide(cu_stream, choice->geometry, ops);
  choice->kernel->run(choice->geometry, p, ops, cu_stream);
}

Selection Library::select(const Problem& problem) {
  validate(problem);
  return impl_->choice_for(problem).first->selection;
}

void Library::reload() {
  std::lock_guard lock(impl_->mutex);
  for (auto& [ctx, state] : impl_->devices) state.choices.clear();
  impl_->db.reset();
  impl_->db_opened = false;
}

Library& default_library() {
  static Library library;
  return library;
}

}  // namespace gemmtune
