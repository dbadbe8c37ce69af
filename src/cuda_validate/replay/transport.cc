// Transport (see transport.h): mailboxes, peer copies on copy engines, CUDA IPC across the
// processes of a host, and NCCL on one communicator in one global order.
#include "cuda_validate/replay/transport.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "cuda_validate/check.h"
#include "cuda_validate/device_buffer.h"
#include "cuda_validate/peer.h"
#include "launch/mpi.h"

namespace ppsim::gpu::replay {

namespace {
constexpr std::size_t kAlign = 512;
std::size_t aligned(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

cudaStream_t urgent_stream(int device) {
  PPSIM_CUDA_CHECK(cudaSetDevice(device));
  int lo = 0, hi = 0;
  PPSIM_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  cudaStream_t st = nullptr;
  PPSIM_CUDA_CHECK(cudaStreamCreateWithPriority(&st, cudaStreamNonBlocking, hi));  // hi = most urgent
  return st;
}

std::string what_op(const Op& op) {
  return fmt::format("{} of stage {} micro-batch {}", op_kind_char(op.kind), op.stage, op.microbatch);
}
}  // namespace

Transport::Transport(const Schedule& s, std::vector<int> rank_device, std::vector<int> process_of, TransportKind kind,
                     std::size_t message_bytes, double timeout_s)
    : kind_(kind), rank_device_(std::move(rank_device)), process_of_(std::move(process_of)),
      my_process_(mpi::world().rank), message_bytes_(message_bytes), timeout_s_(timeout_s) {
  for (int d : rank_device_)
    if (d >= 0 && std::find(devices_.begin(), devices_.end(), d) == devices_.end()) devices_.push_back(d);
  DeviceGuard guard;
  for (int d : rank_device_) comm_streams_.push_back(d >= 0 ? urgent_stream(d) : nullptr);
  // Peer access between every two local GPUs (copies still work without it, staged by the driver).
  for (int a : devices_)
    for (int b : devices_) (void)enable_peer_access(a, b);

  // Each cross-rank message takes a path: within a process the peer way (NCCL mode: the NCCL way
  // between two GPUs); across processes the kind's way.
  const std::vector<MsgKey> order = launch::message_order(s);
  for (std::size_t i = 0; i < order.size(); ++i) {
    Msg m;
    m.src = launch::producer_rank(s, order[i]);
    m.dst = launch::consumer_rank(s, order[i]);
    m.order = i;
    const bool same_process =
        process_of_[static_cast<std::size_t>(m.src)] == process_of_[static_cast<std::size_t>(m.dst)];
    if (same_process)
      m.path = kind_ == TransportKind::Nccl && is_local(m.src) && device_of(m.src) != device_of(m.dst) ? Path::Nccl
                                                                                                         : Path::Peer;
    else
      m.path = kind_ == TransportKind::Nccl ? Path::Nccl : Path::Ipc;
    if (kind_ == TransportKind::Peer && !same_process)
      throw InputError("replay: the peer transport cannot reach another process", "--transport ipc", kExitUsage);
    msgs_[order[i]] = m;
  }
  for (const MsgKey& k : order) {
    const Msg& m = msgs_.at(k);
    if (m.path == Path::Nccl && (is_local(m.src) || is_local(m.dst))) nccl_order_.push_back(k);
  }
  setup_mailboxes(s, order);
  if (kind_ == TransportKind::Ipc) setup_ipc(order);
  if (!nccl_order_.empty() || (kind_ == TransportKind::Nccl && mpi::world().size > 1)) setup_nccl();
  start_sequencer();
}

// Mailboxes: every Peer or Ipc message gets its own buffer on its consumer's GPU, laid out in
// message order per consumer (process, GPU). Every process computes every layout alike, so a
// producer in another process finds its message at the same offset in the opened allocation.
void Transport::setup_mailboxes(const Schedule&, const std::vector<MsgKey>& order) {
  std::map<std::pair<int, int>, std::size_t> size_of;  // (process, device or 0) -> bytes
  std::map<MsgKey, std::size_t> offset;
  for (const MsgKey& k : order) {
    Msg& m = msgs_.at(k);
    if (m.path == Path::Nccl) continue;
    const int proc = process_of_[static_cast<std::size_t>(m.dst)];
    const std::pair<int, int> where{proc, is_local(m.dst) ? device_of(m.dst) : 0};
    offset[k] = size_of[where];
    size_of[where] += aligned(message_bytes_);
  }
  DeviceGuard guard;
  for (int d : devices_) {
    const auto it = size_of.find({my_process_, d});
    if (it == size_of.end()) continue;
    PPSIM_CUDA_CHECK(cudaSetDevice(d));
    void* p = nullptr;
    PPSIM_CUDA_CHECK(cudaMalloc(&p, it->second));
    mailbox_alloc_[d] = p;
    mailbox_size_[d] = it->second;
  }
  for (auto& [k, m] : msgs_)
    if (m.path != Path::Nccl && is_local(m.dst))
      m.mailbox = static_cast<char*>(mailbox_alloc_.at(device_of(m.dst))) + offset.at(k);
  // Ipc producers: the offset into the consumer process's allocation (its base is set by setup_ipc).
  for (auto& [k, m] : msgs_)
    if (m.path == Path::Ipc && is_local(m.src)) m.mailbox = reinterpret_cast<void*>(offset.at(k));
}

// IPC: one exchange at start. Each process publishes its mailbox allocation's handle and the
// interprocess events of the Ipc messages it produces (in message order); each process opens the
// allocations it writes into and the events it waits on. Process 0 makes the shared words.
void Transport::setup_ipc(const std::vector<MsgKey>& order) {
  DeviceGuard guard;
  // One GPU per process. None: this process replays no rank of this pipeline (an EP shard's
  // pipeline held by other processes); it still takes part in the exchange, and makes no context.
  const int dev = devices_.empty() ? -1 : devices_.front();
  if (dev >= 0) PPSIM_CUDA_CHECK(cudaSetDevice(dev));
  std::size_t n_ipc = 0;
  std::string blob(sizeof(cudaIpcMemHandle_t) + 1, '\0');
  if (const auto it = mailbox_alloc_.find(dev); it != mailbox_alloc_.end()) {
    cudaIpcMemHandle_t h{};
    PPSIM_CUDA_CHECK(cudaIpcGetMemHandle(&h, it->second));
    std::memcpy(blob.data(), &h, sizeof h);
    blob.back() = 1;
  }
  for (const MsgKey& k : order) {
    Msg& m = msgs_.at(k);
    if (m.path != Path::Ipc) continue;
    m.flag = n_ipc++;
    if (!is_local(m.src)) continue;
    PPSIM_CUDA_CHECK(cudaEventCreateWithFlags(&m.ipc_event, cudaEventDisableTiming | cudaEventInterprocess));
    cudaIpcEventHandle_t h{};
    PPSIM_CUDA_CHECK(cudaIpcGetEventHandle(&h, m.ipc_event));
    blob.append(reinterpret_cast<const char*>(&h), sizeof h);
  }
  const std::vector<std::string> all = mpi::allgather(blob);
  std::vector<std::size_t> read_at(all.size(), sizeof(cudaIpcMemHandle_t) + 1);
  for (const MsgKey& k : order) {
    Msg& m = msgs_.at(k);
    if (m.path != Path::Ipc) continue;
    const int producer = process_of_[static_cast<std::size_t>(m.src)];
    const std::string& theirs = all.at(static_cast<std::size_t>(producer));
    std::size_t& at = read_at[static_cast<std::size_t>(producer)];
    if (at + sizeof(cudaIpcEventHandle_t) > theirs.size())
      throw InputError("replay: the IPC handles of the processes do not match (same schedule on every process?)", {},
                       kExitInternal);
    cudaIpcEventHandle_t h{};
    std::memcpy(&h, theirs.data() + at, sizeof h);
    at += sizeof h;
    if (is_local(m.dst)) PPSIM_CUDA_CHECK(cudaIpcOpenEventHandle(&m.ipc_event, h));
    if (is_local(m.src)) {
      const int consumer = process_of_[static_cast<std::size_t>(m.dst)];
      if (!opened_.count(consumer)) {
        const std::string& cb = all.at(static_cast<std::size_t>(consumer));
        if (cb.size() <= sizeof(cudaIpcMemHandle_t) || cb[sizeof(cudaIpcMemHandle_t)] != 1)
          throw InputError("replay: a consumer process published no mailbox", {}, kExitInternal);
        cudaIpcMemHandle_t mh{};
        std::memcpy(&mh, cb.data(), sizeof mh);
        void* base = nullptr;
        PPSIM_CUDA_CHECK(cudaIpcOpenMemHandle(&base, mh, cudaIpcMemLazyEnablePeerAccess));
        opened_[consumer] = base;
      }
      m.mailbox = static_cast<char*>(opened_.at(consumer)) + reinterpret_cast<std::uintptr_t>(m.mailbox);
    }
  }
  char name[64] = {};
  if (my_process_ == 0) {
    const std::string n = launch::SharedFlags::unique_name();
    std::snprintf(name, sizeof name, "%s", n.c_str());
    flags_ = std::make_unique<launch::SharedFlags>(name, n_ipc, true);
  }
  mpi::bcast(name, sizeof name, 0);
  if (my_process_ != 0) flags_ = std::make_unique<launch::SharedFlags>(name, n_ipc, false);
  mpi::barrier();
  if (my_process_ == 0) flags_->unlink();  // every process has it mapped: leave nothing in /dev/shm
}

// NCCL: one communicator. One process: over its GPUs (ncclCommInitAll); several: over the
// processes, one GPU each, its id from process 0.
void Transport::setup_nccl() {
  setenv("NCCL_NVLS_ENABLE", "0", 0);  // NVLink multicast can take shared GPUs down
  DeviceGuard guard;
  const mpi::World& w = mpi::world();
  if (w.size > 1) {
    ncclUniqueId id{};
    if (w.rank == 0) PPSIM_NCCL_CHECK(ncclGetUniqueId(&id));
    mpi::bcast(&id, sizeof id, 0);
    PPSIM_CUDA_CHECK(cudaSetDevice(devices_.front()));
    comms_.resize(1);
    PPSIM_NCCL_CHECK(ncclCommInitRank(&comms_[0], w.size, id, w.rank));
  } else {
    comms_.resize(devices_.size());
    PPSIM_NCCL_CHECK(ncclCommInitAll(comms_.data(), static_cast<int>(devices_.size()), devices_.data()));
    for (std::size_t i = 0; i < devices_.size(); ++i) nccl_rank_of_device_[devices_[i]] = static_cast<int>(i);
  }
  for (int d : devices_) nccl_streams_.push_back(urgent_stream(d));
}

Transport::~Transport() {
  if (!aborted_) {
    try {
      join_sequencer();
    } catch (...) {
    }
  } else if (sequencer_.joinable()) {
    sequencer_.join();  // aborted: its waits return at once
  }
  for (int d : devices_) {
    (void)cudaSetDevice(d);
    (void)cudaDeviceSynchronize();
  }
  for (auto& [dev, ev] : events_) {
    (void)cudaSetDevice(dev);
    (void)cudaEventDestroy(ev);
  }
  for (auto& [k, m] : msgs_)
    if (m.ipc_event) {
      if (is_local(m.src)) (void)cudaSetDevice(device_of(m.src));
      else if (is_local(m.dst)) (void)cudaSetDevice(device_of(m.dst));
      (void)cudaEventDestroy(m.ipc_event);
    }
  for (ncclComm_t c : comms_)
    if (c) (void)ncclCommDestroy(c);
  for (auto& [proc, base] : opened_) (void)cudaIpcCloseMemHandle(base);
  for (auto& [d, p] : mailbox_alloc_) {
    (void)cudaSetDevice(d);
    (void)cudaFree(p);
  }
  for (auto& [pair, st] : link_streams_) {
    (void)cudaSetDevice(device_of(pair.first));
    (void)cudaStreamDestroy(st);
  }
  for (std::size_t i = 0; i < nccl_streams_.size(); ++i) {
    (void)cudaSetDevice(devices_[i]);
    (void)cudaStreamDestroy(nccl_streams_[i]);
  }
  for (std::size_t r = 0; r < comm_streams_.size(); ++r) {
    if (!comm_streams_[r]) continue;
    (void)cudaSetDevice(rank_device_[r]);
    (void)cudaStreamDestroy(comm_streams_[r]);
  }
}

cudaStream_t Transport::link_stream(int src, int dst) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = link_streams_.find({src, dst});
  if (it != link_streams_.end()) return it->second;
  DeviceGuard guard;
  const cudaStream_t st = urgent_stream(device_of(src));
  link_streams_[{src, dst}] = st;
  return st;
}

void Transport::set_value_waits(bool on) {
  if (!on) {
    words_.reset();
    return;
  }
  if (const std::string why = value_waits_unavailable(); !why.empty())
    throw InputError("replay: value waits: " + why, "PPSIM_REPLAY_WAITS=event", kExitGpu);
  if (!words_) words_ = std::make_unique<Words>(2 * msgs_.size());
}

void Transport::set_poison(bool on) {
  poison_ = on;
  if (on) poison();
}

void Transport::poison() {
  DeviceGuard guard;
  for (const auto& [d, p] : mailbox_alloc_) {
    PPSIM_CUDA_CHECK(cudaSetDevice(d));
    PPSIM_CUDA_CHECK(cudaMemset(p, 0xff, mailbox_size_.at(d)));
    PPSIM_CUDA_CHECK(cudaDeviceSynchronize());
  }
}

void Transport::wait_sent(const MsgKey& key, cudaEvent_t sent, cudaStream_t st) {
  const auto it = msgs_.find(key);
  if (it != msgs_.end() && by_value(it->second))
    words_->wait(st, copied_word(it->second), static_cast<std::uint32_t>(generation_));
  else
    PPSIM_CUDA_CHECK(cudaStreamWaitEvent(st, sent, 0));
}

void Transport::join_into(int rank, cudaStream_t s) {
  const int dev = device_of(rank);
  std::vector<cudaStream_t> streams{comm_stream(rank)};
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [pair, st] : link_streams_)
      if (pair.first == rank) streams.push_back(st);
  }
  for (cudaStream_t st : streams) {
    cudaEvent_t e = new_event(dev);
    PPSIM_CUDA_CHECK(cudaEventRecord(e, st));
    PPSIM_CUDA_CHECK(cudaStreamWaitEvent(s, e, 0));
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

std::string Transport::describe(const MsgKey& key) const {
  return fmt::format("the {} into stage {} micro-batch {}", key.grad ? "gradient" : "activation", key.stage,
                     key.microbatch);
}

void Transport::post(Board& b, const MsgKey& key, const Posted& p) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (b.posts.count(key))
      throw InputError(fmt::format("replay: {} was sent twice", describe(key)), {}, kExitInput);
    b.posts[key] = p;
  }
  b.cv.notify_all();
}

