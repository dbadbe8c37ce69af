// A GEMM's speed by shape (costs.gemm_shape).
//
// efficiency.gemm (and gemm_fp8, gemm_fp8_wgrad) is a type's figure for large GEMMs; a GEMM with
// few rows, few columns, a short inner dimension or little work in all runs slower, and the
// experts' grouped GEMMs (one group per expert, each group's rows its tokens) slower still: each
// group fills its own tiles and starts its own inner loop. The factor multiplies the type's figure:
//
//   f = s(rows; R) s(cols; C) inner / (inner + K0) F / (F + F0), over the same for one BF16 GEMM
//   of 8192 x 8192 x 8192, at most 1; s(x; X) = 1 - exp(-x / X), F the kernel's GFLOP (all groups)
//
// One GEMM (cuBLAS): BF16 R = C = 100, K0 = 128, F0 = 2 (about 3 us of a fixed cost per kernel);
// FP8 (per-tensor scales; over one FP8 GEMM at the reference) R = C = 100, K0 = 384, F0 = 4.
// A grouped GEMM (torch._grouped_mm; rows per group): BF16 R = C = 100, K0 = 192, F0 = 8; FP8
// takes the BF16 grouped factor times the FP8-over-BF16 ratio of one GEMM of the same shape
// (FP8 grouped GEMMs not measured). Fitted on 81 GEMMs, 48 grouped forward GEMMs and their 48
// weight gradients timed on an H200 against the reference after each
// (tools/experiments/measure_gemm_shape.py; docs/FIDELITY-MEASURED.md "GEMMs by shape"): rms
// 3.1% (BF16), 4.2% (FP8), 7.5% (grouped).
// A pass's dimensions: forward (m, n, k); input grad (m, k, inner n); weight grad (k, n, inner m:
// for an expert, its tokens).
#pragma once

namespace ppsim {

struct GemmShape {
  double rows = 0, cols = 0, inner = 0;  // of one group
  double groups = 1;                     // > 1: one grouped GEMM, one group per expert, `rows` each
  bool fp8 = false;
};

// The factor in (0, 1]; 1 for an empty shape.
double gemm_shape_factor(const GemmShape& s);

}  // namespace ppsim
