// Transport (see transport.h): staging copies, the message board, device copies and NCCL pairs.
#include "cuda_validate/replay/transport.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

#include "core/error.h"
#include "cuda_validate/check.h"

namespace ppsim::gpu::replay {

namespace {
// Restores the calling thread's current GPU when leaving a scope that switched it.
class DeviceGuard {
 public:
  DeviceGuard() { PPSIM_CUDA_CHECK(cudaGetDevice(&saved_)); }
  ~DeviceGuard() { (void)cudaSetDevice(saved_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int saved_ = 0;
};
}  // namespace

Transport::Transport(std::vector<int> rank_device, double timeout_s)
    : rank_device_(std::move(rank_device)), timeout_s_(timeout_s) {
  for (int d : rank_device_)
    if (std::find(devices_.begin(), devices_.end(), d) == devices_.end()) devices_.push_back(d);
  for (std::size_t i = 0; i < devices_.size(); ++i) nccl_rank_of_device_[devices_[i]] = static_cast<int>(i);
  DeviceGuard guard;
  int lo = 0, hi = 0;
  for (int d : rank_device_) {
    PPSIM_CUDA_CHECK(cudaSetDevice(d));
    PPSIM_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    cudaStream_t s = nullptr;
    PPSIM_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, hi));  // hi = most urgent
    comm_streams_.push_back(s);
  }
  if (devices_.size() > 1) {
    // NVLink multicast (NVLS) stays off unless the caller asked for it: it can take shared GPUs down.
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    comms_.resize(devices_.size());
    PPSIM_NCCL_CHECK(ncclCommInitAll(comms_.data(), static_cast<int>(devices_.size()), devices_.data()));
  }
}

Transport::~Transport() {
  for (auto& [dev, ev] : events_) {
    (void)cudaSetDevice(dev);
    (void)cudaEventDestroy(ev);
  }
  for (ncclComm_t c : comms_)
    if (c) (void)ncclCommDestroy(c);
  for (std::size_t r = 0; r < comm_streams_.size(); ++r) {
    (void)cudaSetDevice(rank_device_[r]);
    (void)cudaStreamDestroy(comm_streams_[r]);
  }
}

cudaEvent_t Transport::new_event(int device) {
  DeviceGuard guard;
  PPSIM_CUDA_CHECK(cudaSetDevice(device));
  cudaEvent_t e = nullptr;
  PPSIM_CUDA_CHECK(cudaEventCreate(&e));
  std::lock_guard<std::mutex> lock(mu_);
  events_.emplace_back(device, e);
  return e;
}

cudaEvent_t Transport::send(const MsgKey& key, const void* src, std::size_t bytes, int src_rank, cudaEvent_t ready,
                            const Op& producer) {
  const cudaStream_t cs = comm_stream(src_rank);
  Posted p;
  p.bytes = bytes;
  p.src_rank = src_rank;
  p.producer = producer;
  p.copy_start = new_event(device_of(src_rank));
  p.staged = new_event(device_of(src_rank));
  PPSIM_CUDA_CHECK(cudaStreamWaitEvent(cs, ready, 0));
  PPSIM_CUDA_CHECK(cudaEventRecord(p.copy_start, cs));
  PPSIM_CUDA_CHECK(cudaMallocAsync(&p.staging, bytes, cs));
  PPSIM_CUDA_CHECK(cudaMemcpyAsync(p.staging, src, bytes, cudaMemcpyDeviceToDevice, cs));
  PPSIM_CUDA_CHECK(cudaEventRecord(p.staged, cs));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (board_.count(key))
      throw InputError(fmt::format("replay: message for stage {} micro-batch {} ({}) sent twice", key.stage,
                                   key.microbatch, key.grad ? "gradient" : "activation"),
                       {}, kExitInput);
    board_[key] = p;
  }
  posted_cv_.notify_all();
  return p.staged;
}