void Transport::fail_wait(const std::string& who, const MsgKey& key, int src_rank, double waited_s) {
  std::string why = fmt::format("{} waited {:.0f} s for {} from rank {}", who, waited_s, describe(key), src_rank);
  {
    // With NCCL every message waits for the ones before it in message_order: if the sequencer is
    // stuck on an earlier one, that one is the cause, and this wait only its consequence.
    std::lock_guard<std::mutex> lock(mu_);
    if (sequencer_waits_for_ && !(*sequencer_waits_for_ == key))
      why = fmt::format("the NCCL sequencer waited {:.0f} s for {} from rank {}, which the schedule sends before "
                        "{} that {} waits for (messages go in one order)",
                        waited_s, describe(*sequencer_waits_for_), msgs_.at(*sequencer_waits_for_).src, describe(key),
                        who);
  }
  abort(why);
  throw_gpu_failure("replay watchdog: " + why,
                    "the schedule waits for a message nobody sends, or a rank stopped early; for very large shapes "
                    "raise the timeout (validate --timeout)");
}

Transport::Posted Transport::take(Board& b, const MsgKey& key, const std::string& who) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto deadline = t0 + std::chrono::duration<double>(timeout_s_);
  // Spin first (half a millisecond): the post is usually moments away, and a thread woken from a
  // condition variable can take tens of microseconds to run, which would delay this rank's next
  // kernels behind a message that is already there.
  for (auto spin_end = t0 + std::chrono::microseconds(500); std::chrono::steady_clock::now() < spin_end;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (b.posts.count(key) || aborted_) break;
    }
    std::this_thread::yield();
  }
  std::unique_lock<std::mutex> lock(mu_);
  while (!aborted_ && !b.posts.count(key)) {
    if (b.cv.wait_until(lock, deadline) == std::cv_status::timeout && !b.posts.count(key) && !aborted_) {
      lock.unlock();
      fail_wait(who, key, msgs_.at(key).src,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  if (aborted_) {
    const std::string why = abort_reason_;
    lock.unlock();
    throw_gpu_failure("replay aborted: " + why, "see the first error reported");
  }
  Posted p = b.posts.at(key);
  b.posts.erase(key);
  return p;
}

void Transport::wait_flag(const MsgKey& key, const Msg& m, const std::string& who) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int spins = 0;; ++spins) {
    if (flags_->load(m.flag) >= generation_) return;
    if (flags_->load(flags_->abort_word()) != 0 && !aborted_) abort("another process gave up");
    if (aborted_) throw_gpu_failure("replay aborted: " + abort_reason(), "see the first error reported");
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (waited > timeout_s_) fail_wait(who, key, m.src, waited);
    if (spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

cudaEvent_t Transport::send(const MsgKey& key, const void* src, std::size_t bytes, int src_rank, cudaEvent_t ready,
                            const Op& producer, cudaStream_t ready_stream) {
  const auto it = msgs_.find(key);
  if (it == msgs_.end() || it->second.src != src_rank)
    throw InputError(fmt::format("replay: rank {} sends {}, which the schedule does not route from it", src_rank,
                                 describe(key)),
                     {}, kExitInternal);
  if (bytes != message_bytes_)
    throw InputError(fmt::format("replay: {} has {} bytes, every message {} (stage shapes must share hidden, "
                                 "seq_len and micro_batch)",
                                 describe(key), bytes, message_bytes_),
                     {}, kExitInput);
  Msg& m = it->second;
  const int src_dev = device_of(src_rank);
  DeviceGuard guard;
  PPSIM_CUDA_CHECK(cudaSetDevice(src_dev));
  const cudaStream_t st = link_stream(src_rank, m.dst);
  Posted p;
  p.producer = producer;
  p.copy_start = new_event(src_dev);
  cudaEvent_t done = new_event(src_dev);
  const auto gen = static_cast<std::uint32_t>(generation_);
  if (by_value(m) && ready_stream) {
    words_->write(ready_stream, ready_word(m), gen);
    words_->wait(st, ready_word(m), gen);
  } else {
    PPSIM_CUDA_CHECK(cudaStreamWaitEvent(st, ready, 0));
  }
  PPSIM_CUDA_CHECK(cudaEventRecord(p.copy_start, st));
  switch (m.path) {
    case Path::Peer: {
      const int dst_dev = device_of(m.dst);
      if (dst_dev == src_dev) PPSIM_CUDA_CHECK(cudaMemcpyAsync(m.mailbox, src, bytes, cudaMemcpyDeviceToDevice, st));
      else PPSIM_CUDA_CHECK(cudaMemcpyPeerAsync(m.mailbox, dst_dev, src, src_dev, bytes, st));
      PPSIM_CUDA_CHECK(cudaEventRecord(done, st));
      if (by_value(m)) words_->write(st, copied_word(m), gen);
      p.event = done;
      post(to_consumer_, key, p);
      return done;
    }
    case Path::Ipc: {
      // The opened IPC pointer is a device address of the consumer's GPU: the copy engine moves it.
      PPSIM_CUDA_CHECK(cudaMemcpyAsync(m.mailbox, src, bytes, cudaMemcpyDeviceToDevice, st));
      PPSIM_CUDA_CHECK(cudaEventRecord(m.ipc_event, st));
      PPSIM_CUDA_CHECK(cudaEventRecord(done, st));
      flags_->store(m.flag, generation_);  // after the record: the consumer may wait on it now
      std::lock_guard<std::mutex> lock(mu_);
      records_.push_back(Record{src_rank, m.dst, p.copy_start, nullptr, producer, static_cast<Bytes>(bytes), key});
      return done;
    }
    case Path::Nccl: {
      // Staged, so the producer's buffer is free at once; the sequencer sends from the copy.
      PPSIM_CUDA_CHECK(cudaMallocAsync(&p.buffer, bytes, st));
      PPSIM_CUDA_CHECK(cudaMemcpyAsync(p.buffer, src, bytes, cudaMemcpyDeviceToDevice, st));
      PPSIM_CUDA_CHECK(cudaEventRecord(done, st));
      p.event = done;
      if (!is_local(m.dst)) {
        std::lock_guard<std::mutex> lock(mu_);
        records_.push_back(Record{src_rank, m.dst, p.copy_start, nullptr, producer, static_cast<Bytes>(bytes), key});
      }
      post(to_sequencer_, key, p);
      return done;
    }
  }
  return done;
}

cudaEvent_t Transport::receive(const MsgKey& key, void* dst, std::size_t bytes, int dst_rank, const Op& consumer,
                               const void** in_place, cudaStream_t consumer_stream) {
  if (in_place) *in_place = nullptr;
  const auto it = msgs_.find(key);
  if (it == msgs_.end() || it->second.dst != dst_rank)
    throw InputError(fmt::format("replay: rank {} receives {}, which the schedule does not route to it", dst_rank,
                                 describe(key)),
                     {}, kExitInternal);
  if (bytes != message_bytes_)
    throw InputError(fmt::format("replay: stage {} expects {} bytes, every message has {} (stage shapes must share "
                                 "hidden, seq_len and micro_batch)",
                                 key.stage, bytes, message_bytes_),
                     {}, kExitInput);
  const Msg& m = it->second;
  const std::string who = fmt::format("rank {} ({})", dst_rank, what_op(consumer));
  const int dev = device_of(dst_rank);
  DeviceGuard guard;
  PPSIM_CUDA_CHECK(cudaSetDevice(dev));
  if (by_value(m) && consumer_stream) {
    // Only once the producer has enqueued the word's write (the post): a stream held by a word
    // nobody has yet promised to write can hold its hardware queue, and with it the legacy
    // stream's synchronous calls of a thread that the writer waits for (seen: a hang).
    const Posted p = take(to_consumer_, key, who);
    words_->wait(consumer_stream, copied_word(m), static_cast<std::uint32_t>(generation_));
    if (in_place)
      *in_place = m.mailbox;
    else
      PPSIM_CUDA_CHECK(cudaMemcpyAsync(dst, m.mailbox, bytes, cudaMemcpyDeviceToDevice, consumer_stream));
    std::lock_guard<std::mutex> lock(mu_);
    records_.push_back(
        Record{m.src, dst_rank, p.copy_start, p.event, p.producer, static_cast<Bytes>(bytes), key, true});
    return nullptr;
  }
  const cudaStream_t cs = comm_stream(dst_rank);
  cudaEvent_t arrived = new_event(dev);
  Record rec{m.src, dst_rank, nullptr, arrived, Op{}, static_cast<Bytes>(bytes), key};
  switch (m.path) {
    case Path::Peer: {
      const Posted p = take(to_consumer_, key, who);
      PPSIM_CUDA_CHECK(cudaStreamWaitEvent(cs, p.event, 0));  // the peer copy, on the producer's GPU
      if (in_place) *in_place = m.mailbox;
      else PPSIM_CUDA_CHECK(cudaMemcpyAsync(dst, m.mailbox, bytes, cudaMemcpyDeviceToDevice, cs));
      rec.start = p.copy_start;
      rec.producer = p.producer;
      if (in_place) {  // in place: the message is there when the copy engine is done with it
        rec.end = p.event;
        rec.end_on_source = true;
      }
      break;
    }
    case Path::Ipc: {
      wait_flag(key, m, who);
      PPSIM_CUDA_CHECK(cudaStreamWaitEvent(cs, m.ipc_event, 0));
      if (in_place) *in_place = m.mailbox;
      else PPSIM_CUDA_CHECK(cudaMemcpyAsync(dst, m.mailbox, bytes, cudaMemcpyDeviceToDevice, cs));
      break;
    }
    case Path::Nccl: {
      const Posted p = take(to_consumer_, key, who);
      if (poison_) PPSIM_CUDA_CHECK(cudaMemsetAsync(dst, 0xff, bytes, cs));  // what a read too early would see
      PPSIM_CUDA_CHECK(cudaStreamWaitEvent(cs, p.event, 0));
      PPSIM_CUDA_CHECK(cudaMemcpyAsync(dst, p.buffer, bytes, cudaMemcpyDeviceToDevice, cs));
      PPSIM_CUDA_CHECK(cudaFreeAsync(p.buffer, cs));
      rec.start = p.copy_start;
      rec.producer = p.producer;
      break;
    }
  }
  PPSIM_CUDA_CHECK(cudaEventRecord(arrived, cs));
  std::lock_guard<std::mutex> lock(mu_);
  records_.push_back(rec);
  return arrived;
}

void Transport::start_sequencer() {
  if (nccl_order_.empty()) return;
  sequencer_ = std::thread([this] {
    try {
      sequence();
    } catch (const std::exception& e) {
      abort(fmt::format("the NCCL sequencer failed: {}", e.what()));
    }
  });
}

void Transport::join_sequencer() {
  if (sequencer_.joinable()) sequencer_.join();
}

// Issues this process's ends of every NCCL message in message_order: a send waits (host) for the
// producer's staged copy, a receive lands in a new buffer and is posted for the consumer. Both
// ends here (two GPUs of one process): one group, so neither waits for the other.
void Transport::sequence() {
  const int nproc = mpi::world().size;
  for (const MsgKey& key : nccl_order_) {
    if (aborted_) return;
    const Msg& m = msgs_.at(key);
    const bool here_src = is_local(m.src), here_dst = is_local(m.dst);
    Posted staged, landed;
    if (here_src) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        sequencer_waits_for_ = key;
      }
      staged = take(to_sequencer_, key, fmt::format("the NCCL sequencer (for rank {})", m.dst));
      std::lock_guard<std::mutex> lock(mu_);
      sequencer_waits_for_.reset();
    }
    auto stream_of = [&](int dev) { return nccl_streams_[device_index(dev)]; };
    auto comm_of = [&](int dev) { return nproc > 1 ? comms_[0] : comms_[device_index(dev)]; };
    auto peer_of = [&](int rank) {
      return nproc > 1 ? process_of_[static_cast<std::size_t>(rank)] : nccl_rank_of_device_.at(device_of(rank));
    };
    DeviceGuard guard;
    const std::size_t count = message_bytes_ / 2;  // bf16 elements
    if (here_dst) {
      PPSIM_CUDA_CHECK(cudaSetDevice(device_of(m.dst)));
      PPSIM_CUDA_CHECK(cudaMallocAsync(&landed.buffer, message_bytes_, stream_of(device_of(m.dst))));
    }
    if (here_src) {
      PPSIM_CUDA_CHECK(cudaSetDevice(device_of(m.src)));
      PPSIM_CUDA_CHECK(cudaStreamWaitEvent(stream_of(device_of(m.src)), staged.event, 0));
    }
    PPSIM_NCCL_CHECK(ncclGroupStart());
    if (here_src)
      PPSIM_NCCL_CHECK(ncclSend(staged.buffer, count, ncclBfloat16, peer_of(m.dst), comm_of(device_of(m.src)),
                                stream_of(device_of(m.src))));
    if (here_dst)
      PPSIM_NCCL_CHECK(ncclRecv(landed.buffer, count, ncclBfloat16, peer_of(m.src), comm_of(device_of(m.dst)),
                                stream_of(device_of(m.dst))));
    PPSIM_NCCL_CHECK(ncclGroupEnd());
    if (here_src) {
      PPSIM_CUDA_CHECK(cudaSetDevice(device_of(m.src)));
      PPSIM_CUDA_CHECK(cudaFreeAsync(staged.buffer, stream_of(device_of(m.src))));
    }
    if (here_dst) {
      PPSIM_CUDA_CHECK(cudaSetDevice(device_of(m.dst)));
      landed.event = new_event(device_of(m.dst));
      PPSIM_CUDA_CHECK(cudaEventRecord(landed.event, stream_of(device_of(m.dst))));
      landed.copy_start = staged.copy_start;  // null when the sender is another process
      landed.producer = staged.producer;
      post(to_consumer_, key, landed);
    }
  }
}

void Transport::reset() {
  join_sequencer();
  DeviceGuard guard;
  for (int d : devices_) {
    PPSIM_CUDA_CHECK(cudaSetDevice(d));
    PPSIM_CUDA_CHECK(cudaDeviceSynchronize());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [dev, ev] : events_) {
      PPSIM_CUDA_CHECK(cudaSetDevice(dev));
      PPSIM_CUDA_CHECK(cudaEventDestroy(ev));
    }
    events_.clear();
    records_.clear();
    to_consumer_.posts.clear();
    to_sequencer_.posts.clear();
  }
  if (poison_) poison();
  ++generation_;
  start_sequencer();
}

