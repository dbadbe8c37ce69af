#include "cost/w_deferral.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "cost/layer_split.h"
#include "cost/memory.h"
#include "schedules/generators.h"
#include "schedules/validator.h"

namespace ppsim {

WDeferral zb_h1_w_deferral(const ModelConfigData& c, int pp) {
  WDeferral d;
  const std::vector<SliceLayout> slices = slice_layouts(c, pp);
  for (int r = 0; r < pp; ++r) {
    const SliceLayout& l = slices[static_cast<std::size_t>(r)];
    const double kept = slice_activation_bytes(c, l), held = slice_wgrad_bytes(c, l);
    const double rho = kept > 0 ? held / kept : 1.0;
    int defer = r;
    if (rho > 1 && !c.parallel.w_deferral_full) defer = std::max(0, static_cast<int>(std::floor((r + 1) / rho)) - 1);
    d.ratio.push_back(rho);
    d.max_pending.push_back(defer);
    d.capped = d.capped || defer < r;
  }
  return d;
}

namespace {

std::string deferral_note(const WDeferral& d) {
  const double worst = *std::max_element(d.ratio.begin(), d.ratio.end());
  return fmt::format(
      "zb-h1: rank r defers at most [{}] weight-grads, not r: here a deferred W holds up to {:.2f}x what its "
      "forward kept (M_W / M_B: its GEMMs' inputs and output-grads), and ZB-H1 holds no more than 1F1B "
      "(arXiv 2401.10241, 3.1); parallel.w_deferral: full defers r",
      fmt::join(d.max_pending, " "), worst);
}

}  // namespace

Schedule with_w_deferral(const ModelConfigData& c, const Schedule& s, std::string* note) {
  if (note) note->clear();
  if (s.family != "zb-h1" || !s.comm.empty()) return s;
  const WDeferral d = zb_h1_w_deferral(c, s.pp);
  if (!d.capped) return s;
  if (note) *note = deferral_note(d);
  Schedule out = generate_zb_h1_deferral(ScheduleParams{s.pp, s.microbatches, 1, 0}, d.max_pending);
  out.family = s.family;
  out.parameter_copies = s.parameter_copies;
  validate_schedule(out);
  return out;
}

}  // namespace ppsim