cudaEvent_t Transport::receive(const MsgKey& key, void* dst, std::size_t bytes, int dst_rank) {
  Posted p;
  {
    std::unique_lock<std::mutex> lock(mu_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    while (!aborted_ && !board_.count(key)) {
      if (posted_cv_.wait_until(lock, deadline) == std::cv_status::timeout && !board_.count(key)) {
        aborted_ = true;
        abort_reason_ = fmt::format("rank {} waited {:.0f} s for the {} of stage {} micro-batch {}", dst_rank,
                                    timeout_s_, key.grad ? "gradient" : "activation", key.stage, key.microbatch);
        break;
      }
    }
    if (aborted_) {
      const std::string why = abort_reason_;
      lock.unlock();
      abort(why);
      throw_gpu_failure("replay aborted: " + why,
                        "a rank stopped early or the schedule waits on a message nobody sends; raise the timeout "
                        "(ReplayConfig::nccl_timeout_s) for very large shapes");
    }
    p = board_.at(key);
    board_.erase(key);
  }
  if (p.bytes != bytes)
    throw InputError(fmt::format("replay: stage {} expects {} bytes from rank {}, got {} (stage shapes must share "
                                 "hidden, seq_len and micro_batch)",
                                 key.stage, bytes, p.src_rank, p.bytes),
                     {}, kExitInput);
  const int src_dev = device_of(p.src_rank), dst_dev = device_of(dst_rank);
  const cudaStream_t src_cs = comm_stream(p.src_rank), dst_cs = comm_stream(dst_rank);
  cudaEvent_t arrived = new_event(dst_dev);
  if (src_dev == dst_dev) {
    PPSIM_CUDA_CHECK(cudaStreamWaitEvent(dst_cs, p.staged, 0));
    PPSIM_CUDA_CHECK(cudaMemcpyAsync(dst, p.staging, bytes, cudaMemcpyDeviceToDevice, dst_cs));
    PPSIM_CUDA_CHECK(cudaFreeAsync(p.staging, dst_cs));
    PPSIM_CUDA_CHECK(cudaEventRecord(arrived, dst_cs));
  } else {
    std::lock_guard<std::mutex> lock(nccl_mu_);
    DeviceGuard guard;
    const int src_peer = nccl_rank_of_device_.at(src_dev), dst_peer = nccl_rank_of_device_.at(dst_dev);
    const std::size_t count = bytes / 2;  // bf16 elements
    PPSIM_NCCL_CHECK(ncclGroupStart());
    PPSIM_NCCL_CHECK(ncclSend(p.staging, count, ncclBfloat16, dst_peer, comms_[static_cast<std::size_t>(src_peer)], src_cs));
    PPSIM_NCCL_CHECK(ncclRecv(dst, count, ncclBfloat16, src_peer, comms_[static_cast<std::size_t>(dst_peer)], dst_cs));
    PPSIM_NCCL_CHECK(ncclGroupEnd());
    PPSIM_CUDA_CHECK(cudaSetDevice(src_dev));
    PPSIM_CUDA_CHECK(cudaFreeAsync(p.staging, src_cs));
    PPSIM_CUDA_CHECK(cudaSetDevice(dst_dev));
    PPSIM_CUDA_CHECK(cudaEventRecord(arrived, dst_cs));
  }
  if (p.src_rank != dst_rank) {
    std::lock_guard<std::mutex> lock(mu_);
    records_.push_back(Record{p.src_rank, dst_rank, p.copy_start, arrived, p.producer, static_cast<Bytes>(bytes)});
  }
  return arrived;
}

void Transport::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  DeviceGuard guard;
  for (auto& [dev, ev] : events_) {
    PPSIM_CUDA_CHECK(cudaSetDevice(dev));
    PPSIM_CUDA_CHECK(cudaEventDestroy(ev));
  }
  events_.clear();
  records_.clear();
  board_.clear();
}

void Transport::abort(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!aborted_) {
      aborted_ = true;
      abort_reason_ = why;
    }
  }
  posted_cv_.notify_all();
  // ncclCommAbort may be called while other threads are inside NCCL; it makes them return.
  for (ncclComm_t c : comms_)
    if (c) (void)ncclCommAbort(c);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& c : comms_) c = nullptr;
}

bool Transport::aborted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_;
}

void Transport::check_async_error(int device) {
  if (comms_.empty()) return;
  ncclComm_t c = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    c = comms_[static_cast<std::size_t>(nccl_rank_of_device_.at(device))];
  }
  if (!c) return;
  ncclResult_t async = ncclSuccess;
  PPSIM_NCCL_CHECK(ncclCommGetAsyncError(c, &async));
  if (async != ncclSuccess && async != ncclInProgress) {
    abort(fmt::format("NCCL reported '{}' on GPU {}", ncclGetErrorString(async), device));
    throw_nccl_error(async, "ncclCommGetAsyncError", __FILE__, __LINE__);
  }
}

}  // namespace ppsim::gpu::replay
