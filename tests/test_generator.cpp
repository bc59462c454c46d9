// generator/: problems, configurations, search spaces, emission.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include "fault_injection_family.hpp"
#include "gemmtune/generator/family.hpp"
#include "gemmtune/generator/util.hpp"
#include "gemmtune/tuner/checker.hpp"
#include "gemmtune/tuner/tuner.hpp"
#include "raster.h"
#include "scale_layout.h"
#include "support.hpp"

namespace gemmtune {
namespace {

Problem square(int64_t n, DType d = DType::f32) {
  return make_problem(d, Op::N, Op::N, n, n, n);
}

template <class F>
std::string error_of(F&& f, Errc expected) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), expected) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no exception";
  return {};
}

TEST(Problem, ValidationNamesTheBadField) {
  Problem p = square(64);
  p.m = 0;
  EXPECT_NE(error_of([&] { validate(p); }, Errc::invalid_argument).find("M must be at least 1"),
            std::string::npos);
  p = square(64);
  p.k = -5;
  EXPECT_NE(error_of([&] { validate(p); }, Errc::invalid_argument).find("K must be at least 1"),
            std::string::npos);
  p = make_problem(DType::f32, Op::T, Op::N, 64, 32, 100);
  p.lda = 99;  // A is stored K x M when transposed: lda >= K
  EXPECT_NE(error_of([&] { validate(p); }, Errc::invalid_argument).find("lda (99)"),
            std::string::npos);
  p = square(64);
  p.ldc = 63;
  EXPECT_NE(error_of([&] { validate(p); }, Errc::invalid_argument).find("ldc (63)"),
            std::string::npos);
  p = square(64);
  p.m = int64_t(1) << 32;
  p.lda = p.ldc = p.m;
  EXPECT_NE(error_of([&] { validate(p); }, Errc::invalid_argument).find("at most 2^30"),
            std::string::npos);
}

TEST(Problem, FastAccumulationIsForTensorOrRowScaledFloat8) {
  Problem p = make_problem(DataTypes{DType::e4m3, DType::e4m3, DType::bf16, DType::bf16}, Op::T,
                           Op::N, 256, 128, 512);
  p.scaling = Scaling::tensor;
  p.accumulation = parse_accumulation("FAST");
  validate(p);
  EXPECT_EQ(p.describe().substr(p.describe().find("scaling")), "scaling=tensor accum=fast");
  Problem precise = p;
  precise.accumulation = Accumulation::precise;
  EXPECT_NE(p, precise);  // tuned and stored apart
  EXPECT_NE(ProblemHash{}(p), ProblemHash{}(precise));
  p.scaling = Scaling::row;
  validate(p);
  p.scaling = Scaling::block;
  EXPECT_NE(error_of([&] { validate(p); }, Errc::invalid_argument)
                .find("fast accumulation is for float8 with tensor or row scaling, not scaling "
                      "block"),
            std::string::npos);
  Problem dense = square(64);
  dense.accumulation = Accumulation::fast;
  error_of([&] { validate(dense); }, Errc::invalid_argument);
  error_of([] { parse_accumulation("quick"); }, Errc::invalid_argument);
}

// A grouped float8 problem (an MoE layer's experts) holds its groups' scales of A one after
// another, each group's in one GEMM's layout, as the kernels and the verifier read them
// (scale_layout.h); B's scales cover all the columns, as one GEMM's.
TEST(Problem, GroupedScalesOfAAreTheGroupsOneAfterAnother) {
  for (Scaling scaling : {Scaling::tensor, Scaling::row, Scaling::block}) {
    Problem one = make_problem(DataTypes{DType::e4m3, DType::e4m3, DType::bf16, DType::bf16}, Op::T,
                               Op::N, 4000, 300, 7000);
    one.scaling = scaling;
    Problem grouped = one;
    grouped.groups = 32;
    grouped.n = 32 * 300;
    grouped.ldb = grouped.k;
    validate(grouped);
    const ScaleShape a = scale_shape_a(grouped), b = scale_shape_b(grouped);
    EXPECT_EQ(a.rows, scale_shape_a(one).rows) << to_string(scaling);
    EXPECT_EQ(a.cols, 32 * scale_shape_a(one).cols) << to_string(scaling);
    EXPECT_EQ(a.count() / 32, gemmtune_scales_a_per_group(int(scaling), grouped.m, grouped.k))
        << to_string(scaling);
    EXPECT_EQ(b.count(), scale_shape_b(grouped).count());
    EXPECT_EQ(b.rows * b.cols, scaling == Scaling::tensor ? 1
                               : scaling == Scaling::row  ? grouped.n
                                                          : grouped.n * 55);
  }
  EXPECT_EQ(gemmtune_scales_a_per_group(3, 4000, 7000), 32 * 55);
  EXPECT_EQ(gemmtune_scales_a_per_group(0, 4000, 7000), 0);
}

// tf32 and 3xtf32 are how an f32 problem is computed: each is another problem, shown by
// describe(), and only f32 problems have one other than exact.
TEST(Problem, PrecisionNamesParseBackAndArePartOfTheIdentityOfF32Problems) {
  for (Precision precision : {Precision::exact, Precision::tf32, Precision::tf32x3})
    EXPECT_EQ(parse_precision(to_string(precision)), precision);
  EXPECT_EQ(to_string(Precision::tf32x3), "3xtf32");
  EXPECT_EQ(parse_precision("TF32"), Precision::tf32);
  EXPECT_NE(error_of([] { parse_precision("tf16"); }, Errc::invalid_argument)
                .find("unknown precision 'tf16' (expected exact, tf32 or 3xtf32)"),
            std::string::npos);

  Problem p = square(256);
  p.precision = Precision::tf32;
  validate(p);
  EXPECT_EQ(p.describe(), "f32 nn 256x256x256 lda=256 ldb=256 ldc=256 align=16 precision=tf32");
  EXPECT_EQ(square(256).describe().find("precision"), std::string::npos) << "exact says nothing";
  Problem three = p;
  three.precision = Precision::tf32x3;
  EXPECT_NE(p, three);  // tuned and stored apart
  EXPECT_NE(p, square(256));
  EXPECT_NE(ProblemHash{}(p), ProblemHash{}(three));
  EXPECT_NE(ProblemHash{}(p), ProblemHash{}(square(256)));

  Problem dense = square(256, DType::bf16);
  dense.precision = Precision::tf32;
  EXPECT_NE(error_of([&] { validate(dense); }, Errc::invalid_argument)
                .find("precision tf32 is for f32 operands, accumulator and output, not bf16"),
            std::string::npos);
}

// Which family serves an f32 problem of each precision, by architecture: exact is simt's
// everywhere; tf32 goes to the tensor cores (wgmma on sm_90a, mma.sync from sm_80); 3xtf32 too,
// except on sm_86 and sm_89, whose CUDA cores outrun three tf32 products (mma_sm80 says so).
TEST(Problem, EachPrecisionOfF32GoesToTheFamilyThatComputesItFastest) {
  auto first = [](Precision precision, const char* arch) {
    Problem p = square(512);
    p.precision = precision;
    return std::string(families_for(p, ArchInfo::from_name(arch)).at(0)->name());
  };
  for (const char* arch : {"sm_80", "sm_86", "sm_89", "sm_90a"})
    EXPECT_EQ(first(Precision::exact, arch), "simt") << arch;
  EXPECT_EQ(first(Precision::tf32, "sm_90a"), "wgmma_sm90");
  EXPECT_EQ(first(Precision::tf32x3, "sm_90a"), "wgmma_sm90");
  for (const char* arch : {"sm_80", "sm_86", "sm_89", "sm_90"})
    EXPECT_EQ(first(Precision::tf32, arch), "mma_sm80") << arch;
  EXPECT_EQ(first(Precision::tf32x3, "sm_80"), "mma_sm80");
  EXPECT_EQ(first(Precision::tf32x3, "sm_90"), "mma_sm80");
  for (const char* arch : {"sm_86", "sm_89"}) {
    EXPECT_EQ(first(Precision::tf32x3, arch), "simt") << arch;
    Problem p = square(512);
    p.precision = Precision::tf32x3;
    EXPECT_NE(find_family("mma_sm80")
                  .unsupported_reason(p, ArchInfo::from_name(arch))
                  .find("run slower than f32 on its CUDA cores"),
              std::string::npos)
        << arch;
  }
}

TEST(Problem, EpilogueNamesParseBackAndArePartOfTheIdentity) {
  for (const char* text : {"none", "bias", "bias_n", "relu", "gelu", "gelu_tanh", "silu",
                           "bias,gelu", "bias_n,silu", "bias,relu", "bias,gelu_tanh"})
    EXPECT_EQ(parse_epilogue(text).name(), text);
  EXPECT_EQ(parse_epilogue("GELU,Bias").name(), "bias,gelu");  // any order, any case
  EXPECT_EQ(parse_epilogue("bias_m").name(), "bias");
  EXPECT_TRUE(parse_epilogue("").none());
  EXPECT_TRUE(parse_epilogue("identity").none());
  EXPECT_NE(error_of([] { parse_epilogue("bias,swish"); }, Errc::invalid_argument).find("'swish'"),
            std::string::npos);
  error_of([] { parse_epilogue("bias,bias_n"); }, Errc::invalid_argument);
  error_of([] { parse_epilogue("relu,gelu"); }, Errc::invalid_argument);
  error_of([] { parse_epilogue("bias,"); }, Errc::invalid_argument);

  Problem p = make_problem(DType::bf16, Op::T, Op::N, 4096, 16, 4096);
  Problem fused = p;
  fused.epilogue = parse_epilogue("bias,gelu");
  validate(fused);
  EXPECT_NE(p, fused);
  EXPECT_NE(ProblemHash{}(p), ProblemHash{}(fused));
  EXPECT_NE(fused.describe().find(" epilogue=bias,gelu"), std::string::npos);
  EXPECT_EQ(p.describe().find("epilogue"), std::string::npos);
  // The bias is read once: M values of D's type.
  EXPECT_EQ(fused.operand_bytes() - p.operand_bytes(), 4096.0 * 2);
  Problem grouped = fused;
  grouped.groups = 8;
  grouped.n = 64;
  grouped.ldc = grouped.m;
  EXPECT_NE(error_of([&] { validate(grouped); }, Errc::invalid_argument)
                .find("grouped problems with an epilogue"),
            std::string::npos);
}

