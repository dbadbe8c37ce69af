// The flash attention core's rate by shape (src/cost/flash_shape.cc) against list schedules worked
// out by hand, and what the cost model does with it.
#include "cost/flash_shape.h"

#include <string>

#include "catch.h"
#include "cost/config.h"
#include "cost/derive.h"
#include "cost/flops.h"

using namespace ppsim;
using Catch::Matchers::WithinRel;

namespace {

// The reference shape (causal, 16384 tokens, 16 heads) on one SM: every CTA runs in turn, so the rate
// is the key steps the rows need over all CTAs' steps. Block i of 128 rows sees on average
// 128 i + 64.5 keys (row j of the block: 128 i + j + 1, j = 0..127); per head, over the 128 blocks:
// sum_i (128 i + 64.5) = 128 * (127 * 128 / 2) + 128 * 64.5 = 128 * 8128 + 8256.
double reference_rate_one_sm() {
  const double needed = 128.0 * 8128 + 128 * 64.5;  // 1,048,640 per head
  const double steps = needed + 128 * kFlashBlockKeys;
  return needed / steps;  // the 16 heads cancel
}

}  // namespace

TEST_CASE("flash shape: the reference shape runs at efficiency.attention") {
  CHECK_THAT(flash_shape_factor({16, 16384, 1, true, 0}, 132), WithinRel(1.0, 1e-12));
  CHECK_THAT(flash_shape_factor({16, 16384, 1, true, 0}, 1), WithinRel(1.0, 1e-12));
}

TEST_CASE("flash shape: one SM, a sequence of two blocks, by hand") {
  // Causal, 256 tokens, one head: blocks of 64.5 and 192.5 keys on average; each CTA costs 750 more.
  const double rate = (64.5 + 192.5) / (2 * kFlashBlockKeys + 64.5 + 192.5);
  CHECK_THAT(flash_shape_factor({1, 256, 1, true, 0}, 1), WithinRel(rate / reference_rate_one_sm(), 1e-12));
}

TEST_CASE("flash shape: two SMs, list-scheduled in launch order") {
  // On the same GPU the reference cancels: factor(A) / factor(B) = rate(A) / rate(B).
  // B: one head of 128 tokens, one CTA of 750 + 64.5 steps; the other SM idles: 64.5 / (2 x 814.5).
  const double b = 64.5 / (2 * (kFlashBlockKeys + 64.5));
  // A: one head of 256 tokens, CTAs of 814.5 and 942.5 steps side by side: the span is 942.5.
  const double a = (64.5 + 192.5) / (2 * (kFlashBlockKeys + 192.5));
  // C: three heads of 128 tokens: SM 0 runs CTAs 1 and 3 (span 2 x 814.5), SM 1 CTA 2.
  const double c = 3 * 64.5 / (2 * 2 * (kFlashBlockKeys + 64.5));
  const double fb = flash_shape_factor({1, 128, 1, true, 0}, 2);
  CHECK_THAT(flash_shape_factor({1, 256, 1, true, 0}, 2) / fb, WithinRel(a / b, 1e-12));
  CHECK_THAT(flash_shape_factor({3, 128, 1, true, 0}, 2) / fb, WithinRel(c / b, 1e-12));
  CHECK_THAT(c / b, WithinRel(1.5, 1e-12));
}

TEST_CASE("flash shape: longer rows and more heads run faster, up to the per-key rate") {
  const FlashShape short_rows{16, 4096, 1, true, 0}, long_rows{16, 65536, 1, true, 0},
      more_heads{128, 4096, 1, true, 0};
  CHECK(flash_shape_factor(short_rows, 132) < 1);
  CHECK(flash_shape_factor(long_rows, 132) > 1);
  CHECK(flash_shape_factor(more_heads, 132) > flash_shape_factor(short_rows, 132));
  // No shape beats the per-key rate: rows of s keys cost (750 + s) steps for s useful.
  const double bound = (1.0 / reference_rate_one_sm());
  CHECK(flash_shape_factor({64, 1 << 20, 1, false, 0}, 1) < bound);
  CHECK_THAT(flash_shape_factor({64, 1 << 20, 1, false, 0}, 1),
             WithinRel((1048576.0 / (1048576 + kFlashBlockKeys)) / reference_rate_one_sm(), 1e-9));
}

