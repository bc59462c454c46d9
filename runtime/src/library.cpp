// The public API: look the configuration up once per problem (database tiers, nearest tuned
// shape, built-in default), compile or load it once per context, then launch.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <unordered_map>

#include "databases.hpp"
#include "gemmtune/cache/nearest.hpp"
#include "gemmtune/cache/tuning_db.hpp"
#include "gemmtune/gemmtune.hpp"
#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/device.hpp"
#include "gemmtune/runtime/driver.hpp"
#include "gemmtune/runtime/kernel.hpp"
#include "gemmtune/runtime/shape_recorder.hpp"
#include "gemmtune/runtime/workspace.hpp"
#include "made_once.hpp"
#include "tuning_client.hpp"

namespace gemmtune {

const char* to_string(Source source) noexcept {
  switch (source) {
    case Source::tuned:
      return "tuned";
    case Source::other_version:
      return "other_version";
    case Source::sibling:
      return "sibling";
    case Source::nearest:
      return "nearest";
    case Source::fallback:
      return "fallback";
  }
  return "?";
}

namespace {

// What a problem resolved to: a ready kernel and its launch plan for that problem.
struct Choice {
  std::shared_ptr<const ReadyKernel> kernel;
  LaunchPlan plan;
  Selection selection;
  // Served untuned while the tuning daemon works on it (GEMMTUNE_TUNE=background): its calls,
  // counted, and the tuning client's epoch when it was chosen (a later one: choose again).
  CallCounter calls;
  uint64_t epoch = 0;
};

struct DeviceState {
  DeviceInfo info;
  // Each made once, by the first caller, outside every lock (made_once.hpp): a call of a prepared
  // problem never waits on another problem's compile.
  MadeOnce<Problem, Choice, ProblemHash> choices;
  MadeOnce<std::string, ReadyKernel> kernels;  // by kernel name
  Workspaces workspaces;  // split-K partial sums and counters, one buffer per stream
};

// Whether a stored best may be used at all: a registered family, and a valid point of its space
// for the problem it was tuned for. A row that is not (a database edited or written elsewhere) is
// skipped with a warning.
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

std::string sibling_note(const DeviceKey& tuned) {
  return fmt::format(
      "tuned on {} ({} SMs), a GPU of the same compute capability {}.{}; gemm-tune tunes it for "
      "this one",
      tuned.name, tuned.sms, tuned.cc / 10, tuned.cc % 10);
}

Source source_of(BestTier tier) {
  switch (tier) {
    case BestTier::tuned:
      return Source::tuned;
    case BestTier::other_version:
      return Source::other_version;
    case BestTier::sibling:
      return Source::sibling;
  }
  return Source::tuned;
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

// Whether work on the stream is being captured into a CUDA graph (an error counts as yes: a
// kernel is then never switched under a capture).
bool capturing(CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return cu::api().cuStreamIsCapturing(stream, &status) != CUDA_SUCCESS ||
         status != CU_STREAM_CAPTURE_STATUS_NONE;
}

double predicted_us(const KernelConfig& config, const Problem& p, const ArchInfo& arch) {
  return 1e3 * find_family(config.family).predicted_ms(config, p, arch);
}

}  // namespace

struct Library::Impl {
  Options options;
  std::vector<std::string> only_families;  // empty: every family
  const Precision f32_precision;           // of f32 calls whose descriptor sets none
  Compiler compiler;
  std::mutex devices_mutex;  // held to find a context's state, never across work
  std::map<CUcontext, std::unique_ptr<DeviceState>> devices;
  // The databases (overlay, base), used from one thread at a time (a query, never a compile,
  // under the lock); none with Options::use_database false.
  std::mutex db_mutex;
  std::optional<Databases> dbs;
  // GEMMTUNE_RECORD: the shapes file listing the problems served without a tuned kernel.
  const std::optional<std::string> record_file = env_var("GEMMTUNE_RECORD");
  TuningClient tuning;  // GEMMTUNE_TUNE

  explicit Impl(Options o)
      : options(std::move(o)),
        only_families(family_filter(options)),
        f32_precision(f32_precision_of(options)),
        compiler(
            true,
            options.cache_dir.empty()
                ? std::optional<std::filesystem::path>{}
                : std::optional<std::filesystem::path>{std::filesystem::path(options.cache_dir) /
                                                       "kernels"}),
        tuning(TuneSettings::of(options)) {
    if (options.use_database)
      dbs.emplace(
          options.db_path.empty() ? default_db_path() : std::filesystem::path(options.db_path),
          !options.overlay_db_path.empty()
              ? std::optional<std::filesystem::path>(options.overlay_db_path)
              : overlay_db_path());
  }

  DeviceState& device_state(CUcontext ctx) {
    std::lock_guard lock(devices_mutex);
    std::unique_ptr<DeviceState>& state = devices[ctx];
    if (!state) {
      state = std::make_unique<DeviceState>();
      state->info = query_device(current_device());
    }
    return *state;
  }