// Kernels count rows, columns and tiles in int: dimensions stop at 2^30, where every such count
// and bound still fits; element offsets are 64-bit, so operands may be far larger than 2^31.
TEST(Problem, SizesPast2To31AreAcceptedWhereKernelsAre64BitAndRefusedElsewhere) {
  EXPECT_NO_THROW(
      validate(make_problem(DType::bf16, Op::N, Op::N, 8192, 8, 300000)));  // A: 2.5e9 elements
  EXPECT_NO_THROW(validate(make_problem(DType::f32, Op::T, Op::N, kMaxDimension, 2, 2)));
  for (Problem p : {make_problem(DType::f32, Op::N, Op::N, kMaxDimension + 1, 1, 1),
                    make_problem(DType::f32, Op::N, Op::N, 1, kMaxDimension + 1, 1),
                    make_problem(DType::bf16, Op::T, Op::T, 1, 1, int64_t(1) << 31)})
    EXPECT_NE(error_of([&] { validate(p); }, Errc::invalid_argument)
                  .find("must be at most 2^30 = 1073741824"),
              std::string::npos);
  // A leading dimension may exceed 2^31 (it is 64-bit everywhere), not the size of memory.
  Problem wide = make_problem(DType::bf16, Op::N, Op::N, 64, 64, 2);
  wide.lda = (int64_t(1) << 31) + 64;
  EXPECT_NO_THROW(validate(wide));
  wide.lda = int64_t(1) << 62;
  EXPECT_NE(error_of([&] { validate(wide); }, Errc::invalid_argument)
                .find("A spans more than 2^62 bytes"),
            std::string::npos);
  Problem tall_c = make_problem(DType::f32, Op::N, Op::N, 64, 3, 2);
  tall_c.ldc = int64_t(1) << 61;
  EXPECT_NE(error_of([&] { validate(tall_c); }, Errc::invalid_argument).find("C spans"),
            std::string::npos);
}

// A grid holds 2^31 - 1 blocks: a count past that is refused, never wrapped to a small grid.
TEST(LaunchPlan, GridsThatWouldOverflowAreRefused) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Problem huge = make_problem(DType::f32, Op::N, Op::N, kMaxDimension, kMaxDimension, 1);
  const Family& simt = find_family("simt");
  const KernelConfig c = simt.default_config(huge, arch);
  EXPECT_NE(error_of([&] { simt.plan(c, huge, arch); }, Errc::invalid_argument)
                .find("more than a grid holds"),
            std::string::npos);
  const Problem big = make_problem(DType::f32, Op::N, Op::N, kMaxDimension, 64, 1);
  EXPECT_EQ(simt.plan(c, big, arch).grid[0], uint32_t(kMaxDimension / c.at("BM")));
  const Family& wgmma = find_family("wgmma_sm90");
  const Problem huge16 = make_problem(DType::bf16, Op::N, Op::N, kMaxDimension, kMaxDimension, 1);
  // No configuration is valid there (its schedule's int bounds): take one of a real problem.
  KernelConfig w =
      wgmma.default_config(make_problem(DType::bf16, Op::N, Op::N, 4096, 4096, 4096), arch);
  for (int64_t ws : {0, 1}) {
    w.params["WS"] = ws;
    EXPECT_NE(error_of([&] { wgmma.plan(w, huge16, arch); }, Errc::invalid_argument)
                  .find("more than a grid"),
              std::string::npos);
  }
  EXPECT_EQ(grid_extent((int64_t(1) << 31) - 1), uint32_t((int64_t(1) << 31) - 1));
  error_of([] { grid_extent(int64_t(1) << 31); }, Errc::invalid_argument);
}

TEST(Problem, TightLeadingDimensionsFollowTheOps) {
  const Problem p = make_problem(DType::bf16, Op::T, Op::T, 100, 200, 300);
  EXPECT_EQ(p.lda, 300);  // A stored K x M
  EXPECT_EQ(p.ldb, 200);  // B stored N x K
  EXPECT_EQ(p.ldc, 100);
  EXPECT_EQ(p.layout(), "tt");
  EXPECT_NO_THROW(validate(p));
}

TEST(Problem, AlignmentClass) {
  EXPECT_EQ(
      alignment_class(DataTypes::uniform(DType::f32), nullptr, nullptr, nullptr, 1024, 1024, 1024),
      16);
  EXPECT_EQ(
      alignment_class(DataTypes::uniform(DType::f32), nullptr, nullptr, nullptr, 1023, 1024, 1024),
      4);
  EXPECT_EQ(
      alignment_class(DataTypes::uniform(DType::bf16), nullptr, nullptr, nullptr, 1026, 1024, 1024),
      4);
  EXPECT_EQ(
      alignment_class(DataTypes::uniform(DType::bf16), nullptr, nullptr, nullptr, 1025, 1024, 1024),
      2);
  EXPECT_EQ(alignment_class(DataTypes::uniform(DType::f32), reinterpret_cast<void*>(0x1008),
                            nullptr, nullptr, 64, 64, 64),
            8);
  EXPECT_EQ(make_problem(DType::f32, Op::N, Op::N, 17, 33, 65).align, 4);
  // A call with D of its own: C counts only where it is read.
  const DataTypes bf16 = DataTypes::uniform(DType::bf16);
  const void* c2 = reinterpret_cast<void*>(0x1002);
  const void* d16 = reinterpret_cast<void*>(0x2000);
  EXPECT_EQ(alignment_class(bf16, nullptr, nullptr, c2, nullptr, false, 64, 64, 64), 2);
  EXPECT_EQ(alignment_class(bf16, nullptr, nullptr, c2, d16, false, 64, 64, 64), 16);
  EXPECT_EQ(alignment_class(bf16, nullptr, nullptr, c2, d16, true, 64, 64, 64), 2);
  EXPECT_EQ(alignment_class(bf16, nullptr, nullptr, d16, reinterpret_cast<void*>(0x3004), false, 64,
                            64, 64),
            4);
}

TEST(Problem, ParsingRejectsUnknownNames) {
  EXPECT_EQ(parse_data_type("BF16"), DType::bf16);
  EXPECT_EQ(parse_data_type("fp32"), DType::f32);
  error_of([] { parse_data_type("f64"); }, Errc::invalid_argument);
  error_of([] { parse_op('x'); }, Errc::invalid_argument);
  error_of([] { ArchInfo::from_name("sm_75x"); }, Errc::invalid_argument);
  EXPECT_EQ(ArchInfo::from_name("sm_90a").name(), "sm_90a");
  EXPECT_EQ(ArchInfo::from_name("sm_80").smem_per_block, 163 * 1024);
}

TEST(KernelConfig, JsonRoundTrip) {
  const Family& f = find_family("simt");
  const KernelConfig c = f.default_config(make_problem(DType::f32, Op::T, Op::N, 512, 256, 128),
                                          ArchInfo::from_name("sm_90a"));
  const KernelConfig back = KernelConfig::from_json(c.to_json());
  EXPECT_EQ(back, c);
  error_of([] { KernelConfig::from_json("{\"family\": 3}"); }, Errc::invalid_argument);
  error_of([] { KernelConfig::from_json("not json"); }, Errc::invalid_argument);
}

// Gated epilogues (SwiGLU, GeGLU): named by their activation, D of half op(A)'s rows, no C.
// aux (the pre-activation as a second output) is a part of its own, last in the name, for an
// activation that is not gated; a kernel of its own.
TEST(Problem, APreActivationOutputIsAnEpilogueOfItsOwn) {
  for (const char* text : {"bias,gelu,aux", "relu,aux", "bias_n,silu,aux", "gelu_tanh,aux"})
    EXPECT_EQ(parse_epilogue(text).name(), text);
  EXPECT_EQ(parse_epilogue("aux,GELU,bias").name(), "bias,gelu,aux");
  EXPECT_TRUE(parse_epilogue("bias,gelu,aux").aux);
  EXPECT_FALSE(parse_epilogue("bias,gelu,aux").none());
  for (const char* text : {"aux", "bias,aux", "swiglu,aux", "gelu,aux,aux"})
    EXPECT_NE(error_of([&] { parse_epilogue(text); }, Errc::invalid_argument).find("aux"),
              std::string::npos)
        << text;
  Problem p = make_problem(DType::bf16, Op::T, Op::N, 4096, 16, 4096);
  p.epilogue = parse_epilogue("bias,gelu");
  Problem kept = p;
  kept.epilogue.aux = true;
  validate(kept);
  EXPECT_NE(p, kept);
  EXPECT_NE(ProblemHash{}(p), ProblemHash{}(kept));
  EXPECT_NE(kept.describe().find(" epilogue=bias,gelu,aux"), std::string::npos);
  EXPECT_EQ(kept.operand_bytes() - p.operand_bytes(), 4096.0 * 16 * 2);  // a second D
  // Set field by field (the C API's way), validate() holds the same rule.
  Problem identity = kept;
  identity.epilogue.activation = Activation::identity;
  EXPECT_NE(error_of([&] { validate(identity); }, Errc::invalid_argument).find("aux"),
            std::string::npos);
}

