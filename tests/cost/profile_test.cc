// Cost profiles (cost/profile.h): version 2's sub-op times and comm slowdown, version 1 still
// read, the writer's output read back, a v2 profile reaching the overlap model, and one applied
// to the MoE layers only.
#include "cost/profile.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "catch.h"
#include "cost/cost_model.h"
#include "cost/derive.h"
#include "schedules/registry.h"

using namespace ppsim;

namespace {
const char* kV2 = R"(version: 2
device: "test"
per_layer: true
sub_ops_ms:
  attention: {F: 1.0, I: 2.0, W: 0.5}
  mlp: {F: 3.0, I: 4.0, W: 1.5}
  dispatch: {F: 0.25, B: 0.75}
  combine: {F: 0.5, B: 1.25}
comm_slowdown: {attention: 1.1, mlp: 1.2}
comm_sm_fraction: 0.15
)";
constexpr Time kMs = 1000000;
}  // namespace

TEST_CASE("profile v2: sub-op times per pass and direction, op_ms from their sums", "[cost][profile]") {
  const CostProfile p = parse_profile(kV2, "p.yaml");
  REQUIRE(p.sub_ops);
  REQUIRE(p.sub_ops->attn_b == 2 * kMs);
  REQUIRE(p.sub_ops->mlp_w == 1500000);
  REQUIRE(p.sub_ops->dispatch_b == 750000);
  REQUIRE(p.sub_ops->combine == 500000);
  // F = 1 + 3 + 0.25 + 0.5 = 4.75; W = 0.5 + 1.5 = 2; B = 2 + 4 + 0.75 + 1.25 + W = 10.
  REQUIRE(p.op.f == 4750000);
  REQUIRE(p.op.w == 2 * kMs);
  REQUIRE(p.op.b == 10 * kMs);
  REQUIRE(p.attn_comm_slowdown == Approx(1.1));
  REQUIRE(p.mlp_comm_slowdown == Approx(1.2));
  REQUIRE(p.comm_sm_fraction == Approx(0.15));
}

TEST_CASE("profile v1 is still read, and v2 keys need version 2", "[cost][profile]") {
  const CostProfile p = parse_profile("version: 1\nop_ms: {F: 1, B: 2, W: 1, FB: 2.5}\n", "v1.yaml");
  REQUIRE_FALSE(p.sub_ops);
  REQUIRE(p.op.fb == 2500000);
  REQUIRE(p.attn_comm_slowdown == 0);
  try {
    parse_profile("version: 1\nop_ms: {F: 1, B: 2}\nsub_ops_ms: {mlp: {F: 1}}\n", "v1.yaml");
    FAIL("v1 with sub_ops_ms accepted");
  } catch (const InputError& e) {
    REQUIRE(e.loc().line == 3);
    REQUIRE(std::string(e.what()).find("version: 2") != std::string::npos);
  }
  // A slowdown below 1 would make compute faster beside communication.
  REQUIRE_THROWS_AS(parse_profile("version: 2\nop_ms: {F: 1, B: 2}\ncomm_slowdown: {mlp: 0.9}\n", "x"), InputError);
}

TEST_CASE("render_profile reads back to the same profile", "[cost][profile]") {
  const CostProfile p = parse_profile(kV2, "p.yaml");
  const CostProfile q = parse_profile(render_profile(p, "# header\n"), "q.yaml");
  REQUIRE(q.sub_ops);
  REQUIRE(q.sub_ops->attn_f == p.sub_ops->attn_f);
  REQUIRE(q.sub_ops->combine_b == p.sub_ops->combine_b);
  REQUIRE(q.op.b == p.op.b);
  REQUIRE(q.mlp_comm_slowdown == Approx(p.mlp_comm_slowdown).margin(1e-4));
}

TEST_CASE("a v2 profile drives the overlap model of a config", "[cost][profile]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("ppsim_profile_test_{}", ::getpid());
  fs::create_directories(dir);
  std::ofstream(dir / "p.yaml") << kV2;
  const std::string cfg_text = R"(model: {layers: 4, hidden: 1024, heads: 8, vocab: 32000, seq_len: 1024,
  moe: {experts: 8, top_k: 2, expert_ffn_hidden: 1024}}
hardware: {name: h100}
parallel: {pp: 2, microbatches: 4, schedule: 1f1b, embedding_on_first: false, head_on_last: false}
profile: p.yaml
)";
  std::ofstream(dir / "c.yaml") << cfg_text;
  const ModelConfig cfg = load_config((dir / "c.yaml").string(), {});
  const Schedule s = make_schedule("1f1b", resolve_params(find_family("1f1b"), ScheduleParams{2, 4, 0, 0}));
  const SimCosts c = derive_costs(cfg, s);
  fs::remove_all(dir);
  // Two slices of 4 / 2 = 2 layers, each layer the profile's sub-ops, the slowdowns carried.
  REQUIRE(c.moe.size() == 2);
  REQUIRE(c.moe[0].layers == 2);
  REQUIRE(c.moe[0].mlp_f == 3 * kMs);
  REQUIRE(c.moe[0].dispatch_b == 750000);
  REQUIRE(c.moe[1].attn_comm_slowdown == Approx(1.1));
  REQUIRE(c.slice[0].f == 2 * 4750000);         // per-layer F x 2 layers
  REQUIRE(c.comm_sm_fraction == Approx(0.15));  // the profile's SM share is the linear rule's sigma
}

