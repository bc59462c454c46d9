// The gemv family is right on every layout with N == 1 and with M == 1, M = N = 1, K = 1, odd
// leading dimensions, unaligned pointers (alignment classes 2, 4 and 8), both beta paths (NaN in
// C when beta == 0), bf16, f16 and f32, with and without K split over blocks; a split result is
// bitwise the same run after run, and every run leaves its counters zero. Kernels run through
// the runtime's launcher with the stream's counters and scratch, as the tuner runs them; one
// test goes through the library.
#include <algorithm>
#include <cstring>
#include <map>

#include "gpu_support.hpp"

namespace gemmtune {
namespace {

struct Point {
  int64_t threads, rows, unroll, ksplit;
};

// One configuration per code path: both block sizes, one to four outputs per warp (dot) or
// vectors per lane (axpy), short and long unrolls, K whole, in three uneven slices, in 8, and in
// 32 slices (more than short K has: fewer are launched).
const Point kPoints[] = {
    {256, 2, 4, 1},  // the default's shape
    {128, 1, 4, 1},  // the smallest block
    {128, 4, 2, 3}, {256, 1, 8, 8}, {256, 4, 4, 32},
};

int64_t widest_vector(const Problem& p) {
  return std::max(1, std::min(16, p.align) / element_bytes(p.types.a));
}

KernelConfig config_of(const Point& pt, const Problem& p, int side) {
  return KernelConfig{"gemv",
                      p.types,
                      p.scaling,
                      p.op_a,
                      p.op_b,
                      {{"SIDE", side},
                       {"THREADS", pt.threads},
                       {"ROWS", pt.rows},
                       {"UNROLL", pt.unroll},
                       {"KSPLIT", pt.ksplit},
                       {"VEC", widest_vector(p)}}};
}

// SIDE 0 serves N == 1, SIDE 1 serves M == 1; both serve M == N == 1.
std::vector<int> sides_of(const Problem& p) {
  std::vector<int> out;
  if (p.n == 1) out.push_back(0);
  if (p.m == 1) out.push_back(1);
  return out;
}

int64_t stored_bytes(int64_t ld, int64_t cols, DType d) {
  return ld * cols * element_bytes(d);
}

class GemvTest : public test::GpuTest {
 protected:
  void SetUp() override {
    test::GpuTest::SetUp();
    if (IsSkipped()) return;
    const std::string why = find_family("gemv").unsupported_reason(
        make_problem(DType::bf16, Op::T, Op::N, 64, 1, 64), device_.arch);
    if (!why.empty()) GTEST_SKIP() << "gemv on " << device_.arch.name() << ": " << why;
  }

  // Prepared once per kernel name: the same kernel serves every problem of its constraints.
  const ReadyKernel& kernel(const KernelConfig& config, const Problem& p) {
    const std::string name = find_family("gemv").kernel_name(config);
    auto it = kernels_.find(name);
    if (it == kernels_.end())
      it = kernels_.emplace(name, prepare_kernel(compiler_, config, p, device_.arch)).first;
    return it->second;
  }

  // Launches with the stream's counters and scratch, and checks that the kernel leaves its
  // counters zero (the next kernel on the stream, of any layout, counts on it).
  void launch(const ReadyKernel& k, const Problem& q, GemmOperands ops, CUstream s) {
    const LaunchPlan g = k.family->plan(k.config, q, device_.arch);
    workspaces_.provide(s, g, ops);
    k.run(g, q, ops, s);
    if (g.counter_bytes) expect_zero_counters(k, ops.counters, g.counter_bytes, s);
  }

  void expect_zero_counters(const ReadyKernel& k, CUdeviceptr counters, uint64_t bytes,
                            CUstream s) {
    std::vector<unsigned char> host(bytes);
    GT_CU(cuStreamSynchronize(s));
    GT_CU(cuMemcpyDtoH(host.data(), counters, bytes));
    const auto nonzero =
        std::count_if(host.begin(), host.end(), [](unsigned char b) { return b != 0; });
    EXPECT_EQ(nonzero, 0) << k.compiled.name << " left " << nonzero << " of " << bytes
                          << " counter bytes non-zero";
  }

