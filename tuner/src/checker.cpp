#include "gemmtune/tuner/checker.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>

#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/driver.hpp"

namespace gemmtune {
namespace {

constexpr uint32_t kBlock = 256;

uint32_t blocks_for(int64_t count) {
  return uint32_t(std::clamp<int64_t>((count + kBlock - 1) / kBlock, 1, 65535));
}

int64_t stored_elements(int64_t ld, int64_t cols) {
  return ld * cols;
}

KernelSource testing_source() {
  return make_source("gemmtune_testing", "// verification kernels\n#include \"testing.cuh\"\n");
}

}  // namespace

CheckArgs check_args(const ProblemData& d, float alpha, float beta, bool pre_activation) {
  const Problem& p = d.problem;
  CheckArgs a{};
  a.a = d.a.ptr();
  a.b = d.b.ptr();
  a.c_init = d.c_init.ptr();
  a.out = d.c.ptr();
  a.lda = p.lda;
  a.ldb = p.ldb;
  a.ldc = p.ldc;
  a.m = int(p.m);
  a.n = int(p.n);
  a.k = int(p.k);
  a.op_a = p.op_a == Op::T;
  a.op_b = p.op_b == Op::T;
  a.type_a = int(p.types.a);
  a.type_b = int(p.types.b);
  a.type_c = int(p.types.c);
  a.alpha = alpha;
  a.beta = beta;
  a.tolerance = float(tolerance(p));
  a.scale_a = d.scale_a.ptr();
  a.scale_b = d.scale_b.ptr();
  a.scaling = int(p.scaling);
  a.a_blocks = int(scale_shape_a(p).rows);
  a.group_ends = d.group_ends.ptr();
  a.groups = int(p.groups);
  a.group_capacity = int(p.group_capacity());
  a.bias = d.bias.ptr();
  a.bias_kind = int(p.epilogue.bias);
  a.activation = int(p.epilogue.activation);
  a.gate = int(p.epilogue.gate);
  a.out_rows = int(p.output_rows());
  if (pre_activation) {
    a.out = d.aux.ptr();
    a.activation = int(Activation::identity);
  }
  return a;
}

double tolerance(const DataTypes& types) {
  // The inputs are exact in the reference (it reads the stored values); what an honest kernel
  // adds is its f32 accumulation and the rounding of its output.
  switch (types.d) {
    case DataType::f32:
      return 1e-4;
    case DataType::f16:
      return 4e-3;  // output rounding alone: 2^-11 of |ref|
    case DataType::bf16:
      return 1e-2;  // output rounding alone: 2^-8 of |ref|
    case DataType::e4m3:
    case DataType::e5m2:
      break;
  }
  GT_THROW(Errc::unsupported, "the verifier has no tolerance for {} outputs", to_string(types.d));
}

double tolerance(const Problem& p) {
  // tf32 keeps 10 of f32's 23 bits of mantissa, and wgmma truncates: each operand loses up to
  // 2^-10 of itself, and the products' losses add up against the l2 norm of the products (the
  // check's scale): allowed 2^-8. 3xTF32 keeps 21 bits (templates/pack.cuh, tf32_low) and meets
  // the exact path's tolerance, which the tf32 error is far above: a kernel that skips the small
  // products fails.
  if (p.precision == Precision::tf32) return 0x1p-8;
  if (element_bytes(p.types.a) != 1) return tolerance(p.types);
  // wgmma's float8 accumulator keeps about 14 bits of mantissa (DeepSeek-V3's report; the
  // reason for promotion), so a float8 kernel errs beyond its output's rounding. A promoted
  // partial sum takes at most 16 steps of 32 K (4 k-blocks): measured up to 2^-12.8 of the
  // reference's scale a step there (f32 output, H100), allowed 2^-12. Fast accumulation keeps
  // one sum for all of K, whose losses partly cancel (2^-15.9 a step at K = 16384, bf16 output):
  // allowed 2^-14 a step more. A skipped 128-deep K block (sqrt(128 / K) of the scale) stays above
  // that up to K of about 28000 with a bf16 output.
  double allowed = tolerance(p.types) + 16 * 0x1p-12;
  if (p.fast_accumulation()) allowed += double((p.k + 31) / 32) * 0x1p-14;
  return allowed;
}

namespace {

// The helper kernels of testing.cuh read and write every type of data_types.h.
void check_helper_type(DataType type) {
  GT_REQUIRE(int(type) >= 0 && int(type) < GEMMTUNE_TYPE_COUNT, Errc::unsupported,
             "the verifier has no data of type code {}", int(type));
}

}  // namespace

Checker::Checker(const Compiler& compiler, const ArchInfo& arch)
    : compiled_(compiler.compile(testing_source(), arch)), scratch_(64) {
  fill_ = std::make_unique<LoadedKernel>(compiled_, "gemmtune_fill_normal", 0);
  fill_scales_ = std::make_unique<LoadedKernel>(compiled_, "gemmtune_fill_scales", 0);
  reference_ = std::make_unique<LoadedKernel>(compiled_, "gemmtune_reference", 0);
  check_ = std::make_unique<LoadedKernel>(compiled_, "gemmtune_check", 0);
  nonfinite_ = std::make_unique<LoadedKernel>(compiled_, "gemmtune_count_nonfinite", 0);
}

Checker::~Checker() = default;

void Checker::fill_normal(CUdeviceptr p, int64_t count, DataType type, uint64_t seed, float scale,
                          CUstream stream) const {
  check_helper_type(type);
  unsigned long long ptr = p;
  long long n = count;
  int code = int(type);
  unsigned long long s = seed;
  void* params[] = {&ptr, &n, &code, &s, &scale};
  launch_raw(fill_->function(), blocks_for(count), kBlock, params, stream);
}

void Checker::fill_scales(CUdeviceptr p, int64_t count, uint64_t seed, DataType output,
                          CUstream stream) const {
  unsigned long long ptr = p, s = seed;
  long long n = count;
  // Four orders of magnitude per operand; two and a half where the output is f16, whose 65504
  // the products of the largest scales (2^16) with sums of a few tens would overflow.
  int lowest = output == DataType::f16 ? -4 : -7, octaves = output == DataType::f16 ? 8 : 15;
  void* params[] = {&ptr, &n, &s, &lowest, &octaves};
  launch_raw(fill_scales_->function(), blocks_for(count), kBlock, params, stream);
}

void Checker::poison(CUdeviceptr p, int64_t count, DataType type, CUstream stream) const {
  check_helper_type(type);
  if (type == DataType::f32)
    GT_CU(cuMemsetD32Async(p, 0x7fc00000u, size_t(count), stream));
  else
    GT_CU(cuMemsetD16Async(p, type == DataType::f16 ? 0x7e00 : 0x7fc0, size_t(count), stream));
}

void Checker::reference(const CheckArgs& args, CUstream stream) const {
  CheckArgs a = args;
  void* params[] = {&a};
  launch_raw(reference_->function(), uint32_t((a.points + 127) / 128), 128, params, stream);
}

Verdict Checker::compare(CheckArgs args, CUstream stream) const {
  args.max_error = scratch_.ptr();
  args.bad = scratch_.ptr() + 4;
  GT_CU(cuMemsetD32Async(scratch_.ptr(), 0, 2, stream));
  void* params[] = {&args};
  launch_raw(check_->function(), uint32_t((args.points + kBlock - 1) / kBlock), kBlock, params,
             stream);
  uint32_t host[2] = {};
  GT_CU(cuStreamSynchronize(stream));
  GT_CU(cuMemcpyDtoH(host, scratch_.ptr(), sizeof(host)));
  Verdict v;
  float max_error;
  std::memcpy(&max_error, &host[0], sizeof(float));
  v.max_error = max_error;
  v.bad = host[1];
  v.points = args.points;
  v.ok = v.bad == 0;
  return v;
}

int64_t Checker::count_nonfinite(CUdeviceptr p, int64_t ld, int64_t m, int64_t n, DataType type,
                                 CUstream stream) const {
  const CUdeviceptr counter = scratch_.ptr() + 8;
  GT_CU(cuMemsetD32Async(counter, 0, 1, stream));
  unsigned long long ptr = p, cnt = counter;
  long long ld_ = ld;
  int m_ = int(m), n_ = int(n), code = int(type);
  void* params[] = {&ptr, &ld_, &m_, &n_, &code, &cnt};
  launch_raw(nonfinite_->function(), blocks_for(m * n), kBlock, params, stream);
  uint32_t host = 0;
  GT_CU(cuStreamSynchronize(stream));
  GT_CU(cuMemcpyDtoH(&host, counter, sizeof(host)));
  return host;
}

namespace {

// A masked problem's counts: the groups' sizes of a contiguous routing of half its columns, each
// cut to the capacity (a decode batch seldom fills every slot); ragged, anything from empty to
// full.
std::vector<int32_t> group_counts_of(const Problem& p, Routing routing, uint64_t seed) {
  const int64_t capacity = p.group_capacity();
  std::vector<int32_t> counts(static_cast<size_t>(p.groups));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> any(0, capacity);
  if (routing == Routing::ragged) {
    for (auto& c : counts) c = int32_t(any(rng));
    return counts;
  }
  Problem half = p;
  half.group_layout = GroupLayout::contiguous;
  half.n = std::max<int64_t>(1, p.n / 2);
  const std::vector<int32_t> ends = group_ends_of(half, routing, seed);
  for (size_t g = 0; g < counts.size(); ++g)
    counts[g] = int32_t(std::min<int64_t>(capacity, ends[g] - (g > 0 ? ends[g - 1] : 0)));
  return counts;
}

}  // namespace

int64_t routing_granule(const Problem& p) {
  const bool fp8 = element_bytes(p.types.a) == 1;
  return fp8 && p.n % 4 == 0 ? 4 : 1;
}

std::vector<int32_t> group_ends_of(const Problem& p, Routing routing, uint64_t seed) {
  if (p.masked()) return group_counts_of(p, routing, seed);
  const int64_t groups = p.group_count();
  std::mt19937_64 rng(seed);
  std::vector<int64_t> sizes(static_cast<size_t>(groups), 0);
  const int64_t granule = routing_granule(p);
  int64_t routed = 0;
  if (routing == Routing::skewed && groups > 1) {
    const int64_t ten_means = 10 * ((p.n + groups - 1) / groups);
    sizes[0] = std::min(p.n, (ten_means + granule - 1) / granule * granule);
    routed = sizes[0];
  }
  if (routing == Routing::ragged) {
    std::uniform_int_distribution<int64_t> cut(0, p.n);
    std::vector<int64_t> cuts(static_cast<size_t>(groups - 1));
    for (auto& c : cuts) c = cut(rng);
    cuts.push_back(p.n);
    std::sort(cuts.begin(), cuts.end());
    return {cuts.begin(), cuts.end()};
  }
  const int64_t first = routing == Routing::skewed && groups > 1 ? 1 : 0;
  std::uniform_int_distribution<int64_t> group(first, groups - 1);
  for (int64_t t = routed; t < p.n; t += granule) sizes[size_t(group(rng))] += granule;
  std::vector<int32_t> ends(static_cast<size_t>(groups));
  int64_t end = 0;
  for (size_t g = 0; g < sizes.size(); ++g) ends[g] = int32_t(end += sizes[g]);
  return ends;
}

void ProblemData::route(Routing routing, uint64_t seed, CUstream stream) {
  if (!problem.grouped()) return;
  host_group_ends = group_ends_of(problem, routing, seed);
  if (group_ends.bytes() == 0) group_ends = DeviceBuffer(host_group_ends.size() * sizeof(int32_t));
  // On the stream, and synchronized: the host vector may change with the next routing.
  GT_CU(cuMemcpyHtoDAsync(group_ends.ptr(), host_group_ends.data(), group_ends.bytes(), stream));
  GT_CU(cuStreamSynchronize(stream));
}

ProblemData::ProblemData(const Problem& p, const Checker& checker, uint64_t seed, CUstream stream,
                         Routing routing)
    : problem(p) {
  const int64_t na = stored_elements(p.lda, p.cols_a_stored()),
                nb = stored_elements(p.ldb, p.cols_b()), nc = stored_elements(p.ldc, p.n);
  a = DeviceBuffer(size_t(na * element_bytes(p.types.a)));
  b = DeviceBuffer(size_t(nb * element_bytes(p.types.b)));
  c = DeviceBuffer(size_t(nc * element_bytes(p.types.c)));
  c_init = DeviceBuffer(size_t(nc * element_bytes(p.types.c)));
  checker.fill_normal(a.ptr(), na, p.types.a, seed * 3 + 1, 1.0f, stream);
  checker.fill_normal(b.ptr(), nb, p.types.b, seed * 3 + 2, 1.0f, stream);
  checker.fill_normal(c_init.ptr(), nc, p.types.c, seed * 3 + 3, 1.0f, stream);
  const int64_t nsa = scale_shape_a(p).count(), nsb = scale_shape_b(p).count();
  if (nsa > 0) {
    scale_a = DeviceBuffer(size_t(nsa) * sizeof(float));
    scale_b = DeviceBuffer(size_t(nsb) * sizeof(float));
    checker.fill_scales(scale_a.ptr(), nsa, seed * 5 + 1, p.types.d, stream);
    checker.fill_scales(scale_b.ptr(), nsb, seed * 5 + 2, p.types.d, stream);
  }
  if (p.epilogue.bias != Bias::none) {
    const int64_t nbias = p.epilogue.bias == Bias::m ? p.m : p.n;
    bias = DeviceBuffer(size_t(nbias * element_bytes(p.types.d)));
    checker.fill_normal(bias.ptr(), nbias, p.types.d, seed * 11 + 5, 1.0f, stream);
  }
  if (p.epilogue.aux) aux = DeviceBuffer(size_t(nc * element_bytes(p.types.d)));
  route(routing, seed * 7 + 3, stream);
}

int64_t ProblemData::grouped_columns() const {
  if (!problem.grouped()) return problem.n;
  int64_t columns = 0;
  for (int64_t g = 0; g < problem.groups; ++g) {
    const ColumnRange r = group_columns(problem, host_group_ends.data(), g);
    columns += r.end - r.begin;
  }
  return columns;
}

void ProblemData::reset_c(const Checker& checker, float beta, CUstream stream) const {
  if (beta == 0.0f)
    checker.poison(c.ptr(), int64_t(c.bytes()) / element_bytes(problem.types.c), problem.types.c,
                   stream);
  else
    GT_CU(cuMemcpyDtoDAsync(c.ptr(), c_init.ptr(), c.bytes(), stream));
  if (aux.bytes() > 0)
    checker.poison(aux.ptr(), int64_t(aux.bytes()) / element_bytes(problem.types.d),
                   problem.types.d, stream);
}

// One checked run: a problem, its data, alpha/beta and the reference at its points.
struct Verifier::Case {
  ProblemData data;
  float alpha, beta;
  bool all_points;
  int points = 0;
  std::vector<int> sampled_rows, sampled_cols;  // kept until the Verifier's stream is synchronized
  DeviceBuffer rows, cols, ref, scale;
  DeviceBuffer aux_ref, aux_scale;  // the pre-activation's reference (Epilogue::aux)

