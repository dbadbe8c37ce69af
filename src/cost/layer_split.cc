// Layers per slice for a schedule's layout (the rules are in layer_split.h).
#include "cost/layer_split.h"

#include <fmt/format.h>

namespace ppsim {

std::vector<SliceLayout> slice_layouts(const ModelConfigData& c, int slices) {
  PPSIM_CHECK(slices >= 1, "slices = {}", slices);
  const int L = c.model.layers;
  const std::vector<int>& given = c.parallel.layer_split;
  std::vector<int> counts;
  if (given.empty()) {
    if (L % slices != 0)
      throw InputError(fmt::format("model.layers={} cannot be split uniformly into {} slices; give parallel.layer_split", L, slices));
    counts.assign(static_cast<std::size_t>(slices), L / slices);
  } else {
    const int n = static_cast<int>(given.size());
    if (n == slices) {
      counts = given;
    } else if (n % slices == 0) {
      const int k = n / slices;  // merge k consecutive stages into one slice
      for (int i = 0; i < slices; ++i) {
        int sum = 0;
        for (int j = 0; j < k; ++j) sum += given[static_cast<std::size_t>(i * k + j)];
        counts.push_back(sum);
      }
    } else if (slices % n == 0) {
      const int k = slices / n;  // split each stage into k slices, the remainder to the later ones
      for (int e : given)
        for (int j = 0; j < k; ++j) counts.push_back(e / k + (j >= k - e % k ? 1 : 0));
    } else {
      throw InputError(fmt::format("parallel.layer_split has {} entries; a schedule with {} slices needs {}, a multiple or a "
                                   "divisor of {}", n, slices, slices, slices));
    }
  }
  std::vector<SliceLayout> out;
  int next = 0;
  for (int i = 0; i < slices; ++i) {
    SliceLayout s;
    s.first_layer = next;
    s.layers = counts[static_cast<std::size_t>(i)];
    s.embedding = i == 0 && c.parallel.embedding_on_first;
    s.head = i == slices - 1 && c.parallel.head_on_last;
    if (s.layers == 0 && !s.embedding && !s.head)
      throw InputError(fmt::format("slice {} of {} gets no layer from parallel.layer_split (nor the embedding or head)", i, slices));
    next += s.layers;
    out.push_back(s);
  }
  PPSIM_CHECK(next == L, "slices cover {} layers of {}", next, L);
  return out;
}

}  // namespace ppsim
