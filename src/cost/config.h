// A validated model config: model dimensions, precision, hardware, parallelism, and optional
// explicit or measured op times. docs/CONFIG.md documents every key, its unit and its default;
// the schema table in config.cc is the single list of keys (unknown-key errors, --set paths).
//
// Not obvious: parallelism follows Megatron's convention. The GPUs are pp * tp * cp * dp; expert
// parallelism (ep) is carved out of the data- and context-parallel ranks, so ep must divide
// dp * cp, and the routed experts are replicated over dp * cp / ep ranks ("expert data parallel").
#pragma once
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/time.h"
#include "sim/costs.h"

namespace ppsim {

enum class Dtype { fp8, bf16, fp16, fp32 };
double dtype_bytes(Dtype d);
const char* dtype_name(Dtype d);

enum class MlpKind { swiglu, gelu };
enum class NormKind { rmsnorm, layernorm };
enum class Recompute { none, selective, full };

// Op classes whose outputs a layer may recompute in its backward instead of caching them
// (parallel.recompute_ops; bits of ParallelSpec::recompute_ops). memory.h lists which tensors
// each one drops.
enum RecomputeOp : unsigned {
  kRecomputeNorm = 1u,       // norm outputs (the inputs of the GEMMs after each norm)
  kRecomputeMlaUp = 2u,      // MLA up-projections: the per-head Q, K and V
  kRecomputeActFn = 4u,      // activation-function outputs (GELU output, SwiGLU product)
  kRecomputeAttnCore = 8u,   // the attention core's s x s tensors (Korthikanti's selective)
};
const char* recompute_op_name(unsigned op);

// How the forward caches a tensor for the backward: bf16 (2 bytes), or fp8 / e5m6 (1 / 1.5
// bytes) plus one fp32 scale per kCacheTileElems elements (DeepSeek-V3's 1x128 tiles).
enum class CacheType { bf16, fp8, e5m6 };
inline constexpr double kCacheTileElems = 128;
double cache_bytes_per_elem(CacheType t);
const char* cache_type_name(CacheType t);

// How stage-to-stage transfers run (parallel.p2p_runtime, docs/CONFIG.md).
enum class P2pRuntime { dataflow, megatron, deepspeed, torch };
// parallel.dp_sync: how often a step's DP collectives run over its micro-batches (cost/step_costs.h).
enum class DpSync { automatic, microbatch, no_sync, step };

// Where a state lives: device memory, or the host's (0 GPU bytes, named in the breakdown).
enum class StateLocation { none, device, host };

// DeepSeek's multi-head latent attention; replaces the GQA projections when enabled.
struct MlaSpec {
  bool enabled = false;
  std::int64_t q_lora_rank = 0;  // 0: queries projected directly from the hidden state
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;
};

struct MoeSpec {
  int experts = 0;  // routed experts; 0 = a dense model
  int top_k = 0;
  int shared_experts = 0;
  std::int64_t expert_ffn_hidden = 0;
  // Routed copies an expert rank holds, as a multiple of the mean tokens * top_k: buffers and
  // the routed activations are sized for capacity_factor * tokens * top_k.
  double capacity_factor = 1.0;
  // The expert outputs stay cached for the routing weights' gradient (dg = dy . e): Megatron's
  // unpermute keeps them (true). false: the weights are applied to the activation function's
  // output inside the expert (Megatron's weighted SwiGLU, used with the DeepEP dispatcher), so
  // dg = d(g a) . a needs only the (cached or recomputed) activation and one fp32 weight.
  bool keep_expert_output = true;
  // Node-limited routing (DeepSeek-V3 report 2.1.2, M = 4): a token's routed copies go to at most
  // max_nodes nodes, one network transfer per node, forwarded over NVLink inside it (report
  // 3.2.2); 0 = no limit (each remote copy crosses the network).
  int max_nodes = 0;
  // Width of each shared expert; 0: expert_ffn_hidden (Qwen2-MoE's and Llama-4's differ).
  std::int64_t shared_expert_ffn_hidden = 0;
  bool router_bias = false;  // a bias (or score-correction term) per expert in the router
  bool enabled() const { return experts > 0; }
  std::int64_t shared_width() const {
    return shared_expert_ffn_hidden > 0 ? shared_expert_ffn_hidden : expert_ffn_hidden;
  }
};

struct ModelSpec {
  int layers = 0;
  std::int64_t hidden = 0;
  std::int64_t ffn_hidden = 0;  // dense MLP width (dense models, and the first dense layers of MoE models)
  int heads = 0;
  int kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t vocab = 0;
  std::int64_t seq_len = 0;
  int micro_batch_size = 1;
  int dense_layers_first = 0;
  MlpKind mlp = MlpKind::swiglu;
  NormKind norm = NormKind::rmsnorm;
  bool dropout = false;
  bool flash_attention = true;
  bool causal = true;
  bool tied_embeddings = false;
  // Multi-token-prediction modules (DeepSeek-V3: 1), each one transformer layer (of the last
  // layer's kind) + a 2h x h projection + 3 norms, on the stage holding the output head, which
  // they share (as they share the embedding; a rank without the embedding holds a copy).
  int mtp_depth = 0;
  MoeSpec moe;
  MlaSpec mla;
  // Details Hugging Face configs carry. Parameters: biases on the Q/K/V projections, on the
  // attention output, on the MLP's (and experts') linear layers; norms per layer (Gemma-2: 4,
  // Cohere's parallel block: 1); q/k norms (per_head: 2 head_dim weights; full: (a+g) head_dim);
  // one sink logit per head (gpt-oss); learned position embeddings (rows; GPT-2: 1024).
  bool qkv_bias = false;
  bool out_bias = false;
  bool mlp_bias = false;
  int norms_per_layer = 2;
  enum class QkNorm { none, per_head, full } qk_norm = QkNorm::none;
  bool attention_sinks = false;
  std::int64_t learned_positions = 0;
  // FLOPs: a local attention window (0: none) on the layers local_layers marks (empty: every
  // layer). moe_layers marks the MoE layers (empty: those from dense_layers_first on).
  std::int64_t sliding_window = 0;
  std::vector<bool> local_layers;
  std::vector<bool> moe_layers;

