// `ppsim search`: the flags and the output of api::search (src/api/search.h, docs/SEARCH.md):
// the searched schedule beside the best of the nine families under the same cap, as a table,
// JSON or CSV (--format); the schedule file (--out, --out-format) and the picture (--svg).
//
// Not obvious: the schedule file and the SVG are written together or not at all, after the
// search, so an error or an interrupted search leaves no partial file.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "api/search.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "report/html.h"
#include "report/results.h"

namespace ppsim::cli {

namespace {

struct SearchArgs {
  api::SearchCall call;
  std::optional<int> pp, microbatches;
  std::string memory_cap;  // a number, or none; empty: the best family's peak
  std::string svg;
  std::string html;
  std::string out;
  std::string out_format = "csv";
  std::string format = "table";
  bool quiet = false;
};

}  // namespace

Runner setup_search(CLI::App& sub) {
  auto a = std::make_shared<SearchArgs>();
  api::SearchCall& c = a->call;
  sub.add_option("config", c.config, "YAML config (model, hardware, parallel); optional");
  sub.add_option("--set", c.sets, "override a config key: key.path=value (repeatable)");
  sub.add_option("--pp,-p", a->pp, "ranks (default 8, or the config's)");
  sub.add_option("--microbatches,-m", a->microbatches, "micro-batches per step (default 20, or the config's)");
  sub.add_option("--times", c.times, "one rank's share: F=..,B=..(full backward),W=..,FB=..")->capture_default_str();
  sub.add_option("--chunk-times", c.chunk_times, "per-chunk times instead of --times (same keys)");
  sub.add_option("--p2p-latency", c.p2p_latency, "latency of each stage-to-stage transfer, in the time unit");
  add_overlap_options(sub, c.overlap);
  sub.add_option("--memory-cap", a->memory_cap,
                 "activations per rank, in micro-batches of one rank's share (a V chunk counts 1/2); none (or 0) = "
                 "no cap; default: the best family's peak, so that a win is at equal memory");
  sub.add_option("--w-hold", c.w_hold,
                 "share of a micro-batch's activations its W still holds after its I (Zero Bubble's M_W/M_B), in "
                 "[0, 1]; the cap counts the rest freed at the I. Default: 1 with --times, the memory model's with a "
                 "config");
  sub.add_option("--placement", c.placement,
                 "torch (linear and v: one parameter copy, what PyTorch runs), linear, v, bidirectional or all "
                 "(adds DualPipe's two copies)")->capture_default_str();
  sub.add_option("--seed", c.seed, "random seed (same seed, same result unless the time limit binds)")
      ->capture_default_str();
  sub.add_option("--time-limit", c.time_limit, "seconds for the whole search")->capture_default_str();
  sub.add_option("--objective", c.objective,
                 "makespan, or span: the longest rank's own span (the step period under Zero Bubble's optimizer "
                 "post-validation; the default when the config sets parallel.post_validation)");
  sub.add_option("--threads,-j", c.threads, "threads (0: every core)")->capture_default_str();
  sub.add_option("--svg", a->svg, "write an SVG timeline of the searched schedule and the best family");
  sub.add_option("--html", a->html, "write a self-contained HTML report of the searched schedule and the best family");
  sub.add_option("--out", a->out, "write the searched schedule to this file");
  sub.add_option("--out-format", a->out_format,
                 "schedule file dialect: csv or torch (both PyTorch's compute-only CSV)")
      ->capture_default_str();
  sub.add_option("--format", a->format, "the report: table, json (docs/JSON.md) or csv")->capture_default_str();
  sub.add_flag("--quiet,-q", a->quiet, "no progress line on stderr (it is shown only when stderr is a terminal)");
  return [a]() {
    if (a->format == "torch")
      throw InputError("--format torch: the schedule file's dialect is --out-format now (did you mean --out-format "
                       "torch?)",
                       {}, kExitUsage);
    const Format f = parse_format(a->format, {"table", "json", "csv"});
    if (a->out_format != "csv" && a->out_format != "torch")
      throw InputError(fmt::format("--out-format: expected csv or torch, got '{}'", a->out_format), {}, kExitUsage);
    api::SearchCall call = a->call;
    call.pp = a->pp;
    call.microbatches = a->microbatches;
    if (a->memory_cap == "none") {
      call.memory_cap = 0.0;
    } else if (!a->memory_cap.empty()) {
      double v = 0;
      std::size_t used = 0;
      try {
        v = std::stod(a->memory_cap, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != a->memory_cap.size() || !(v >= 0 && v <= 1e9))
        throw InputError(fmt::format("--memory-cap: expected a number >= 0 or none, got '{}'", a->memory_cap), {},
                         kExitUsage);
      call.memory_cap = v;
    }
    // Progress only where someone watches: stderr a terminal; the line ends before the report.
    const bool progress = !a->quiet && isatty(fileno(stderr));
    bool shown = false;
    const TimeScale scale = call.config.empty() ? TimeScale::units() : TimeScale::millis();
    if (progress)
      call.progress = [&shown, &scale](std::uint64_t done, std::uint64_t all, Time best) {
        std::fprintf(stderr, "\rsearch: %llu/%llu trials, best makespan %s   ", static_cast<unsigned long long>(done),
                     static_cast<unsigned long long>(all), best ? fmt_time(best, scale).c_str() : "-");
        shown = true;
      };
    const api::SearchOutcome r = api::search(call);
    if (shown) std::fprintf(stderr, "\n");

    std::vector<std::pair<std::string, std::string>> files;
    if (!a->out.empty()) files.emplace_back(a->out, r.schedule_csv());
    if (!a->svg.empty()) files.emplace_back(a->svg, r.svg());
    if (!a->html.empty()) {
      const std::vector<api::SearchOutcome::NamedRun> runs = r.timelines();  // the report points into it
      HtmlReport rep;
      rep.kind = "search";
      rep.title = "ppsim search";
      rep.results = r.json;  // as --format json prints them
      for (std::size_t i = 0; i < runs.size(); ++i)
        rep.timelines.push_back({runs[i].name, &runs[i].sim.timeline, nullptr, static_cast<int>(i), {}});
      files.emplace_back(a->html, render_html(rep));
    }
    files.emplace_back("-", f == Format::Json  ? r.json.dump(2) + "\n"
                            : f == Format::Csv ? render_csv(r.rows, r.scale)
                                               : r.table);
    write_outputs(files);
    return 0;
  };
}

}  // namespace ppsim::cli
