// PyTorch's action notation and compute-only CSV, so that schedules round-trip with
// torch.distributed.pipelining: one line per rank (rank 0 first), actions comma-separated,
// `{stage}{F|I|W|B}{mb}` and `(aFm;bBn)OVERLAP_F_B`. Idle steps ("None" or empty) are skipped.
#pragma once
#include <string>

#include "core/schedule.h"

namespace ppsim {

std::string schedule_to_csv(const Schedule& s);

enum class Layout { Auto, Linear, VShape, Bidirectional };
Layout parse_layout(const std::string& name);

// Parses one action token; throws InputError located at `loc` on bad syntax.
Action parse_action(const std::string& token, const struct SourceLoc& loc);

// Imports a CSV. `pp` and `microbatches` (0 = infer) are checked against the file. The layout
// (which rank holds which stage, and whether there are two pipes) is inferred unless given.
// The result is validated; errors carry file:line:col where they point at one token.
Schedule import_csv(const std::string& text, const std::string& filename, int pp, int microbatches,
                    Layout layout = Layout::Auto);
Schedule import_csv_file(const std::string& path, int pp, int microbatches, Layout layout = Layout::Auto);

}  // namespace ppsim
