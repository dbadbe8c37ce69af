// SVG timelines like the DualPipe paper's figure: one row per rank, cells coloured by op kind
// (F, B, I, W, overlapped F&B, communication) with the micro-batch number, empty space for
// bubbles, a legend and a time axis; under it each rank's activation memory over time. Several
// timelines stack on one shared time axis.
#pragma once
#include <string>
#include <vector>

#include "report/trace.h"

namespace ppsim {

// Text for XML and HTML: & < > " ' as entities, control characters other than tab and newline as ?.
std::string xml_escape(const std::string& s);

std::string render_svg(const std::vector<NamedTimeline>& timelines);

}  // namespace ppsim
