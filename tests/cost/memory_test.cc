// Memory (src/cost/memory.cc) against the published formulas: Korthikanti et al. 2022 (Table 2)
// per layer, and Megatron-LM's theoretical memory (weights + optimizer + activations of the
// first pipeline stage, megatron/training/theoretical_memory_usage.py).
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "catch.h"
#include "cost/config.h"
#include "cost/cost_model.h"
#include "cost/memory.h"
#include "schedules/notation.h"
#include "schedules/registry.h"
#include "sim/engine.h"

using namespace ppsim;
using Catch::Matchers::WithinRel;

namespace {

// A GPT in Korthikanti's setting: GELU MLP of 4h, LayerNorm, dropout, softmax materialized
// (no flash attention), MHA with a*d = h. s = 2048, b = 2, h = 2048, a = 16, L = 24, V = 50304.
const char* kGpt = R"(
model: {layers: 24, hidden: 2048, ffn_hidden: 8192, heads: 16, vocab: 50304, seq_len: 2048, micro_batch_size: 2,
        mlp: gelu, norm: layernorm, dropout: true, flash_attention: false}
precision: {params: bf16, grads: fp32, optimizer: fp32}
hardware: {name: h100}
parallel: {pp: 4, microbatches: 8, schedule: 1f1b}
)";

ModelConfigData load(const std::vector<std::string>& sets = {}) { return parse_config(kGpt, "gpt.yaml", "", sets); }

}  // namespace

TEST_CASE("activations per layer: Korthikanti's s*b*h*(34 + 5*a*s/h)", "[cost]") {
  const double s = 2048, b = 2, h = 2048, a = 16;
  // 34 + 5 * 16 * 2048 / 2048 = 114 bytes per s*b*h
  CHECK_THAT(layer_activation_bytes(load(), 0), WithinRel(s * b * h * (34 + 5 * a * s / h), 1e-12));
  // Tensor + sequence parallelism divides all of it by t (Table 2, row "sequence parallel").
  CHECK_THAT(layer_activation_bytes(load({"parallel.tp=4"}), 0), WithinRel(s * b * h * (34 + 5 * a * s / h) / 4, 1e-12));
  // Selective recompute drops the 5as/h term; full recompute keeps the layer input, 2sbh.
  CHECK_THAT(layer_activation_bytes(load({"parallel.recompute=selective"}), 0), WithinRel(s * b * h * 34, 1e-12));
  CHECK_THAT(layer_activation_bytes(load({"parallel.recompute=full"}), 0), WithinRel(s * b * h * 2, 1e-12));
}

TEST_CASE("activations without sequence parallelism: Korthikanti's s*b*h*(10 + 24/t + 5*a*s/(h*t))", "[cost]") {
  const double s = 2048, b = 2, h = 2048, a = 16, t = 4;
  // Table 2, "tensor parallel (baseline)": the norms' inputs and outputs (4 + 4), the two dropout masks
  // (1 + 1) are whole on every TP rank; Q, K, V, the projection input, the GELU's input and output
  // (24) and the scores (5as/h) are split by t.
  const std::vector<std::string> no_sp{"parallel.tp=4", "parallel.sequence_parallel=false"};
  CHECK_THAT(layer_activation_bytes(load(no_sp), 0), WithinRel(s * b * h * (10 + 24 / t + 5 * a * s / (h * t)), 1e-12));
  // With it ("tensor + sequence parallel"): s*b*h*(34/t + 5as/(ht)).
  CHECK_THAT(layer_activation_bytes(load({"parallel.tp=4"}), 0),
             WithinRel(s * b * h * (34 / t + 5 * a * s / (h * t)), 1e-12));
  // Selective recompute without it: the 10 stay whole, the 24 split (Table 2: 10 + 24/t).
  std::vector<std::string> sel = no_sp;
  sel.push_back("parallel.recompute=selective");
  CHECK_THAT(layer_activation_bytes(load(sel), 0), WithinRel(s * b * h * (10 + 24 / t), 1e-12));
  // Full recompute keeps the layer's input whole on every rank: 2sbh, not 2sbh/t.
  std::vector<std::string> full = no_sp;
  full.push_back("parallel.recompute=full");
  CHECK_THAT(layer_activation_bytes(load(full), 0), WithinRel(s * b * h * 2, 1e-12));
  // At tp = 1 the key changes nothing.
  CHECK(layer_activation_bytes(load({"parallel.sequence_parallel=false"}), 0) == layer_activation_bytes(load(), 0));
}

