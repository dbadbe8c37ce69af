// replay_schedule: runs a ppsim::Schedule on the GPUs present and measures it as a Timeline.
//
// One host thread per rank; rank r runs on GPU r % devices (fewer GPUs than ranks: virtual ranks
// share a GPU, each on its own streams, transfers become device copies). Each rank owns a Chunk
// per stage it holds and executes its actions in schedule order on its compute stream:
//   F(s,m): input = previous stage's activation (or a random micro-batch on a first stage)
//   I(s,m): input-grad; B(s,m) = I then W; W(s,m): weight-grad, then m's buffers are released
//   (F a; B b) overlapped pair: a on the compute stream, b on a second stream, their sub-ops
//   enqueued interleaved layer by layer, joined before the next action.
// Every action is bracketed by CUDA events. Clocks: after a host barrier (and, across processes,
// an MPI barrier) the first rank of each GPU records an epoch event, which every rank on that GPU
// waits for and measures from: ranks sharing a GPU share one clock exactly; GPUs are aligned to
// the barrier, within the host threads' wake-up jitter.
// Processes (mpirun/srun, mpi::world()): process p replays the ranks r with r % processes == p on
// its one GPU (with expert parallelism, the shards (r, e) with (r * ep + e) % processes == p, on
// one host: EpWiring shares their receive buffers by CUDA IPC); the measured shares are gathered
// into one Timeline on every process (launch::merge_parts).
// Activation samples follow the simulator: +1 when an F starts, -1 when a B or W ends.
// Watchdog: every host wait (a message not yet posted, streams not yet done) is bounded by
// ReplayConfig::nccl_timeout_s; NCCL async errors are polled; on either, the communicators are
// aborted and InputError(kExitGpu) is thrown.
#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "core/error.h"
#include "cuda_validate/check.h"
#include "cuda_validate/chunk.h"
#include "cuda_validate/device_buffer.h"
#include "cuda_validate/ep_wiring.h"
#include "cuda_validate/gpu_api.h"
#include "cuda_validate/graph_launch.h"
#include "cuda_validate/green.h"
#include "cuda_validate/ops/elementwise.h"
#include "cuda_validate/peer.h"
#include "cuda_validate/replay/message_check.h"
#include "cuda_validate/replay/transport.h"
#include "cuda_validate/replay/words.h"
#include "ep/ep_placement.h"
#include "ep/ep_plan.h"
#include "launch/launch.h"
#include "launch/mpi.h"

namespace ppsim::gpu {
namespace {

using replay::MsgKey;
using replay::Transport;

Time ticks_between(cudaEvent_t epoch, cudaEvent_t e);

// The chunk shape of a stage: one for all, or the stage's model slice's.
const ChunkShape& stage_shape_of(const Schedule& s, const ReplayConfig& cfg, int stage) {
  const std::size_t slice = static_cast<std::size_t>(s.slice[static_cast<std::size_t>(stage)]);
  return cfg.stage_shapes.size() == 1 ? cfg.stage_shapes[0] : cfg.stage_shapes.at(slice);
}

struct ActionTiming {
  Action action;
  cudaEvent_t start = nullptr, end = nullptr;                // whole action
  std::vector<std::pair<cudaEvent_t, int>> activation_deltas;  // (event, +1 / -1)
  // EP: the action's all-to-all exchanges, and where each of its streams ended (one stream, or a
  // pair's two); from start to a stream's end the stream was busy.
  std::vector<Chunk::ExchangeEvents> exchanges;
  std::vector<std::pair<cudaStream_t, cudaEvent_t>> stream_ends;
};

struct RankResult {
  cudaEvent_t epoch = nullptr;
  unsigned ep_status = 0;  // EP: 0, or 1000 + the shard a wait of this run gave up on
  Time ep_wait = 0;        // EP: ns this rank's all-to-all ends waited for peers in this run
  Time ep_exposed = 0;     // EP: ns of this run's exchanges while none of an action's streams computed
  std::vector<ActionTiming> actions;
  ReplayHostStats host;
};

// One clock per GPU: the first rank on it records the epoch, the others wait for it. With the
// gate (ReplayConfig::clock_gate), each GPU's epoch is recorded behind a kernel that polls one
// word of pinned host memory, which the host sets once every GPU's kernel is queued: the GPUs'
// clocks start within the word's polling time of each other instead of the host threads'
// wake-up after a barrier (seen up to 0.19 ms apart on two H200s: forwards that "began before"
// the action whose output they read had ended).
struct DeviceClocks {
  std::mutex mu;
  std::map<int, cudaEvent_t> epoch;  // by device, for the current run
  std::unique_ptr<replay::Words> gate;  // word 0: the run released (null: no gate)
  double timeout_s = 120;
};

// The last line of defence against a hang. Every wait of the replay is bounded by the timeout and
// throws its own one line (the rank, its op, the message it waited for); this thread covers a
// thread stuck inside a call that cannot be bounded (an MPI collective whose peer died, an NCCL
// connection that never comes up): when no rank thread has begun an action for timeout + 15 s, it
// prints one line naming each rank's last action and ends the process, and under mpirun/srun the
// whole job (MPI_Abort), with exit code 5.
class Watchdog {
 public:
  Watchdog(std::vector<int> ranks, double timeout_s)
      : ranks_(std::move(ranks)), last_(ranks_.size()), what_(ranks_.size()), timeout_s_(timeout_s) {
    const auto now = std::chrono::steady_clock::now();
    for (auto& t : last_) t = now;
    thread_ = std::thread([this] { loop(); });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  void note(int slot, const Action& a) {
    std::lock_guard<std::mutex> lock(mu_);
    last_[static_cast<std::size_t>(slot)] = std::chrono::steady_clock::now();
    what_[static_cast<std::size_t>(slot)] = format_action(a);
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    const double limit = timeout_s_ + 15;
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(250));
      if (stop_) return;
      const auto now = std::chrono::steady_clock::now();
      double quiet = 1e300;
      for (const auto& t : last_) quiet = std::min(quiet, std::chrono::duration<double>(now - t).count());
      if (quiet < limit) continue;
      std::string where;
      for (std::size_t i = 0; i < ranks_.size(); ++i)
        where += fmt::format("{}rank {} after {}", i ? ", " : "", ranks_[i], what_[i].empty() ? "nothing" : what_[i]);
      std::fprintf(stderr, "ppsim: replay watchdog: no rank began an action for %.0f s (%s); ending %s\n", quiet,
                   where.c_str(), mpi::world().size > 1 ? "every process of the job" : "the process");
      std::fflush(stderr);
      mpi::abort_job(kExitGpu);
    }
  }
  std::vector<int> ranks_;
  std::vector<std::chrono::steady_clock::time_point> last_;
  std::vector<std::string> what_;
  double timeout_s_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

class RankRunner {
 public:
  // parts: the GPU's SM partitions when its ranks each get their own (group = this rank's).
  // ep_index: which EP shard of its pipeline rank this runner is (0 without expert parallelism).
  RankRunner(int rank, int device, bool clock_leader, const Schedule& s, const ReplayConfig& cfg, Transport& t,
             DeviceClocks& clocks, const SmPartitions* parts, int group, int ep_index = 0)
      : ep_index_(ep_index), rank_(rank), device_(device), clock_leader_(clock_leader), s_(s), cfg_(cfg), t_(t),
        clocks_(clocks), parts_(parts), group_(group) {}
  Chunk* chunk(int stage) {
    const auto it = chunks_.find(stage);
    return it == chunks_.end() ? nullptr : it->second.get();
  }
  int ep_index() const { return ep_index_; }
  const std::map<int, std::unique_ptr<Chunk>>& chunks() const { return chunks_; }