  // Runs on copies of the operands placed `offset` bytes past an aligned address.
  void launch_shifted(const ReadyKernel& k, const Problem& q, const GemmOperands& ops, CUstream s,
                      int offset) {
    const int64_t a_bytes = stored_bytes(q.lda, q.cols_a(), q.types.a),
                  b_bytes = stored_bytes(q.ldb, q.cols_b(), q.types.b),
                  c_bytes = stored_bytes(q.ldc, q.n, q.types.c);
    const DeviceBuffer a(size_t(a_bytes) + 16), b(size_t(b_bytes) + 16), c(size_t(c_bytes) + 16);
    GT_CU(cuMemcpyDtoDAsync(a.ptr() + offset, ops.a, size_t(a_bytes), s));
    GT_CU(cuMemcpyDtoDAsync(b.ptr() + offset, ops.b, size_t(b_bytes), s));
    GT_CU(cuMemcpyDtoDAsync(c.ptr() + offset, ops.c, size_t(c_bytes), s));
    launch(k, q, {a.ptr() + offset, b.ptr() + offset, c.ptr() + offset, ops.alpha, ops.beta}, s);
    GT_CU(cuMemcpyDtoDAsync(ops.c, c.ptr() + offset, size_t(c_bytes), s));
    GT_CU(cuStreamSynchronize(s));
  }

  // The verifier's checks (independent reference, both beta paths, NaN-poisoned C), with the
  // operands `offset` bytes off alignment when offset > 0.
  Verdict check_gemv(const ReadyKernel& k, const Problem& p, float alpha, float beta,
                     int offset = 0) {
    const Verifier v(*checker_, p, alpha, beta, 5, stream_->get());
    return v.verify(
        [&](const Problem& q, const GemmOperands& ops, CUstream s) {
          if (offset > 0)
            launch_shifted(k, q, ops, s, offset);
          else
            launch(k, q, ops, s);
        },
        stream_->get());
  }

  std::map<std::string, ReadyKernel> kernels_;
};

class GemvCorrectness : public GemvTest,
                        public ::testing::WithParamInterface<std::tuple<std::string, std::string>> {
};

TEST_P(GemvCorrectness, ShapesLayoutsLeadingDimensionsSplitsAndBeta) {
  const auto [dtype_name, layout] = GetParam();
  const DType dtype = parse_data_type(dtype_name);
  const int64_t shapes[][3] = {{1, 1, 1},      {1, 1, 777},    {300, 1, 1}, {1000, 1, 999},
                               {257, 1, 4100}, {33, 1, 20000}, {1, 300, 1}, {1, 1000, 999},
                               {1, 257, 4100}, {1, 33, 20000}};
  int checked = 0;
  for (const auto& s : shapes) {
    for (int64_t extra_ld :
         {0, 3}) {  // 3: odd leading dimensions (a strided x where ld is its stride)
      const Problem p = test::with_longer_lds(
          make_problem(dtype, parse_op(layout[0]), parse_op(layout[1]), s[0], s[1], s[2]),
          extra_ld);
      for (int side : sides_of(p)) {
        for (const Point& pt : kPoints) {
          const ReadyKernel& k = kernel(config_of(pt, p, side), p);
          for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{-0.5f, 1.5f}}) {
            const Verdict v = check_gemv(k, p, alpha, beta);
            EXPECT_TRUE(v.ok) << k.compiled.name << " on " << p.describe() << " alpha=" << alpha
                              << " beta=" << beta << ": " << v.message;
            ++checked;
          }
        }
      }
    }
  }
  // 10 shapes, 2 ld, one side each except M = N = 1 (two), 5 points, 2 (alpha, beta).
  EXPECT_EQ(checked, (10 + 2) * 2 * 5 * 2);
}

INSTANTIATE_TEST_SUITE_P(LayoutsAndTypes, GemvCorrectness,
                         ::testing::Combine(::testing::Values("bf16", "f16", "f32"),
                                            ::testing::Values("nn", "nt", "tn", "tt")));

