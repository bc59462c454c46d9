// Hopper GEMM for bf16 and f16, for float8 with scales, and for f32 read as tf32 once or three
// times (3xTF32) (f32 accumulation): TMA loads with
// 128-byte swizzle into a ring of shared-memory stages, wgmma from shared-memory descriptors,
// mbarrier pipelines.
//
// wgmma computes D(64-row blocks x N) += P(rows x K) * Q(K x N). The kernel puts one problem
// dimension on the 64-row blocks ("kernel rows", TM per tile) and the other on wgmma's N
// ("kernel columns", TN per tile, any multiple of 8 up to 256):
//   SWAP = 0: kernel rows are problem n, kernel columns problem m: it computes
//             C^T = op(B)^T op(A)^T, P = op(B)^T, Q = op(A)^T. A thread's accumulator pairs are
//             neighbours along m, contiguous in column-major C (4-byte stores, TMA stores).
//   SWAP = 1: kernel rows are problem m, columns problem n: C = op(A) op(B), P = op(A),
//             Q = op(B). For skinny problems (decode: n = a few tokens) wgmma's N covers n in
//             steps of 8 instead of padding it to 64 rows.
// Each operand sits in shared memory K-major (rows of 64 K values, 128 bytes) or MN-major (rows
// of 64 M/N values, one per K), whichever its storage order gives; wgmma's transpose bits take
// either, so all four op(A)/op(B) run without copies. An MN-major Q comes in 64-column chunks,
// so its TN is a multiple of 64.
//
// Schedules:
//   WS = 1: warp-specialized and persistent. Warpgroup 0 produces (one thread issues TMA),
//           warpgroups 1..WG consume; setmaxnreg moves registers to the consumers. Every CTA (or
//           cluster) is a worker of the tile schedule (schedule.h): data-parallel tiles,
//           split-K parts or stream-K runs of k-blocks. A tile's epilogue overlaps the next
//           tile's loads. Clusters of two CTAs share one operand tile through TMA multicast,
//           or (CLUSTER_K = 2 or 4) split each tile's k-blocks: each CTA owns a share of the
//           tile's 8-column groups, receives the others' partial sums of them through
//           distributed shared memory, adds and stores them. Problems bound by latency thus
//           stream each tile's operands through two or four SMs.
//           PINGPONG (with two consumer warpgroups): each consumer computes whole tiles, every
//           other one of the CTA's, so that one's epilogue overlaps the other's main loop.
//   WS = 0: multistage, one tile per CTA. Every warpgroup computes; one thread keeps STAGES-1
//           loads in flight.
// A tile computed in several parts (split-K, stream-K) is reduced deterministically through the
// workspace: each part stores its fp32 partial sums and counts itself on the tile's counter;
// the last part adds all partials in part order, runs the epilogue and zeroes the counter.
//
// Tails in M, N and K are zero-filled by TMA; stores are predicated. beta == 0 never reads C; a
// kernel built without READS_C has no code that reads C at all and takes beta == 0 alone.
#pragma once
// The kernel is put together from these headers of wgmma_sm90/, in reading order; each part is
// a struct template of Cfg that derives from Traits<Cfg>:
//   layout.h              sizes of a configuration, shared with the host generator
//   traits.cuh            Traits<Cfg>: the kernel's constants and checks
//   shared_memory.cuh     SharedMemory<Cfg>: the carve-up, barriers made at the start
//   tiles.cuh             Tiles<Cfg>: tile mapping, the work of a worker, k ranges
//   mainloop.cuh          Mainloop<Cfg>: a stage's loads, a consumer's wgmma on it
//   parts.cuh             Parts<Cfg>: tiles computed in parts, added up in the workspace
//   cluster_k.cuh         ClusterK<Cfg>: partial sums added through distributed smem
//   store_registers.cuh   RegisterStore<Cfg>: the epilogue from registers
//   store_tma.cuh         TmaStore<Cfg>: the epilogue through shared memory, C's loads
//   epilogue.cuh          Epilogue<Cfg>: which of the two, and how C is read
//   warp_specialized.cuh  WarpSpecialized<Cfg>: the persistent schedule (WS = 1)
//   multistage.cuh        Multistage<Cfg>: one tile per CTA (WS = 0)
#include "ptx/tma.cuh"
#include "wgmma_sm90/epilogue.cuh"
#include "wgmma_sm90/multistage.cuh"
#include "wgmma_sm90/shared_memory.cuh"
#include "wgmma_sm90/traits.cuh"
#include "wgmma_sm90/warp_specialized.cuh"

