// The one place that launches kernels: helper kernels (launch_raw) and every family's kernel from
// its launch plan (Launcher::launch).
#include "launcher.hpp"

#include <algorithm>
#include <cstring>
#include <tuple>

#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/driver.hpp"

namespace gemmtune {
namespace {

// The driver's limit on a kernel's parameters in bytes (4 KB on every architecture before
// CUDA 12.1's larger limit, which not every driver has).
constexpr uint32_t kMaxArgsBytes = 4096;

bool tma_aligned(CUdeviceptr p, int64_t ld, DataType type) {
  return p % 16 == 0 && tma_ld_aligned(ld, type);
}

// How much of the L2 a TMA load pulls in around what it reads: rows that start on 128-byte lines
// take 256 bytes (the next k-block's half too), rows off the lines 128 (docs/PERF.md, 'TMA rows
// off 128-byte lines take a 128-byte L2 promotion').
CUtensorMapL2promotion l2_promotion(CUdeviceptr p, int64_t ld, DataType type) {
  const bool lines = p % 128 == 0 && (ld * element_bytes(type)) % 128 == 0;
  return lines ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B : CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
}

CUtensorMapDataType map_type(DataType type) {
  switch (type) {
    case DataType::f32:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    case DataType::f16:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case DataType::bf16:
      return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case DataType::e4m3:
    case DataType::e5m2:
      return CU_TENSOR_MAP_DATA_TYPE_UINT8;  // TMA moves bytes; wgmma reads them as float8
  }
  return CU_TENSOR_MAP_DATA_TYPE_UINT8;
}

CUtensorMapSwizzle map_swizzle(Swizzle swizzle) {
  switch (swizzle) {
    case Swizzle::none:
      return CU_TENSOR_MAP_SWIZZLE_NONE;
    case Swizzle::b32:
      return CU_TENSOR_MAP_SWIZZLE_32B;
    case Swizzle::b64:
      return CU_TENSOR_MAP_SWIZZLE_64B;
    case Swizzle::b128:
      return CU_TENSOR_MAP_SWIZZLE_128B;
  }
  return CU_TENSOR_MAP_SWIZZLE_NONE;
}

// Packed columns start on 128-byte lines, where TMA reads them fastest.
int64_t packed_ld(int64_t rows, int element_bytes) {
  const int64_t per_line = 128 / element_bytes;
  return (rows + per_line - 1) / per_line * per_line;
}

KernelSource pack_source() {
  return make_source("gemmtune_pack", "// operand packing for TMA\n#include \"pack.cuh\"\n");
}

// The grid's x extent of a persistent launch (persistent_grid).
uint32_t persistent_grid_x(const LaunchPlan& plan, uint32_t resident) {
  const uint32_t cluster = plan.cluster_size();
  uint32_t slots = plan.grid[0] / cluster;  // work units that run at once
  if (resident > 0) slots = std::min(slots, std::max(1u, resident / cluster));
  if (plan.work_units > 0 && slots > 0) {
    const uint32_t rounds = (plan.work_units + slots - 1) / slots;
    slots = (plan.work_units + rounds - 1) / rounds;
  }
  return std::max(1u, slots) * cluster;
}

void launch_with(CUfunction function, const LaunchPlan& plan, uint32_t grid_x, void* args,
                 CUstream stream) {
  LaunchConfig launch(plan, {grid_x, plan.grid[1], plan.grid[2]}, stream);
  void* params[] = {args};
  GT_CU(cuLaunchKernelEx(&launch.config, function, params, nullptr));
}

}  // namespace

LaunchConfig::LaunchConfig(const LaunchPlan& plan, const std::array<uint32_t, 3>& grid,
                           CUstream stream) {
  config.gridDimX = grid[0];
  config.gridDimY = grid[1];
  config.gridDimZ = grid[2];
  config.blockDimX = plan.block[0];
  config.blockDimY = plan.block[1];
  config.blockDimZ = plan.block[2];
  config.sharedMemBytes = plan.smem_bytes;
  config.hStream = stream;
  if (plan.cluster_size() > 1) {
    cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    cluster.value.clusterDim.x = plan.cluster[0];
    cluster.value.clusterDim.y = plan.cluster[1];
    cluster.value.clusterDim.z = plan.cluster[2];
    config.attrs = &cluster;
    config.numAttrs = 1;
  }
}

namespace {

// D's address: C's where the caller gave D no buffer of its own.
CUdeviceptr output_of(const GemmOperands& ops) {
  return ops.d != 0 ? ops.d : ops.c;
}

// A, B and the scales are packed where a required map cannot read them; C and D never are.
bool packable(Operand operand) {
  return operand == Operand::a || operand == Operand::b || is_scales(operand);
}

// What a map reads: the operand's address in the call, its stored rows and columns and leading
// dimension; the scales as one row (Operand), its leading dimension any multiple of 16 bytes.
struct MapSource {
  CUdeviceptr ptr;
  int64_t rows, cols, ld;
};
MapSource map_source(Operand operand, const Problem& p, const GemmOperands& ops) {
  switch (operand) {
    case Operand::a:
      return {ops.a, p.rows_a(), p.cols_a(), p.lda};
    case Operand::b:
      return {ops.b, p.rows_b(), p.cols_b(), p.ldb};
    case Operand::c:
      return {ops.c, p.output_rows(), p.n, p.ldc};
    case Operand::d:
      return {output_of(ops), p.output_rows(), p.n, p.ldc};
    case Operand::aux:
      return {ops.aux, p.output_rows(), p.n, p.ldc};
    case Operand::scale_a:
    case Operand::scale_b: {
      const bool a = operand == Operand::scale_a;
      const int64_t count = a ? scale_shape_a(p).count() : scale_shape_b(p).count();
      return {a ? ops.scale_a : ops.scale_b, count, 1, (count + 3) / 4 * 4};
    }
  }
  return {};
}

// Whether a required map's operand must be packed into an aligned copy first.
bool needs_packing(const TensorMapPlan& m, const Problem& p, const GemmOperands& ops) {
  if (m.made_flag != 0 || !packable(m.operand) || m.derived != Derived::none) return false;
  const MapSource source = map_source(m.operand, p, ops);
  return !tma_aligned(source.ptr, source.ld, m.type);
}

// The packing buffer of an operand: A's and B's slots 0 and 1 (derive's are 2-5), the scales' 6
// and 7.
int packing_slot(Operand operand) {
  return is_scales(operand) ? 6 + int(operand) - int(Operand::scale_a) : int(operand);
}

// A derived copy of A or B as stored: the operand's rows and columns, or swapped when transposed;
// ld: derived_ld of its rows.
struct DerivedShape {
  int64_t rows, cols, ld;
};
DerivedShape derived_shape(const Problem& p, const DerivedOperand& d) {
  const bool a = d.operand == Operand::a;
  int64_t rows = a ? p.rows_a() : p.rows_b(), cols = a ? p.cols_a() : p.cols_b();
  if (is_transposed(d.derived)) std::swap(rows, cols);
  return {rows, cols, derived_ld(rows)};
}

// Where the call's operands hold a derived copy.
template <class Ops>
auto& derived_pointer(Ops& ops, const DerivedOperand& d) {
  const bool low = is_low_part(d.derived);
  if (d.operand == Operand::a) return low ? ops.a_low : ops.a_derived;
  return low ? ops.b_low : ops.b_derived;
}

// Every copy the plan's kernel reads in place of A or B: through its maps, then through its core.
std::vector<DerivedOperand> derived_copies(const LaunchPlan& plan) {
  std::vector<DerivedOperand> copies;
  for (const TensorMapPlan& m : plan.maps)
    if (m.derived != Derived::none) copies.push_back({m.operand, m.derived});
  copies.insert(copies.end(), plan.derived_operands.begin(), plan.derived_operands.end());
  return copies;
}

}  // namespace

GemmCore core_of(const LaunchPlan& plan, const Problem& p, const GemmOperands& ops) {
  GT_REQUIRE(plan.reads_c || ops.beta == 0.0f, Errc::invalid_argument,
             "beta = {} on a kernel built for beta = 0 ({}): select a kernel for the problem with "
             "beta != 0",
             ops.beta, p.describe());
  GT_REQUIRE(p.scaling == Scaling::none || (ops.scale_a != 0 && ops.scale_b != 0),
             Errc::invalid_argument, "{} has scaling {} but the scales of {} are a null pointer",
             p.describe(), to_string(p.scaling), ops.scale_a == 0 ? "A" : "B");
  GT_REQUIRE(!p.grouped() || ops.group_ends != 0, Errc::invalid_argument,
             "{} is grouped but the group ends are a null pointer", p.describe());
  GT_REQUIRE(p.epilogue.bias == Bias::none || ops.bias != 0, Errc::invalid_argument,
             "{} adds a bias but the bias is a null pointer", p.describe());
  GT_REQUIRE(!p.epilogue.aux || ops.aux != 0, Errc::invalid_argument,
             "{} stores its pre-activation (aux) but that buffer is a null pointer", p.describe());
  GemmCore core{};
  core.a = ops.a;
  core.b = ops.b;
  core.c = ops.c;
  core.d = output_of(ops);
  core.lda = p.lda;
  core.ldb = p.ldb;
  core.ldc = p.ldc;
  core.m = int(p.m);
  core.n = int(p.n);
  core.k = int(p.k);
  core.alpha = ops.alpha;
  core.beta = ops.beta;
  core.workspace = ops.workspace;
  core.counters = ops.counters;
  core.scale_a = ops.scale_a;
  core.scale_b = ops.scale_b;
  core.group_ends = ops.group_ends;
  core.groups = int(p.groups);
  core.group_capacity = int(p.group_capacity());
  core.bias = ops.bias;
  core.aux = ops.aux;
  return core;
}

LaunchPlan persistent_grid(const LaunchPlan& plan, uint32_t resident) {
  LaunchPlan out = plan;
  out.grid[0] = persistent_grid_x(plan, resident);
  return out;
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

struct Launcher::MapKey {
  CUdeviceptr ptr;
  int64_t rows, cols, ld;
  uint32_t box0, box1;
  DataType type;
  Swizzle swizzle;
  // layer_stride > 0: a 3-D map over `layers` matrices, layer_stride elements apart, a box of
  // box2 of them
  int64_t layers = 1, layer_stride = 0;
  uint32_t box2 = 1;
  auto tie() const {
    return std::tie(ptr, rows, cols, ld, box0, box1, type, swizzle, layers, layer_stride, box2);
  }
  bool operator<(const MapKey& o) const { return tie() < o.tie(); }
};

// The operands of one launch as the kernel will read them: the call's, or packed copies.
struct Launcher::Operands {
  Problem problem;
  GemmOperands ops;
};

Launcher::Launcher(Compiler compiler, ArchInfo arch)
    : compiler_(std::move(compiler)), arch_(arch) {}
Launcher::~Launcher() = default;

// Encoding a map costs microseconds per call: maps are kept (the key is everything a map encodes).
GemmTensorMap Launcher::tensor_map(const MapKey& key) {
  std::lock_guard lock(maps_mutex_);
  if (auto it = maps_.find(key); it != maps_.end()) return it->second;
  if (maps_.size() >= 512) maps_.clear();  // a bound, not an LRU: re-encoding costs microseconds
  CUtensorMap map;
  const int bytes = element_bytes(key.type);
  const cuuint64_t dims[3] = {cuuint64_t(key.rows), cuuint64_t(key.cols), cuuint64_t(key.layers)};
  const cuuint64_t strides[2] = {cuuint64_t(key.ld * bytes), cuuint64_t(key.layer_stride * bytes)};
  const cuuint32_t box[3] = {key.box0, key.box1, key.box2};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const cuuint32_t rank = key.layer_stride > 0 ? 3 : 2;
  GT_CU(cuTensorMapEncodeTiled(&map, map_type(key.type), rank, reinterpret_cast<void*>(key.ptr),
                               dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                               map_swizzle(key.swizzle), l2_promotion(key.ptr, key.ld, key.type),
                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  GemmTensorMap out;
  static_assert(sizeof(GemmTensorMap) == sizeof(CUtensorMap));
  std::memcpy(&out, &map, sizeof(out));
  maps_.emplace(key, out);
  return out;
}

const LoadedKernel& Launcher::packer() {
  std::call_once(packer_once_, [&] {
    packer_compiled_ = compiler_.compile(pack_source(), arch_);
    packer_ = std::make_unique<LoadedKernel>(packer_compiled_, "gemmtune_pack", 0);
    deriver_ = std::make_unique<LoadedKernel>(packer_compiled_, "gemmtune_derive_f32", 0);
  });
  return *packer_;
}

// A packed, aligned copy of a stored rows x cols matrix, in stream order, in the stream's buffer
// for the operand. The buffers are kept: allocating per call cost the timed call tens of
// microseconds (docs/PERF.md, 'Packed copies live in kept buffers').
CUdeviceptr Launcher::pack(Operand operand, CUdeviceptr src, int64_t rows, int64_t cols, int64_t ld,
                           int64_t packed_ld, int element_bytes, CUstream stream) {
  const LoadedKernel& kernel = packer();
  const CUdeviceptr dst = packed_.at_least(stream, packing_slot(operand),
                                           uint64_t(packed_ld * cols * element_bytes), false);
  unsigned long long s = src, d = dst;
  long long src_ld = ld * element_bytes, dst_ld = packed_ld * element_bytes;
  long long row_bytes = rows * element_bytes, c = cols;  // 64-bit, as gemmtune_pack takes them
  void* params[] = {&s, &src_ld, &row_bytes, &c, &d, &dst_ld};
  const int64_t chunks = (row_bytes + 15) / 16 * cols;
  launch_raw(kernel.function(), uint32_t(std::clamp<int64_t>((chunks + 255) / 256, 1, 8 * 65535)),
             256, params, stream);
  return dst;
}

// A, B and the scales as required maps read them: an operand whose address or leading dimension
// is not 16-byte aligned is packed into an aligned copy first.
void Launcher::pack_unaligned(const LaunchPlan& plan, Operands& o, CUstream stream) {
  Problem& p = o.problem;
  for (const TensorMapPlan& m : plan.maps) {
    if (!needs_packing(m, p, o.ops)) continue;
    const int bytes = element_bytes(m.type);
    if (is_scales(m.operand)) {  // one row: only its address moves
      CUdeviceptr& ptr = m.operand == Operand::scale_a ? o.ops.scale_a : o.ops.scale_b;
      const MapSource source = map_source(m.operand, p, o.ops);
      ptr = pack(m.operand, ptr, source.rows, 1, source.rows, packed_ld(source.rows, bytes), bytes,
                 stream);
      continue;
    }
    const bool is_a = m.operand == Operand::a;
    CUdeviceptr& ptr = is_a ? o.ops.a : o.ops.b;
    int64_t& ld = is_a ? p.lda : p.ldb;
    // A grouped problem's A: its G matrices one after another, packed as one.
    const int64_t rows = is_a ? p.rows_a() : p.rows_b(),
                  cols = is_a ? p.cols_a_stored() : p.cols_b();
    const int64_t packed = packed_ld(rows, bytes);
    ptr = pack(m.operand, ptr, rows, cols, ld, packed, bytes, stream);
    ld = packed;
  }
}

// The copies the plan's maps read in place of A or B (TensorMapPlan::derived), in the stream's
// buffers for them (a slot per operand and part), from the operands as the call gives them.
void Launcher::derive(const LaunchPlan& plan, Operands& o, CUstream stream) {
  const Problem& p = o.problem;
  packer();
  for (const DerivedOperand& d : derived_copies(plan)) {
    const bool is_a = d.operand == Operand::a, low = is_low_part(d.derived);
    GT_REQUIRE(packable(d.operand) && d.derived != Derived::none &&
                   (is_a ? p.types.a : p.types.b) == DataType::f32 && !p.grouped(),
               Errc::internal, "a derived copy of operand {} ({})", int(d.operand), p.describe());
    const int64_t rows = is_a ? p.rows_a() : p.rows_b(), cols = is_a ? p.cols_a() : p.cols_b();
    const DerivedShape shape = derived_shape(p, d);
    const int slot = 2 + 2 * int(d.operand) + (low ? 1 : 0);
    const CUdeviceptr dst =
        packed_.at_least(stream, slot, uint64_t(shape.ld * shape.cols * 4), false);
    unsigned long long s = is_a ? o.ops.a : o.ops.b, dst_ptr = dst;
    long long src_ld = is_a ? p.lda : p.ldb, r = rows, c = cols, dst_ld = shape.ld;
    int transpose = is_transposed(d.derived) ? 1 : 0, low_part = low ? 1 : 0;
    void* params[] = {&s, &src_ld, &r, &c, &dst_ptr, &dst_ld, &transpose, &low_part};
    const int64_t blocks = transpose ? (rows + 31) / 32 * ((cols + 31) / 32) : (cols + 7) / 8;
    launch_raw(deriver_->function(), uint32_t(std::clamp<int64_t>(blocks, 1, 8 * 65535)), 256,
               params, stream);
    derived_pointer(o.ops, d) = dst;
  }
}

void Launcher::launch(const LoadedKernel& kernel, uint32_t resident, const LaunchPlan& plan,
                      const Problem& problem, const GemmOperands& operands, CUstream stream) {
  GT_REQUIRE((plan.workspace_bytes == 0 || operands.workspace != 0) &&
                 (plan.counter_bytes == 0 || operands.counters != 0),
             Errc::internal,
             "{} needs a workspace of {} bytes and {} bytes of counters, and got none",
             kernel.name(), plan.workspace_bytes, plan.counter_bytes);
  GT_REQUIRE(plan.args.bytes > 0 && plan.args.bytes <= kMaxArgsBytes, Errc::internal,
             "{}: an argument struct of {} bytes (1 to {} can be passed)", kernel.name(),
             plan.args.bytes, kMaxArgsBytes);
  Operands o{problem, operands};
  const bool packs = std::any_of(plan.maps.begin(), plan.maps.end(), [&](const TensorMapPlan& m) {
    return needs_packing(m, problem, operands);
  });
  const bool derives = !derived_copies(plan).empty();
  std::unique_lock<std::mutex> packing(packing_, std::defer_lock);
  if (packs || derives) packing.lock();
  if (packs) pack_unaligned(plan, o, stream);
  if (derives) derive(plan, o, stream);
  alignas(64) std::byte args[kMaxArgsBytes];
  fill_arguments(args, plan, o.problem, o.ops);
  launch_arguments(kernel, resident, plan, args, stream);
}

// A map over a copy the launch derived (derive()), as derived_shape() lays it out.
void Launcher::set_derived_map(std::byte* args, const TensorMapPlan& m, const Problem& p,
                               const GemmOperands& ops) {
  const DerivedOperand copy{m.operand, m.derived};
  const CUdeviceptr ptr = derived_pointer(ops, copy);
  GT_REQUIRE(ptr != 0, Errc::internal, "a map over a derived copy the launch did not make ({})",
             p.describe());
  const DerivedShape shape = derived_shape(p, copy);
  const MapKey key{ptr,        shape.rows, shape.cols, shape.ld,
                   m.box_rows, m.box_cols, m.type,     m.swizzle};
  const GemmTensorMap map = tensor_map(key);
  std::memcpy(args + m.offset, &map, sizeof(map));
}

// The core's pointer and leading dimension of an operand the kernel reads from its derived copy.
void Launcher::read_derived(GemmCore& core, const DerivedOperand& d, const Problem& p,
                            const GemmOperands& ops) {
  const CUdeviceptr ptr = derived_pointer(ops, d);
  GT_REQUIRE(ptr != 0, Errc::internal, "a kernel reads a derived copy the launch did not make ({})",
             p.describe());
  const int64_t ld = derived_shape(p, d).ld;
  if (d.operand == Operand::a)
    core.a = ptr, core.lda = ld;
  else
    core.b = ptr, core.ldb = ld;
}

void Launcher::fill_arguments(std::byte* args, const LaunchPlan& plan, const Problem& p,
                              const GemmOperands& ops) {
  std::memset(args, 0, plan.args.bytes);
  GemmCore core = core_of(plan, p, ops);
  for (const TensorMapPlan& m : plan.maps) {
    if (m.derived != Derived::none) {
      set_derived_map(args, m, p, ops);
      continue;
    }
    const auto [ptr, rows, cols, ld] = map_source(m.operand, p, ops);
    // An optional map only where its operand is aligned (C and D for TMA stores); the required ones
    // were packed where they were not.
    if (m.made_flag != 0 && !tma_aligned(ptr, ld, m.type)) continue;
    GT_REQUIRE(tma_aligned(ptr, ld, m.type), Errc::internal,
               "a tensor map over an operand that is not 16-byte aligned ({})", p.describe());
    MapKey key{ptr, rows, cols, ld, m.box_rows, m.box_cols, m.type, m.swizzle};
    if (m.per_group) {
      key.layers = p.groups;
      key.layer_stride = p.group_stride_a();
    }
    if (m.gate_layers) {
      // op(A)'s rows (K-major A: its stored columns) as D's rows of two layers, gate and up: the
      // halves, or every other row.
      const bool interleaved = p.epilogue.gate == Gate::interleaved;
      key.cols = p.output_rows();
      key.ld = interleaved ? 2 * p.lda : p.lda;
      key.layers = 2;
      key.layer_stride = interleaved ? p.lda : p.output_rows() * p.lda;
      key.box2 = 2;
    }
    const GemmTensorMap map = tensor_map(key);
    std::memcpy(args + m.offset, &map, sizeof(map));
    core.flags |= m.made_flag;
  }
  for (const DerivedOperand& d : plan.derived_operands) read_derived(core, d, p, ops);
  std::memcpy(args + plan.args.core, &core, sizeof(core));
  for (const ArgsBlock& block : plan.blocks)
    std::memcpy(args + block.offset, block.bytes.data(), block.bytes.size());
}

void Launcher::launch_arguments(const LoadedKernel& kernel, uint32_t resident,
                                const LaunchPlan& plan, const std::byte* args, CUstream stream) {
  launch_with(kernel.function(), plan,
              plan.persistent ? persistent_grid_x(plan, resident) : plan.grid[0],
              const_cast<std::byte*>(args), stream);
}

}  // namespace gemmtune
