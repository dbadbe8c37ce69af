// The planner (src/plan/): constructed configs whose winner follows from arithmetic written out
// below, rejections counted by reason, plan: errors at file:line:col, and determinism: the
// same output for any thread count and for shards merged back together.
#include "plan/planner.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "api/request.h"
#include "catch.h"
#include "cost/cost_model.h"
#include "plan/plan_json.h"
#include "plan/plan_report.h"
#include "test_util.h"

using namespace ppsim;

namespace {

PlanResult plan(const std::string& yaml, int jobs = 1, const std::vector<std::string>& sets = {}) {
  PlanOptions opt;
  opt.jobs = jobs;
  opt.sets = sets;
  return run_plan(load_config_text(yaml, "t.yaml", sets), opt);
}

std::string error_of(const std::string& yaml) {
  try {
    (void)plan(yaml);
  } catch (const InputError& e) {
    return e.one_line();
  }
  return "";
}

const PlanRow* best_of(const VariantResult& v, const std::string& schedule) {
  for (const PlanRow& r : v.best_per_schedule)
    if (r.schedule == schedule) return &r;
  return nullptr;
}

std::uint64_t rejected(const VariantResult& v, Reason r) { return v.rejected[static_cast<std::size_t>(r)].count; }

constexpr Time kMs = 1'000'000;  // ns per ms

// A dense model, 2 ranks, dp 1, no ZeRO: weights bf16 (2) + grads fp32 (4) + Adam fp32 moments
// and master (12) = 18 bytes per parameter.
// One layer: attention h(a+2g)d + adh = 2048*6144 + 2048*2048 = 16,777,216; norms 2h = 4,096;
// SwiGLU 3hf = 3*2048*8192 = 50,331,648; total 67,112,960.
// A rank of a 1-copy schedule holds 2 layers + embedding (1000*2048 = 2,048,000) or head
// (2,048,000 + 2,048): 136,275,968 parameters at most = 2.45 GB; the activations of s = 32
// tokens are a few MB. DualPipe and Chimera hold both pipes' slices: all 4 layers + embedding +
// head = 272,549,888 parameters = 4.91 GB. A 3.5 GB cap keeps the first and refuses the second.
const char* kTightMemory = R"(name: tight-memory
model: {layers: 4, hidden: 2048, ffn_hidden: 8192, heads: 16, vocab: 1000, seq_len: 32}
hardware: {name: test, peak_tflops: {bf16: 100}, hbm_gbps: 1000, hbm_gb: 80, nvlink_gbps: 400, network_gbps: 50, gpus: 2}
parallel: {pp: 2, microbatches: 4}
plan:
  search: {schedules: [1f1b, zb-h1, dualpipev, dualpipe, chimera], microbatches: [4, 8]}
  constraints: {memory_gb: 3.5}
)";

// An MoE model of 16 layers on P = 8 ranks (2 layers per rank: one per chunk of a V, two per
// stage of DualPipe), ep = 2 inside one node, so every all-to-all runs on NVLink. No embedding
// or head on the end slices, so that every slice costs the same. The weight gradients' FP32
// accumulation is taken as hidden (accum_exposed 0): the scenarios below were worked on the GEMMs'
// times, and at this GPU's 1000 GB/s the accumulation of a rank's 4 experts (50M weights, 0.37 ms
// at 0.65) would add about three quarters of their weight-gradient GEMMs' 0.5 ms.
// GEMMs at the type's figure at every shape (costs.gemm_shape off): the tests below weigh the
// all-to-alls against compute at that figure.
std::string moe_config(int nvlink_gbps, const std::string& plan_section) {
  return fmt::format(R"(name: moe
model: {{layers: 16, hidden: 1024, heads: 8, vocab: 1000, seq_len: 1024, moe: {{experts: 8, top_k: 2, expert_ffn_hidden: 4096}}}}
hardware: {{name: test, peak_tflops: {{bf16: 100}}, hbm_gbps: 1000, hbm_gb: 1000, nvlink_gbps: {}, network_gbps: 50, gpus: 16,
            gpus_per_node: 16, comm_sms: 0, efficiency: {{accum_exposed: 0}}}}
parallel: {{pp: 8, dp: 2, ep: 2, microbatches: 32, embedding_on_first: false, head_on_last: false}}
costs: {{gemm_shape: false}}
{})",
                     nvlink_gbps, plan_section);
}

