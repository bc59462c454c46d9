#include "gemmtune/runtime/kernel.hpp"

#include <algorithm>
#include <cstddef>
#include <map>
#include <mutex>

#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/driver.hpp"
#include "launcher.hpp"
#include "raster.h"

namespace gemmtune {

// The host must see GemmArgs exactly as NVRTC does (templates/gemm_args.h).
static_assert(sizeof(GemmTensorMap) == 128 && alignof(GemmTensorMap) == 64);
static_assert(sizeof(GemmTensorMap) == sizeof(CUtensorMap));
static_assert(offsetof(GemmArgs, a) == 384 && offsetof(GemmArgs, m) == 432 &&
              offsetof(GemmArgs, workspace) == 464 && offsetof(GemmArgs, counters) == 472 &&
              offsetof(GemmArgs, divisors) == 480);
static_assert(sizeof(GemmArgs) == 512);

LoadedKernel::LoadedKernel(const CompiledKernel& compiled, uint32_t dynamic_smem)
    : LoadedKernel(compiled, compiled.name, dynamic_smem) {}

LoadedKernel::LoadedKernel(const CompiledKernel& compiled, std::string entry, uint32_t dynamic_smem)
    : name_(std::move(entry)) {
  GT_CU(cuModuleLoadData(&module_, compiled.cubin.data()));
  const CUresult r = cu::api().cuModuleGetFunction(&function_, module_, name_.c_str());
  if (r != CUDA_SUCCESS) {
    cu::api().cuModuleUnload(module_);
    cu::throw_cu(r, "cuModuleGetFunction", __FILE__, __LINE__);
  }
  if (dynamic_smem > 48 * 1024)
    GT_CU(cuFuncSetAttribute(function_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                             int(dynamic_smem)));
}

LoadedKernel::~LoadedKernel() {
  if (module_) cu::api().cuModuleUnload(module_);
}

int LoadedKernel::occupancy(const LaunchGeometry& g) const {
  const uint32_t threads = g.block[0] * g.block[1] * g.block[2];
  const uint32_t cluster = g.cluster[0] * g.cluster[1] * g.cluster[2];
  if (cluster > 1) {
    CUlaunchConfig cfg{};
    cfg.gridDimX = g.cluster[0];
    cfg.gridDimY = g.cluster[1];
    cfg.gridDimZ = g.cluster[2];
    cfg.blockDimX = g.block[0];
    cfg.blockDimY = g.block[1];
    cfg.blockDimZ = g.block[2];
    cfg.sharedMemBytes = g.smem_bytes;
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = g.cluster[0];
    attr.value.clusterDim.y = g.cluster[1];
    attr.value.clusterDim.z = g.cluster[2];
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    int clusters = 0;
    if (cu::api().cuOccupancyMaxActiveClusters(&clusters, function_, &cfg) != CUDA_SUCCESS)
      return 0;
    return clusters;
  }
  int blocks = 0;
  GT_CU(
      cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, function_, int(threads), g.smem_bytes));
  return blocks;
}

uint32_t LoadedKernel::resident_ctas(const LaunchGeometry& g, int sms) const {
  const uint32_t cluster = g.cluster[0] * g.cluster[1] * g.cluster[2];
  const int n = occupancy(g);  // clusters on the GPU, or blocks per SM
  return cluster > 1 ? uint32_t(n) * cluster : uint32_t(n) * uint32_t(sms);
}

GemmArgs plain_args(const LaunchGeometry& g, const Problem& p, const GemmOperands& ops) {
  GT_REQUIRE(g.reads_c || ops.beta == 0.0f, Errc::invalid_argument,
             "beta = {} on a kernel built for beta = 0 ({}): select a kernel for the problem with "
             "beta != 0",
             ops.beta, p.describe());
  GemmArgs args{};
  args.a = ops.a;
  args.b = ops.b;
  args.c = ops.c;
  args.lda = p.lda;
  args.ldb = p.ldb;
  args.ldc = p.ldc;
  args.m = int(p.m);
  args.n = int(p.n);
  args.k = int(p.k);
  args.alpha = ops.alpha;
  args.beta = ops.beta;
  args.tiles_m = int(g.tiles_m);
  args.tiles_n = int(g.tiles_n);
  args.workspace = ops.workspace;
  args.counters = ops.counters;
  for (int i = 0; i < 2; ++i) args.divisors[i] = make_divisor(g.divisors[i]);
  return args;
}