void Transport::abort(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) return;
    abort_reason_ = why;
    aborted_ = true;
  }
  to_consumer_.cv.notify_all();
  to_sequencer_.cv.notify_all();
  if (flags_) flags_->store(flags_->abort_word(), 1);
  if (words_) words_->store_all(0xffffffffu);  // no stream stays held by a word
  // ncclCommAbort may be called while other threads are inside NCCL; it makes them return.
  for (ncclComm_t& c : comms_)
    if (c) {
      (void)ncclCommAbort(c);
      c = nullptr;
    }
}

bool Transport::aborted() const { return aborted_; }

std::string Transport::abort_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return abort_reason_;
}

void Transport::check_async_error(int device) {
  if (flags_ && flags_->load(flags_->abort_word()) != 0 && !aborted_) abort("another process gave up");
  if (comms_.empty() || aborted_) return;
  const std::size_t i = mpi::world().size > 1 ? 0 : device_index(device);
  if (i >= comms_.size() || !comms_[i]) return;
  ncclResult_t async = ncclSuccess;
  PPSIM_NCCL_CHECK(ncclCommGetAsyncError(comms_[i], &async));
  if (async != ncclSuccess && async != ncclInProgress) {
    abort(fmt::format("NCCL reported '{}' on GPU {}", ncclGetErrorString(async), device));
    throw_nccl_error(async, "ncclCommGetAsyncError", __FILE__, __LINE__);
  }
}

}  // namespace ppsim::gpu::replay