// One all-to-all (dispatch or combine, forward or backward) of one layer, ns, as
// cost/derive.cc computes it: bytes leaving a rank = T * k * h * 2 bytes * (ep-1)/ep
// = 1024 * 2 * 1024 * 2 / 2 = 2,097,152; time = bytes / (nvlink/2 * efficiency.comm 0.8) + 1 us.
Time a2a_ns(int nvlink_gbps) { return std::llround(2'097'152.0 / (nvlink_gbps / 2.0 * 0.8) + 1000.0); }

}  // namespace

TEST_CASE("tight memory rejects the 2x-parameter schedules (DualPipe, Chimera)", "[plan]") {
  const PlanResult r = plan(kTightMemory);
  REQUIRE(r.variants.size() == 1);
  const VariantResult& v = r.variants[0];
  // 5 families x 2 micro-batch counts; dualpipe and chimera: 2 x 2 = 4, all for memory.
  CHECK(v.candidates == 10);
  CHECK(rejected(v, Reason::memory_cap) == 4);
  CHECK(v.feasible.size() == 6);
  for (const auto& [name, counts] : v.rejected_by_schedule) {
    INFO(name);
    const bool two_copies = name == "dualpipe" || name == "chimera";
    CHECK(counts[static_cast<std::size_t>(Reason::memory_cap)] == (two_copies ? 2u : 0u));
  }
  for (const PlanRow& row : v.feasible) {
    CHECK(row.schedule != "dualpipe");
    CHECK(row.schedule != "chimera");
    CHECK(row.peak_memory_bytes < 3.5e9);
    CHECK(row.peak_memory_bytes > 136'275'968.0 * 18 * 0.99);  // the weights alone
  }
  const Rejections& ex = v.rejected[static_cast<std::size_t>(Reason::memory_cap)];
  CHECK(ex.example.find("2 parameter copies") != std::string::npos);
  CHECK(ex.example.find("4.9 GB") != std::string::npos);  // 272,549,888 * 18 bytes
}

TEST_CASE("a heavy all-to-all makes DualPipe win", "[plan]") {
  // NVLink 25 GB/s: each all-to-all takes a2a_ns(25) = 210 us against ~0.2 ms of compute per
  // layer and op. Schedules without F&B pairs wait for every one of them: 4 per layer per
  // micro-batch, 2 layers per rank, M = 32: 256 all-to-alls = 53.8 ms exposed on every rank.
  // DualPipe's pairs run one chunk's all-to-alls beside the other chunk's compute; only the
  // unpaired warm-up and cool-down ops expose theirs.
  const PlanResult r = plan(moe_config(25, "plan: {search: {schedules: all}}"));
  const VariantResult& v = r.variants[0];
  REQUIRE_FALSE(v.ranking.empty());
  CHECK(v.ranking.front().schedule == "dualpipe");
  const PlanRow* zbv = best_of(v, "zbv");
  const PlanRow* zbh2 = best_of(v, "zb-h2");
  REQUIRE(zbv != nullptr);
  REQUIRE(zbh2 != nullptr);
  CHECK(zbv->exposed_comm_ns == 256 * a2a_ns(25));
  CHECK(zbh2->exposed_comm_ns == 256 * a2a_ns(25));
  CHECK(v.ranking.front().exposed_comm_ns < zbv->exposed_comm_ns / 2);
}

namespace {
// One rank's share F = 1, B = 2 (b = 1), W = 1 ms on P = 4 ranks, M = 8, links of 1e9 GB/s with
// no latency (every transfer takes 0 ns), and the given plan section.
std::string zero_comm_config(const std::string& plan_section) {
  return std::string(R"(name: zero-comm
model: {layers: 8, hidden: 1024, ffn_hidden: 4096, heads: 8, vocab: 1000, seq_len: 256}
hardware: {name: test, peak_tflops: {bf16: 100}, hbm_gbps: 1000, hbm_gb: 1000, nvlink_gbps: 1000000000,
           nvlink_latency_us: 0, network_gbps: 1000000000, network_latency_us: 0, gpus: 4}
parallel: {pp: 4, microbatches: 8}
times: {F: 1, B: 2, W: 1}
)") + plan_section;
}
}  // namespace