  void setup() {
    PPSIM_CUDA_CHECK(cudaSetDevice(device_));
    int lo = 0, hi = 0;
    PPSIM_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    // The compute streams run at normal priority; the transport's comm stream at the highest.
    if (parts_) {
      main_ = Stream::adopt(parts_->create_stream(group_, lo));
      second_ = Stream::adopt(parts_->create_stream(group_, lo));
    } else {
      main_ = std::make_unique<Stream>(lo);
      second_ = std::make_unique<Stream>(lo);
    }
    for (int st = 0; st < s_.num_stages(); ++st)
      if (s_.stage_rank[static_cast<std::size_t>(st)] == rank_)
      {
        ChunkShape sh = shape_of(st);
        if (sh.ep > 1) {  // this shard's experts; receive buffers for every micro-batch id of the schedule
          sh.ep_rank = ep_index_;
          sh.ep_microbatches = s_.microbatches;
        }
        chunks_[st] = std::make_unique<Chunk>(sh, 1000 + static_cast<std::uint64_t>(st));
        chunks_[st]->record_exchanges(sh.ep > 1);
      }
    if (cfg_.value_waits) pair_words_ = std::make_unique<replay::Words>(2);
    if (graphs_on())  // a micro-batch's buffers stay its own: a captured action stays valid
      for (auto& [stage, c] : chunks_) c->pin_sets();
    for (auto& [stage, c] : chunks_) {
      c->give_back_during_backward(true);
      if (c != chunks_.begin()->second) c->share_with(*chunks_.begin()->second);
    }
  }

  // Runs the rank's actions once; the result's events are valid until the next run (the epoch
  // belongs to the GPU's clock leader, which outlives the others' use of it).
  template <typename Barrier>
  void run(Barrier& sync) {
    destroy_events();
    pending_.clear();
    local_.clear();
    local_at_.clear();
    host_was_ahead_ = false;
    opening_ = 0;
    if (runs_++ > 0)  // the warm-up sized the activation pools: no allocation stalls while measured
      for (auto& [stage, c] : chunks_) c->stop_growing();
    // EP: in the first run a shard's lazy library set-up can synchronise its GPU while a peer's
    // exchange waits for it; there a wait gives up after 0.1 s (the run is not measured), later
    // after A2aCall's default.
    for (auto& [stage, c] : chunks_) {
      c->set_ep_timeout_ns(runs_ == 1 && cfg_.warmup_iterations > 0 ? 100'000'000ull : 0);
      c->reset_ep_status(main_->get());
      c->clear_exchanges();
    }
    PPSIM_CUDA_CHECK(cudaDeviceSynchronize());
    start_clock(sync);
    for (const Action& a : s_.ranks[static_cast<std::size_t>(rank_)]) {
      if (t_.aborted()) throw_gpu_failure("replay aborted: " + t_.abort_reason(), "see the first error reported");
      if (watch_) watch_->note(watch_slot_, a);
      if (a.overlapped) run_pair(a);
      else run_single(a);
    }
    wait_done();
    result_.ep_status = 0;
    result_.ep_wait = 0;
    for (auto& [stage, c] : chunks_) {
      result_.ep_status = std::max(result_.ep_status, c->ep_status());  // synchronises: the events are done
      result_.ep_wait += static_cast<Time>(c->ep_wait_ns());
    }
    // The exchanges' events belong to the chunks (reused next run): read them now.
    result_.ep_exposed = 0;
    for (const ActionTiming& at : result_.actions) {
      if (at.exchanges.empty()) continue;
      const Time start = ticks_between(result_.epoch, at.start);
      std::vector<StreamSpan> spans;
      for (const auto& [stream, end_ev] : at.stream_ends) {
        StreamSpan sp;
        sp.start = start;
        sp.end = std::max(start, ticks_between(result_.epoch, end_ev));
        for (const Chunk::ExchangeEvents& ex : at.exchanges)
          if (ex.stream == stream)
            sp.comm.emplace_back(ticks_between(result_.epoch, ex.start), ticks_between(result_.epoch, ex.end));
        spans.push_back(std::move(sp));
      }
      result_.ep_exposed += exposed_communication(spans);
    }
  }

  void check_messages(replay::MessageCheck* c) { check_ = c; }
  // The run's epoch on this GPU (DeviceClocks): the clock leader records it, behind the gate when
  // there is one, which every thread opens once all leaders have queued theirs.
  template <typename Barrier>
  void start_clock(Barrier& sync) {
    sync.arrive_and_wait();
    if (clock_leader_) {
      if (clocks_.gate)
        wait_word(clocks_.gate->device_word(0), static_cast<std::uint32_t>(runs_), clocks_.timeout_s, main_->get());
      cudaEvent_t e = event();
      PPSIM_CUDA_CHECK(cudaEventRecord(e, main_->get()));
      std::lock_guard<std::mutex> lock(clocks_.mu);
      clocks_.epoch[device_] = e;
    }
    sync.arrive_and_wait();
    if (clocks_.gate) clocks_.gate->store(0, static_cast<std::uint32_t>(runs_));
    {
      std::lock_guard<std::mutex> lock(clocks_.mu);
      result_.epoch = clocks_.epoch.at(device_);
    }
    if (!clock_leader_) PPSIM_CUDA_CHECK(cudaStreamWaitEvent(main_->get(), result_.epoch, 0));
  }