TEST_CASE("first-stage memory matches Megatron's theoretical memory formula", "[cost]") {
  const ModelConfigData c = load({"parallel.recompute=selective"});
  const double L = 24, h = 2048, f = 8192, V = 50304, s = 2048, b = 2, p = 4;
  // Megatron, weights and optimizer (no distributed optimizer: 18 bytes per parameter =
  // 2 bf16 weight + 4 fp32 grad + 4 fp32 master + 8 Adam moments):
  //   transformer params = 2 L h^2 (2 (q/h = 1, g = a) + f/h (gelu: x1) + 2/h + 1/(L h))
  //                      = 2 L h^2 (2 + 4) + 4 L h + 2 h     (MHA: QKV + out = 4h^2; 2 LayerNorms)
  //   most loaded shard  = transformer params / p + h V      (the first stage's embedding)
  const double transformer = 2 * L * h * h * (2 + f / h + 2 / h + 1 / (L * h));
  const double megatron_weights = 18 * (transformer / p + h * V);
  // Megatron, activations (selective recompute, first stage holds p micro-batches of L/p layers):
  //   s b h (18 + 4 f/h) L + 8 s b p (input ids) + s b h p (embedding dropout mask)
  const double megatron_acts = s * b * h * (18 + 4 * f / h) * L + 8 * s * b * p + s * b * h * p;
  // We put the final LayerNorm (2h parameters) on the last stage; Megatron spreads it over all
  // p stages, so our first stage has 2h/p fewer parameters.
  const double expected = megatron_weights + megatron_acts - 18 * 2 * h / p;

  const ModelConfig cfg{std::make_shared<const ModelConfigData>(c)};
  const Schedule sch = make_schedule("1f1b", ScheduleParams{4, 8, 0, 0});
  const SimResult r = simulate(sch, derive_costs(cfg, sch));
  REQUIRE(r.ranks[0].peak_activations == 4);  // 1F1B: min(P - r, M) = 4 on rank 0
  const PhysicalResult phys = physical_result(cfg, sch, r);
  REQUIRE(phys.peak_memory_bytes.size() == 4);
  // Megatron's formula counts weights, gradients, optimizer states and activations; ppsim adds
  // the backward's transient, which Megatron leaves out: selective recompute rebuilds one
  // layer's attention core (softmax 2as, mask as, dropped output 2as per token = 5as*sb bytes)
  // while that layer's backward runs. The peak is then a backward on rank 0 with 4 chunks alive.
  const double a = 16;
  const MemoryBreakdown& b0 = phys.memory[0];
  CHECK_THAT(b0.workspace, WithinRel(5 * a * s * s * b, 1e-12));
  CHECK(b0.comm_buffers == 0);  // a dense model: no all-to-all buffers
  CHECK(b0.chunks == 4);
  CHECK_THAT(b0.weights + b0.gradients + b0.optimizer + b0.activations, WithinRel(expected, 1e-12));
  CHECK_THAT(phys.peak_memory_bytes[0], WithinRel(expected + 5 * a * s * s * b, 1e-12));

  // The parts: 18 bytes/param = params 2 + grads 4 + optimizer 12.
  const std::vector<RankMemory> parts = rank_memory(c, sch.stage_rank, sch.slice, slice_layouts(c, 4), {4, 3, 2, 1});
  const double params0 = transformer / p + h * V - 2 * h / p;
  CHECK_THAT(parts[0].weights, WithinRel(2 * params0, 1e-12));
  CHECK_THAT(parts[0].grads, WithinRel(4 * params0, 1e-12));
  CHECK_THAT(parts[0].optimizer, WithinRel(12 * params0, 1e-12));
  CHECK_THAT(parts[0].activations, WithinRel(megatron_acts, 1e-12));
}

// ---- the tensor lists, by hand ------------------------------------------------------------

namespace {

// Llama-3-8B's layer: GQA (a = 32, g = 8, d = 128), SwiGLU f = 14336, RMSNorm, flash attention,
// no dropout; s = 4096, b = 1.
const char* kLlama = R"(
model: {layers: 32, hidden: 4096, ffn_hidden: 14336, heads: 32, kv_heads: 8, vocab: 128256, seq_len: 4096}
precision: {gemm: fp8}
hardware: {name: h100}
parallel: {pp: 4, microbatches: 8, schedule: 1f1b}
)";

