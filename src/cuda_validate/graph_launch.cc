// GraphCache (see graph_launch.h).
#include "cuda_validate/graph_launch.h"

#include <atomic>

#include "cuda_validate/check.h"
#include "cuda_validate/gpu_api.h"

namespace ppsim::gpu {
namespace {
std::atomic<bool> g_graphs{false};
}

void set_graph_launch(bool on) { g_graphs.store(on); }
bool graph_launch() { return g_graphs.load(); }

GraphCache::~GraphCache() {
  for (auto& [key, exec] : execs_)
    if (exec) (void)cudaGraphExecDestroy(exec);
}

void GraphCache::launch(std::uint64_t key, cudaStream_t s, const std::function<void()>& enqueue) {
  cudaStreamCaptureStatus now = cudaStreamCaptureStatusNone;
  PPSIM_CUDA_CHECK(cudaStreamIsCapturing(s, &now));
  if (now == cudaStreamCaptureStatusActive) {  // inside a larger capture: part of that graph
    enqueue();
    return;
  }
  PPSIM_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  try {
    enqueue();
  } catch (...) {
    cudaGraph_t broken = nullptr;
    (void)cudaStreamEndCapture(s, &broken);
    if (broken) (void)cudaGraphDestroy(broken);
    (void)cudaGetLastError();
    throw;
  }
  cudaGraph_t g = nullptr;
  PPSIM_CUDA_CHECK(cudaStreamEndCapture(s, &g));
  ++stats_.captures;
  cudaGraphExec_t& exec = execs_[key];
  if (exec) {
    cudaGraphExecUpdateResultInfo info{};
    if (cudaGraphExecUpdate(exec, g, &info) == cudaSuccess) {
      ++stats_.updates;
    } else {  // another topology under the same key: a new executable
      (void)cudaGetLastError();
      (void)cudaGraphExecDestroy(exec);
      exec = nullptr;
    }
  }
  if (!exec) {
    const cudaError_t e = cudaGraphInstantiate(&exec, g, 0);
    if (e != cudaSuccess) {
      exec = nullptr;
      (void)cudaGraphDestroy(g);
      PPSIM_CUDA_CHECK(e);
    }
    ++stats_.instantiations;
  }
  (void)cudaGraphDestroy(g);
  PPSIM_CUDA_CHECK(cudaGraphLaunch(exec, s));
}

bool GraphCache::launch(std::uint64_t key, cudaStream_t s, const std::function<void()>& enqueue,
                        std::uint64_t signature) {
  const auto it = execs_.find(key);
  if (it != execs_.end() && it->second && signatures_[key] == signature) {
    cudaStreamCaptureStatus now = cudaStreamCaptureStatusNone;
    PPSIM_CUDA_CHECK(cudaStreamIsCapturing(s, &now));
    if (now != cudaStreamCaptureStatusActive) {
      PPSIM_CUDA_CHECK(cudaGraphLaunch(it->second, s));
      ++stats_.reused;
      return false;
    }
  }
  launch(key, s, enqueue);
  signatures_[key] = signature;
  return true;
}

void record_in_capture(cudaEvent_t e, cudaStream_t s) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  PPSIM_CUDA_CHECK(cudaStreamIsCapturing(s, &st));
  if (st == cudaStreamCaptureStatusActive)
    PPSIM_CUDA_CHECK(cudaEventRecordWithFlags(e, s, cudaEventRecordExternal));
  else
    PPSIM_CUDA_CHECK(cudaEventRecord(e, s));
}

}  // namespace ppsim::gpu
