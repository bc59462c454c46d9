// The public API: clear errors for bad input, the C API, streams, several threads at once.
#include <sqlite3.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "fault_injection_family.hpp"
#include "gemmtune/cache/tuning_db.hpp"
#include "gemmtune/gemmtune.h"
#include "gemmtune/gemmtune.hpp"
#include "gemmtune/generator/util.hpp"
#include "gpu_support.hpp"
#include "log_capture.hpp"

namespace gemmtune {
namespace {

using test::LogCapture;

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
  const ProblemData d(make_problem(DType::f32, Op::N, Op::N, 64, 64, 64), *checker_, 1,
                      stream_->get());
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
  expect(Errc::invalid_argument, "finite", [&] {
    lib.gemm(DType::f32, Op::N, Op::N, 64, 64, 64, std::nanf(""), a, 64, b, 64, 0, c, 64);
  });
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
  EXPECT_EQ(
      gemmtune_gemm(static_cast<gemmtune_dtype>(7), GEMMTUNE_OP_N, GEMMTUNE_OP_N, 1, 1, 1, 1.0f,
                    d.a.as<float>(), 1, d.b.as<float>(), 1, 0.0f, d.c.as<float>(), 1, nullptr),
      GEMMTUNE_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(gemmtune_status_string(GEMMTUNE_ERROR_NO_DEVICE), "no device");
}

TEST_F(LibraryApi, ResultsAreRightFromManyThreadsOnTheirOwnStreams) {
  Library lib(options_);
  std::vector<std::thread> threads;
  std::vector<Problem> problems;
  for (int t = 0; t < 8; ++t)
    problems.push_back(make_problem(DType::f32, t % 2 ? Op::T : Op::N, t / 2 % 2 ? Op::T : Op::N,
                                    64 + 37 * t, 96 + 11 * t, 33 + 50 * t));
  std::vector<std::unique_ptr<ProblemData>> data;
  for (int t = 0; t < 8; ++t)
    data.push_back(
        std::make_unique<ProblemData>(problems[size_t(t)], *checker_, 10 + t, stream_->get()));
  stream_->synchronize();
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      ensure_context();  // as cudaSetDevice would: a new thread has no current context
      const Problem& p = problems[size_t(t)];
      const ProblemData& d = *data[size_t(t)];
      StreamHandle s;
      for (int i = 0; i < 20; ++i)
        lib.gemm(p.types.a, p.op_a, p.op_b, p.m, p.n, p.k, 1.0f,
                 reinterpret_cast<const void*>(d.a.ptr()), p.lda,
                 reinterpret_cast<const void*>(d.b.ptr()), p.ldb, 0.0f,
                 reinterpret_cast<void*>(d.c.ptr()), p.ldc, reinterpret_cast<Stream>(s.get()));
      s.synchronize();
    });
  for (auto& th : threads) th.join();
  // The same calls checked one by one against the reference.
  for (const auto& p : problems) {
    const Verdict verdict = check_library(lib, p, 1.0f, 0.0f, 3);
    EXPECT_TRUE(verdict.ok) << p.describe() << ": " << verdict.message;
  }
}