  Case(const Checker& checker, const Problem& p, float alpha_, float beta_, uint64_t seed,
       CUstream stream, Routing routing = Routing::uniform)
      : data(p, checker, seed, stream, routing), alpha(alpha_), beta(beta_) {
    const int64_t elements = p.output_rows() * p.n;
    all_points = elements <= (int64_t(1) << 18);
    if (!all_points) sample_points(p, seed, sampled_rows, sampled_cols);
    points = all_points ? int(elements) : int(sampled_rows.size());
    if (!all_points) {
      rows = DeviceBuffer(sampled_rows.size() * sizeof(int));
      cols = DeviceBuffer(sampled_cols.size() * sizeof(int));
      // On the reference's stream: a plain cuMemcpyHtoD from pageable memory may return before
      // its DMA lands and is not ordered with a non-blocking stream, so the reference could read
      // stale points (seen on an H200 with 16 test processes sharing the GPU: every candidate
      // "wrong" at 4056 of 4096 points).
      GT_CU(cuMemcpyHtoDAsync(rows.ptr(), sampled_rows.data(), rows.bytes(), stream));
      GT_CU(cuMemcpyHtoDAsync(cols.ptr(), sampled_cols.data(), cols.bytes(), stream));
    }
    ref = DeviceBuffer(size_t(points) * sizeof(double));
    scale = DeviceBuffer(size_t(points) * sizeof(double));
    checker.reference(args(), stream);
    if (p.epilogue.aux) {
      aux_ref = DeviceBuffer(size_t(points) * sizeof(double));
      aux_scale = DeviceBuffer(size_t(points) * sizeof(double));
      checker.reference(args(true), stream);
    }
  }

