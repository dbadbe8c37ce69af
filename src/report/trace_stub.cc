// Placeholder until the trace and SVG writers land (issue: pictures).
#include "core/error.h"
#include "report/svg.h"
#include "report/trace.h"

namespace ppsim {
std::string render_trace(const std::vector<NamedTimeline>&) { throw InputError("--trace is not implemented yet", {}, kExitUsage); }
std::string render_timeline_json(const Timeline&) { throw InputError("--timeline is not implemented yet", {}, kExitUsage); }
std::string render_svg(const std::vector<NamedTimeline>&) { throw InputError("--svg is not implemented yet", {}, kExitUsage); }
}  // namespace ppsim
