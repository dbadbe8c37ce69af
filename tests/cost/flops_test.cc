// FLOP counts (src/cost/flops.cc) against values derived by hand below, and the 6*N*D rule.
#include "cost/flops.h"

#include <algorithm>
#include <string>

#include "catch.h"
#include "cost/config.h"
#include "cost/cost_model.h"
#include "cost/derive.h"
#include "cost/flash_shape.h"
#include "cost/memory.h"
#include "cost/step_costs.h"
#include "schedules/registry.h"
#include "sim/costs.h"

using namespace ppsim;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

namespace {

// b = 2, s = 32 -> T = 64 tokens; h = 64, a = 4 heads, g = 2 kv heads, d = 16, f = 256, V = 1000.
const char* kDense = R"(
model: {layers: 2, hidden: 64, ffn_hidden: 256, heads: 4, kv_heads: 2, head_dim: 16, vocab: 1000,
        seq_len: 32, micro_batch_size: 2}
hardware: {name: h100}
parallel: {pp: 2, microbatches: 4}
)";

ModelConfigData load(const std::string& text, const std::vector<std::string>& sets = {}) {
  return parse_config(text, "t.yaml", "", sets);
}

}  // namespace

TEST_CASE("dense GQA layer: FLOPs of each GEMM and the causal attention core", "[cost]") {
  const ModelConfigData c = load(kDense);
  const LayerWork w = layer_work(c, 0, Shard{1, 1});
  // qkv: 2 T h (a+2g) d = 2*64*64*(4+2*2)*16 = 1,048,576
  // out: 2 T (a d) h    = 2*64*64*64         =   524,288
  REQUIRE(w.attention.gemms.size() == 2);
  CHECK(w.attention.gemms[0].flops() == 1'048'576.0);
  CHECK(w.attention.gemms[1].flops() == 524'288.0);
  // core, causal (half of the s^2 terms): 1/2 * 2 b a s^2 (d + d) = 0.5*2*2*4*32^2*32 = 262,144
  CHECK(w.attention.core_flops == 262'144.0);
  // SwiGLU: 3 GEMMs of 2 T h f = 2*64*64*256 = 2,097,152 each -> 6,291,456
  CHECK(w.mlp.gemm_flops() == 6'291'456.0);
  // forward = 1,048,576 + 524,288 + 262,144 + 6,291,456 = 8,126,464
  CHECK(w.forward_flops() == 8'126'464.0);
  // full backward = 2 x GEMMs + 2.5 x core = 2*7,864,320 + 655,360 = 16,384,000; W = GEMMs
  CHECK(w.backward_flops() == 16'384'000.0);
  CHECK(w.attention.weight_grad_flops() + w.mlp.weight_grad_flops() == 7'864'320.0);
}

TEST_CASE("non-causal attention counts the whole s^2 core", "[cost]") {
  const ModelConfigData c = load(kDense, {"model.causal=false"});
  // 2 b a s^2 (d + d) = 2*2*4*1024*32 = 524,288
  CHECK(layer_work(c, 0, Shard{1, 1}).attention.core_flops == 524'288.0);
}

TEST_CASE("attention without flash: the core's batched GEMMs and the passes over the scores", "[cost]") {
  // b = 2, a = 4 heads, s = 32: 2 * 4 * 32^2 = 8192 scores. Q, K, V, O: 2 bytes x T (a + g + g + a) d
  // = 2 * 64 * (4 + 2 + 2 + 4) * 16 = 24,576, and the fp32 log-sum-exp 4 T a = 1024: io = 25,600.
  const double S = 8192, io = 25'600;
  const LayerWork flash = layer_work(load(kDense), 0, Shard{1, 1});
  CHECK(flash.attention.core_bytes == io);
  CHECK(flash.attention.core_bwd_bytes < 0);  // twice the forward's
  CHECK(flash.attention.core_gemms.empty());
  // Megatron-LM's CoreAttention: per head of the rank (b a = 8 instances), QK^T [32 x 16] x [16 x 32] and
  // PV [32 x 32] x [32 x 16], the whole s x s matrix: 2 * 32 * 32 * 16 * 8 = 262,144 FLOPs each (twice
  // the causal count of core_flops, which stays the model's FLOPs). Between them the softmax reads the
  // scores and writes P (4 bytes per score); its backward reads P and dP and writes dS (6).
  const LayerWork plain = layer_work(load(kDense, {"model.flash_attention=false"}), 0, Shard{1, 1});
  REQUIRE(plain.attention.core_gemms.size() == 2);
  const Gemm& qk = plain.attention.core_gemms[0];
  const Gemm& pv = plain.attention.core_gemms[1];
  CHECK((qk.m == 32 && qk.n == 32 && qk.k == 16 && qk.count == 8));
  CHECK((pv.m == 32 && pv.n == 16 && pv.k == 32 && pv.count == 8));
  CHECK(qk.flops() + pv.flops() == 2 * plain.attention.core_flops);
  CHECK(plain.attention.core_bytes == 4 * S);
  CHECK(plain.attention.core_bwd_bytes == 6 * S);
  // Dropout on the probabilities: read 2, write 2 and a 1-byte mask (5); its backward the same (5).
  const LayerWork drop =
      layer_work(load(kDense, {"model.flash_attention=false", "model.dropout=true"}), 0, Shard{1, 1});
  CHECK(drop.attention.core_bytes == 9 * S);
  CHECK(drop.attention.core_bwd_bytes == 11 * S);
  // With tp = 2 each rank has a/t = 2 heads: half the instances.
  const LayerWork tp2 = layer_work(load(kDense, {"model.flash_attention=false"}), 0, Shard{2, 1});
  CHECK(tp2.attention.core_gemms[0].count == 4);
}

TEST_CASE("attention without flash: its time is the GEMMs' rooflines plus the passes", "[cost]") {
  // Only the core differs between flash and non-flash, so the attention block's time differs by
  // (non-flash core) - (flash core), each derived here from the hardware's figures (h100 preset).
  const ModelConfigData fl = load(kDense, {"parallel.pp=1"});
  const ModelConfigData pl = load(kDense, {"parallel.pp=1", "model.flash_attention=false"});
  const HardwareSpec& hw = fl.hardware;
  const EfficiencySpec& e = hw.efficiency;
  // A batched GEMM [m x k] x [k x n], 8 instances, 16-bit in and out, at the BF16 GEMM figures.
  auto bmm = [&](double m, double n, double k) {
    const double flops = 2 * m * n * k * 8, bytes = (m * k + k * n + m * n) * 2 * 8;
    return std::max(flops / (hw.peak_bf16_tflops * 1e3 * e.gemm), bytes / (hw.hbm_gbps * e.gemm));
  };
  auto elem = [&](double bytes) { return bytes / (hw.hbm_gbps * e.elementwise); };
  // Flash: one roofline at efficiency.attention times the shape's rate (b 2 x a 4 heads of 32 tokens,
  // cost/flash_shape.h) on the causal FLOPs (262,144; backward 2.5x) and io.
  const double eff = e.attention * flash_shape_factor({8, 32, 1, true, 0}, hw.sms);
  auto flash = [&](double flops, double bytes) {
    return std::max(flops / (hw.peak_bf16_tflops * 1e3 * eff), bytes / (hw.hbm_gbps * eff));
  };
  const double S = 8192, io = 25'600;
  // Forward: QK^T (32, 32, 16) and PV (32, 16, 32), the softmax 4 bytes per score.
  const double fwd = bmm(32, 32, 16) + bmm(32, 16, 32) + elem(4 * S);
  // Backward: per forward GEMM Y[m,n] = X[m,k] W[k,n], dX (m, k, n) and dW (k, n, m):
  // dQ (32, 16, 32), dK^T (16, 32, 32), dP (32, 32, 16), dV (32, 16, 32); the softmax's 6 bytes.
  const double bwd = bmm(32, 16, 32) + bmm(16, 32, 32) + bmm(32, 32, 16) + bmm(32, 16, 32) + elem(6 * S);
  const PassNs a = cost_figures(fl, 1).slices[0].layers[0].attention;
  const PassNs b = cost_figures(pl, 1).slices[0].layers[0].attention;
  CHECK_THAT(b.f - a.f, WithinRel(fwd - flash(262'144, io), 1e-9));
  CHECK_THAT(b.b - a.b, WithinRel(bwd - flash(2.5 * 262'144, 2 * io), 1e-9));
  CHECK(b.w == a.w);
  // Selective recompute re-runs the non-flash core's forward before the backward (flash: nothing).
  const ModelConfigData sel =
      load(kDense, {"parallel.pp=1", "model.flash_attention=false", "parallel.recompute=selective"});
  const ModelConfigData sel_fl = load(kDense, {"parallel.pp=1", "parallel.recompute=selective"});
  CHECK_THAT(cost_figures(sel, 1).slices[0].recompute_ns, WithinRel(2 * fwd, 1e-9));  // two layers
  CHECK(cost_figures(sel_fl, 1).slices[0].recompute_ns == 0);
}

TEST_CASE("parallel.sequence_parallel: the hidden-sized per-token ops on T/t or on all T tokens", "[cost]") {
  // tp = 2. Attention: norm 4h + residual 6h bytes per token (no dropout), 640 x 64 tokens = 40,960 in
  // all, on the rank's T/t tokens with sequence parallelism (20,480) or on all T without; rope on all
  // T tokens of the rank's (a + g) d / t = 48 rotated elements: 2 x 2 x 48 x 64 = 12,288 either way.
  const LayerWork sp = layer_work(load(kDense, {"parallel.tp=2"}), 0, Shard{2, 1});
  const LayerWork no = layer_work(load(kDense, {"parallel.tp=2", "parallel.sequence_parallel=false"}), 0, Shard{2, 1});
  CHECK(sp.attention.elem_bytes == 20'480 + 12'288);
  CHECK(no.attention.elem_bytes == 40'960 + 12'288);
  // MLP: norm + residual likewise; SwiGLU's 6 bytes per element of f/t = 128 on all T: 49,152 either way.
  CHECK(sp.mlp.elem_bytes == 20'480 + 49'152);
  CHECK(no.mlp.elem_bytes == 40'960 + 49'152);
  // The TP collectives move the same bytes (an all-reduce is a reduce-scatter and an all-gather).
  CHECK(no.attention.tp_comm_bytes == sp.attention.tp_comm_bytes);
  // The head's final norm: 4h (forward) and 8h (backward) per token, on T/t or T; the loss on V/t.
  const BlockWork hs = head_work(load(kDense, {"parallel.tp=2"}), Shard{2, 1});
  const BlockWork hn = head_work(load(kDense, {"parallel.tp=2", "parallel.sequence_parallel=false"}), Shard{2, 1});
  CHECK(hn.elem_bytes - hs.elem_bytes == 4 * 64 * 32);
  CHECK(hn.bwd_elem_bytes - hs.bwd_elem_bytes == 8 * 64 * 32);
  // At tp = 1 the key changes nothing.
  const LayerWork one = layer_work(load(kDense, {"parallel.sequence_parallel=false"}), 0, Shard{1, 1});
  CHECK(one.attention.elem_bytes == layer_work(load(kDense), 0, Shard{1, 1}).attention.elem_bytes);
  // A value that is not a boolean is a located error naming the key.
  CHECK_THROWS_WITH(load(kDense, {"parallel.sequence_parallel=maybe"}), PPSIM_CONTAINS("sequence_parallel"));
}

TEST_CASE("MoE layer: router, top-k routed experts and shared experts", "[cost]") {
  const ModelConfigData c = load(R"(
model: {layers: 2, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32, micro_batch_size: 2,
        dense_layers_first: 1, moe: {experts: 4, top_k: 2, shared_experts: 1, expert_ffn_hidden: 32}}
hardware: {name: h100}
parallel: {pp: 2, microbatches: 4, ep: 2, dp: 2}
)");
  CHECK_FALSE(layer_work(c, 0, Shard{1, 2}).moe);  // dense_layers_first: 1
  const LayerWork w = layer_work(c, 1, Shard{1, 2});
  REQUIRE(w.moe);
  // router: 2 T h E = 2*64*64*4 = 32,768
  // routed: k * 3 * 2 T h fe = 2*3*2*64*64*32 = 1,572,864 (per rank with ep = 2: 2 experts,
  //         each on T k ep / E = 64 tokens -> the same total)
  // shared: 1 * 3 * 2 T h fe = 786,432
  CHECK(w.mlp.gemms[0].flops() == 32'768.0);
  CHECK(w.mlp.gemm_flops() == 32'768.0 + 1'572'864.0 + 786'432.0);
  CHECK(layer_work(c, 1, Shard{1, 1}).mlp.gemm_flops() == w.mlp.gemm_flops());
  // all-to-all per rank: T k h bytes (ep-1)/ep = 64*2*64*2*(1/2) = 8,192 (bf16 both ways)
  CHECK(w.mlp.dispatch_bytes == 8'192.0);
  CHECK(w.mlp.combine_bytes == 8'192.0);
  // with fp8 GEMMs the dispatch goes in fp8: 4,096 (sets use the h100 fp8 peak)
  const ModelConfigData f8 = parse_config(R"(
model: {layers: 2, hidden: 64, heads: 4, vocab: 1000, seq_len: 32, micro_batch_size: 2,
        moe: {experts: 4, top_k: 2, expert_ffn_hidden: 32}}
precision: {gemm: fp8}
hardware: {name: h100}
parallel: {pp: 2, microbatches: 4, ep: 2, dp: 2}
)", "t.yaml", "", {});
  const BlockWork m8 = layer_work(f8, 0, Shard{1, 2}).mlp;
  CHECK(m8.dispatch_bytes == 4'096.0);
  // FP8 quantization: the routed experts' gate and up read the dispatched FP8 tokens (nothing to
  // quantize forward), the up reads the gate's X (transposed once for both); the down quantizes
  // its own input. Without shared experts the dispatch's input, T x h = 64 x 64, is quantized
  // once in the layer's elementwise work: 3 + 4/128 bytes each.
  REQUIRE(m8.gemms.size() == 4);
  CHECK(std::string(m8.gemms[1].name) == "expert_gate");
  CHECK((m8.gemms[1].input_fp8 && !m8.gemms[1].input_shared));
  CHECK((m8.gemms[2].input_fp8 && m8.gemms[2].input_shared));
  CHECK((!m8.gemms[3].input_fp8 && !m8.gemms[3].input_shared));
  const ModelConfigData f8_off = parse_config(R"(
model: {layers: 2, hidden: 64, heads: 4, vocab: 1000, seq_len: 32, micro_batch_size: 2,
        moe: {experts: 4, top_k: 2, expert_ffn_hidden: 32}}
precision: {gemm: fp8}
hardware: {name: h100}
costs: {fp8_quant: false}
parallel: {pp: 2, microbatches: 4, ep: 2, dp: 2}
)", "t.yaml", "", {});
  CHECK(m8.elem_bytes - layer_work(f8_off, 0, Shard{1, 2}).mlp.elem_bytes == 64 * 64 * (3 + 4.0 / 128));
  // BF16: nothing arrives in FP8; the shared experts' gate and up still share their input.
  CHECK_FALSE(w.mlp.gemms[2].input_fp8);
}

TEST_CASE("parallel.etp: whole experts on each rank's own tokens, EP over dp x tp", "[cost]") {
  // T = 64 tokens, h = 64, E = 4 experts of fe = 32, top-2, tp = 2, ep = 2. Per rank, any etp:
  // k * 3 * 2 (T/t) h fe = 2 * 6 * 32 * 64 * 32 = 786,432 routed FLOPs.
  const char* moe = R"(
model: {layers: 2, hidden: 64, heads: 4, vocab: 1000, seq_len: 32, micro_batch_size: 2,
        moe: {experts: 4, top_k: 2, expert_ffn_hidden: 32}}
hardware: {name: h100}
)";
  std::string moe8 = moe;
  moe8.replace(moe8.find("experts: 4"), 10, "experts: 8");
  const auto cfg = [&](const std::string& par) { return load(std::string(moe) + par); };
  const ModelConfigData split = cfg("parallel: {pp: 2, microbatches: 4, tp: 2, ep: 2, dp: 2}\n");
  const ModelConfigData whole = cfg("parallel: {pp: 2, microbatches: 4, tp: 2, ep: 2, dp: 1, etp: 1}\n");
  const Shard ss{2, 2, 1}, sw{2, 2, 1, 1};
  const BlockWork a = layer_work(split, 0, ss).mlp, b = layer_work(whole, 0, sw).mlp;
  // etp = tp: each expert split in two, on the TP pair's gathered tokens: T k ep / E = 64 tokens,
  // width fe / 2 = 16. etp = 1: whole experts on (T/t) k ep / E = 32 tokens, width 32.
  REQUIRE(std::string(a.gemms[1].name) == "expert_gate");
  CHECK((a.gemms[1].m == 64 && a.gemms[1].n == 16 && a.gemms[1].count == 2));
  CHECK((b.gemms[1].m == 32 && b.gemms[1].n == 32 && b.gemms[1].count == 2));
  CHECK(a.gemm_flops() - a.gemms[0].flops() == 786'432.0);
  CHECK(b.gemm_flops() == a.gemm_flops());
  // The dispatch is each rank's T/t tokens either way: 32 * 2 * 64 * 2 bytes * (1/2) = 4,096.
  CHECK(b.dispatch_bytes == 4'096.0);
  CHECK(a.dispatch_bytes == b.dispatch_bytes);
  // No TP collective in a block of whole experts; the split experts' block has the dense MLP's.
  CHECK(a.tp_comm_bytes > 0);
  CHECK(b.tp_comm_bytes == 0.0);
  // With a shared expert (split over tp) the block keeps its TP collectives.
  const ModelConfigData shared = load(R"(
model: {layers: 2, hidden: 64, heads: 4, vocab: 1000, seq_len: 32, micro_batch_size: 2,
        moe: {experts: 4, top_k: 2, shared_experts: 1, expert_ffn_hidden: 32}}
hardware: {name: h100}
parallel: {pp: 2, microbatches: 4, tp: 2, ep: 2, dp: 1, etp: 1}
)");
  CHECK(layer_work(shared, 0, sw).mlp.tp_comm_bytes == a.tp_comm_bytes);
  // The EP group's ranks: at stride tp (8 GPUs a node, tp 2: 4 per node) or adjacent. ep = 8:
  // (ep - n) / (ep - 1) of the bytes leave the node, n = 4 or 8.
  CHECK_THAT(
      a2a_inter_node_fraction(load(std::string(moe8) + "parallel: {pp: 1, microbatches: 4, tp: 2, ep: 8, dp: 8}\n")),
      WithinRel(4.0 / 7.0, 1e-12));
  CHECK(a2a_inter_node_fraction(
            load(std::string(moe8) + "parallel: {pp: 1, microbatches: 4, tp: 2, ep: 8, dp: 4, etp: 1}\n")) == 0.0);
  // Routed weights: split over ep x etp, so a rank of whole experts holds twice a split one's.
  // Replicas of each shard: dp x tp / (ep x etp).
  const Schedule one = make_schedule("1f1b", ScheduleParams{2, 4, 0, 0});
  const double split_w = step_costs(split, one).ranks[0].expert_params;
  CHECK(split_w > 0);
  CHECK(step_costs(whole, one).ranks[0].expert_params == 2 * split_w);
  CHECK(whole.parallel.expert_dp() == 1);  // 1 x 2 / (2 x 1)
  CHECK(split.parallel.expert_dp() == 1);  // 2 x 2 / (2 x 2)
  // Refused: etp neither 1 nor tp; ep not dividing dp x tp with whole experts; etp without experts.
  CHECK_THROWS_WITH(cfg("parallel: {pp: 2, microbatches: 4, tp: 4, ep: 2, dp: 1, etp: 2}\n"),
                    PPSIM_CONTAINS("parallel.etp=2: expected 1 (whole experts) or parallel.tp=4"));
  CHECK_THROWS_WITH(cfg("parallel: {pp: 2, microbatches: 4, tp: 2, ep: 4, dp: 1, etp: 1}\n"),
                    PPSIM_CONTAINS("parallel.ep=4 must divide parallel.dp x tp = 1 x 2"));
  CHECK_THROWS_WITH(load("model: {layers: 2, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: "
                         "32}\nhardware: {name: h100}\n"
                         "parallel: {pp: 2, microbatches: 4, etp: 1}\n"),
                    PPSIM_CONTAINS("parallel.etp=1 needs a model.moe section"));
}

TEST_CASE("MLA attention: low-rank projections", "[cost]") {
  const ModelConfigData c = load(R"(
model: {layers: 2, hidden: 64, heads: 4, vocab: 1000, seq_len: 32, micro_batch_size: 2, ffn_hidden: 256,
        mla: {q_lora_rank: 16, kv_lora_rank: 8, qk_nope_head_dim: 8, qk_rope_head_dim: 4, v_head_dim: 8}}
hardware: {name: h100}
parallel: {pp: 2, microbatches: 4}
)");
  const BlockWork a = layer_work(c, 0, Shard{1, 1}).attention;
  // q_down 2 T h qr = 2*64*64*16 = 131,072; q_up 2 T qr a (dn+dr) = 2*64*16*4*12 = 98,304
  // kv_down 2 T h (kvr+dr) = 2*64*64*12 = 98,304; kv_up 2 T kvr a (dn+dv) = 2*64*8*4*16 = 65,536
  // out 2 T a dv h = 2*64*4*8*64 = 262,144
  CHECK(a.gemm_flops() == 131'072.0 + 98'304.0 + 98'304.0 + 65'536.0 + 262'144.0);
  // kv_down reads the hidden states q_down read: one FP8 quantization for both.
  REQUIRE(std::string(a.gemms[2].name) == "kv_down");
  CHECK(a.gemms[2].input_shared);
  CHECK_FALSE(a.gemms[0].input_shared);
  // core: 1/2 * 2 b a s^2 ((dn+dr) + dv) = 0.5*2*2*4*1024*20 = 163,840
  CHECK(a.core_flops == 163'840.0);
}

TEST_CASE("head: the vocab GEMM, tensor parallelism divides a rank's FLOPs", "[cost]") {
  const ModelConfigData c = load(kDense);
  // 2 T h V = 2*64*64*1000 = 8,192,000
  CHECK(head_work(c, Shard{1, 1}).forward_flops() == 8'192'000.0);
  const ModelConfigData t2 = load(kDense, {"parallel.tp=2"});
  CHECK(layer_work(t2, 0, Shard{2, 1}).forward_flops() == 8'126'464.0 / 2);
  CHECK(head_work(t2, Shard{2, 1}).forward_flops() == 8'192'000.0 / 2);
}

TEST_CASE("head: the cross-entropy's HBM traffic and TP all-reduces as Megatron-LM computes the loss", "[cost][fidelity]") {
  // Megatron's vocab-parallel cross-entropy on logits.float(): per logit forward cast 6 + max 4 +
  // subtract 8 + exp 8 + sum 4 + divide 8 = 38 bytes, backward scale 8 + cast back 6 = 14; the
  // final norm 4h forward, 8h backward. T = 64 tokens, h = 64, V = 1000.
  const ModelConfigData c = load(kDense);
  const BlockWork w = head_work(c, Shard{1, 1});
  CHECK(w.elem_bytes == (4.0 * 64 + 38.0 * 1000) * 64);
  CHECK(w.bwd_elem_bytes == (8.0 * 64 + 14.0 * 1000) * 64);
  CHECK(w.tp_small_allreduces == 0);
  // tp 2: the rank's V/2 logits; three all-reduces of one fp32 per token, 2 (t-1)/t x 4 T = 256 bytes.
  const ModelConfigData t2 = load(kDense, {"parallel.tp=2"});
  const BlockWork w2 = head_work(t2, Shard{2, 1});
  CHECK(w2.elem_bytes == (4.0 * 64 + 38.0 * 1000) * 64 / 2);
  CHECK(w2.bwd_elem_bytes == (8.0 * 64 + 14.0 * 1000) * 64 / 2);
  CHECK(w2.tp_small_allreduces == 3);
  CHECK(w2.tp_small_allreduce_bytes == 256.0);
  // costs.megatron_loss false: the earlier count, 6 bytes per logit forward, 12 backward.
  const ModelConfigData old = load(kDense, {"costs.megatron_loss=false", "parallel.tp=2"});
  const BlockWork w3 = head_work(old, Shard{2, 1});
  CHECK(w3.elem_bytes == (4.0 * 64 + 6.0 * 1000) * 64 / 2);
  CHECK(w3.bwd_elem_bytes == (8.0 * 64 + 12.0 * 1000) * 64 / 2);
  CHECK(w3.tp_small_allreduces == 0);
}

TEST_CASE("dense model FLOPs per step follow 6*N*D plus the attention core", "[cost]") {
  // Llama-7B shapes: L = 32, h = 4096, a = 32 (MHA, d = 128), f = 11008 (SwiGLU), V = 32000,
  // s = 2048, b = 1.
  const ModelConfigData c = load(R"(
model: {layers: 32, hidden: 4096, ffn_hidden: 11008, heads: 32, vocab: 32000, seq_len: 2048}
hardware: {name: h100}
parallel: {pp: 4, microbatches: 8}
)");
  const double L = 32, h = 4096, f = 11008, V = 32000, s = 2048, a = 32, d = 128;
  const double D = s;  // tokens of one micro-batch
  // GEMM parameters: per layer 4h^2 (QKV + out) + 3hf (SwiGLU); the head hV. The embedding
  // is a lookup (no FLOPs) and norms are elementwise.
  const double n_gemm = L * (4 * h * h + 3 * h * f) + h * V;
  // Causal attention core, forward, per layer: 1/2 * 2 a s^2 (2d); backward 2.5x that.
  const double core = L * 0.5 * 2 * a * s * s * (2 * d);
  const double flops = model_flops_per_microbatch(c);
  CHECK_THAT(flops, WithinRel(6 * n_gemm * D + 3.5 * core, 1e-12));
  // The rule of thumb with all non-embedding parameters (norms included): the attention core
  // adds 3.5*core / (6 N D) = 4.3% here, so 6ND is within 6% below our count.
  const double n = model_params(c.model) - embedding_params(c.model);
  const double ratio = flops / (6 * n * D);
  CHECK(ratio > 1.0);
  CHECK(ratio < 1.06);
}

TEST_CASE("context parallelism: s / cp tokens per rank, 1/cp of the causal core, the K/V all-gather bytes", "[cost]") {
  // kDense with tp 2, cp 4: T = 64 tokens, 16 on each cp rank; a/t = 2 heads, g/t = 1 kv head, d = 16.
  const ModelConfigData c = load(kDense, {"parallel.tp=2", "parallel.cp=4"});
  CHECK(c.parallel.cp == 4);
  const LayerWork one = layer_work(c, 0, Shard{2, 1, 1});
  const LayerWork w = layer_work(c, 0, Shard{2, 1, 4});
  // GEMMs: 1/cp of the tokens. qkv: 2 (T/cp) h (a+2g) d / t = 2*16*64*8*16/2 = 131,072
  REQUIRE(w.attention.gemms.size() == 2);
  CHECK(w.attention.gemms[0].flops() == 131'072.0);
  CHECK(w.mlp.gemm_flops() == one.mlp.gemm_flops() / 4);
  // Core: the rank's s/cp queries against all s keys, causal half:
  //   0.5 * 2 b (a/t) s (s/cp) (d + d) = 0.5*2*2*2*32*8*32 = 32,768 (= 262,144 / t / cp)
  CHECK(w.attention.core_flops == 32'768.0);
  // All-gather of K and V: the other (cp-1)/cp of the sequence, bf16:
  //   2 bytes * b s * g/t * (d + d) * 3/4 = 2*64*1*32*0.75 = 3,072
  CHECK(w.attention.cp_comm_bytes == 3'072.0);
  CHECK(one.attention.cp_comm_bytes == 0.0);
  CHECK(w.mlp.cp_comm_bytes == 0.0);
  // Activations: 1/cp of cp = 1's (per token, times T / (t cp)).
  const ModelConfigData c1 = load(kDense, {"parallel.tp=2"});
  CHECK_THAT(layer_activation_bytes(c, 0), WithinRel(layer_activation_bytes(c1, 0) / 4, 1e-12));
}

TEST_CASE("context parallelism: the all-gather on the attention's time, switched by costs.cp_comm", "[cost]") {
  // One pass's attention time with and without the CP piece differs by the bytes over the link:
  // tp 2 * cp 4 = 8 GPUs fit one node, so NVLink one way at the comm efficiency, plus one latency.
  const ModelConfig on = load_config_text(kDense, "t.yaml", {"parallel.tp=2", "parallel.cp=4"});
  const ModelConfig off = load_config_text(kDense, "t.yaml", {"parallel.tp=2", "parallel.cp=4", "costs.cp_comm=false"});
  const Schedule s = make_schedule("1f1b", ScheduleParams{2, 4, 0, 0});
  const SimCosts a = derive_costs(on, s), b = derive_costs(off, s);
  const ModelConfigData cd = load(kDense);
  const HardwareSpec& hw = cd.hardware;
  const double per_layer =
      3'072.0 / (hw.nvlink_bytes_per_ns_one_way() * hw.efficiency.comm) + 1e3 * hw.nvlink_latency_us;
  // Slice 1 holds one layer (and the head): forward +1 all-gather; backward the all-gather again
  // (the forward keeps only the rank's own K and V, as Transformer Engine's all-gather CP does)
  // and the reduce-scatter of dK, dV (times in whole ns: within 1 of the difference).
  // 3072 / 360 + 1000 = 1008.5 ns.
  CHECK(per_layer > 1008);
  CHECK_THAT(static_cast<double>(a.slice[1].f - b.slice[1].f), WithinAbs(per_layer, 1.0));
  CHECK_THAT(static_cast<double>(a.slice[1].b - b.slice[1].b), WithinAbs(2 * per_layer, 1.0));
  // parallel.cp_runtime: torch (PyTorch's ring backward): the all-gather again, then the local
  // dK, dV in fp32 (1/cp of the sequence: 2 x 3072 / 3 = 2048 bytes) passed on cp = 4 times,
  // each with its latency. The forward does not change.
  const ModelConfig torch_rt =
      load_config_text(kDense, "t.yaml", {"parallel.tp=2", "parallel.cp=4", "parallel.cp_runtime=torch"});
  const SimCosts t = derive_costs(torch_rt, s);
  const double ring = 2048.0 / (hw.nvlink_bytes_per_ns_one_way() * hw.efficiency.comm) + 1e3 * hw.nvlink_latency_us;
  CHECK(t.slice[1].f == a.slice[1].f);
  CHECK_THAT(static_cast<double>(t.slice[1].b - b.slice[1].b), WithinAbs(per_layer + 4 * ring, 2.0));
  // A runtime that is not one is a located error naming the two.
  CHECK_THROWS_WITH(load_config_text(kDense, "t.yaml", {"parallel.cp=4", "parallel.cp_runtime=ring"}),
                    PPSIM_CONTAINS("te"));
}
