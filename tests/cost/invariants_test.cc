// The answer's invariants (src/cost/invariants.h, docs/INVARIANTS.md): each check against values
// worked out here, an answer that breaks one refused with exit 8 naming the input, and property
// tests: random valid requests (unit times and model configs) never give an answer that breaks one.
#include "cost/invariants.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "api/request.h"
#include "catch.h"
#include "core/error.h"
#include "cost/cost_model.h"
#include "plan/plan_report.h"
#include "plan/planner.h"
#include "sim/costs.h"
#include "test_util.h"

using namespace ppsim;

namespace {

constexpr Time U = kTicksPerUnit;

using test::error_of;

const AnswerSource kSrc{"t.yaml", ""};

// A dense model on a made-up 100 TFLOP/s GPU with 80 GB (the planner tests' hardware line).
std::string dense_config(int layers, int hidden, int pp, int microbatches, const std::string& extra = "",
                         const std::string& recompute = "none") {
  return fmt::format(R"(name: t
model: {{layers: {}, hidden: {}, ffn_hidden: {}, heads: 16, vocab: 1000, seq_len: 256}}
hardware: {{name: test, peak_tflops: {{bf16: 100}}, hbm_gbps: 1000, hbm_gb: 80, nvlink_gbps: 400, network_gbps: 50, gpus: {}}}
parallel: {{pp: {}, microbatches: {}, schedule: all, recompute: {}}}
{})",
                     layers, hidden, 4 * hidden, pp, pp, microbatches, recompute, extra);
}

api::Result run_config(const std::string& yaml) {
  api::Request req;
  req.loaded_config = load_config_text(yaml, "t.yaml", {});
  req.config_name = "t.yaml";
  return api::run(req);
}

}  // namespace

TEST_CASE("chain bound: one micro-batch's F and I through every slice", "[invariants]") {
  // 4 slices of F = 1, B = 2 (I = B - W = 1), W = 1: the chain is 4 x (1 + 1) = 8 units.
  SimCosts c = uniform_costs(4, SliceCosts{U, 2 * U, U, 3 * U});
  CHECK(chain_bound(c) == 8 * U);
  // Without a split backward (W = 0) the input gradient is all of B: 4 x (1 + 2) = 12.
  c = uniform_costs(4, SliceCosts{U, 2 * U, 0, 3 * U});
  CHECK(chain_bound(c) == 12 * U);
}

TEST_CASE("check_timing refuses a step shorter than its chain, naming the input", "[invariants]") {
  Schedule s;
  s.family = "1f1b";
  s.pp = 2;
  s.ranks.resize(2);
  const SimCosts c = uniform_costs(2, SliceCosts{U, 2 * U, 0, 3 * U});  // chain: 2 x 3 = 6 units
  ScheduleMetrics m;
  m.schedule = "1f1b";
  m.makespan = 5 * U;
  m.compute = {3 * U, 3 * U};
  m.bubble = {2 * U, 2 * U};
  const AnswerSource units{"--times F=1,B=2", ""};
  const auto [code, msg] = error_of([&] { check_timing(s, c, m, units); });
  CHECK(code == kExitInvariant);
  CHECK_THAT(msg, PPSIM_CONTAINS("--times F=1,B=2"));
  CHECK_THAT(msg, PPSIM_CONTAINS("shorter than one micro-batch's forward and input-gradient chain"));
  m.makespan = 6 * U;  // exactly the chain: allowed
  CHECK(error_of([&] { check_timing(s, c, m, units); }).first == 0);
  m.compute = {7 * U, 3 * U};  // a rank computing longer than the step
  CHECK_THAT(error_of([&] { check_timing(s, c, m, units); }).second, PPSIM_CONTAINS("rank 0 computes for"));
}

TEST_CASE("check_global_batch: micro-batches x mbs x dp = global batch", "[invariants]") {
  // Megatron-LM's --global-batch-size 512 on 64 GPUs at TP2 PP4: dp = 64 / 8 = 8, so 64
  // micro-batches of 1; 512 micro-batches would be 4096 sequences.
  CHECK(error_of([] { check_global_batch(64, 1, 8, 512, kSrc); }).first == 0);
  const auto [code, msg] = error_of([] { check_global_batch(512, 1, 8, 512, kSrc); });
  CHECK(code == kExitInvariant);
  CHECK(msg ==
        "t.yaml: the answer breaks an invariant: 512 micro-batches x micro-batch size 1 x dp 8 = 4096 sequences, "
        "not the global batch of 512");
  CHECK(error_of([] { check_global_batch(512, 1, 8, 0, kSrc); }).first == 0);  // none stated
}

