// Standalone experiment: transposed copy / transposed add_ kernels on f32 16384^2.
#include <cstdio>
#include <cstdint>
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
typedef long long i64;
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("err %s line %d\n", cudaGetErrorString(e), __LINE__); exit(1);} } while (0)

__global__ void copy_v4(float4* o, const float4* a, i64 n4) {
  i64 base = (i64)blockIdx.x * 128 * 4;
  float4 r[4];
#pragma unroll
  for (int u = 0; u < 4; u++) { i64 i = base + u * 128 + threadIdx.x; if (i < n4) r[u] = a[i]; }
#pragma unroll
  for (int u = 0; u < 4; u++) { i64 i = base + u * 128 + threadIdx.x; if (i < n4) o[i] = r[u]; }
}

// B: classic 32x32 tile, 2D grid, (32, R) threads, scalar. out[i][k] (+)= in[k][i]; n x n.
template <int R, bool ADD>
__global__ void tile32(float* o, const float* a, const float* in, int n) {
  __shared__ float s[32][33];
  int c0 = blockIdx.x * 32, ck = blockIdx.y * 32;  // c0 along out's fast dim (i in out[k][i])
  int tx = threadIdx.x, ty = threadIdx.y;
  // out[qk][q0] = in[q0][qk]; stage in rows q0 = c0 + ty + j, cols qk = ck + tx
#pragma unroll
  for (int j = 0; j < 32; j += R) s[ty + j][tx] = in[(i64)(c0 + ty + j) * n + ck + tx];
  float av[32 / R];
  if (ADD) {
#pragma unroll
    for (int j = 0; j < 32; j += R) av[j / R] = a[(i64)(ck + ty + j) * n + c0 + tx];
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < 32; j += R) {
    float x = s[tx][ty + j];
    if (ADD) x += av[j / R];
    o[(i64)(ck + ty + j) * n + c0 + tx] = x;
  }
}

// C: TD x TD tile, (TD/4, R) threads, float4 global loads and stores, scalar smem [k][i0] stride TD+1.
template <int TD, int R, bool ADD>
__global__ void __launch_bounds__(TD / 4 * R) tilev(float* o, const float* a, const float* in, int n) {
  __shared__ float s[TD][TD + 1];
  const int c0 = blockIdx.x * TD, ck = blockIdx.y * TD;
  const int tx = threadIdx.x, ty = threadIdx.y;
  constexpr int J = TD / R;
  float4 v[J];
  float4 av[J];
  // input rows q0 = c0 + ty + R*j (these become out's columns), vector along k at ck + 4tx
#pragma unroll
  for (int j = 0; j < J; j++) v[j] = *reinterpret_cast<const float4*>(in + (i64)(c0 + ty + R * j) * n + ck + 4 * tx);
  if (ADD) {
#pragma unroll
    for (int j = 0; j < J; j++) av[j] = *reinterpret_cast<const float4*>(a + (i64)(ck + ty + R * j) * n + c0 + 4 * tx);
  }
#pragma unroll
  for (int j = 0; j < J; j++) {
    const int r = ty + R * j;
    s[4 * tx + 0][r] = v[j].x; s[4 * tx + 1][r] = v[j].y; s[4 * tx + 2][r] = v[j].z; s[4 * tx + 3][r] = v[j].w;
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < J; j++) {
    const int qk = ty + R * j;
    float4 r;
    r.x = s[qk][4 * tx + 0]; r.y = s[qk][4 * tx + 1]; r.z = s[qk][4 * tx + 2]; r.w = s[qk][4 * tx + 3];
    if (ADD) { r.x += av[j].x; r.y += av[j].y; r.z += av[j].z; r.w += av[j].w; }
    *reinterpret_cast<float4*>(o + (i64)(ck + qk) * n + c0 + 4 * tx) = r;
  }
}