TEST(Problem, GatedEpiloguesHalveDAndReadNoC) {
  for (const char* text : {"swiglu", "geglu", "geglu_tanh", "reglu", "bias,swiglu",
                           "swiglu,interleaved", "bias_n,geglu,interleaved"})
    EXPECT_EQ(parse_epilogue(text).name(), text);
  EXPECT_EQ(parse_epilogue("interleaved,SwiGLU").name(), "swiglu,interleaved");
  EXPECT_EQ(parse_epilogue("swiglu").activation, Activation::silu);
  EXPECT_EQ(parse_epilogue("swiglu").gate, Gate::halves);
  EXPECT_NE(parse_epilogue("swiglu"), parse_epilogue("silu"));
  EXPECT_NE(parse_epilogue("swiglu"), parse_epilogue("swiglu,interleaved"));
  error_of([] { parse_epilogue("swiglu,gelu"); }, Errc::invalid_argument);
  EXPECT_NE(error_of([] { parse_epilogue("gelu,interleaved"); }, Errc::invalid_argument)
                .find("a gated one"),
            std::string::npos);

  Problem p = make_problem(DType::bf16, Op::T, Op::N, 2 * 11008, 16, 4096);
  p.epilogue = parse_epilogue("swiglu");
  p.ldc = 11008;  // D's rows
  validate(p);
  EXPECT_EQ(p.output_rows(), 11008);
  Problem plain = p;
  plain.epilogue = {};
  plain.ldc = p.m;
  EXPECT_EQ(plain.operand_bytes() - p.operand_bytes(), 11008.0 * 16 * 2);  // D is half
  Problem odd = p;
  odd.m = 101;
  EXPECT_NE(error_of([&] { validate(odd); }, Errc::invalid_argument).find("even M"),
            std::string::npos);
  Problem reading = p;
  reading.reads_c = true;
  error_of([&] { validate(reading); }, Errc::invalid_argument);
  Problem narrow = p;
  narrow.ldc = 11007;
  EXPECT_NE(error_of([&] { validate(narrow); }, Errc::invalid_argument).find("M / 2, gated"),
            std::string::npos);
  // wgmma_sm90 and mma_sm80 have gated kernels (wgmma first on Hopper, mma_sm80 from sm_80 on),
  // gemv too with N == 1 and simt for f32, only with the weights stored along K.
  const ArchInfo h100 = ArchInfo::from_name("sm_90a");
  const std::vector<const Family*> families = families_for(p, h100);
  ASSERT_EQ(families.size(), 2u);
  EXPECT_EQ(families[0]->name(), "wgmma_sm90");
  EXPECT_EQ(families[1]->name(), "mma_sm80");
  EXPECT_EQ(families_for(p, ArchInfo::from_name("sm_86")).at(0)->name(), "mma_sm80");
  EXPECT_NE(why_unsupported(find_family("gemv"), p, h100).find("N and M are both > 1"),
            std::string::npos);
  // simt (f32) and gemv (one token) take them with the weights along K, not otherwise.
  Problem exact = p;
  exact.types = DataTypes::uniform(DataType::f32);
  Problem decode = p;
  decode.n = 1;
  for (const auto& [name, q] : {std::pair{"simt", exact}, std::pair{"gemv", decode}}) {
    EXPECT_EQ(why_unsupported(find_family(name), q, h100), "") << name;
    Problem along_m = q;
    along_m.op_a = Op::N;
    along_m.lda = q.m;
    EXPECT_NE(why_unsupported(find_family(name), along_m, h100).find("stored along K"),
              std::string::npos)
        << name;
  }
  Problem nn = make_problem(DType::bf16, Op::N, Op::N, 2048, 16, 4096);
  nn.epilogue = p.epilogue;
  nn.ldc = 1024;
  for (const Family* f : families)
    EXPECT_NE(why_unsupported(*f, nn, h100).find("stored along K"), std::string::npos) << f->name();
  Problem f32 = make_problem(DType::f32, Op::T, Op::N, 2048, 16, 4096);
  f32.epilogue = p.epilogue;
  f32.ldc = 1024;
  f32.precision = Precision::tf32;
  EXPECT_NE(
      why_unsupported(find_family("mma_sm80"), f32, h100).find("no grouped problems or gated"),
      std::string::npos);
}

// Every gated default pairs gate and up rows as the store expects, on decode and prefill shapes.
TEST(Families, WgmmaGatedDefaultsPairGateAndUpRows) {
  const ArchInfo h100 = ArchInfo::from_name("sm_90a");
  const Family& wgmma = find_family("wgmma_sm90");
  for (const auto& [m, n, k] : {std::tuple{22016, 1, 4096},
                                {22016, 8, 4096},
                                {28672, 64, 8192},
                                {8192, 32, 4096},
                                {22016, 4096, 4096},
                                {28672, 2048, 8192},
                                {2000, 300, 700},
                                {768, 128, 768}})
    for (const char* e : {"swiglu", "bias,geglu,interleaved"}) {
      Problem p = make_problem(DType::bf16, Op::T, Op::N, m, n, k);
      p.epilogue = parse_epilogue(e);
      p.ldc = p.output_rows();
      const KernelConfig c = wgmma.default_config(p, h100);
      EXPECT_EQ(wgmma.why_invalid(c, p, h100), "") << p.describe();
      EXPECT_EQ(c.at("EPILOGUE"), 0) << p.describe();
      const Pruning space = wgmma.prune(p, h100);
      EXPECT_GT(space.valid.size(), 10u) << p.describe();
      EXPECT_GT(space.pruned_by.at("gated_gate_and_up_in_turn"), 0) << p.describe();
    }
}

// A pre-activation output doubles the stores: where one round of 256x128 tiles would leave them
// exposed and 128x128 tiles fill two rounds, the default takes 128x128; with short K, 128x128 in
// ping-pong; without aux, where 128x128 tiles would leave a round part empty, and with longer K,
// the tile stays.
TEST(Families, WgmmaAuxDefaultsTakeASecondRoundOfTiles) {
  const ArchInfo h100 = ArchInfo::from_name("sm_90a");
  const Family& wgmma = find_family("wgmma_sm90");
  auto name_of = [&](int64_t m, int64_t n, int64_t k, const char* epilogue) {
    Problem p = make_problem(DType::bf16, Op::N, Op::N, m, n, k);
    p.epilogue = parse_epilogue(epilogue);
    const KernelConfig c = wgmma.default_config(p, h100);
    EXPECT_EQ(why_unusable(c, p, h100), "") << p.describe();
    return wgmma.kernel_name(c);
  };
  EXPECT_EQ(name_of(2048, 2048, 2048, "bias,gelu_tanh,aux"),
            "gemm_wgmma_bf16_nn_128x128x64_s4_wg2_c1x1_ws_rm_tmastore_bias_gelu_tanh_aux");
  EXPECT_EQ(name_of(2048, 2048, 2048, "bias,gelu_tanh"),
            "gemm_wgmma_bf16_nn_256x128x64_s4_wg2_c1x1_ws_rm_tmastore_bias_gelu_tanh");
  // 100 tiles of 256x128, 200 of 128x128: three quarters of two rounds.
  EXPECT_NE(name_of(5120, 640, 5120, "bias,gelu_tanh,aux").find("_256x128x64_"), std::string::npos);
  // K of 16 k-blocks: ping-pong; of 24, the large tile stays.
  EXPECT_EQ(name_of(8192, 8192, 1024, "bias,gelu_tanh,aux"),
            "gemm_wgmma_bf16_nn_128x128x64_s4_wg2_c1x1_pingpong_rm_tmastore_bias_gelu_tanh_aux");
  EXPECT_EQ(name_of(8192, 8192, 1024, "bias,gelu_tanh"),
            "gemm_wgmma_bf16_nn_256x128x64_s4_wg2_c1x2_ws_rm_tmastore_bias_gelu_tanh");
  EXPECT_NE(name_of(8192, 8192, 1536, "bias,gelu_tanh,aux").find("_256x128x64_"),
            std::string::npos);
}

// A configuration carries its problem's epilogue: stored, named, emitted and checked against the
// problem it is used for.
TEST(KernelConfig, TheEpilogueIsStoredNamedEmittedAndMatched) {
  const ArchInfo h100 = ArchInfo::from_name("sm_90a");
  Problem p = make_problem(DType::bf16, Op::T, Op::N, 4096, 256, 4096);
  p.epilogue = parse_epilogue("bias,silu");
  for (const Family* f : families_for(p, h100)) {
    const KernelConfig c = f->default_config(p, h100);
    EXPECT_EQ(c.epilogue, p.epilogue) << f->name();
    EXPECT_EQ(KernelConfig::from_json(c.to_json()), c) << f->name();
    EXPECT_TRUE(f->kernel_name(c).ends_with("_bias_silu")) << f->kernel_name(c);
    EXPECT_NE(
        f->emit(c, h100).find("static constexpr int BIAS = 1, ACTIVATION = 4, GATE = 0, AUX = 0;"),
        std::string::npos)
        << f->name();
    EXPECT_EQ(why_unusable(c, p, h100), "") << f->name();
    Problem plain = p;
    plain.epilogue = {};
    EXPECT_NE(why_unusable(c, plain, h100).find("epilogue bias,silu"), std::string::npos);
  }
  // Without one, the JSON has no "epilogue" key, as before epilogues existed.
  const KernelConfig none = find_family("simt").default_config(square(64), h100);
  EXPECT_EQ(none.to_json().find("epilogue"), std::string::npos);
  EXPECT_TRUE(KernelConfig::from_json(none.to_json()).epilogue.none());
}

// gemmtune 0.1 stored one "dtype" for every operand: such a config reads as those types.
TEST(KernelConfig, AConfigOfOneDtypeReadsAsUniformTypes) {
  const KernelConfig c = KernelConfig::from_json(
      R"({"family":"simt","dtype":"bf16","layout":"tn","params":{"BM":64}})");
  EXPECT_EQ(c.types, DataTypes::uniform(DType::bf16));
  EXPECT_EQ(c.scaling, Scaling::none);
  EXPECT_EQ(c.layout(), "tn");
  EXPECT_EQ(c.at("BM"), 64);
}

// A default-constructed ArchInfo is no GPU: no family takes it for an H100.
TEST(ArchInfo, ADefaultOneIsNoGpu) {
  const ArchInfo none;
  EXPECT_EQ(none.cc, 0);
  EXPECT_TRUE(families_for(square(64), none).empty());
  EXPECT_GT(ArchInfo::from_name("sm_90a").sms, 0);
}

using test::broken_rule;

TEST(SearchSpace, PrunedCandidatesSayWhichConstraint) {
  const Family& f = find_family("simt");
  const Problem p = square(4096);
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  KernelConfig c = f.default_config(p, arch);
  EXPECT_EQ(broken_rule(f, c, p, arch), "");
  c.params["TM"] = 4;  // (WM/TM)*(WN/TN) no longer 32
  EXPECT_EQ(broken_rule(f, c, p, arch), "warp_shape");
  c = f.default_config(p, arch);
  Problem misaligned = p;
  misaligned.align = 4;
  EXPECT_EQ(broken_rule(f, c, misaligned, arch), "vector_alignment");
  c.params["VEC"] = 3;
  EXPECT_NE(f.why_invalid(c, p, arch).find("VEC=3 is not among the values"), std::string::npos);
  c.params.erase("VEC");
  EXPECT_EQ(f.why_invalid(c, p, arch), "parameter VEC is missing");

  const Pruning pruning = f.prune(p, arch);
  EXPECT_EQ(int64_t(pruning.valid.size()) + pruning.pruned(), f.space_summary(p, arch).size());
  EXPECT_GT(pruning.valid.size(), 20u);
  for (const auto& v : pruning.valid) EXPECT_EQ(f.why_invalid(v, p, arch), "");
}

