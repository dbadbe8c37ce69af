// check_overlap_work (cost/cost_model.h) in a file of its own: it needs no config, so the
// WebAssembly engine (tools/build_wasm.sh) compiles it without the config reader.
#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "cost/cost_model.h"
#include "schedules/registry.h"

namespace ppsim {

void check_overlap_work(const Schedule& s, const SimCosts& costs) {
  long long layers = 0;
  for (const auto& m : costs.moe) layers = std::max<long long>(layers, m.layers);
  const long long ops = static_cast<long long>(s.num_ops());
  const long long steps = ops * layers;  // <= 2e8 ops * 2^31 layers: no overflow
  if (steps > limits().max_ops)
    throw InputError(fmt::format("{}: the overlap model would simulate {} ops x {} layers per chunk = {} layer steps, over "
                                 "the limit of {} (raise it with --max-ops)",
                                 s.family, ops, layers, steps, limits().max_ops),
                     {}, kExitLimit);
}

}  // namespace ppsim