  bool usable(const KernelConfig& c, const Problem& p, const ArchInfo& arch) const {
    return allowed(only_families, c.family) && why_unusable(c, p, arch).empty();
  }

  // The database's answer, tier by tier: this GPU and software; this GPU under another driver
  // or NVRTC; another GPU of the same compute capability; the nearest tuned shape on this GPU.
  // Called with db_mutex held.
  std::optional<std::pair<KernelConfig, Selection>> from_database(Databases& tdb,
                                                                  const DeviceInfo& dev,
                                                                  const Problem& p) {
    auto trusted = [&](const BestRecord& b) {
      return trustworthy(b, dev.arch) && allowed(only_families, b.winner.config.family);
    };
    Selection sel;
    for (const TieredBest& row : tdb.bests_for(dev.key, p)) {
      if (!trusted(row.best)) continue;
      sel.source = source_of(row.tier);
      if (row.tier == BestTier::other_version) sel.note = versions_note(row.best.device, dev.key);
      if (row.tier == BestTier::sibling) sel.note = sibling_note(row.best.device);
      return std::pair{row.best.winner.config, sel};
    }
    const auto nearest =
        nearest_best(tdb.bests_like(dev.key, p), p, dev.arch,
                     [&](const BestRecord& b, const KernelConfig& adapted) {
                       return usable(adapted, p, dev.arch) && trustworthy(b, dev.arch);
                     });
    if (!nearest) return std::nullopt;
    sel.source = Source::nearest;
    sel.note = "tuned for " + nearest->best.problem.shape() + beta_note(p, nearest->best.problem);
    return std::pair{nearest->config, sel};
  }

  // The database's answer, else the untuned default (the best family's, generator/family.hpp).
  std::pair<KernelConfig, Selection> pick(const DeviceInfo& dev, const Problem& p) {
    auto families = families_for(p, dev.arch);
    std::erase_if(families, [&](const Family* f) { return !allowed(only_families, f->name()); });
    GT_REQUIRE(!families.empty(), Errc::unsupported, "no kernel family{} supports {} {} on {} ({})",
               only_families.empty() ? "" : " of GEMMTUNE_FAMILIES / Options::families",
               p.types.name(), p.layout(), dev.name, dev.arch.name());
    {
      std::lock_guard lock(db_mutex);
      if (dbs)
        if (auto found = from_database(*dbs, dev, p)) return *found;
    }
    Selection sel;
    sel.source = Source::fallback;
    sel.note = "no tuned kernel for this GPU, types and layout";
    return {untuned_default(families, p, dev.arch), sel};
  }

  std::shared_ptr<const ReadyKernel> ready(DeviceState& state, const KernelConfig& config,
                                           const Problem& p) {
    const std::string name = find_family(config.family).kernel_name(config);
    return state.kernels.get(name, [&] {
      return std::make_shared<const ReadyKernel>(
          prepare_kernel(compiler, config, p, state.info.arch));
    });
  }

  // The database's answer; with GEMMTUNE_TUNE=now, tuned first when it has none.
  std::pair<KernelConfig, Selection> pick_or_tune(const DeviceInfo& dev, const Problem& p) {
    auto picked = pick(dev, p);
    if (tuning.mode() != TuneMode::now || picked.second.source == Source::tuned) return picked;
    tuning.tune_now(dev, p, predicted_us(picked.first, p, dev.arch));
    reopen_database();
    return pick(dev, p);
  }

  // A database that did not exist when first looked for is looked for again.
  void reopen_database() {
    std::lock_guard lock(db_mutex);
    if (dbs) dbs->reopen_missing();
  }

  Choice resolve(DeviceState& state, const Problem& p) {
    const uint64_t epoch = tuning.epoch();
    auto [config, sel] = pick_or_tune(state.info, p);
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
    c.plan = kernel->family->plan(config, p, state.info.arch);
    c.selection = sel;
    c.selection.kernel = kernel->family->kernel_name(config);
    c.selection.family = config.family;
    c.selection.config = config.to_json();
    // Once per problem and context: choice_for() keeps what this returns.
    if (record_file && c.selection.source != Source::tuned) record_untuned(*record_file, p);
    if (tuning.mode() == TuneMode::background && c.selection.source != Source::tuned) {
      c.calls = tuning.queue(state.info.key, p, predicted_us(config, p, state.info.arch));
      c.epoch = epoch;
    }
    return c;
  }

