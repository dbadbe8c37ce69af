// The flash attention core's speed by shape (costs.attention_shape).
//
// A flash attention kernel runs one CTA per 128 query rows of each head; a CTA costs a fixed part
// (loading its queries, the softmax's last rescale, writing its output: kFlashBlockKeys keys'
// worth) plus one step per key its rows see. The CTAs are list-scheduled on the GPU's SMs in
// launch order (heads one after another, each head's blocks from the first query), so a shape with
// few heads and short rows runs partly empty waves, and causal attention's longest rows come last.
// efficiency.attention is the rate at the shape FlashAttention's papers publish (causal, 16K
// tokens, 16 heads of 128, batch 1); another shape runs at that figure times
// flash_shape_factor. Measured on an H200 (tools/experiments/measure_attention_length.py,
// docs/FIDELITY-MEASURED.md "Attention by shape").
#pragma once

namespace ppsim {

struct FlashShape {
  double heads = 0;  // heads of one kernel on the rank, times the micro-batch
  double seq = 0;    // the sequence: tokens of one sample (all of it, with context parallelism)
  int cp = 1;        // context parallel ranks: the rank's queries are chunks i and 2cp-1-i of 2cp
  bool causal = true;
  double window = 0;  // a local window of keys (0: none)
};

// Queries per CTA and the fixed cost of one CTA in keys (FlashAttention-2's 128-row blocks; the
// fixed part fitted on the measured grid of heads x lengths, 750 keys).
inline constexpr double kFlashBlockRows = 128;
inline constexpr double kFlashBlockKeys = 750;

// The rate (key steps per SM per unit time) at `shape` over the rate at the reference shape, on
// a GPU of `sms` SMs. 1 for an empty shape.
double flash_shape_factor(const FlashShape& shape, int sms);

}  // namespace ppsim
