// The one parser of a schedule list: "all" (or nothing) for every family, else names separated by
// commas, each trimmed of spaces and tabs, empty items skipped. `--schedules`, `--schedule`,
// `parallel.schedule`, `plan.schedules` and Python's `schedules=` all read it here, so that a
// config's `schedule: "1f1b, gpipe"` means the same everywhere.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "schedules/registry.h"

namespace ppsim {

// "all" (after trimming) or an empty list.
bool is_all_schedules(std::string_view list);
// The names as written (trimmed, in order); {} for "all". Each item "all" is kept as written.
std::vector<std::string> split_schedule_names(std::string_view list);
// The families named (find_family: aliases and torch's class names; an unknown name throws with a
// suggestion, exit 2); every family for "all".
std::vector<const Family*> parse_schedule_list(std::string_view list);

}  // namespace ppsim
