#include "sim/costs.h"

#include <algorithm>

namespace ppsim {

Time op_duration(const SliceCosts& c, OpKind kind) {
  switch (kind) {
    case OpKind::F: return c.f;
    case OpKind::I:
      return c.input_grad() + c.i_apart;  // SliceCosts::i_apart
    case OpKind::W:
      return c.w + c.w_apart;  // a W apart from its I (SliceCosts::w_apart)
    case OpKind::B: return c.b;
  }
  return 0;
}

Time pair_duration(const SliceCosts& fa, const SliceCosts& bb, OpKind bwd_kind) {
  const Time alone = op_duration(bb, bwd_kind);
  const Time sum = fa.f + alone;
  // Overlapping never makes a pair shorter than its longer part (savings given with the full
  // backward B can exceed what a pair with only the input-grad I has to save).
  return std::max({sum - (fa.pair_saving() + bb.pair_saving()) / 2, fa.f, alone});
}

SimCosts uniform_costs(int slices, const SliceCosts& c, TimeScale scale) {
  SimCosts s;
  s.slice.assign(static_cast<std::size_t>(slices), c);
  s.scale = scale;
  return s;
}

}  // namespace ppsim