TEST_CASE("zero communication and F = b = W: ZB-V wins, by the closed forms", "[plan]") {
  // times: one rank's share F = 1, B = 2 (b = 1), W = 1 ms: F = b = W. Links of 1e9 GB/s with
  // no latency: every transfer takes 0 ns. P = 4, M = 8 >= 2P - 1.
  //   1F1B: (M + P - 1)(F + B) = 11 * 3 = 33 ms.
  //   ZB-H2: each rank's own span is bubble-free, M(F + B) = 24 ms, but the last rank starts
  //          (P - 1)F = 3 ms after the first: 27 ms (as ZB-H1: 24 + (P-1)(F + B - 2W) = 27).
  //   ZB-V:  chunks of F/2: the last rank starts (P - 1)F/2 = 1.5 ms late: 25.5 ms, the best.
  const PlanResult r = plan(zero_comm_config("plan: {search: {schedules: all}}\n"));
  const VariantResult& v = r.variants[0];
  REQUIRE(v.feasible.size() == 9);
  CHECK(v.ranking.front().schedule == "zbv");
  CHECK(v.ranking.front().step_ns == 25 * kMs + kMs / 2);
  CHECK(best_of(v, "zb-h2")->step_ns == 27 * kMs);
  CHECK(best_of(v, "1f1b")->step_ns == 33 * kMs);
  for (const PlanRow& row : v.feasible) CHECK(row.exposed_comm_ns == 0);
}

