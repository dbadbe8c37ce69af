// Memory (src/cost/memory.cc) against the published formulas: Korthikanti et al. 2022 (Table 2)
// per layer, and Megatron-LM's theoretical memory (weights + optimizer + activations of the
// first pipeline stage, megatron/training/theoretical_memory_usage.py).
#include <string>

#include "catch.h"
#include "cost/config.h"
#include "cost/cost_model.h"
#include "cost/memory.h"
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
  CHECK_THAT(phys.peak_memory_bytes[0], WithinRel(expected, 1e-12));

  // The parts: 18 bytes/param = params 2 + grads 4 + optimizer 12.
  const std::vector<RankMemory> parts = rank_memory(c, sch.stage_rank, sch.slice, slice_layouts(c, 4), {4, 3, 2, 1});
  const double params0 = transformer / p + h * V - 2 * h / p;
  CHECK_THAT(parts[0].weights, WithinRel(2 * params0, 1e-12));
  CHECK_THAT(parts[0].grads, WithinRel(4 * params0, 1e-12));
  CHECK_THAT(parts[0].optimizer, WithinRel(12 * params0, 1e-12));
  CHECK_THAT(parts[0].activations, WithinRel(megatron_acts, 1e-12));
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
