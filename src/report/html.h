// The self-contained HTML report (`--html FILE`): one file with the page's script and styles
// (web/, embedded at build time), the results and every timeline inline as JSON, and, when
// tools/build_wasm.sh built it, the engine compiled to WebAssembly. Opens from disk, no network.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/timeline.h"
#include "report/trace.h"

namespace ppsim {

// A timeline of the page: a NamedTimeline (its memory: per rank, bytes over time; without it the
// lane shows the live activations the timeline recorded, in rank shares), and where it belongs.
struct HtmlTimeline : NamedTimeline {
  int row = -1;        // the results row it belongs to (-1: its own index)
  std::string label;   // e.g. "measured", "predicted"
};

// Chunks per rank per pipe of a timeline without its schedule, from the stages it ran (one pipe
// of S stages: S/P; two pipes: S/2P), to count its activations in rank shares (rank_shares).
int timeline_chunks_per_rank(const Timeline& t);

// A timeline in the page's compact encoding (docs/JSON.md, "HTML report"): times as integer
// multiples of one quantum q (ticks; the gcd of every time), per rank a flat array of
// [flags, stage, mb, (stage2, mb2 when a pair), start - previous start, duration].
nlohmann::json compact_timeline(const HtmlTimeline& t);

struct HtmlReport {
  std::string kind;     // compare, simulate, search, plan, validate, import-trace
  std::string title;
  nlohmann::json results;                       // as `--format json` prints it, or null
  std::vector<HtmlTimeline> timelines;
  nlohmann::json inputs;                        // the controls' values (null: no controls)
  nlohmann::json sections = nlohmann::json::array();  // extra tables: {title, id, columns, rows, note}
};

// `plan`'s page from its JSON (render_plan_json, docs/PLAN.md): per variant the ranked plans,
// the best per schedule, and what ruled the others out (reasons with counts and an example).
HtmlReport plan_html(const nlohmann::json& plan);

// A page of tables from a command's JSON (import-trace's per-layer cells and streams, ...): one
// table per array of objects, at the top level or one object down (its path is the title).
HtmlReport json_tables_html(const std::string& kind, const std::string& title, const nlohmann::json& j);

// True when this binary embeds the WebAssembly engine.
bool html_has_engine();
std::string render_html(const HtmlReport& r);

}  // namespace ppsim
