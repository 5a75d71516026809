// Host cost of a kernel launch: sustained (20000 back to back: the launch queue fills and the host waits
// for the GPU) against bursts of 256 after a synchronisation (the queue never fills), plus the GPU-side
// time per kernel from events. nvcc -O2 -arch=sm_90 launch.cu -lcuda -o launch
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>
__global__ void empty() {}
__global__ void add(float* t, const float* u, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) t[i] += u[i]; }
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main() {
  float *t, *u; cudaMalloc(&t, 1024); cudaMalloc(&u, 1024); cudaMemset(t, 0, 1024); cudaMemset(u, 0, 1024);
  cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  CUfunction fe, fa; cudaGetFuncBySymbol(&fe, (const void*)empty); cudaGetFuncBySymbol(&fa, (const void*)add);
  int n = 256; void* args[] = {&t, &u, &n};
  for (int k = 0; k < 2; k++) {
    CUfunction f = k ? fa : fe; void** a = k ? args : nullptr; const char* name = k ? "add256" : "empty";
    for (int i = 0; i < 1000; i++) cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, s, a, nullptr);
    cudaStreamSynchronize(s);
    double t0 = now(); for (int i = 0; i < 20000; i++) cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, s, a, nullptr);
    double host = now() - t0; cudaStreamSynchronize(s); double all = now() - t0;
    std::vector<double> b;
    for (int r = 0; r < 40; r++) { cudaStreamSynchronize(s); double t1 = now(); for (int i = 0; i < 256; i++) cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, s, a, nullptr); b.push_back((now() - t1) / 256); }
    cudaStreamSynchronize(s); std::sort(b.begin(), b.end());
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    cudaEventRecord(e0, s); for (int i = 0; i < 20000; i++) cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, s, a, nullptr); cudaEventRecord(e1, s);
    cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1);
    printf("{\"bench\":\"launch\",\"kernel\":\"%s\",\"sustained_host_us\":%.2f,\"sustained_with_sync_us\":%.2f,\"burst256_host_us\":%.2f,\"gpu_us_per_kernel\":%.2f}\n",
           name, host / 20000 * 1e6, all / 20000 * 1e6, b[b.size() / 2] * 1e6, ms * 1e3 / 20000);
  }
}