// A structure is the family and the values of the parameters that are not refinements: points
// that differ only in stages, cluster, raster group, epilogue or where block scales come from
// share it; another tile does not.
TEST(SearchSpace, AStructureLeavesOutTheRefinements) {
  const Family& f = find_family("wgmma_sm90");
  const Problem p = make_problem(DType::bf16, Op::N, Op::N, 4096, 4096, 4096);
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  std::set<std::string> refinements;
  for (const auto& param : f.space_summary(p, arch).params)
    if (param.refinement) refinements.insert(param.name);
  EXPECT_EQ(refinements, (std::set<std::string>{"STAGES", "CLUSTER", "GROUP", "EPILOGUE", "KSUB",
                                                "PROMOTE", "OVERLAP", "STAGED_SCALES"}));
  const KernelConfig c = f.default_config(p, arch);
  KernelConfig refined = c, other = c;
  refined.params["STAGES"] = c.at("STAGES") + 1;
  refined.params["CLUSTER"] = 11;
  refined.params["GROUP"] = 16;
  refined.params["EPILOGUE"] = 1 - c.at("EPILOGUE");
  other.params["BN"] = c.at("BN") / 2;
  EXPECT_EQ(f.structure_of(refined), f.structure_of(c));
  EXPECT_NE(f.structure_of(other), f.structure_of(c));
  EXPECT_NE(f.structure_of(c).find("BM=256"), std::string::npos) << f.structure_of(c);
  EXPECT_EQ(f.structure_of(c).find("STAGES"), std::string::npos) << f.structure_of(c);
}

// Fixups of a split tile need registers beyond the accumulators: where ptxas spilled them
// (one wgmma consumer warpgroup holding 128 accumulators; mma_sm80's 64x64 warp tiles), the
// constraints prune the configuration, and the same tile computed whole stays valid.
TEST(SearchSpace, SplitTilesThatWouldSpillArePruned) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Problem p = make_problem(DType::bf16, Op::N, Op::N, 1024, 1024, 16384);
  const Family& wgmma = find_family("wgmma_sm90");
  KernelConfig c = wgmma.default_config(p, arch);  // 128x128, one consumer warpgroup, split-K 2
  ASSERT_EQ(c.at("WG"), 1);
  ASSERT_EQ(broken_rule(wgmma, c, p, arch), "") << wgmma.kernel_name(c);
  c.params["SCHEDULE"] = 2;  // stream-K
  c.params["SPLITS"] = 1;
  EXPECT_EQ(broken_rule(wgmma, c, p, arch), "fixup_fits_one_warpgroup");
  c.params["SCHEDULE"] = 0;  // whole tiles
  EXPECT_EQ(broken_rule(wgmma, c, p, arch), "") << wgmma.kernel_name(c);

  const Family& mma = find_family("mma_sm80");
  KernelConfig m = mma.default_config(p, arch);
  m.params.insert_or_assign("BM", 128);
  m.params.insert_or_assign("BN", 128);
  m.params.insert_or_assign("BK", 32);
  m.params.insert_or_assign("WM", 64);
  m.params.insert_or_assign("WN", 64);
  m.params.insert_or_assign("STAGES", 4);
  m.params.insert_or_assign("SPLITS", 1);
  ASSERT_EQ(broken_rule(mma, m, p, arch), "") << mma.kernel_name(m);
  m.params["SPLITS"] = 2;
  EXPECT_EQ(broken_rule(mma, m, p, arch), "registers_fit");
}

TEST(SearchSpace, EveryValidConfigFitsSharedMemoryOfItsArch) {
  const Family& f = find_family("simt");
  for (const char* name : {"sm_80", "sm_86", "sm_90a"}) {
    const ArchInfo arch = ArchInfo::from_name(name);
    const Problem p = square(1024);
    for (const auto& c : f.prune(p, arch).valid)
      EXPECT_LE(f.plan(c, p, arch).smem_bytes, uint32_t(arch.smem_per_block)) << f.kernel_name(c);
  }
}

// The hash is of the name and the code (make_source), so equal configurations share cache entries
// and different ones never do: every point of a space has its own name and hash.
TEST(Emission, NamesAndHashesAreUniqueAndTheHashIsOfNameAndCode) {
  const Family& f = find_family("simt");
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  for (const char* layout : {"nn", "nt", "tn", "tt"}) {
    const Problem p =
        make_problem(DType::f32, parse_op(layout[0]), parse_op(layout[1]), 2048, 2048, 2048);
    std::set<std::string> names, hashes;
    const auto valid = f.prune(p, arch).valid;
    for (const auto& c : valid) {
      const KernelSource a = emit_source(f, c, arch);
      EXPECT_EQ(a.hash, hash_hex(a.name + '\n' + a.code));
      EXPECT_NE(a.code.find(a.name), std::string::npos) << "the entry point is the kernel's name";
      names.insert(a.name);
      hashes.insert(a.hash);
    }
    EXPECT_EQ(names.size(), valid.size());
    EXPECT_EQ(hashes.size(), valid.size());
  }
}

// A simt configuration, tn f32: 128x64 tiles of 64x32 warps, 8x8 a thread, 16-byte loads.
KernelConfig simt_128x64() {
  return {"simt",
          DataTypes::uniform(DType::f32),
          Scaling::none,
          Op::T,
          Op::N,
          {{"BM", 128},
           {"BN", 64},
           {"BK", 8},
           {"WM", 64},
           {"WN", 32},
           {"TM", 8},
           {"TN", 8},
           {"VEC", 4},
           {"STAGES", 2}}};
}

// The emitted unit instantiates the template with the configuration's values (every parameter
// of the family's table, then its derived constants), and checks at compile time that the
// kernel's shared memory is what the plan launches it with.
TEST(Emission, TheUnitCarriesTheConfigAndChecksSharedMemory) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Family& simt = find_family("simt");
  const KernelConfig c = simt_128x64();
  const std::string code = simt.emit(c, arch);
  for (const char* line : {"static constexpr int BM = 128;", "static constexpr int BN = 64;",
                           "static constexpr int BK = 8;", "static constexpr int STAGES = 2;",
                           "static constexpr bool A_T = true, B_T = false;"})
    EXPECT_NE(code.find(line), std::string::npos) << line << " in\n" << code;
  // 2 stages * 8 * (128 + 4 + 64 + 4) floats: both copies pad (A is transposed, B is not).
  EXPECT_NE(code.find("static_assert(K::SMEM_BYTES == 12800,"), std::string::npos) << code;
  // The argument struct as the plan writes it.
  EXPECT_NE(code.find("static_assert(sizeof(SimtArgs) == "), std::string::npos) << code;
  EXPECT_NE(code.find("(const __grid_constant__ SimtArgs args)"), std::string::npos) << code;
  for (const Family* f : all_families())
    for (DType dtype : {DType::f32, DType::bf16}) {
      const Problem p = make_problem(dtype, Op::N, Op::T, 4096, 4096, 4096);
      if (!why_unsupported(*f, p, arch).empty()) continue;
      for (const auto& point : f->prune(p, arch).valid) {
        const std::string expected =
            fmt::format("static_assert(K::SMEM_BYTES == {},", f->plan(point, p, arch).smem_bytes);
        EXPECT_NE(f->emit(point, arch).find(expected), std::string::npos) << f->kernel_name(point);
      }
    }
  // gemv: an axpy kernel's shared memory (the warps' sums) is a constant of the kernel.
  const Family& gemv = find_family("gemv");
  const Problem axpy = make_problem(DType::bf16, Op::N, Op::N, 4096, 1, 4096);
  int axpy_points = 0;
  for (const auto& point : gemv.prune(axpy, arch).valid) {
    const std::string expected = fmt::format("static_assert(K::AXPY_SMEM_BYTES == {},",
                                             gemv.plan(point, axpy, arch).smem_bytes);
    EXPECT_NE(gemv.emit(point, arch).find(expected), std::string::npos) << gemv.kernel_name(point);
    ++axpy_points;
  }
  EXPECT_GT(axpy_points, 0);
}

TEST(Emission, KernelNamesSayWhatTheyAre) {
  const Family& f = find_family("simt");
  KernelConfig c = simt_128x64();
  EXPECT_EQ(f.kernel_name(c), "gemm_simt_f32_tn_128x64x8_w64x32_t8x8_v4_s2");
}

TEST(Templates, IncludesAreFoundTransitively) {
  EXPECT_EQ(
      quoted_includes(
          "#include \"a.h\"\n  #  include   \"ptx/b.cuh\" // x\n#include <c>\n// #include \"d\"\n"
          "#define X \"#include \\\"e\\\"\"\n#include \"f"),
      (std::vector<std::string>{"a.h", "ptx/b.cuh"}));
  EXPECT_EQ(template_closure({"simt.cuh"}),
            (std::vector<std::string>{"common.cuh", "data_types.h", "epilogue_op.cuh", "fp8.h",
                                      "host_device.h", "kernel_args.h", "raster.h", "simt.cuh",
                                      "simt_args.h"}));
  EXPECT_EQ(template_closure({"wgmma_sm90.cuh", "pack.cuh"}),
            (std::vector<std::string>{"common.cuh",
                                      "data_types.h",
                                      "epilogue_op.cuh",
                                      "fp8.h",
                                      "group_table.cuh",
                                      "host_device.h",
                                      "kernel_args.h",
                                      "pack.cuh",
                                      "ptx/cluster.cuh",
                                      "ptx/ldmatrix.cuh",
                                      "ptx/mbarrier.cuh",
                                      "ptx/stmatrix.cuh",
                                      "ptx/tma.cuh",
                                      "ptx/wgmma.cuh",
                                      "ptx/wgmma_fp8.cuh",
                                      "ptx/wgmma_tf32.cuh",
                                      "raster.h",
                                      "scale_layout.h",
                                      "schedule.h",
                                      "store_pairs.cuh",
                                      "wgmma_sm90.cuh",
                                      "wgmma_sm90/args.h",
                                      "wgmma_sm90/cluster_k.cuh",
                                      "wgmma_sm90/epilogue.cuh",
                                      "wgmma_sm90/groups.cuh",
                                      "wgmma_sm90/layout.h",
                                      "wgmma_sm90/mainloop.cuh",
                                      "wgmma_sm90/multistage.cuh",
                                      "wgmma_sm90/parts.cuh",
                                      "wgmma_sm90/promotion.cuh",
                                      "wgmma_sm90/shared_memory.cuh",
                                      "wgmma_sm90/store_gated.cuh",
                                      "wgmma_sm90/store_registers.cuh",
                                      "wgmma_sm90/store_tma.cuh",
                                      "wgmma_sm90/tiles.cuh",
                                      "wgmma_sm90/traits.cuh",
                                      "wgmma_sm90/warp_specialized.cuh"}));
  // Names that are no template (system headers) are not followed; cycles end.
  const std::string a = "#include \"b.h\"\n#include \"cuda_fp16.h\"\n",
                    b = "#pragma once\n#include \"a.h\"\n";
  const std::vector<EmbeddedFile> cyclic = {{"a.h", a}, {"b.h", b}};
  EXPECT_EQ(template_closure({"a.h"}, cyclic), (std::vector<std::string>{"a.h", "b.h"}));
  // A generated unit depends on what its template includes, not on other templates.
  const std::string unit =
      emit_source(find_family("simt"),
                  find_family("simt").default_config(square(64), ArchInfo::from_name("sm_90a")),
                  ArchInfo::from_name("sm_90a"))
          .code;
  test::EditableTemplates edited;
  const std::string digest = included_templates_digest(unit);
  EXPECT_EQ(included_templates_digest(unit, edited.files()), digest);
  edited.append("wgmma_sm90.cuh", "\n// not included by a simt unit\n");
  EXPECT_EQ(included_templates_digest(unit, edited.files()), digest);
  edited.append("kernel_args.h", "\n// included through simt_args.h\n");
  EXPECT_NE(included_templates_digest(unit, edited.files()), digest);
}