double llama_layer(const std::vector<std::string>& sets) { return layer_activation_bytes(parse_config(kLlama, "llama.yaml", "", sets), 0); }

}  // namespace

TEST_CASE("a Llama layer's activations: every recompute and cache setting from the tensor list", "[cost]") {
  const double T = 4096, h = 4096, a = 32, gd = 8 * 128, f = 14336;
  const double fp8 = 1 + 4.0 / 128, e5m6 = 1.5 + 4.0 / 128;  // 1x128 tiles, one fp32 scale each
  // Per token, bf16, nothing recomputed:
  //   attn: norm input 2h, QKV input 2h, Q 2ad = 2h, K 2gd, V 2gd, output 2ad = 2h, LSE 4a (fp32)
  //   mlp:  norm input 2h, fc1 input 2h, gate 2f, up 2f, SwiGLU product 2f
  const double none = 2 * h + 2 * h + 2 * h + 4 * gd + 2 * h + 4 * a + 2 * h + 2 * h + 6 * f;  // = 139392
  CHECK(none == 139392);
  CHECK_THAT(llama_layer({}), WithinRel(T * none, 1e-12));
  // Flash attention keeps no s x s tensor: selective recompute drops nothing.
  CHECK_THAT(llama_layer({"parallel.recompute=selective"}), WithinRel(T * none, 1e-12));
  // Norm recompute drops the two norm outputs (QKV input, fc1 input): -4h.
  CHECK_THAT(llama_layer({"parallel.recompute_ops=[norm]"}), WithinRel(T * (none - 4 * h), 1e-12));
  // Activation-function recompute drops the SwiGLU product (rebuilt from gate and up): -2f.
  CHECK_THAT(llama_layer({"parallel.recompute_ops=[act_fn]"}), WithinRel(T * (none - 2 * f), 1e-12));
  CHECK_THAT(llama_layer({"parallel.recompute_ops=[norm, act_fn]"}), WithinRel(T * (none - 4 * h - 2 * f), 1e-12));
  // MLA up-projections: a GQA layer has none, nothing changes.
  CHECK_THAT(llama_layer({"parallel.recompute_ops=mla_up_proj"}), WithinRel(T * none, 1e-12));
  // FP8 caching of the FP8 GEMMs' inputs: QKV input h, fc1 input h, product f at 1 + 1/32 bytes.
  const double gemm_fp8 = none - (2 - fp8) * (h + h + f);
  CHECK_THAT(llama_layer({"precision.gemm_input_cache=fp8"}), WithinRel(T * gemm_fp8, 1e-12));
  // ... with norm and act_fn recompute those three are gone anyway: FP8 changes nothing more.
  CHECK_THAT(llama_layer({"precision.gemm_input_cache=fp8", "parallel.recompute_ops=[norm,act_fn]"}),
             WithinRel(T * (none - 4 * h - 2 * f), 1e-12));
  // The attention output (ad = h elements) in E5M6; the experts' cache does not touch a dense MLP.
  CHECK_THAT(llama_layer({"precision.attention_out_cache=e5m6"}), WithinRel(T * (none - (2 - e5m6) * h), 1e-12));
  CHECK_THAT(llama_layer({"precision.expert_act_cache=fp8"}), WithinRel(T * none, 1e-12));
  // Full recompute keeps the input, 2h; tp = 2 (sequence parallel) halves everything.
  CHECK_THAT(llama_layer({"parallel.recompute=full"}), WithinRel(T * 2 * h, 1e-12));
  CHECK_THAT(llama_layer({"parallel.tp=2"}), WithinRel(T * none / 2, 1e-12));
}