namespace gemmtune {
namespace wgmma_sm90 {

// The kernel: its constants (Traits, for the generated unit: THREADS, CTAS_PER_SM, SMEM_BYTES)
// and its entry, which runs the schedule Cfg::WS names.
template <class Cfg>
struct Kernel : Traits<Cfg> {
  GEMMTUNE_DEVICE_INLINE static void run(const WgmmaArgs& args, unsigned char* smem_raw) {
    if (threadIdx.x == 0) {  // the descriptors' fetch overlaps the barriers' making
      ptx::tma_prefetch_descriptor(&args.map_a);
      ptx::tma_prefetch_descriptor(&args.map_b);
      if (Traits<Cfg>::PRODUCTS == 3) {
        ptx::tma_prefetch_descriptor(&args.map_a_low);
        ptx::tma_prefetch_descriptor(&args.map_b_low);
      }
      if (Epilogue<Cfg>::stores_by_tma(args)) {
        ptx::tma_prefetch_descriptor(&args.map_d);
        if (args.core.beta != 0.0f) ptx::tma_prefetch_descriptor(&args.map_c);
      }
    }
    const SharedMemory<Cfg> s = SharedMemory<Cfg>::carve(smem_raw);
    if constexpr (Traits<Cfg>::WS)
      WarpSpecialized<Cfg>::run(args, s);
    else
      Multistage<Cfg>::run(args, s);
  }
};

}  // namespace wgmma_sm90
}  // namespace gemmtune

#ifndef GEMMTUNE_GENERATED
// Defaults (the known good point), so that nvcc can build and disassemble the template offline:
//   nvcc -x cu -gencode=arch=compute_90a,code=sm_90a -cubin -I templates templates/wgmma_sm90.cuh
struct GemmtuneWgmmaDefault {
  static constexpr int BIAS = 0, ACTIVATION = 0, GATE = 0, AUX = 0;  // no epilogue
  static constexpr int BM = 256, BN = 128, STAGES = 4, WG = 2;
  static constexpr bool SWAP = false, WS = true;
  static constexpr int CLUSTER_M = 1, CLUSTER_N = 2, RASTER = 0, GROUP = 8, EPILOGUE = 1,
                       C_BUFFERS = 2;
  static constexpr int SCHEDULE = 0, SPLITS = 1, CLUSTER_K = 1, OCCUPANCY = 1, KSUB = 1;
  static constexpr bool PINGPONG = false, A_T = false, B_T = false;
  static constexpr int A_TYPE = 2, B_TYPE = 2, DTYPE = 2, SCALING = 0, PROMOTE = 0;
  static constexpr bool READS_C = true, OVERLAP = false;
  static constexpr int PRODUCTS = 1;
};
extern "C" __global__ void __launch_bounds__(
    gemmtune::wgmma_sm90::Kernel<GemmtuneWgmmaDefault>::THREADS,
    gemmtune::wgmma_sm90::Kernel<GemmtuneWgmmaDefault>::CTAS_PER_SM)
    gemm_wgmma_default(const __grid_constant__ WgmmaArgs args) {
  extern __shared__ __align__(1024) unsigned char gemmtune_smem[];
  gemmtune::wgmma_sm90::Kernel<GemmtuneWgmmaDefault>::run(args, gemmtune_smem);
}
#endif