// D: TD x TD tile, 32 x R threads, scalar global loads, but 2D grid without divisions
// and each block doing several tiles along k (persistent in y) to keep bytes in flight.
template <int TD, int R, bool ADD>
__global__ void __launch_bounds__(32 * R) tiles(float* o, const float* a, const float* in, int n) {
  __shared__ float s[TD][TD + 1];
  constexpr int H = TD / 32, J = TD / R;
  const int c0 = blockIdx.x * TD, ck = blockIdx.y * TD;
  const int tx = threadIdx.x, ty = threadIdx.y;
  float av[J][H];
#pragma unroll
  for (int j = 0; j < J; j++)
#pragma unroll
    for (int h = 0; h < H; h++) s[ty + R * j][tx + 32 * h] = in[(i64)(c0 + ty + R * j) * n + ck + tx + 32 * h];
  if (ADD) {
#pragma unroll
    for (int j = 0; j < J; j++)
#pragma unroll
      for (int h = 0; h < H; h++) av[j][h] = a[(i64)(ck + ty + R * j) * n + c0 + tx + 32 * h];
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < J; j++)
#pragma unroll
    for (int h = 0; h < H; h++) {
      float x = s[tx + 32 * h][ty + R * j];
      if (ADD) x += av[j][h];
      o[(i64)(ck + ty + R * j) * n + c0 + tx + 32 * h] = x;
    }
}

__global__ void empty_k(float* p) {}
struct PP { double f0, f1; long long i0, i1; unsigned long long bits; int h0, h1; };
__global__ void big_k(float* p0, const float* p1, const float* p2, const float* p3, long long n, PP prm) {
  long long i = blockIdx.x * 128 + threadIdx.x; if (i < n) p0[i] += p1[i];
}

template <class F>
float timeit(F f, int it) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  for (int i = 0; i < 3; i++) f();
  cudaEventRecord(a);
  for (int i = 0; i < it; i++) f();
  cudaEventRecord(b); CK(cudaEventSynchronize(b));
  float ms; cudaEventElapsedTime(&ms, a, b);
  return ms / it;
}