TEST_CASE("a GPT layer's activations under the op-class and cache settings", "[cost]") {
  // Korthikanti's GPT (kGpt): 34 sbh + 5as^2 b. Per token, in units of h: attention 2 (norm
  // input) + 2 (QKV input) + 6 (Q, K, V) + 2 (output) + 1 (mask) = 13, MLP 2 + 2 (fc1 input) +
  // 8 (GELU input 4h) + 8 (GELU output) + 1 (mask) = 21.
  const double s = 2048, b = 2, h = 2048, a = 16, core = 5 * a * s / h;
  const double fp8 = 1 + 4.0 / 128, e5m6 = 1.5 + 4.0 / 128;
  CHECK_THAT(layer_activation_bytes(load({"parallel.recompute_ops=[norm]"}), 0), WithinRel(s * b * h * (30 + core), 1e-12));
  // GELU recompute drops its output (fc2's input), 8h; the GELU input stays.
  CHECK_THAT(layer_activation_bytes(load({"parallel.recompute_ops=[act_fn]"}), 0), WithinRel(s * b * h * (26 + core), 1e-12));
  CHECK_THAT(layer_activation_bytes(load({"parallel.recompute_ops=[attn_core, norm, act_fn]"}), 0),
             WithinRel(s * b * h * 22, 1e-12));
  // FP8 GEMM inputs: QKV input h, fc1 input h, GELU output 4h elements: 6h at 1 + 1/32 bytes
  // instead of 12h.
  CHECK_THAT(layer_activation_bytes(load({"precision.gemm=fp8", "precision.gemm_input_cache=fp8"}), 0),
             WithinRel(s * b * h * (34 - 6 * (2 - fp8) + core), 1e-12));
  CHECK_THAT(layer_activation_bytes(load({"precision.attention_out_cache=e5m6"}), 0),
             WithinRel(s * b * h * (34 - (2 - e5m6) + core), 1e-12));
  // Megatron's block method: recompute_layers = 2 of each stage's 6 layers keep only 2sbh.
  const ModelConfigData blk = load({"parallel.recompute=full", "parallel.recompute_layers=2", "parallel.schedule=gpipe"});
  const SliceLayout mid{6, 6, false, false};
  const double full_layer = 2 * s * b * h;
  ModelConfigData none_cfg = load();
  CHECK_THAT(slice_activation_bytes(blk, mid), WithinRel(2 * full_layer + 4 * layer_activation_bytes(none_cfg, 6), 1e-12));
  // The workspace while its backward runs: a fully recomputed layer's whole stored set.
  CHECK_THAT(slice_recompute_workspace(blk, mid), WithinRel(layer_activation_bytes(none_cfg, 6), 1e-12));
}

TEST_CASE("an MoE layer with MLA: the DeepSeek-V3 tensor list", "[cost]") {
  // DeepSeek-V3's MoE layer (h = 7168, a = 128, MLA ranks 1536 / 512, dn = 128, dr = 64,
  // dv = 128, E = 256, k = 8, fe = 2048, one shared expert) with its published recipe.
  const char* kDsv3 = R"(
model: {layers: 4, dense_layers_first: 0, hidden: 7168, heads: 128, vocab: 129280, seq_len: 4096,
        mla: {q_lora_rank: 1536, kv_lora_rank: 512, qk_nope_head_dim: 128, qk_rope_head_dim: 64, v_head_dim: 128},
        moe: {experts: 256, top_k: 8, shared_experts: 1, expert_ffn_hidden: 2048, keep_expert_output: false}}
precision: {gemm: fp8, gemm_input_cache: fp8, attention_out_cache: e5m6, expert_act_cache: fp8}
hardware: {name: h800}
parallel: {pp: 2, microbatches: 4, recompute_ops: [norm, mla_up_proj, act_fn]}
)";
  const ModelConfigData c = parse_config(kDsv3, "dsv3.yaml", "", {});
  const double T = 4096, h = 7168, fp8 = 1 + 4.0 / 128, e5m6 = 1.5 + 4.0 / 128;
  // attention: norm input 2h, q latent 2*1536, kv latent 2*512, rope key 2*64, output
  //   128*128 elements in E5M6, LSE 4*128; dropped: the norm outputs and Q, K, V.
  const double attn = 2 * h + 2 * 1536 + 2 * 512 + 2 * 64 + 128 * 128 * e5m6 + 4 * 128;
  // MoE: norm input 2h, router probabilities 4*256; per routed copy (8): dispatched input h in
  //   FP8, gate and up 2*2048 in FP8, the routing weight (fp32); shared expert: gate and up in
  //   FP8. Dropped: the norm output, every SwiGLU product.
  const double moe = 2 * h + 4 * 256 + 8 * (h * fp8 + 2 * 2048 * fp8 + 4) + 2 * 2048 * fp8;
  CHECK_THAT(layer_activation_bytes(c, 0), WithinRel(T * (attn + moe), 1e-12));
  // Keeping the expert outputs (Megatron's unpermute) adds 8 * 2h and drops the 8 weights.
  const ModelConfigData kept = parse_config(kDsv3, "dsv3.yaml", "", {"model.moe.keep_expert_output=true"});
  CHECK_THAT(layer_activation_bytes(kept, 0), WithinRel(T * (attn + moe + 8 * (2 * h - 4)), 1e-12));
}

