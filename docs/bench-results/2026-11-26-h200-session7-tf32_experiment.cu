// TF32 8192^3 through four cuBLAS entry points, to see which one matches PyTorch's mm.
#include <cublas_v2.h>
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <vector>
#include <algorithm>
#define CK(x) do { auto e = (x); if ((int)e != 0) { printf("error %d at %s:%d\n", (int)e, __FILE__, __LINE__); return 1; } } while (0)
const int N = 8192;
template <class F> double tflops(F f) {
  for (int i = 0; i < 5; i++) f();
  cudaDeviceSynchronize();
  std::vector<float> ts;
  cudaEvent_t s, e; cudaEventCreate(&s); cudaEventCreate(&e);
  for (int i = 0; i < 20; i++) { cudaEventRecord(s); f(); cudaEventRecord(e); cudaEventSynchronize(e); float ms; cudaEventElapsedTime(&ms, s, e); ts.push_back(ms); }
  std::sort(ts.begin(), ts.end());
  return 2.0 * N * N * (double)N / (ts[ts.size() / 2] * 1e-3) / 1e12;
}
int main() {
  float *a, *b, *c; void* ws; size_t wsz = 32 << 20;
  CK(cudaMalloc(&a, 4ull * N * N)); CK(cudaMalloc(&b, 4ull * N * N)); CK(cudaMalloc(&c, 4ull * N * N)); CK(cudaMalloc(&ws, wsz));
  cudaMemset(a, 0, 4ull * N * N); cudaMemset(b, 0, 4ull * N * N);
  cublasHandle_t h; CK(cublasCreate(&h));
  float one = 1, zero = 0;
  for (int with_ws = 0; with_ws < 2; with_ws++) {
    if (with_ws) CK(cublasSetWorkspace(h, ws, wsz));
    CK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    double g1 = tflops([&] { cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, a, CUDA_R_32F, N, b, CUDA_R_32F, N, &zero, c, CUDA_R_32F, N, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT); });
    double g2 = tflops([&] { cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, a, CUDA_R_32F, N, (long long)N * N, b, CUDA_R_32F, N, (long long)N * N, &zero, c, CUDA_R_32F, N, (long long)N * N, 1, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT); });
    CK(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH));
    double g3 = tflops([&] { cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, a, N, b, N, &zero, c, N); });
    double g4 = tflops([&] { cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, a, CUDA_R_32F, N, b, CUDA_R_32F, N, &zero, c, CUDA_R_32F, N, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT_TENSOR_OP); });
    printf("{\"exp\":\"tf32\",\"workspace\":%d,\"gemmex\":%.1f,\"strided_batched_1\":%.1f,\"sgemm_tf32_math\":%.1f,\"gemmex_tensor_op_math\":%.1f}\n", with_ws, g1, g2, g3, g4);
  }
  // cuBLASLt, heuristic top choice, 32 MiB workspace.
  cublasLtHandle_t lt; CK(cublasLtCreate(&lt));
  cublasLtMatmulDesc_t d; CK(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F));
  cublasLtMatrixLayout_t la, lb, lc;
  CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, N, N, N)); CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, N, N, N)); CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, N, N, N));
  cublasLtMatmulPreference_t pref; CK(cublasLtMatmulPreferenceCreate(&pref));
  CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsz, sizeof(wsz)));
  cublasLtMatmulHeuristicResult_t res[8]; int nres = 0;
  CK(cublasLtMatmulAlgoGetHeuristic(lt, d, la, lb, lc, lc, pref, 8, res, &nres));
  for (int i = 0; i < nres && i < 4; i++) {
    double g = tflops([&] { cublasLtMatmul(lt, d, &one, a, la, b, lb, &zero, c, lc, c, lc, &res[i].algo, ws, wsz, 0); });
    printf("{\"exp\":\"tf32\",\"lt_algo\":%d,\"tflops\":%.1f}\n", i, g);
  }
  return 0;
}
