// `ppsim model` (src/api/model.cc): parameters by part derived here by hand from the published
// configs in configs/hf/, checked against the published totals within 1%, FLOPs per token and
// the parameters per stage.
#include "api/model.h"

#include <unistd.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "catch.h"
#include "core/error.h"
#include "cost/memory.h"
#include "model_part.h"

using namespace ppsim;
using ppsim::test::part;

namespace {

const std::string kHf = std::string(PPSIM_SOURCE_DIR) + "/configs/hf/";

api::ModelReport report(const std::string& file, int pp = 0) {
  api::ModelRequest req;
  req.path = kHf + file;
  if (pp > 0) req.pp = pp;
  return api::model_report(req);
}

bool within(double x, double published, double tol = 0.01) { return std::abs(x - published) <= tol * published; }

}  // namespace

TEST_CASE("model: Llama-3-8B, each part by hand, 8.03B", "[api][model]") {
  const api::ModelReport r = report("llama-3-8b.json");
  const double h = 4096, L = 32, V = 128256, a = 32, g = 8, d = 128, f = 14336;
  CHECK(part(r, "embedding") == V * h);                                  // 525,336,576
  CHECK(part(r, "attention") == L * (h * (a + 2 * g) * d + a * d * h));  // 32 x 41,943,040
  CHECK(part(r, "dense_mlp") == L * 3 * h * f);                          // 32 x 176,160,768
  CHECK(part(r, "norms") == L * 2 * h + h);                              // RMSNorm: h each, 2 per layer + final
  CHECK(part(r, "head") == V * h);
  CHECK(part(r, "routed_experts") == 0);
  CHECK(r.total == 8030261248.0);
  CHECK(r.active == r.total);
  CHECK(within(r.total, 8.03e9));
  // The parts add up to the count every memory figure uses.
  CHECK(r.total == model_params(r.config.model));
}

TEST_CASE("model: Llama-3-70B 70.6B", "[api][model]") {
  const api::ModelReport r = report("llama-3-70b.json");
  const double h = 8192, L = 80, V = 128256, a = 64, g = 8, d = 128, f = 28672;
  const double layer = h * (a + 2 * g) * d + a * d * h + 3 * h * f + 2 * h;  // 855,654,400
  CHECK(r.total == L * layer + 2 * V * h + h);                               // 70,553,706,496
  CHECK(within(r.total, 70.6e9));
}

TEST_CASE("model: Mixtral-8x7B 46.7B total, 12.9B active (top-2 of 8 experts)", "[api][model]") {
  const api::ModelReport r = report("mixtral-8x7b.json");
  const double h = 4096, L = 32, V = 32000, a = 32, g = 8, d = 128, fe = 14336, E = 8, k = 2;
  const double expert = 3 * h * fe;  // 176,160,768
  CHECK(part(r, "routed_experts") == L * E * expert);
  CHECK(part(r, "routed_experts", true) == L * k * expert);
  CHECK(part(r, "router") == L * h * E);
  CHECK(part(r, "dense_mlp") == 0);
  const double shared = L * (h * (a + 2 * g) * d + a * d * h + h * E + 2 * h) + 2 * V * h + h;
  CHECK(r.total == shared + L * E * expert);   // 46,702,792,704
  CHECK(r.active == shared + L * k * expert);  // 12,879,925,248
  CHECK(within(r.total, 46.7e9));
  CHECK(within(r.active, 12.9e9));
}

