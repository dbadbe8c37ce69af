// copy_probe_us (gpu_api.h): one message's copy with nothing else running, the yardstick for the
// replay's measured transfers (docs/VALIDATION.md: the replay's 2 MiB median against it).
#include <algorithm>
#include <vector>

#include "cuda_validate/check.h"
#include "cuda_validate/device_buffer.h"
#include "cuda_validate/gpu_api.h"
#include "cuda_validate/peer.h"

namespace ppsim::gpu {

double copy_probe_us(std::size_t bytes, int src, int dst, int reps) {
  DeviceGuard guard;
  (void)enable_peer_access(src, dst);  // without it the driver stages the copy
  PPSIM_CUDA_CHECK(cudaSetDevice(dst));
  DeviceBuffer<char> to(bytes);
  PPSIM_CUDA_CHECK(cudaSetDevice(src));
  DeviceBuffer<char> from(bytes);
  from.poison();
  Stream st;
  Event a, b;
  std::vector<double> us;
  for (int i = -3; i < std::max(1, reps); ++i) {  // three untimed first
    a.record(st.get());
    if (src == dst) PPSIM_CUDA_CHECK(cudaMemcpyAsync(to.get(), from.get(), bytes, cudaMemcpyDeviceToDevice, st.get()));
    else PPSIM_CUDA_CHECK(cudaMemcpyPeerAsync(to.get(), dst, from.get(), src, bytes, st.get()));
    b.record(st.get());
    b.sync();
    if (i >= 0) us.push_back(static_cast<double>(b.ms_since(a)) * 1e3);
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace ppsim::gpu
