// Words (see words.h): stream memory operations through the runtime's driver entry points (no
// link to libcuda).
#include "cuda_validate/replay/words.h"

#include <cuda.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>

#include "cuda_validate/check.h"

namespace ppsim::gpu::replay {
namespace {

using WaitFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
using WriteFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

struct Entry {
  WaitFn wait = nullptr;
  WriteFn write = nullptr;
  std::string why;
};

const Entry& entry() {
  static const Entry e = [] {
    Entry x;
    cudaDriverEntryPointQueryResult q1{}, q2{};
    void* w = nullptr;
    void* r = nullptr;
    if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &w, 12000, cudaEnableDefault, &q1) != cudaSuccess ||
        cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &r, 12000, cudaEnableDefault, &q2) != cudaSuccess ||
        q1 != cudaDriverEntryPointSuccess || q2 != cudaDriverEntryPointSuccess || !w || !r) {
      (void)cudaGetLastError();
      x.why = "the driver has no cuStreamWaitValue32/cuStreamWriteValue32";
      return x;
    }
    x.wait = reinterpret_cast<WaitFn>(w);
    x.write = reinterpret_cast<WriteFn>(r);
    return x;
  }();
  return e;
}

void check_cu(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS)
    throw_gpu_failure(fmt::format("{} failed (CUresult {})", what, static_cast<int>(r)),
                      "run without value waits (PPSIM_REPLAY_WAITS=event)");
}

}  // namespace

std::string value_waits_unavailable() { return entry().why; }

Words::Words(std::size_t n) : n_(n) {
  void* p = nullptr;
  PPSIM_CUDA_CHECK(cudaHostAlloc(&p, std::max<std::size_t>(n, 1) * sizeof(std::uint32_t),
                                 cudaHostAllocMapped | cudaHostAllocPortable));
  words_ = static_cast<std::uint32_t*>(p);
  store_all(0);
}

Words::~Words() {
  if (words_) (void)cudaFreeHost(words_);
}

void Words::write(cudaStream_t st, std::size_t i, std::uint32_t value) {
  check_cu(entry().write(reinterpret_cast<CUstream>(st), reinterpret_cast<CUdeviceptr>(words_ + i), value,
                         CU_STREAM_WRITE_VALUE_DEFAULT),
           "cuStreamWriteValue32");
}

void Words::wait(cudaStream_t st, std::size_t i, std::uint32_t value) {
  check_cu(entry().wait(reinterpret_cast<CUstream>(st), reinterpret_cast<CUdeviceptr>(words_ + i), value,
                        CU_STREAM_WAIT_VALUE_GEQ),
           "cuStreamWaitValue32");
}

void Words::store(std::size_t i, std::uint32_t value) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  reinterpret_cast<volatile std::uint32_t*>(words_)[i] = value;
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void Words::store_all(std::uint32_t value) {
  for (std::size_t i = 0; i < n_; ++i) store(i, value);
}

}  // namespace ppsim::gpu::replay