TEST_CASE("a what-if that halves NVLink turns ZB-V's win into DualPipe's", "[plan]") {
  // Base, NVLink 200 GB/s: one all-to-all is a2a_ns(200) = 27,214 ns. ZB-V runs no F&B pairs:
  // each micro-batch exposes 4 all-to-alls per layer on each of its 2 layers per rank, so
  // 32 * 8 = 256 of them = 6.97 ms per rank, and still wins by its smaller bubble.
  // Halved to 100 GB/s: a2a_ns(100) = 53,429 ns, and ZB-V's exposed time grows by
  // 256 * 26,215 ns = 6.71 ms. DualPipe hides the all-to-alls of its pairs under the other
  // chunk's compute, so its step grows by much less: its base deficit to ZB-V is smaller than
  // the difference in growth, and it wins.
  const std::string yaml =
      moe_config(200, "plan:\n  search: {schedules: [1f1b, zb-h1, zb-h2, zbv, dualpipe]}\n  whatif:\n"
                      "    half-nvlink: {hardware.nvlink_gbps: 100}\n");
  const PlanResult r = plan(yaml);
  REQUIRE(r.variants.size() == 2);
  const VariantResult& base = r.variants[0];
  const VariantResult& half = r.variants[1];
  CHECK(half.name == "half-nvlink");
  CHECK(half.overrides == std::vector<std::string>{"hardware.nvlink_gbps=100"});
  REQUIRE_FALSE(base.ranking.empty());
  REQUIRE_FALSE(half.ranking.empty());
  CHECK(base.ranking.front().schedule == "zbv");
  CHECK(half.ranking.front().schedule == "dualpipe");

  const PlanRow& zbv_base = *best_of(base, "zbv");
  const PlanRow& zbv_half = *best_of(half, "zbv");
  const PlanRow& dp_base = *best_of(base, "dualpipe");
  const PlanRow& dp_half = *best_of(half, "dualpipe");
  CHECK(a2a_ns(200) == 27'214);
  CHECK(a2a_ns(100) == 53'429);
  CHECK(zbv_base.exposed_comm_ns == 256 * a2a_ns(200));
  CHECK(zbv_half.exposed_comm_ns - zbv_base.exposed_comm_ns == 256 * (a2a_ns(100) - a2a_ns(200)));
  const Time dp_growth = dp_half.step_ns - dp_base.step_ns;
  CHECK(dp_growth < 256 * (a2a_ns(100) - a2a_ns(200)));
  CHECK(dp_base.step_ns - zbv_base.step_ns < (zbv_half.step_ns - zbv_base.step_ns) - dp_growth);

  const std::vector<WhatIfRow> w = whatif_rows(r);
  REQUIRE(w.size() == 2);
  CHECK(w[1].schedule_changed);
  CHECK(w[1].delta_pct > 0);
  CHECK(render_plan_table(r).find("schedule zbv -> dualpipe") != std::string::npos);
}

TEST_CASE("rejections are counted by the first constraint broken", "[plan]") {
  // 61 layers (prime): any uniform split into more than one slice fails.
  const char* yaml = R"(name: reasons
model: {layers: 61, hidden: 256, ffn_hidden: 1024, heads: 4, vocab: 1000, seq_len: 64, moe: {experts: 8, top_k: 2, expert_ffn_hidden: 256}}
hardware: {name: h100, gpus: 16}
parallel: {pp: 1, microbatches: 8}
plan:
  search: {schedules: [1f1b], pp: [1, 3, 4], microbatches: [8, 16], ep: [1, 3]}
  constraints: {global_batch: 128}
)";
  const VariantResult v = plan(yaml).variants[0];
  // 3 pp x 2 M x 2 ep = 12 candidates.
  //   pp = 3: 16 GPUs are not a multiple of 3 -> GPU count (4 candidates).
  //   ep = 3: divides neither 8 experts nor dp -> expert parallel (4 of the other 8).
  //   pp = 1 (dp 16): M * dp = 8 * 16 = 128 fits the batch, 16 * 16 does not -> 1 global batch.
  //   pp = 4 (dp 4): 8 * 4 = 32 and 16 * 4 = 64 are not 128 -> 2 global batch.
  //   pp = 1, M = 8, ep = 1: feasible (one slice holds all 61 layers).
  CHECK(v.candidates == 12);
  CHECK(rejected(v, Reason::gpu_count) == 4);
  CHECK(rejected(v, Reason::expert_parallel) == 4);
  CHECK(rejected(v, Reason::global_batch) == 3);
  CHECK(v.feasible.size() == 1);
  CHECK(v.feasible[0].pp == 1);
  CHECK(v.rejected[static_cast<std::size_t>(Reason::global_batch)].example.find("16*1*16 = 256 sequences, not 128") !=
        std::string::npos);

  // Without the batch constraint pp = 4 reaches the layer split: 61 layers into 4 slices.
  const VariantResult w = plan(yaml, 1, {"plan.constraints={}"}).variants[0];
  CHECK(rejected(w, Reason::layers_not_divisible) == 2);
  CHECK(w.rejected[static_cast<std::size_t>(Reason::layers_not_divisible)].example.find("cannot be split uniformly into 4") !=
        std::string::npos);
}

TEST_CASE("plan: errors point at the line and column, with suggestions", "[plan]") {
  const std::string head = R"(model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}
hardware: {name: h100, gpus: 2}
parallel: {pp: 2, microbatches: 4}
)";
  CHECK(error_of(head + "plan:\n  serach: {pp: [2]}\n") == "t.yaml:5:3: unknown key 'serach' in 'plan', did you mean 'search'?");
  CHECK(error_of(head + "plan:\n  search: {schedules: [1f1b, dualpipee]}\n") ==
        "t.yaml:5:30: plan.search.schedules: unknown schedule 'dualpipee', did you mean 'dualpipe'?");
  CHECK(error_of(head + "plan:\n  search: {recompute: [ful]}\n") ==
        "t.yaml:5:24: plan.search.recompute must be none, selective or full, got 'ful', did you mean 'full'?");
  CHECK(error_of(head + "plan:\n  search: {pp: [2, 2]}\n") == "t.yaml:5:20: plan.search.pp lists 2 twice");
  CHECK(error_of(head + "plan:\n  objective: speed\n") ==
        "t.yaml:5:14: plan.objective must be one of step_time|tokens_per_second, got 'speed'");
  CHECK(error_of(head + "plan:\n  whatif:\n    fast: {hardware.nvlnk_gbps: 900}\n") ==
        "t.yaml:6:12: what-if 'fast': unknown key 'hardware.nvlnk_gbps', did you mean 'hardware.nvlink_gbps'?");
  CHECK(error_of(head + "plan:\n  whatif:\n    fast: {hardware.nvlink_gbps: -4}\n") ==
        "t.yaml:6:34: what-if 'fast': hardware.nvlink_gbps must be in [0.001, 1000000000], got -4");
  CHECK(error_of(head + "plan:\n  whatif:\n    base: {hardware.nvlink_gbps: 400}\n") ==
        "t.yaml:6:5: what-if name 'base' is reserved for the config as written");
  CHECK(error_of(head + "plan:\n  constraints: {memory_gb: 70, reserve_gb: 8}\n") ==
        "t.yaml:5:44: give plan.constraints.memory_gb (a fixed cap) or reserve_gb (hardware.hbm_gb minus it), not both");
  // A cap above the GPU's memory (the h100's 85.5208 GB as the driver reports it) would rank layouts
  // that do not fit the GPU as feasible; in a what-if whose GPU is smaller, named with it.
  // An error about a key the what-if left alone (the base's layer_split against its new layer
  // count) points at the what-if's entry, not at 1:1 of the cloned tree.
  CHECK(error_of("model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}\n"
                 "hardware: {name: h100, gpus: 2}\nparallel: {pp: 2, microbatches: 4, layer_split: [2, 2]}\n"
                 "plan:\n  whatif:\n    deeper: {model.layers: 6}\n") ==
        "t.yaml:6:5: what-if 'deeper': parallel.layer_split sums to 4 layers, but model.layers = 6");
  CHECK(error_of(head + "plan:\n  constraints: {memory_gb: 90}\n") ==
        "t.yaml:5:28: plan.constraints.memory_gb = 90 is above the GPU's memory, hardware.hbm_gb = 85.5208: give at "
        "most 85.5208 (or reserve_gb for headroom below it)");
  CHECK(error_of(head + "plan:\n  constraints: {memory_gb: 60}\n  whatif:\n    small: {hardware.hbm_gb: 40}\n") ==
        "t.yaml:5:28: plan.constraints.memory_gb = 60 is above the GPU's memory, hardware.hbm_gb = 40 in what-if "
        "'small': give at most 40 (or reserve_gb for headroom below it)");
}

