// A compact time-step chart for the terminal: one row per rank, one cell per time unit, each op
// shown as its kind and micro-batch (a pair as `X`), bubbles as dots. Coloured by op kind when
// the output is a terminal (or --color always).
#pragma once
#include <string>

#include "core/timeline.h"

namespace ppsim {

std::string render_step_chart(const Timeline& t, bool color, int max_columns = 400);
// "auto": colour when writing to stdout and stdout is a terminal.
bool use_color(const std::string& mode, const std::string& output_path);

}  // namespace ppsim
