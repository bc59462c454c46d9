// Copies a column-major matrix into a workspace whose columns start 16-byte aligned, for any
// element size: TMA needs that alignment; user data with odd leading dimensions or offsets does
// not have it. Columns are copied as strings of bytes, 16 at a time.
#pragma once
#include "common.cuh"

// 16 consecutive bytes starting at byte address `p`, from the two aligned 16-byte blocks that
// cover them: two coalesced vector loads instead of sixteen bytes.
GEMMTUNE_DEVICE_INLINE uint4 load16_unaligned(const unsigned char* p) {
  const unsigned long long address = reinterpret_cast<unsigned long long>(p);
  const uint4* block = reinterpret_cast<const uint4*>(address & ~15ull);
  const uint4 lo = block[0], hi = block[1];
  const gemmtune::u32 w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  const int word = int(address & 15) / 4;                      // first word of the 16 bytes
  const gemmtune::u32 shift = gemmtune::u32(address & 3) * 8;  // and the byte inside it
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

// Each thread writes one 16-byte chunk of one column. Bytes past the end of a column (up to the
// padded ld) hold zeros: TMA never reads them. Sizes and indices are 64-bit: an operand may hold
// more than 2^31 elements.
extern "C" __global__ void gemmtune_pack(unsigned long long src, long long src_ld_bytes,
                                         long long row_bytes, long long cols,
                                         unsigned long long dst, long long dst_ld_bytes) {
  const long long chunks_per_column = (row_bytes + 15) / 16;
  const long long total = chunks_per_column * cols;
  // One past the last byte of the source: vector loads must not reach beyond it.
  const unsigned long long end = src + (unsigned long long)(cols - 1) * src_ld_bytes + row_bytes;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const long long col = i / chunks_per_column;
    const long long byte0 = i % chunks_per_column * 16;
    const unsigned char* column = reinterpret_cast<const unsigned char*>(src + col * src_ld_bytes);
    const unsigned long long first = reinterpret_cast<unsigned long long>(column + byte0);
    uint4 chunk;
    if (byte0 + 16 <= row_bytes && (first & ~15ull) + 32 <= end) {
      chunk = load16_unaligned(reinterpret_cast<const unsigned char*>(first));
    } else {
      gemmtune::u32 word[4] = {0, 0, 0, 0};
#pragma unroll
      for (int b = 0; b < 16; ++b)
        if (byte0 + b < row_bytes) word[b / 4] |= gemmtune::u32(column[byte0 + b]) << (8 * (b % 4));
      chunk = make_uint4(word[0], word[1], word[2], word[3]);
    }
    *reinterpret_cast<uint4*>(reinterpret_cast<unsigned char*>(dst) + col * dst_ld_bytes + byte0) =
        chunk;
  }
}