int main() {
  const int n = 16384;
  const i64 nn = (i64)n * n;
  float *a, *b, *o;
  CK(cudaMalloc(&a, nn * 4)); CK(cudaMalloc(&b, nn * 4)); CK(cudaMalloc(&o, nn * 4));
  cudaMemset(a, 0, nn * 4); cudaMemset(b, 0, nn * 4);
  const int it = 20;
  auto rep = [&](const char* name, double bytes, float ms) { printf("%-28s %8.3f ms %8.1f GB/s\n", name, ms, bytes / ms / 1e6); };
  rep("copy_v4", 8.0 * nn, timeit([&] { copy_v4<<<(nn / 4 + 511) / 512, 128>>>((float4*)o, (const float4*)a, nn / 4); }, it));
  rep("memcpy", 8.0 * nn, timeit([&] { cudaMemcpyAsync(o, a, nn * 4, cudaMemcpyDeviceToDevice); }, it));
  dim3 g32(n / 32, n / 32);
  rep("tile32 R4 copy", 8.0 * nn, timeit([&] { tile32<4, false><<<g32, dim3(32, 4)>>>(o, a, b, n); }, it));
  rep("tile32 R8 copy", 8.0 * nn, timeit([&] { tile32<8, false><<<g32, dim3(32, 8)>>>(o, a, b, n); }, it));
  rep("tile32 R4 add", 12.0 * nn, timeit([&] { tile32<4, true><<<g32, dim3(32, 4)>>>(a, a, b, n); }, it));
  rep("tile32 R8 add", 12.0 * nn, timeit([&] { tile32<8, true><<<g32, dim3(32, 8)>>>(a, a, b, n); }, it));
#define TV(TD, R) \
  rep("tilev " #TD "x" #R " copy", 8.0 * nn, timeit([&] { tilev<TD, R, false><<<dim3(n / TD, n / TD), dim3(TD / 4, R)>>>(o, a, b, n); }, it)); \
  rep("tilev " #TD "x" #R " add", 12.0 * nn, timeit([&] { tilev<TD, R, true><<<dim3(n / TD, n / TD), dim3(TD / 4, R)>>>(a, a, b, n); }, it));
  TV(32, 8) TV(32, 16) TV(32, 32) TV(64, 8) TV(64, 16) TV(64, 32)
#define TS(TD, R) \
  rep("tiles " #TD "x" #R " copy", 8.0 * nn, timeit([&] { tiles<TD, R, false><<<dim3(n / TD, n / TD), dim3(32, R)>>>(o, a, b, n); }, it)); \
  rep("tiles " #TD "x" #R " add", 12.0 * nn, timeit([&] { tiles<TD, R, true><<<dim3(n / TD, n / TD), dim3(32, R)>>>(a, a, b, n); }, it));
  TS(32, 4) TS(32, 8) TS(64, 8) TS(64, 16)
  rep("copy_v4 again", 8.0 * nn, timeit([&] { copy_v4<<<(nn / 4 + 511) / 512, 128>>>((float4*)o, (const float4*)a, nn / 4); }, it));
  // launch cost floor: runtime API and driver API of an empty kernel
  cudaDeviceSynchronize();
  for (int rep2 = 0; rep2 < 2; rep2++) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20000; i++) empty_k<<<1, 128>>>(a);
    auto t1 = std::chrono::steady_clock::now();
    cudaDeviceSynchronize();
    printf("runtime launch host us/op %.3f\n", std::chrono::duration<double, std::micro>(t1 - t0).count() / 20000);
  }
  CUfunction fn;
  cudaFuncGetAttributes(nullptr, empty_k);
  CUcontext ctx; cuCtxGetCurrent(&ctx);
  cudaFunction_t rf; CK(cudaGetFuncBySymbol(&rf, (const void*)empty_k));
  fn = (CUfunction)rf;
  CUstream nb, bl; cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING); cuStreamCreate(&bl, CU_STREAM_DEFAULT);
  struct P { double f0, f1; long long i0, i1; unsigned long long bits; int h0, h1; } prm{};
  long long nn4 = 256;
  CUfunction fb; { cudaFunction_t r2; CK(cudaGetFuncBySymbol(&r2, (const void*)big_k)); fb = (CUfunction)r2; }
  const char* names[] = {"non-blocking", "blocking created", "legacy default", "per-thread default"};
  CUstream sts[] = {nb, bl, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD};
  for (int si = 0; si < 4; si++) for (int rep2 = 0; rep2 < 2; rep2++) {
    void* args[] = {&a};
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20000; i++) cuLaunchKernel(fn, 1, 1, 1, 128, 1, 1, 0, sts[si], args, nullptr);
    auto t1 = std::chrono::steady_clock::now();
    cuCtxSynchronize();
    void* args6[] = {&a, &a, &a, &a, &nn4, &prm};
    auto t2 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20000; i++) cuLaunchKernel(fb, 1, 1, 1, 128, 1, 1, 0, sts[si], args6, nullptr);
    auto t3 = std::chrono::steady_clock::now();
    cuCtxSynchronize();
    printf("cuLaunchKernel host us/op: 1 arg %.3f, 6 args %.3f (%s)\n", std::chrono::duration<double, std::micro>(t1 - t0).count() / 20000,
           std::chrono::duration<double, std::micro>(t3 - t2).count() / 20000, names[si]);
  }
  CUcontext cur; auto t4 = std::chrono::steady_clock::now();
  for (int i = 0; i < 100000; i++) cuCtxGetCurrent(&cur);
  auto t5 = std::chrono::steady_clock::now();
  printf("cuCtxGetCurrent ns %.1f\n", std::chrono::duration<double, std::nano>(t5 - t4).count() / 100000);
  return 0;
}