  void watch(Watchdog* w, int slot) {
    watch_ = w;
    watch_slot_ = slot;
  }
  const RankResult& result() const { return result_; }
  // What this rank's chunks hold now (after a run: the high-water mark of their allocations).
  ReplayMemory::Rank memory() const {
    ReplayMemory::Rank m;
    m.rank = rank_;
    m.device = device_;
    m.shard = ep_index_;
    for (const auto& [stage, c] : chunks_) {
      m.weights += c->weight_bytes();
      m.weight_grads += c->weight_grad_bytes();
      m.activations_peak = c->activation_bytes_peak();  // the rank's: its chunks count together
      m.activations_allocated += c->activation_bytes_allocated();
      m.microbatch_bytes = std::max(m.microbatch_bytes, c->microbatch_bytes());
      m.workspace += c->workspace_bytes();
    }
    return m;
  }
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
  const ChunkShape& shape_of(int stage) const { return stage_shape_of(s_, cfg_, stage); }
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
        const void* at = nullptr;
        const MsgKey k{0, op.stage, m};
        cudaEvent_t arrived = arrival(k, c.input(m), tensor_bytes(op.stage), op, &at, st);
        if (at) c.bind_input(m, static_cast<const bf16*>(at));
        if (arrived) PPSIM_CUDA_CHECK(cudaStreamWaitEvent(st, arrived, 0));
        if (check_) check_->consumed(k, device_, at ? at : c.input(m), tensor_bytes(op.stage), st);
      }
    } else if (op.kind == OpKind::I || op.kind == OpKind::B) {
      if (s_.is_last_stage(op.stage)) {
        c.fill_grad_output(m, seed(op.stage, m, 1), st);
      } else {
        const void* at = nullptr;
        const MsgKey k{1, op.stage, m};
        cudaEvent_t arrived = arrival(k, c.grad_output(m), tensor_bytes(op.stage), op, &at, st);
        if (at) c.bind_grad_output(m, static_cast<const bf16*>(at));
        if (arrived) PPSIM_CUDA_CHECK(cudaStreamWaitEvent(st, arrived, 0));
        if (check_) check_->consumed(k, device_, at ? at : c.grad_output(m), tensor_bytes(op.stage), st);
      }
    }
  }

  // Where the next (or previous) stage lives on this same rank (the turn of a V-shaped layout),
  // its input is handed over as a device copy in stream order, with no transport: no staging, no
  // host handshake, no transfer in the timeline, as the simulator has it (no link within a rank).
  bool never_sent(const MsgKey& k) const {
    const auto& n = cfg_.never_send;
    return n.size() == 3 && n[0] == k.grad && n[1] == k.stage && n[2] == k.microbatch;
  }
  bool local(const MsgKey& to) const { return s_.stage_rank[static_cast<std::size_t>(to.stage)] == rank_; }
  cudaEvent_t hand_over(const MsgKey& to, const void* src, void* dst, std::size_t bytes, cudaStream_t st,
                        cudaEvent_t done) {
    PPSIM_CUDA_CHECK(cudaStreamWaitEvent(st, done, 0));
    PPSIM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st));
    cudaEvent_t copied = event();
    PPSIM_CUDA_CHECK(cudaEventRecord(copied, st));
    local_[to] = copied;
    return copied;
  }
  // The event after which the input named `key` is in `dst`: a local hand-over, else the transport.
  // (null: with value waits, `st` itself waits for the message).
  cudaEvent_t arrival(const MsgKey& key, void* dst, std::size_t bytes, const Op& consumer, const void** in_place,
                      cudaStream_t st) {
    const auto it = local_.find(key);
    if (it == local_.end()) return t_.receive(key, dst, bytes, rank_, consumer, in_place, st);
    const cudaEvent_t e = it->second;
    local_.erase(it);
    if (const auto at = local_at_.find(key); at != local_at_.end()) {
      PPSIM_CHECK(in_place != nullptr, "replay: the input {} is read in place, but its consumer cannot", key.stage);
      *in_place = at->second;
      local_at_.erase(at);
    }
    return e;
  }

  // Outputs of an op (after `done` on `st`), and the release of m's buffers after its last use.
  void finish(const Op& op, cudaStream_t st, cudaEvent_t done) {
    Chunk& c = *chunks_.at(op.stage);
    const int m = op.microbatch;
    // The message rule (and so the order a link carries) is launch::output_message's.
    if (MsgKey to; launch::output_message(s_, op, to) && !never_sent(to)) {
      const void* src = to.grad ? c.grad_input(m) : c.output(m);
      if (check_) check_->produced(to, device_, src, tensor_bytes(op.stage), st);
      cudaEvent_t sent = nullptr;
      bool by_transport = false;
      if (local(to) && !to.grad) {
        // The turn of a V within this rank: the next stage reads this output in place (it stays
        // until this micro-batch's release here, after the next stage's backward). No copy, and
        // the next stage's buffers are taken when its F starts, as the simulator counts them.
        local_[to] = done;
        local_at_[to] = src;
        sent = done;
      } else if (local(to)) {
        // The gradient back down the turn is copied: this stage may release its buffers (after
        // its W or B) before the stage below runs its backward.
        Chunk& next = *chunks_.at(to.stage);
        sent = hand_over(to, src, next.grad_output(m), tensor_bytes(op.stage), st, done);
      } else {
        sent = t_.send(to, src, tensor_bytes(op.stage), rank_, done, op, st);
        by_transport = true;
      }
      pending_[{op.stage, m}].push_back(Sent{sent, to, by_transport});
    }
    // After I, the forward tensors only the input-grads read go back (no message reads them:
    // output and grad_in stay with the micro-batch until its release).
    if (op.kind == OpKind::I) c.input_grad_done(m, st);
    if (op.kind == OpKind::B || op.kind == OpKind::W) {
      // The staging copies read these buffers: wait for them before they go back to the pool.
      for (const Sent& e : pending_[{op.stage, m}]) {
        if (e.by_transport)
          t_.wait_sent(e.key, e.event, st);
        else
          PPSIM_CUDA_CHECK(cudaStreamWaitEvent(st, e.event, 0));
      }
      pending_.erase({op.stage, m});
      c.release(m, st);
    }
  }

  void compute(const Op& op, cudaStream_t st) {
    Chunk& c = *chunks_.at(op.stage);
    switch (op.kind) {
      case OpKind::F: c.forward(op.microbatch, st); break;
      case OpKind::I: c.backward_input(op.microbatch, st); break;
      case OpKind::B: c.backward(op.microbatch, st); break;
      case OpKind::W: c.backward_weight(op.microbatch, st); break;
    }
  }

  // The host's side of one action: the time to enqueue its kernels, and whether the GPU had begun
  // the action before the last of them was enqueued. A rank's opening actions always are (nothing
  // is queued before them): those are not counted until the host was once ahead, and not beyond
  // the rank's second action: a rank whose thread never gets ahead of its GPU (the GPU chasing
  // its launches, seen on two H200s in session 6) has every later action counted.
  void host_note(const Action& a, std::chrono::steady_clock::time_point t0, cudaEvent_t start) {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const cudaError_t q = cudaEventQuery(start);
    if (q != cudaErrorNotReady) PPSIM_CUDA_CHECK(q);
    auto& k = result_.host.by_kind[a.overlapped ? std::string("FB") : std::string(1, op_kind_char(a.first.kind))];
    ++k.actions;
    k.enqueue_ms += ms;
    if (q == cudaSuccess && (host_was_ahead_ || ++opening_ > 2)) ++k.started_early;
    if (q == cudaErrorNotReady) host_was_ahead_ = true;
  }

  void run_single(const Action& a) {
    const cudaStream_t st = main_->get();
    ActionTiming at{a, event(), event(), {}, {}, {}};
    prepare(a.first, st);
    PPSIM_CUDA_CHECK(cudaEventRecord(at.start, st));
    if (a.first.kind == OpKind::F) at.activation_deltas.emplace_back(at.start, +1);
    const auto t0 = std::chrono::steady_clock::now();
    Chunk* ch = chunk(a.first.stage);
    const std::size_t ex0 = ch ? ch->exchanges_recorded() : 0;
    launch_part(a.first, st, 0, [&] { compute(a.first, st); });
    host_note(a, t0, at.start);
    PPSIM_CUDA_CHECK(cudaEventRecord(at.end, st));
    if (ch)
      for (std::size_t i = ex0; i < ch->exchanges_recorded(); ++i) at.exchanges.push_back(ch->exchange(i));
    at.stream_ends.emplace_back(st, at.end);
    if (a.first.kind == OpKind::B || a.first.kind == OpKind::W) at.activation_deltas.emplace_back(at.end, -1);
    finish(a.first, st, at.end);
    result_.actions.push_back(std::move(at));
  }

  // A pair's backward sub-ops of one layer: the part enqueued beside the F's MLP (after its
  // combine's and MLP's input-grads), then the rest.
  static void backward_layer_rest(Chunk& cb, int mb, int jb, bool fused, cudaStream_t s1) {
    cb.dispatch_backward(mb, jb, s1);
    cb.attn_backward_input(mb, jb, s1);
    if (fused) {
      cb.attn_backward_weight(mb, jb, s1);
      cb.mlp_backward_weight(mb, jb, s1);
    }
  }
  static void backward_layer(Chunk& cb, int mb, int jb, bool fused, cudaStream_t s1) {
    cb.combine_backward(mb, jb, s1);
    cb.mlp_backward_input(mb, jb, s1);
    backward_layer_rest(cb, mb, jb, fused, s1);
  }

  // Whether this run launches its actions as graphs (ReplayConfig::graphs): from the second run
  // on, when there is a warm-up (the first sizes the pools and makes the libraries' lazy set-up,
  // launched one by one), and never with expert parallelism (graphs_unavailable).
  bool graphs_on() const {
    return cfg_.graphs && !chunks_.empty() && graphs_unavailable(shape_of(chunks_.begin()->first).ep).empty();
  }
  bool graphs_now() const { return graphs_on() && (runs_ > 1 || cfg_.warmup_iterations == 0); }
  // Enqueues one action's part (`enqueue` puts `op`'s kernels on `st`): as it is, or as one graph
  // (role: 0 the compute stream, 1 a pair's second stream), captured the first time and launched
  // again as it is while the micro-batch's buffers are the same (Chunk::buffer_signature).
  template <class Enqueue>
  void launch_part(const Op& op, cudaStream_t st, int role, Enqueue&& enqueue) {
    if (!graphs_now()) {
      enqueue();
      return;
    }
    Chunk& c = *chunks_.at(op.stage);
    if (!graphs_.launch(graph_key(op.stage, op.kind, op.microbatch, role), st, enqueue,
                        c.buffer_signature(op.microbatch)))
      c.account_relaunched(op.kind, op.microbatch, st);
  }

  // (F a; backward b): F on the main stream, the backward on the second, sub-ops interleaved.
  void run_pair(const Action& a) {
    const Op& f = a.first;
    const Op& b = a.second;
    const cudaStream_t s0 = main_->get(), s1 = second_->get();
    const std::uint32_t n = ++pairs_;
    // ReplayConfig::pair_waits_both: both inputs on the main stream before the fork, so neither half
    // starts before both have landed (DualPipe's overlapped chunk receives both first; the
    // simulator's pair starts so). Otherwise each half waits for its own input on its own stream.
    if (cfg_.pair_waits_both) {
      prepare(f, s0);
      prepare(b, s0);
    }
    if (pair_words_) {  // value waits: no event wait left pending beside the pair's kernels
      pair_words_->write(s0, 0, n);
      pair_words_->wait(s1, 0, n);
    } else {
      cudaEvent_t fork = event();
      PPSIM_CUDA_CHECK(cudaEventRecord(fork, s0));
      PPSIM_CUDA_CHECK(cudaStreamWaitEvent(s1, fork, 0));
    }
    if (!cfg_.pair_waits_both) {
      prepare(f, s0);
      prepare(b, s1);
    }
    // The pair starts when its F can start on the main stream (the second stream was forked
    // from it) and ends when both streams are done (joined onto the main stream).
    cudaEvent_t start0 = event(), end0 = event(), end1 = event(), end = event();
    PPSIM_CUDA_CHECK(cudaEventRecord(start0, s0));
    const auto t0 = std::chrono::steady_clock::now();
    Chunk& cf = *chunks_.at(f.stage);
    Chunk& cb = *chunks_.at(b.stage);
    const int lf = cf.shape().layers, lb = cb.shape().layers;
    const int mf = f.microbatch, mb = b.microbatch;
    const bool fused = b.kind == OpKind::B;  // a full backward: each layer's W right after its I
    const std::size_t exf0 = cf.exchanges_recorded(), exb0 = cb.exchanges_recorded();
    cb.begin_backward(mb, fused);
    if (graphs_now()) {  // one graph per stream: the F's and the backward's ends stay apart
      launch_part(f, s0, 0, [&] {
        for (int i = 0; i < lf; ++i) {
          cf.attn_forward(mf, i, s0);
          cf.dispatch_forward(mf, i, s0);
          cf.mlp_forward(mf, i, s0);
          cf.combine_forward(mf, i, s0);
        }
      });
      launch_part(b, s1, 1, [&] {
        for (int jb = lb - 1; jb >= 0; --jb) backward_layer(cb, mb, jb, fused, s1);
      });
    } else {
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
        if (jb >= 0) backward_layer_rest(cb, mb, jb, fused, s1);
        if (i < lf) cf.combine_forward(mf, i, s0);
      }
    }
    host_note(a, t0, start0);
    PPSIM_CUDA_CHECK(cudaEventRecord(end0, s0));
    PPSIM_CUDA_CHECK(cudaEventRecord(end1, s1));
    finish(f, s0, end0);
    finish(b, s1, end1);
    // Join: the next action sees both streams' work.
    if (pair_words_) {
      pair_words_->write(s1, 1, n);
      pair_words_->wait(s0, 1, n);
    } else {
      PPSIM_CUDA_CHECK(cudaStreamWaitEvent(s0, end1, 0));
    }
    PPSIM_CUDA_CHECK(cudaEventRecord(end, s0));
    ActionTiming at{a, start0, end, {}, {}, {}};
    for (std::size_t i = exf0; i < cf.exchanges_recorded(); ++i) at.exchanges.push_back(cf.exchange(i));
    if (&cb != &cf)
      for (std::size_t i = exb0; i < cb.exchanges_recorded(); ++i) at.exchanges.push_back(cb.exchange(i));
    at.stream_ends = {{s0, end0}, {s1, end1}};
    at.activation_deltas.emplace_back(start0, +1);
    if (b.kind == OpKind::B) at.activation_deltas.emplace_back(end1, -1);
    result_.actions.push_back(std::move(at));
  }

  // Waits (polling, bounded) for this rank's streams, checking NCCL for async errors.
  void wait_done() {
    cudaEvent_t done = event();
    t_.join_into(rank_, main_->get());
    PPSIM_CUDA_CHECK(cudaEventRecord(done, main_->get()));
    const auto t0 = std::chrono::steady_clock::now();
    for (;;) {
      const cudaError_t q = cudaEventQuery(done);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) PPSIM_CUDA_CHECK(q);
      t_.check_async_error(device_);
      if (t_.aborted()) throw_gpu_failure("replay aborted: " + t_.abort_reason(), "see the first error reported");
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (waited > cfg_.nccl_timeout_s) {
        const std::string why = fmt::format("rank {} on GPU {} still busy after {:.0f} s", rank_, device_, waited);
        t_.abort(why);
        throw_gpu_failure("replay watchdog: " + why,
                          "a transfer never completed (with --transport nccl, NCCL_DEBUG=INFO shows NCCL's view); "
                          "raise validate --timeout for very large shapes");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  Watchdog* watch_ = nullptr;
  int watch_slot_ = 0;
  int ep_index_ = 0;
  int rank_, device_;
  bool clock_leader_;
  const Schedule& s_;
  const ReplayConfig& cfg_;
  Transport& t_;
  DeviceClocks& clocks_;
  const SmPartitions* parts_;
  int group_;
  int runs_ = 0;
  bool host_was_ahead_ = false;  // this run: some action was fully enqueued before the GPU began it
  int opening_ = 0;              // this run, before that: actions the GPU began before they were enqueued
  std::unique_ptr<Stream> main_, second_;
  std::map<int, std::unique_ptr<Chunk>> chunks_;
  struct Sent {  // an output on its way: its source is free after `event` (or the transport's word)
    cudaEvent_t event = nullptr;
    MsgKey key;
    bool by_transport = false;
  };
  std::map<std::pair<int, int>, std::vector<Sent>> pending_;  // (stage, mb) -> staged sends
  replay::MessageCheck* check_ = nullptr;
  std::map<MsgKey, cudaEvent_t> local_;  // inputs handed over within this rank, not yet consumed
  std::map<MsgKey, const void*> local_at_;  // of those, the ones read in place (the V's turn): where
  std::vector<cudaEvent_t> events_;
  GraphCache graphs_;  // ReplayConfig::graphs: an executable per action part (graph_key)
  // ReplayConfig::value_waits: a pair's fork (word 0) and join (word 1), as the pair count so far.
  std::unique_ptr<replay::Words> pair_words_;
  std::uint32_t pairs_ = 0;
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
  for (ChunkShape sh : cfg.stage_shapes) {
    if (sh.ep > 1) sh.ep_microbatches = s.microbatches;  // the replay sizes the EP receive buffers
    if (auto p = sh.problem(); !p.empty()) throw InputError("replay: chunk shape: " + p);
    const auto& a = cfg.stage_shapes[0];
    if (sh.hidden != a.hidden || sh.seq_len != a.seq_len || sh.micro_batch != a.micro_batch)
      throw InputError("replay: every stage shape must have the same hidden, seq_len and micro_batch");
  }
  if (!(cfg.nccl_timeout_s > 0)) throw InputError("replay: the NCCL timeout must be positive", {}, kExitUsage);
}

// Expert parallelism's figures of one process (each measured where its shard runs), and all of
// them after an allgather: the other shards' makespans (max), and per rank of shard 0 its waits
// for peers' rows and its exposed communication (each counted by the one process holding it).
struct EpFigures {
  std::vector<Time> makespans;       // by shard (shard 0's is the Timeline's: left 0)
  std::vector<Time> waits, exposed;  // by pipeline rank of shard 0
};

std::string encode_ep_figures(const EpFigures& f) {
  return nlohmann::json{{"makespans", f.makespans}, {"waits", f.waits}, {"exposed", f.exposed}}.dump();
}

EpFigures merge_ep_figures(const std::vector<std::string>& parts, int ep, int pp) {
  EpFigures all;
  all.makespans.assign(static_cast<std::size_t>(ep), 0);
  all.waits.assign(static_cast<std::size_t>(pp), 0);
  all.exposed.assign(static_cast<std::size_t>(pp), 0);
  for (const std::string& text : parts) {
    const nlohmann::json j = nlohmann::json::parse(text);
    const auto m = j.at("makespans").get<std::vector<Time>>();
    const auto w = j.at("waits").get<std::vector<Time>>();
    const auto x = j.at("exposed").get<std::vector<Time>>();
    PPSIM_CHECK(m.size() == all.makespans.size() && w.size() == all.waits.size() && x.size() == all.exposed.size(),
                "replay: a process's EP figures have {} shards and {} ranks, {} and {} expected", m.size(), w.size(),
                ep, pp);
    for (std::size_t i = 0; i < m.size(); ++i) all.makespans[i] = std::max(all.makespans[i], m[i]);
    for (std::size_t i = 0; i < w.size(); ++i) all.waits[i] += w[i];
    for (std::size_t i = 0; i < x.size(); ++i) all.exposed[i] += x[i];
  }
  return all;
}

// mpirun binds each process to one core by default (OpenMPI, two processes or fewer); the replay
// issues every rank's kernels from a host thread of its own, and with one core for all of them
// launch gaps become time in the measurement (seen: makespans 10-20% longer under mpirun -np 1).
void warn_if_few_cores(int rank_threads) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return;
  const int cores = CPU_COUNT(&set);
  static bool warned = false;
  if (cores > rank_threads || warned) return;
  warned = true;
  std::fprintf(stderr,
               "ppsim: warning: this process may run on %d CPU core(s) but replays %d rank(s), a host thread each; "
               "kernel launches will queue (mpirun binds to a core by default: add --bind-to none, or give srun "
               "--cpus-per-task)\n",
               cores, rank_threads);
}