TEST_CASE("model: DeepSeek-V3 671B total, active 37.55B against the published 37B, MTP apart", "[api][model]") {
  const api::ModelReport r = report("deepseek-v3.json");
  const double h = 7168, L = 61, dense = 3, V = 129280, a = 128, qr = 1536, kvr = 512, dn = 128, dr = 64, dv = 128;
  const double f = 18432, fe = 2048, E = 256, k = 8, shared_e = 1;
  // MLA: h.qr + qr.a(dn+dr) + norm(qr) + h(kvr+dr) + kvr.a(dn+dv) + norm(kvr) + a.dv.h = 187,105,280
  const double attn = h * qr + qr * a * (dn + dr) + qr + h * (kvr + dr) + kvr * a * (dn + dv) + kvr + a * dv * h;
  CHECK(part(r, "attention") == L * attn);
  CHECK(part(r, "dense_mlp") == dense * 3 * h * f);
  CHECK(part(r, "routed_experts") == (L - dense) * E * 3 * h * fe);
  CHECK(part(r, "routed_experts", true) == (L - dense) * k * 3 * h * fe);
  CHECK(part(r, "shared_experts") == (L - dense) * shared_e * 3 * h * fe);
  // The router: h x E and a score-correction bias per expert (topk_method noaux_tc).
  CHECK(part(r, "router") == (L - dense) * (h * E + E));
  const double total = L * (attn + 2 * h) + dense * 3 * h * f + (L - dense) * (E + shared_e) * 3 * h * fe +
                       (L - dense) * (h * E + E) + 2 * V * h + h;
  CHECK(r.total == total);
  CHECK(within(r.total, 671e9));
  // Active: 37.55B with the embedding and the head; the published "37B" is rounded (36.63B
  // without the embedding lookup): within 2%.
  const double active = total - (L - dense) * (E - k) * 3 * h * fe;
  CHECK(r.active == active);
  CHECK(within(r.active, 37e9, 0.02));
  // MTP: one more MoE layer, a 2h x h projection and 3 norms, outside the totals.
  CHECK(part(r, "mtp") == attn + 2 * h + (E + shared_e) * 3 * h * fe + h * E + E + 2 * h * h + 3 * h);
}

TEST_CASE("model: Qwen3-235B-A22B 235B total, 22B active", "[api][model]") {
  const api::ModelReport r = report("qwen3-235b-a22b.json");
  const double h = 4096, L = 94, V = 151936, a = 64, g = 4, d = 128, fe = 1536, E = 128, k = 8;
  const double attn = h * (a + 2 * g) * d + a * d * h + 2 * d;  // 71,303,424 with the q/k norms (one head each)
  const double base = L * (attn + 2 * h + h * E) + 2 * V * h + h;
  CHECK(r.total == base + L * E * 3 * h * fe);   // 235,093,634,560
  CHECK(r.active == base + L * k * 3 * h * fe);  // 22,190,763,520
  CHECK(within(r.total, 235e9));
  CHECK(within(r.active, 22e9));
}

TEST_CASE("model: GPT-2 ties its head to the embedding; FLOPs per token", "[api][model]") {
  const api::ModelReport r = report("gpt2.json");
  const double h = 768, L = 12, V = 50257;
  CHECK(part(r, "head") == 0);
  // LayerNorm: 2h per norm. GELU MLP: 2 GEMMs of h x 4h.
  CHECK(part(r, "norms") == L * 2 * 2 * h + 2 * h);
  // 124,439,808: the biases of every linear layer (3h + h + 4h + h) and 1024 learned positions.
  CHECK(part(r, "embedding") == (V + 1024) * h);
  CHECK(r.total == (V + 1024) * h + L * (4 * h * h + 2 * h * 4 * h + 4 * h + 9 * h) + 2 * h);
  CHECK(r.total == 124439808.0);
  // Forward FLOPs per token: 2 per weight of every GEMM (layers and head), plus the attention
  // core, causal: 2 matmuls of s x s x h, halved -> 2 * s * h per token per layer.
  const double s = 1024;
  const double gemm = 2 * (L * 12 * h * h + V * h);
  CHECK(r.forward_flops_per_token == Approx(gemm + L * 2 * s * h).epsilon(1e-9));
  // Backward: the GEMMs twice, the core 2.5 times.
  CHECK(r.backward_flops_per_token == Approx(2 * gemm + 2.5 * L * 2 * s * h).epsilon(1e-9));
}

