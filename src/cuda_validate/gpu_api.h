// The host-side entry points of the CUDA back-end that the CLI and the bench programs call.
// Implemented in src/cuda_validate/ when built with CUDA, and by no_cuda.cc otherwise (every
// function there throws InputError(kExitGpu), except the two presence checks). This header
// includes no CUDA header, so any layer may include it.
//
// Not obvious: op names follow ppsim's notation. In a cost profile `B` is the FULL backward
// (input-grad + weight-grad) and `W` the weight-grad alone; the input-grad alone (`I` in the
// schedule notation) is `ProfileResult::input_grad_ms` and equals B - W up to noise.
#pragma once
#include <array>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/schedule.h"
#include "core/timeline.h"
#include "cuda_validate/launch_mode.h"
#include "cuda_validate/replay_plan.h"
#include "ep/ep_placement.h"

namespace ppsim::gpu {

bool built_with_cuda();
// "" when a usable GPU is present; otherwise one line saying why not.
std::string gpu_unavailable_reason();
// "NVIDIA H100 80GB HBM3" for `device` (throws InputError(kExitGpu) when there is none).
std::string device_name(int device = 0);
int device_count();  // visible CUDA GPUs
// A standalone copy of `bytes` from GPU src to GPU dst (the same GPU: a device copy), on a copy
// engine, event-timed: the median of `reps` runs in microseconds. What the replay's transfers are
// measured against (the hardware's cost of moving one message, with nothing else running).
double copy_probe_us(std::size_t bytes, int src, int dst, int reps);

// One pipeline chunk: `layers` transformer layers, run on `micro_batch` x `seq_len` tokens.
// experts == 0: a dense SwiGLU MLP of width ffn_hidden. experts > 0: a top_k MoE over
// `experts` SwiGLU experts of width expert_ffn_hidden, with fixed per-expert capacity
// ceil(capacity_factor * tokens * top_k / experts) (rounded up to 16); tokens past it are dropped.
struct ChunkShape {
  int hidden = 4096;
  int heads = 32;
  int kv_heads = 8;
  int head_dim = 128;
  int ffn_hidden = 14336;
  int seq_len = 4096;
  int micro_batch = 1;
  int layers = 1;
  int experts = 0;
  int top_k = 0;
  int expert_ffn_hidden = 0;
  double capacity_factor = 1.25;
  // Expert parallelism (MoE): the experts split over `ep` chunks of one stage (ep divides
  // experts), this one `ep_rank` holding experts [ep_rank * experts/ep, (ep_rank + 1) * experts/ep).
  // Each has its own micro-batches of `tokens()`; dispatch and combine are our all-to-all
  // (ops/a2a.h) on `comm_sms` blocks, into receive buffers allocated for micro-batches
  // 0..ep_microbatches-1. ep = 1: local permutes, as on one GPU. a2a = nccl: NCCL's grouped
  // send/recv instead (ops/a2a.h; the EP group's shards on distinct GPUs, comm_sms not applied).
  int ep = 1;
  int ep_rank = 0;
  int comm_sms = 20;
  int ep_microbatches = 0;
  ep::A2aBackend a2a = ep::A2aBackend::ours;