class Replay;
// The barriers' completion steps (std::barrier wants them nothrow).
struct ConnectEp {  // after every runner made its chunks: wire the EP shards' buffers
  Replay* replay;
  void operator()() noexcept;
};
struct AcrossProcesses {  // the host barrier also waits for the other processes (one thread calls MPI)
  void operator()() noexcept {
    try {
      mpi::barrier();
    } catch (...) {
    }
  }
};

// One replay_schedule call as its phases: where every rank runs (place), the transports and the
// runners (connect), the rank threads' runs (run), the checks of what they measured (check), and
// this process's share of the Timeline, merged with the other processes' (timeline).
class Replay {
 public:
  Replay(const Schedule& s, const ReplayConfig& cfg) : s_(s), cfg_(cfg), P_(static_cast<std::size_t>(s.pp)) {}
  void place();
  void connect();
  void run();
  void check();
  Timeline timeline();
  void connect_ep() noexcept;

 private:
  struct Slot {
    int rank = 0, shard = 0, device = 0;
  };
  void make_transports();
  void make_runners();
  void rank_thread(std::size_t i, int iterations);
  void check_run();  // after a run, every stream done (collective across processes)
  void collect(launch::TimelinePart& part, EpFigures& ep_figures, std::map<int, cudaEvent_t>& epoch_of_rank);
  void add_transfers(launch::TimelinePart& part, const std::map<int, cudaEvent_t>& epoch_of_rank);

