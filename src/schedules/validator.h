// The schedule validator: every (stage, micro-batch) has exactly one F and one backward (B, or
// I then W), each op runs on the rank that holds its stage, and the dependency graph together
// with each rank's order is acyclic (Boost.Graph). A cycle is a deadlock and is reported as the
// cycle of ops in notation. Runs on every generated and every imported schedule.
#pragma once
#include "core/schedule.h"

namespace ppsim {

// Throws InputError with a one-line reason when the schedule is not valid.
void validate_schedule(const Schedule& s);

}  // namespace ppsim