  // The choice for the problem, and the workspaces of the current context. A problem served
  // untuned while the daemon tunes it is chosen again once results arrive, between calls and
  // never while `stream` is captured: a graph keeps the kernel it captured (kernels stay loaded).
  std::pair<std::shared_ptr<const Choice>, Workspaces*> choice_for(const Problem& p,
                                                                   CUstream stream, bool call) {
    DeviceState& state = device_state(ensure_context());
    const auto make = [&] { return std::make_shared<const Choice>(resolve(state, p)); };
    auto choice = state.choices.get(p, make);
    if (choice->calls) {
      if (call) choice->calls->fetch_add(1, std::memory_order_relaxed);
      if (choice->epoch != tuning.epoch() && !capturing(stream)) {
        reopen_database();
        state.choices.forget(p, choice);
        choice = state.choices.get(p, make);
      }
    }
    return {std::move(choice), &state.workspaces};
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
  p.reads_c = beta != 0.0f;
  // D of its own: C is read only with beta != 0, and both addresses set the alignment.
  void* d = desc.d != nullptr ? desc.d : c;
  const void* c_read = p.reads_c || desc.d == nullptr ? c : d;
  p.align = alignment_class(p.types, a, b, c, desc.d, p.reads_c, lda, ldb, ldc);
  p.groups = desc.groups;
  p.group_layout = desc.group_layout;
  p.accumulation = desc.accumulation;
  p.precision = precision_of(desc, impl_->f32_precision);
  p.epilogue = desc.epilogue;
  validate(p);
  GT_REQUIRE(a != nullptr, Errc::invalid_argument, "A is a null pointer");
  GT_REQUIRE(b != nullptr, Errc::invalid_argument, "B is a null pointer");
  GT_REQUIRE(c_read != nullptr, Errc::invalid_argument, "C is a null pointer");
  GT_REQUIRE(p.epilogue.bias == Bias::none || desc.bias != nullptr, Errc::invalid_argument,
             "epilogue {} needs its bias vector (bias)", p.epilogue.name());
  GT_REQUIRE(!p.epilogue.aux || desc.aux != nullptr, Errc::invalid_argument,
             "epilogue {} needs the pre-activation's buffer (aux)", p.epilogue.name());
  GT_REQUIRE(!p.epilogue.aux || reinterpret_cast<uintptr_t>(desc.aux) % 16 == 0,
             Errc::invalid_argument,
             "the pre-activation's buffer (aux) must be 16-byte aligned (got {})", desc.aux);
  GT_REQUIRE(p.scaling == Scaling::none || (desc.scale_a != nullptr && desc.scale_b != nullptr),
             Errc::invalid_argument, "scaling {} needs the scales of A and B (scale_a and scale_b)",
             to_string(p.scaling));
  GT_REQUIRE(!p.grouped() || desc.group_ends != nullptr, Errc::invalid_argument,
             "{} groups need their {} (group_ends)", p.groups,
             p.masked() ? "counts" : "end offsets");
  GT_REQUIRE(std::isfinite(alpha) && std::isfinite(beta), Errc::invalid_argument,
             "alpha and beta must be finite (got {} and {})", alpha, beta);
  const auto cu_stream = reinterpret_cast<CUstream>(stream);
  const auto [choice, workspaces] = impl_->choice_for(p, cu_stream, true);
  GemmOperands ops{CUdeviceptr(a), CUdeviceptr(b), CUdeviceptr(c_read), alpha, beta};
  ops.d = CUdeviceptr(d);
  ops.bias = CUdeviceptr(desc.bias);
  ops.aux = CUdeviceptr(p.epilogue.aux ? desc.aux : nullptr);
  ops.scale_a = CUdeviceptr(desc.scale_a);
  ops.scale_b = CUdeviceptr(desc.scale_b);
  ops.group_ends = CUdeviceptr(desc.group_ends);
  workspaces->provide(cu_stream, choice->plan, ops);
  choice->kernel->run(choice->plan, p, ops, cu_stream);
}

Selection Library::select(const Problem& problem) {
  validate(problem);
  return impl_->choice_for(problem, nullptr, false).first->selection;
}

Precision Library::f32_precision() const {
  return impl_->f32_precision;
}

void Library::reload() {
  {
    std::lock_guard lock(impl_->devices_mutex);
    for (auto& [ctx, state] : impl_->devices) state->choices.clear();
  }
  std::lock_guard lock(impl_->db_mutex);
  if (impl_->dbs) impl_->dbs->reset();
}

Precision f32_precision_of(const Options& options) {
  const bool given = !options.f32_precision.empty();
  const std::string setting =
      given ? options.f32_precision : env_var("GEMMTUNE_F32_PRECISION").value_or("exact");
  try {
    return parse_precision(setting);
  } catch (const Error&) {
    GT_THROW(Errc::invalid_argument, "{}={}: expected exact, tf32 or 3xtf32",
             given ? "Options::f32_precision" : "GEMMTUNE_F32_PRECISION", setting);
  }
}

Precision precision_of(const MatmulDesc& desc, Precision f32_default) {
  if (desc.precision) return *desc.precision;
  return desc.types == DataTypes::uniform(DataType::f32) ? f32_default : Precision::exact;
}

Library& default_library() {
  static Library library;
  return library;
}

}  // namespace gemmtune
