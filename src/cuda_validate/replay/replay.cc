// replay_schedule: runs a ppsim::Schedule on the GPUs present and measures it as a Timeline.
//
// One host thread per rank; rank r runs on GPU r % devices (fewer GPUs than ranks: virtual ranks
// share a GPU, each on its own streams, transfers become device copies). Each rank owns a Chunk
// per stage it holds and executes its actions in schedule order on its compute stream:
//   F(s,m): input = previous stage's activation (or a random micro-batch on a first stage)
//   I(s,m): input-grad; B(s,m) = I then W; W(s,m): weight-grad, then m's buffers are released
//   (F a; B b) overlapped pair: a on the compute stream, b on a second stream, their sub-ops
//   enqueued interleaved layer by layer, joined before the next action.
// Every action is bracketed by CUDA events. Clocks: after a host barrier every rank records an
// epoch event on its stream, and all times are event distances from its own epoch (ranks on
// different GPUs are aligned to the barrier, within the host threads' wake-up jitter).
// Activation samples follow the simulator: +1 when an F starts, -1 when a B or W ends.
// Watchdog: every host wait (a message not yet posted, streams not yet done) is bounded by
// ReplayConfig::nccl_timeout_s; NCCL async errors are polled; on either, the communicators are
// aborted and InputError(kExitGpu) is thrown.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "cuda_validate/check.h"
#include "cuda_validate/chunk.h"
#include "cuda_validate/device_buffer.h"
#include "cuda_validate/gpu_api.h"
#include "cuda_validate/replay/transport.h"

namespace ppsim::gpu {
namespace {

using replay::MsgKey;
using replay::Transport;

struct ActionTiming {
  Action action;
  cudaEvent_t start = nullptr, end = nullptr;                // whole action
  std::vector<std::pair<cudaEvent_t, int>> activation_deltas;  // (event, +1 / -1)
};

struct RankResult {
  cudaEvent_t epoch = nullptr;
  std::vector<ActionTiming> actions;
};

class RankRunner {
 public:
  RankRunner(int rank, int device, const Schedule& s, const ReplayConfig& cfg, Transport& t)
      : rank_(rank), device_(device), s_(s), cfg_(cfg), t_(t) {}

  void setup() {
    PPSIM_CUDA_CHECK(cudaSetDevice(device_));
    int lo = 0, hi = 0;
    PPSIM_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    // The compute streams run at normal priority; the transport's comm stream at the highest.
    main_ = std::make_unique<Stream>(lo);
    second_ = std::make_unique<Stream>(lo);
    for (int st = 0; st < s_.num_stages(); ++st)
      if (s_.stage_rank[static_cast<std::size_t>(st)] == rank_)
        chunks_[st] = std::make_unique<Chunk>(shape_of(st), 1000 + static_cast<std::uint64_t>(st));
  }

  // Runs the rank's actions once; the result's events are valid until the next run.
  void run(std::barrier<>& sync) {
    destroy_events();
    pending_.clear();
    local_.clear();
    PPSIM_CUDA_CHECK(cudaDeviceSynchronize());
    sync.arrive_and_wait();
    result_.epoch = event();
    PPSIM_CUDA_CHECK(cudaEventRecord(result_.epoch, main_->get()));
    for (const Action& a : s_.ranks[static_cast<std::size_t>(rank_)]) {
      if (t_.aborted()) throw_gpu_failure("replay aborted by another rank", "see the first error reported");
      if (a.overlapped) run_pair(a);
      else run_single(a);
    }
    wait_done();
  }

  const RankResult& result() const { return result_; }
  // Frees the chunks (cuDNN/cuBLAS handles belong to this thread's GPU); the timing events stay.
  void teardown() {
    (void)cudaSetDevice(device_);
    chunks_.clear();
  }
  ~RankRunner() {
    (void)cudaSetDevice(device_);
    destroy_events();
  }

