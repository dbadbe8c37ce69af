#include "report/chart.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace ppsim {

bool use_color(const std::string& mode, const std::string& output_path) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  if (mode != "auto") throw InputError(fmt::format("--color: expected auto, always or never, got '{}'", mode), {}, kExitUsage);
  // https://no-color.org: NO_COLOR set and not empty turns auto's colours off.
  if (const char* no = std::getenv("NO_COLOR"); no && *no) return false;
  return (output_path.empty() || output_path == "-") && ::isatty(STDOUT_FILENO);
}

std::string render_step_chart(const Timeline& t, bool color, int max_columns) {
  const Time unit = t.scale.ticks_per_unit;
  // The finest step that divides every interval boundary (at most 4 sub-steps per unit).
  Time step = unit;
  for (const auto& iv : t.intervals)
    for (Time x : {iv.start - t.start, iv.end - t.start})
      while (step > unit / 4 && x % step != 0) step /= 2;
  int max_mb = 0;
  for (const auto& iv : t.intervals) max_mb = std::max(max_mb, iv.action.first.microbatch);
  const int width = static_cast<int>(fmt::format("{}", max_mb).size()) + 2;  // kind, digits, a space
  const Time span = t.end - t.start;
  const long long columns = span / step + (span % step ? 1 : 0);
  if (columns > max_columns) return fmt::format("(chart omitted: {} steps is wider than {} columns)\n", columns, max_columns);
  std::vector<std::vector<std::string>> grid(t.pp, std::vector<std::string>(static_cast<std::size_t>(columns)));
  std::vector<std::vector<char>> kind(t.pp, std::vector<char>(static_cast<std::size_t>(columns), '.'));
  for (const auto& iv : t.intervals) {
    if (iv.stream != Stream::Compute || iv.part != Part::Whole) continue;
    const long long c0 = (iv.start - t.start) / step, c1 = (iv.end - t.start + step - 1) / step;
    const char k = iv.action.overlapped ? 'X' : op_kind_char(iv.action.first.kind);
    for (long long c = c0; c < c1 && c < columns; ++c) {
      kind[iv.rank][c] = k;
      grid[iv.rank][c] = c == c0 ? fmt::format("{}{}", k, iv.action.first.microbatch) : std::string(1, '~');
    }
  }
  auto paint = [&](char k, const std::string& text) {
    if (!color) return text;
    const char* code = "0";
    switch (k) {
      case 'F': code = "44;97"; break;   // blue
      case 'B': code = "42;30"; break;   // green
      case 'I': code = "46;30"; break;   // cyan
      case 'W': code = "43;30"; break;   // yellow
      case 'X': code = "45;97"; break;   // magenta: overlapped F&B
      default: return text;
    }
    return fmt::format("\x1b[{}m{}\x1b[0m", code, text);
  };
  std::string out;
  for (int r = 0; r < t.pp; ++r) {
    out += fmt::format("rank {:>2} |", r);
    for (long long c = 0; c < columns; ++c) {
      std::string cell = grid[r][c].empty() ? "." : grid[r][c];
      cell.resize(static_cast<std::size_t>(width), ' ');
      out += paint(kind[r][c], cell);
    }
    out += "|\n";
  }
  if (step != unit) out += fmt::format("(one column = 1/{} time unit)\n", unit / step);
  out += "legend: F forward, B full backward, I input-grad, W weight-grad, X overlapped F&B, . idle\n";
  return out;
}

}  // namespace ppsim
