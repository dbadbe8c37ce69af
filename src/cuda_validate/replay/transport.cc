// Transport (see transport.h): staging copies, the message board, device copies and NCCL pairs.
#include "cuda_validate/replay/transport.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include <fmt/format.h>

#include "core/error.h"
#include "cuda_validate/check.h"
#include "launch/mpi.h"

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

Transport::Transport(const Schedule& s, std::vector<int> rank_device, std::vector<int> process_of, bool links,
                     double timeout_s)
    : rank_device_(std::move(rank_device)), process_of_(std::move(process_of)), stage_rank_(s.stage_rank),
      timeout_s_(timeout_s) {
  for (int d : rank_device_)
    if (d >= 0 && std::find(devices_.begin(), devices_.end(), d) == devices_.end()) devices_.push_back(d);
  for (std::size_t i = 0; i < devices_.size(); ++i) nccl_rank_of_device_[devices_[i]] = static_cast<int>(i);
  DeviceGuard guard;
  int lo = 0, hi = 0;
  for (int d : rank_device_) {
    cudaStream_t st = nullptr, stage = nullptr;
    if (d >= 0) {
      PPSIM_CUDA_CHECK(cudaSetDevice(d));
      PPSIM_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
      PPSIM_CUDA_CHECK(cudaStreamCreateWithPriority(&st, cudaStreamNonBlocking, hi));  // hi = most urgent
      PPSIM_CUDA_CHECK(cudaStreamCreateWithPriority(&stage, cudaStreamNonBlocking, hi));
    }
    comm_streams_.push_back(st);
    stage_streams_.push_back(stage);
  }
  // NVLink multicast (NVLS) stays off unless the caller asked for it: it can take shared GPUs down.
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  open_links(s, links);
  if (devices_.size() > 1 && !links) {
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
  // Link communicators go in one order on every process (by pair of ranks, as they were made),
  // in case a destroy waits for its peer's.
  std::map<std::pair<int, int>, std::vector<Link*>> ends;
  for (auto* links : {&send_links_, &recv_links_})
    for (auto& [pair, l] : *links) ends[pair].push_back(&l);
  for (auto& [pair, list] : ends)
    for (Link* l : list) {
      (void)cudaSetDevice(l->device);
      for (auto& [key, landed] : l->landed) (void)cudaFree(landed.buffer);
      if (l->comm) (void)ncclCommDestroy(l->comm);
      if (l->stream) (void)cudaStreamDestroy(l->stream);
    }
  for (std::size_t r = 0; r < comm_streams_.size(); ++r) {
    if (!comm_streams_[r]) continue;
    (void)cudaSetDevice(rank_device_[r]);
    (void)cudaStreamDestroy(comm_streams_[r]);
    (void)cudaStreamDestroy(stage_streams_[r]);
  }
}

void Transport::join_into(int rank, cudaStream_t s) {
  const int dev = device_of(rank);
  std::vector<cudaStream_t> streams{comm_stream(rank), stage_streams_[static_cast<std::size_t>(rank)]};
  for (auto* links : {&send_links_, &recv_links_})
    for (const auto& [pair, l] : *links)
      if (pair.first == rank || pair.second == rank)
        if (l.device == dev) streams.push_back(l.stream);
  for (cudaStream_t st : streams) {
    cudaEvent_t e = new_event(dev);
    PPSIM_CUDA_CHECK(cudaEventRecord(e, st));
    PPSIM_CUDA_CHECK(cudaStreamWaitEvent(s, e, 0));
  }
}

Transport::Link Transport::make_link(int src, int dst, int device, const std::vector<MsgKey>& order) {
  Link l;
  l.src_rank = src;
  l.dst_rank = dst;
  l.device = device;
  for (std::size_t k = 0; k < order.size(); ++k) l.position[order[k]] = k;
  l.receiver = launch::LinkReceiver(order);
  PPSIM_CUDA_CHECK(cudaSetDevice(device));
  int lo = 0, hi = 0;
  PPSIM_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  PPSIM_CUDA_CHECK(cudaStreamCreateWithPriority(&l.stream, cudaStreamNonBlocking, hi));
  return l;
}

// Every process lists the directed pairs of ranks that need a link in the same (sorted) order:
// pairs in different processes, and (mode "links") pairs on different GPUs of this process.
// Across processes, process 0 makes one NCCL id per pair and broadcasts them all; each process
// then joins the communicators it is an end of, in that order (a total order: no two processes
// can wait on each other in a cycle). A pair with both ends here gets both at once
// (ncclCommInitAll over its two GPUs).
void Transport::open_links(const Schedule& s, bool links) {
  const auto sequences = launch::link_sequences(s);
  std::vector<std::pair<int, int>> cross, inside;
  for (const auto& [pair, order] : sequences) {
    const auto [src, dst] = pair;
    if (process_of_[static_cast<std::size_t>(src)] != process_of_[static_cast<std::size_t>(dst)])
      cross.push_back(pair);
    else if (links && is_local(src) && device_of(src) != device_of(dst))
      inside.push_back(pair);
  }
  DeviceGuard guard;
  if (!cross.empty()) {
    std::vector<ncclUniqueId> ids(cross.size());
    if (mpi::world().rank == 0)
      for (auto& id : ids) PPSIM_NCCL_CHECK(ncclGetUniqueId(&id));
    mpi::bcast(ids.data(), ids.size() * sizeof(ncclUniqueId), 0);
    for (std::size_t i = 0; i < cross.size(); ++i) {
      const auto [src, dst] = cross[i];
      const bool sender = is_local(src);
      if (!sender && !is_local(dst)) continue;
      Link l = make_link(src, dst, device_of(sender ? src : dst), sequences.at(cross[i]));
      PPSIM_NCCL_CHECK(ncclCommInitRank(&l.comm, 2, ids[i], sender ? 0 : 1));
      (sender ? send_links_ : recv_links_).emplace(cross[i], std::move(l));
    }
  }
  for (const auto& pair : inside) {
    const auto [src, dst] = pair;
    Link tx = make_link(src, dst, device_of(src), sequences.at(pair));
    Link rx = make_link(src, dst, device_of(dst), sequences.at(pair));
    ncclComm_t two[2] = {nullptr, nullptr};
    const int devs[2] = {device_of(src), device_of(dst)};
    PPSIM_NCCL_CHECK(ncclCommInitAll(two, 2, devs));
    tx.comm = two[0];
    rx.comm = two[1];
    send_links_.emplace(pair, std::move(tx));
    recv_links_.emplace(pair, std::move(rx));
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
  const cudaStream_t cs = stage_streams_[static_cast<std::size_t>(src_rank)];
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
  const int dst_rank = consumer_of(key);
  if (const auto link = send_links_.find({src_rank, dst_rank}); link != send_links_.end()) {
    // A link: send on the pair's communicator now, in this rank's order, which is the order the
    // receiver expects (launch::link_sequences).
    Link& l = link->second;
    const auto pos = l.position.find(key);
    if (pos == l.position.end() || pos->second != l.issued++)
      throw InputError(fmt::format("replay: rank {} sends the {} of stage {} micro-batch {} out of its link's order",
                                   src_rank, key.grad ? "gradient" : "activation", key.stage, key.microbatch),
                       {}, kExitInternal);
    PPSIM_CUDA_CHECK(cudaStreamWaitEvent(l.stream, p.staged, 0));
    PPSIM_NCCL_CHECK(ncclSend(p.staging, bytes / 2, ncclBfloat16, 1, l.comm, l.stream));
    PPSIM_CUDA_CHECK(cudaFreeAsync(p.staging, l.stream));
    std::lock_guard<std::mutex> lock(mu_);
    records_.push_back(Record{src_rank, dst_rank, p.copy_start, nullptr, producer, static_cast<Bytes>(bytes), key});
    return p.staged;
  }
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
  const int src_rank = producer_of(key);
  if (const auto link = recv_links_.find({src_rank, dst_rank}); link != recv_links_.end())
    return receive_link(link->second, key, dst, bytes, dst_rank);
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
    PPSIM_CUDA_CHECK(cudaSetDevice(src_dev));
    PPSIM_CUDA_CHECK(cudaStreamWaitEvent(src_cs, p.staged, 0));  // the staging copy has its own stream
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
    records_.push_back(Record{p.src_rank, dst_rank, p.copy_start, arrived, p.producer, static_cast<Bytes>(bytes), key});
  }
  return arrived;
}

// From a link: receive in the sender's order. Messages the sender sent before `key`
// that this rank needs later land in spare buffers now; `key` itself lands in `dst` (or, if it
// landed earlier, is copied from its spare buffer). The arrival event is the receive's end.
cudaEvent_t Transport::receive_link(Link& l, const MsgKey& key, void* dst, std::size_t bytes, int dst_rank) {
  DeviceGuard guard;
  PPSIM_CUDA_CHECK(cudaSetDevice(l.device));
  const launch::LinkReceiver::Plan plan = l.receiver.take(key);  // throws for a key never sent, or twice
  const std::size_t count = bytes / 2;  // bf16 elements; every message of a replay has the same size
  for (const MsgKey& early : plan.land_first) {
    Link::Landed landed;
    PPSIM_CUDA_CHECK(cudaMallocAsync(&landed.buffer, bytes, l.stream));
    PPSIM_NCCL_CHECK(ncclRecv(landed.buffer, count, ncclBfloat16, 0, l.comm, l.stream));
    landed.arrived = new_event(l.device);
    PPSIM_CUDA_CHECK(cudaEventRecord(landed.arrived, l.stream));
    l.landed[early] = landed;
  }
  cudaEvent_t arrived = nullptr, ready = nullptr;  // the message's arrival; when `dst` holds it
  if (plan.direct) {
    arrived = ready = new_event(l.device);
    PPSIM_NCCL_CHECK(ncclRecv(dst, count, ncclBfloat16, 0, l.comm, l.stream));
    PPSIM_CUDA_CHECK(cudaEventRecord(arrived, l.stream));
  } else {
    // Stream order on the link: the spare buffer holds the message once its receive is done.
    const Link::Landed landed = l.landed.at(key);
    l.landed.erase(key);
    arrived = landed.arrived;
    PPSIM_CUDA_CHECK(cudaMemcpyAsync(dst, landed.buffer, bytes, cudaMemcpyDeviceToDevice, l.stream));
    PPSIM_CUDA_CHECK(cudaFreeAsync(landed.buffer, l.stream));
    ready = new_event(l.device);
    PPSIM_CUDA_CHECK(cudaEventRecord(ready, l.stream));
  }
  std::lock_guard<std::mutex> lock(mu_);
  records_.push_back(Record{l.src_rank, dst_rank, nullptr, arrived, Op{}, static_cast<Bytes>(bytes), key});
  return ready;
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
  for (auto* links : {&send_links_, &recv_links_})
    for (auto& [pair, l] : *links) {
      PPSIM_CUDA_CHECK(cudaSetDevice(l.device));
      for (auto& [key, landed] : l.landed) PPSIM_CUDA_CHECK(cudaFree(landed.buffer));
      l.landed.clear();
      l.issued = 0;
      l.receiver.reset();
    }
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
  for (auto* links : {&send_links_, &recv_links_})
    for (auto& [pair, l] : *links)
      if (l.comm) (void)ncclCommAbort(l.comm);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& c : comms_) c = nullptr;
  for (auto* links : {&send_links_, &recv_links_})
    for (auto& [pair, l] : *links) l.comm = nullptr;
}

bool Transport::aborted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_;
}

void Transport::check_async_error(int device) {
  std::vector<ncclComm_t> mine;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!comms_.empty()) mine.push_back(comms_[static_cast<std::size_t>(nccl_rank_of_device_.at(device))]);
    for (auto* links : {&send_links_, &recv_links_})
      for (const auto& [pair, l] : *links)
        if (l.device == device) mine.push_back(l.comm);
  }
  for (ncclComm_t c : mine) {
    if (!c) continue;
    ncclResult_t async = ncclSuccess;
    PPSIM_NCCL_CHECK(ncclCommGetAsyncError(c, &async));
    if (async != ncclSuccess && async != ncclInProgress) {
      abort(fmt::format("NCCL reported '{}' on GPU {}", ncclGetErrorString(async), device));
      throw_nccl_error(async, "ncclCommGetAsyncError", __FILE__, __LINE__);
    }
  }
}

}  // namespace ppsim::gpu::replay
