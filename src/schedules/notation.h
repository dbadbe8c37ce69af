// PyTorch's action notation and CSV, so that schedules round-trip with
// torch.distributed.pipelining: one line per rank (rank 0 first), actions comma-separated,
// `{stage}{F|I|W|B}{mb}` and `(aFm;bBn)OVERLAP_F_B`. Idle steps ("None" or empty) are skipped.
//
// Two dialects: today's (torch >= 2.6: I input-grad, W weight-grad, B full backward) and
// torch <= 2.5's (B is the input-grad pass where a W is listed for the same stage and
// micro-batch, else the full backward; BW the full backward). Comm actions (`SEND_F`, `RECV_F`,
// `SEND_B`, `RECV_B` with a micro-batch; `UNSHARD`, `RESHARD`, `REDUCE_GRAD` without) are read
// into Schedule::comm. Not obvious: a file with neither BW nor I nor a B beside a W reads the
// same in both dialects; it is reported as today's.
#pragma once
#include <string>
#include <vector>

#include "core/schedule.h"

namespace ppsim {

enum class Dialect { Auto, Current, Torch25 };
// "auto", "current" (also "2.6"), "2.5"; InputError exit 2 otherwise.
Dialect parse_dialect(const std::string& name);
// "torch >= 2.6 (I input-grad, W weight-grad, B full backward)" or the 2.5 one.
std::string describe_dialect(Dialect d);
// The value a Schedule's `dialect` holds: "current" or "2.5".
std::string dialect_key(Dialect d);

// Writes the schedule's actions, its comm actions in place when it has any. `dialect` Torch25
// writes I as B and B as BW; Auto writes the dialect the schedule was imported in (today's for
// generated ones).
std::string schedule_to_csv(const Schedule& s, Dialect dialect = Dialect::Auto);
// The same, one list of tokens per rank (what schedule_to_csv joins with commas and newlines).
std::vector<std::vector<std::string>> schedule_tokens(const Schedule& s, Dialect dialect = Dialect::Auto);

enum class Layout { Auto, Linear, VShape, Bidirectional };
Layout parse_layout(const std::string& name);

// Parses one action token; throws InputError located at `loc` on bad syntax.
Action parse_action(const std::string& token, const struct SourceLoc& loc);

// Imports a CSV. `pp` and `microbatches` (0 = infer) are checked against the file. The layout
// (which rank holds which stage, and whether there are two pipes) is inferred unless given.
// The result is validated; errors carry file:line:col where they point at one token.
// `dialect` Auto detects it (recorded in Schedule::dialect); `keep_comm` false drops the comm
// actions (the engine then issues each transfer when its producer ends).
Schedule import_csv(const std::string& text, const std::string& filename, int pp, int microbatches,
                    Layout layout = Layout::Auto, Dialect dialect = Dialect::Auto, bool keep_comm = true);
Schedule import_csv_file(const std::string& path, int pp, int microbatches, Layout layout = Layout::Auto,
                         Dialect dialect = Dialect::Auto, bool keep_comm = true);

}  // namespace ppsim
