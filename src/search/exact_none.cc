// The exact method when ppsim was built without CBC (exact.h): says so.
#include "search/exact.h"

namespace ppsim {

bool exact_available() { return false; }

ExactResult exact_schedule(const Schedule&, const SimCosts&, int, double, Time) {
  ExactResult r;
  r.status = "ppsim was built without CBC (install coinor-libcbc-dev and re-run cmake)";
  return r;
}

}  // namespace ppsim