namespace {

// A plan with what-ifs, every family and hundreds of candidates, for the determinism tests.
std::string determinism_config() {
  return moe_config(100, R"(plan:
  search: {schedules: all, pp: [2, 4, 8], microbatches: [8, 16, 24, 32], ep: [1, 2], recompute: [none, full]}
  constraints: {reserve_gb: 980}
  top_k: 25
  whatif:
    fast: {hardware.nvlink_gbps: 900}
    small: {hardware.hbm_gb: 990}
)");
}

}  // namespace

TEST_CASE("the output is identical for --jobs 1 and --jobs 2", "[plan]") {
  const std::string yaml = determinism_config();
  const PlanResult one = plan(yaml, 1);
  const PlanResult two = plan(yaml, 2);
  const PlanResult three = plan(yaml, 3);
  REQUIRE(one.variants.size() == 3);
  CHECK(one.variants[0].feasible.size() > 50);
  CHECK(rejected(one.variants[2], Reason::memory_cap) > 0);  // the small variant's 10 GB cap bites
  CHECK(render_plan_table(one) == render_plan_table(two));
  CHECK(render_plan_json(one) == render_plan_json(two));
  CHECK(render_plan_csv(one) == render_plan_csv(two));
  CHECK(render_plan_json(one) == render_plan_json(three));
}