// ---- mma_sm80 ------------------------------------------------------------------------------

TEST(Mma80, ServesHalfPrecisionFromSm80AfterWgmmaOnHopper) {
  const Problem bf16 = make_problem(DType::bf16, Op::T, Op::N, 512, 512, 512);
  auto names = [](const std::vector<const Family*>& fs) {
    std::vector<std::string> out;
    for (const Family* f : fs) out.emplace_back(f->name());
    return out;
  };
  for (const char* arch : {"sm_80", "sm_86", "sm_89", "sm_90"})
    EXPECT_EQ(names(families_for(bf16, ArchInfo::from_name(arch))),
              std::vector<std::string>{"mma_sm80"})
        << arch;
  EXPECT_EQ(names(families_for(bf16, ArchInfo::from_name("sm_90a"))),
            (std::vector<std::string>{"wgmma_sm90", "mma_sm80"}));
  EXPECT_EQ(names(families_for(square(512), ArchInfo::from_name("sm_80"))),
            std::vector<std::string>{"simt"});
  ArchInfo turing = ArchInfo::from_name("sm_80");
  turing.cc = 75;
  EXPECT_NE(find_family("mma_sm80").unsupported_reason(bf16, turing).find("sm_80 or newer"),
            std::string::npos);
}

TEST(Mma80, DefaultIsValidForEveryProblemClassAndArch) {
  const Family& f = find_family("mma_sm80");
  const int64_t shapes[][3] = {
      {1, 1, 1}, {4096, 16, 4096}, {300, 200, 100}, {8192, 8192, 8192}, {77, 5000, 33}};
  for (const char* arch_name : {"sm_80", "sm_86", "sm_89", "sm_90a"}) {
    const ArchInfo arch = ArchInfo::from_name(arch_name);
    for (const auto& s : shapes)
      for (const char* layout : {"nn", "nt", "tn", "tt"})
        for (int64_t extra_ld :
             {0, 1, 2, 4}) {  // alignment classes 16 (or less for odd sizes), 2, 4, 8
          Problem p =
              make_problem(DType::f16, parse_op(layout[0]), parse_op(layout[1]), s[0], s[1], s[2]);
          p.lda = (p.lda + 7) / 8 * 8 + extra_ld;
          p.ldb = (p.ldb + 7) / 8 * 8 + extra_ld;
          p.ldc = (p.ldc + 7) / 8 * 8 + extra_ld;
          p.align = alignment_class(p.types, nullptr, nullptr, nullptr, p.lda, p.ldb, p.ldc);
          const KernelConfig c = f.default_config(p, arch);
          EXPECT_EQ(f.why_invalid(c, p, arch), "")
              << f.kernel_name(c) << " on " << p.describe() << " for " << arch_name;
          EXPECT_EQ(c.at("VEC"), std::min(8, p.align / 2)) << p.describe();
        }
  }
}

TEST(Mma80, SpaceSaysWhyAPointIsPruned) {
  const Family& f = find_family("mma_sm80");
  const Problem p = make_problem(DType::bf16, Op::N, Op::N, 4096, 4096, 4096);
  const ArchInfo arch = ArchInfo::from_name("sm_80");
  KernelConfig c = f.default_config(p, arch);
  ASSERT_EQ(broken_rule(f, c, p, arch), "");
  c.params["WM"] = 32;  // 4 x 2 warps of 32x64: still fine
  EXPECT_EQ(broken_rule(f, c, p, arch), "");
  c.params["WM"] = 64;
  c.params["BM"] = 64;  // 1 x 2 warps
  EXPECT_EQ(broken_rule(f, c, p, arch), "warp_count");
  c = f.default_config(p, arch);
  c.params["STAGES"] = 5;
  c.params["BK"] = 64;  // 160 KB of stages: sm_80 has 163, sm_86 99
  EXPECT_EQ(broken_rule(f, c, p, arch), "");
  EXPECT_EQ(broken_rule(f, c, p, ArchInfo::from_name("sm_86")), "smem_fits");
  c = f.default_config(p, arch);
  Problem odd = p;
  odd.align = 2;
  EXPECT_EQ(broken_rule(f, c, odd, arch), "vector_alignment");
  c.params["VEC"] = 1;
  EXPECT_EQ(broken_rule(f, c, odd, arch), "");
  EXPECT_EQ(broken_rule(f, c, p, arch), "widest_vector");

  const Pruning pruning = f.prune(p, arch);
  EXPECT_EQ(int64_t(pruning.valid.size()) + pruning.pruned(), f.space_summary(p, arch).size());
  EXPECT_GT(pruning.valid.size(), 50u);
  for (const auto& v : pruning.valid) {
    EXPECT_LE(f.plan(v, p, arch).smem_bytes, uint32_t(arch.smem_per_block)) << f.kernel_name(v);
    const uint32_t threads = f.plan(v, p, arch).block[0];
    EXPECT_TRUE(threads == 128 || threads == 256) << f.kernel_name(v);
  }
}

TEST(Mma80, NamesAndGeometry) {
  const Family& f = find_family("mma_sm80");
  const Problem p = make_problem(DType::bf16, Op::T, Op::N, 1000, 300, 77);
  const KernelConfig c{"mma_sm80",
                       DataTypes::uniform(DType::bf16),
                       Scaling::none,
                       Op::T,
                       Op::N,
                       {{"BM", 128},
                        {"BN", 128},
                        {"BK", 32},
                        {"WM", 64},
                        {"WN", 64},
                        {"STAGES", 4},
                        {"GROUP", 8},
                        {"VEC", 8},
                        {"SPLITS", 1}}};
  EXPECT_EQ(f.kernel_name(c), "gemm_mma80_bf16_tn_128x128x32_w64x64_s4_g8_v8");
  const LaunchPlan g = f.plan(c, p, ArchInfo::from_name("sm_80"));
  EXPECT_EQ(g.tiles_m, 8u);
  EXPECT_EQ(g.tiles_n, 3u);
  EXPECT_EQ(g.grid[0], 24u);
  EXPECT_EQ(g.block[0], 128u);
  EXPECT_EQ(g.smem_bytes, 4u * 256 * 32 * 2);
  EXPECT_FALSE(g.persistent);
  EXPECT_TRUE(g.maps.empty());  // plain pointers, no TMA
  EXPECT_EQ(g.workspace_bytes + g.counter_bytes, 0u);
  const std::string code = f.emit(c, ArchInfo::from_name("sm_80"));
  EXPECT_NE(code.find("#include \"mma_sm80.cuh\""), std::string::npos);
  EXPECT_NE(code.find("A_T = true, B_T = false"), std::string::npos);
  EXPECT_NE(code.find("DTYPE = 2"), std::string::npos);

  // Split-K: a block per tile and part, an f32 slot of partial sums per part, a counter per tile,
  // and a word of shared memory that says which part arrived last. Parts beyond the k-tiles
  // (77 values: 3 k-tiles of 32) are clamped, as the kernel clamps them.
  KernelConfig split = c;
  split.params["SPLITS"] = 3;
  EXPECT_EQ(f.kernel_name(split), "gemm_mma80_bf16_tn_128x128x32_w64x64_s4_g8_v8_splitk3");
  const LaunchPlan s = f.plan(split, p, ArchInfo::from_name("sm_80"));
  EXPECT_EQ(s.grid[0], 24u * 3);
  EXPECT_EQ(s.workspace_bytes, 24u * 3 * 128 * 128 * 4);
  EXPECT_EQ(s.counter_bytes, 24u * 4);
  EXPECT_EQ(s.smem_bytes, 4u * 256 * 32 * 2 + 16);
  EXPECT_NE(f.emit(split, ArchInfo::from_name("sm_80")).find("SPLITS = 3"), std::string::npos);
  split.params["SPLITS"] = 8;
  EXPECT_EQ(f.plan(split, p, ArchInfo::from_name("sm_80")).grid[0], 24u * 3);
}

// Split-K is searched where the tiles leave SMs idle, into at most two blocks per SM, and never
// into more parts than k-tiles.
TEST(Mma80, SplitKOnlyWhereTilesAreFew) {
  const Family& f = find_family("mma_sm80");
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Problem small = make_problem(DType::bf16, Op::N, Op::N, 500, 300, 700);
  KernelConfig c = f.default_config(small, arch);  // 64x64 tiles: 40 of them, 22 k-tiles
  ASSERT_EQ(c.at("BM"), 64);
  c.params["SPLITS"] = 6;
  EXPECT_EQ(broken_rule(f, c, small, arch), "");
  c.params["SPLITS"] = 8;  // 320 blocks on 132 SMs
  EXPECT_EQ(broken_rule(f, c, small, arch), "split_k_fills_the_gpu");
  const Problem short_k = make_problem(DType::bf16, Op::N, Op::N, 500, 300, 64);
  c.params["SPLITS"] = 3;  // 2 k-tiles
  EXPECT_EQ(broken_rule(f, c, short_k, arch), "split_k_fills_the_gpu");
  int split = 0;
  for (const auto& v : f.prune(small, arch).valid) split += v.at("SPLITS") > 1;
  EXPECT_GT(split, 0);
  const Problem large = make_problem(DType::bf16, Op::N, Op::N, 4096, 4096, 4096);
  for (const auto& param : f.space_summary(large, arch).params)
    if (param.name == "SPLITS") {
      EXPECT_EQ(param.values, std::vector<int64_t>{1});
    }
}