 private:
  const ChunkShape& shape_of(int stage) const {
    const auto& shapes = cfg_.stage_shapes;
    const std::size_t slice = static_cast<std::size_t>(s_.slice[static_cast<std::size_t>(stage)]);
    return shapes.size() == 1 ? shapes[0] : shapes.at(slice);
  }
  std::size_t tensor_bytes(int stage) const {
    const ChunkShape& sh = shape_of(stage);
    return static_cast<std::size_t>(sh.tokens() * sh.hidden) * 2;
  }
  cudaEvent_t event() {
    cudaEvent_t e = nullptr;
    PPSIM_CUDA_CHECK(cudaEventCreate(&e));
    events_.push_back(e);
    return e;
  }
  void destroy_events() {
    for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
    events_.clear();
    result_ = RankResult{};
  }
  std::uint64_t seed(int stage, int mb, int grad) const {
    return 0x5eedull + static_cast<std::uint64_t>(stage) * 1000003ull + static_cast<std::uint64_t>(mb) * 7919ull +
           static_cast<std::uint64_t>(grad);
  }

  // Inputs of an op, enqueued on `st` before its start event (data loading and the loss
  // gradient are not part of the op's time).
  void prepare(const Op& op, cudaStream_t st) {
    Chunk& c = *chunks_.at(op.stage);
    const int m = op.microbatch;
    if (op.kind == OpKind::F) {
      if (s_.is_first_stage(op.stage)) {
        c.fill_input(m, seed(op.stage, m, 0), st);
      } else {
        cudaEvent_t arrived = arrival(MsgKey{0, op.stage, m}, c.input(m), tensor_bytes(op.stage));
        PPSIM_CUDA_CHECK(cudaStreamWaitEvent(st, arrived, 0));
      }
    } else if (op.kind == OpKind::I || op.kind == OpKind::B) {
      if (s_.is_last_stage(op.stage)) {
        c.fill_grad_output(m, seed(op.stage, m, 1), st);
      } else {
        cudaEvent_t arrived = arrival(MsgKey{1, op.stage, m}, c.grad_output(m), tensor_bytes(op.stage));
        PPSIM_CUDA_CHECK(cudaStreamWaitEvent(st, arrived, 0));
      }
    }
  }

  // Where the next (or previous) stage lives on this same rank (the turn of a V-shaped layout),
  // its input is handed over as a device copy in stream order, with no transport: no staging, no
  // host handshake, no transfer in the timeline, as the simulator has it (no link within a rank).
  bool local(const MsgKey& to) const { return s_.stage_rank[static_cast<std::size_t>(to.stage)] == rank_; }
  cudaEvent_t hand_over(const MsgKey& to, const void* src, void* dst, std::size_t bytes, cudaStream_t st, cudaEvent_t done) {
    PPSIM_CUDA_CHECK(cudaStreamWaitEvent(st, done, 0));
    PPSIM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st));
    cudaEvent_t copied = event();
    PPSIM_CUDA_CHECK(cudaEventRecord(copied, st));
    local_[to] = copied;
    return copied;
  }
  // The event after which the input named `key` is in `dst`: a local hand-over, else the transport.
  cudaEvent_t arrival(const MsgKey& key, void* dst, std::size_t bytes) {
    const auto it = local_.find(key);
    if (it == local_.end()) return t_.receive(key, dst, bytes, rank_);
    const cudaEvent_t e = it->second;
    local_.erase(it);
    return e;
  }

  // Outputs of an op (after `done` on `st`), and the release of m's buffers after its last use.
  void finish(const Op& op, cudaStream_t st, cudaEvent_t done) {
    Chunk& c = *chunks_.at(op.stage);
    const int m = op.microbatch;
    if (op.kind == OpKind::F && !s_.is_last_stage(op.stage)) {
      const MsgKey to{0, op.stage + 1, m};
      pending_[{op.stage, m}].push_back(
          local(to) ? hand_over(to, c.output(m), chunks_.at(to.stage)->input(m), tensor_bytes(op.stage), st, done)
                    : t_.send(to, c.output(m), tensor_bytes(op.stage), rank_, done, op));
    }
    if ((op.kind == OpKind::I || op.kind == OpKind::B) && !s_.is_first_stage(op.stage)) {
      const MsgKey to{1, op.stage - 1, m};
      pending_[{op.stage, m}].push_back(
          local(to) ? hand_over(to, c.grad_input(m), chunks_.at(to.stage)->grad_output(m), tensor_bytes(op.stage), st, done)
                    : t_.send(to, c.grad_input(m), tensor_bytes(op.stage), rank_, done, op));
    }
    if (op.kind == OpKind::B || op.kind == OpKind::W) {
      // The staging copies read these buffers: wait for them before they go back to the pool.
      for (cudaEvent_t e : pending_[{op.stage, m}]) PPSIM_CUDA_CHECK(cudaStreamWaitEvent(st, e, 0));
      pending_.erase({op.stage, m});
      c.release(m, st);
    }
  }