  // pre_activation: the check of the pre-activation output (Epilogue::aux).
  CheckArgs args(bool pre_activation = false) const {
    CheckArgs a = check_args(data, alpha, beta, pre_activation);
    a.rows = rows.ptr();
    a.cols = cols.ptr();
    a.ref = pre_activation ? aux_ref.ptr() : ref.ptr();
    a.scale = pre_activation ? aux_scale.ptr() : scale.ptr();
    a.points = points;
    return a;
  }

  // D's check, then the pre-activation output's where the problem has one (its message says so).
  Verdict compare(const Checker& checker, CUstream stream) const {
    Verdict v = checker.compare(args(), stream);
    if (!v.ok || !data.problem.epilogue.aux) return v;
    Verdict pre = checker.compare(args(true), stream);
    pre.max_error = std::max(pre.max_error, v.max_error);
    pre.points += v.points;
    if (!pre.ok) pre.message = "in the pre-activation output (aux)";
    return pre;
  }

  // Corners, the last rows and columns (tails), and random points.
  static void sample_points(const Problem& p, uint64_t seed, std::vector<int>& r,
                            std::vector<int>& c) {
    std::mt19937_64 rng(seed);
    const int64_t rows = p.output_rows();  // D's
    auto add = [&](int64_t i, int64_t j) {
      r.push_back(int(std::clamp<int64_t>(i, 0, rows - 1)));
      c.push_back(int(std::clamp<int64_t>(j, 0, p.n - 1)));
    };
    for (int64_t i : {int64_t(0), rows - 1})
      for (int64_t j : {int64_t(0), p.n - 1}) add(i, j);
    std::uniform_int_distribution<int64_t> any_m(0, rows - 1), any_n(0, p.n - 1);
    for (int t = 0; t < 512; ++t) {
      add(rows - 1 - t % 8, any_n(rng));  // last rows
      add(any_m(rng), p.n - 1 - t % 8);   // last columns
    }
    while (r.size() < 4096) add(any_m(rng), any_n(rng));
  }
};

namespace {

// Bytes of a problem's data: A, B, C and C's initial copy, as ProblemData allocates them.
int64_t data_bytes(const Problem& p) {
  return stored_elements(p.lda, p.cols_a_stored()) * element_bytes(p.types.a) +
         stored_elements(p.ldb, p.cols_b()) * element_bytes(p.types.b) +
         2 * stored_elements(p.ldc, p.n) * element_bytes(p.types.c) +
         (scale_shape_a(p).count() + scale_shape_b(p).count()) * int64_t(sizeof(float));
}

// A smaller problem with odd sizes and ld > rows, same ops and alignment class.
Problem smaller_probe(const Problem& problem) {
  Problem probe = problem;
  probe.m = std::min<int64_t>(problem.m, 331);
  if (problem.epilogue.gated()) probe.m = std::min<int64_t>(problem.m, 330);  // even: gate, up
  probe.n = std::min<int64_t>(problem.n, 299);
  probe.k = std::min<int64_t>(problem.k, 523);
  // A masked problem's N stays G times a capacity.
  if (problem.masked())
    probe.n = problem.groups *
              std::min(problem.group_capacity(), std::max<int64_t>(1, 299 / problem.groups));
  // Leading dimensions past the rows that keep the problem's alignment class, in each operand's
  // elements.
  auto ld_for = [&](int64_t rows, DataType type) {
    const int64_t step = std::max(1, problem.align / element_bytes(type));
    return (rows + step - 1) / step * step + step;
  };
  probe.lda = ld_for(probe.rows_a(), problem.types.a);
  probe.ldb = ld_for(probe.rows_b(), problem.types.b);
  probe.ldc = ld_for(probe.output_rows(), problem.types.c);
  return probe;
}

}  // namespace

Verifier::Verifier(const Checker& checker, const Problem& problem, float alpha, float beta,
                   uint64_t seed, CUstream stream)
    : checker_(checker) {
  cases_.push_back(std::make_unique<Case>(checker, problem, alpha, beta, seed, stream));
  // The other beta path, every element checked: NaN-filled C when beta == 0, read C otherwise.
  // It runs on the problem itself when that is small; on a smaller one when the problem's points
  // were sampled (which then also gets every element checked with this beta), or when a second
  // copy of its data would cost too much memory (operands of many GB).
  const float other_beta = beta == 0.0f ? 0.75f : 0.0f;
  constexpr int64_t kSecondCopyLimit = int64_t(1) << 30;
  const bool sampled = !cases_.front()->all_points;
  const Problem probe =
      sampled || data_bytes(problem) > kSecondCopyLimit ? smaller_probe(problem) : problem;
  // A grouped problem's other cases route its columns raggedly: empty groups, ends mid-tile.
  const Routing other = Routing::ragged;
  if (sampled)
    cases_.push_back(std::make_unique<Case>(checker, probe, alpha, beta, seed + 7, stream, other));
  // A gated problem reads no C: it has no other beta path.
  if (!problem.epilogue.gated())
    cases_.push_back(
        std::make_unique<Case>(checker, probe, alpha, other_beta, seed + 11, stream, other));
  GT_CU(cuStreamSynchronize(stream));
}

Verifier::~Verifier() = default;

Verdict Verifier::verify_problem(const RunFn& run, CUstream stream) const {
  const Case& cs = *cases_.front();
  cs.data.reset_c(checker_, cs.beta, stream);
  run(cs.data.problem, cs.data.operands(cs.alpha, cs.beta), stream);
  return cs.compare(checker_, stream);
}

const ProblemData& Verifier::data() const {
  return cases_.front()->data;
}

Verdict Verifier::verify(const RunFn& run, CUstream stream, bool kernel_reads_c) const {
  Verdict total;
  if (!kernel_reads_c && cases_.front()->beta != 0.0f) {
    total.ok = false;
    total.message = fmt::format("the kernel was built for beta = 0 and cannot apply beta = {}",
                                cases_.front()->beta);
    return total;
  }
  for (const auto& cs : cases_) {
    if (!kernel_reads_c && cs->beta != 0.0f)
      continue;  // the other beta path, which it does not have
    const Problem& p = cs->data.problem;
    cs->data.reset_c(checker_, cs->beta, stream);
    run(p, cs->data.operands(cs->alpha, cs->beta), stream);
    Verdict v = cs->compare(checker_, stream);
    if (cs == cases_.front()) total.problem_max_error = v.max_error;
    total.max_error = std::max(total.max_error, v.max_error);
    total.points += v.points;
    total.bad += v.bad;
    if (!v.ok) {
      total.ok = false;
      total.message = fmt::format(
          "{} of {} checked points wrong{} on {} (beta={}), max error {:.3g}", v.bad, v.points,
          v.message.empty() ? "" : " " + v.message, p.describe(), cs->beta, v.max_error);
      return total;
    }
    if (!cs->all_points) {
      // Columns in no group keep the NaN of a beta = 0 run; every other element is finite.
      const int64_t kept =
          cs->beta == 0.0f ? p.output_rows() * (p.n - cs->data.grouped_columns()) : 0;
      const int64_t nonfinite = checker_.count_nonfinite(cs->data.c.ptr(), p.ldc, p.output_rows(),
                                                         p.n, p.types.c, stream);
      if (nonfinite != kept) {
        total.ok = false;
        total.bad += std::abs(nonfinite - kept);
        total.message = fmt::format(
            "{} elements of C are NaN/Inf or unwritten on {}, where {} in no group should be",
            nonfinite, p.describe(), kept);
        return total;
      }
      const int64_t aux_nonfinite =
          p.epilogue.aux ? checker_.count_nonfinite(cs->data.aux.ptr(), p.ldc, p.output_rows(), p.n,
                                                    p.types.d, stream)
                         : 0;
      if (aux_nonfinite != 0) {
        total.ok = false;
        total.bad += aux_nonfinite;
        total.message = fmt::format(
            "{} elements of the pre-activation output (aux) are NaN/Inf or unwritten on {}",
            aux_nonfinite, p.describe());
        return total;
      }
    }
  }
  return total;
}

}  // namespace gemmtune
