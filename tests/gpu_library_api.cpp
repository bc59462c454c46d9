// The public API: clear errors for bad input, the C API, streams, several threads at once.
#include <thread>

#include "gemmtune/gemmtune.h"
#include "gemmtune/gemmtune.hpp"
#include "gpu_support.hpp"

namespace gemmtune {
namespace {

class LibraryApi : public test::GpuTest {
 protected:
  void SetUp() override {
    test::GpuTest::SetUp();
    if (IsSkipped()) return;
    options_.db_path = (dir_ / "none.db").string();  // nothing tuned: defaults
    options_.cache_dir = (dir_ / "cache").string();
  }
  test::TempDir dir_;
  Options options_;
};

TEST_F(LibraryApi, BadInputIsAClearError) {
  Library lib(options_);
  const ProblemData d(make_problem(DType::f32, Op::N, Op::N, 64, 64, 64), *checker_, 1, stream_->get());
  const void* a = reinterpret_cast<const void*>(d.a.ptr());
  const void* b = reinterpret_cast<const void*>(d.b.ptr());
  void* c = reinterpret_cast<void*>(d.c.ptr());
  auto expect = [&](Errc code, const std::string& text, auto&& call) {
    try {
      call();
      ADD_FAILURE() << "no error for: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  expect(Errc::invalid_argument, "M must be at least 1",
         [&] { lib.gemm(DType::f32, Op::N, Op::N, 0, 64, 64, 1, a, 64, b, 64, 0, c, 64); });
  expect(Errc::invalid_argument, "lda (32)",
         [&] { lib.gemm(DType::f32, Op::N, Op::N, 64, 64, 64, 1, a, 32, b, 64, 0, c, 64); });
  expect(Errc::invalid_argument, "A is a null pointer",
         [&] { lib.gemm(DType::f32, Op::N, Op::N, 64, 64, 64, 1, nullptr, 64, b, 64, 0, c, 64); });
  expect(Errc::invalid_argument, "C is a null pointer",
         [&] { lib.gemm(DType::f32, Op::N, Op::N, 64, 64, 64, 1, a, 64, b, 64, 0, nullptr, 64); });
  expect(Errc::invalid_argument, "finite",
         [&] { lib.gemm(DType::f32, Op::N, Op::N, 64, 64, 64, std::nanf(""), a, 64, b, 64, 0, c, 64); });
}

TEST_F(LibraryApi, CApiReportsStatusAndMessage) {
  const Problem p = make_problem(DType::f32, Op::T, Op::N, 100, 70, 50);
  const ProblemData d(p, *checker_, 2, stream_->get());
  EXPECT_EQ(gemmtune_sgemm(GEMMTUNE_OP_T, GEMMTUNE_OP_N, 100, 70, 50, 1.0f, d.a.as<float>(), p.lda,
                           d.b.as<float>(), p.ldb, 0.0f, d.c.as<float>(), p.ldc, stream_->get()),
            GEMMTUNE_SUCCESS)
      << gemmtune_last_error();
  EXPECT_STREQ(gemmtune_last_error(), "");
  EXPECT_EQ(gemmtune_sgemm(GEMMTUNE_OP_T, GEMMTUNE_OP_N, 100, 70, 50, 1.0f, d.a.as<float>(), 10,
                           d.b.as<float>(), p.ldb, 0.0f, d.c.as<float>(), p.ldc, nullptr),
            GEMMTUNE_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gemmtune_last_error()).find("lda (10)"), std::string::npos);
  EXPECT_EQ(gemmtune_gemm(static_cast<gemmtune_dtype>(7), GEMMTUNE_OP_N, GEMMTUNE_OP_N, 1, 1, 1, 1.0f,
                          d.a.as<float>(), 1, d.b.as<float>(), 1, 0.0f, d.c.as<float>(), 1, nullptr),
            GEMMTUNE_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(gemmtune_status_string(GEMMTUNE_ERROR_NO_DEVICE), "no device");
}

TEST_F(LibraryApi, ResultsAreRightFromManyThreadsOnTheirOwnStreams) {
  Library lib(options_);
  std::vector<std::thread> threads;
  std::vector<Problem> problems;
  for (int t = 0; t < 8; ++t)
    problems.push_back(make_problem(DType::f32, t % 2 ? Op::T : Op::N, t / 2 % 2 ? Op::T : Op::N, 64 + 37 * t,
                                    96 + 11 * t, 33 + 50 * t));
  std::vector<std::unique_ptr<ProblemData>> data;
  for (int t = 0; t < 8; ++t) data.push_back(std::make_unique<ProblemData>(problems[size_t(t)], *checker_, 10 + t, stream_->get()));
  stream_->synchronize();
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      ensure_context();  // as cudaSetDevice would: a new thread has no current context
      const Problem& p = problems[size_t(t)];
      const ProblemData& d = *data[size_t(t)];
      StreamHandle s;
      for (int i = 0; i < 20; ++i)
        lib.gemm(p.dtype, p.op_a, p.op_b, p.m, p.n, p.k, 1.0f, reinterpret_cast<const void*>(d.a.ptr()), p.lda,
                 reinterpret_cast<const void*>(d.b.ptr()), p.ldb, 0.0f, reinterpret_cast<void*>(d.c.ptr()), p.ldc,
                 reinterpret_cast<Stream>(s.get()));
      s.synchronize();
    });
  for (auto& th : threads) th.join();
  // The same calls checked one by one against the reference.
  for (const auto& p : problems) {
    const Verdict verdict = check_library(lib, p);
    EXPECT_TRUE(verdict.ok) << p.describe() << ": " << verdict.message;
  }
}

TEST_F(LibraryApi, UnsupportedDtypeSaysSo) {
  Library lib(options_);
  const Problem p = make_problem(DType::f16, Op::N, Op::N, 64, 64, 64);
  const ProblemData d(p, *checker_, 4, stream_->get());
  if (!families_for(p, device_.arch).empty()) GTEST_SKIP() << "f16 is supported on " << device_.arch.name();
  try {
    lib.gemm(DType::f16, Op::N, Op::N, 64, 64, 64, 1, reinterpret_cast<const void*>(d.a.ptr()), 64,
             reinterpret_cast<const void*>(d.b.ptr()), 64, 0, reinterpret_cast<void*>(d.c.ptr()), 64);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unsupported);
  }
}

}  // namespace
}  // namespace gemmtune