TEST_CASE("model: --pp gives the parameters each stage holds", "[api][model]") {
  const api::ModelReport r = report("llama-3-8b.json", 4);
  REQUIRE(r.stages.size() == 4);
  const double h = 4096, V = 128256;
  const double layer = h * 48 * 128 + 32 * 128 * h + 3 * h * 14336 + 2 * h;  // 218,112,000
  CHECK(r.stages[0].layers == 8);
  CHECK(r.stages[0].params == 8 * layer + V * h);
  CHECK(r.stages[1].params == 8 * layer);
  CHECK(r.stages[3].params == 8 * layer + V * h + h);
  double sum = 0;
  for (const auto& s : r.stages) sum += s.params;
  CHECK(sum == r.total);
  // An explicit split.
  api::ModelRequest req;
  req.path = kHf + "llama-3-8b.json";
  req.layer_split = {6, 10, 10, 6};
  const api::ModelReport split = api::model_report(req);
  REQUIRE(split.stages.size() == 4);
  CHECK(split.stages[1].first_layer == 6);
  CHECK(split.stages[1].params == 10 * layer);
  req.layer_split = {6, 10, 10, 5};
  CHECK_THROWS_AS(api::model_report(req), InputError);
  // DeepSeek-V3 on 16 stages: the last holds the MTP module (and a copy of the embedding).
  const api::ModelReport ds = report("deepseek-v3.json", 16);
  const ParamCount mtp = mtp_module_params(ds.config.model);
  double ds_sum = 0;
  for (const auto& s : ds.stages) ds_sum += s.params;
  CHECK(ds_sum == Approx(ds.total + mtp.total() + embedding_params(ds.config.model)).epsilon(1e-12));
}

TEST_CASE("model: a config's vpp or V places several stages on a rank, as its schedule does", "[api][model]") {
  // 8 uniform dense layers on pp 2: interleaved 1F1B with vpp 2 runs 4 stages of 2 layers, stage s
  // on rank s mod 2 (Megatron's looped placement): rank 0 holds layers 0-1 and 4-5, rank 1 2-3 and
  // 6-7. ZB-V runs 2 stages a rank in a V (stage s on rank s, s < 2, else 3 - s): rank 0 holds
  // 0-1 and 6-7, rank 1 2-3 and 4-5. Each rank: 4 layers; the embedding on the first stage's
  // rank, the head on the last stage's (rank 1 looped, rank 0 in the V).
  const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / ("ppsim_model_vpp_" + std::to_string(::getpid()) + ".yaml");
  auto ranks = [&](const std::string& parallel) {
    std::ofstream(tmp) << "model: {layers: 8, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}\n"
                       << "hardware: {name: h100}\nparallel: " << parallel << "\n";
    api::ModelRequest req;
    req.path = tmp.string();
    const api::ModelReport r = api::model_report(req);
    std::filesystem::remove(tmp);
    return r.stages;
  };
  using Chunks = std::vector<std::array<int, 2>>;
  const auto looped = ranks("{pp: 2, vpp: 2, microbatches: 4, schedule: interleaved-1f1b}");
  REQUIRE(looped.size() == 2);
  CHECK(looped[0].chunks == Chunks{{0, 2}, {4, 2}});
  CHECK(looped[1].chunks == Chunks{{2, 2}, {6, 2}});
  CHECK((looped[0].embedding && !looped[0].head && looped[1].head && !looped[1].embedding));
  const auto v = ranks("{pp: 2, microbatches: 4, schedule: zbv}");
  REQUIRE(v.size() == 2);
  CHECK(v[0].chunks == Chunks{{0, 2}, {6, 2}});
  CHECK(v[1].chunks == Chunks{{2, 2}, {4, 2}});
  CHECK((v[0].embedding && v[0].head && !v[1].embedding && !v[1].head));
  CHECK(v[0].layers == 4);
  CHECK(v[0].params == looped[0].params + looped[1].params - v[1].params);  // the same parts, other places
  // --pp asks for one stage a rank: 4 consecutive layers each.
  std::ofstream(tmp)
      << "model: {layers: 8, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}\n"
      << "hardware: {name: h100}\nparallel: {pp: 2, vpp: 2, microbatches: 4, schedule: interleaved-1f1b}\n";
  api::ModelRequest req;
  req.path = tmp.string();
  req.pp = 2;
  const api::ModelReport one = api::model_report(req);
  std::filesystem::remove(tmp);
  CHECK(one.stages[0].chunks == Chunks{{0, 4}});
}