  bool layer_is_moe(int layer) const {
    if (!moe.enabled()) return false;
    if (!moe_layers.empty()) return moe_layers[static_cast<std::size_t>(layer)];
    return layer >= dense_layers_first;
  }
  bool layer_is_local(int layer) const {
    return sliding_window > 0 && (local_layers.empty() || local_layers[static_cast<std::size_t>(layer)]);
  }
  int moe_layer_count() const {
    int n = 0;
    for (int l = 0; l < layers; ++l) n += layer_is_moe(l) ? 1 : 0;
    return n;
  }
  std::int64_t tokens_per_microbatch() const { return static_cast<std::int64_t>(micro_batch_size) * seq_len; }
};

struct PrecisionSpec {
  Dtype gemm = Dtype::bf16;       // GEMM inputs: bf16 or fp8
  Dtype params = Dtype::bf16;     // the weights the model computes with
  Dtype grads = Dtype::fp32;      // gradient accumulation buffer
  Dtype optimizer = Dtype::fp32;  // Adam's two moments
  // Activation caching (memory.h lists the tensors): the inputs of FP8 GEMMs kept for their
  // weight gradient (fp8 needs gemm: fp8), the attention output (input of the out-projection
  // and of the attention backward), and the activation-function inputs of MoE experts.
  CacheType gemm_input_cache = CacheType::bf16;
  // The GEMMs' output-grads a split backward keeps from I to its deferred W (fp8: the FP8
  // weight-grad GEMM's own input; the router's stays bf16).
  CacheType output_grad_cache = CacheType::bf16;
  CacheType attention_out_cache = CacheType::bf16;
  CacheType expert_act_cache = CacheType::bf16;
  StateLocation optimizer_location = StateLocation::device;  // host: optimizer states + master weights off the GPU
  // With optimizer_location host: the share of them on the host (Megatron's
  // --optimizer-offload-fraction; 1 by default), the rest on the GPU with its step.
  double optimizer_host_fraction = 1;
  double optimizer_on_host() const { return optimizer_location == StateLocation::host ? optimizer_host_fraction : 0.0; }
  StateLocation ema = StateLocation::none;                  // an fp32 EMA of the weights (4 bytes per parameter)
  // Optimizer state bytes per parameter: two moments, plus an fp32 master copy when the
  // weights are narrower than fp32 (Adam, fp32 moments, bf16 weights: 2*4 + 4 = 12).
  double optimizer_bytes_per_param() const;
};

struct EfficiencySpec {
  double gemm = 0.7;
  double attention = 0.5;
  double elementwise = 0.7;
  double comm = 0.8;
  // The share of the gradient accumulation's HBM traffic (the FP32 main grad read and written
  // by the fused weight-gradient GEMM, 8 bytes per weight per micro-batch) that the GEMM does not
  // hide: paid after its math at HBM x elementwise. 0: wholly hidden; 1: paid in full. Measured
  // 0.65 on an H100 (tools/experiments/measure_wgrad_accum.py; docs/FIDELITY.md "The backward's split").
  double accum_exposed = 0.65;
  // The fraction of the FP8 dense peak that FP8 GEMMs (fine-grained 1x128 / 128x128 scaling, as
  // DeepSeek-V3 trains) reach; 0: as `gemm`. The Hopper types take 0.52: `gemm` times the ratio
  // to BF16 measured on an H100 (tools/experiments/measure_fp8_gemm.py; src/cost/config.cc).
  double gemm_fp8 = 0;
  // The same for the FP8 weight-gradient GEMMs, dW = X^T dY, whose inner dimension is the tokens:
  // both inputs in 1x128 tiles along the tokens (DeepSeek-V3's report 3.3.2), so every K block
  // rescales the accumulator by a scale per row and per column. 0: as `gemm_fp8`. The Hopper types
  // take 0.40: `gemm` times the ratio to BF16 wgrad measured on an H100 (src/cost/config.cc).
  double gemm_fp8_wgrad = 0;
  double gemm_at(bool fp8) const { return fp8 && gemm_fp8 > 0 ? gemm_fp8 : gemm; }
  double wgrad_at(bool fp8) const { return fp8 && gemm_fp8_wgrad > 0 ? gemm_fp8_wgrad : gemm_at(fp8); }
};

struct HardwareSpec {
  std::string name;
  int gpus = 0;                    // 0 = not given
  double peak_bf16_tflops = 0;     // dense, no sparsity
  double peak_fp8_tflops = 0;
  double hbm_gbps = 0;             // GB/s, 1 GB = 1e9 bytes
  double hbm_gb = 0;
  int gpus_per_node = 8;
  int sms = 132;
  double nvlink_gbps = 0;          // per GPU, both directions together, as NVIDIA lists it
  double nvlink_latency_us = 1;
  double network_gbps = 0;         // per GPU NIC, one direction
  double network_latency_us = 5;
  EfficiencySpec efficiency;
  int comm_sms = 0;                // SMs a communication kernel takes while it runs (overlap model)
  // A power-limited clock (hardware.clock): compute runs 1 + duty_slope * max(0, d - duty_ref)
  // times longer where the ranks' mean compute duty cycle over the step period is d
  // (simulate_config).
  // 0 = off, the default for every type: measured on H200s only (FIDELITY-MEASURED.md, "ZB-H1
  // against 1F1B on four GPUs"), and the duty at which a type's efficiency figures hold is not.
  double clock_duty_slope = 0;
  double clock_duty_ref = 0.8;
  // The clock as a response to each rank's own compute/idle history (ClockResponse, cost/clock.h):
  // an action starting tau ms into a busy stretch (one that began after >= reset_idle_ms idle, or
  // at the step's start) takes 1 - warm e^(-tau/warm_ms) + slow e^(-((tau - slow_at_ms)/slow_ms)^2/2)
  // times its duration at the sustained clock. Off (warm = slow = 0) in every GPU type; `calibrate`
  // fits it from a traced pipeline step.
  double clock_reset_idle_ms = 20;
  double clock_warm = 0, clock_warm_ms = 50;
  double clock_slow = 0, clock_slow_at_ms = 900, clock_slow_ms = 150;