TEST_CASE("flash shape: context parallel chunks i and 2cp-1-i, by hand on one SM") {
  // 512 tokens, cp 2: chunks of 128; rank 0 holds chunk 0 (keys 0.5 * 129 = 64.5 on average) and
  // chunk 3 (3 * 128 + 64.5 = 448.5), one CTA each.
  const double rate = (64.5 + 448.5) / (2 * kFlashBlockKeys + 64.5 + 448.5);
  CHECK_THAT(flash_shape_factor({1, 512, 2, true, 0}, 1), WithinRel(rate / reference_rate_one_sm(), 1e-12));
}

TEST_CASE("flash shape: a local window caps the keys a row sees") {
  // 256 tokens, window 100: block 0's rows see min(j + 1, 100) keys: sum_{j<100} (j+1) + 28 * 100 = 5050 + 2800,
  // block 1's 100 each; the model takes each block's mean keys capped by the window: min(64.5, 100) and 100.
  const double rate = (64.5 + 100) / (2 * kFlashBlockKeys + 64.5 + 100);
  CHECK_THAT(flash_shape_factor({1, 256, 1, true, 100}, 1), WithinRel(rate / reference_rate_one_sm(), 1e-12));
}

TEST_CASE("flash shape: the attention core's rate in the cost model") {
  const char* text = R"(
model: {layers: 2, hidden: 2048, ffn_hidden: 8192, heads: 16, head_dim: 128, vocab: 32000, seq_len: 4096}
hardware: {name: h100}
parallel: {pp: 2, microbatches: 4}
)";
  const ModelConfigData on = parse_config(text, "t.yaml", "", {});
  const ModelConfigData off = parse_config(text, "t.yaml", "", {"costs.attention_shape=false"});
  const BlockWork w_on = layer_work(on, 0, {}).attention, w_off = layer_work(off, 0, {}).attention;
  CHECK(w_off.core_rate == 1.0);
  CHECK_THAT(w_on.core_rate, WithinRel(flash_shape_factor({16, 4096, 1, true, 0}, 132), 1e-12));
  CHECK(w_on.core_flops == w_off.core_flops);
  // Without flash attention the core is its GEMMs and passes: no rate.
  const ModelConfigData unfused = parse_config(text, "t.yaml", "", {"model.flash_attention=false"});
  CHECK(layer_work(unfused, 0, {}).attention.core_rate == 1.0);
}

TEST_CASE("flash shape: the core never runs above the peak") {
  // At 64K tokens the core's rate is above the reference's; efficiency.attention 0.96 and 0.98 times it
  // both pass 1, so both run at the peak and the attention block takes the same time. Without the
  // shape (rate 1) the two figures give times in the ratio 0.98 / 0.96 on the core.
  const char* text = R"(
model: {layers: 2, hidden: 2048, ffn_hidden: 8192, heads: 16, head_dim: 128, vocab: 32000, seq_len: 65536}
hardware: {name: h100}
parallel: {pp: 1, microbatches: 1}
)";
  REQUIRE(flash_shape_factor({16, 65536, 1, true, 0}, 132) * 0.96 > 1.0);
  auto attention = [&](const char* eff, bool shape) {
    const ModelConfigData c = parse_config(text, "t.yaml", "",
                                           {std::string("hardware.efficiency.attention=") + eff,
                                            std::string("costs.attention_shape=") + (shape ? "true" : "false")});
    return cost_figures(c, 1).slices[0].layers[0].attention;
  };
  CHECK(attention("0.96", true).f == attention("0.98", true).f);
  CHECK(attention("0.96", true).b == attention("0.98", true).b);
  CHECK(attention("0.96", false).f > attention("0.98", false).f);
}
