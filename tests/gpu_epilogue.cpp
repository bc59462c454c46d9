// Epilogues (bias, activation) in every family's store, checked against the fp64 reference of
// the same formula; D in a buffer of its own leaves C as it was.
#include <tuple>

#include "gemmtune/gemmtune.hpp"
#include "gemmtune/generator/family.hpp"
#include "gpu_support.hpp"

namespace gemmtune {
namespace {

std::vector<unsigned char> bytes_of(const DeviceBuffer& buffer) {
  std::vector<unsigned char> out(buffer.bytes());
  GT_CU(cuMemcpyDtoH(out.data(), buffer.ptr(), out.size()));
  return out;
}

class Epilogues : public test::GpuTest {
 protected:
  Library library_for(const std::string& family) {
    Options o;
    o.db_path = (dir_ / "none.db").string();  // nothing tuned: each family's default
    o.cache_dir = (dir_ / "cache").string();
    o.families = family;
    return Library(o);
  }
  test::TempDir dir_;
};

Problem with_epilogue(Problem p, const char* epilogue) {
  p.epilogue = parse_epilogue(epilogue);
  return p;
}

const char* const kEpilogues[] = {"bias",      "bias_n",          "relu",      "bias,gelu",
                                  "gelu_tanh", "bias_n,silu",     "bias,relu", "silu",
                                  "bias,silu", "bias_n,gelu_tanh"};

// Each family on problems it serves, odd sizes and its own paths: wgmma's TMA and register
// stores and its swapped decode tiles, mma_sm80, gemv's two orientations, simt's f32.
TEST_F(Epilogues, EveryFamilyAppliesEveryEpilogue) {
  if (IsSkipped()) return;
  const std::vector<std::tuple<std::string, Problem>> cases = {
      {"wgmma_sm90", make_problem(DType::bf16, Op::T, Op::N, 1000, 520, 300)},
      {"wgmma_sm90", make_problem(DType::bf16, Op::T, Op::N, 300, 70, 200)},
      {"wgmma_sm90", make_problem(DType::f16, Op::N, Op::N, 4096, 16, 512)},
      {"mma_sm80", make_problem(DType::bf16, Op::N, Op::T, 333, 190, 260)},
      {"gemv", make_problem(DType::bf16, Op::T, Op::N, 1000, 1, 300)},
      {"gemv", make_problem(DType::f16, Op::N, Op::N, 1, 700, 300)},
      {"simt", make_problem(DType::f32, Op::N, Op::N, 150, 130, 70)},
  };
  for (const auto& [family, plain] : cases) {
    if (!why_unsupported(find_family(family), plain, device_.arch).empty()) continue;
    Library lib = library_for(family);
    for (const char* e : kEpilogues)
      for (const float beta : {0.0f, 0.5f}) {
        Problem p = with_epilogue(plain, e);
        p.reads_c = beta != 0.0f;
        const Verdict v = check_library(lib, p, 1.25f, beta);
        EXPECT_TRUE(v.ok) << family << " " << p.describe() << ": " << v.message;
      }
  }
}

// Gated epilogues on wgmma_sm90, mma_sm80, gemv (one token) and simt (f32): decode (wgmma's
// SWAP) and prefill tiles, both layouts, ragged D rows (M / 2 not a multiple of 64), the bias
// along M and N, through the library's default and a sample of the family's space (every
// candidate as the tuner checks it; gemv's on one token, split K among them).
TEST_F(Epilogues, GatedEpiloguesMultiplyTheActivatedGateByUp) {
  if (IsSkipped()) return;
  const char* const gated[] = {"swiglu", "bias,geglu", "swiglu,interleaved", "bias_n,reglu",
                               "bias,geglu_tanh,interleaved"};
  for (const std::string name : {"wgmma_sm90", "mma_sm80", "gemv", "simt"}) {
    const DType type = name == "simt" ? DType::f32 : DType::bf16;
    Library lib = library_for(name);
    const Family& family = find_family(name);
    for (const auto& [m, n, k] : {std::tuple{22016, 8, 512},
                                  {300, 70, 200},
                                  {4096, 520, 384},
                                  {2000, 1, 300},
                                  {22016, 1, 4096},
                                  {1000, 300, 700}})
      for (const char* e : gated) {
        Problem p = with_epilogue(make_problem(type, Op::T, Op::N, m, n, k), e);
        p.ldc = p.output_rows() + 3;
        if (!why_unsupported(family, p, device_.arch).empty()) continue;
        const Verdict v = check_library(lib, p, 1.25f, 0.0f);
        EXPECT_TRUE(v.ok) << name << " " << p.describe() << ": " << v.message;
      }
    // A sample of the space: the tuner's candidates, each checked as the tuner would.
    for (const char* e : {"bias,swiglu,interleaved", "bias,swiglu"}) {
      const int64_t n = name == "gemv" ? 1 : 300;
      Problem p = with_epilogue(
          make_problem(name == "simt" ? DType::f32 : DType::f16, Op::T, Op::N, 1000, n, 700), e);
      p.ldc = p.output_rows();
      if (!why_unsupported(family, p, device_.arch).empty()) continue;
      const Pruning space = family.prune(p, device_.arch);
      ASSERT_FALSE(space.valid.empty()) << name;
      for (size_t i = 0; i < space.valid.size();
           i += std::max<size_t>(1, space.valid.size() / 12)) {
        const KernelConfig& c = space.valid[i];
        const ReadyKernel k = prepare_kernel(compiler_, c, p, device_.arch);
        const Verdict v = check(k, p, 1.0f, 0.0f);
        EXPECT_TRUE(v.ok) << family.kernel_name(c) << " " << e << ": " << v.message;
      }
    }
  }
}

// A residual add: D = alpha AB + C + bias into D's own buffer; C keeps its values.
TEST_F(Epilogues, DOfItsOwnLeavesCAsItWas) {
  if (IsSkipped()) return;
  for (const std::string family : {"wgmma_sm90", "mma_sm80", "gemv", "simt"}) {
    Problem p = with_epilogue(make_problem(family == "simt" ? DType::f32 : DType::bf16, Op::T,
                                           Op::N, 512, family == "gemv" ? 1 : 256, 384),
                              "bias");
    p.reads_c = true;
    if (!why_unsupported(find_family(family), p, device_.arch).empty()) continue;
    Library lib = library_for(family);
    const ProblemData d(p, *checker_, 21, stream_->get());
    d.reset_c(*checker_, 1.0f, stream_->get());
    DeviceBuffer out(d.c.bytes());
    checker_->poison(out.ptr(), int64_t(out.bytes()) / element_bytes(p.types.d), p.types.d,
                     stream_->get());
    MatmulDesc desc{p.types, p.scaling, p.op_a, p.op_b};
    desc.epilogue = p.epilogue;
    desc.bias = reinterpret_cast<const void*>(d.bias.ptr());
    desc.d = reinterpret_cast<void*>(out.ptr());
    lib.matmul(desc, p.m, p.n, p.k, 1.0f, reinterpret_cast<const void*>(d.a.ptr()), p.lda,
               reinterpret_cast<const void*>(d.b.ptr()), p.ldb, 1.0f,
               reinterpret_cast<void*>(d.c.ptr()), p.ldc, reinterpret_cast<Stream>(stream_->get()));
    const int64_t points = p.m * p.n;
    DeviceBuffer ref(size_t(points) * 8), scale(size_t(points) * 8);
    CheckArgs args = check_args(d, 1.0f, 1.0f);
    args.ref = ref.ptr();
    args.scale = scale.ptr();
    args.points = int(points);
    checker_->reference(args, stream_->get());
    args.out = out.ptr();
    const Verdict v = checker_->compare(args, stream_->get());
    EXPECT_TRUE(v.ok) << family << ": " << v.message;
    stream_->synchronize();
    EXPECT_EQ(bytes_of(d.c), bytes_of(d.c_init)) << family << ": C was written";
  }
}

}  // namespace
}  // namespace gemmtune