TEST_CASE("shards merged equal the unsharded run", "[plan]") {
  const std::string yaml = determinism_config();
  const ModelConfig cfg = load_config_text(yaml, "t.yaml", {});
  PlanOptions opt;
  opt.jobs = 2;
  const PlanResult whole = run_plan(cfg, opt);
  for (int n : {1, 3, 7}) {
    INFO("shards: " << n);
    std::vector<PlanResult> shards;
    std::vector<std::string> names;
    // In reverse order, through the JSON files' text, as `ppsim plan --merge` reads them.
    for (int i = n - 1; i >= 0; --i) {
      PlanOptions so = opt;
      so.shard_index = i;
      so.shard_count = n;
      PlanResult s = run_plan(cfg, so);
      if (n > 1) s = plan_from_json(render_plan_json(s), fmt::format("shard{}.json", i));
      shards.push_back(std::move(s));
      names.push_back(fmt::format("shard{}.json", i));
    }
    const PlanResult merged = merge_plans(std::move(shards), names, 0);
    CHECK(render_plan_table(merged) == render_plan_table(whole));
    CHECK(render_plan_json(merged) == render_plan_json(whole));
    CHECK(render_plan_csv(merged) == render_plan_csv(whole));
  }
}

TEST_CASE("merge refuses missing, repeated and foreign shards", "[plan]") {
  const std::string yaml = determinism_config();
  const ModelConfig cfg = load_config_text(yaml, "t.yaml", {});
  auto shard = [&](const ModelConfig& c, int i, int n) {
    PlanOptions o;
    o.shard_index = i;
    o.shard_count = n;
    o.jobs = 2;
    return plan_from_json(render_plan_json(run_plan(c, o)), "s.json");
  };
  auto error = [](std::vector<PlanResult> s, std::vector<std::string> names) {
    try {
      (void)merge_plans(std::move(s), names, 0);
    } catch (const InputError& e) {
      return e.one_line();
    }
    return std::string{};
  };
  CHECK(error({shard(cfg, 0, 2)}, {"a.json"}) == "shard 1/2 is missing: merge needs all 2 shards");
  CHECK(error({shard(cfg, 0, 2), shard(cfg, 0, 2)}, {"a.json", "b.json"}) == "b.json: shard 0/2 is given twice (also 'a.json')");
  const ModelConfig other = load_config_text(yaml, "t.yaml", {"plan.top_k=3"});
  CHECK(error({shard(cfg, 0, 2), shard(other, 1, 2)}, {"a.json", "b.json"})
            .starts_with("b.json: this shard comes from another config or plan than 'a.json'"));
  CHECK_THROWS_AS(plan_from_json(render_plan_json(plan(yaml, 2)), "whole.json"), InputError);  // not a shard
}

TEST_CASE("the example configs plan: DeepSeek-V3 searches >= 10,000 candidates", "[plan]") {
  const ModelConfig ds = load_config(std::string(PPSIM_SOURCE_DIR) + "/configs/deepseek-v3.yaml", {});
  PlanOptions opt;
  opt.jobs = 2;
  const PlanResult r = run_plan(ds, opt);
  REQUIRE(r.variants.size() == 1);
  CHECK(r.variants[0].candidates >= 10000);
  CHECK_FALSE(r.variants[0].ranking.empty());

  const ModelConfig w = load_config(std::string(PPSIM_SOURCE_DIR) + "/configs/whatif-h800-vs-h100.yaml", {});
  const PlanResult wr = run_plan(w, opt);
  REQUIRE(wr.variants.size() >= 3);
  for (const VariantResult& v : wr.variants) {
    INFO(v.name);
    CHECK_FALSE(v.ranking.empty());
  }
}