void launch_raw(CUfunction function, uint32_t grid, uint32_t block, void** params,
                CUstream stream) {
  CUlaunchConfig cfg{};
  cfg.gridDimX = grid;
  cfg.gridDimY = 1;
  cfg.gridDimZ = 1;
  cfg.blockDimX = block;
  cfg.blockDimY = 1;
  cfg.blockDimZ = 1;
  cfg.hStream = stream;
  GT_CU(cuLaunchKernelEx(&cfg, function, params, nullptr));
}

void launch_kernel(CUfunction function, const LaunchGeometry& g, const GemmArgs& args,
                   CUstream stream) {
  CUlaunchConfig cfg{};
  cfg.gridDimX = g.grid[0];
  cfg.gridDimY = g.grid[1];
  cfg.gridDimZ = g.grid[2];
  cfg.blockDimX = g.block[0];
  cfg.blockDimY = g.block[1];
  cfg.blockDimZ = g.block[2];
  cfg.sharedMemBytes = g.smem_bytes;
  cfg.hStream = stream;
  CUlaunchAttribute attr{};
  if (g.cluster[0] * g.cluster[1] * g.cluster[2] > 1) {
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = g.cluster[0];
    attr.value.clusterDim.y = g.cluster[1];
    attr.value.clusterDim.z = g.cluster[2];
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
  }
  void* params[] = {const_cast<GemmArgs*>(&args)};
  GT_CU(cuLaunchKernelEx(&cfg, function, params, nullptr));
}

LaunchGeometry persistent_grid(const LaunchGeometry& g, uint32_t resident) {
  LaunchGeometry out = g;
  const uint32_t cluster = g.cluster[0] * g.cluster[1] * g.cluster[2];
  uint32_t slots = g.grid[0] / cluster;  // work units that run at once
  if (resident > 0) slots = std::min(slots, std::max(1u, resident / cluster));
  if (g.work_units > 0 && slots > 0) {
    const uint32_t rounds = (g.work_units + slots - 1) / slots;
    slots = (g.work_units + rounds - 1) / rounds;
  }
  out.grid[0] = std::max(1u, slots) * cluster;
  return out;
}

void ReadyKernel::run(const LaunchGeometry& g, const Problem& problem, const GemmOperands& operands,
                      CUstream stream) const {
  if (g.persistent) {
    launcher->launch(*loaded, persistent_grid(g, resident_ctas), problem, operands, stream);
    return;
  }
  launcher->launch(*loaded, g, problem, operands, stream);
}

namespace {

// The current context's launcher, shared by every kernel prepared in it: one set of tensor maps,
// packing kernel and packed copies (buffers kept per stream) serves them all, so that what it
// keeps does not grow with the number of kernels. It lives while a kernel of the context holds it
// (contexts by their unique id: an address can come back for another context).
std::shared_ptr<Launcher> context_launcher(const Compiler& compiler, const ArchInfo& arch) {
  CUcontext context = nullptr;
  GT_CU(cuCtxGetCurrent(&context));
  unsigned long long id = 0;
  GT_CU(cuCtxGetId(context, &id));
  static std::mutex mutex;
  static std::map<unsigned long long, std::weak_ptr<Launcher>> launchers;
  std::lock_guard lock(mutex);
  std::weak_ptr<Launcher>& kept = launchers[id];
  if (auto launcher = kept.lock()) return launcher;
  auto launcher = std::make_shared<Launcher>(compiler, arch);
  kept = launcher;
  return launcher;
}

}  // namespace

ReadyKernel prepare_kernel(const Compiler& compiler, const KernelConfig& config,
                           const Problem& problem, const ArchInfo& arch) {
  ReadyKernel k;
  k.family = &find_family(config.family);
  k.config = config;
  k.geometry = k.family->geometry(config, problem, arch);
  k.compiled = compiler.compile(emit_source(*k.family, config), arch);
  k.loaded = std::make_shared<LoadedKernel>(k.compiled, k.geometry.smem_bytes);
  k.launcher = context_launcher(compiler, arch);
  if (k.geometry.persistent) k.resident_ctas = k.loaded->resident_ctas(k.geometry, arch.sms);
  return k;
}

}  // namespace gemmtune
