// gpu_api.h in the ppsim binary when built with CUDA: each function forwards to
// libppsim_gpu.so, opened with dlopen on the first call (a GPU command), so that CPU commands
// start without loading cudart, cuBLASLt, cuDNN or NCCL. The .so is looked for as
// launch::open_plugin does (beside the executable, ../lib, beside the Python module, which links
// this file too). A missing or broken .so makes gpu_unavailable_reason() say so in one line, and
// the other calls throw it with exit code 5.
#include <dlfcn.h>

#include <string>

#include "core/error.h"
#include "cuda_validate/gpu_table.h"
#include "launch/plugin.h"

namespace ppsim::gpu {

namespace {

using Loaded = launch::LoadedTable<GpuTable>;

const Loaded& loaded() {
  static const Loaded l = launch::open_table<GpuTable>("libppsim_gpu.so", "ppsim_gpu_table", RTLD_NOW | RTLD_LOCAL,
                                                       "the GPU back-end", kGpuTableVersion);
  return l;
}

const GpuTable& table() {
  const Loaded& l = loaded();
  if (!l.table) throw InputError(l.error, {}, kExitGpu);
  return *l.table;
}

}  // namespace

bool built_with_cuda() { return true; }
std::string gpu_unavailable_reason() {
  const Loaded& l = loaded();
  return l.table ? l.table->gpu_unavailable_reason() : l.error;
}
std::string device_name(int device) { return table().device_name(device); }
int device_count() { return table().device_count(); }
double copy_probe_us(std::size_t bytes, int src, int dst, int reps) { return table().copy_probe_us(bytes, src, dst, reps); }
ProfileResult profile_chunk(const ChunkShape& s, int warmup, int reps, int device, int sm_groups) {
  return table().profile_chunk(s, warmup, reps, device, sm_groups);
}
SharingProfile profile_sharing(const ChunkShape& s, int warmup, int reps, int device, int sm_groups) {
  return table().profile_sharing(s, warmup, reps, device, sm_groups);
}
CorunProfile profile_corun(const ChunkShape& s, int warmup, int reps, int device, int peer) {
  return table().profile_corun(s, warmup, reps, device, peer);
}
std::vector<std::array<double, 3>> profile_partitions(const ChunkShape& s, int warmup, int reps, int device,
                                                      int sm_groups) {
  return table().profile_partitions(s, warmup, reps, device, sm_groups);
}
std::string sm_partition_check(int device, int groups, int* sms, int* device_sms) {
  return table().sm_partition_check(device, groups, sms, device_sms);
}
std::string profile_yaml(const ProfileResult& r) { return table().profile_yaml(r); }
int run_profile(const ProfileRequest& req) { return table().run_profile(req); }
int run_kernel_bench(const KernelBenchRequest& req) { return table().run_kernel_bench(req); }
Timeline replay_schedule(const Schedule& s, const ReplayConfig& c) { return table().replay_schedule(s, c); }
void set_graph_launch(bool on) { table().set_graph_launch(on); }

}  // namespace ppsim::gpu
