// Epilogues (bias, activation) in every family's store, checked against the fp64 reference of
// the same formula; D in a buffer of its own leaves C as it was.
#include <cmath>
#include <cstring>
#include <functional>
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
  // Each epilogue on each (family, problem) the GPU's family serves, through the library's default,
  // with beta 0 and 0.5.
  void check_every_epilogue(const std::vector<std::tuple<std::string, Problem>>& cases,
                            const std::vector<const char*>& epilogues) {
    for (const auto& [family, plain] : cases) {
      if (!why_unsupported(find_family(family), plain, device_.arch).empty()) continue;
      Library lib = library_for(family);
      for (const char* e : epilogues)
        for (const float beta : {0.0f, 0.5f}) {
          Problem p = plain;
          p.epilogue = parse_epilogue(e);
          p.reads_c = beta != 0.0f;
          const Verdict v = check_library(lib, p, 1.25f, beta);
          EXPECT_TRUE(v.ok) << family << " " << p.describe() << ": " << v.message;
        }
    }
  }
  test::TempDir dir_;
};

Problem with_epilogue(Problem p, const char* epilogue) {
  p.epilogue = parse_epilogue(epilogue);
  return p;
}

const std::vector<const char*> kEpilogues = {
    "bias",        "bias_n",    "relu", "bias,gelu", "gelu_tanh",
    "bias_n,silu", "bias,relu", "silu", "bias,silu", "bias_n,gelu_tanh"};

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
  check_every_epilogue(cases, kEpilogues);
}

// The pre-activation as a second output (aux) beside D in every family, both beta paths, odd
// sizes and ld > rows (the verifier's smaller problem), through the default and a sample of the
// space (wgmma's TMA stores with beta = 0, 16-bit and f32 D, and register stores); each output
// checked against its own reference, and NaN-poisoned before the run.
TEST_F(Epilogues, ThePreActivationOutputIsKeptBesideD) {
  if (IsSkipped()) return;
  const std::vector<std::tuple<std::string, Problem>> cases = {
      {"wgmma_sm90", make_problem(DType::bf16, Op::T, Op::N, 1000, 520, 300)},
      {"wgmma_sm90", make_problem(DType::bf16, Op::T, Op::N, 2048, 2048, 1024)},
      {"wgmma_sm90", make_problem(parse_data_types("f16*f16->f32"), Op::T, Op::N, 1000, 520, 300)},
      {"wgmma_sm90", make_problem(DType::f16, Op::N, Op::N, 4096, 16, 512)},
      {"mma_sm80", make_problem(DType::bf16, Op::N, Op::T, 333, 190, 260)},
      {"gemv", make_problem(DType::bf16, Op::T, Op::N, 1000, 1, 300)},
      {"gemv", make_problem(DType::f16, Op::N, Op::N, 1, 700, 300)},
      {"simt", make_problem(DType::f32, Op::N, Op::N, 150, 130, 70)},
  };
  check_every_epilogue(cases,
                       {"bias,gelu,aux", "relu,aux", "bias_n,silu,aux", "bias,gelu_tanh,aux"});
  for (const std::string name : {"wgmma_sm90", "mma_sm80"}) {
    const Problem p =
        with_epilogue(make_problem(DType::bf16, Op::T, Op::N, 1000, 300, 700), "bias,gelu,aux");
    const Family& family = find_family(name);
    if (!why_unsupported(family, p, device_.arch).empty()) continue;
    const Pruning space = family.prune(p, device_.arch);
    ASSERT_FALSE(space.valid.empty()) << name;
    for (size_t i = 0; i < space.valid.size(); i += std::max<size_t>(1, space.valid.size() / 12)) {
      const KernelConfig& c = space.valid[i];
      const Verdict v = check(prepare_kernel(compiler_, c, p, device_.arch), p, 1.0f, 0.0f);
      EXPECT_TRUE(v.ok) << family.kernel_name(c) << ": " << v.message;
    }
  }
}

