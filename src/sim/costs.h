// Op costs the simulator consumes: durations per model slice (stages may differ: embedding on
// the first, head and loss on the last), transfer sizes, and the link model.
#pragma once
#include <vector>

#include "core/op.h"
#include "core/time.h"

namespace ppsim {

struct SliceCosts {
  Time f = 0;        // forward
  Time b = 0;        // full backward (input grad + weight grad)
  Time w = 0;        // weight grad; the input-grad op I costs b - w
  Time fb = 0;       // overlapped pair when both chunks are of this slice; 0 = f + b (no gain)
  // What a W costs beyond `w` when it runs apart from its I (a W action; the I keeps b - w, a
  // full B keeps b): PyTorch's split backward copies each weight's output gradient once more
  // (cost/derive.cc, torch_split_w_ns). 0 for every other runtime.
  Time w_apart = 0;
  // What an I costs beyond b - w when it runs apart from its W (an I action): a fused backward
  // runs each layer's weight grad beside its input grad, and the input grad alone can take longer
  // than their difference (validate: the profile's I timed alone). 0 where only B and W are known.
  Time i_apart = 0;
  Bytes act_bytes = 0;   // activations sent to the next stage after F
  Bytes grad_bytes = 0;  // gradients sent to the previous stage after B or I
  // The share of a micro-batch's activations on this slice still held from its I's end to its W's
  // end (the Zero Bubble paper's M_W / M_B: what the weight grad reads); the rest is freed when
  // the I ends. For the schedule search's activation cap (src/search). 1: all of it held until
  // the W (explicit times); a config's costs give the memory model's ratio (cost/derive.cc).
  double w_hold = 1.0;
  Time input_grad() const { return b - w; }
  Time pair_saving() const { return fb > 0 ? f + b - fb : 0; }
};

// Point-to-point links between pipeline ranks. A transfer occupies its link direction for
// bytes / bandwidth (one transfer at a time per direction, FIFO in request order) and arrives
// `latency` after it leaves the link; latency does not occupy the link.
struct LinkModel {
  Time latency = 0;
  double bytes_per_tick = 0;  // 0 = infinite bandwidth
  bool blocking = false;      // the sender's compute stream waits until its sends arrive
  Time occupancy(Bytes bytes) const {
    if (bytes_per_tick <= 0 || bytes <= 0) return 0;
    return static_cast<Time>(static_cast<double>(bytes) / bytes_per_tick + 0.5);
  }
};

// The overlap model's sub-op costs of one slice (sim/overlap.h): per layer, compute at full SM
// count, and the all-to-all time of one dispatch / combine (0 for dense layers). A chunk of the
// slice holds `layers` such layers.
struct MoeSliceCosts {
  int layers = 1;
  Time attn_f = 0, attn_b = 0, attn_w = 0;  // attention (+ norms, projections): fwd, input-grad, weight-grad
  Time mlp_f = 0, mlp_b = 0, mlp_w = 0;     // MLP / experts
  Time dispatch = 0, combine = 0;           // forward all-to-alls on the communication stream
  Time dispatch_b = 0, combine_b = 0;       // their backward counterparts
  // Profiled SM sharing: how many times longer an attention / MLP compute sub-op runs while a
  // communication sub-op runs beside it (a measured profile's comm_slowdown). 0 = not measured:
  // the linear rule, speed 1 - comm_sm_fraction.
  double attn_comm_slowdown = 0, mlp_comm_slowdown = 0;
};

struct SimCosts {
  std::vector<SliceCosts> slice;  // indexed by Schedule::slice[stage]
  LinkModel link;
  TimeScale scale;
  // Overlap model: when non-empty (one entry per slice), each action is decomposed into sub-ops
  // on a compute and a communication stream, and F&B pairs interleave their two chunks; the
  // SliceCosts durations are then not used for compute.
  std::vector<MoeSliceCosts> moe;
  double comm_sm_fraction = 0;  // SMs reserved for communication / SMs (DeepSeek: 20/132)
  // Ranks that share one device (virtual ranks on one GPU): rank_device[r] is rank r's device
  // (empty: one device per rank). While k actions of one device run at once, each progresses
  // 1 + (k-1)(share_slowdown-1) times slower than alone (1: no interference; 2: time-sliced);
  // the engine re-times them whenever k changes (processor sharing). An F&B pair beside an action
  // counts as its two ops at their own pace: its share is weighted by its load, its ops' times
  // alone over its own time alone (pair_duration; 1 for one op).
  std::vector<int> rank_device;
  double share_slowdown = 1.0;
  // Each running action stands for this many identical actions at once on its device: the EP
  // shards of its rank that the replay puts on the same GPU, running the same schedule in step
  // (their all-to-alls couple them). k above then counts each running action that many times; a
  // rank alone on its device still shares it with its copies. 1: none.
  int share_copies = 1;
  // Sharing by op kind (empty: every pair of kinds at share_slowdown). share_by_kind[3x + y] is
  // how many times longer an op of kind x runs while one of kind y runs beside it on the device,
  // kinds F = 0, I = 1, W = 2 (B counts as its I and W parts, an F&B pair as its F, I and W
  // parts, each in proportion to its duration alone). An action beside k-1 others progresses
  // 1 + sum over the others of (mix' share_by_kind mix_other - 1) x load_other times slower than
  // alone; with every entry s that is the uniform rule.
  std::vector<double> share_by_kind;
  // Two single ops of one kind that start together on a device (within share_aligned_window of the
  // shorter's time alone): each runs at least share_aligned[x] times slower than alone, x its kind
  // (F = 0, I = 1, W = 2; a B by its I and W parts), whatever the rules above give. Their kernels meet
  // phase for phase and contend more than ops that meet at random (measured: at the small shape two
  // B started together 1.25-1.27x where the ZB-H2 replay's fit says 1.16x). Empty: no such rule.
  std::vector<double> share_aligned;
  double share_aligned_window = 0.15;
  // Ranks that compute at different speeds (a slower GPU, or an SM partition slower than the one
  // the costs were profiled on): rank_kind_scale[3r + k] multiplies rank r's time for ops of kind
  // k (F = 0, I = 1, W = 2; a B or a pair by its mix, as above). Empty: every rank at 1.
  std::vector<double> rank_kind_scale;
  // Pipeline ranks over several nodes: rank_node[r] is rank r's node (empty: every transfer on
  // `link`). A transfer between ranks of two nodes runs on inter_node_link instead (the network),
  // one inside a node on `link` (NVLink).
  std::vector<int> rank_node;
  LinkModel inter_node_link;
  // Schedule::comm_waits: a rank that waited on a blocking call starts its next action this much
  // after the call's last transfer lands (Megatron's per-call synchronize: the host restarts a
  // drained GPU). 0: at once.
  Time call_restart = 0;
  // A rank starts its next action at least this long after its previous one ended: the GPU's own
  // gap between two actions launched back to back on one stream (a replay's event brackets, waits
  // and graph launch; `validate` measures it in the link probe's replay). 0: at once.
  Time action_gap = 0;
  // Explicit communication: a send of at most this many bytes starts when its data and its sender
  // are ready, without waiting for the receiver to post (NCCL finishes it into the receiver's
  // buffers; up to 64 MB between two H200s, 96 MB waited: tools/experiments/measure_p2p_rendezvous.py); the receive
  // completes when it is posted and the data has landed. 0: every transfer waits for both sides.
  Bytes eager_bytes = 0;
  // A replay of a traced run: action_time[r][i] is the duration of rank r's i-th action as it ran
  // (in place of its slices' costs; a negative entry keeps them). Empty: the slices' costs.
  std::vector<std::vector<Time>> action_time;
  const LinkModel& link_between(int a, int b) const {
    return rank_node.empty() || rank_node[static_cast<std::size_t>(a)] == rank_node[static_cast<std::size_t>(b)] ? link
                                                                                                               : inter_node_link;
  }
};

// Duration of one op, or of an overlapped pair (F of slice a with backward of slice b): the
// sum minus the mean of the two slices' pair savings, and never less than the longer of the two.
Time op_duration(const SliceCosts& c, OpKind kind);
Time pair_duration(const SliceCosts& fa, const SliceCosts& bb, OpKind bwd_kind);

// Uniform costs: every slice the same.
SimCosts uniform_costs(int slices, const SliceCosts& c, TimeScale scale = TimeScale::units());

}  // namespace ppsim