TEST(Mma80, EmissionIsUniqueAcrossTheSpace) {
  const Family& f = find_family("mma_sm80");
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  for (const char* layout : {"nn", "tt"}) {
    const Problem p =
        make_problem(DType::f16, parse_op(layout[0]), parse_op(layout[1]), 2048, 2048, 2048);
    std::set<std::string> names, hashes;
    const auto valid = f.prune(p, arch).valid;
    for (const auto& c : valid) {
      const KernelSource src = emit_source(f, c, arch);
      names.insert(src.name);
      hashes.insert(src.hash);
    }
    EXPECT_EQ(names.size(), valid.size());
    EXPECT_EQ(hashes.size(), valid.size());
  }
}

TEST(Mma80, CostModelPrefersTilesThatFitTheProblem) {
  const Family& f = find_family("mma_sm80");
  const ArchInfo arch = ArchInfo::from_name("sm_80");
  auto config = [](int64_t bm, int64_t bn, int64_t wm, int64_t wn) {
    return KernelConfig{"mma_sm80",
                        DataTypes::uniform(DType::bf16),
                        Scaling::none,
                        Op::T,
                        Op::N,
                        {{"BM", bm},
                         {"BN", bn},
                         {"BK", 32},
                         {"WM", wm},
                         {"WN", wn},
                         {"STAGES", 4},
                         {"GROUP", 8},
                         {"VEC", 8},
                         {"SPLITS", 1}}};
  };
  const Problem large = make_problem(DType::bf16, Op::T, Op::N, 8192, 8192, 8192);
  EXPECT_LT(f.predicted_ms(config(128, 128, 64, 64), large, arch),
            f.predicted_ms(config(64, 64, 32, 32), large, arch));
  const Problem decode = make_problem(DType::bf16, Op::T, Op::N, 8192, 16, 8192);
  EXPECT_LT(f.predicted_ms(config(128, 32, 32, 32), decode, arch),
            f.predicted_ms(config(128, 256, 64, 64), decode, arch));
}

// Grouped problems (mixture-of-experts layers): the family serves them from sm_80 on, its
// kernels marked by the table they hold (GROUP_TABLE, derived from G); K whole; op(B) = T with
// plain loads, a group's first column being any; the default sees G groups of n / G columns.
TEST(Mma80, GroupedProblemsSpaceAndDefaults) {
  const Family& f = find_family("mma_sm80");
  auto grouped = [](const char* layout, int64_t m, int64_t mean, int64_t k, int64_t groups) {
    Problem p =
        make_problem(DType::bf16, parse_op(layout[0]), parse_op(layout[1]), m, mean * groups, k);
    p.groups = groups;
    return p;
  };
  const Problem decode = grouped("tn", 1536, 8, 2048, 128);
  EXPECT_TRUE(f.takes_groups());
  for (const char* name : {"sm_80", "sm_86", "sm_90"})
    EXPECT_EQ(families_for(decode, ArchInfo::from_name(name)), std::vector<const Family*>{&f})
        << name;
  EXPECT_EQ(families_for(decode, ArchInfo::from_name("sm_90a")),
            (std::vector<const Family*>{&find_family("wgmma_sm90"), &f}));

  const ArchInfo arch = ArchInfo::from_name("sm_80");
  KernelConfig c = f.default_config(decode, arch);
  EXPECT_EQ(f.why_invalid(c, decode, arch), "");
  EXPECT_EQ(c.at("BN"), 32) << "8 tokens an expert";
  EXPECT_EQ(c.at("GROUP_TABLE"), 128);
  EXPECT_EQ(c.at("SPLITS"), 1);
  EXPECT_TRUE(f.kernel_name(c).ends_with("_v8_groups128")) << f.kernel_name(c);
  const Problem prefill = grouped("tn", 4096, 512, 7168, 32);
  EXPECT_EQ(f.default_config(prefill, arch).at("BN"), 128);
  // A few tiles of a few groups: the latency-bound default, without split-K.
  const Problem few = grouped("nn", 256, 64, 4096, 2);
  const KernelConfig small = f.default_config(few, arch);
  EXPECT_EQ(f.why_invalid(small, few, arch), "");
  EXPECT_EQ(small.at("BK"), 64);
  EXPECT_EQ(small.at("SPLITS"), 1);
  KernelConfig split = small;
  split.params["SPLITS"] = 2;
  EXPECT_EQ(broken_rule(f, split, few, arch), "grouped_whole_k");
  EXPECT_NE(f.why_invalid(split, few, arch).find("grouped_whole_k"), std::string::npos);
  split.params["GROUP_TABLE"] = 0;  // the same point for one GEMM of those columns
  EXPECT_EQ(broken_rule(f, split, make_problem(DType::bf16, Op::N, Op::N, 256, 128, 4096), arch),
            "");

  // op(B) = T: plain loads (VEC 1), whatever the alignment.
  const Problem nt = grouped("nt", 512, 40, 256, 8);
  const KernelConfig plain = f.default_config(nt, arch);
  EXPECT_EQ(plain.at("VEC"), 1);
  EXPECT_EQ(f.why_invalid(plain, nt, arch), "");
  KernelConfig wide = plain;
  wide.params["VEC"] = 8;
  EXPECT_EQ(broken_rule(f, wide, nt, arch), "widest_vector");

  // The table: G rounded up to a power of two (at least 8), derived from the problem; it lives
  // in the stages, which it outgrows only with the most groups and the smallest stages.
  Problem more = decode;
  more.groups = 200;
  EXPECT_EQ(with_derived_params(c, decode, more, arch).at("GROUP_TABLE"), 256);
  KernelConfig tiny = c;
  tiny.params["BM"] = 64, tiny.params["BN"] = 32, tiny.params["BK"] = 32;
  tiny.params["STAGES"] = 2, tiny.params["GROUP_TABLE"] = 4096;
  Problem most = decode;
  most.groups = 4096;
  EXPECT_EQ(f.plan(tiny, most, arch).smem_bytes, 4u * 4096);
  EXPECT_EQ(f.plan(c, decode, arch).smem_bytes, 3u * (128 + 32) * 64 * 2);
  // One GEMM's kernels are as before: no table, no name for it.
  const KernelConfig dense =
      f.default_config(make_problem(DType::bf16, Op::T, Op::N, 512, 512, 512), arch);
  EXPECT_EQ(dense.at("GROUP_TABLE"), 0);
  EXPECT_EQ(f.kernel_name(dense).find("groups"), std::string::npos);
}

// A grouped launch as the kernel maps its blocks (run_groups; raster.h runs on the host too):
// every column tile of every group at every M tile exactly once, and nothing else, whatever the
// routing (uniform, skewed, ragged, everything in the last group, every group empty, the last
// ending before N) and the tile width.
// Float8 experts are routed four tokens at a time (uniform and skewed; the padded layout the
// cuBLASLt baseline takes), 16-bit ones token by token; the ragged routing keeps any ends.
TEST(Routings, Float8ExpertsTakeTokensFourAtATime) {
  Problem fp8 = make_problem(DataTypes{DType::e4m3, DType::e4m3, DType::bf16, DType::bf16}, Op::T,
                             Op::N, 4096, 32 * 8, 7168);
  fp8.groups = 32;
  fp8.scaling = Scaling::block;
  EXPECT_EQ(routing_granule(fp8), 4);
  for (Routing r : {Routing::uniform, Routing::skewed}) {
    const std::vector<int32_t> ends = group_ends_of(fp8, r, 3);
    EXPECT_EQ(ends.back(), fp8.n);
    for (size_t g = 0; g < ends.size(); ++g) EXPECT_EQ(ends[g] % 4, 0) << g;
  }
  EXPECT_GE(group_ends_of(fp8, Routing::skewed, 3)[0], 80);  // ten times the mean, in granules
  const std::vector<int32_t> ragged = group_ends_of(fp8, Routing::ragged, 3);
  EXPECT_TRUE(std::any_of(ragged.begin(), ragged.end(), [](int32_t e) { return e % 4 != 0; }));
  Problem odd = fp8;
  odd.n = 32 * 8 + 2;
  EXPECT_EQ(routing_granule(odd), 1);
  Problem bf16 = fp8;
  bf16.types = DataTypes::uniform(DType::bf16);
  bf16.scaling = Scaling::none;
  EXPECT_EQ(routing_granule(bf16), 1);
  const std::vector<int32_t> tokens = group_ends_of(bf16, Routing::uniform, 3);
  EXPECT_TRUE(std::any_of(tokens.begin(), tokens.end(), [](int32_t e) { return e % 4 != 0; }));
}