TEST_CASE("a what-if with a power-limited clock: busier schedules slow down more, by the rule", "[plan]") {
  // The zero-communication case above (F = b = W, P = 4, M = 8: every rank busy M(F + B) = 24 ms)
  // with hardware.clock {duty_slope: 1, duty_ref: 0.5} in a what-if: each schedule's step is
  // scaled by 1 + (24 / step - 0.5). ZB-V 25.5 ms (duty 0.941): x 1.441 = 36.75 ms; ZB-H2 27 ms
  // (0.889): x 1.389 = 37.5 ms; 1F1B 33 ms (0.727): x 1.227 = 40.5 ms. The base is unchanged.
  const PlanResult r = plan(zero_comm_config(
      "plan: {search: {schedules: all}, whatif: {hot: {hardware.clock.duty_slope: 1, hardware.clock.duty_ref: 0.5}}}\n"));
  REQUIRE(r.variants.size() == 2);
  CHECK(best_of(r.variants[0], "zbv")->step_ns == 25 * kMs + kMs / 2);
  const VariantResult& hot = r.variants[1];
  auto step = [&](const char* f) { return static_cast<double>(best_of(hot, f)->step_ns); };
  CHECK_THAT(step("zbv"), Catch::Matchers::WithinRel(25.5e6 * (1 + 24.0 / 25.5 - 0.5), 1e-5));
  CHECK_THAT(step("zb-h2"), Catch::Matchers::WithinRel(27e6 * (1 + 24.0 / 27 - 0.5), 1e-5));
  CHECK_THAT(step("1f1b"), Catch::Matchers::WithinRel(33e6 * (1 + 24.0 / 33 - 0.5), 1e-5));
  CHECK(hot.ranking.front().schedule == "zbv");
}

TEST_CASE("plan with PyTorch's runtime: two-pipe families are that runtime's constraint, not a failure", "[plan]") {
  // parallel.p2p_runtime torch lowers one pipe (schedules/torch_p2p.h): DualPipe and Chimera are
  // refused by the runtime before any simulation, counted as a schedule constraint with its
  // reason; DualPipeV and interleaved 1F1B are planned with PyTorch's sends and receives.
  const char* yaml = R"(name: torch-runtime
model: {layers: 8, hidden: 256, ffn_hidden: 1024, heads: 4, vocab: 1000, seq_len: 64}
hardware: {name: h100, gpus: 4}
parallel: {pp: 4, microbatches: 8, p2p_runtime: torch}
plan:
  search: {schedules: [dualpipe, chimera, dualpipev, interleaved-1f1b]}
)";
  const VariantResult v = plan(yaml).variants[0];
  CHECK(rejected(v, Reason::schedule_constraint) == 2);
  CHECK(rejected(v, Reason::simulation_failed) == 0);
  CHECK(v.rejected[static_cast<std::size_t>(Reason::schedule_constraint)].example.find("2 pipes; PyTorch's runtime lowers one pipe") !=
        std::string::npos);
  CHECK(best_of(v, "dualpipev") != nullptr);
  CHECK(best_of(v, "interleaved-1f1b") != nullptr);
  CHECK(best_of(v, "dualpipe") == nullptr);
}

TEST_CASE("the reproduce command carries the command line's --set: compare gives the plan's step", "[plan]") {
  // Slower NVLink given with --set: the winner's reproduce sets start with it, and compare
  // with exactly those sets on the same file gives the row's step to the nanosecond.
  const std::string yaml = moe_config(200, "plan: {search: {schedules: [1f1b, zbv]}}");
  const std::vector<std::string> given = {"hardware.nvlink_gbps=50"};
  const PlanResult r = plan(yaml, 1, given);
  const VariantResult& v = r.variants.at(0);
  REQUIRE(!v.ranking.empty());
  const PlanRow& best = v.ranking.front();
  const std::vector<std::string> sets = reproduce_sets(v, best);
  CHECK(sets.front() == "hardware.nvlink_gbps=50");
  const std::string path =
      (std::filesystem::temp_directory_path() / fmt::format("ppsim_plan_repro_{}.yaml", ::getpid())).string();
  std::ofstream(path) << yaml;
  api::Request rq;
  rq.config = path;
  rq.sets = sets;
  rq.families = best.schedule;
  rq.single = true;
  const api::Result got = api::run(rq);
  std::filesystem::remove(path);
  CHECK(got.rows.front().metrics.makespan == best.step_ns);
  // Through a shard file and back (plan --merge), the sets stay.
  PlanOptions so;
  so.shard_count = 2;
  so.sets = given;
  const PlanResult shard =
      plan_from_json(render_plan_json(run_plan(load_config_text(yaml, "t.yaml", given), so)), "s.json");
  CHECK(shard.variants.at(0).given_sets == given);
}
