#include "core/timeline.h"

#include <algorithm>

namespace ppsim {

const char* part_name(Part p) {
  switch (p) {
    case Part::Whole: return "whole";
    case Part::Attn: return "attn";
    case Part::Mlp: return "mlp";
    case Part::AttnW: return "attn_w";
    case Part::MlpW: return "mlp_w";
    case Part::Dispatch: return "dispatch";
    case Part::Combine: return "combine";
  }
  return "?";
}

Time exposed_communication(const std::vector<StreamSpan>& streams) {
  // Sweep the boundaries: on each elementary segment, is some stream communicating, and is some
  // stream computing (inside its span, outside its comm)?
  std::vector<Time> cuts;
  for (const StreamSpan& s : streams) {
    cuts.push_back(s.start);
    cuts.push_back(s.end);
    for (const auto& [a, b] : s.comm) {
      cuts.push_back(a);
      cuts.push_back(b);
    }
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  auto in = [](Time t, Time a, Time b) { return a <= t && t < b; };
  Time exposed = 0;
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
    const Time t = cuts[i];  // the segment [cuts[i], cuts[i + 1]) is uniform
    bool comm = false, compute = false;
    for (const StreamSpan& s : streams) {
      bool c = false;
      for (const auto& [a, b] : s.comm) c = c || in(t, a, b);
      comm = comm || c;
      compute = compute || (!c && in(t, s.start, s.end));
    }
    if (comm && !compute) exposed += cuts[i + 1] - cuts[i];
  }
  return exposed;
}

}  // namespace ppsim