  double peak_tflops(Dtype gemm) const { return gemm == Dtype::fp8 ? peak_fp8_tflops : peak_bf16_tflops; }
  double nvlink_bytes_per_ns_one_way() const { return nvlink_gbps / 2.0; }  // GB/s == bytes/ns
};

// Which cost pieces beyond the per-op rooflines the model counts (`costs:` in the config). Each
// one can be switched off, so that docs/FIDELITY.md can measure what it changes. Defaults keep the
// model as it was before these pieces existed (TP collectives counted, nothing else).
struct CostSwitches {
  bool tp_comm = true;          // TP / sequence-parallel collectives per block (Megatron's counts, flops.cc)
  double tp_overlap = 0;        // fraction of them hidden under the GEMMs (0: all exposed)
  bool dp_comm = false;         // data-parallel gradient reduce(-scatter) and parameter all-gather per step
  double dp_overlap = 0;        // fraction of that hidden under the backward / forward
  // dp_overlap not written, with parallel.zero 3: FSDP's per-layer prefetch model instead
  // (cost/step_costs.h): all but the first all-gather and the last reduce-scatter hidden under the
  // rank's compute, as far as it lasts.
  bool fsdp_prefetch = false;
  bool optimizer_step = false;  // the Adam step (HBM-bound) at the end of each step
  bool cp_comm = true;          // context parallelism's K/V all-gather (forward; again backward) and dK/dV reduce-scatter (backward)
  double cp_overlap = 0;        // fraction of it hidden under the attention (0: exposed, as Llama 3's)
  // The loss's HBM traffic as Megatron-LM computes its cross-entropy (38 bytes per logit forward,
  // 14 backward, cost/flops.cc head_work) and its three TP all-reduces; false: ppsim's earlier
  // count (read the bf16 logits, write an fp32 softmax: 6 bytes forward, 12 backward, no all-reduce).
  bool megatron_loss = true;
  // Stage-to-stage hops inside a node on NVLink and between nodes on the network (cost/derive.h
  // set_p2p_links); false: every hop on the network once the pipeline spans nodes (the earlier model).
  bool p2p_per_node = true;
  // FP8 GEMMs' quantization kernels (precision.gemm: fp8; cost/derive.cc): forward, each input
  // quantized from BF16 into 1x128 tiles (kFp8QuantBytes per element); backward, each output grad
  // quantized into the 1x128 tiles of the input grad's GEMM and the 128x1 tiles of the weight
  // grad's (read 2 bytes, write 1 + 1), and each cached FP8 input read, transposed and written
  // again as 128x1 tiles (1 + 1) for the weight grad (DeepSeek-V3 report 3.5.2). false: none.
  bool fp8_quant = true;
  // SliceCosts::w_hold from the memory model (the W's share of a micro-batch's activations, the
  // Zero Bubble paper's M_W / M_B) for the schedule search's cap; false: 1 (a share held until its
  // W, as the search counted before session 12).
  bool w_hold = true;
  // The flash attention core's rate by shape (cost/flash_shape.h): efficiency.attention is the
  // figure at FlashAttention's published shape (causal, 16K tokens, 16 heads), other shapes run at it
  // times their measured waves and per-block cost; false: efficiency.attention at every shape.
  bool attention_shape = true;
  // A GEMM's rate by shape (cost/gemm_shape.h): efficiency.gemm (gemm_fp8, gemm_fp8_wgrad) is the
  // figure of a large GEMM; few rows, columns or a short reduction, and the experts' grouped GEMMs,
  // run at it times their measured factor; false: the figure at every shape.
  bool gemm_shape = true;
  bool any_step_piece() const { return dp_comm || optimizer_step; }
};

struct ParallelSpec {
  int pp = 1;
  int vpp = 1;
  bool has_vpp = false;
  int ep = 1;
  int tp = 1;
  // parallel.etp: expert tensor parallelism, how many ranks split each routed expert's width:
  // tp (0, the default: Megatron's ETP = TP) or 1 (whole experts, the expert-parallel group carved
  // out of dp x tp: Megatron's --expert-tensor-parallel-size 1, torchtitan's default).
  int etp = 0;
  int cp = 1;  // context parallel: each rank holds seq_len / cp of every sequence
  int dp = 1;
  int microbatches = 1;
  // Sequences per step as the input stated them (Megatron-LM's --global-batch-size, when it set
  // microbatches); 0: not stated. microbatches x micro_batch_size x dp must equal it.
  long long global_batch = 0;
  std::string schedule = "all";
  std::vector<int> layer_split;    // empty: uniform
  SourceLoc layer_split_loc;
  bool embedding_on_first = true;
  bool head_on_last = true;
  Recompute recompute = Recompute::none;
  int recompute_layers = -1;       // with full: the first N layers of each stage (Megatron's block method); -1 = all
  unsigned recompute_ops = 0;      // RecomputeOp bits, in every layer not fully recomputed
  int zero = 0;                    // ZeRO stage: 1 shards optimizer states over dp, 2 also grads, 3 also weights
  int zero_shard = 0;              // ranks of dp ZeRO shards over (HSDP's shard group; x cp); 0: all of dp
  // PyTorch FSDP2 (torchtitan), with zero 3: the shard is the fp32 parameter itself (no separate
  // params-dtype shard; mixed precision all-gathers it in precision.params), and the gathered
  // weights in flight are held: two layers' (the one computing, the one prefetched) at pp 1, the
  // rank's whole stage at pp > 1 (torchtitan does not reshard after forward under PP).
  bool fsdp = false;
  // parallel.dp_sync, under gradient accumulation (M micro-batches a step; cost/step_costs.h has the
  // runtimes' sources): microbatch (each micro-batch gathers the weights (ZeRO 3) for its forward and
  // again for its backward, and reduces its gradients), no_sync (the gathers per micro-batch, the
  // gradients reduced once: `no_sync()` on all but the last; unsharded gradients held), step (all
  // once a step). automatic (not written): microbatch with zero 3, except fsdp at pp > 1 (PyTorch's
  // pipelining keeps FSDP2's weights and syncs at the last backward): step; step below zero 3.
  DpSync dp_sync = DpSync::automatic;
  bool blocking_p2p = false;
  // Zero Bubble's optimizer post-validation (Qi et al. 2024, section 4): no all-reduce across the
  // pipeline before the optimizer step, so each rank steps when its own work ends and the next
  // step's forwards follow; the step period is the longest rank's own span, not the makespan.
  bool post_validation = false;
  // parallel.w_deferral: memory (the default) keeps ZB-H1 within 1F1B's memory where a deferred W
  // holds more than its forward kept (cost/w_deferral.h); full defers r W's on rank r regardless.
  bool w_deferral_full = false;
  // parallel.p2p_runtime: dataflow (each transfer starts when its producer ends; the default),
  // megatron (Megatron-LM's blocking batched p2p calls for 1f1b and interleaved-1f1b) or deepspeed
  // (DeepSpeed's pipeline engine: TrainSchedule's blocking sends and receives, one at a time, 1f1b).
  P2pRuntime p2p_runtime = P2pRuntime::dataflow;
  // parallel.cp_runtime: how context parallelism's backward moves K/V and their grads.
  // te (Transformer Engine's all-gather CP, Llama 3's scheme; the default): K, V gathered again
  // and dK, dV reduce-scattered in bf16. torch (PyTorch's context_parallel, torchtitan's path):
  // K, V gathered again, and the local dK, dV passed around the cp ranks cp times in fp32.
  bool cp_torch = false;
  // parallel.sequence_parallel (Korthikanti et al. 2022, arXiv 2205.05198): with TP, the
  // hidden-sized per-token ops (norms, dropout, residual adds) and the tensors they keep are split
  // over the TP ranks by sequence (the default). false: every TP rank runs them on all the tokens
  // and keeps them whole (Megatron-LM before 2022); the TP collectives move the same bytes.
  bool sequence_parallel = true;
  // parallel.p2p_sync_us, with megatron: the host's restart after each call's
  // torch.cuda.synchronize() (Megatron's batch_p2p_sync). The GPU has drained, so the rank's next
  // action starts this long after the call's last transfer lands. 0: not counted.
  double p2p_sync_us = 0;
  // parallel.p2p_eager_mb: with explicit communication (megatron, deepspeed), a send of at most
  // this many MB does not wait for its receiver (SimCosts::eager_bytes). 0: rendezvous.
  double p2p_eager_mb = 0;
  // parallel.p2p_sm_share, with torch: the share of the GPU the runtime's send and receive kernels
  // hold while they sit on it (posted, waiting for the peer or moving data); compute beside them
  // runs at 1 - share (simulate_config). 0: not counted.
  double p2p_sm_share = 0;

