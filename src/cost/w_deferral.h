// ZB-H1's weight-grad deferral under the Zero Bubble paper's memory rule (parallel.w_deferral,
// docs/CONFIG.md).
#pragma once
#include <string>
#include <vector>

#include "core/schedule.h"
#include "cost/config.h"

namespace ppsim {

struct WDeferral {
  std::vector<int> max_pending;  // per rank: the W's it may defer (r: the paper's order)
  std::vector<double> ratio;     // per rank: M_W / M_B, what a deferred W holds over what its forward kept
  bool capped = false;           // some rank defers fewer than r
};

// ZB-H1 holds no more than 1F1B (arXiv 2401.10241, section 3.1): rank r keeps P - r forwards' M_B
// and defers r W's of M_W each, within P M_B when M_W <= M_B (a GPT layer: 32sbh against 34sbh).
// Where a deferred W holds more, rho = M_W / M_B > 1 (MLA and MoE layers, or recompute: the GEMMs'
// inputs and output-grads outlive what the forward kept), rank r defers
// d_r = max(0, floor((r + 1) / rho) - 1) W's, so that (P - r) M_B + d_r M_W and, while an I runs,
// (P - r - 1) M_B + (d_r + 1) M_W stay within P M_B. M_B and M_W as the memory model counts them
// (cost/memory.h: slice_activation_bytes, slice_wgrad_bytes). Nothing is capped with
// parallel.w_deferral: full.
WDeferral zb_h1_w_deferral(const ModelConfigData& c, int pp);

// The schedule as the config runs it: a generated zb-h1 with its deferral capped; any other
// schedule unchanged. `note`, when given, gets one line for the results' notes about the cap
// ("" when nothing is capped).
Schedule with_w_deferral(const ModelConfigData& c, const Schedule& s, std::string* note = nullptr);

}  // namespace ppsim