  void compute(const Op& op, cudaStream_t st) {
    Chunk& c = *chunks_.at(op.stage);
    switch (op.kind) {
      case OpKind::F: c.forward(op.microbatch, st); break;
      case OpKind::I: c.backward_input(op.microbatch, st); break;
      case OpKind::B:
        c.backward_input(op.microbatch, st);
        c.backward_weight(op.microbatch, st);
        break;
      case OpKind::W: c.backward_weight(op.microbatch, st); break;
    }
  }

  void run_single(const Action& a) {
    const cudaStream_t st = main_->get();
    ActionTiming at{a, event(), event(), {}};
    prepare(a.first, st);
    PPSIM_CUDA_CHECK(cudaEventRecord(at.start, st));
    if (a.first.kind == OpKind::F) at.activation_deltas.emplace_back(at.start, +1);
    compute(a.first, st);
    PPSIM_CUDA_CHECK(cudaEventRecord(at.end, st));
    if (a.first.kind == OpKind::B || a.first.kind == OpKind::W) at.activation_deltas.emplace_back(at.end, -1);
    finish(a.first, st, at.end);
    result_.actions.push_back(std::move(at));
  }

  // (F a; backward b): F on the main stream, the backward on the second, sub-ops interleaved.
  void run_pair(const Action& a) {
    const Op& f = a.first;
    const Op& b = a.second;
    const cudaStream_t s0 = main_->get(), s1 = second_->get();
    cudaEvent_t fork = event();
    PPSIM_CUDA_CHECK(cudaEventRecord(fork, s0));
    PPSIM_CUDA_CHECK(cudaStreamWaitEvent(s1, fork, 0));
    prepare(f, s0);
    prepare(b, s1);
    // The pair starts when its F can start on the main stream (the second stream was forked
    // from it) and ends when both streams are done (joined onto the main stream).
    cudaEvent_t start0 = event(), end0 = event(), end1 = event(), end = event();
    PPSIM_CUDA_CHECK(cudaEventRecord(start0, s0));
    Chunk& cf = *chunks_.at(f.stage);
    Chunk& cb = *chunks_.at(b.stage);
    const int lf = cf.shape().layers, lb = cb.shape().layers;
    const int mf = f.microbatch, mb = b.microbatch;
    for (int i = 0; i < std::max(lf, lb); ++i) {
      const int jb = lb - 1 - i;
      if (i < lf) cf.attn_forward(mf, i, s0);
      if (jb >= 0) {
        cb.combine_backward(mb, jb, s1);
        cb.mlp_backward_input(mb, jb, s1);
      }
      if (i < lf) {
        cf.dispatch_forward(mf, i, s0);
        cf.mlp_forward(mf, i, s0);
      }
      if (jb >= 0) {
        cb.dispatch_backward(mb, jb, s1);
        cb.attn_backward_input(mb, jb, s1);
      }
      if (i < lf) cf.combine_forward(mf, i, s0);
    }
    if (b.kind == OpKind::B) cb.backward_weight(mb, s1);
    PPSIM_CUDA_CHECK(cudaEventRecord(end0, s0));
    PPSIM_CUDA_CHECK(cudaEventRecord(end1, s1));
    finish(f, s0, end0);
    finish(b, s1, end1);
    // Join: the next action sees both streams' work.
    PPSIM_CUDA_CHECK(cudaStreamWaitEvent(s0, end1, 0));
    PPSIM_CUDA_CHECK(cudaEventRecord(end, s0));
    ActionTiming at{a, start0, end, {}};
    at.activation_deltas.emplace_back(start0, +1);
    if (b.kind == OpKind::B) at.activation_deltas.emplace_back(end1, -1);
    result_.actions.push_back(std::move(at));
  }

