// The smallest program that uses gemmtune as an installed package: C = A * B in f32 on the GPU,
// checked on the CPU. Exits 2 with a clear message when there is no GPU.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <gemmtune/gemmtune.hpp>
#include <vector>

int main() {
  const int m = 256, n = 128, k = 64;  // column-major, as cuBLAS
  std::vector<float> a(m * k), b(k * n), c(m * n);
  for (int i = 0; i < m * k; ++i) a[i] = float(i % 7) - 3.0f;
  for (int i = 0; i < k * n; ++i) b[i] = float(i % 5) - 2.0f;

  float *da = nullptr, *db = nullptr, *dc = nullptr;
  if (cudaMalloc(&da, a.size() * 4) != cudaSuccess ||
      cudaMalloc(&db, b.size() * 4) != cudaSuccess ||
      cudaMalloc(&dc, c.size() * 4) != cudaSuccess) {
    std::fprintf(stderr, "hello: no GPU: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 2;
  }
  cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice);
  try {
    gemmtune::gemm(gemmtune::Op::N, gemmtune::Op::N, m, n, k, 1.0f, da, m, db, k, 0.0f, dc, m);
  } catch (const gemmtune::Error& e) {
    std::fprintf(stderr, "hello: %s\n", e.what());
    return e.code() == gemmtune::Errc::no_device ? 2 : 1;
  }
  cudaMemcpy(c.data(), dc, c.size() * 4, cudaMemcpyDeviceToHost);
  double max_error = 0;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double ref = 0;
      for (int p = 0; p < k; ++p) ref += double(a[i + p * m]) * double(b[p + j * k]);
      max_error = std::fmax(max_error, std::fabs(ref - c[i + j * m]));
    }
  std::printf("hello: %dx%dx%d SGEMM through gemmtune, max error %g\n", m, n, k, max_error);
  return max_error < 1e-3 ? 0 : 1;
}
