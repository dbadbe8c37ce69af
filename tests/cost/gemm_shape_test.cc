// A GEMM's rate by shape (src/cost/gemm_shape.cc) against its formula worked out here, and what the
// cost model does with it.
#include "cost/gemm_shape.h"

#include <cmath>
#include <string>

#include "catch.h"
#include "core/schedule.h"
#include "cost/config.h"
#include "cost/derive.h"
#include "schedules/registry.h"

using namespace ppsim;
using Catch::Matchers::WithinRel;

namespace {

// gemm_shape.h's formula, written out: s(x; X) = 1 - exp(-x / X); F in GFLOP over all groups.
double formula(double rows, double cols, double inner, double groups, double r, double c, double k0, double f0) {
  const double gflop = 2e-9 * rows * cols * inner * groups;
  return (1 - std::exp(-rows / r)) * (1 - std::exp(-cols / c)) * inner / (inner + k0) * gflop / (gflop + f0);
}
// One BF16 GEMM: R = C = 100, K0 = 128, F0 = 2; the reference 8192^3.
double bf16(double m, double n, double k) { return formula(m, n, k, 1, 100, 100, 128, 2); }
const double kBf16Ref = bf16(8192, 8192, 8192);

}  // namespace

TEST_CASE("gemm shape: the reference and larger GEMMs run at the type's figure") {
  CHECK_THAT(gemm_shape_factor({8192, 8192, 8192, 1, false}), WithinRel(1.0, 1e-12));
  CHECK_THAT(gemm_shape_factor({8192, 8192, 8192, 1, true}), WithinRel(1.0, 1e-12));
  CHECK(gemm_shape_factor({16384, 53248, 16384, 1, false}) == 1.0);  // capped: never faster than the figure
  CHECK(gemm_shape_factor({0, 8192, 8192, 1, false}) == 1.0);        // an empty shape changes nothing
}

TEST_CASE("gemm shape: one BF16 GEMM, a short reduction, by hand") {
  // 8192 x 8192 x 256: the rows and columns saturate as at the reference; the reduction gives
  // 256 / (256 + 128) against 8192 / 8320, and the work 34.36 GFLOP against 1099.5 (F0 = 2).
  const double f = bf16(8192, 8192, 256) / kBf16Ref;
  const double by_hand =
      (256.0 / 384) / (8192.0 / 8320) * (34.359738368 / 36.359738368) / (1099.511627776 / 1101.511627776);
  CHECK_THAT(f, WithinRel(by_hand, 1e-6));
  CHECK_THAT(gemm_shape_factor({8192, 8192, 256, 1, false}), WithinRel(f, 1e-12));
  // Each of rows, columns and the reduction slows it when short, alone.
  for (double x : {128.0, 512.0, 2048.0}) {
    INFO(x);
    CHECK(gemm_shape_factor({x, 8192, 8192, 1, false}) < 1);
    CHECK(gemm_shape_factor({8192, x, 8192, 1, false}) < 1);
    CHECK(gemm_shape_factor({8192, 8192, x, 1, false}) < gemm_shape_factor({8192, 8192, 2 * x, 1, false}));
  }
}

TEST_CASE("gemm shape: FP8 against FP8's reference, with its own fit") {
  // R = C = 100, K0 = 384, F0 = 4: a reduction of 2048 (DeepSeek-V3's expert down projection).
  const double f = formula(8192, 7168, 2048, 1, 100, 100, 384, 4) / formula(8192, 8192, 8192, 1, 100, 100, 384, 4);
  CHECK_THAT(gemm_shape_factor({8192, 7168, 2048, 1, true}), WithinRel(f, 1e-12));
  CHECK(gemm_shape_factor({8192, 7168, 2048, 1, true}) < gemm_shape_factor({8192, 7168, 2048, 1, false}));
}

TEST_CASE("gemm shape: grouped GEMMs, one group per expert, against one BF16 GEMM's reference") {
  // Qwen3-30B-A3B's down projection on one EP-8 rank: 16 experts of 256 rows, N 2048, K 768.
  // Grouped fit: R = C = 100, K0 = 192, F0 = 8, F over all 16 groups (12.9 GFLOP).
  const double grouped = formula(256, 2048, 768, 16, 100, 100, 192, 8) / kBf16Ref;
  CHECK_THAT(gemm_shape_factor({256, 2048, 768, 16, false}), WithinRel(grouped, 1e-12));
  // FP8: the BF16 grouped factor times one GEMM's FP8-over-BF16 ratio at the same shape.
  const double fp8_ratio =
      (formula(256, 2048, 768, 1, 100, 100, 384, 4) / formula(8192, 8192, 8192, 1, 100, 100, 384, 4)) /
      (bf16(256, 2048, 768) / kBf16Ref);
  CHECK_THAT(gemm_shape_factor({256, 2048, 768, 16, true}), WithinRel(grouped * fp8_ratio, 1e-12));
  // A group of 256 rows is slower than one GEMM of the same 4096 rows.
  CHECK(gemm_shape_factor({256, 2048, 768, 16, false}) < gemm_shape_factor({4096, 2048, 768, 1, false}));
}

TEST_CASE("gemm shape: the cost model divides each pass's GEMM time by its factor") {
  // A dense layer wide enough that every GEMM is compute-bound: T = 4096 tokens, h = 4096, SwiGLU
  // f = 16384, 32 heads of 128 (no GQA). Its GEMMs, forward (rows, cols, inner): qkv (4096, 12288,
  // 4096), out (4096, 4096, 4096), gate and up (4096, 16384, 4096) each, down (4096, 4096, 16384).
  // The middle slices hold 2 layers; with the h100 preset (989 TFLOP/s, efficiency.gemm 0.7) a GEMM
  // of F FLOPs takes F / (989e3 x 0.7 x factor) ns, so switching the factor on adds
  // sum F (1/factor - 1) / (989e3 x 0.7) per layer to F, and nothing else in F moves.
  const char* wide = R"(model: {layers: 8, hidden: 4096, ffn_hidden: 16384, heads: 32, vocab: 32000, seq_len: 4096}
hardware: {name: h100}
parallel: {pp: 4, microbatches: 8}
)";
  struct G {
    double m, n, k;
  };
  double extra = 0;
  for (const G& g :
       {G{4096, 12288, 4096}, G{4096, 4096, 4096}, G{4096, 16384, 4096}, G{4096, 16384, 4096}, G{4096, 4096, 16384}}) {
    const double flops = 2 * g.m * g.n * g.k;
    extra += flops * (1 / gemm_shape_factor({g.m, g.n, g.k, 1, false}) - 1) / (989e3 * 0.7);
  }
  const Schedule s = make_schedule("1f1b", ScheduleParams{4, 8, 0, 0});
  const SimCosts on = derive_costs(load_config_text(wide, "t.yaml", {}), s);
  const SimCosts off = derive_costs(load_config_text(wide, "t.yaml", {"costs.gemm_shape=false"}), s);
  REQUIRE(extra > 0);
  for (int i : {1, 2}) {
    INFO("slice " << i);
    CHECK(std::abs(static_cast<double>(on.slice[i].f - off.slice[i].f) - 2 * extra) <= 2);
    CHECK(on.slice[i].w > off.slice[i].w);
  }
}
