// Launching TMA kernels (wgmma_sm90): tensor maps made through the Driver API and cached, and a
// packed copy of any operand TMA cannot describe (address or leading dimension not 16-byte
// aligned).
#include "tma_launcher.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/driver.hpp"

namespace gemmtune {
namespace {

bool tma_aligned(CUdeviceptr p, int64_t ld, DType dtype) {
  return p % 16 == 0 && (ld * dtype_size(dtype)) % 16 == 0;
}

// The box of one operand: K-major tiles are (64 K, rows); MN-major tiles are (64 rows, 64 K)
// boxes. Shared by a cluster of two, each CTA loads half (rows, or K).
std::pair<uint32_t, uint32_t> box_of(bool k_major, int64_t rows, bool shared) {
  if (k_major) return {64, uint32_t(shared ? rows / 2 : rows)};
  return {64, shared ? 32u : 64u};
}

KernelSource pack_source() {
  return make_source("gemmtune_pack16", "// operand packing for TMA\n#include \"pack.cuh\"\n");
}

}  // namespace

struct TmaLauncher::MapKey {
  CUdeviceptr ptr;
  int64_t rows, cols, ld;
  uint32_t box0, box1;
  DType dtype;
  auto tie() const { return std::tie(ptr, rows, cols, ld, box0, box1, dtype); }
  bool operator<(const MapKey& o) const { return tie() < o.tie(); }
};

TmaLauncher::TmaLauncher(Compiler compiler, ArchInfo arch) : compiler_(std::move(compiler)), arch_(arch) {}
TmaLauncher::~TmaLauncher() = default;

// Encoding a map costs microseconds per call: user operands' maps are kept (a workspace's
// address changes every call, so its maps are not).
GemmTensorMap TmaLauncher::tensor_map(const MapKey& key, bool cache) {
  std::lock_guard lock(mutex_);
  if (auto it = maps_.find(key); it != maps_.end()) return it->second;
  if (maps_.size() >= 512) maps_.clear();  // a bound, not an LRU: re-encoding costs microseconds
  CUtensorMap map;
  const cuuint64_t dims[2] = {cuuint64_t(key.rows), cuuint64_t(key.cols)};
  const cuuint64_t strides[1] = {cuuint64_t(key.ld * dtype_size(key.dtype))};
  const cuuint32_t box[2] = {key.box0, key.box1};
  const cuuint32_t element_strides[2] = {1, 1};
  const auto type = key.dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  GT_CU(cuTensorMapEncodeTiled(&map, type, 2, reinterpret_cast<void*>(key.ptr), dims, strides, box,
                               element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  GemmTensorMap out;
  std::memcpy(&out, &map, sizeof(out));
  if (cache) maps_.emplace(key, out);
  return out;
}

// A packed, aligned copy of a stored rows x cols matrix, in stream order; freed by release().
CUdeviceptr TmaLauncher::pack(CUdeviceptr src, int64_t rows, int64_t cols, int64_t ld, int64_t packed_ld,
                              CUstream stream) {
  {
    std::lock_guard lock(mutex_);
    if (!pack_) {
      pack_compiled_ = compiler_.compile(pack_source(), arch_);
      pack_ = std::make_unique<LoadedKernel>(pack_compiled_, "gemmtune_pack16", 0);
    }
  }
  CUdeviceptr dst = 0;
  GT_CU(cuMemAllocAsync(&dst, size_t(packed_ld * cols * 2), stream));
  unsigned long long s = src, d = dst;
  long long src_ld = ld, dst_ld = packed_ld;
  long long r = rows, c = cols;  // 64-bit, as gemmtune_pack16 takes them
  void* params[] = {&s, &src_ld, &r, &c, &d, &dst_ld};
  const int64_t chunks = (rows + 7) / 8 * cols;
  launch_raw(pack_->function(), uint32_t(std::clamp<int64_t>((chunks + 255) / 256, 1, 8 * 65535)), 256, params,
             stream);
  return dst;
}

void TmaLauncher::launch(const LoadedKernel& kernel, const KernelConfig& config, const LaunchGeometry& geometry,
                         const Problem& problem, const GemmOperands& operands, CUstream stream) {
  const bool cluster_m = config.at("CLUSTER") / 10 == 2, cluster_n = config.at("CLUSTER") % 10 == 2;
  GemmOperands ops = operands;
  Problem p = problem;
  CUdeviceptr workspace[2] = {0, 0};
  // A is stored rows_a x cols_a; B rows_b x cols_b. Pack what TMA cannot read in place.
  if (!tma_aligned(ops.a, p.lda, p.dtype)) {
    const int64_t ld = (p.rows_a() + 7) / 8 * 8;
    ops.a = workspace[0] = pack(ops.a, p.rows_a(), p.cols_a(), p.lda, ld, stream);
    p.lda = ld;
  }
  if (!tma_aligned(ops.b, p.ldb, p.dtype)) {
    const int64_t ld = (p.rows_b() + 7) / 8 * 8;
    ops.b = workspace[1] = pack(ops.b, p.rows_b(), p.cols_b(), p.ldb, ld, stream);
    p.ldb = ld;
  }
  GemmArgs args = plain_args(geometry, p, ops);
  // Q = op(A)^T is K-major when A is transposed (A stored K x M); P = op(B)^T when B is not.
  const bool a_kmajor = p.op_a == Op::T, b_kmajor = p.op_b == Op::N;
  const auto [a0, a1] = box_of(a_kmajor, config.at("BM"), cluster_n);
  const auto [b0, b1] = box_of(b_kmajor, config.at("BN"), cluster_m);
  args.map_a = tensor_map(MapKey{ops.a, p.rows_a(), p.cols_a(), p.lda, a0, a1, p.dtype}, !workspace[0]);
  args.map_b = tensor_map(MapKey{ops.b, p.rows_b(), p.cols_b(), p.ldb, b0, b1, p.dtype}, !workspace[1]);
  // The TMA-store epilogue writes C through map_c when C is aligned and never read (beta == 0).
  if (config.at("EPILOGUE") && ops.beta == 0.0f && tma_aligned(ops.c, p.ldc, p.dtype)) {
    const int64_t rows_per_warpgroup = config.at("BN") / config.at("WG");
    args.map_c = tensor_map(MapKey{ops.c, p.m, p.n, p.ldc, 64, uint32_t(rows_per_warpgroup), p.dtype}, true);
    args.flags |= GEMM_ARGS_MAP_C;
  }
  launch_kernel(kernel.function(), geometry, args, stream);
  for (CUdeviceptr w : workspace)
    if (w) GT_CU(cuMemFreeAsync(w, stream));
}

}  // namespace gemmtune
