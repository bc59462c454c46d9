// Tuning while serving (GEMMTUNE_TUNE=background) on the GPU: an untuned problem is served at
// once and queued with its calls counted; when a result arrives (written here as the daemon
// would), the library takes it up between calls without a restart, never during a CUDA graph
// capture, and a graph captured before keeps working. tools/gpu-tune-service.sh runs the real
// daemon with model processes.
#include <dlfcn.h>

#include <chrono>
#include <thread>
#include <vector>

#include "gemmtune/cache/tuning_db.hpp"
#include "gemmtune/gemmtune.hpp"
#include "gemmtune/generator/family.hpp"
#include "gemmtune/runtime/driver.hpp"
#include "gpu_support.hpp"

namespace gemmtune {
namespace {

// The name of the kernel in a captured graph of one launch (driver calls the library does not
// need: looked up here, in the driver itself).
std::string kernel_in(CUgraph graph) {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!cuda) cuda = dlopen("libcuda.so.1", RTLD_NOW);
  using GetNodes = CUresult (*)(CUgraph, CUgraphNode*, size_t*);
  using GetParams = CUresult (*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*);
  using GetName = CUresult (*)(const char**, CUfunction);
  const auto get_nodes = reinterpret_cast<GetNodes>(dlsym(cuda, "cuGraphGetNodes"));
  const auto get_params = reinterpret_cast<GetParams>(dlsym(cuda, "cuGraphKernelNodeGetParams_v2"));
  const auto get_name = reinterpret_cast<GetName>(dlsym(cuda, "cuFuncGetName"));
  if (!get_nodes || !get_params || !get_name) return "(driver too old to say)";
  size_t count = 0;
  get_nodes(graph, nullptr, &count);
  std::vector<CUgraphNode> nodes(count);
  get_nodes(graph, nodes.data(), &count);
  for (CUgraphNode node : nodes) {
    CUDA_KERNEL_NODE_PARAMS params{};
    if (get_params(node, &params) != CUDA_SUCCESS) continue;  // a memset, ...
    const char* name = nullptr;
    if (get_name(&name, params.func) == CUDA_SUCCESS && name) return name;
  }
  return "(no kernel node)";
}

class TuningService : public test::GpuTest {
 protected:
  void SetUp() override {
    test::GpuTest::SetUp();
    if (IsSkipped()) return;
    options_.db_path = (dir_ / "tuning.db").string();
    options_.cache_dir = (dir_ / "cache").string();
    options_.tune = "background";
    options_.refresh_s = 0.05;
    const DataType t = device_.arch.cc >= 80 ? DataType::bf16 : DataType::f32;
    problem_ = make_problem(t, Op::T, Op::N, 384, 48, 512);
    data_ = std::make_unique<ProblemData>(problem_, *checker_, 3, stream_->get());
  }

  void call(Library& lib) { call(lib, problem_); }
  void call(Library& lib, const Problem& p) {
    lib.matmul({p.types, p.scaling, p.op_a, p.op_b}, p.m, p.n, p.k, 1.0f,
               reinterpret_cast<const void*>(data_->a.ptr()), p.lda,
               reinterpret_cast<const void*>(data_->b.ptr()), p.ldb, 0.0f,
               reinterpret_cast<void*>(data_->c.ptr()), p.ldc,
               reinterpret_cast<Stream>(stream_->get()));
  }

  // What the daemon would store: another family's default, so that the switch is visible.
  std::string store_result() { return store_result(options_.db_path, problem_); }
  std::string store_result(const std::string& db, const Problem& p) {
    const auto families = families_for(p, device_.arch);
    const Family& family = *families.back();
    const KernelConfig config = family.default_config(p, device_.arch);
    test::store_best(db, device_.key, p, family, config);
    return family.kernel_name(config);
  }

  static void wait_past_refresh() { std::this_thread::sleep_for(std::chrono::milliseconds(120)); }