  int gpus() const { return pp * tp * cp * dp; }
  // Ranks holding the same dense weights, over which gradients are reduced and ZeRO shards:
  // the cp ranks hold the same weights too (Megatron-LM's data-parallel group with context
  // parallelism; torchtitan's fsdp mesh dimension, dp_shard x cp).
  int grad_dp() const { return dp * cp; }
  int expert_tp() const { return etp > 0 ? etp : tp; }
  // The ranks expert parallelism is carved out of, for `replicas` data-parallel ranks: the replicas
  // (experts split as the dense layers) or replicas x tp (whole experts, etp 1). ep must divide it.
  long long expert_pool(long long replicas) const { return replicas * tp / expert_tp(); }
  // Replicas of each routed expert's shard: the grad_dp x tp ranks of a stage hold ep x etp shards.
  int expert_dp() const { return static_cast<int>(std::max(1LL, expert_pool(grad_dp()) / std::max(1, ep))); }
  // The ranks ZeRO shards over: zero_shard x cp (torchtitan's dp_shard x cp), all of grad_dp by
  // default; the other grad_dp / zero_dp replicas of each shard all-reduce its gradients (HSDP).
  int zero_dp() const { return zero_shard > 0 ? zero_shard * cp : grad_dp(); }
  int expert_zero_dp() const { return static_cast<int>(std::max(1LL, expert_pool(zero_dp()) / std::max(1, ep))); }
};

// Explicit and measured op times are at most this many ms (17 minutes) each, so that sums
// over layers and micro-batches stay far inside the 64-bit ns range.
inline constexpr double kMaxOpMs = 1e6;
// Smallest accepted peak, bandwidth or size (TFLOP/s, GB/s, GB): keeps derived times finite.
inline constexpr double kMinFigure = 1e-3;

// One set of op times in ticks (ns).
struct OpTimes {
  Time f = 0, b = 0, w = 0, fb = 0;  // fb = 0: not given
};

// `times:` in the config: one rank's share, like `ppsim compare --times`, in ms.
struct ExplicitTimes {
  bool present = false;
  OpTimes share;
};

// A measured cost profile (cost/profile.h documents the schema).
struct CostProfile {
  bool present = false;
  std::string path;
  std::string device;
  bool per_layer = true;             // op_ms is per transformer layer, else one rank's share
  OpTimes op;                        // every layer (MoE layers of an MoE model)
  std::optional<OpTimes> dense_op;   // the first dense layers of an MoE model
  OpTimes embedding;                 // added to the first slice (per_layer only)
  OpTimes head;                      // added to the last slice (per_layer only)
  std::optional<double> link_gbps;   // measured stage-to-stage bandwidth, one direction
  std::optional<double> link_latency_us;
  // Version 2: one layer's sub-op times per pass (attention / MLP: F, input-grad, W) and per
  // communication direction (dispatch / combine: forward, backward); `layers` is unused here.
  std::optional<MoeSliceCosts> sub_ops;
  // Version 2: compute time beside communication / alone, per compute sub-op (0: not measured).
  double attn_comm_slowdown = 0, mlp_comm_slowdown = 0;
  // Version 2, informational: the SM share the communication kernels held (0: not known).
  double comm_sm_fraction = 0;
  // Version 2, `applies_to: moe_layers`: the sub-op times are those of the model's MoE layers
  // only; every other part (dense layers, embedding, head, MTP, recompute, links) stays derived
  // from the config, as without a profile.
  bool moe_layers_only = false;
  // `recompute: included` (with applies_to: moe_layers): the MoE layers' backward times already
  // hold what the measured run recomputed (a trace's kernels are what ran), so ppsim adds no
  // recompute of its own to those layers; `derived` (the default) adds the config's.
  bool recompute_included = false;
  // The profile replaces every derived op time (the default, applies_to: all).
  bool replaces_all() const { return present && !moe_layers_only; }
};

struct ModelConfigData {
  std::string file;         // where it was read from ("" for text)
  std::string name;
  std::string description;
  ModelSpec model;
  PrecisionSpec precision;
  HardwareSpec hardware;
  std::string gpu_type;     // cluster.gpu: the GPU type whose figures and efficiency were used ("" if none)
  ParallelSpec parallel;
  CostSwitches costs;
  ExplicitTimes times;
  CostProfile profile;
  YAML::Node plan;          // raw `plan:` map (or null), for the planner; not validated inside
  YAML::Node tree;          // the whole tree after --set, for what-if variants (YAML::Clone it)
  // How megatron_args' launch file was read beyond plain copies of its flags (a gated
  // --glu-activation, a padded vocabulary, ...): `ppsim model` lists them as "read as".
  std::vector<std::string> read_as;
};

// Parses and validates `text` (named `name` in errors, profile paths relative to `base_dir`),
// applying `sets` first. Every error is one InputError with file:line:col.
ModelConfigData parse_config(const std::string& text, const std::string& name, const std::string& base_dir,
                             const std::vector<std::string>& sets);
// Validates an already parsed tree (e.g. a what-if variant built from ModelConfigData::tree).
// `set_paths` are key paths that came from --set: errors under them point at "--set".
ModelConfigData validate_config_tree(const YAML::Node& root, const std::string& name, const std::string& base_dir,
                                     const std::vector<std::string>& set_paths);
// Applies one "key.path=value" to the tree (the value parsed as YAML); returns the key path.
// Unknown keys: InputError at SourceLoc{"--set"} with a suggestion.
std::string apply_set(YAML::Node& root, const std::string& assignment);

// The GPU types `cluster.gpu` names (a100-40gb, a100-80gb, h100, h800, h200), comma-separated.
std::string gpu_type_list();

// Every key path the schema knows, e.g. "model.moe.top_k" (sections included).
std::vector<std::string> config_key_paths();

}  // namespace ppsim
