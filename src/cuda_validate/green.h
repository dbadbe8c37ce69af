// SM partitions of one GPU through CUDA green contexts: ranks that share a GPU (virtual ranks)
// each get their own SMs instead of time-slicing all of them. Driver entry points are looked up
// at run time (cudaGetDriverEntryPointByVersion), so the binary does not link libcuda and still
// starts on machines without a driver.
// Not obvious: a green context belongs to the primary context (same memory, same cuBLAS/cuDNN
// handles); only kernels launched on its streams are confined to its SMs. Copies, NCCL and
// anything on ordinary streams still run anywhere.
#pragma once
#include <string>
#include <vector>

#include <cuda_runtime.h>

namespace ppsim::gpu {

class SmPartitions {
 public:
  // Splits `device` into `groups` partitions of equal size: the largest multiple of the GPU's
  // partition alignment (8 SMs on Hopper) that fits `groups` times. Throws InputError(kExitGpu)
  // with the reason when that is impossible (no driver support, too many groups).
  SmPartitions(int device, int groups);
  ~SmPartitions();
  SmPartitions(const SmPartitions&) = delete;
  SmPartitions& operator=(const SmPartitions&) = delete;

  int device() const { return device_; }
  int groups() const { return static_cast<int>(ctx_.size()); }
  int sms_per_group() const { return sms_per_group_; }
  int device_sms() const { return device_sms_; }
  // A new non-blocking stream whose kernels run on partition `group`'s SMs; the caller destroys
  // it (cudaStreamDestroy) before this object goes.
  cudaStream_t create_stream(int group, int priority) const;

 private:
  int device_ = 0;
  int sms_per_group_ = 0;
  int device_sms_ = 0;
  std::vector<void*> ctx_;  // CUgreenCtx
};

// "" when `device` can be split into `groups` SM partitions; otherwise why not (one line).
std::string sm_partition_unavailable(int device, int groups);

}  // namespace ppsim::gpu
