// libppsim_gpu.so's exported entry point (gpu_table.h): everything else in the .so is hidden, so
// its gpu_api.h functions never collide with the forwarding ones of the ppsim binary.
#include "cuda_validate/gpu_table.h"

extern "C" __attribute__((visibility("default"))) const ppsim::gpu::GpuTable* ppsim_gpu_table() {
  namespace g = ppsim::gpu;
  static const g::GpuTable table{g::kGpuTableVersion,        sizeof(g::GpuTable), &g::built_with_cuda,
                                 &g::gpu_unavailable_reason, &g::device_name,     &g::device_count,
                                 &g::profile_chunk,          &g::profile_sharing, &g::profile_partitions,
                                 &g::sm_partition_check,     &g::profile_yaml,    &g::run_profile,
                                 &g::run_kernel_bench,       &g::replay_schedule, &g::copy_probe_us,
                                 &g::profile_corun,          &g::set_graph_launch};
  return &table;
}