TEST_CASE("recompute: included: a measured MoE layer's backward holds the run's recompute, none is added", "[cost][profile]") {
  // Layers 0 dense, 1-3 MoE, pp 2: slice 0 holds the dense layer and MoE layer 1, slice 1 MoE
  // layers 2 and 3. recompute_ops [norm]: each layer re-runs its two norms before its backward.
  // recompute: derived (the default) adds them to every layer; included drops them from the MoE
  // layers (the profile's backward holds them) and keeps the dense layer's: slice 1 loses its
  // whole recompute, slice 0 half of it (the two layers' norms are the same work).
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("ppsim_profile_recompute_test_{}", ::getpid());
  fs::create_directories(dir);
  std::ofstream(dir / "derived.yaml") << std::string(kV2) + "applies_to: moe_layers\n";
  std::ofstream(dir / "included.yaml") << std::string(kV2) + "applies_to: moe_layers\nrecompute: included\n";
  const std::string model = R"(model: {layers: 4, hidden: 1024, ffn_hidden: 4096, heads: 8, vocab: 32000, seq_len: 1024,
  dense_layers_first: 1, moe: {experts: 8, top_k: 2, expert_ffn_hidden: 1024}}
hardware: {name: h100}
parallel: {pp: 2, microbatches: 4, schedule: 1f1b, recompute_ops: [norm]}
)";
  std::ofstream(dir / "a.yaml") << model + "profile: derived.yaml\n";
  std::ofstream(dir / "b.yaml") << model + "profile: included.yaml\n";
  const CostFigures a = cost_figures(*load_config((dir / "a.yaml").string(), {}).data, 2);
  const CostFigures b = cost_figures(*load_config((dir / "b.yaml").string(), {}).data, 2);
  REQUIRE(a.slices[1].recompute_ns > 0);
  CHECK(b.slices[1].recompute_ns == 0);
  CHECK(b.slices[0].recompute_ns == Approx(a.slices[0].recompute_ns / 2));
  CHECK(a.slices[1].total.b - b.slices[1].total.b == Approx(a.slices[1].recompute_ns));
  CHECK(b.slices[1].total.f == a.slices[1].total.f);
  // A whole-model profile with it (import-trace of a run with activation checkpointing) stands
  // for that run: a config must say it recomputed (here recompute: full), and its times are taken
  // as they are (the slices' B as with the same profile unmarked and no recompute: nothing
  // added); a config that recomputes nothing is refused, one line at its profile key.
  std::ofstream(dir / "whole.yaml") << std::string(kV2) + "recompute: included\n";
  CHECK(parse_profile(std::string(kV2) + "recompute: included\n", "q.yaml").recompute_included);
  const std::string whole = R"(model: {layers: 4, hidden: 1024, ffn_hidden: 4096, heads: 8, vocab: 32000, seq_len: 1024}
hardware: {name: h100}
profile: whole.yaml
)";
  std::ofstream(dir / "c.yaml") << whole + "parallel: {pp: 2, microbatches: 4, schedule: 1f1b}\n";
  std::ofstream(dir / "d.yaml") << whole + "parallel: {pp: 2, microbatches: 4, schedule: 1f1b, recompute: full}\n";
  try {
    (void)load_config((dir / "c.yaml").string(), {});
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.loc().line == 3);
    CHECK(e.message().find("recompute: included") != std::string::npos);
    CHECK(e.message().find("parallel.recompute is none") != std::string::npos);
  }
  std::ofstream(dir / "plain.yaml") << kV2;
  std::ofstream(dir / "e.yaml") << R"(model: {layers: 4, hidden: 1024, ffn_hidden: 4096, heads: 8, vocab: 32000, seq_len: 1024}
hardware: {name: h100}
profile: plain.yaml
parallel: {pp: 2, microbatches: 4, schedule: 1f1b}
)";
  const Schedule s = make_schedule("1f1b", resolve_params(find_family("1f1b"), ScheduleParams{2, 4, 0, 0}));
  const SimCosts with = derive_costs(load_config((dir / "d.yaml").string(), {}), s);
  const SimCosts without = derive_costs(load_config((dir / "e.yaml").string(), {}), s);
  CHECK(with.slice[0].b == without.slice[0].b);
  CHECK(with.slice[1].b == without.slice[1].b);
  CHECK(parse_profile(render_profile(parse_profile(std::string(kV2) + "applies_to: moe_layers\nrecompute: included\n", "p.yaml")),
                      "r.yaml").recompute_included);
  CHECK_THROWS_AS(parse_profile(std::string(kV2) + "applies_to: moe_layers\nrecompute: yes\n", "q.yaml"), InputError);
  fs::remove_all(dir);
}