// A kernel that writes D alone (the plain epilogue's kernel run on an aux problem) leaves the
// pre-activation output NaN: the verifier says so.
TEST_F(Epilogues, AKernelThatSkipsThePreActivationIsCaught) {
  if (IsSkipped()) return;
  const Problem p =
      with_epilogue(make_problem(DType::bf16, Op::T, Op::N, 1000, 520, 300), "bias,gelu,aux");
  Problem without = p;
  without.epilogue.aux = false;
  const Family& family = find_family("wgmma_sm90");
  if (!why_unsupported(family, p, device_.arch).empty()) return;
  const ReadyKernel k = prepare_kernel(compiler_, family.default_config(without, device_.arch),
                                       without, device_.arch);
  const Verifier verifier(*checker_, p, 1.0f, 0.0f, 5, stream_->get());
  const Verdict v = verifier.verify(
      [&](const Problem& q, GemmOperands ops, CUstream s) {
        Problem plain = q;
        plain.epilogue.aux = false;
        const LaunchPlan g = family.plan(k.config, plain, device_.arch);
        workspaces_.provide(s, g, ops);
        k.run(g, plain, ops, s);
      },
      stream_->get(), k.plan.reads_c);
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.message.find("pre-activation"), std::string::npos) << v.message;
}

// Gated epilogues on wgmma_sm90, mma_sm80, gemv (one token) and simt (f32): decode (wgmma's
// SWAP) and prefill tiles (1000x3000x5000: a cluster that shares B), both layouts, ragged D rows
// (M / 2 not a multiple of 64), the bias along M and N, through the library's default and a
// sample of the family's space (every candidate as the tuner checks it; gemv's on one token,
// split K among them).
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
                                  {1000, 300, 700},
                                  {1000, 3000, 5000}})
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

// A 16-bit value's float (f16: sign, 5-bit exponent, 10-bit fraction; bf16: f32's high half).
double decode_16bit(uint16_t bits, DataType type) {
  if (type == DataType::bf16) {
    const uint32_t word = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &word, 4);
    return f;
  }
  const int exponent = (bits >> 10) & 31, fraction = bits & 1023;
  const double magnitude =
      exponent == 0 ? std::ldexp(fraction, -24) : std::ldexp(1024 + fraction, exponent - 25);
  return bits & 0x8000 ? -magnitude : magnitude;
}

// An activation's exact value, the forms free of cancellation in the negative tail: GELU's
// v Phi(v) through erfc, GELU's tanh form and SiLU as v sigmoid(x) (0.5 (1 + tanh(z)) is
// sigmoid(2z)).
double exact_activation(const std::string& activation, double v) {
  if (activation == "gelu") return 0.5 * v * std::erfc(-v / std::sqrt(2.0));
  const double x = activation == "silu" ? v : 1.5957691216057308 * (v + 0.044715 * v * v * v);
  return v / (1.0 + std::exp(-x));
}

// An ulp of a 16-bit type at x (subnormal spacing below the smallest normal).
double ulp_of(double x, DataType type) {
  const int mantissa = type == DataType::f16 ? 10 : 7;
  const int min_exponent = type == DataType::f16 ? -14 : -126;
  return std::ldexp(1.0, std::max(std::ilogb(x == 0 ? 1e-300 : x), min_exponent) - mantissa);
}

