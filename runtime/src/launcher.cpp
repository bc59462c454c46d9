// Launching any family's kernel from its launch plan: tensor maps made through the Driver API and
// cached, a packed copy of any operand TMA cannot describe (address or leading dimension not
// 16-byte aligned) in a buffer kept per stream, the workspace.
#include "launcher.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/driver.hpp"

namespace gemmtune {
namespace {

bool tma_aligned(CUdeviceptr p, int64_t ld, DataType type) {
  return p % 16 == 0 && tma_ld_aligned(ld, type);
}

// How much of the L2 a TMA load pulls in around what it reads. Rows that start on 128-byte
// lines take 256 bytes (the next k-block's half too); rows off the lines take 128: with 256,
// bf16 nn 2500x3500x4500 (rows of 5000 and 9000 bytes) ran at 1.93x cuBLAS against 2.21x, and
// tn 1000x3000x5000 (rows of 10000 bytes) at 0.69x against 0.72x, while aligned problems lose
// 1-3% with 128 (H100, docs/PERF.md).
CUtensorMapL2promotion l2_promotion(CUdeviceptr p, int64_t ld, DataType type) {
  const bool lines = p % 128 == 0 && (ld * element_bytes(type)) % 128 == 0;
  return lines ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B : CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
}

// Packed rows start on 128-byte lines (64 values), where TMA reads them fastest.
int64_t packed_ld(int64_t rows) {
  return (rows + 63) / 64 * 64;
}

KernelSource pack_source() {
  return make_source("gemmtune_pack16", "// operand packing for TMA\n#include \"pack.cuh\"\n");
}

}  // namespace

struct Launcher::MapKey {
  CUdeviceptr ptr;
  int64_t rows, cols, ld;
  uint32_t box0, box1;
  DataType type;
  auto tie() const { return std::tie(ptr, rows, cols, ld, box0, box1, type); }
  bool operator<(const MapKey& o) const { return tie() < o.tie(); }
};

Launcher::Launcher(Compiler compiler, ArchInfo arch)
    : compiler_(std::move(compiler)), arch_(arch) {}
Launcher::~Launcher() = default;

// Encoding a map costs microseconds per call: maps are kept (the key is everything a map encodes).
GemmTensorMap Launcher::tensor_map(const MapKey& key) {
  std::lock_guard lock(mutex_);
  if (auto it = maps_.find(key); it != maps_.end()) return it->second;
  if (maps_.size() >= 512) maps_.clear();  // a bound, not an LRU: re-encoding costs microseconds
  CUtensorMap map;
  const cuuint64_t dims[2] = {cuuint64_t(key.rows), cuuint64_t(key.cols)};
  const cuuint64_t strides[1] = {cuuint64_t(key.ld * element_bytes(key.type))};
  const cuuint32_t box[2] = {key.box0, key.box1};
  const cuuint32_t element_strides[2] = {1, 1};
  const auto type = key.type == DataType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                               : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  GT_CU(cuTensorMapEncodeTiled(&map, type, 2, reinterpret_cast<void*>(key.ptr), dims, strides, box,
                               element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                               CU_TENSOR_MAP_SWIZZLE_128B, l2_promotion(key.ptr, key.ld, key.type),
                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  GemmTensorMap out;
  std::memcpy(&out, &map, sizeof(out));
  maps_.emplace(key, out);
  return out;
}

// A packed, aligned copy of a stored rows x cols matrix, in stream order, in the stream's buffer
// for the operand. The buffers are kept: allocating per call cost the timed call tens of
// microseconds, and more at random (the memory pool gives freed memory back at each
// synchronization; bf16 nn 2500x3500x4500, docs/PERF.md).
CUdeviceptr Launcher::pack(Operand operand, CUdeviceptr src, int64_t rows, int64_t cols, int64_t ld,
                           int64_t packed_ld, CUstream stream) {
  {
    std::lock_guard lock(mutex_);
    if (!pack_) {
      pack_compiled_ = compiler_.compile(pack_source(), arch_);
      pack_ = std::make_unique<LoadedKernel>(pack_compiled_, "gemmtune_pack16", 0);
    }
  }
  const CUdeviceptr dst =
      packed_.at_least(stream, int(operand), uint64_t(packed_ld * cols * 2), false);
  unsigned long long s = src, d = dst;
  long long src_ld = ld, dst_ld = packed_ld;
  long long r = rows, c = cols;  // 64-bit, as gemmtune_pack16 takes them
  void* params[] = {&s, &src_ld, &r, &c, &d, &dst_ld};
  const int64_t chunks = (rows + 7) / 8 * cols;
  launch_raw(pack_->function(), uint32_t(std::clamp<int64_t>((chunks + 255) / 256, 1, 8 * 65535)),
             256, params, stream);
  return dst;
}

void Launcher::launch(const LoadedKernel& kernel, const LaunchGeometry& geometry,
                      const Problem& problem, const GemmOperands& operands, CUstream stream) {
  GT_REQUIRE((geometry.workspace_bytes == 0 || operands.workspace != 0) &&
                 (geometry.counter_bytes == 0 || operands.counters != 0),
             Errc::internal,
             "{} needs a workspace of {} bytes and {} bytes of counters, and got none",
             kernel.name(), geometry.workspace_bytes, geometry.counter_bytes);
  GemmOperands ops = operands;
  Problem p = problem;
  // A is stored rows_a x cols_a; B rows_b x cols_b. Pack what TMA cannot read in place.
  const TensorMapNeed &need_a = geometry.map(Operand::a), &need_b = geometry.map(Operand::b);
  const bool pack_a = need_a.needed && !tma_aligned(ops.a, p.lda, p.types.a);
  const bool pack_b = need_b.needed && !tma_aligned(ops.b, p.ldb, p.types.b);
  std::unique_lock<std::mutex> packing(packing_, std::defer_lock);
  if (pack_a || pack_b) packing.lock();
  if (pack_a) {
    const int64_t ld = packed_ld(p.rows_a());
    ops.a = pack(Operand::a, ops.a, p.rows_a(), p.cols_a(), p.lda, ld, stream);
    p.lda = ld;
  }
  if (pack_b) {
    const int64_t ld = packed_ld(p.rows_b());
    ops.b = pack(Operand::b, ops.b, p.rows_b(), p.cols_b(), p.ldb, ld, stream);
    p.ldb = ld;
  }
  GemmArgs args = plain_args(geometry, p, ops);
  if (need_a.needed)
    args.map_a = tensor_map(
        MapKey{ops.a, p.rows_a(), p.cols_a(), p.lda, need_a.box_rows, need_a.box_cols, p.types.a});
  if (need_b.needed)
    args.map_b = tensor_map(
        MapKey{ops.b, p.rows_b(), p.cols_b(), p.ldb, need_b.box_rows, need_b.box_cols, p.types.b});
  // TMA stores write C (and with beta != 0 TMA loads read it) through map_c when C is aligned.
  const TensorMapNeed& need_c = geometry.map(Operand::c);
  if (need_c.needed && tma_aligned(ops.c, p.ldc, p.types.c)) {
    args.map_c =
        tensor_map(MapKey{ops.c, p.m, p.n, p.ldc, need_c.box_rows, need_c.box_cols, p.types.c});
    args.flags |= GEMM_ARGS_MAP_C;
  }
  launch_kernel(kernel.function(), geometry, args, stream);
}

}  // namespace gemmtune
