// The gemv family (generator/src/families/gemv.cpp, templates/gemv_split.h): the K split the
// kernels and the host share, where the family applies, its space, default, names and launch.
#include <gtest/gtest.h>

#include <set>

#include "gemmtune/generator/family.hpp"
#include "gemv_split.h"
#include "support.hpp"

namespace gemmtune {
namespace {

const Family& gemv() {
  return find_family("gemv");
}

Problem decode(const char* layout = "tn", DType d = DType::bf16) {
  return make_problem(d, parse_op(layout[0]), parse_op(layout[1]), 4096, 1, 4096);
}

// The same function the kernel uses to find its slice: slices of a multiple of the granule
// (the last shorter), each non-empty, together exactly [0, K), no more than asked for.
TEST(GemvSplit, SlicesCoverEveryKOnce) {
  std::vector<long long> ks;
  for (long long k = 1; k <= 600; ++k) ks.push_back(k);
  for (long long k : {4095LL, 4096LL, 4097LL, 11008LL, 28672LL, 65537LL, (1LL << 31) - 1})
    ks.push_back(k);
  for (long long k : ks) {
    for (long long splits = 1; splits <= 40; ++splits) {
      for (long long granule : {1LL, 8LL, 32LL, 64LL, 256LL, 2048LL}) {
        const long long length = gemv::slice_length(k, splits, granule);
        const long long count = gemv::slice_count(k, splits, granule);
        ASSERT_EQ(length % granule, 0) << k << " " << splits << " " << granule;
        ASSERT_GE(count, 1);
        ASSERT_LE(count, splits) << k << " " << splits << " " << granule;
        long long covered = 0;
        for (long long s = 0; s < count; ++s) {
          const long long begin = s * length, end = std::min(k, (s + 1) * length);
          ASSERT_EQ(begin, covered)
              << "slice " << s << " of K = " << k << " leaves a gap or overlaps";
          ASSERT_LT(begin, end) << "slice " << s << " of K = " << k << " is empty";
          covered = end;
        }
        ASSERT_EQ(covered, k);
      }
    }
  }
}

TEST(GemvSplit, ASplitLaunchNeedsACounterPerRowBlockAndThePartialSums) {
  EXPECT_EQ(gemv::workspace_bytes(1, 4096), 0);
  EXPECT_EQ(gemv::counter_bytes(100, 1), 0);
  EXPECT_EQ(gemv::workspace_bytes(3, 777), 3 * 777 * 4);
  EXPECT_EQ(gemv::counter_bytes(65, 3), 65 * 4);
}

TEST(GemvFamily, ServesOnlyNOrMEqualToOne) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  EXPECT_EQ(gemv().unsupported_reason(make_problem(DType::bf16, Op::T, Op::N, 64, 2, 64), arch),
            "N and M are both > 1");
  for (const Problem& p : {decode(), make_problem(DType::f32, Op::N, Op::T, 1, 300, 7),
                           make_problem(DType::f16, Op::N, Op::N, 1, 1, 1)}) {
    EXPECT_EQ(gemv().unsupported_reason(p, arch), "") << p.describe();
    EXPECT_EQ(gemv().unsupported_reason(p, ArchInfo::from_name("sm_80")), "") << p.describe();
    ASSERT_FALSE(families_for(p, arch).empty());
    EXPECT_EQ(families_for(p, arch).front()->name(), "gemv") << "gemv comes first where it applies";
  }
  for (const Family* f :
       families_for(make_problem(DType::bf16, Op::T, Op::N, 4096, 16, 4096), arch))
    EXPECT_NE(f->name(), "gemv");
}

TEST(GemvFamily, DecodeSpaceIsSmallWithSidesAndVectorsPinned) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Problem p = decode();
  const Pruning pruning = gemv().prune(p, arch);
  EXPECT_GE(pruning.valid.size(), 10u);
  EXPECT_LE(pruning.valid.size(), 60u);
  EXPECT_EQ(int64_t(pruning.valid.size()) + pruning.pruned(), gemv().space_summary(p, arch).size());
  EXPECT_GT(pruning.pruned_by.at("side_matches_shape"), 0);
  EXPECT_GT(pruning.pruned_by.at("widest_vector"), 0);
  int split = 0;
  for (const auto& c : pruning.valid) {
    EXPECT_EQ(c.at("SIDE"), 0);
    EXPECT_EQ(c.at("VEC"), 8) << "16-byte loads on an aligned problem";
    const LaunchPlan g = gemv().plan(c, p, arch);
    EXPECT_EQ(g.workspace_bytes > 0, g.grid[1] > 1) << gemv().kernel_name(c);
    EXPECT_EQ(g.counter_bytes, g.grid[1] > 1 ? 4 * g.grid[0] : 0) << gemv().kernel_name(c);
    split += g.grid[1] > 1;
  }
  EXPECT_GT(split, 0) << "some candidates split K";

  Problem unaligned = p;
  unaligned.align = 2;
  KernelConfig c = gemv().default_config(p, arch);
  EXPECT_EQ(test::broken_rule(gemv(), c, unaligned, arch), "widest_vector");
  EXPECT_EQ(gemv().default_config(unaligned, arch).at("VEC"), 1);
}