// Operands TMA cannot read in place (odd leading dimensions) are packed into buffers the library
// keeps per stream (wgmma only: mma_sm80 reads them in place). Threads that share one stream get
// the same bits as calls made one at a time: no call's copies are overwritten by another's before
// its kernel has read them; and the first results are right.
TEST_F(LibraryApi, PackedOperandsFromThreadsSharingAStreamAreTheirOwn) {
  const Problem any = make_problem(DType::bf16, Op::N, Op::N, 64, 64, 64);
  if (!find_family("wgmma_sm90").unsupported_reason(any, device_.arch).empty())
    GTEST_SKIP() << "packing is for TMA (the wgmma family, sm_90a); this GPU is "
                 << device_.arch.name();
  options_.families = "wgmma_sm90";  // mma_sm80 would read these operands in place
  Library lib(options_);
  std::vector<Problem> problems;
  for (int t = 0; t < 6; ++t) {
    Problem p = make_problem(DType::bf16, Op::N, t % 2 ? Op::T : Op::N, 300 + 97 * t, 200 + 61 * t,
                             150 + 83 * t);
    p.lda += 1;  // odd: packed
    p.ldb += 3;
    p.align = alignment_class(p.types, nullptr, nullptr, nullptr, p.lda, p.ldb, p.ldc);
    problems.push_back(p);
  }
  for (const Problem& p : problems) {
    const Verdict v = check_library(lib, p, 1.0f, 0.0f, 4);
    ASSERT_TRUE(v.ok) << p.describe() << ": " << v.message;
  }
  std::vector<std::unique_ptr<ProblemData>> data;
  std::vector<std::vector<uint16_t>> alone(problems.size()), shared(problems.size());
  auto call = [&](size_t t, CUstream s) {
    const Problem& p = problems[t];
    const ProblemData& d = *data[t];
    lib.gemm(p.types.a, p.op_a, p.op_b, p.m, p.n, p.k, 1.0f,
             reinterpret_cast<const void*>(d.a.ptr()), p.lda,
             reinterpret_cast<const void*>(d.b.ptr()), p.ldb, 0.0f,
             reinterpret_cast<void*>(d.c.ptr()), p.ldc, reinterpret_cast<Stream>(s));
  };
  auto download = [&](size_t t, std::vector<uint16_t>& out) {
    out.resize(size_t(problems[t].ldc * problems[t].n));
    GT_CU(cuMemcpyDtoH(out.data(), data[t]->c.ptr(), out.size() * 2));
  };
  for (size_t t = 0; t < problems.size(); ++t) {
    data.push_back(std::make_unique<ProblemData>(problems[t], *checker_, 20 + t, stream_->get()));
    call(t, stream_->get());
    stream_->synchronize();
    download(t, alone[t]);
    data[t]->reset_c(*checker_, 0.0f, stream_->get());  // NaN again
  }
  stream_->synchronize();
  StreamHandle one;
  std::vector<std::thread> threads;
  for (size_t t = 0; t < problems.size(); ++t)
    threads.emplace_back([&, t] {
      ensure_context();
      for (int i = 0; i < 30; ++i) call(t, one.get());
    });
  for (auto& th : threads) th.join();
  one.synchronize();
  for (size_t t = 0; t < problems.size(); ++t) {
    download(t, shared[t]);
    EXPECT_TRUE(shared[t] == alone[t])
        << problems[t].describe() << ": calls from threads on one stream differ";
  }
}

// Every dtype on every GPU: computed right where a family serves it, refused as unsupported (with
// the dtype and the GPU named) where none does. On Hopper, the target, all three are served.
TEST_F(LibraryApi, EachDtypeIsComputedRightOrRefusedAsUnsupported) {
  Library lib(options_);
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    const Problem p = make_problem(dtype, Op::N, Op::T, 96, 80, 72);
    if (families_for(p, device_.arch).empty()) {
      const ProblemData d(p, *checker_, 4, stream_->get());
      EXPECT_NE(device_.arch.cc, 90) << "Hopper must serve " << to_string(dtype);
      try {
        lib.gemm(dtype, Op::N, Op::T, p.m, p.n, p.k, 1, reinterpret_cast<const void*>(d.a.ptr()),
                 p.lda, reinterpret_cast<const void*>(d.b.ptr()), p.ldb, 0,
                 reinterpret_cast<void*>(d.c.ptr()), p.ldc);
        ADD_FAILURE() << "no error for " << to_string(dtype) << " on " << device_.arch.name();
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::unsupported) << e.what();
        EXPECT_NE(
            std::string(e.what()).find(fmt::format("{} nt on {}", to_string(dtype), device_.name)),
            std::string::npos)
            << e.what();
      }
      continue;
    }
    const Verdict verdict = check_library(lib, p, 1.0f, 0.5f, 3);
    EXPECT_TRUE(verdict.ok) << p.describe() << ": " << verdict.message;
  }
}

