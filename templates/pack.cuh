// The copies a launch makes of an operand before its kernel (runtime/src/launcher.cpp):
//   gemmtune_pack: a column-major matrix into a workspace whose columns start 16-byte aligned,
//     for any element size: TMA needs that alignment; user data with odd leading dimensions or
//     offsets does not have it. Columns are copied as strings of bytes, 16 at a time.
//   gemmtune_derive_f32: the copies of an f32 operand a launch plan names (TensorMapPlan::derived):
//     3xTF32's low parts, transposed copies, aligned likewise.
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

// x - hi(x), where hi(x) is x with the low 13 bits of its mantissa cleared: the tf32 value wgmma
// reads of x. The difference is exact in f32, and wgmma reads its own top 10 bits in turn, so
// hi(x) + low(x) keeps 21 of x's 24 bits. Non-finite values keep their high part alone.
GEMMTUNE_DEVICE_INLINE float tf32_low(float x) {
  const float hi = __uint_as_float(__float_as_uint(x) & 0xffffe000u);
  return isfinite(x) ? x - hi : 0.0f;
}

// Copies of an f32 rows x cols matrix (src_ld apart, any 4-byte alignment) into dst (16-byte
// aligned columns, dst_ld apart; a multiple of 4): the low parts (LOW) of the values, or the
// values themselves, stored as they are (rows past `rows` up to dst_ld zero) or transposed
// (TRANSPOSE: dst is cols x rows).
template <bool LOW>
GEMMTUNE_DEVICE_INLINE float derived_value(float x) {
  return LOW ? tf32_low(x) : x;
}

// A warp per column at a time, four rows a lane (one 16-byte store).
template <bool LOW>
GEMMTUNE_DEVICE_INLINE void derive_columns(const float* src, long long src_ld, long long rows,
                                           long long cols, float* dst, long long dst_ld) {
  const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (long long col = blockIdx.x * (long long)warps + threadIdx.x / 32; col < cols;
       col += (long long)gridDim.x * warps) {
    const float* in = src + col * src_ld;
    float4* out = reinterpret_cast<float4*>(dst + col * dst_ld);
    for (long long row = 4 * lane; row < dst_ld; row += 128) {
      float v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) v[j] = row + j < rows ? derived_value<LOW>(in[row + j]) : 0.0f;
      out[row / 4] = make_float4(v[0], v[1], v[2], v[3]);
    }
  }
}

// 32 x 32 tiles through shared memory (a column of padding against bank conflicts), both sides
// read and written along their columns; 256 threads.
template <bool LOW>
GEMMTUNE_DEVICE_INLINE void derive_transposed(const float* src, long long src_ld, long long rows,
                                              long long cols, float* dst, long long dst_ld) {
  __shared__ float tile[32][33];
  const int x = threadIdx.x % 32, y = threadIdx.x / 32;
  const long long tiles_r = (rows + 31) / 32, tiles = tiles_r * ((cols + 31) / 32);
  for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
    const long long r0 = t % tiles_r * 32, c0 = t / tiles_r * 32;
    for (int j = y; j < 32; j += 8)
      if (r0 + x < rows && c0 + j < cols)
        tile[j][x] = derived_value<LOW>(src[(c0 + j) * src_ld + r0 + x]);
    __syncthreads();
    for (int j = y; j < 32; j += 8)
      if (c0 + x < cols && r0 + j < rows) dst[(r0 + j) * dst_ld + c0 + x] = tile[x][j];
    __syncthreads();
  }
}

extern "C" __global__ void gemmtune_derive_f32(unsigned long long src, long long src_ld,
                                               long long rows, long long cols,
                                               unsigned long long dst, long long dst_ld,
                                               int transpose, int low) {
  const float* in = reinterpret_cast<const float*>(src);
  float* out = reinterpret_cast<float*>(dst);
  if (transpose)
    low ? derive_transposed<true>(in, src_ld, rows, cols, out, dst_ld)
        : derive_transposed<false>(in, src_ld, rows, cols, out, dst_ld);
  else
    low ? derive_columns<true>(in, src_ld, rows, cols, out, dst_ld)
        : derive_columns<false>(in, src_ld, rows, cols, out, dst_ld);
}
