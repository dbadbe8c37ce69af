// Green-context SM partitions (see green.h).
#include "cuda_validate/green.h"

#include <cuda.h>

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "cuda_validate/check.h"
#include "cuda_validate/gpu_api.h"

namespace ppsim::gpu {

namespace {

struct Driver {
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*get_resource)(CUdevice, CUdevResource*, CUdevResourceType) = nullptr;
  CUresult (*split)(CUdevResource*, unsigned int*, const CUdevResource*, CUdevResource*, unsigned int, unsigned int) = nullptr;
  CUresult (*generate_desc)(CUdevResourceDesc*, CUdevResource*, unsigned int) = nullptr;
  CUresult (*create)(CUgreenCtx*, CUdevResourceDesc, CUdevice, unsigned int) = nullptr;
  CUresult (*destroy)(CUgreenCtx) = nullptr;
  CUresult (*stream_create)(CUstream*, CUgreenCtx, unsigned int, int) = nullptr;
  std::string missing;  // "" when every entry point was found
};

template <typename F>
void find(const char* name, F& fn, std::string& missing) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status{};
  if (cudaGetDriverEntryPointByVersion(name, &p, CUDART_VERSION, cudaEnableDefault, &status) != cudaSuccess ||
      status != cudaDriverEntryPointSuccess || !p) {
    (void)cudaGetLastError();
    if (missing.empty()) missing = name;
    return;
  }
  fn = reinterpret_cast<F>(p);
}

const Driver& driver() {
  static const Driver d = [] {
    Driver x;
    find("cuDeviceGet", x.device_get, x.missing);
    find("cuDeviceGetDevResource", x.get_resource, x.missing);
    find("cuDevSmResourceSplitByCount", x.split, x.missing);
    find("cuDevResourceGenerateDesc", x.generate_desc, x.missing);
    find("cuGreenCtxCreate", x.create, x.missing);
    find("cuGreenCtxDestroy", x.destroy, x.missing);
    find("cuGreenCtxStreamCreate", x.stream_create, x.missing);
    return x;
  }();
  return d;
}

[[noreturn]] void fail(const std::string& what) {
  throw InputError("SM partitions (green contexts): " + what + " (validate --sm-split off time-slices the GPU instead)",
                   {}, kExitGpu);
}

void cu_check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) fail(fmt::format("{} failed (CUresult {})", what, static_cast<int>(r)));
}

// Partition size for `groups` equal parts: a multiple of the alignment, at least the minimum.
unsigned int part_size(const CUdevResource& all, int groups) {
  const unsigned int align = std::max(1u, all.sm.smCoscheduledAlignment);
  const unsigned int per = all.sm.smCount / static_cast<unsigned int>(groups) / align * align;
  return per >= all.sm.minSmPartitionSize ? per : 0;
}

}  // namespace

std::string sm_partition_unavailable(int device, int groups) {
  const Driver& d = driver();
  if (!d.missing.empty()) return fmt::format("the driver has no {}", d.missing);
  CUdevice dev = 0;
  if (d.device_get(&dev, device) != CUDA_SUCCESS) return fmt::format("no device {}", device);
  CUdevResource all{};
  if (d.get_resource(dev, &all, CU_DEV_RESOURCE_TYPE_SM) != CUDA_SUCCESS) return "the driver cannot list the GPU's SMs";
  if (groups < 1 || part_size(all, groups) == 0)
    return fmt::format("{} SMs cannot be split into {} partitions of at least {} (multiples of {})", all.sm.smCount,
                       groups, all.sm.minSmPartitionSize, all.sm.smCoscheduledAlignment);
  return {};
}

SmPartitions::SmPartitions(int device, int groups) : device_(device) {
  if (auto why = sm_partition_unavailable(device, groups); !why.empty()) fail(why);
  const Driver& d = driver();
  PPSIM_CUDA_CHECK(cudaSetDevice(device));
  PPSIM_CUDA_CHECK(cudaFree(nullptr));  // the primary context exists before green contexts retain it
  CUdevice dev = 0;
  cu_check(d.device_get(&dev, device), "cuDeviceGet");
  CUdevResource all{};
  cu_check(d.get_resource(dev, &all, CU_DEV_RESOURCE_TYPE_SM), "cuDeviceGetDevResource");
  device_sms_ = static_cast<int>(all.sm.smCount);
  const unsigned int per = part_size(all, groups);
  std::vector<CUdevResource> parts(static_cast<std::size_t>(groups));
  unsigned int n = static_cast<unsigned int>(groups);
  CUdevResource rest{};
  cu_check(d.split(parts.data(), &n, &all, &rest, 0, per), "cuDevSmResourceSplitByCount");
  if (n < static_cast<unsigned int>(groups)) fail(fmt::format("asked for {} partitions of {} SMs, got {}", groups, per, n));
  sms_per_group_ = static_cast<int>(parts[0].sm.smCount);
  for (int g = 0; g < groups; ++g) {
    CUdevResourceDesc desc = nullptr;
    cu_check(d.generate_desc(&desc, &parts[static_cast<std::size_t>(g)], 1), "cuDevResourceGenerateDesc");
    CUgreenCtx ctx = nullptr;
    cu_check(d.create(&ctx, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM), "cuGreenCtxCreate");
    ctx_.push_back(ctx);
  }
}

SmPartitions::~SmPartitions() {
  for (void* c : ctx_) (void)driver().destroy(static_cast<CUgreenCtx>(c));
}

std::string sm_partition_check(int device, int groups, int* sms, int* device_sms) {
  if (auto why = gpu_unavailable_reason(); !why.empty()) return why;
  if (auto why = sm_partition_unavailable(device, groups); !why.empty()) return why;
  if (sms || device_sms) {
    const SmPartitions p(device, groups);
    if (sms) *sms = p.sms_per_group();
    if (device_sms) *device_sms = p.device_sms();
  }
  return {};
}

cudaStream_t SmPartitions::create_stream(int group, int priority) const {
  CUstream s = nullptr;
  cu_check(driver().stream_create(&s, static_cast<CUgreenCtx>(ctx_.at(static_cast<std::size_t>(group))),
                                  CU_STREAM_NON_BLOCKING, priority),
           "cuGreenCtxStreamCreate");
  return reinterpret_cast<cudaStream_t>(s);
}

}  // namespace ppsim::gpu