// Every f16 and bf16 value of magnitude up to 12 in A's column, K = 1 and B = 1, so that each
// pre-activation is the value itself, through the stores of wgmma_sm90, mma_sm80 and gemv: each of
// D's values is within `slack(v)` of its exact activation, past an ulp of its type. The largest
// error is printed in ulps. (The verifier's tolerance, scaled to a GEMM's sums, is far looser.)
class SixteenBitActivations : public Epilogues {
 protected:
  void expect_within(const std::string& activation, const std::function<double(double)>& slack) {
    for (const DataType type : {DataType::f16, DataType::bf16})
      for (const std::string family : {"wgmma_sm90", "mma_sm80", "gemv"}) {
        std::vector<uint16_t> values;
        for (uint32_t bits = 0; bits < 0x10000; ++bits) {
          const double v = decode_16bit(uint16_t(bits), type);
          if (std::isfinite(v) && std::fabs(v) <= 12.0) values.push_back(uint16_t(bits));
        }
        while (values.size() % 8) values.push_back(0);  // a whole number of 16-byte columns
        const int64_t m = int64_t(values.size()), n = family == "gemv" ? 1 : 192;
        Problem p = with_epilogue(make_problem(DataTypes::uniform(type), Op::N, Op::N, m, n, 1),
                                  activation.c_str());
        p.ldb = 8;  // B's columns 16 bytes apart
        if (!why_unsupported(find_family(family), p, device_.arch).empty()) continue;
        const std::vector<uint16_t> out = run_with_ones(family, p, values);
        int wrong = 0;
        double worst = 0;
        for (size_t e = 0; e < out.size(); ++e) {
          const double v = decode_16bit(values[e % size_t(m)], type);
          const double exact = exact_activation(activation, v);
          const double error = std::fabs(decode_16bit(out[e], type) - exact);
          worst = std::max(worst, error / ulp_of(exact, type));
          if (error > ulp_of(exact, type) + slack(v) && wrong++ < 5)
            ADD_FAILURE() << family << " " << p.describe() << ": " << activation << "(" << v
                          << ") = " << decode_16bit(out[e], type) << ", exactly " << exact;
        }
        EXPECT_EQ(wrong, 0) << family << " " << p.describe();
        std::printf("%s %s %s: largest error %.3g ulp\n", family.c_str(),
                    std::string(to_string(type)).c_str(), activation.c_str(), worst);
      }
  }

  // D = act(A B) for K = 1, B's values ones, by the family's default.
  std::vector<uint16_t> run_with_ones(const std::string& family, const Problem& p,
                                      const std::vector<uint16_t>& a_values) {
    Library lib = library_for(family);
    DeviceBuffer a(size_t(p.m) * 2), b(size_t(p.ldb * p.n) * 2), d(size_t(p.m * p.n) * 2);
    const std::vector<uint16_t> ones(size_t(p.ldb * p.n),
                                     p.types.a == DataType::f16 ? 0x3c00 : 0x3f80);
    GT_CU(cuMemcpyHtoDAsync(a.ptr(), a_values.data(), a.bytes(), stream_->get()));
    GT_CU(cuMemcpyHtoDAsync(b.ptr(), ones.data(), b.bytes(), stream_->get()));
    MatmulDesc desc{p.types, p.scaling, p.op_a, p.op_b};
    desc.epilogue = p.epilogue;
    lib.matmul(desc, p.m, p.n, 1, 1.0f, reinterpret_cast<const void*>(a.ptr()), p.m,
               reinterpret_cast<const void*>(b.ptr()), p.ldb, 0.0f,
               reinterpret_cast<void*>(d.ptr()), p.m, reinterpret_cast<Stream>(stream_->get()));
    stream_->synchronize();
    std::vector<uint16_t> out(size_t(p.m * p.n));
    GT_CU(cuMemcpyDtoH(out.data(), d.ptr(), d.bytes()));
    return out;
  }
};

// GELU (erf): an erfc of a fitted polynomial (EpilogueOp::gelu_erfc), within an ulp everywhere.
TEST_F(SixteenBitActivations, GeluIsWithinAnUlpOfExact) {
  if (IsSkipped()) return;
  expect_within("gelu", [](double) { return 0.0; });
}

// GELU's tanh form and SiLU: v (1 + t) / 2 with one tanh.approx t (PTX: error about 2^-11), so
// within about |v| 2^-12 past the ulp (checked with twice that): in the negative tail, where D is
// small, many of D's ulps.
TEST_F(SixteenBitActivations, TanhFormsAreWithinTheirTanhsError) {
  if (IsSkipped()) return;
  for (const char* activation : {"gelu_tanh", "silu"})
    expect_within(activation, [](double v) { return std::ldexp(std::fabs(v), -11); });
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