TEST(Mma80, AGroupedLaunchCoversEveryTileOfAnyRouting) {
  const Family& f = find_family("mma_sm80");
  const ArchInfo arch = ArchInfo::from_name("sm_80");
  const int64_t shapes[][3] = {
      {520, 3, 16}, {1000, 200, 8}, {300, 41, 7}, {257, 129, 1}, {384, 1, 40}};
  int launches = 0;
  for (const auto& [m, mean, groups] : shapes) {
    Problem p = make_problem(DType::bf16, Op::T, Op::N, m, mean * groups, 64);
    p.groups = groups;
    std::vector<std::vector<int32_t>> routings;
    for (Routing r : {Routing::uniform, Routing::skewed, Routing::ragged})
      routings.push_back(group_ends_of(p, r, 7));
    routings.emplace_back(size_t(groups), 0);
    routings.back().back() = int32_t(p.n);
    routings.emplace_back(size_t(groups), 0);
    routings.push_back(group_ends_of(p, Routing::ragged, 9));
    for (auto& end : routings.back()) end = std::min<int32_t>(end, int32_t(p.n / 2));
    for (const int64_t bm : {64, 128})
      for (const int64_t bn : {32, 64, 128, 256}) {
        KernelConfig c = f.default_config(p, arch);
        c.params["BM"] = bm, c.params["BN"] = bn;
        const LaunchPlan g = f.plan(c, p, arch);
        ASSERT_EQ(g.blocks.size(), 1u);
        GemmTiling t;
        std::memcpy(&t, g.blocks[0].bytes.data(), sizeof t);
        const int tiles_m = int((m + bm - 1) / bm);
        EXPECT_EQ(t.tiles_m, tiles_m);
        for (const auto& ends : routings) {
          std::vector<int> table;  // the groups' cumulative column tiles (build_group_table)
          int begin = 0, total = 0;
          for (const int32_t end : ends) {
            total += end > begin ? int((end - begin + bn - 1) / bn) : 0;
            table.push_back(total);
            begin = end;
          }
          std::map<std::tuple<int, int>, int> seen;  // (column tile, tile_m) -> blocks
          for (int block = 0; block < int(g.grid[0]); ++block) {
            int column_tile, tile_m;
            grouped_tile(block, t.tiles_n, int(c.at("GROUP")), t.divisors, column_tile, tile_m);
            ASSERT_LT(tile_m, tiles_m);
            ASSERT_LT(column_tile, t.tiles_n);
            if (column_tile < total) ++seen[{column_tile, tile_m}];
          }
          EXPECT_EQ(int64_t(seen.size()), int64_t(total) * tiles_m)
              << f.kernel_name(c) << " on " << p.describe() << " misses tiles";
          for (const auto& [tile, blocks] : seen) EXPECT_EQ(blocks, 1);
          ++launches;
        }
      }
  }
  EXPECT_EQ(launches, 5 * 6 * 2 * 4);
}

// The template version is the digest of everything the family's templates include: an edit of
// any of those files (and only of those) makes the family's stored results stale.
TEST(Families, TemplateVersionCoversEveryIncludedTemplate) {
  const Family& simt = find_family("simt");
  const Family& wgmma = find_family("wgmma_sm90");
  const std::string version = template_version(simt);
  EXPECT_EQ(version.size(), 16u);
  EXPECT_EQ(version, templates_digest({"common.cuh", "data_types.h", "epilogue_op.cuh", "fp8.h",
                                       "host_device.h", "kernel_args.h", "raster.h", "simt.cuh",
                                       "simt_args.h"})
                         .substr(0, 16));
  EXPECT_NE(version, template_version(wgmma));
  test::EditableTemplates edited;
  edited.append("pack.cuh", "\n// only the wgmma family runs the packing kernel\n");
  EXPECT_EQ(template_version(simt, edited.files()), version);
  EXPECT_NE(template_version(wgmma, edited.files()), template_version(wgmma));
  edited.append("common.cuh", "\n// shared by every family\n");
  EXPECT_NE(template_version(simt, edited.files()), version);
}

// Families register themselves (GEMMTUNE_REGISTER_FAMILY): the production ones in every program
// that links the generator, in rank order; a family defined in a test binary only in the process
// that registers it.
TEST(Families, RegisterThemselvesInRankOrder) {
  std::vector<std::string> names;
  for (const Family* f : all_families()) names.emplace_back(f->name());
  EXPECT_EQ(names, (std::vector<std::string>{"gemv", "wgmma_sm90", "mma_sm80", "simt"}));
  error_of([] { find_family("nope"); }, Errc::invalid_argument);
  error_of([] { find_family("fault_injection"); }, Errc::invalid_argument);
  EXPECT_EQ(family_named("fault_injection"), nullptr);
  EXPECT_EQ(family_named("simt"), &find_family("simt"));

  register_family(test::fault_injection_family());
  register_family(test::fault_injection_family());  // once is enough: no second entry
  EXPECT_EQ(&find_family("fault_injection"), &test::fault_injection_family());
  EXPECT_EQ(all_families().size(), 5u);
  EXPECT_EQ(all_families().back(), &test::fault_injection_family()) << "the last rank";
  // It is measured only where a test names its configurations: never searched, never a winner.
  const Problem p = square(64);
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const std::vector<const Family*> serving = families_for(p, arch);
  EXPECT_EQ(std::count(serving.begin(), serving.end(), &test::fault_injection_family()), 0);
  const KernelConfig fault = test::fault_injection_family().default_config(p, arch);
  EXPECT_NE(why_unusable(fault, p, arch).find("only as a test's extra candidate"),
            std::string::npos)
      << why_unusable(fault, p, arch);
}

TEST(Families, WhyUnusableJudgesAStoredConfigForAProblem) {
  const ArchInfo hopper = ArchInfo::from_name("sm_90a"), ampere = ArchInfo::from_name("sm_80");
  const Problem p = square(1024);
  const Family& simt = find_family("simt");
  KernelConfig c = simt.default_config(p, hopper);
  EXPECT_EQ(why_unusable(c, p, hopper), "");
  EXPECT_EQ(why_unusable(c, p, ampere), "");
  Problem misaligned = p;
  misaligned.align = 4;
  EXPECT_NE(why_unusable(c, misaligned, hopper).find("breaks constraint vector_alignment"),
            std::string::npos);
  EXPECT_NE(why_unusable(c, square(1024, DType::bf16), hopper).find("computes f32 only"),
            std::string::npos);
  c.op_a = Op::T;
  EXPECT_NE(why_unusable(c, p, hopper).find("the config is for f32 tn, the problem is f32 nn"),
            std::string::npos);
  const Problem b = square(1024, DType::bf16);
  const KernelConfig w = find_family("wgmma_sm90").default_config(b, hopper);
  EXPECT_EQ(why_unusable(w, b, hopper), "");
  EXPECT_NE(why_unusable(w, b, ampere).find("needs sm_90a"), std::string::npos);
}

// Fast accumulation is a kernel that never promotes (PROMOTE 0), used only where the problem asks
// for it: a stored kernel of one accumulation is unusable for the other.
TEST(Families, WgmmaFastAccumulationNeverPromotesAndIsOnlyUsedWhereAsked) {
  const ArchInfo hopper = ArchInfo::from_name("sm_90a");
  const Family& wgmma = find_family("wgmma_sm90");
  Problem precise = make_problem(DataTypes{DType::e4m3, DType::e4m3, DType::bf16, DType::bf16},
                                 Op::T, Op::N, 8192, 8192, 8192);
  precise.scaling = Scaling::tensor;
  Problem fast = precise;
  fast.accumulation = Accumulation::fast;
  const KernelConfig f = wgmma.default_config(fast, hopper);
  const KernelConfig p = wgmma.default_config(precise, hopper);
  EXPECT_EQ(f.at("PROMOTE"), 0);
  EXPECT_EQ(f.at("OVERLAP"), 0);
  EXPECT_GE(p.at("PROMOTE"), 1);
  EXPECT_EQ(wgmma.kernel_name(f).substr(wgmma.kernel_name(f).size() - 12), "_tensor_fast");
  EXPECT_EQ(why_unusable(f, fast, hopper), "");
  EXPECT_NE(why_unusable(f, precise, hopper).find("PROMOTE=0 is not among"), std::string::npos);
  EXPECT_NE(why_unusable(p, fast, hopper).find("PROMOTE=1 is not among"), std::string::npos);
  const auto space = wgmma.prune(fast, hopper);
  ASSERT_FALSE(space.valid.empty());
  for (const KernelConfig& c : space.valid) ASSERT_EQ(c.at("PROMOTE"), 0) << wgmma.kernel_name(c);
  // Without partial sums beside them, the accumulators may take what bf16 tiles take.
  EXPECT_TRUE(std::any_of(space.valid.begin(), space.valid.end(), [&](const KernelConfig& c) {
    return c.at("BM") * c.at("BN") / (128 * c.at("WG")) > 96;
  }));
}

// Float8 products are summed in f32: another accumulator type is refused, not computed in f32.
TEST(Families, WgmmaFloat8SumsInF32Only) {
  Problem p =
      make_problem(parse_data_types("e4m3*e4m3->bf16+acc=f16"), Op::T, Op::N, 256, 128, 512);
  p.scaling = Scaling::tensor;
  validate(p);
  EXPECT_NE(why_unsupported(find_family("wgmma_sm90"), p, ArchInfo::from_name("sm_90a"))
                .find("the float8 kernels sum in f32, not f16"),
            std::string::npos);
}

// A family's default is "valid for any problem the family supports" (family.hpp): the library
// runs it when nothing is tuned, so it must pass the family's constraints, the 32-bit bounds of
// its schedule too, also for the sizes past 2^31 elements that gpu_large_operands runs.
TEST(Families, DefaultsAreValidPointsAlsoForSizesPast2To31) {
  const ArchInfo hopper = ArchInfo::from_name("sm_90a");
  auto with_lda = [](Problem p, int64_t lda) {
    p.lda = lda;
    p.align = alignment_class(p.types, nullptr, nullptr, nullptr, p.lda, p.ldb, p.ldc);
    return p;
  };
  const std::vector<Problem> problems = {
      make_problem(DType::bf16, Op::N, Op::N, 8192, 8, 300000),
      with_lda(make_problem(DType::bf16, Op::T, Op::N, 8192, 8, 300000), 300001),
      make_problem(DType::f32, Op::N, Op::N, 8192, 8, 270000),
      with_lda(make_problem(DType::f32, Op::T, Op::N, 8192, 8, 270000), 270001),
      make_problem(DType::bf16, Op::N, Op::N, kMaxDimension, 2, 2),
      make_problem(DType::bf16, Op::N, Op::N, 65536, 8,
                   4096),  // tall and skinny: had no valid point
      make_problem(DType::f32, Op::N, Op::N, kMaxDimension, 1, 1),
      with_lda(make_problem(DType::bf16, Op::N, Op::N, 64, 64, 2), (int64_t(1) << 31) + 64),
      make_problem(DType::bf16, Op::T, Op::N, 4096, 4096, 4096),
      make_problem(DType::f32, Op::N, Op::T, 1000, 3000, 77),
  };
  for (const Problem& p : problems)
    for (const Family* f : families_for(p, hopper))
      EXPECT_EQ(why_unusable(f->default_config(p, hopper), p, hopper), "")
          << f->name() << " on " << p.describe();
}

