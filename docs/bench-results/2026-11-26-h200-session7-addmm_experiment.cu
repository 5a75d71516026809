// Does cuBLAS (bf16 in/out, compute 32F, beta = 1) add C before rounding? Compare D with
// round(acc + c) and round(round(acc) + c), acc computed in double on the host.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cmath>
static float r2b(double x) { return __bfloat162float(__float2bfloat16((float)x)); }
int run(cublasHandle_t h, int m, int n, int k, int math, int strided) {
  std::vector<__nv_bfloat16> A((size_t)m * k), B((size_t)k * n), C((size_t)m * n), D((size_t)m * n);
  srand(1);
  auto rnd = [] { return (rand() / (double)RAND_MAX - 0.5) * 2; };
  for (auto& x : A) x = __float2bfloat16((float)rnd());
  for (auto& x : B) x = __float2bfloat16((float)rnd());
  // C: a tiny bias per column, as early in training.
  for (int i = 0; i < m; i++) for (int j = 0; j < n; j++) C[(size_t)i * n + j] = __float2bfloat16((float)(1e-3 * rnd()));
  __nv_bfloat16 *a, *b, *c;
  cudaMalloc(&a, A.size() * 2); cudaMalloc(&b, B.size() * 2); cudaMalloc(&c, C.size() * 2);
  cudaMemcpy(a, A.data(), A.size() * 2, cudaMemcpyHostToDevice); cudaMemcpy(b, B.data(), B.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(c, C.data(), C.size() * 2, cudaMemcpyHostToDevice);
  cublasSetMathMode(h, math ? CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION : CUBLAS_DEFAULT_MATH);
  float one = 1, beta = 1;
  // Row-major C[m,n] = A[m,k] B[k,n]  ==  column-major C^T = B^T A^T.
  cublasStatus_t st;
  if (strided) st = cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, CUDA_R_16BF, n, 0, a, CUDA_R_16BF, k, 0, &beta, c, CUDA_R_16BF, n, (long long)m * n, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  else st = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, CUDA_R_16BF, n, a, CUDA_R_16BF, k, &beta, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  cudaMemcpy(D.data(), c, D.size() * 2, cudaMemcpyDeviceToHost);
  size_t once = 0, twice = 0, both = 0, total = 0;
  for (int i = 0; i < m; i += (m > 512 ? 7 : 1)) for (int j = 0; j < n; j += (n > 512 ? 5 : 1)) {
    double acc = 0;
    for (int p = 0; p < k; p++) acc += (double)__bfloat162float(A[(size_t)i * k + p]) * __bfloat162float(B[(size_t)p * n + j]);
    double cv = __bfloat162float(C[(size_t)i * n + j]);
    float d = __bfloat162float(D[(size_t)i * n + j]);
    float f1 = r2b(acc + cv), f2 = r2b((double)r2b(acc) + cv);
    total++; if (f1 == f2) { if (d == f1) both++; } else { if (d == f1) once++; else if (d == f2) twice++; }
  }
  printf("{\"exp\":\"addmm_rounding\",\"m\":%d,\"n\":%d,\"k\":%d,\"disallow_rpr\":%d,\"strided\":%d,\"status\":%d,\"checked\":%zu,\"equal_either\":%zu,\"rounded_once\":%zu,\"rounded_twice\":%zu}\n", m, n, k, math, strided, (int)st, total, both, once, twice);
  cudaFree(a); cudaFree(b); cudaFree(c);
  return 0;
}
int main() {
  cublasHandle_t h; cublasCreate(&h);
  int shapes[][3] = {{8192, 2304, 768}, {8192, 768, 3072}, {256, 256, 64}};
  for (auto& s : shapes) for (int math = 0; math < 2; math++) run(h, s[0], s[1], s[2], math, 1);
  run(h, 8192, 2304, 768, 0, 0);
  return 0;
}
