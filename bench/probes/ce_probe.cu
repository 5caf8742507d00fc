// Probe: copy-engine vs SM bandwidth for all-gather style traffic, one process driving all GPUs.
// Build: nvcc -O2 -arch=sm_90 -o ce_probe bench/probes/ce_probe.cu   (run: ./ce_probe, all GPUs of the node, up to 4)
// Results: bench/results/latest/copy-engine-probe.md
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <chrono>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); exit(1);} } while (0)
static int n;
static std::vector<char*> src, dst;
static std::vector<std::vector<cudaStream_t>> st; // st[g][k]
__global__ void push_kernel(const int4 *s, int4 *d0, int4 *d1, int4 *d2, size_t n16) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
  for (; i < n16; i += stride) { int4 v = s[i]; d0[i] = v; d1[i] = v; d2[i] = v; }
}
static void sync_all() { for (int g = 0; g < n; g++) { CK(cudaSetDevice(g)); CK(cudaDeviceSynchronize()); } }
typedef void (*pat_t)(size_t S);
static void ag_push(size_t S) { // 3 streams per GPU, one per peer
  for (int g = 0; g < n; g++) { CK(cudaSetDevice(g)); int k = 0;
    for (int p = 0; p < n; p++) if (p != g) CK(cudaMemcpyAsync(dst[p] + g * S, src[g], S, cudaMemcpyDeviceToDevice, st[g][k++])); }
}
static void ag_push_1s(size_t S) {
  for (int g = 0; g < n; g++) { CK(cudaSetDevice(g));
    for (int i = 1; i < n; i++) { int p = (g + i) % n; CK(cudaMemcpyAsync(dst[p] + g * S, src[g], S, cudaMemcpyDeviceToDevice, st[g][0])); } }
}
static void ag_push_split(size_t S) { // each peer copy in 2 halves on 2 streams
  for (int g = 0; g < n; g++) { CK(cudaSetDevice(g)); int k = 0;
    for (int p = 0; p < n; p++) if (p != g) for (int h = 0; h < 2; h++)
      CK(cudaMemcpyAsync(dst[p] + g * S + h * (S / 2), src[g] + h * (S / 2), S / 2, cudaMemcpyDeviceToDevice, st[g][k++])); }
}
static void ag_pull(size_t S) {
  for (int p = 0; p < n; p++) { CK(cudaSetDevice(p)); int k = 0;
    for (int g = 0; g < n; g++) if (g != p) CK(cudaMemcpyAsync(dst[p] + g * S, src[g], S, cudaMemcpyDeviceToDevice, st[p][k++])); }
}
static void ag_sm(size_t S) {
  for (int g = 0; g < n; g++) { CK(cudaSetDevice(g)); char *d[3]; int k = 0;
    for (int p = 0; p < n; p++) if (p != g) d[k++] = dst[p] + g * S;
    push_kernel<<<132 * 2, 1024, 0, st[g][0]>>>((const int4*)src[g], (int4*)d[0], (int4*)d[1], (int4*)d[2], S / 16); CK(cudaGetLastError()); }
}
static void one_pair(size_t S) { CK(cudaSetDevice(0)); CK(cudaMemcpyAsync(dst[1], src[0], S, cudaMemcpyDeviceToDevice, st[0][0])); }
static void one_pair_peer(size_t S) { CK(cudaSetDevice(0)); CK(cudaMemcpyPeerAsync(dst[1], 1, src[0], 0, S, st[0][0])); }
static void bidir_pair(size_t S) { CK(cudaSetDevice(0)); CK(cudaMemcpyAsync(dst[1], src[0], S, cudaMemcpyDeviceToDevice, st[0][0]));
  CK(cudaSetDevice(1)); CK(cudaMemcpyAsync(dst[0], src[1], S, cudaMemcpyDeviceToDevice, st[1][0])); }
static double time_it(pat_t f, size_t S, int iters) {
  f(S); sync_all();
  std::vector<double> v;
  for (int r = 0; r < 7; r++) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; i++) { f(S); }
    sync_all();
    v.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters);
  }
  std::sort(v.begin(), v.end()); return v[v.size() / 2];
}
int main() {
  CK(cudaGetDeviceCount(&n)); if (n < 2) { printf("need 2+ GPUs\n"); return 0; }
  if (n > 4) n = 4;
  size_t maxS = (size_t)256 << 20;
  src.resize(n); dst.resize(n); st.resize(n);
  for (int g = 0; g < n; g++) { CK(cudaSetDevice(g));
    for (int p = 0; p < n; p++) if (p != g) CK(cudaDeviceEnablePeerAccess(p, 0));
    CK(cudaMalloc(&src[g], maxS)); CK(cudaMalloc(&dst[g], maxS * n)); CK(cudaMemset(src[g], g + 1, maxS));
    st[g].resize(8); for (auto &s : st[g]) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  struct { const char *name; pat_t f; int peers; } pats[] = {
    {"one pair 0->1 memcpyAsync", one_pair, 1}, {"one pair 0->1 memcpyPeerAsync", one_pair_peer, 1},
    {"pair 0<->1 bidirectional", bidir_pair, 1},
    {"AG push CE, stream/peer", ag_push, n - 1}, {"AG push CE, 1 stream", ag_push_1s, n - 1},
    {"AG push CE, 2 streams/peer", ag_push_split, n - 1}, {"AG pull CE, stream/peer", ag_pull, n - 1},
    {"AG push SM kernel 264x1024", ag_sm, n - 1}};
  size_t sizes[] = {(size_t)1 << 20, (size_t)4 << 20, (size_t)32 << 20, (size_t)256 << 20};
  printf("| pattern | bytes per peer | us | egress GB/s per GPU |\n| --- | ---: | ---: | ---: |\n");
  for (auto &p : pats) for (size_t S : sizes) {
    if (n < 4 && p.f == ag_sm) continue;
    int iters = S >= (64 << 20) ? 5 : 50;
    double us = time_it(p.f, S, iters);
    printf("| %s | %zu KiB | %.1f | %.1f |\n", p.name, S >> 10, us, p.peers * (double)S / us / 1e3);
    fflush(stdout);
  }
  return 0;
}