// The default is valid, and its launch covers every output, for any problem the family serves.
TEST(GemvFamily, DefaultIsValidAndCoversEveryOutput) {
  const int64_t shapes[][3] = {{4096, 1, 4096}, {1, 4096, 4096}, {1, 1, 1},       {1, 1, 100000},
                               {7, 1, 3},       {1, 7, 3},       {100000, 1, 16}, {1, 5000, 11008},
                               {300, 1, 1},     {2, 1, 1 << 20}};
  for (const char* arch_name : {"sm_80", "sm_90a"}) {
    const ArchInfo arch = ArchInfo::from_name(arch_name);
    for (DType d : {DType::bf16, DType::f16, DType::f32}) {
      for (const char* layout : {"nn", "nt", "tn", "tt"}) {
        for (const auto& s : shapes) {
          for (int align : {16, 8, 4, 2}) {
            if (align < element_bytes(d)) continue;
            Problem p = make_problem(d, parse_op(layout[0]), parse_op(layout[1]), s[0], s[1], s[2]);
            p.align = align;
            const KernelConfig c = gemv().default_config(p, arch);
            EXPECT_EQ(gemv().why_invalid(c, p, arch), "")
                << gemv().kernel_name(c) << " on " << p.describe();
            const LaunchPlan g = gemv().plan(c, p, arch);
            const int64_t outputs = c.at("SIDE") == 0 ? p.m : p.n;
            const int64_t block_rows = c.at("SIDE") == 0 ? g.tiles_m : g.tiles_n;
            EXPECT_EQ(block_rows, int64_t(g.grid[0]));
            const bool dot = c.at("SIDE") == 0 ? p.op_a == Op::T : p.op_b == Op::N;
            EXPECT_GE(int64_t(g.grid[0]) * gemv::block_rows(dot, int(c.at("THREADS") / 32),
                                                            int(c.at("ROWS")), int(c.at("VEC"))),
                      outputs);
            EXPECT_GE(g.grid[1], 1u);
            EXPECT_LE(int64_t(g.grid[1]), c.at("KSPLIT"));
            EXPECT_LE(g.smem_bytes, 48u * 1024) << "no opt-in shared memory needed";
            EXPECT_EQ(g.workspace_bytes > 0, g.grid[1] > 1);
            EXPECT_EQ(g.counter_bytes > 0, g.grid[1] > 1);
          }
        }
      }
    }
  }
}

TEST(GemvFamily, DefaultsOfTheDecodeShapeAndNamesSayWhatTheyAre) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  // 256 blocks of 16 outputs fill 132 SMs without splitting K.
  EXPECT_EQ(gemv().kernel_name(gemv().default_config(decode("tn"), arch)),
            "gemm_gemv_bf16_tn_n1_dot_t256_r2_u4_k1_v8");
  // 16 blocks of 256 outputs: K split 16 ways gives 256 blocks.
  EXPECT_EQ(gemv().kernel_name(gemv().default_config(decode("nn"), arch)),
            "gemm_gemv_bf16_nn_n1_axpy_t256_r1_u4_k16_v8");
  // M == N == 1: the side whose K is contiguous (A stored K x 1 when transposed, else B's column).
  EXPECT_EQ(
      gemv().default_config(make_problem(DType::f32, Op::N, Op::N, 1, 1, 64), arch).at("SIDE"), 1);
  EXPECT_EQ(
      gemv().default_config(make_problem(DType::f32, Op::T, Op::N, 1, 1, 64), arch).at("SIDE"), 0);
  // M == 1 with tight leading dimensions: lda = ldc = 1 make the alignment class 2, so 2-byte
  // loads.
  Problem m1 = make_problem(DType::f16, Op::N, Op::T, 1, 4096, 4096);
  EXPECT_EQ(gemv().kernel_name(gemv().default_config(m1, arch)),
            "gemm_gemv_f16_nt_m1_axpy_t256_r1_u4_k2_v1");
  m1.lda = m1.ldc = 8;
  m1.align = 16;
  EXPECT_EQ(gemv().kernel_name(gemv().default_config(m1, arch)),
            "gemm_gemv_f16_nt_m1_axpy_t256_r1_u4_k16_v8");
}

TEST(GemvFamily, EmissionIsDeterministicAndNamesAreUnique) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  for (const char* layout : {"nn", "nt", "tn", "tt"}) {
    for (const Problem& p : {decode(layout), make_problem(DType::f32, parse_op(layout[0]),
                                                          parse_op(layout[1]), 1, 4096, 4096)}) {
      std::set<std::string> names, hashes;
      const auto valid = gemv().prune(p, arch).valid;
      ASSERT_FALSE(valid.empty()) << p.describe();
      for (const auto& c : valid) {
        const KernelSource a = emit_source(gemv(), c, arch), b = emit_source(gemv(), c, arch);
        EXPECT_EQ(a.code, b.code);
        EXPECT_NE(a.code.find(a.name), std::string::npos);
        names.insert(a.name);
        hashes.insert(a.hash);
      }
      EXPECT_EQ(names.size(), valid.size());
      EXPECT_EQ(hashes.size(), valid.size());
    }
  }
}

}  // namespace
}  // namespace gemmtune