  std::int64_t tokens() const { return static_cast<std::int64_t>(seq_len) * micro_batch; }
  bool is_moe() const { return experts > 0; }
  int experts_local() const { return ep > 1 ? experts / ep : experts; }  // experts held by this chunk
  int qkv_width() const { return (heads + 2 * kv_heads) * head_dim; }
  // Rows each expert holds (MoE), a multiple of 16.
  std::int64_t expert_capacity() const;
  // "" when the shape is usable; otherwise the first problem, e.g. "heads (12) must be a multiple of kv_heads (8)".
  std::string problem() const;
  // Forward FLOPs of the whole chunk (matrix products and attention; causal attention counted half).
  double forward_flops() const;
};

// Median milliseconds per op kind over `reps` timed repetitions after `warmup` untimed ones.
struct ProfileResult {
  std::string gpu;
  ChunkShape shape;
  int warmup = 0;
  int reps = 0;
  std::string attention_backend;  // "cudnn" or "reference"
  double f_ms = 0;              // forward
  double input_grad_ms = 0;     // backward, input-grad only (I)
  double w_ms = 0;              // weight-grad (W)
  double b_ms = 0;              // full backward: input-grad then weight-grad, timed as one (B)
  double fb_ms = 0;             // F of one micro-batch overlapped with B of another, two streams (FB)
  // attn_fwd, attn_bwd, attn_w, mlp_fwd, mlp_bwd, mlp_w, and for MoE dispatch_fwd,
  // dispatch_bwd, combine_fwd, combine_bwd (bwd = input-grad part).
  std::map<std::string, double> sub_ops_ms;
  double dropped_token_fraction = 0;  // MoE: share of token->expert assignments over capacity
};

// sm_groups > 0: the chunk runs on one of `sm_groups` equal SM partitions of the GPU (green
// contexts, as virtual ranks do in a replay with ReplayConfig::sm_partitions).
ProfileResult profile_chunk(const ChunkShape& shape, int warmup, int reps, int device = 0, int sm_groups = 0);
// How much longer a chunk's ops take while another rank's chunk runs beside them on the same GPU
// (1: not at all; 2: the GPU is time-sliced), as virtual ranks on one GPU run. Median times.
struct SharingProfile {
  // Two chunks' F, I and W back to back, at once on two streams, against one chunk's alone; with
  // expert parallelism on a GPU per shard, ep_step where measured (else local_step).
  double step = 0;
  // EP (shape.ep > 1, a GPU per shard, sm_groups > 1): sm_groups EP groups' F, I, W at once, each
  // shard on its partition and exchanging tokens, against group 0's alone; 0: not measured.
  double ep_step = 0;
  // EP: group 0's F, I, W step alone, fed back to back by its shards' threads (ms): beside the
  // GPU's time, the host's pace and the shards' waits for each other's rows (0: not measured).
  double ep_alone_step_ms = 0;
  double local_step = 0;  // the two chunks without EP (experts local), as `step` is without it
  // by_kind[3x + y]: an op of kind x while ops of kind y run beside it, against x alone; kinds
  // F = 0, I = 1, W = 2 (what SimCosts::share_by_kind takes). Each stream is fed by its own host
  // thread, as a replay's ranks are, so launch contention in the driver is part of it.
  std::array<double, 9> by_kind{};
  // The same with everything enqueued before either stream starts: the kernels' effect alone.
  std::array<double, 9> by_kind_gpu{};
  std::array<double, 3> alone_ms{};  // F, I and W alone (enqueued before the GPU starts them)
};
// sm_groups > 0: each chunk on its own SM partition (what is left to share is memory bandwidth).
// shape.ep > 1: also ep_step (above); by_kind and alone_ms are the chunk's without EP.
SharingProfile profile_sharing(const ChunkShape& shape, int warmup, int reps, int device = 0, int sm_groups = 0);
// F, I and W of one chunk alone on each of `sm_groups` equal SM partitions (median ms): partitions
// of the same size need not be equally fast (on an H100 the second of two ran I 10% longer).
std::vector<std::array<double, 3>> profile_partitions(const ChunkShape& shape, int warmup, int reps, int device,
                                                      int sm_groups);
// How a chunk's ops on one GPU run while another GPU of the process works beside it (issue 47):
// two GPUs of a replay run slower together than each alone. F, I and W run on `device`, each
// followed by a message copied into the peer's memory (the peer transport's copy, after an event
// wait), once with the peer GPU idle and once while the peer's own host thread keeps it running
// the 1F1B mix (F, I, W in turn, each followed by a message copied into this GPU's memory). Two
// ways each: held (three ops of a kind held until enqueued: the GPU's time in a short burst) and
// sustained (F, I, W in turn back to back, fed by a host thread that never waits, each op
// bracketed by events as a replay brackets its actions: the GPU settles at the clock it sustains
// under the load; the model takes these). Factors are against the op alone (held, no messages,
// as profile_chunk times op costs). A spin kernel on a side stream reads the SM clock over a
// second sustained run of each (clock64 cycles over global-timer ns; not beside timed ops).
// The sustained run again at lower duties (kCorunDuties: the share of the wall time the GPU
// computes), each op released by the host through a word in host memory once the gap after the
// previous op has passed: the GPU idles in the gaps (no kernel resident), so it draws idle power
// there, as a replay's rank does in its bubbles. Each level reports the duty it ran at (the ops'
// time over the wall time of the kept ops) and the SM clock a one-thread probe read for 30 us
// right after the last op. Without stream memory operations (value_waits) the levels stay 0.
constexpr std::array<double, 3> kCorunDuties{0.85, 0.7, 0.55};
struct CorunDutyLevel {
  double duty_idle = 0, duty_busy = 0;            // measured, beside the idle and the busy peer
  std::array<double, 3> idle{}, busy{};           // sustained factors at that duty, against alone
  double clock_idle_mhz = 0, clock_busy_mhz = 0;  // this GPU's SM clock after the level's last op
};
struct CorunProfile {
  std::array<double, 3> alone_ms{};               // F, I, W alone, held until enqueued (ms)
  std::array<double, 3> idle{}, idle_held{};      // messages out, the peer GPU idle: sustained, held; x alone
  std::array<double, 3> busy{}, busy_held{};      // messages both ways, the peer GPU running the mix
  double clock_idle_mhz = 0, clock_busy_mhz = 0;  // this GPU's SM clock over a sustained run
  std::size_t message_bytes = 0;                  // each message: one micro-batch's activations
  int device = 0, peer = 1;
  double duty_ms = 0;  // the profile's time spent on the duty levels
  // The sustained run at kCorunDuties.
  std::array<CorunDutyLevel, kCorunDuties.size()> duty{};
};
CorunProfile profile_corun(const ChunkShape& shape, int warmup, int reps, int device, int peer);
// How the profile's timed ops (profile_chunk, profile_corun, profile_sharing, profile_partitions)
// enqueue an op from now on, for the whole process: each op's kernels captured into a CUDA graph
// and launched as one (true), or launched one by one (false, the default); validate --launch sets it
// to the replay's mode (ReplayConfig::graphs), so that the profile times what the replay runs.
void set_graph_launch(bool on);
// "" when `device` can be split into `groups` equal SM partitions (CUDA green contexts);
// otherwise why not, in one line. SMs per partition in `sms` (and the GPU's in `device_sms`).
std::string sm_partition_check(int device, int groups, int* sms = nullptr, int* device_sms = nullptr);
// The cost-profile YAML: {gpu, shape: {...}, op_ms: {F, B, W, FB}, sub_ops_ms: {...}}.
std::string profile_yaml(const ProfileResult& r);

struct ProfileRequest {
  ChunkShape shape;
  int warmup = 5;
  int reps = 20;
  int device = 0;
  std::string output_path;  // "" or "-": print the YAML to stdout
};
// Profiles, writes the YAML, prints a one-screen summary to stderr; returns the exit code.
int run_profile(const ProfileRequest& req);

// The kernel benchmark behind bench/gpu_kernel_bench: each GEMM of `shape` (forward,
// input-grad, weight-grad) and fused attention forward/backward; prints a table and, when
// csv_path is set, writes rows `name,kind,m,n,k,batch,heads,seq,head_dim,ms,tflops`.
struct KernelBenchRequest {
  ChunkShape shape;
  int warmup = 10;
  int reps = 50;
  int device = 0;
  std::string csv_path;
};
int run_kernel_bench(const KernelBenchRequest& req);

// ---- replay (GPU back-end II) ----------------------------------------------------------------
// How the replay's host threads kept up with their GPUs in the measured iteration (this
// process's ranks), by action kind ("F", "I", "W", "B", "FB"): how long a thread took to enqueue
// one action's kernels, and how many actions the GPU had begun before their last kernel was
// enqueued (those may have waited for launches: the op then measures the host, not the GPU),
// not counting each rank's opening actions (at most two) before its thread first got ahead of its GPU.
struct ReplayHostStats {
  struct Kind {
    int actions = 0;
    double enqueue_ms = 0;  // summed over the actions
    int started_early = 0;
  };
  std::map<std::string, Kind> by_kind;
};

// Device memory of a replay, measured (this process's ranks and GPUs). Per rank, what its chunks
// hold: weights, weight-grads, and the micro-batches' activation buffers at their peak (sets
// taken and given back in program order, which is the schedule's: Chunk, "Memory") plus each
// chunk's backward workspace; per GPU, cudaMemGetInfo's used bytes before the replay and after
// its measured run (everything: chunks, transport buffers, cuBLAS and cuDNN workspaces, the
// context's own growth).
struct ReplayMemory {
  struct Rank {
    int rank = 0, device = 0;
    int shard = 0;  // EP shard (expert parallelism in the replay), else 0
    std::size_t weights = 0, weight_grads = 0;
    std::size_t activations_peak = 0;       // summed over the rank's chunks
    std::size_t activations_allocated = 0;  // more: the host runs ahead of its GPU, and sets are pooled
    std::size_t microbatch_bytes = 0;       // one micro-batch of one chunk after its forward
    std::size_t workspace = 0;              // backward scratch and a fused backward's one-layer grads
    std::size_t activations() const { return activations_peak + workspace; }
    std::size_t total() const { return weights + weight_grads + activations(); }
  };
  struct Device {
    int device = 0;
    std::size_t used_before = 0, used_after = 0;  // cudaMemGetInfo: total - free
  };
  std::vector<Rank> ranks;
  std::vector<Device> devices;
};

struct ReplayConfig {
  // Shape of each stage's chunk, indexed by model slice (Schedule::slice); one entry is used for all.
  std::vector<ChunkShape> stage_shapes;
  int devices = 0;            // GPUs to use; 0 = all visible. Fewer GPUs than ranks: ranks share GPUs.
  int warmup_iterations = 1;  // whole-schedule runs before the measured one
  // The watchdog: a wait (a message, a stream) longer than this ends the replay with one line
  // naming the rank, its op and what it waited for (InputError, exit code 5).
  double nccl_timeout_s = 120;
  // How tensors move between ranks (launch::choose_transport, replay/transport.h): "auto" (peer
  // in one process, ipc for processes of one host, nccl across hosts), "peer" (copy-engine peer
  // copies ordered by CUDA events), "ipc" (the same through CUDA IPC, several processes), "nccl"
  // (one communicator, every message issued in one global order on every process).
  std::string transport = "auto";
  // Tests of the watchdog: the producer of this message (grad, stage, micro-batch) never sends it,
  // so its consumer waits for a message nobody sends. Empty: every message is sent.
  std::vector<int> never_send;
  // Ranks sharing a GPU each run on their own equal share of its SMs (CUDA green contexts)
  // instead of time-slicing all of them.
  bool sm_partitions = false;
  ReplayHostStats* host_stats = nullptr;  // when set, filled for the measured iteration
  ReplayMemory* memory = nullptr;         // when set, filled after the measured iteration
  // Expert parallelism (stage_shapes[0].ep > 1): when set, each EP shard's makespan (shard 0's
  // is the returned Timeline's; measured from each shard's own GPU clock).
  std::vector<Time>* shard_makespans = nullptr;
  // Expert parallelism: when set, per rank of shard 0, how long its all-to-all ends waited for
  // their peers' rows in the measured iteration (ns; block 0 of each end, on the GPU's clock).
  std::vector<Time>* ep_waits = nullptr;
  // Expert parallelism: when set, per rank of shard 0, its exposed communication in the measured
  // iteration (ns): over its actions, how long an exchange (begin through end, bracketed by CUDA
  // events) ran while none of the action's streams computed (core/timeline.h,
  // exposed_communication): a lone op's whole all-to-all time; in an F&B pair, where both
  // streams communicated at once or one communicated after the other had ended.
  std::vector<Time>* ep_exposed = nullptr;
  // Switches of the replay's own mechanics (the defaults are the measured ones; api::validate
  // takes them from PPSIM_REPLAY_CLOCK, PPSIM_REPLAY_WAITS and PPSIM_REPLAY_VERIFY):
  // clock_gate: every GPU's clock starts when one word of host memory, polled on each GPU, is set
  //   (false: after a host barrier, within the threads' wake-up jitter);
  // value_waits: peer messages ordered by words that streams write and wait for
  //   (cuStreamWriteValue32 / cuStreamWaitValue32), not by cross-stream event waits;
  // verify_messages: the checking mode: receive buffers poisoned before each run and every
  //   message checksummed where its producer wrote it and where its consumer read it; a
  //   difference ends the replay (InputError, kExitGpu) naming the message. Costs a kernel per
  //   message end: for tests of order, not for timings. Pipeline messages only (with EP: shard 0's).
  // graphs: each action's kernels (a pair: each stream's) captured into a CUDA graph and launched
  //   as one (LaunchMode::graphs, launch_mode.h; not with expert parallelism: graphs_unavailable);
  //   false: one launch per kernel (validate --launch, PPSIM_REPLAY_LAUNCH=streams|graphs).
  bool clock_gate = true;
  bool value_waits = false;
  bool graphs = false;
  // false: value_waits falls back to event waits where the driver has no stream memory operations
  //   (validate's default with graphs); true: such a replay fails, saying so.
  bool value_waits_required = true;
  // An overlapped pair (F a; backward b): false, each half waits for its own input on its own stream
  //   (the F half may start before the backward's input has landed); true, both inputs before either
  //   half starts, as DualPipe's overlapped chunk and the simulator's pair do (PPSIM_REPLAY_PAIR=own|both).
  bool pair_waits_both = false;
  bool verify_messages = false;
  std::size_t* messages_verified = nullptr;  // when set (and verifying): messages compared, all runs
};
// Runs `schedule` once per warm-up iteration and once measured; returns the measured Timeline
// (ticks = ns, scale = TimeScale::millis(), clocks aligned across GPUs).
Timeline replay_schedule(const Schedule& schedule, const ReplayConfig& config);

// The replay's switches from the environment (ReplayConfig::clock_gate, value_waits,
// verify_messages, graphs), so that a run can show what the replay's own mechanics cost without a flag
// for each: PPSIM_REPLAY_CLOCK=gate|barrier, PPSIM_REPLAY_WAITS=event|value, PPSIM_REPLAY_VERIFY=0|1,
// PPSIM_REPLAY_LAUNCH=streams|graphs, PPSIM_REPLAY_PAIR=own|both.
// Unset: the config's values stand. A value outside the list: InputError (kExitUsage).
inline bool replay_switch(const char* name, const char* off, const char* on, bool current) {
  const char* v = std::getenv(name);
  if (!v || !*v) return current;
  const std::string s(v);
  if (s == on) return true;
  if (s == off) return false;
  throw InputError(std::string(name) + "=" + s + ": not a value it takes",
                   std::string(name) + "=" + off + " or " + name + "=" + on, kExitUsage);
}

inline void apply_replay_switches(ReplayConfig& rc) {
  rc.clock_gate = replay_switch("PPSIM_REPLAY_CLOCK", "barrier", "gate", rc.clock_gate);
  rc.value_waits = replay_switch("PPSIM_REPLAY_WAITS", "event", "value", rc.value_waits);
  rc.verify_messages = replay_switch("PPSIM_REPLAY_VERIFY", "0", "1", rc.verify_messages);
  rc.graphs = replay_switch("PPSIM_REPLAY_LAUNCH", "streams", "graphs", rc.graphs);
  rc.pair_waits_both = replay_switch("PPSIM_REPLAY_PAIR", "own", "both", rc.pair_waits_both);
}

// ---- inline: shape arithmetic needs no GPU ------------------------------------------------------
inline std::int64_t ChunkShape::expert_capacity() const {
  if (experts <= 0) return 0;
  const double per_expert = capacity_factor * static_cast<double>(tokens()) * top_k / experts;
  std::int64_t c = static_cast<std::int64_t>(per_expert);
  if (static_cast<double>(c) < per_expert) ++c;
  return (c + 15) / 16 * 16;
}

inline std::string ChunkShape::problem() const {
  auto positive = [](const char* name, long long v) -> std::string {
    return v > 0 ? std::string{} : std::string(name) + " must be positive (got " + std::to_string(v) + ")";
  };
  for (auto [name, v] : {std::pair<const char*, long long>{"hidden", hidden}, {"heads", heads},
                         {"kv_heads", kv_heads}, {"head_dim", head_dim}, {"seq_len", seq_len},
                         {"micro_batch", micro_batch}, {"layers", layers}}) {
    if (auto p = positive(name, v); !p.empty()) return p;
  }
  if (heads % kv_heads != 0)
    return "heads (" + std::to_string(heads) + ") must be a multiple of kv_heads (" + std::to_string(kv_heads) + ")";
  if (head_dim % 8 != 0 || head_dim > 256)
    return "head_dim (" + std::to_string(head_dim) + ") must be a multiple of 8 and at most 256";
  if (hidden % 8 != 0) return "hidden (" + std::to_string(hidden) + ") must be a multiple of 8";
  if (experts < 0) return "experts must be 0 (dense) or positive";
  if (experts == 0) {
    if (ffn_hidden <= 0 || ffn_hidden % 8 != 0)
      return "ffn_hidden (" + std::to_string(ffn_hidden) + ") must be a positive multiple of 8 for a dense chunk";
  } else {
    if (top_k <= 0 || top_k > experts || top_k > 8)
      return "top_k (" + std::to_string(top_k) + ") must be in 1..min(8, experts)";
    if (experts > 1024) return "experts must be at most 1024";
    if (expert_ffn_hidden <= 0 || expert_ffn_hidden % 8 != 0)
      return "expert_ffn_hidden (" + std::to_string(expert_ffn_hidden) + ") must be a positive multiple of 8";
    if (!(capacity_factor > 0)) return "capacity_factor must be positive";
  }
  if (ep < 1 || ep > 8) return "ep (" + std::to_string(ep) + ") must be in 1..8";
  if (ep > 1) {
    if (experts == 0) return "ep > 1 needs an MoE chunk (experts > 0)";
    if (experts % ep != 0)
      return "ep (" + std::to_string(ep) + ") must divide experts (" + std::to_string(experts) + ")";
    if (ep_rank < 0 || ep_rank >= ep)
      return "ep_rank (" + std::to_string(ep_rank) + ") must be in 0.." + std::to_string(ep - 1);
    if (comm_sms < 1 || comm_sms > 160) return "comm_sms (" + std::to_string(comm_sms) + ") must be in 1..160";
    if (ep_microbatches < 1) return "ep > 1 needs ep_microbatches >= 1 (receive buffers per micro-batch)";
  }
  return {};
}

inline double ChunkShape::forward_flops() const {
  const double t = static_cast<double>(tokens());
  const double h = hidden;
  double per_layer = 2.0 * t * h * qkv_width() + 2.0 * t * heads * head_dim * h;  // QKV, output projections
  // causal attention: QK^T and PV, half of the s x s scores
  per_layer += 2.0 * 2.0 * micro_batch * heads * static_cast<double>(seq_len) * seq_len * head_dim / 2.0;
  if (experts == 0) {
    per_layer += 2.0 * t * h * 2.0 * ffn_hidden + 2.0 * t * ffn_hidden * h;
  } else {
    const double rows = static_cast<double>(expert_capacity()) * experts;  // padded rows are computed too
    per_layer += 2.0 * t * h * experts;  // router
    per_layer += 2.0 * rows * h * 2.0 * expert_ffn_hidden + 2.0 * rows * expert_ffn_hidden * h;
  }
  return per_layer * layers;
}

}  // namespace ppsim::gpu
