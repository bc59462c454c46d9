// Copies a column-major matrix of 16-bit values into a workspace whose columns start 16-byte
// aligned (ld rounded up to 8). TMA needs that; user data with odd leading dimensions or
// offsets does not have it.
#pragma once
#include "common.cuh"

// Each thread writes one 16-byte chunk (8 rows) of one column; rows past the end are zero.
extern "C" __global__ void gemmtune_pack16(unsigned long long src, long long src_ld, int rows, int cols,
                                           unsigned long long dst, long long dst_ld) {
  const long long chunks_per_column = (rows + 7) / 8;
  const long long total = chunks_per_column * cols;
  const gemmtune::u16* in = reinterpret_cast<const gemmtune::u16*>(src);
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const long long col = i / chunks_per_column;
    const int row0 = int(i % chunks_per_column) * 8;
    const gemmtune::u16* column = in + col * src_ld;
    gemmtune::u32 word[4];
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const int r = row0 + 2 * w;
      const gemmtune::u32 lo = r < rows ? column[r] : 0u;
      const gemmtune::u32 hi = r + 1 < rows ? column[r + 1] : 0u;
      word[w] = lo | (hi << 16);
    }
    *reinterpret_cast<uint4*>(reinterpret_cast<gemmtune::u16*>(dst) + col * dst_ld + row0) =
        make_uint4(word[0], word[1], word[2], word[3]);
  }
}