TEST_CASE("check_parts_add_up and over_capacity_ranks", "[invariants]") {
  CHECK(error_of([] { check_parts_add_up("params", 10, {{"a", 4}, {"b", 6}}, kSrc); }).first == 0);
  CHECK_THAT(error_of([] {
               check_parts_add_up("params", 11, {{"a", 4}, {"b", 6}}, kSrc);
             }).second,
             PPSIM_CONTAINS("params: its parts add up to 10, not its total 11"));
  CHECK_THAT(error_of([] {
               check_parts_add_up("params", 2, {{"a", 4}, {"b", -2}}, kSrc);
             }).second,
             PPSIM_CONTAINS("its b is -2"));
  CHECK(over_capacity_ranks({70e9, 81e9, 80e9, 95e9}, 80e9) == std::vector<int>{1, 3});
  CHECK(over_capacity_ranks({70e9, 81e9}, 0).empty());  // capacity unknown: nothing flagged
}

TEST_CASE("a config whose explicit times beat the GPU's peak is refused, exit 8", "[invariants]") {
  // One layer's forward is 2 x 12 h^2 x tokens FLOPs (+ attention): at h = 2048, s = 256, about
  // 26 GFLOP per layer, 0.26 ms at 100 TFLOP/s. Eight layers on two ranks in 1 us per op: MFU >> 1.
  const std::string yaml = dense_config(8, 2048, 2, 8, "times: {F: 0.001, B: 0.002}");
  const auto [code, msg] = error_of([&] { (void)run_config(yaml); });
  CHECK(code == kExitInvariant);
  CHECK_THAT(msg, PPSIM_CONTAINS("t.yaml: the answer breaks an invariant:"));
  CHECK_THAT(msg, PPSIM_CONTAINS("above the GPU's peak of 100"));
}

TEST_CASE("memory over the GPU's capacity is flagged in the table, JSON and CSV", "[invariants]") {
  // 32 layers of h = 4096 on 2 ranks: 16 x 201 M parameters x 18 bytes = 58 GB of weights and
  // states per rank before activations; at 40 GB of memory every rank is over.
  std::string yaml = dense_config(32, 4096, 2, 4);
  yaml.replace(yaml.find("hbm_gb: 80"), 10, "hbm_gb: 40");
  api::Request req;
  req.loaded_config = load_config_text(yaml, "t.yaml", {});
  req.families = "1f1b";
  const api::Result r = api::run(req);
  REQUIRE(r.rows.size() == 1);
  const PhysicalResult& p = r.rows[0].physical;
  CHECK(p.memory_capacity_bytes == 40e9);
  CHECK(p.over_capacity_ranks == std::vector<int>{0, 1});
  const std::string table = render_table(r.rows, r.skipped, r.scale);
  CHECK_THAT(table, PPSIM_CONTAINS("! over the GPU's memory of 40.0 GB (hardware.hbm_gb):"));
  CHECK_THAT(table, PPSIM_CONTAINS("1f1b: ranks 0 1"));
  const nlohmann::json j = api::to_json(r);
  CHECK(j["results"][0]["over_capacity_ranks"] == nlohmann::json::array({0, 1}));
  CHECK(j["results"][0]["memory_capacity_bytes"] == 40e9);
  CHECK_THAT(render_csv(r.rows, r.scale), PPSIM_CONTAINS(",40000000000,0 1\n"));
}

