// Built instead of the CUDA back-end when nvcc is absent (PPSIM_CUDA=OFF): the GPU commands
// exist and fail with one clear line (exit code kExitGpu).
#include "cuda_validate/gpu_api.h"

#include "core/error.h"

namespace ppsim::gpu {
namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw InputError(std::string(what) + ": " + gpu_unavailable_reason(),
                   {}, kExitGpu);
}
}  // namespace

bool built_with_cuda() { return false; }

std::string gpu_unavailable_reason() {
  return "this ppsim was built without the CUDA back-end (PPSIM_CUDA=OFF or no nvcc at build time)";
}

std::string device_name(int) { no_cuda("device_name"); }
int device_count() { no_cuda("device_count"); }
double copy_probe_us(std::size_t, int, int, int) { no_cuda("copy probe"); }
ProfileResult profile_chunk(const ChunkShape&, int, int, int, int) { no_cuda("profile"); }
SharingProfile profile_sharing(const ChunkShape&, int, int, int, int) { no_cuda("profile"); }
std::vector<std::array<double, 3>> profile_partitions(const ChunkShape&, int, int, int, int) { no_cuda("profile"); }
CorunProfile profile_corun(const ChunkShape&, int, int, int, int) { no_cuda("profile"); }
std::string sm_partition_check(int, int, int*, int*) { return gpu_unavailable_reason(); }
std::string profile_yaml(const ProfileResult&) { no_cuda("profile"); }
int run_profile(const ProfileRequest&) { no_cuda("profile"); }
int run_kernel_bench(const KernelBenchRequest&) { no_cuda("kernel bench"); }
Timeline replay_schedule(const Schedule&, const ReplayConfig&) { no_cuda("replay"); }
void set_graph_launch(bool) {}  // nothing is launched without the back-end

}  // namespace ppsim::gpu
