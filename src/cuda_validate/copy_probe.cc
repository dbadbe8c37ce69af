// copy_probe_us (gpu_api.h): one message's copy with nothing else running, the yardstick for the
// replay's measured transfers (docs/VALIDATION.md: the replay's 2 MiB median against it).
#include <algorithm>
#include <vector>

#include "cuda_validate/check.h"
#include "cuda_validate/gpu_api.h"
#include "cuda_validate/peer.h"

namespace ppsim::gpu {

double copy_probe_us(std::size_t bytes, int src, int dst, int reps) {
  int saved = 0;
  PPSIM_CUDA_CHECK(cudaGetDevice(&saved));
  (void)enable_peer_access(src, dst);  // without it the driver stages the copy
  void* to = nullptr;
  PPSIM_CUDA_CHECK(cudaSetDevice(dst));
  PPSIM_CUDA_CHECK(cudaMalloc(&to, bytes));
  PPSIM_CUDA_CHECK(cudaSetDevice(src));
  void* from = nullptr;
  PPSIM_CUDA_CHECK(cudaMalloc(&from, bytes));
  PPSIM_CUDA_CHECK(cudaMemset(from, 1, bytes));
  cudaStream_t st = nullptr;
  PPSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t a = nullptr, b = nullptr;
  PPSIM_CUDA_CHECK(cudaEventCreate(&a));
  PPSIM_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<double> us;
  for (int i = -3; i < std::max(1, reps); ++i) {  // three untimed first
    PPSIM_CUDA_CHECK(cudaEventRecord(a, st));
    if (src == dst) PPSIM_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, st));
    else PPSIM_CUDA_CHECK(cudaMemcpyPeerAsync(to, dst, from, src, bytes, st));
    PPSIM_CUDA_CHECK(cudaEventRecord(b, st));
    PPSIM_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    PPSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    if (i >= 0) us.push_back(static_cast<double>(ms) * 1e3);
  }
  (void)cudaEventDestroy(a);
  (void)cudaEventDestroy(b);
  (void)cudaStreamDestroy(st);
  (void)cudaFree(from);
  PPSIM_CUDA_CHECK(cudaSetDevice(dst));
  (void)cudaFree(to);
  PPSIM_CUDA_CHECK(cudaSetDevice(saved));
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace ppsim::gpu
