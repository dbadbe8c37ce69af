// The one entry point libppsim_gpu.so exports: a table of gpu_api.h's functions, filled by
// gpu_module.cc inside the .so and called through by gpu_loader.cc in the ppsim binary.
//
// Not obvious: the table is versioned by kGpuTableVersion and its size, so that a .so from
// another build is refused with a message instead of being called through a wrong layout.
#pragma once
#include <cstddef>

#include "cuda_validate/gpu_api.h"

namespace ppsim::gpu {

inline constexpr int kGpuTableVersion = 5;

struct GpuTable {
  int version;
  std::size_t size;  // sizeof(GpuTable) of the build that filled it
  bool (*built_with_cuda)();
  std::string (*gpu_unavailable_reason)();
  std::string (*device_name)(int);
  int (*device_count)();
  ProfileResult (*profile_chunk)(const ChunkShape&, int, int, int, int);
  SharingProfile (*profile_sharing)(const ChunkShape&, int, int, int, int);
  std::vector<std::array<double, 3>> (*profile_partitions)(const ChunkShape&, int, int, int, int);
  std::string (*sm_partition_check)(int, int, int*, int*);
  std::string (*profile_yaml)(const ProfileResult&);
  int (*run_profile)(const ProfileRequest&);
  int (*run_kernel_bench)(const KernelBenchRequest&);
  Timeline (*replay_schedule)(const Schedule&, const ReplayConfig&);
  double (*copy_probe_us)(std::size_t, int, int, int);
  CorunProfile (*profile_corun)(const ChunkShape&, int, int, int, int);
  void (*set_graph_launch)(bool);
};

}  // namespace ppsim::gpu

// extern "C" so that dlsym finds it by this plain name.
extern "C" const ppsim::gpu::GpuTable* ppsim_gpu_table();