TEST_CASE("the per-rank peak: chunks of each slice alive, dated, with host-side states named", "[cost]") {
  // DualPipe, P = 4: rank 0 holds slice 0 (the embedding) and slice 3 (the head) of the GPT.
  const ModelConfigData c = load({"parallel.dp=8", "parallel.zero=1", "precision.ema=host", "precision.optimizer_location=host"});
  const ModelConfig cfg{std::make_shared<const ModelConfigData>(c)};
  const Schedule sch = make_schedule("dualpipe", ScheduleParams{4, 8, 0, 0});
  SimOptions opt;
  opt.record_timeline = true;
  const SimResult r = simulate(sch, derive_costs(cfg, sch), opt);
  const std::vector<RankPeak> pk = predict_rank_memory(c, sch, &r);
  const std::vector<SliceLayout> sl = slice_layouts(c, 4);
  const double c0 = slice_activation_bytes(c, sl[0]), c3 = slice_activation_bytes(c, sl[3]);
  REQUIRE(c0 != c3);
  for (int rank = 0; rank < 4; ++rank) {
    const RankPeak& p = pk[static_cast<std::size_t>(rank)];
    // No recompute, no MoE: the peak is the engine's peak count of chunks, and its bytes are
    // n chunks of one of the rank's slices plus the rest of the other.
    CHECK(p.chunks == r.ranks[static_cast<std::size_t>(rank)].peak_activations);
    CHECK(p.parts.workspace == 0);
    const double ca = slice_activation_bytes(c, sl[static_cast<std::size_t>(rank)]);
    const double cb = slice_activation_bytes(c, sl[static_cast<std::size_t>(3 - rank)]);
    bool matches = false;
    for (int n = 0; n <= p.chunks; ++n) matches |= std::abs(p.parts.activations - (n * ca + (p.chunks - n) * cb)) < 1;
    CHECK(matches);
    CHECK(p.time >= 0);
    // Optimizer states and EMA on the host: 0 GPU bytes, the host figures 12 and 4 bytes per
    // parameter sharded over dp = 8 (ZeRO-1), as the device optimizer figure would be.
    CHECK(p.parts.optimizer == 0);
    CHECK(p.parts.ema == 0);
    CHECK_THAT(p.parts.host_ema * 3, WithinRel(p.parts.host_optimizer, 1e-12));
    CHECK_THAT(p.parts.host_optimizer, WithinRel(p.parts.weights / 2 * 12 / 8, 1e-12));
  }
  // A trace of memory over time reaches the same peak.
  const auto curve = memory_curve(c, sch, r.timeline);
  double top = 0;
  for (const auto& smp : curve[0]) top = std::max(top, smp.bytes);
  CHECK_THAT(top, WithinRel(pk[0].parts.total(), 1e-12));
}

TEST_CASE("precision.optimizer_host_fraction: a share of the optimizer states on the host", "[cost]") {
  // Megatron's --optimizer-offload-fraction 0.25: a quarter of the 12 bytes per parameter (two fp32
  // moments and the fp32 master weights, bf16 weights) on the host, three quarters on the GPU; the
  // GPU's optimizer step reads and writes three quarters of its bytes. Sharded over dp = 8 (ZeRO-1).
  const ModelConfigData all = load({"parallel.dp=8", "parallel.zero=1", "precision.optimizer_location=host"});
  const ModelConfigData part = load({"parallel.dp=8", "parallel.zero=1", "precision.optimizer_location=host",
                                     "precision.optimizer_host_fraction=0.25"});
  const Schedule sch = make_schedule("1f1b", ScheduleParams{4, 8, 0, 0});
  const std::vector<RankPeak> a = predict_rank_memory(all, sch, nullptr);
  const std::vector<RankPeak> q = predict_rank_memory(part, sch, nullptr);
  for (std::size_t r = 0; r < a.size(); ++r) {
    const double states = a[r].parts.host_optimizer;  // all of them, on the host
    CHECK_THAT(states, WithinRel(a[r].parts.weights / 2 * 12 / 8, 1e-12));
    CHECK_THAT(q[r].parts.host_optimizer, WithinRel(0.25 * states, 1e-12));
    CHECK_THAT(q[r].parts.optimizer, WithinRel(0.75 * states, 1e-12));
  }
  CHECK_THROWS_WITH(load({"precision.optimizer_host_fraction=0.5"}), PPSIM_CONTAINS("optimizer_location: host"));
  CHECK_THROWS_AS(load({"precision.optimizer_location=host", "precision.optimizer_host_fraction=1.5"}), InputError);
}