  const Schedule& s_;
  const ReplayConfig& cfg_;
  const std::size_t P_;
  gpu::ReplayPlan plan_;
  int ep_ = 1;
  ep::A2aBackend a2a_ = ep::A2aBackend::ours;
  bool ep_multi_ = false;
  // shard_device_[e][r]: the GPU of shard e of rank r here, or -1 for one another process replays.
  std::vector<std::vector<int>> shard_device_, shard_process_;
  std::vector<Slot> slots_;
  std::vector<int> mine_;                               // shard 0's ranks here: the Timeline's
  std::vector<std::unique_ptr<Transport>> transports_;  // one per EP shard's pipeline
  DeviceClocks clocks_;
  std::map<int, std::unique_ptr<SmPartitions>> parts_;  // outlive the runners' streams
  std::vector<std::unique_ptr<RankRunner>> runners_;
  std::unique_ptr<replay::MessageCheck> check_;
  std::vector<std::string> check_failures_;
  std::size_t checked_ = 0;
  std::unique_ptr<EpWiring> wiring_;  // aborted when a rank fails
  std::unique_ptr<std::barrier<ConnectEp>> connected_;
  std::unique_ptr<std::barrier<AcrossProcesses>> sync_;
  std::unique_ptr<std::barrier<>> iteration_done_;
  std::mutex mu_;  // errors, memory figures
  std::exception_ptr connect_error_, first_error_;
  std::atomic<bool> failed_{false};
  std::map<int, std::size_t> used_before_, used_after_;
  std::vector<ReplayMemory::Rank> rank_memory_;
};

