// `ppsim fidelity [files...]`: every configs/published/ run predicted against its source
// (api/fidelity.h), as a table or JSON; `--check thresholds` exits 7 when a run's error grows
// past the checked-in threshold (CI's regression test).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "api/fidelity.h"
#include "cli/commands.h"
#include "cli/common.h"

namespace ppsim::cli {

namespace {

std::string opt_pct(const std::optional<double>& v) { return v ? fmt::format("{:+.1f}", *v) : std::string("-"); }

std::string render_table(const api::FidelityResult& r) {
  std::size_t w = 44;  // the key column: the longest key, at least 44
  for (const auto& x : r.rows) w = std::max(w, x.key.size());
  std::string out = fmt::format("{:<{}} {:>8} {:>4} {:>28} {:>12} {:>12} {:>7} {:>9} {:>7} {:>7} {:>7} {:>9} {:>7}\n",
                                "run / result", w, "schedule", "M", "published", "pub tok/s", "pred tok/s", "error%",
                                "step s", "bubble", "dp s", "opt s", "mem GB", "rel pp");
  for (const auto& x : r.rows) {
    const std::string on = !x.not_calibrated.empty()  ? x.not_calibrated
                           : x.calibrated_on == x.key ? "calibrated on this row"
                                                      : x.calibrated_on;
    std::string mem = fmt::format("{:.1f}", x.predicted_memory_gb);
    if (x.published_memory_gb) mem += fmt::format("/{:.0f}", *x.published_memory_gb);
    else if (x.fits_limit_gb) mem += fmt::format("{}{:.1f}", x.fits ? "<=" : ">!", *x.fits_limit_gb);
    out += fmt::format(
        "{:<{}} {:>8} {:>4} {:>28} {:>12.4g} {:>12.4g} {:>+7.1f} {:>9.3f} {:>7.3f} {:>7.3f} {:>7.3f} "
        "{:>9} {:>7}{}{}\n",
        x.key, w, x.schedule.substr(0, 8), x.microbatches, x.published_as.substr(0, 28), x.published_tokens_s,
        x.predicted_tokens_s, 100.0 * x.error, x.step_s, x.bubble_ratio, x.dp_exposed_s, x.optimizer_s, mem,
        opt_pct(x.relative_diff_pp),
        !r.checked || x.within ? std::string()
        : !x.fits ? fmt::format("  DOES NOT FIT ({:.1f} GB > {:.1f})", x.predicted_memory_gb, *x.fits_limit_gb)
                  : fmt::format("  PAST THRESHOLD ({})",
                                x.max_error_pct ? fmt::format("{:.1f}%", *x.max_error_pct) : std::string("no entry")),
        x.preset_error
            ? fmt::format("  preset {:+.1f}%, scale {:.3f} ({}){}", 100.0 * *x.preset_error, x.calibration_scale, on,
                          x.extrapolates.empty() ? std::string()
                                                 : fmt::format("; extrapolates: {}", fmt::join(x.extrapolates, ", ")))
            : std::string());
  }
  out += api::fidelity_summary(r);
  if (r.checked)
    out += fmt::format("{} of {} results past their thresholds or not fitting{}\n",
                       r.failures - static_cast<int>(r.skipped.size()), r.rows.size(),
                       r.skipped.empty() ? std::string() : fmt::format(", {} file(s) skipped", r.skipped.size()));
  return out;
}

}  // namespace

Runner setup_fidelity(CLI::App& sub) {
  auto a = bind_options(sub, "fidelity");
  return [a]() {
    const Format f = parse_format(a->text("format"), {"table", "json"});
    api::FidelityRequest req = api::fidelity_request(*a);
    req.progress = api::terminal_progress();
    const api::FidelityResult r = api::fidelity(req);
    api::end_terminal_progress();
    for (const auto& skipped : r.skipped) fmt::print(stderr, "ppsim: skipped: {}\n", skipped.second);
    write_output(a->text("output"), f == Format::Json ? api::fidelity_json(r).dump(2) + "\n" : render_table(r));
    // A skipped file is a source dropped out of the table: its own exit code, unless --check's 7.
    return r.checked && r.failures > 0 ? 7 : r.skipped_exit;
  };
}

}  // namespace ppsim::cli
