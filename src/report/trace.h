// Chrome trace-event JSON (opens in Perfetto and chrome://tracing): one process per rank (per
// schedule when several are drawn), one track per stream, each op a complete event named in
// PyTorch notation with stage, micro-batch and kind as args, flow arrows from each send to its
// receive, and a counter track for activation memory (and device memory in GB when known). Also a plain JSON dump of a Timeline.
#pragma once
#include <string>
#include <vector>

#include "core/timeline.h"
#include "sim/physical.h"

namespace ppsim {

struct NamedTimeline {
  std::string name;
  const Timeline* timeline = nullptr;
  // Per rank, when a config gave bytes: drawn as a "memory GB" counter (trace) and as the
  // memory lane (SVG) instead of the live activations in rank shares.
  const std::vector<std::vector<MemorySample>>* memory = nullptr;
};

std::string render_trace(const std::vector<NamedTimeline>& timelines);
std::string render_timeline_json(const Timeline& t);

}  // namespace ppsim