// A side that one wgmma N covers, on a problem whose 128x128 tiles leave SMs idle, is streamed
// like decode: the narrow side on wgmma's N, 64-row tiles, K split so the parts fill the SMs
// (bf16 tn 4096x128x11008: tuned 64x128 swapped, split in two by a cluster of two CTAs). Either
// side may be the narrow one; problems small enough to be bound by latency keep their own
// default (narrower tiles, also split by clusters of two).
TEST(Families, WgmmaDefaultStreamsANarrowSideWhereTilesAreFew) {
  const ArchInfo hopper = ArchInfo::from_name("sm_90a");
  const Family& wgmma = find_family("wgmma_sm90");
  const Problem tall = make_problem(DType::bf16, Op::T, Op::N, 4096, 128, 11008);
  const KernelConfig c = wgmma.default_config(tall, hopper);
  EXPECT_EQ(wgmma.kernel_name(c), "gemm_wgmma_bf16_tn_64x128x128_s4_wg1_c1x1_ws_rm_swap_ck2");
  EXPECT_EQ(why_unusable(c, tall, hopper), "");
  const Problem wide = make_problem(DType::bf16, Op::T, Op::N, 128, 4096, 11008);
  const KernelConfig w = wgmma.default_config(wide, hopper);
  EXPECT_EQ(w.at("SWAP"), 0);
  EXPECT_EQ(w.at("BM"), 128);
  EXPECT_EQ(w.at("BN"), 64);
  EXPECT_EQ(w.at("CLUSTER_K"), 2) << wgmma.kernel_name(w);
  EXPECT_EQ(why_unusable(w, wide, hopper), "");
  const Problem small = make_problem(DType::bf16, Op::T, Op::N, 768, 128, 768);
  EXPECT_EQ(wgmma.kernel_name(wgmma.default_config(small, hopper)),
            "gemm_wgmma_bf16_tn_24x64x128_s5_wg1_c1x1_ws_rm_ck2");
  // Where K is split three ways or more, or the tiles are stored by TMA, through the workspace.
  const Problem few = make_problem(DType::bf16, Op::N, Op::N, 1024, 1024, 16384);
  EXPECT_EQ(wgmma.kernel_name(wgmma.default_config(few, hopper)),
            "gemm_wgmma_bf16_nn_128x128x64_s6_wg1_c1x1_ws_rm_splitk2_tmastore");
}

// Mid-size problems whose usual tiles leave a round part empty take tiles sized to the SM count
// where A is stored along K: m split evenly on wgmma N, 128 rows of n, TMA stores (the last chunk
// overlapping the one before), as deep as fits, a cluster along M with long K (the tuned winners
// on the H100 were these tiles, cuBLAS's own: 80x128, 176x128, 144x128). With beta != 0 such a tile
// stores from registers; with A stored along M (wgmma N in 64-column chunks) the default is
// unchanged.
TEST(Families, WgmmaDefaultFitsMidSizeTilesToTheSmCount) {
  const ArchInfo hopper = ArchInfo::from_name("sm_90a");
  const Family& wgmma = find_family("wgmma_sm90");
  const std::pair<Problem, const char*> cases[] = {
      {make_problem(DType::bf16, Op::T, Op::N, 640, 2048, 5120),
       "gemm_wgmma_bf16_tn_80x128x64_s8_wg2_c2x1_ws_rn_tmastore"},
      {make_problem(DType::bf16, Op::T, Op::N, 1408, 4096, 2048),
       "gemm_wgmma_bf16_tn_176x128x64_s5_wg2_c1x1_ws_rn_tmastore"},
      {make_problem(DType::bf16, Op::T, Op::N, 2304, 1024, 4096),
       "gemm_wgmma_bf16_tn_144x128x64_s6_wg2_c1x1_ws_rm_tmastore"},
  };
  for (const auto& [p, name] : cases) {
    const KernelConfig c = wgmma.default_config(p, hopper);
    EXPECT_EQ(wgmma.kernel_name(c), name);
    EXPECT_EQ(why_unusable(c, p, hopper), "") << name;
    Problem reading = p;
    reading.reads_c = true;
    const KernelConfig r = wgmma.default_config(reading, hopper);
    EXPECT_EQ(r.at("BM"), c.at("BM")) << wgmma.kernel_name(r);
    EXPECT_EQ(r.at("EPILOGUE"), 0) << wgmma.kernel_name(r);
    EXPECT_EQ(why_unusable(r, reading, hopper), "") << wgmma.kernel_name(r);
  }
  Problem nn = cases[2].first;
  nn.op_a = Op::N;
  nn.lda = nn.m;
  EXPECT_EQ(wgmma.default_config(nn, hopper).at("BM") % 64, 0);
  // The space offers the widths that split m = 2304 evenly (144: 16 tiles) and not those that do
  // not (208: 12 tiles of 192 would do).
  std::set<int64_t> widths;
  for (const KernelConfig& c : wgmma.prune(cases[2].first, hopper).valid)
    if (c.at("SWAP") == 0) widths.insert(c.at("BM"));
  EXPECT_EQ(widths.count(144), 1u);
  EXPECT_EQ(widths.count(208), 0u);
}

// Float8 with an f32 output (D = C = f32) is served: in every scaling mode, reading C or not,
// its space is nonempty and every point fits a block's shared memory; a TMA store stages chunks
// of 32 f32 columns (a 128-byte swizzled row) as large as bf16's 64, so an f32 point differs
// from its bf16 twin only in how many it stages (no fewer where they fit): it is a point of the
// bf16 space (but where it reads C into a tile whose width is a multiple of 32 and not of 64: the
// twin's last 64-column chunk would overlap the one before, tma_store_layout), and a bf16 point
// missing here is one the shared-memory rules prune. C's map has boxes of 32 f32. The cost model's
// epilogue writes 4 bytes a value: no bf16 point costs more. Bf16 operands with an f32 output stay
// refused.
TEST(Families, WgmmaFloat8WithAnF32OutputFitsSharedMemory) {
  const ArchInfo hopper = ArchInfo::from_name("sm_90a");
  const Family& wgmma = find_family("wgmma_sm90");
  for (Scaling scaling : {Scaling::tensor, Scaling::row, Scaling::block})
    for (const bool reads_c : {false, true}) {
      Problem p = make_problem(DataTypes{DType::e4m3, DType::e4m3, DType::f32, DType::f32}, Op::T,
                               Op::N, 4096, 4096, 4096);
      p.scaling = scaling;
      p.reads_c = reads_c;
      ASSERT_EQ(why_unsupported(wgmma, p, hopper), "") << p.describe();
      Problem bf16 = p;
      bf16.types.c = bf16.types.d = DType::bf16;
      const std::vector<KernelConfig> valid = wgmma.prune(p, hopper).valid;
      ASSERT_FALSE(valid.empty()) << p.describe();
      std::set<std::string> names;  // the bf16 twins' names
      int tma_stores = 0, more_buffers = 0;
      for (const KernelConfig& c : valid) {
        const std::string name = wgmma.kernel_name(c);
        const LaunchPlan g = wgmma.plan(c, p, hopper);
        EXPECT_LE(int64_t(g.smem_bytes), hopper.smem_per_block) << name;
        KernelConfig twin = c;
        twin.types = bf16.types;
        const int64_t cols = c.params.at("BM");  // kernel columns: m (float8 tiles do not swap)
        if (reads_c && c.params.at("EPILOGUE") == 1 && cols % 64 != 0) {
          EXPECT_EQ(cols % 32, 0) << name;
          EXPECT_EQ(wgmma.broken_rules(twin, bf16, hopper),
                    std::vector<std::string>{"tma_store_layout"})
              << name;
          continue;
        }
        EXPECT_EQ(why_unusable(twin, bf16, hopper), "") << name;
        EXPECT_GE(g.smem_bytes, wgmma.plan(twin, bf16, hopper).smem_bytes) << name;
        more_buffers += g.smem_bytes > wgmma.plan(twin, bf16, hopper).smem_bytes;
        EXPECT_GT(wgmma.predicted_ms(c, p, hopper), wgmma.predicted_ms(twin, bf16, hopper)) << name;
        names.insert(wgmma.kernel_name(twin));
        for (const TensorMapPlan& m : g.maps) {
          if (m.operand != Operand::c) continue;
          ++tma_stores;
          EXPECT_EQ(m.type, DType::f32) << name;
          EXPECT_EQ(m.box_rows, 32u) << name;
        }
      }
      EXPECT_GT(tma_stores, 0) << p.describe();
      EXPECT_GT(more_buffers, 0) << p.describe();
      for (const KernelConfig& twin : wgmma.prune(bf16, hopper).valid) {
        if (names.count(wgmma.kernel_name(twin))) continue;
        KernelConfig c = twin;
        c.types = p.types;
        const std::vector<std::string> broken = wgmma.broken_rules(c, p, hopper);
        EXPECT_FALSE(broken.empty()) << wgmma.kernel_name(c);
        for (const std::string& rule : broken)
          EXPECT_TRUE(rule == "smem_fits" || rule == "two_ctas_fit")
              << wgmma.kernel_name(c) << " breaks " << rule;
      }
      const KernelConfig d = wgmma.default_config(p, hopper);
      EXPECT_EQ(why_unusable(d, p, hopper), "");
      EXPECT_NE(wgmma.emit(d, hopper).find("DTYPE = 0,"), std::string::npos);
    }
  const Problem wide = make_problem(DataTypes{DType::bf16, DType::bf16, DType::f32, DType::f32},
                                    Op::T, Op::N, 4096, 4096, 4096);
  EXPECT_NE(why_unsupported(wgmma, wide, hopper), "");
}

// FNV-1a, 128 bits: the published test vectors (www.isthe.com/chongo/tech/comp/fnv).
TEST(Hash, IsFnv1a128) {
  EXPECT_EQ(hash_hex(""), "6c62272e07bb014262b821756295c58d");
  EXPECT_EQ(hash_hex("a"), "d228cb696f1a8caf78912b704e4a8964");
  EXPECT_EQ(hash_hex("foobar"), "343e1662793c64bf6f0d3597ba446f18");
  EXPECT_NE(hash_hex("abc"), hash_hex("abd"));
}

TEST(Budget, ParsesCandidatesAndTime) {
  EXPECT_EQ(Budget::parse("40").candidates.value(), 40);
  EXPECT_EQ(Budget::parse("300s").seconds.value(), 300);
  EXPECT_EQ(Budget::parse("5m").seconds.value(), 300);
  EXPECT_EQ(Budget::parse("1h").seconds.value(), 3600);
  EXPECT_FALSE(Budget::parse("").candidates || Budget::parse("").seconds);
  for (const char* bad : {"abc", "-3", "0", "10x", "2.5"})
    error_of([&] { Budget::parse(bad); }, Errc::invalid_argument);
}

}  // namespace
}  // namespace gemmtune