TEST_CASE("plan with nothing feasible names the nearest change", "[invariants][plan]") {
  // The same 2-rank model under a 1 GB cap: its weights, gradients and optimizer states alone are
  // over it, so no candidate is simulated and the nearest names a lower bound, not a cap to allow.
  auto plan_at = [](const std::string& cap) {
    const std::string yaml = dense_config(4, 2048, 2, 4, R"(plan:
  search: {schedules: [1f1b, zb-h1], microbatches: [4]}
  constraints: {memory_gb: )" + cap + "}");
    PlanOptions opt;
    opt.jobs = 1;
    return run_plan(load_config_text(yaml, "t.yaml", {}), opt);
  };
  const PlanResult r = plan_at("1");
  REQUIRE(r.variants.size() == 1);
  const VariantResult& v = r.variants[0];
  CHECK(v.feasible.empty());
  REQUIRE(v.nearest.any);
  CHECK_FALSE(v.nearest.simulated);
  CHECK(v.nearest.need_bytes > 1e9);
  const std::string text = render_plan_table(r);
  CHECK_THAT(text, PPSIM_CONTAINS("nearest change: #"));
  CHECK_THAT(text, PPSIM_CONTAINS("needs at least"));
  // Just above those states: the candidate is simulated, and its peak (activations too) is over the
  // cap; now the hint names the cap it needs, and that cap gives a plan.
  const double states_gb = v.nearest.need_bytes / 1e9;
  const PlanResult over = plan_at(fmt::format("{:.3f}", states_gb + 0.001));
  const VariantResult& o = over.variants[0];
  REQUIRE(o.feasible.empty());
  REQUIRE(o.nearest.simulated);
  CHECK(o.nearest.need_bytes > v.nearest.need_bytes);
  const double allow = std::ceil(o.nearest.need_bytes / 1e8) / 10.0;
  CHECK_THAT(render_plan_table(over), PPSIM_CONTAINS(fmt::format("allow {:g} GB per GPU", allow)));
  CHECK_FALSE(plan_at(fmt::format("{:g}", allow)).variants[0].feasible.empty());
}

TEST_CASE("property: random unit-time requests never break an invariant", "[invariants][property]") {
  std::mt19937 rng(20261128);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int rows = 0;
  for (int trial = 0; trial < 120; ++trial) {
    api::Request req;
    const int pp = 2 * pick(1, 4);
    req.schedule.pp = pp;
    req.schedule.microbatches = pp * pick(1, 4);
    const int f = pick(1, 4), b = pick(f, 3 * f), w = pick(0, b);
    req.units.times = UniformTimes{f * U, b * U, w * U, (f + b) * U};
    req.units.p2p_latency = pick(0, 2) * 0.25;
    if (trial % 3 == 0) {  // the overlap model: all-to-all and layers
      req.units.a2a = pick(0, 4) * 0.25;
      req.units.layers = 4;
    }
    INFO("trial " << trial << ": pp " << pp << " m " << req.schedule.microbatches.value_or(0) << " F=" << f
                  << ",B=" << b << ",W=" << w);
    api::Result r;
    const auto [code, msg] = error_of([&] { r = api::run(req); });
    INFO(msg);
    REQUIRE(code != kExitInvariant);
    if (code != 0) continue;  // a value the request refuses (e.g. --layers for a V) is not an answer
    for (const ResultRow& row : r.rows) {
      const ScheduleMetrics& m = row.metrics;
      ++rows;
      for (std::size_t k = 0; k < m.compute.size(); ++k) {
        CHECK(m.compute[k] <= m.makespan);
        CHECK(m.bubble[k] == m.makespan - m.compute[k] - m.exposed_comm[k]);
      }
      for (int a : m.peak_activations) CHECK(a >= 0);
    }
  }
  CHECK(rows > 400);  // the families that apply to the drawn P and M, over 120 trials
}

TEST_CASE("property: random model configs never break an invariant", "[invariants][property]") {
  std::mt19937 rng(43);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const char* recompute[] = {"none", "selective", "full"};
  int rows = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const int pp = 2 * pick(1, 2);
    const int layers = pp * 2 * pick(1, 3);
    const int hidden = 512 * pick(1, 4);
    const std::string y = dense_config(layers, hidden, pp, pp * pick(1, 3), "", recompute[pick(0, 2)]);
    INFO(y);
    api::Result r;
    const auto [code, msg] = error_of([&] { r = run_config(y); });
    INFO(msg);
    REQUIRE(code == 0);
    for (const ResultRow& row : r.rows) {
      const PhysicalResult& p = row.physical;
      ++rows;
      CHECK(p.mfu > 0);
      CHECK(p.mfu <= 1);
      std::vector<int> over;
      for (std::size_t k = 0; k < p.peak_memory_bytes.size(); ++k) {
        const MemoryBreakdown& b = p.memory[k];
        CHECK(b.total ==
              Approx(b.weights + b.gradients + b.optimizer + b.ema + b.activations + b.comm_buffers + b.workspace));
        if (p.peak_memory_bytes[k] > 80e9) over.push_back(static_cast<int>(k));
      }
      CHECK(p.over_capacity_ranks == over);
    }
  }
  CHECK(rows > 24);
}
