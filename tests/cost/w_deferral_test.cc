// ZB-H1's weight-grad deferral under its memory rule (src/cost/w_deferral.h): rank r defers
// d_r = max(0, floor((r + 1) / rho) - 1) W's where a deferred W holds rho = M_W / M_B > 1 times
// what its forward kept, so that ZB-H1 holds no more than P * M_B, as the Zero Bubble paper defines it.
#include "cost/w_deferral.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "catch.h"
#include "cost/config.h"
#include "cost/cost_model.h"
#include "cost/layer_split.h"
#include "cost/memory.h"
#include "schedules/generators.h"
#include "schedules/registry.h"

using namespace ppsim;

namespace {

// The most W's pending (I done, W not yet) on each rank, walking its order.
std::vector<int> max_pending_w(const Schedule& s) {
  std::vector<int> out;
  for (const auto& rank : s.ranks) {
    int pending = 0, most = 0;
    for (const Action& a : rank)
      for (int k = 0; k < a.size(); ++k) {
        if (a.op(k).kind == OpKind::I) most = std::max(most, ++pending);
        if (a.op(k).kind == OpKind::W) --pending;
      }
    out.push_back(most);
  }
  return out;
}

// DeepSeek-V2's layer (MLA, 160 experts top-6, 2 shared; its HF config.json) with V3's recompute of
// norms, MLA up-projections and SwiGLU: the forward keeps less than its GEMMs' inputs and output-grads.
const char* kMla = R"(
model: {layers: 16, dense_layers_first: 0, hidden: 5120, heads: 128, vocab: 102400, seq_len: 4096,
        mla: {q_lora_rank: 1536, kv_lora_rank: 512, qk_nope_head_dim: 128, qk_rope_head_dim: 64, v_head_dim: 128},
        moe: {experts: 160, top_k: 6, shared_experts: 2, expert_ffn_hidden: 1536}}
hardware: {name: h800}
parallel: {pp: 8, microbatches: 16, schedule: zb-h1, recompute_ops: [norm, mla_up_proj, act_fn]}
)";

}  // namespace

TEST_CASE("zb-h1: rank r defers r W's, or the cap given", "[schedules][zb]") {
  // The paper's order: after steady iteration i >= r each rank runs one W, so r are pending
  // (r + 1 for the instant between an I and its W).
  const Schedule full = make_schedule("zb-h1", ScheduleParams{4, 8, 0, 0});
  CHECK(max_pending_w(full) == std::vector<int>{1, 2, 3, 4});
  const Schedule capped = generate_zb_h1_deferral(ScheduleParams{4, 8, 1, 0}, {0, 0, 1, 9});
  CHECK(max_pending_w(capped) == std::vector<int>{1, 1, 2, 4});  // a cap over r stays r
  // Every op still runs once: 3 per micro-batch and rank.
  for (const auto& rank : capped.ranks) CHECK(rank.size() == 3u * 8u);
}

TEST_CASE("w_deferral: a GPT layer's W holds no more than its forward kept: nothing capped", "[cost][zb]") {
  const ModelConfigData c = parse_config(
      "model: {layers: 8, hidden: 1024, ffn_hidden: 4096, heads: 16, vocab: 32000, seq_len: 2048}\n"
      "hardware: {name: h100}\nparallel: {pp: 4, microbatches: 8, schedule: zb-h1}\n",
      "gpt.yaml", "", {});
  const WDeferral d = zb_h1_w_deferral(c, 4);
  CHECK_FALSE(d.capped);
  CHECK(d.max_pending == std::vector<int>{0, 1, 2, 3});
  for (double rho : d.ratio) CHECK(rho <= 1.0);
  const Schedule s = make_schedule("zb-h1", ScheduleParams{4, 8, 0, 0});
  std::string note = "not cleared";
  CHECK(with_w_deferral(c, s, &note).ranks == s.ranks);
  CHECK(note.empty());
}

TEST_CASE("w_deferral: MLA + MoE with recompute keeps ZB-H1 within P * M_B", "[cost][zb]") {
  const ModelConfigData c = parse_config(kMla, "mla.yaml", "", {});
  const std::vector<SliceLayout> slices = slice_layouts(c, 8);
  const WDeferral d = zb_h1_w_deferral(c, 8);
  REQUIRE(d.capped);
  for (int r = 0; r < 8; ++r) {
    const double mb = slice_activation_bytes(c, slices[r]), mw = slice_wgrad_bytes(c, slices[r]);
    const double rho = mw / mb;
    REQUIRE(rho > 1);
    CHECK(d.max_pending[r] == std::max(0, static_cast<int>(std::floor((r + 1) / rho)) - 1));
    // Both bounds of the header's derivation hold for the d chosen, and d + 1 would break one.
    const int dr = d.max_pending[r];
    CHECK((8 - r) * mb + dr * mw <= 8 * mb * (1 + 1e-12));
    CHECK((8 - r - 1) * mb + (dr + 1) * mw <= 8 * mb * (1 + 1e-12) + (dr == 0 ? mw : 0));
    if (dr + 1 <= r) CHECK((8 - r - 1) * mb + (dr + 2) * mw > 8 * mb);
  }
  // The order the config runs: each rank's pending W's peak at d_r + 1 (d_r between I's).
  const ModelConfig cfg{std::make_shared<const ModelConfigData>(c)};
  const Schedule run = as_run(cfg, make_schedule("zb-h1", ScheduleParams{8, 16, 0, 0}));
  std::vector<int> expect;
  for (int r = 0; r < 8; ++r) expect.push_back(d.max_pending[r] + 1);
  CHECK(max_pending_w(run) == expect);
  std::string note;
  (void)with_w_deferral(c, run, &note);
  CHECK(note.find("parallel.w_deferral: full") != std::string::npos);
  // parallel.w_deferral: full keeps the paper's order.
  const ModelConfigData full = parse_config(kMla, "mla.yaml", "", {"parallel.w_deferral=full"});
  CHECK_FALSE(zb_h1_w_deferral(full, 8).capped);
  const ModelConfig full_cfg{std::make_shared<const ModelConfigData>(full)};
  const Schedule paper = make_schedule("zb-h1", ScheduleParams{8, 16, 0, 0});
  CHECK(as_run(full_cfg, paper).ranks == paper.ranks);
  CHECK(max_pending_w(paper) == std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8});
}