// A damaged database (truncated, random bytes, another program's SQLite file): the library says
// so once and computes with its built-in defaults; the caller never sees an error.
TEST_F(LibraryApi, ADamagedDatabaseIsReportedOnceAndTheDefaultsAreUsed) {
  const Problem tuned = make_problem(DType::f32, Op::N, Op::N, 128, 96, 64);
  {
    TuningDb db(dir_ / "good.db");
    const KernelConfig c = find_family("simt").default_config(tuned, device_.arch);
    CandidateRecord r;
    r.template_version = template_version(find_family("simt"));
    r.config = c;
    r.status = CandidateStatus::ok;
    r.median_ms = 1.0;
    r.message = std::string(300, 'm');
    for (int i = 0; i < 300; ++i) {  // pages enough that half the file loses some
      r.kernel_name = fmt::format("k{}", i);
      db.record(device_.key, make_problem(DType::f32, Op::N, Op::N, 64 + i, 64, 64), r);
    }
    r.kernel_name = find_family("simt").kernel_name(c);
    db.record(device_.key, tuned, r);
    db.set_best(device_.key, tuned, r.kernel_name, r.template_version, -1, true);
  }
  std::ifstream in(dir_ / "good.db", std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(dir_ / "truncated.db", std::ios::binary) << good.substr(0, good.size() / 2);
  std::ofstream(dir_ / "random.db", std::ios::binary) << test::random_bytes(20000, 7);
  {
    TuningDb photos(dir_ / "photos.db");  // made ours, then made another program's
  }
  {
    sqlite3* raw = nullptr;
    sqlite3_open((dir_ / "photos.db").c_str(), &raw);
    sqlite3_exec(raw, "PRAGMA application_id = 42; CREATE TABLE photos (path TEXT)", nullptr,
                 nullptr, nullptr);
    sqlite3_close(raw);
  }
  for (const char* name : {"truncated.db", "random.db", "photos.db"}) {
    const std::string path = (dir_ / name).string();
    LogCapture captured;
    Options o = options_;
    o.db_path = path;
    Library lib(o);
    for (int64_t m : {64, 65, 128, 200}) {
      const Problem p = make_problem(DType::f32, Op::N, Op::N, m, 96, 64);
      EXPECT_EQ(lib.select(p).source, Source::fallback) << name << " " << p.describe();
    }
    const Verdict verdict = check_library(lib, tuned, 1.0f, 0.0f, 8);
    EXPECT_TRUE(verdict.ok) << name << ": " << verdict.message;
    EXPECT_EQ(captured.lines_with(path), 1) << name << ": " << captured.text();
    EXPECT_EQ(captured.lines_with("using the built-in defaults"), 1)
        << name << ": " << captured.text();
  }
}

// A database row naming the test family (registered in this process, as only a test does), or
// parameters outside a family's space, is never run: skipped with a warning, the default runs.
TEST_F(LibraryApi, RowsThatAreNoValidProductionConfigAreSkippedWithAWarning) {
  register_family(test::fault_injection_family());
  const Problem p = make_problem(DType::f32, Op::N, Op::N, 256, 128, 64);
  const Problem p2 = make_problem(DType::f32, Op::N, Op::N, 384, 128, 64);
  const std::string db_path = (dir_ / "planted.db").string();
  {
    TuningDb db(db_path);
    CandidateRecord fault;
    fault.kernel_name = "planted_fault";
    fault.template_version = template_version(test::fault_injection_family());
    fault.config = test::fault_injection_family().default_config(p, device_.arch);
    fault.status = CandidateStatus::ok;
    fault.median_ms = 0.001;
    db.record(device_.key, p, fault);
    db.set_best(device_.key, p, fault.kernel_name, fault.template_version, -1, true);
    CandidateRecord odd = fault;
    odd.kernel_name = "planted_vec8";
    odd.template_version = template_version(find_family("simt"));
    odd.config = find_family("simt").default_config(p2, device_.arch);
    odd.config.params["VEC"] = 8;  // 32-byte loads: no such kernel
    db.record(device_.key, p2, odd);
    db.set_best(device_.key, p2, odd.kernel_name, odd.template_version, -1, true);
  }
  Options o = options_;
  o.db_path = db_path;
  LogCapture captured;
  Library lib(o);
  for (const Problem& q : {p, p2}) {
    const Selection s = lib.select(q);
    EXPECT_EQ(s.source, Source::fallback) << q.describe();
    EXPECT_EQ(s.family, "simt");
  }
  EXPECT_NE(captured.text().find("not using planted_fault (fault_injection)"), std::string::npos)
      << captured.text();
  EXPECT_NE(captured.text().find("not using planted_vec8 (simt) for " + p2.describe() +
                                 ": VEC=8 is not among"),
            std::string::npos)
      << captured.text();
  const Verdict verdict = check_library(lib, p, 1.0f, 0.0f, 8);
  EXPECT_TRUE(verdict.ok) << verdict.message;
}

}  // namespace
}  // namespace gemmtune
