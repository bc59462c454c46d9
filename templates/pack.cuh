// Copies a column-major matrix of 16-bit values into a workspace whose columns start 16-byte
// aligned (ld rounded up to 8). TMA needs that; user data with odd leading dimensions or
// offsets does not have it.
#pragma once
#include "common.cuh"

// 8 consecutive 16-bit values starting at byte address `p` (2-byte aligned), from the two
// aligned 16-byte blocks that cover them: two coalesced vector loads instead of eight scalars.
GEMMTUNE_DEVICE_INLINE uint4 load8_unaligned(const unsigned char* p) {
  const unsigned long long address = reinterpret_cast<unsigned long long>(p);
  const uint4* block = reinterpret_cast<const uint4*>(address & ~15ull);
  const uint4 lo = block[0], hi = block[1];
  const gemmtune::u32 w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  const int word = int(address & 15) / 4;              // first word of the 16 bytes
  const gemmtune::u32 shift = (address & 2) ? 16 : 0;  // and the half-word inside it
  gemmtune::u32 out[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    // w[word + i] and w[word + i + 1] without indexing registers at run time.
    gemmtune::u32 a = w[i], b = w[i + 1];
#pragma unroll
    for (int k = 1; k < 4; ++k)
      if (word == k) {
        a = w[i + k];
        b = w[i + k + 1];
      }
    out[i] = __funnelshift_r(a, b, shift);
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

// Each thread writes one 16-byte chunk (8 rows) of one column. Rows past the end (up to the
// padded ld) hold whatever follows in memory or zeros: TMA never reads them. Sizes and indices
// are 64-bit: an operand may hold more than 2^31 elements.
extern "C" __global__ void gemmtune_pack16(unsigned long long src, long long src_ld, long long rows,
                                           long long cols, unsigned long long dst,
                                           long long dst_ld) {
  const long long chunks_per_column = (rows + 7) / 8;
  const long long total = chunks_per_column * cols;
  const gemmtune::u16* in = reinterpret_cast<const gemmtune::u16*>(src);
  // One past the last element of the source: vector loads must not reach beyond it.
  const unsigned long long end = src + 2ull * ((unsigned long long)(cols - 1) * src_ld + rows);
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const long long col = i / chunks_per_column;
    const long long row0 = i % chunks_per_column * 8;
    const gemmtune::u16* column = in + col * src_ld;
    const unsigned long long first = reinterpret_cast<unsigned long long>(column + row0);
    uint4 chunk;
    if (row0 + 8 <= rows && (first & ~15ull) + 32 <= end) {
      chunk = load8_unaligned(reinterpret_cast<const unsigned char*>(first));
    } else {
      gemmtune::u32 word[4];
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const long long r = row0 + 2 * w;
        const gemmtune::u32 lo = r < rows ? column[r] : 0u;
        const gemmtune::u32 hi = r + 1 < rows ? column[r + 1] : 0u;
        word[w] = lo | (hi << 16);
      }
      chunk = make_uint4(word[0], word[1], word[2], word[3]);
    }
    *reinterpret_cast<uint4*>(reinterpret_cast<gemmtune::u16*>(dst) + col * dst_ld + row0) = chunk;
  }
}