// Pointers off 16-byte alignment: 2-, 4- and 8-byte loads, or scalar ones, for every layout.
class GemvAlignment : public GemvTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(GemvAlignment, UnalignedPointers) {
  const DType dtype = parse_data_type(GetParam());
  for (int align : {2, 4, 8}) {
    if (align < element_bytes(dtype)) continue;
    for (const char* layout : {"nn", "nt", "tn", "tt"}) {
      const int64_t shapes[][3] = {{999, 1, 1001}, {1, 999, 1001}, {1, 1, 513}};
      for (const auto& s : shapes) {
        Problem p = make_problem(dtype, parse_op(layout[0]), parse_op(layout[1]), s[0], s[1], s[2]);
        auto padded = [](int64_t rows) { return (rows + 7) / 8 * 8 + 8; };  // 16-byte multiples
        p.lda = padded(p.rows_a());
        p.ldb = padded(p.rows_b());
        p.ldc = padded(p.m);
        p.align = align;  // the pointers' offset decides the class
        for (int side : sides_of(p)) {
          for (const Point& pt : {kPoints[0], kPoints[3]}) {
            const ReadyKernel& k = kernel(config_of(pt, p, side), p);
            const Verdict v = check_gemv(k, p, 0.75f, 0.5f, align);
            EXPECT_TRUE(v.ok) << k.compiled.name << " on " << p.describe() << " (pointers " << align
                              << " bytes off): " << v.message;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, GemvAlignment, ::testing::Values("bf16", "f16", "f32"));

// The same inputs give bitwise the same C on every run of a split configuration, with either
// beta path, and the result is right.
TEST_F(GemvTest, SplitKIsBitwiseReproducible) {
  struct Case {
    DType dtype;
    const char* layout;
    int64_t m, n, k;
    Point point;
  };
  const Case cases[] = {
      {DType::bf16, "nn", 4096, 1, 8192, {256, 1, 4, 16}},  // axpy
      {DType::bf16, "tn", 512, 1, 65536, {256, 2, 4, 8}},   // dot, x read through L1
      {DType::f16, "tt", 700, 1, 30000, {128, 2, 4, 2}},    // dot, x staged in two chunks per slice
      {DType::f32, "nn", 1, 3000, 20000, {256, 4, 2, 32}},  // M == 1, dot
  };
  for (const Case& cs : cases) {
    const Problem p =
        make_problem(cs.dtype, parse_op(cs.layout[0]), parse_op(cs.layout[1]), cs.m, cs.n, cs.k);
    const KernelConfig config = config_of(cs.point, p, p.n == 1 ? 0 : 1);
    const ReadyKernel& k = kernel(config, p);
    ASSERT_GT(k.family->plan(config, p, device_.arch).grid[1], 1u)
        << k.compiled.name << ": K is not split";
    const Verdict v = check_gemv(k, p, 1.25f, 0.0f);
    EXPECT_TRUE(v.ok) << k.compiled.name << " on " << p.describe() << ": " << v.message;
    const ProblemData data(p, *checker_, 11, stream_->get());
    const size_t c_bytes = data.c.bytes();
    for (float beta : {0.0f, 0.5f}) {
      std::vector<unsigned char> first(c_bytes), again(c_bytes);
      for (int run = 0; run < 5; ++run) {
        data.reset_c(*checker_, beta, stream_->get());
        launch(k, p, data.operands(1.25f, beta), stream_->get());
        GT_CU(cuStreamSynchronize(stream_->get()));
        GT_CU(cuMemcpyDtoH(run == 0 ? first.data() : again.data(), data.c.ptr(), c_bytes));
        if (run > 0) {
          EXPECT_EQ(std::memcmp(first.data(), again.data(), c_bytes), 0)
              << k.compiled.name << " on " << p.describe() << " beta=" << beta << ": run " << run
              << " differs from run 0";
        }
      }
    }
  }
}

// Small problems for compute-sanitizer (memcheck, racecheck): each orientation, split and not,
// x read through L1 and staged, odd leading dimensions, pointers 2 bytes off alignment.
TEST_F(GemvTest, SanitizerSmallShapes) {
  const char* layouts[] = {"tn", "nt", "nn", "tt"};
  for (const char* layout : layouts) {
    for (auto [m, n] : {std::pair<int64_t, int64_t>{300, 1}, std::pair<int64_t, int64_t>{1, 300}}) {
      Problem p = make_problem(DType::bf16, parse_op(layout[0]), parse_op(layout[1]), m, n, 1300);
      for (const Point& pt : {kPoints[0], kPoints[2]}) {
        const ReadyKernel& k = kernel(config_of(pt, p, n == 1 ? 0 : 1), p);
        const Verdict v = check_gemv(k, p, 1.0f, 0.0f);
        EXPECT_TRUE(v.ok) << k.compiled.name << " on " << p.describe() << ": " << v.message;
      }
      p.lda += 1;
      p.ldb += 1;
      p.ldc += 1;
      p.align = 2;
      const ReadyKernel& k = kernel(config_of(kPoints[2], p, n == 1 ? 0 : 1), p);
      const Verdict v = check_gemv(k, p, 1.0f, 0.5f, 2);
      EXPECT_TRUE(v.ok) << k.compiled.name << " on " << p.describe()
                        << " (pointers 2 bytes off): " << v.message;
    }
  }
}

// Through the library, on an empty database: its default for N == 1 is a gemv kernel, and the
// runtime provides the counters and scratch of a split one (nn: K split over 16 blocks on an H100).
TEST_F(GemvTest, LibraryDefaultsIncludingSplitK) {
  Options options;
  options.use_database = false;
  Library lib(options);
  for (const char* layout : {"tn", "nn"}) {
    const Problem p =
        make_problem(DType::bf16, parse_op(layout[0]), parse_op(layout[1]), 4096, 1, 4096);
    const Selection sel = lib.select(p);
    EXPECT_EQ(sel.family, "gemv") << p.describe() << " chose " << sel.kernel;
    const Verdict verdict = check_library(lib, p);
    EXPECT_TRUE(verdict.ok) << sel.kernel << " on " << p.describe() << ": " << verdict.message;
  }
}

}  // namespace
}  // namespace gemmtune