void ConnectEp::operator()() noexcept { replay->connect_ep(); }

std::size_t used_on(int device) {
  PPSIM_CUDA_CHECK(cudaSetDevice(device));
  std::size_t free = 0, total = 0;
  PPSIM_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return total - free;
}

// Expert parallelism (ChunkShape::ep > 1): every pipeline rank r runs as `ep` shards (r, e),
// each the same schedule on its own micro-batches, the shards of a stage exchanging tokens by
// the all-to-all (ours, or NCCL's: ChunkShape::a2a) at every dispatch and combine. Shard (r, e)
// is slot r * ep + e (ep/ep_placement.h): in one process on GPU slot % GPUs, so with GPUs = ep
// every GPU holds one shard of every stage, stage-to-stage messages stay on a GPU (one
// transport per shard's pipeline) and every all-to-all crosses GPUs; across the processes of a
// host (mpirun) in process slot % processes, on its one GPU, the receive buffers shared as CUDA
// IPC handles (EpWiring). The returned Timeline is shard 0's pipeline. Without EP (ep 1) the
// same rules deal rank r to GPU r % GPUs, or to process r % processes.
void Replay::place() {
  int visible = 0;
  PPSIM_CUDA_CHECK(cudaGetDeviceCount(&visible));
  const mpi::World& world = mpi::world();
  ep_ = cfg_.stage_shapes[0].ep > 1 ? cfg_.stage_shapes[0].ep : 1;
  a2a_ = cfg_.stage_shapes[0].a2a;
  const gpu::ReplayWhere w = replay_where(s_.pp, ep_, cfg_.transport, a2a_, cfg_.devices, visible, world);
  try {
    plan_ = gpu::plan_replay(w);
  } catch (const InputError& e) {
    throw InputError("replay: " + e.message(), e.suggestion(), e.exit_code());
  }
  ep_multi_ = ep_ > 1 && plan_.multi;
  const std::size_t E = static_cast<std::size_t>(ep_);
  shard_device_.assign(E, std::vector<int>(P_, -1));
  shard_process_.assign(E, std::vector<int>(P_, 0));
  for (int e = 0; e < ep_; ++e)
    for (int r = 0; r < s_.pp; ++r) {
      const int proc = plan_.placement.process_of(r, e);
      shard_process_[static_cast<std::size_t>(e)][static_cast<std::size_t>(r)] = proc;
      if (proc == (plan_.multi ? world.rank : 0))
        shard_device_[static_cast<std::size_t>(e)][static_cast<std::size_t>(r)] = plan_.placement.gpu_of(r, e);
    }
  for (int e = 0; e < ep_; ++e)
    for (int r = 0; r < s_.pp; ++r) {
      const int d = shard_device_[static_cast<std::size_t>(e)][static_cast<std::size_t>(r)];
      if (d < 0) continue;
      slots_.push_back(Slot{r, e, d});
      if (e == 0) mine_.push_back(r);
    }
}

void Replay::connect() {
  if (cfg_.memory)
    for (const Slot& sl : slots_)
      if (!used_before_.count(sl.device)) used_before_[sl.device] = used_on(sl.device);
  rank_memory_.resize(slots_.size());
  warn_if_few_cores(static_cast<int>(slots_.size()));
  make_transports();
  if (cfg_.clock_gate) clocks_.gate = std::make_unique<replay::Words>(1);
  clocks_.timeout_s = cfg_.nccl_timeout_s;
  make_runners();
}

void Replay::make_transports() {
  const ChunkShape& sh0 = cfg_.stage_shapes[0];
  const std::size_t message_bytes = static_cast<std::size_t>(sh0.tokens() * sh0.hidden) * 2;
  for (int e = 0; e < ep_; ++e) {
    transports_.push_back(std::make_unique<Transport>(s_, shard_device_[static_cast<std::size_t>(e)],
                                                      shard_process_[static_cast<std::size_t>(e)], plan_.kind,
                                                      message_bytes, cfg_.nccl_timeout_s));
    transports_.back()->set_value_waits(cfg_.value_waits);
    transports_.back()->set_poison(cfg_.verify_messages);
  }
  if (ep_ > 1 && !plan_.multi) {  // the shards of a stage write into each other's receive buffers
    std::vector<int> devs;
    for (const Slot& sl : slots_)
      if (std::find(devs.begin(), devs.end(), sl.device) == devs.end()) devs.push_back(sl.device);
    for (int a : devs)
      for (int b : devs)
        if (!enable_peer_access(a, b))
          throw InputError(fmt::format("replay: GPU {} cannot access GPU {} directly (peer access), which the "
                                       "expert-parallel all-to-all needs",
                                       a, b),
                           {}, kExitGpu);
  }
}