  // Waits (polling, bounded) for this rank's streams, checking NCCL for async errors.
  void wait_done() {
    cudaEvent_t done = event();
    cudaEvent_t comm_done = event();
    PPSIM_CUDA_CHECK(cudaEventRecord(comm_done, t_.comm_stream(rank_)));
    PPSIM_CUDA_CHECK(cudaStreamWaitEvent(main_->get(), comm_done, 0));
    PPSIM_CUDA_CHECK(cudaEventRecord(done, main_->get()));
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      const cudaError_t q = cudaEventQuery(done);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) PPSIM_CUDA_CHECK(q);
      t_.check_async_error(device_);
      if (t_.aborted()) throw_gpu_failure("replay aborted by another rank", "see the first error reported");
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (waited > cfg_.nccl_timeout_s) {
        const std::string why = fmt::format("rank {} on GPU {} still busy after {:.0f} s", rank_, device_, waited);
        t_.abort(why);
        throw_gpu_failure("replay watchdog: " + why,
                          "a transfer never completed (NCCL_DEBUG=INFO shows NCCL's view); raise "
                          "ReplayConfig::nccl_timeout_s for very large shapes");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  int rank_, device_;
  const Schedule& s_;
  const ReplayConfig& cfg_;
  Transport& t_;
  std::unique_ptr<Stream> main_, second_;
  std::map<int, std::unique_ptr<Chunk>> chunks_;
  std::map<std::pair<int, int>, std::vector<cudaEvent_t>> pending_;  // (stage, mb) -> staged sends
  std::map<MsgKey, cudaEvent_t> local_;  // inputs handed over within this rank, not yet consumed
  std::vector<cudaEvent_t> events_;
  RankResult result_;
};

Time ticks_between(cudaEvent_t epoch, cudaEvent_t e) {
  float ms = 0;
  PPSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, epoch, e));
  return static_cast<Time>(std::llround(static_cast<double>(ms) * 1e6));
}

void check_config(const Schedule& s, const ReplayConfig& cfg) {
  if (s.pp <= 0 || static_cast<int>(s.ranks.size()) != s.pp)
    throw InputError(fmt::format("replay: the schedule has {} rank lists for P={}", s.ranks.size(), s.pp));
  if (static_cast<int>(s.stage_rank.size()) != s.num_stages() || static_cast<int>(s.slice.size()) != s.num_stages())
    throw InputError("replay: the schedule has no stage layout (stage_rank/slice)");
  if (cfg.stage_shapes.empty()) throw InputError("replay: no chunk shape given (ReplayConfig::stage_shapes)");
  int max_slice = 0;
  for (int sl : s.slice) max_slice = std::max(max_slice, sl);
  if (cfg.stage_shapes.size() != 1 && static_cast<int>(cfg.stage_shapes.size()) <= max_slice)
    throw InputError(fmt::format("replay: {} stage shapes for {} model slices (give one, or one per slice)",
                                 cfg.stage_shapes.size(), max_slice + 1));
  for (const auto& sh : cfg.stage_shapes) {
    if (auto p = sh.problem(); !p.empty()) throw InputError("replay: chunk shape: " + p);
    const auto& a = cfg.stage_shapes[0];
    if (sh.hidden != a.hidden || sh.seq_len != a.seq_len || sh.micro_batch != a.micro_batch)
      throw InputError("replay: every stage shape must have the same hidden, seq_len and micro_batch");
  }
  if (!(cfg.nccl_timeout_s > 0)) throw InputError("replay: the NCCL timeout must be positive", {}, kExitUsage);
}

}  // namespace