  test::TempDir dir_;
  Options options_;
  Problem problem_;
  std::unique_ptr<ProblemData> data_;
};

TEST_F(TuningService, AnUntunedProblemIsServedQueuedAndSwitchedWhenItsResultArrives) {
  Library lib(options_);
  for (int i = 0; i < 25; ++i) call(lib);
  stream_->synchronize();
  const Selection before = lib.select(problem_);
  EXPECT_EQ(before.source, Source::fallback);
  wait_past_refresh();
  call(lib);  // reports the calls
  {
    const auto queue = TuningDb(options_.db_path).queue();
    ASSERT_EQ(queue.size(), 1u);
    EXPECT_EQ(queue[0].problem, problem_);
    EXPECT_EQ(queue[0].state, QueueState::queued);
    EXPECT_GE(queue[0].calls, 25);
    EXPECT_GT(queue[0].predicted_us, 0);
  }
  const std::string tuned = store_result();
  ASSERT_NE(tuned, before.kernel);
  wait_past_refresh();
  call(lib);
  const Selection after = lib.select(problem_);
  EXPECT_EQ(after.source, Source::tuned) << after.note;
  EXPECT_EQ(after.kernel, tuned);
  const Verdict verdict = check_library(lib, problem_);
  EXPECT_TRUE(verdict.ok) << verdict.message;
}

TEST_F(TuningService, NoSwitchDuringACaptureAndAnEarlierGraphKeepsItsKernel) {
  Library lib(options_);
  call(lib);
  const std::string untuned = lib.select(problem_).kernel;
  // A graph captured with the untuned kernel.
  CUgraph early = nullptr;
  GT_CU(cuStreamBeginCapture(stream_->get(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  call(lib);
  GT_CU(cuStreamEndCapture(stream_->get(), &early));
  EXPECT_NE(kernel_in(early).find(untuned), std::string::npos) << kernel_in(early);

  const std::string tuned = store_result();
  wait_past_refresh();
  // A result is in, but this call is captured: it keeps the kernel it had.
  CUgraph during = nullptr;
  GT_CU(cuStreamBeginCapture(stream_->get(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  call(lib);
  GT_CU(cuStreamEndCapture(stream_->get(), &during));
  EXPECT_NE(kernel_in(during).find(untuned), std::string::npos) << kernel_in(during);
  // The next call outside a capture switches.
  call(lib);
  EXPECT_EQ(lib.select(problem_).kernel, tuned);

  // The early graph still runs its kernel, which stays loaded: the same bits as a fresh run of it.
  std::vector<uint16_t> replayed(size_t(problem_.ldc * problem_.n));
  CUgraphExec exec = nullptr;
  GT_CU(cuGraphInstantiate(&exec, early, 0));
  GT_CU(cuMemsetD8Async(data_->c.ptr(), 0xff, replayed.size() * 2, stream_->get()));
  GT_CU(cuGraphLaunch(exec, stream_->get()));
  stream_->synchronize();
  GT_CU(cuMemcpyDtoH(replayed.data(), data_->c.ptr(), replayed.size() * 2));
  EXPECT_NE(replayed[0], 0xffff);  // written
  GT_CU(cuGraphExecDestroy(exec));
  GT_CU(cuGraphDestroy(early));
  GT_CU(cuGraphDestroy(during));
}

// A model's read-only database under a writable overlay: both are read, the overlay first; the
// queue and new results go to the overlay; the base file is never written.
TEST_F(TuningService, AnOverlayTakesTheQueueAndTheResultsTheBaseIsOnlyRead) {
  const std::string base = (dir_ / "model.db").string();
  options_.db_path = base;
  options_.overlay_db_path = (dir_ / "overlay.db").string();
  const std::string shipped = store_result(base, problem_);
  const auto base_bytes = std::filesystem::file_size(base);
  const auto base_time = std::filesystem::last_write_time(base);
  const Problem other = make_problem(problem_.types.a, Op::T, Op::N, 640, 24, 768);
  const ProblemData other_data(other, *checker_, 4, stream_->get());
  Library lib(options_);
  call(lib);
  EXPECT_EQ(lib.select(problem_).kernel, shipped);
  EXPECT_EQ(lib.select(problem_).source, Source::tuned);
  const auto call_other = [&] {
    lib.matmul({other.types, other.scaling, other.op_a, other.op_b}, other.m, other.n, other.k,
               1.0f, reinterpret_cast<const void*>(other_data.a.ptr()), other.lda,
               reinterpret_cast<const void*>(other_data.b.ptr()), other.ldb, 0.0f,
               reinterpret_cast<void*>(other_data.c.ptr()), other.ldc,
               reinterpret_cast<Stream>(stream_->get()));
  };
  call_other();
  EXPECT_NE(lib.select(other).source, Source::tuned);
  const auto queued = TuningDb(options_.overlay_db_path).queue();
  ASSERT_EQ(queued.size(), 1u);
  EXPECT_EQ(queued[0].problem, other);
  const std::string tuned = store_result(options_.overlay_db_path, other);
  wait_past_refresh();
  call_other();
  EXPECT_EQ(lib.select(other).kernel, tuned);
  EXPECT_EQ(lib.select(other).source, Source::tuned);
  stream_->synchronize();
  EXPECT_EQ(std::filesystem::file_size(base), base_bytes);
  EXPECT_EQ(std::filesystem::last_write_time(base), base_time);
}

TEST_F(TuningService, WithoutGemmtuneTuneTheDatabaseIsNeverOpenedToWrite) {
  options_.tune = "off";
  Library lib(options_);
  for (int i = 0; i < 3; ++i) call(lib);
  stream_->synchronize();
  EXPECT_EQ(lib.select(problem_).source, Source::fallback);
  EXPECT_FALSE(std::filesystem::exists(options_.db_path));  // nothing queued, nothing created
}

}  // namespace
}  // namespace gemmtune