void Replay::make_runners() {
  // SM partitions: one per rank on each GPU that several ranks share.
  std::map<int, int> ranks_on;
  for (const Slot& sl : slots_) ++ranks_on[sl.device];
  if (cfg_.sm_partitions)
    for (const auto& [d, k] : ranks_on)
      if (k > 1) parts_[d] = std::make_unique<SmPartitions>(d, k);
  std::map<int, int> placed;  // per GPU: ranks given a runner so far (= the next one's group)
  for (const Slot& sl : slots_) {
    const int group = placed[sl.device]++;
    const auto pit = parts_.find(sl.device);
    runners_.push_back(std::make_unique<RankRunner>(
        sl.rank, sl.device, group == 0, s_, cfg_, *transports_[static_cast<std::size_t>(sl.shard)], clocks_,
        pit == parts_.end() ? nullptr : pit->second.get(), group, sl.shard));
  }
  if (!cfg_.verify_messages) return;
  std::vector<int> devs;
  for (const Slot& sl : slots_)
    if (sl.shard == 0) devs.push_back(sl.device);
  check_ = std::make_unique<replay::MessageCheck>(s_, devs);
  for (std::size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].shard == 0) runners_[i]->check_messages(check_.get());
}

// After every runner made its chunks: connect each stage's EP shards to each other's buffers
// (across processes: a collective, also when a runner here failed: EpWiring).
void Replay::connect_ep() noexcept {
  if (ep_ <= 1) return;
  try {
    std::vector<EpWiring::Member> local;
    for (std::size_t i = 0; i < runners_.size(); ++i)
      for (const auto& [stage, c] : runners_[i]->chunks())
        local.push_back(EpWiring::Member{stage, runners_[i]->ep_index(), slots_[i].device, c.get()});
    std::vector<int> process_of_shard;
    std::vector<ChunkShape> shapes;
    for (int st = 0; st < s_.num_stages(); ++st) {
      for (int e = 0; e < ep_; ++e)
        process_of_shard.push_back(plan_.placement.process_of(s_.stage_rank[static_cast<std::size_t>(st)], e));
      ChunkShape sh = stage_shape_of(s_, cfg_, st);
      sh.ep_microbatches = s_.microbatches;
      shapes.push_back(sh);
    }
    wiring_ = std::make_unique<EpWiring>(s_.num_stages(), ep_, std::move(process_of_shard), std::move(local),
                                         std::move(shapes), plan_.multi, !failed_, /*handshake=*/true, a2a_);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    connect_error_ = std::current_exception();
  }
}

void Replay::rank_thread(std::size_t i, int iterations) {
  RankRunner& rr = *runners_[i];
  try {
    rr.setup();
    connected_->arrive_and_wait();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (connect_error_) std::rethrow_exception(connect_error_);
    }
    for (int it = 0; it < iterations; ++it) {
      rr.run(*sync_);
      if (it + 1 < iterations) {
        iteration_done_->arrive_and_wait();  // the main thread resets the transports
        iteration_done_->arrive_and_wait();
      }
    }
    if (cfg_.memory) {
      // Pools stop growing after the warm-up: what is allocated now is the run's high-water mark.
      rank_memory_[i] = rr.memory();
      const int d = slots_[i].device;
      const std::size_t used = used_on(d);
      std::lock_guard<std::mutex> lock(mu_);
      used_after_[d] = std::max(used_after_[d], used);
    }
    if (!ep_multi_) rr.teardown();  // across processes: once no peer process maps its buffers (run())
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!first_error_) first_error_ = std::current_exception();
    }
    failed_ = true;
    if (clocks_.gate) clocks_.gate->store_all(0xffffffffu);  // no GPU stays held at the gate
    for (auto& t : transports_) t->abort(fmt::format("rank {} failed", slots_[i].rank));
    if (wiring_) wiring_->abort();
    connected_->arrive_and_drop();
    sync_->arrive_and_drop();
    iteration_done_->arrive_and_drop();
    try {
      if (!ep_multi_) rr.teardown();
    } catch (...) {
    }
  }
}

void Replay::check_run() {
  if (!check_) return;
  const replay::MessageCheck::Outcome o = check_->outcome();
  checked_ += o.compared;
  check_failures_.insert(check_failures_.end(), o.mismatches.begin(), o.mismatches.end());
  check_->reset();
}

void Replay::run() {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(slots_.size());
  const int iterations = std::max(0, cfg_.warmup_iterations) + 1;
  connected_ = std::make_unique<std::barrier<ConnectEp>>(n, ConnectEp{this});
  sync_ = std::make_unique<std::barrier<AcrossProcesses>>(n, AcrossProcesses{});
  iteration_done_ = std::make_unique<std::barrier<>>(n + 1);
  std::vector<int> slot_ranks;
  for (const Slot& sl : slots_) slot_ranks.push_back(sl.rank);
  auto watchdog = std::make_unique<Watchdog>(slot_ranks, cfg_.nccl_timeout_s);
  for (std::size_t i = 0; i < runners_.size(); ++i) runners_[i]->watch(watchdog.get(), static_cast<int>(i));
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < slots_.size(); ++i)
    threads.emplace_back([this, i, iterations] { rank_thread(i, iterations); });
  for (int it = 0; it + 1 < iterations; ++it) {
    iteration_done_->arrive_and_wait();
    if (!failed_) {
      for (auto& t : transports_) t->reset();
      check_run();
    }
    iteration_done_->arrive_and_wait();
  }
  for (auto& t : threads) t.join();
  watchdog.reset();
  if (cfg_.memory && !failed_) {
    cfg_.memory->ranks = rank_memory_;
    for (const auto& [d, before] : used_before_)
      cfg_.memory->devices.push_back(ReplayMemory::Device{d, before, used_after_[d]});
  }
  const bool any_failed = plan_.multi ? mpi::any_of(first_error_ != nullptr) : first_error_ != nullptr;
  // EP across processes: every process's rank threads are done (the collective above), so no
  // kernel writes into a peer's buffers any more: the mappings close, and once every process
  // closed them (a barrier) the chunks that own the buffers go.
  if (ep_multi_) {
    wiring_.reset();
    mpi::barrier();
    for (auto& rr : runners_) {
      try {
        rr->teardown();
      } catch (...) {
        if (!first_error_) first_error_ = std::current_exception();
      }
    }
  }
  if (first_error_) std::rethrow_exception(first_error_);
  if (any_failed) throw_gpu_failure("replay failed in another process", "see that process's message");
}