TEST_CASE("MoE all-to-all buffers and the MTP module on the head's rank", "[cost]") {
  const char* kMoe = R"(
model: {layers: 4, hidden: 1024, heads: 8, vocab: 32000, seq_len: 1024, mtp_depth: 1,
        moe: {experts: 64, top_k: 8, expert_ffn_hidden: 512, capacity_factor: 1.25}}
hardware: {name: h800}
parallel: {pp: 2, ep: 16, dp: 16, microbatches: 4}
)";
  const ModelConfigData c = parse_config(kMoe, "moe.yaml", "", {});
  // One set: dispatch and combine receive buffers, 1.25 * 8 copies of 1024 tokens, bf16.
  const double set = 2 * 1.25 * 8 * 1024 * 1024 * 2;
  const Schedule f1 = make_schedule("1f1b", ScheduleParams{2, 4, 0, 0});
  const auto one = predict_rank_memory(c, f1);
  CHECK_THAT(one[0].parts.comm_buffers, WithinRel(set, 1e-12));
  // DualPipe runs F&B pairs: a forward and a backward all-to-all in flight, two sets.
  const Schedule dp = make_schedule("dualpipe", ScheduleParams{2, 4, 0, 0});
  CHECK_THAT(predict_rank_memory(c, dp)[0].parts.comm_buffers, WithinRel(2 * set, 1e-12));
  // A rank that holds only dense layers runs no all-to-all: no buffers.
  const ModelConfigData dense_first = parse_config(kMoe, "moe.yaml", "", {"model.dense_layers_first=2", "model.ffn_hidden=2048"});
  const auto df = predict_rank_memory(dense_first, f1);
  CHECK(df[0].parts.comm_buffers == 0);
  CHECK_THAT(df[1].parts.comm_buffers, WithinRel(set, 1e-12));
  // 1F1B's last rank holds the MTP module (a layer like the last + 2h*h + 3 norms) and, having
  // no embedding, a copy of it; ZeRO 0, bf16 weights: 2 bytes per parameter.
  const double h = 1024;
  const ParamCount layer = layer_params(c.model, 3);
  const double rank1 = 2 * layer.dense + head_params(c.model) + (layer.dense + 2 * h * h + 3 * h) + embedding_params(c.model);
  const double rank1_expert = 3 * layer.expert / 16;
  CHECK_THAT(one[1].parts.weights, WithinRel(2 * (rank1 + rank1_expert), 1e-12));
}

TEST_CASE("ZeRO-1 shards the optimizer states over dp, DualPipe holds two slices per rank", "[cost]") {
  const ModelConfigData c = load({"parallel.dp=8", "parallel.zero=1"});
  const Schedule sch = make_schedule("1f1b", ScheduleParams{4, 8, 0, 0});
  const auto z0 = rank_memory(load({"parallel.dp=8"}), sch.stage_rank, sch.slice, slice_layouts(c, 4), {1, 1, 1, 1});
  const auto z1 = rank_memory(c, sch.stage_rank, sch.slice, slice_layouts(c, 4), {1, 1, 1, 1});
  CHECK_THAT(z1[1].optimizer, WithinRel(z0[1].optimizer / 8, 1e-12));
  CHECK(z1[1].weights == z0[1].weights);

  // DualPipe: rank r holds slice r (forward pipe) and slice P-1-r (reverse pipe): its weights
  // are those of a 1F1B rank r plus a 1F1B rank P-1-r.
  const Schedule dp = make_schedule("dualpipe", ScheduleParams{4, 8, 0, 0});
  const auto two = rank_memory(c, dp.stage_rank, dp.slice, slice_layouts(c, 4), {0, 0, 0, 0});
  CHECK_THAT(two[0].weights, WithinRel(z1[0].weights + z1[3].weights, 1e-12));
  CHECK_THAT(two[1].weights, WithinRel(z1[1].weights + z1[2].weights, 1e-12));
}

