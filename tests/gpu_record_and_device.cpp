// GEMMTUNE_RECORD from real calls, and the C API's calls on a named device, which leave the
// calling thread's context as it was (as PyTorch expects of the Python package).
#include <fstream>
#include <thread>

#include "gemmtune/gemmtune.h"
#include "gemmtune/gemmtune.hpp"
#include "gpu_support.hpp"

namespace gemmtune {
namespace {

class RecordAndDevice : public test::GpuTest {
 protected:
  void SetUp() override {
    test::GpuTest::SetUp();
    if (IsSkipped()) return;
    options_.db_path = (dir_ / "none.db").string();  // nothing tuned: every call is recorded
    options_.cache_dir = (dir_ / "cache").string();
  }

  void call(Library& lib, const Problem& p) {
    const ProblemData d(p, *checker_, 3, stream_->get());
    lib.gemm(p.types.a, p.op_a, p.op_b, p.m, p.n, p.k, 1.0f,
             reinterpret_cast<const void*>(d.a.ptr()), p.lda,
             reinterpret_cast<const void*>(d.b.ptr()), p.ldb, 0.0f,
             reinterpret_cast<void*>(d.c.ptr()), p.ldc, stream_->get());
    stream_->synchronize();
  }

  test::TempDir dir_;
  Options options_;
};

std::vector<std::string> problem_lines(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') lines.push_back(line);
  return lines;
}

TEST_F(RecordAndDevice, UntunedProblemsAreRecordedOncePerProblem) {
  const auto file = dir_ / "shapes.txt";
  ::setenv("GEMMTUNE_RECORD", file.c_str(), 1);  // read when a Library is made
  const Problem nn = make_problem(DType::f32, Op::N, Op::N, 96, 80, 64);
  const Problem tn = make_problem(DType::f32, Op::T, Op::N, 96, 80, 64);
  {
    Library lib(options_);
    for (const Problem& p : {nn, tn, nn, tn}) call(lib, p);
  }
  Library other(options_);  // knows nothing of the first: finds the line in the file
  call(other, nn);
  ::unsetenv("GEMMTUNE_RECORD");
  EXPECT_EQ(problem_lines(file), (std::vector<std::string>{"96 80 64 f32 nn", "96 80 64 f32 tn"}));
}

TEST_F(RecordAndDevice, CallsOnADeviceLeaveTheThreadsContextAsItWas) {
  const Problem p = make_problem(DType::f32, Op::N, Op::N, 64, 48, 32);
  const ProblemData d(p, *checker_, 4, stream_->get());
  stream_->synchronize();
  std::thread([&] {  // a new thread: no current context, as in a fresh Python thread
    CUcontext current = reinterpret_cast<CUcontext>(1);
    GT_CU(cuCtxGetCurrent(&current));
    ASSERT_EQ(current, nullptr);
    EXPECT_EQ(gemmtune_gemm_on_device(0, GEMMTUNE_F32, GEMMTUNE_OP_N, GEMMTUNE_OP_N, p.m, p.n, p.k,
                                      1.0f, d.a.as<float>(), p.lda, d.b.as<float>(), p.ldb, 0.0f,
                                      d.c.as<float>(), p.ldc, nullptr),
              GEMMTUNE_SUCCESS)
        << gemmtune_last_error();
    const char* json = nullptr;
    EXPECT_EQ(gemmtune_select(0, GEMMTUNE_F32, GEMMTUNE_OP_N, GEMMTUNE_OP_N, p.m, p.n, p.k, nullptr,
                              p.lda, nullptr, p.ldb, 0.0f, nullptr, p.ldc, &json),
              GEMMTUNE_SUCCESS)
        << gemmtune_last_error();
    ASSERT_NE(json, nullptr);
    EXPECT_NE(std::string(json).find("\"kernel\":\"gemm_simt_f32_nn_"), std::string::npos) << json;
    EXPECT_NE(std::string(json).find("\"device\":{\"name\":\"" + device_.name), std::string::npos)
        << json;
    GT_CU(cuCtxGetCurrent(&current));
    EXPECT_EQ(current, nullptr) << "the thread's context was changed";
    EXPECT_EQ(gemmtune_gemm_on_device(99, GEMMTUNE_F32, GEMMTUNE_OP_N, GEMMTUNE_OP_N, p.m, p.n, p.k,
                                      1.0f, d.a.as<float>(), p.lda, d.b.as<float>(), p.ldb, 0.0f,
                                      d.c.as<float>(), p.ldc, nullptr),
              GEMMTUNE_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(gemmtune_last_error()).find("there is no GPU 99"), std::string::npos)
        << gemmtune_last_error();
  })
      .join();
}

}  // namespace
}  // namespace gemmtune