TEST_CASE("applies_to: moe_layers: the MoE layers take the profile's sub-ops, the rest stays derived", "[cost][profile]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / fmt::format("ppsim_profile_moe_test_{}", ::getpid());
  fs::create_directories(dir);
  std::ofstream(dir / "p.yaml") << std::string(kV2) + "applies_to: moe_layers\n";
  // Layer 0 dense, layers 1-3 MoE; the embedding on slice 0, the head on slice 1.
  const std::string model = R"(model: {layers: 4, hidden: 1024, ffn_hidden: 4096, heads: 8, vocab: 32000, seq_len: 1024,
  dense_layers_first: 1, moe: {experts: 8, top_k: 2, expert_ffn_hidden: 1024}}
hardware: {name: h100}
parallel: {pp: 2, microbatches: 4, schedule: 1f1b}
)";
  std::ofstream(dir / "c.yaml") << model + "profile: p.yaml\n";
  std::ofstream(dir / "d.yaml") << model;
  const ModelConfig with = load_config((dir / "c.yaml").string(), {});
  const ModelConfig without = load_config((dir / "d.yaml").string(), {});
  const CostFigures fp = cost_figures(*with.data, 2), f0 = cost_figures(*without.data, 2);
  REQUIRE(fp.slices.size() == 2);
  REQUIRE(fp.slices[0].layers.size() == 2);
  // The dense layer, the embedding and the head: derived, as without the profile.
  const LayerFigures& dense = fp.slices[0].layers[0];
  CHECK_FALSE(dense.moe);
  CHECK(dense.attention.f == f0.slices[0].layers[0].attention.f);
  CHECK(dense.mlp.b == f0.slices[0].layers[0].mlp.b);
  CHECK(fp.slices[0].embedding.f == f0.slices[0].embedding.f);
  CHECK(fp.slices[1].head.b == f0.slices[1].head.b);
  CHECK(fp.slices[1].head.f > 0);
  // An MoE layer: the profile's times (B = I + W), against derived ones that differ.
  const LayerFigures& moe = fp.slices[0].layers[1];
  REQUIRE(moe.moe);
  CHECK(moe.attention.f == 1.0 * kMs);
  CHECK(moe.attention.b == 2.5 * kMs);
  CHECK(moe.mlp.w == 1.5 * kMs);
  CHECK(moe.combine_ns == 0.5 * kMs);
  CHECK(moe.dispatch_grad_ns == 0.75 * kMs);
  CHECK(f0.slices[0].layers[1].attention.f != moe.attention.f);
  // Slice 1: two measured layers (F 1 + 3 + 0.25 + 0.5 = 4.75 ms each) and the derived head.
  CHECK(fp.slices[1].total.f == Approx(2 * 4.75 * kMs + f0.slices[1].head.f));
  const Schedule s = make_schedule("1f1b", resolve_params(find_family("1f1b"), ScheduleParams{2, 4, 0, 0}));
  const SimCosts c = derive_costs(with, s);
  REQUIRE(c.moe.size() == 2);
  CHECK(c.slice[1].f == std::llround(fp.slices[1].total.f));
  CHECK(c.moe[1].attn_comm_slowdown == Approx(1.1));  // the measured SM sharing is carried
  CHECK(c.comm_sm_fraction == Approx(0.15));
  // A dense model cannot take it (error at the config's profile key), nor can a profile without
  // sub-op times or with parts other than the MoE layers (errors in the profile).
  std::ofstream(dir / "dense.yaml") << R"(model: {layers: 4, hidden: 1024, ffn_hidden: 4096, heads: 8, vocab: 32000, seq_len: 1024}
hardware: {name: h100}
parallel: {pp: 2, microbatches: 4}
profile: p.yaml
)";
  try {
    (void)load_config((dir / "dense.yaml").string(), {});
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.loc().line == 4);
    CHECK(e.message().find("no MoE layers") != std::string::npos);
  }
  fs::remove_all(dir);
  try {
    (void)parse_profile("version: 2\nop_ms: {F: 1, B: 2, W: 1}\napplies_to: moe_layers\n", "q.yaml");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.loc().line == 3);
    CHECK(e.message().find("needs sub_ops_ms") != std::string::npos);
  }
  try {
    (void)parse_profile(std::string(kV2) + "applies_to: moe_layers\nhead_ms: {F: 1, B: 2, W: 1}\n", "q.yaml");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.loc().line == 12);  // kV2's 10 lines, applies_to, then head_ms
    CHECK(e.message().find("only the MoE layers") != std::string::npos);
  }
  // render_profile keeps it.
  CHECK(parse_profile(render_profile(parse_profile(std::string(kV2) + "applies_to: moe_layers\n", "p.yaml")), "r.yaml").moe_layers_only);
}