TEST_CASE("ZeRO stages 0-3 over dp, with EP carved out of DP for the routed experts", "[cost]") {
  const char* kMoe = R"(
model: {layers: 4, hidden: 1024, heads: 8, vocab: 32000, seq_len: 1024, moe: {experts: 64, top_k: 8, expert_ffn_hidden: 512}}
hardware: {name: h800}
parallel: {pp: 2, ep: 4, dp: 16, microbatches: 4}
)";
  const Schedule sch = make_schedule("1f1b", ScheduleParams{2, 4, 0, 0});
  auto rank0 = [&](int zero) {
    const ModelConfigData c = parse_config(kMoe, "moe.yaml", "", {fmt::format("parallel.zero={}", zero)});
    return predict_rank_memory(c, sch)[0].parts;
  };
  const ModelConfigData c = parse_config(kMoe, "moe.yaml", "", {});
  // Rank 0: layers 0 and 1 and the embedding. Dense parameters D are replicated over dp = 16;
  // the routed experts are split over ep = 4 (E/4 on the rank) and replicated over dp/ep = 4.
  const double D = 2 * layer_params(c.model, 0).dense + embedding_params(c.model);
  const double E = 2 * layer_params(c.model, 0).expert / 4;
  // 2 bytes bf16 weights, 4 fp32 gradients, 12 optimizer (fp32 moments + master).
  const RankMemory z0 = rank0(0), z1 = rank0(1), z2 = rank0(2), z3 = rank0(3);
  CHECK_THAT(z0.weights, WithinRel(2 * (D + E), 1e-12));
  CHECK_THAT(z0.grads, WithinRel(4 * (D + E), 1e-12));
  CHECK_THAT(z0.optimizer, WithinRel(12 * (D + E), 1e-12));
  CHECK_THAT(z1.optimizer, WithinRel(12 * (D / 16 + E / 4), 1e-12));
  CHECK(z1.grads == z0.grads);
  CHECK_THAT(z2.grads, WithinRel(4 * (D / 16 + E / 4), 1e-12));
  CHECK(z2.weights == z0.weights);
  CHECK_THAT(z3.weights, WithinRel(2 * (D / 16 + E / 4), 1e-12));
}

TEST_CASE("between I and W a layer holds what W reads: Zero Bubble's M_W = 32 sbh for a GPT layer", "[cost]") {
  const double s = 2048, b = 2, h = 2048;
  // GEMM inputs (bf16): QKV input h, projection input a*d = h, fc1 input h, GELU output 4h: 7h
  // elements; output-grads: QKV 3h, projection h, fc1 4h, fc2 h: 9h elements; 2 bytes each.
  CHECK_THAT(layer_wgrad_per_token(load(), 0), WithinRel(2 * (7 + 9) * h, 1e-12));
  // Recomputed inputs are rebuilt by I and kept for W: the same state under any recompute.
  CHECK_THAT(layer_wgrad_per_token(load({"parallel.recompute=full"}), 0), WithinRel(32 * h, 1e-12));

  // Two ranks, one slice each (12 layers; rank 1 with the head), two micro-batches, the
  // backward split: every rank runs F0 F1 I0 I1 W0 W1. Rank 1 holds, action by action, with A
  // its slice's forward bytes and S its state between I and W (both include the head's A_head):
  //   F0: A   F1: 2A   I0: 2A + max(0, S - A), then A + S   I1: A + S + max(0, S - A), then 2S
  //   W0: 2S, then S   W1: S, then 0      -> peak max(2A, 2S)
  const std::string csv = "0F0,0F1,0I0,0I1,0W0,0W1\n1F0,1F1,1I0,1I1,1W0,1W1\n";
  const Schedule sch = import_csv(csv, "split.csv", 2, 2);
  for (const std::string rc : {"none", "full"}) {
    INFO("recompute " << rc);
    const ModelConfigData c = load({"parallel.pp=2", "parallel.microbatches=2", "parallel.recompute=" + rc});
    const SliceLayout last = slice_layouts(c, 2)[1];
    const double head = head_activation_bytes(c);
    const double A = slice_activation_bytes(c, last);
    const double S = 12 * 32 * s * b * h + head;
    CHECK_THAT(slice_wgrad_bytes(c, last), WithinRel(S, 1e-12));
    // Without recompute S < A (32 against 114 sbh per layer): the peak is two forward states,
    // as with a fused backward. Full recompute keeps 2 sbh per layer before I: two W states.
    CHECK((rc == "none") == (S < A));
    CHECK_THAT(predict_rank_memory(c, sch)[1].parts.activations, WithinRel(2 * std::max(A, S), 1e-12));
  }
}
