#include "gemmtune/runtime/kernel.hpp"

#include <algorithm>
#include <cstddef>
#include <map>
#include <mutex>

#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/driver.hpp"
#include "launcher.hpp"

namespace gemmtune {

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

int LoadedKernel::occupancy(const LaunchPlan& g) const {
  if (g.cluster_size() > 1) {
    // Clusters resident on the whole GPU: asked with a grid of one cluster.
    const LaunchConfig launch(g, g.cluster, nullptr);
    int clusters = 0;
    if (cu::api().cuOccupancyMaxActiveClusters(&clusters, function_, &launch.config) !=
        CUDA_SUCCESS)
      return 0;
    return clusters;
  }
  const uint32_t threads = g.block[0] * g.block[1] * g.block[2];
  int blocks = 0;
  GT_CU(
      cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, function_, int(threads), g.smem_bytes));
  return blocks;
}

uint32_t LoadedKernel::resident_ctas(const LaunchPlan& g, int sms) const {
  const uint32_t cluster = g.cluster_size();
  const int n = occupancy(g);  // clusters on the GPU, or blocks per SM
  return cluster > 1 ? uint32_t(n) * cluster : uint32_t(n) * uint32_t(sms);
}

void ReadyKernel::run(const LaunchPlan& p, const Problem& problem, const GemmOperands& operands,
                      CUstream stream) const {
  launcher->launch(*loaded, resident_ctas, p, problem, operands, stream);
}

std::vector<std::byte> ReadyKernel::arguments(const LaunchPlan& p, const Problem& problem,
                                              const GemmOperands& operands) const {
  std::vector<std::byte> bytes(p.args.bytes);
  launcher->fill_arguments(bytes.data(), p, problem, operands);
  return bytes;
}

void ReadyKernel::launch_bare(const LaunchPlan& p, const std::vector<std::byte>& arguments,
                              CUstream stream) const {
  Launcher::launch_arguments(*loaded, resident_ctas, p, arguments.data(), stream);
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
  k.plan = k.family->plan(config, problem, arch);
  k.compiled = compiler.compile(emit_source(*k.family, config, arch), arch);
  k.loaded = std::make_shared<LoadedKernel>(k.compiled, k.plan.smem_bytes);
  k.launcher = context_launcher(compiler, arch);
  if (k.plan.persistent) k.resident_ctas = k.loaded->resident_ctas(k.plan, arch.sms);
  return k;
}

}  // namespace gemmtune
