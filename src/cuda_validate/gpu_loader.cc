// gpu_api.h in the ppsim binary when built with CUDA: each function forwards to
// libppsim_gpu.so, opened with dlopen on the first call (a GPU command), so that CPU commands
// start without loading cudart, cuBLASLt, cuDNN or NCCL. The .so is looked for beside the
// executable, then in ../lib (an installed binary), then beside the object holding this code when
// that is not the executable (the Python module, which links this file too). A missing or broken .so makes
// gpu_unavailable_reason() say so in one line, and the other calls throw it with exit code 5.
#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "cuda_validate/gpu_table.h"

namespace ppsim::gpu {

namespace {

std::string exe_dir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<std::size_t>(n));
  return p.substr(0, p.rfind('/'));
}

// The directory of the shared object (or executable) this code is linked into.
std::string own_dir() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&exe_dir), &info) == 0 || !info.dli_fname) return {};
  std::string p(info.dli_fname);
  const std::size_t slash = p.rfind('/');
  return slash == std::string::npos ? std::string() : p.substr(0, slash);
}

struct Loaded {
  const GpuTable* table = nullptr;
  std::string error;  // why table is null
};

const Loaded& loaded() {
  static Loaded l;
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string dir = exe_dir();
    std::vector<std::string> candidates = {dir + "/libppsim_gpu.so", dir + "/../lib/libppsim_gpu.so"};
    if (const std::string own = own_dir(); !own.empty() && own != dir) candidates.push_back(own + "/libppsim_gpu.so");
    std::string tried;
    for (const auto& path : candidates) {
      if (::access(path.c_str(), F_OK) != 0) {
        tried += (tried.empty() ? "" : ", ") + path;
        continue;
      }
      void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!h) {
        const char* e = ::dlerror();
        l.error = fmt::format("cannot load the GPU back-end {}: {}", path, e ? e : "unknown error");
        return;
      }
      using Entry = const GpuTable* (*)();
      auto entry = reinterpret_cast<Entry>(::dlsym(h, "ppsim_gpu_table"));
      const GpuTable* t = entry ? entry() : nullptr;
      if (!t || t->version != kGpuTableVersion || t->size != sizeof(GpuTable)) {
        l.error = fmt::format("the GPU back-end {} is from another ppsim build (rebuild ppsim)", path);
        return;
      }
      l.table = t;
      return;
    }
    l.error = fmt::format("the GPU back-end libppsim_gpu.so is missing (looked for {})", tried);
  });
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

}  // namespace ppsim::gpu