Timeline replay_schedule(const Schedule& s, const ReplayConfig& cfg) {
  if (auto why = gpu_unavailable_reason(); !why.empty()) throw InputError("replay: " + why, {}, kExitGpu);
  check_config(s, cfg);
  int visible = 0;
  PPSIM_CUDA_CHECK(cudaGetDeviceCount(&visible));
  int ndev = cfg.devices > 0 ? std::min(cfg.devices, visible) : visible;
  ndev = std::min(ndev, s.pp);
  std::vector<int> rank_device(static_cast<std::size_t>(s.pp));
  for (int r = 0; r < s.pp; ++r) rank_device[static_cast<std::size_t>(r)] = r % ndev;

  Transport transport(rank_device, cfg.nccl_timeout_s);
  std::vector<std::unique_ptr<RankRunner>> runners;
  for (int r = 0; r < s.pp; ++r)
    runners.push_back(std::make_unique<RankRunner>(r, rank_device[static_cast<std::size_t>(r)], s, cfg, transport));

  const int iterations = std::max(0, cfg.warmup_iterations) + 1;
  std::barrier sync(s.pp);
  std::barrier iteration_done(s.pp + 1);
  std::mutex err_mu;
  std::exception_ptr first_error;
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  for (int r = 0; r < s.pp; ++r) {
    threads.emplace_back([&, r] {
      RankRunner& rr = *runners[static_cast<std::size_t>(r)];
      try {
        rr.setup();
        for (int it = 0; it < iterations; ++it) {
          rr.run(sync);
          if (it + 1 < iterations) {
            iteration_done.arrive_and_wait();  // main resets the transport
            iteration_done.arrive_and_wait();
          }
        }
        rr.teardown();
      } catch (...) {
        {
          std::lock_guard<std::mutex> lock(err_mu);
          if (!first_error) first_error = std::current_exception();
        }
        failed = true;
        transport.abort("a rank failed");
        sync.arrive_and_drop();
        iteration_done.arrive_and_drop();
        try {
          rr.teardown();
        } catch (...) {
        }
      }
    });
  }
  for (int it = 0; it + 1 < iterations; ++it) {
    iteration_done.arrive_and_wait();
    if (!failed) transport.reset();
    iteration_done.arrive_and_wait();
  }
  for (auto& t : threads) t.join();
  if (first_error) std::rethrow_exception(first_error);

  Timeline tl;
  tl.pp = s.pp;
  tl.scale = TimeScale::millis();
  tl.activations.resize(static_cast<std::size_t>(s.pp));
  std::vector<cudaEvent_t> epochs(static_cast<std::size_t>(s.pp));
  for (int r = 0; r < s.pp; ++r) {
    PPSIM_CUDA_CHECK(cudaSetDevice(rank_device[static_cast<std::size_t>(r)]));
    const RankResult& res = runners[static_cast<std::size_t>(r)]->result();
    epochs[static_cast<std::size_t>(r)] = res.epoch;
    std::vector<std::pair<Time, int>> deltas;
    for (const ActionTiming& at : res.actions) {
      Interval iv;
      iv.rank = r;
      iv.start = ticks_between(res.epoch, at.start);
      iv.end = std::max(iv.start, ticks_between(res.epoch, at.end));
      iv.action = at.action;
      tl.intervals.push_back(iv);
      for (const auto& [e, d] : at.activation_deltas) deltas.emplace_back(ticks_between(res.epoch, e), d);
    }
    std::stable_sort(deltas.begin(), deltas.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    int live = 0;
    auto& samples = tl.activations[static_cast<std::size_t>(r)];
    for (const auto& [t, d] : deltas) {
      live += d;
      if (!samples.empty() && samples.back().t == t) samples.back().activations = live;
      else samples.push_back(MemSample{t, live});
    }
  }
  for (const auto& rec : transport.records()) {
    Transfer tr;
    tr.src_rank = rec.src_rank;
    tr.dst_rank = rec.dst_rank;
    PPSIM_CUDA_CHECK(cudaSetDevice(rank_device[static_cast<std::size_t>(rec.src_rank)]));
    tr.start = ticks_between(epochs[static_cast<std::size_t>(rec.src_rank)], rec.start);
    PPSIM_CUDA_CHECK(cudaSetDevice(rank_device[static_cast<std::size_t>(rec.dst_rank)]));
    tr.end = std::max(tr.start, ticks_between(epochs[static_cast<std::size_t>(rec.dst_rank)], rec.end));
    tr.producer = rec.producer;
    tr.bytes = rec.bytes;
    tl.transfers.push_back(tr);
  }
  std::stable_sort(tl.intervals.begin(), tl.intervals.end(), [](const Interval& a, const Interval& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.start < b.start;
  });
  std::stable_sort(tl.transfers.begin(), tl.transfers.end(),
                   [](const Transfer& a, const Transfer& b) { return a.start < b.start; });
  tl.start = 0;
  tl.end = 0;
  for (const auto& iv : tl.intervals) tl.end = std::max(tl.end, iv.end);
  for (const auto& tr : tl.transfers) tl.end = std::max(tl.end, tr.end);
  runners.clear();
  return tl;
}

}  // namespace ppsim::gpu
