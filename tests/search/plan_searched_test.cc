// `plan` with `searched` among its schedules (src/plan/searched_family): the searched candidate
// is evaluated like a family, is never slower than the linear families it is searched against
// (1F1B and ZB-H1 fit its cap of P activations), and "all" still means the nine families.
#include <catch.h>

#include "cost/cost_model.h"
#include "plan/planner.h"

using namespace ppsim;

namespace {

const char* kConfig = R"(name: searched-plan
model: {layers: 8, hidden: 1024, ffn_hidden: 4096, heads: 8, vocab: 32000, seq_len: 256}
hardware: {name: test, peak_tflops: {bf16: 100}, hbm_gbps: 1000, hbm_gb: 80, nvlink_gbps: 400, network_gbps: 50, gpus: 4}
parallel: {pp: 4, microbatches: 8}
plan:
  search: {schedules: [1f1b, zb-h1, searched], microbatches: [8]}
)";

const PlanRow* best_of(const VariantResult& v, const std::string& schedule) {
  for (const PlanRow& r : v.best_per_schedule)
    if (r.schedule == schedule) return &r;
  return nullptr;
}

}  // namespace

TEST_CASE("plan: searched is a candidate family, never slower than 1F1B and ZB-H1", "[search][plan]") {
  PlanOptions opt;
  opt.jobs = 2;
  const PlanResult r = run_plan(load_config_text(kConfig, "t.yaml", {}), opt);
  REQUIRE(r.variants.size() == 1);
  const VariantResult& v = r.variants[0];
  const PlanRow* s = best_of(v, "searched");
  const PlanRow* a = best_of(v, "1f1b");
  const PlanRow* b = best_of(v, "zb-h1");
  REQUIRE(s != nullptr);
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  // The search is seeded with every family of the linear placement that fits P activations.
  REQUIRE(s->step_ns <= a->step_ns);
  REQUIRE(s->step_ns <= b->step_ns);
  // Same plan on one thread: the same searched step time (deterministic trials).
  opt.jobs = 1;
  const PlanResult r1 = run_plan(load_config_text(kConfig, "t.yaml", {}), opt);
  REQUIRE(best_of(r1.variants[0], "searched")->step_ns == s->step_ns);
}
