// Peer access between two GPUs of this process (the transport's peer copies, the all-to-all's
// peer stores, the copy probe): one place that asks and enables it.
#pragma once
#include <cuda_runtime.h>

#include <mutex>
#include <set>
#include <utility>

#include "cuda_validate/check.h"

namespace ppsim::gpu {

// Lets GPU `from` address `to`'s memory directly. False when the pair cannot (no NVLink/P2P: copies
// still work, staged by the driver; direct stores do not). Enabling twice is fine: the pairs this
// process enabled are remembered, so the driver is asked once (a second call returns an error that
// compute-sanitizer reports, even though it is harmless). Leaves the calling thread on GPU `from`.
inline bool enable_peer_access(int from, int to) {
  if (from == to) return true;
  int can = 0;
  PPSIM_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, from, to));
  if (!can) return false;
  PPSIM_CUDA_CHECK(cudaSetDevice(from));
  static std::mutex mu;
  static std::set<std::pair<int, int>> enabled;
  std::lock_guard<std::mutex> lock(mu);
  if (!enabled.insert({from, to}).second) return true;
  const cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
  else PPSIM_CUDA_CHECK(e);
  return true;
}

}  // namespace ppsim::gpu