// What the runs measured is valid: every consumer read its producer's bytes (the checking mode),
// and no all-to-all wait of the measured run gave up (its outputs and time would be invalid: the
// wait spun for its whole timeout); every process learns of either before the collectives after.
void Replay::check() {
  check_run();
  if (cfg_.messages_verified) *cfg_.messages_verified = checked_;
  if (!check_failures_.empty())
    throw_gpu_failure(fmt::format("replay: {} message(s) read other bytes than their producer wrote (first: {})",
                                  check_failures_.size(), check_failures_.front()),
                      "a consumer read its input before the message had arrived: a missing wait in the transport");
  std::string ep_failure;
  for (std::size_t i = 0; i < runners_.size() && ep_failure.empty(); ++i)
    if (const unsigned st = runners_[i]->result().ep_status; st != 0)
      ep_failure = fmt::format(
          "replay: rank {} (EP shard {}): an all-to-all wait for shard {} gave up in the measured "
          "run, so its times are not valid",
          slots_[i].rank, slots_[i].shard, st - 1000);
  if (plan_.multi ? mpi::any_of(!ep_failure.empty()) : !ep_failure.empty())
    throw_gpu_failure(ep_failure.empty() ? "replay: an all-to-all wait gave up in another process's measured run, so "
                                           "the times are not valid"
                                         : ep_failure,
                      "a peer's thread or GPU fell behind by more than the wait's timeout (docs/VALIDATION.md, EP "
                      "replay)");
}

// This process's ranks: their actions (in action order) and activation samples; the host stats;
// the other EP shards' makespans, and shard 0's waits and exposed communication.
void Replay::collect(launch::TimelinePart& part, EpFigures& ep_figures, std::map<int, cudaEvent_t>& epoch_of_rank) {
  for (std::size_t i = 0; i < runners_.size(); ++i) {
    const Slot& sl = slots_[i];
    PPSIM_CUDA_CHECK(cudaSetDevice(sl.device));
    const RankResult& res = runners_[i]->result();
    if (cfg_.host_stats)
      for (const auto& [kind, k] : res.host.by_kind) {
        auto& into = cfg_.host_stats->by_kind[kind];
        into.actions += k.actions;
        into.enqueue_ms += k.enqueue_ms;
        into.started_early += k.started_early;
      }
    if (sl.shard != 0) {  // other EP shards: their makespan only
      Time end = 0;
      for (const ActionTiming& at : res.actions) end = std::max(end, ticks_between(res.epoch, at.end));
      auto& m = ep_figures.makespans[static_cast<std::size_t>(sl.shard)];
      m = std::max(m, end);
      continue;
    }
    const int r = sl.rank;
    epoch_of_rank[r] = res.epoch;
    ep_figures.waits[static_cast<std::size_t>(r)] += res.ep_wait;
    ep_figures.exposed[static_cast<std::size_t>(r)] += res.ep_exposed;
    std::vector<std::pair<Time, int>> deltas;
    for (const ActionTiming& at : res.actions) {
      Interval iv;
      iv.rank = r;
      iv.start = ticks_between(res.epoch, at.start);
      iv.end = std::max(iv.start, ticks_between(res.epoch, at.end));
      iv.action = at.action;
      part.local.intervals.push_back(iv);
      for (const auto& [e, d] : at.activation_deltas) deltas.emplace_back(ticks_between(res.epoch, e), d);
    }
    std::stable_sort(deltas.begin(), deltas.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    int live = 0;
    auto& samples = part.local.activations[static_cast<std::size_t>(r)];
    for (const auto& [t, d] : deltas) {
      live += d;
      if (!samples.empty() && samples.back().t == t) samples.back().activations = live;
      else samples.push_back(MemSample{t, live});
    }
  }
}

// Shard 0's cross-rank messages: whole where both ends are here, else the half this process saw.
void Replay::add_transfers(launch::TimelinePart& part, const std::map<int, cudaEvent_t>& epoch_of_rank) {
  const std::vector<int>& rank_device = shard_device_[0];
  auto ticks_on = [&](int rank, cudaEvent_t e) {
    PPSIM_CUDA_CHECK(cudaSetDevice(rank_device[static_cast<std::size_t>(rank)]));
    return ticks_between(epoch_of_rank.at(rank), e);
  };
  for (const auto& rec : transports_[0]->records()) {
    if (rec.start && rec.end) {
      Transfer tr;
      tr.src_rank = rec.src_rank;
      tr.dst_rank = rec.dst_rank;
      tr.start = ticks_on(rec.src_rank, rec.start);
      tr.end = std::max(tr.start, ticks_on(rec.end_on_source ? rec.src_rank : rec.dst_rank, rec.end));
      tr.producer = rec.producer;
      tr.bytes = rec.bytes;
      part.local.transfers.push_back(tr);
    } else if (rec.start) {
      part.sends.push_back(launch::SendHalf{rec.key, rec.src_rank, rec.dst_rank, ticks_on(rec.src_rank, rec.start),
                                            rec.producer, rec.bytes});
    } else {
      part.receives.push_back(launch::RecvHalf{rec.key, ticks_on(rec.dst_rank, rec.end)});
    }
  }
}

Timeline Replay::timeline() {
  launch::TimelinePart part;
  part.ranks = mine_;
  part.local.pp = s_.pp;
  part.local.activations.resize(P_);
  std::map<int, cudaEvent_t> epoch_of_rank;
  EpFigures ep_figures;
  ep_figures.makespans.assign(static_cast<std::size_t>(ep_), 0);
  ep_figures.waits.assign(P_, 0);
  ep_figures.exposed.assign(P_, 0);
  collect(part, ep_figures, epoch_of_rank);
  if (ep_ > 1) {
    // Each figure belongs to the process holding its shard: gather them (max of makespans, the
    // others each counted where they were measured).
    if (plan_.multi) ep_figures = merge_ep_figures(mpi::allgather(encode_ep_figures(ep_figures)), ep_, s_.pp);
    if (cfg_.shard_makespans) *cfg_.shard_makespans = ep_figures.makespans;
    if (cfg_.ep_waits) *cfg_.ep_waits = ep_figures.waits;
    if (cfg_.ep_exposed) *cfg_.ep_exposed = ep_figures.exposed;
  }
  add_transfers(part, epoch_of_rank);
  const std::string mine_text = launch::encode_part(part, s_);
  runners_.clear();
  return launch::merge_parts(plan_.multi ? mpi::allgather(mine_text) : std::vector<std::string>{mine_text}, s_);
}

}  // namespace

Timeline replay_schedule(const Schedule& s, const ReplayConfig& cfg) {
  if (auto why = gpu_unavailable_reason(); !why.empty()) throw InputError("replay: " + why, {}, kExitGpu);
  check_config(s, cfg);
  ReplayConfig c = cfg;
  if (c.value_waits && !c.value_waits_required && !replay::value_waits_unavailable().empty()) c.value_waits = false;
  Replay r(s, c);
  r.place();
  r.connect();
  r.run();
  r.check();
  return r.timeline();
}

}  // namespace ppsim::gpu
