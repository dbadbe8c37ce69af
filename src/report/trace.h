// Chrome trace-event JSON (opens in Perfetto and chrome://tracing): one process per rank (per
// schedule when several are drawn), one track per stream, each op a complete event named in
// PyTorch notation with stage, micro-batch and kind as args, flow arrows from each send to its
// receive, and a counter track for activation memory. Also a plain JSON dump of a Timeline.
#pragma once
#include <string>
#include <vector>

#include "core/timeline.h"

namespace ppsim {

struct NamedTimeline {
  std::string name;
  const Timeline* timeline = nullptr;
};

std::string render_trace(const std::vector<NamedTimeline>& timelines);
std::string render_timeline_json(const Timeline& t);

}  // namespace ppsim
