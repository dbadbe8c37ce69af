#include "api/times.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace ppsim::api {

namespace {
std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Time parse_amount(const std::string& text, const std::string& what, const std::string& flag) {
  const std::optional<double> parsed = parse_number(text);
  if (!parsed) throw InputError(fmt::format("{}: {} must be a number, got '{}'", flag, what, text), {}, kExitUsage);
  const double v = *parsed;
  if (v < 0) throw InputError(fmt::format("{}: {} must be >= 0, got {}", flag, what, text), {}, kExitUsage);
  if (v > 1e9)
    throw InputError(fmt::format("{}: {} = {} is too large (at most 1e9 units)", flag, what, text), {}, kExitUsage);
  return static_cast<Time>(std::llround(v * static_cast<double>(kTicksPerUnit)));
}
}  // namespace

std::optional<double> parse_number(const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != text.size() || text.empty() || !std::isfinite(v)) return std::nullopt;
  return v;
}

UniformTimes parse_times(const std::string& spec, const std::string& flag) {
  UniformTimes t;
  bool have_f = false, have_b = false, have_fb = false;
  std::size_t pos = 0;
  while (pos <= spec.size()) {
    std::size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) {
      if (comma == spec.size()) break;
      continue;
    }
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw InputError(fmt::format("{}: expected KEY=VALUE, got '{}' (keys: F, B, W, FB)", flag, item), {}, kExitUsage);
    const std::string key = lower(item.substr(0, eq));
    const Time v = parse_amount(item.substr(eq + 1), item.substr(0, eq), flag);
    if (key == "f") { t.f = v; have_f = true; }
    else if (key == "b") { t.b = v; have_b = true; }
    else if (key == "w") t.w = v;
    else if (key == "fb" || key == "f&b") { t.fb = v; have_fb = true; }
    else {
      auto s = closest_match(key, {"f", "b", "w", "fb"});
      for (auto& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      throw InputError(fmt::format("{}: unknown time '{}' (keys: F, B, W, FB)", flag, item.substr(0, eq)), s, kExitUsage);
    }
  }
  if (!have_f || !have_b) throw InputError(fmt::format("{}: F and B are required, got '{}'", flag, spec), {}, kExitUsage);
  if (t.w > t.b) throw InputError(fmt::format("{}: W is part of the full backward B, so W <= B is needed, got W > B", flag), {}, kExitUsage);
  if (t.f + t.b == 0) throw InputError(fmt::format("{}: F + B must be > 0", flag), {}, kExitUsage);
  if (!have_fb) t.fb = t.f + t.b;
  if (t.fb < std::max(t.f, t.b))
    throw InputError(fmt::format("{}: an F&B pair runs both ops, so FB >= max(F, B) is needed, got FB < max(F, B)", flag),
                     {}, kExitUsage);
  return t;
}

Time units_to_ticks(double v, const char* flag) {
  if (!std::isfinite(v) || v < 0 || v > 1e9)
    throw InputError(fmt::format("{}: expected a number in [0, 1e9], got {}", flag, v), {}, kExitUsage);
  return static_cast<Time>(std::llround(v * static_cast<double>(kTicksPerUnit)));
}

SliceCosts to_slice(const UniformTimes& t) {
  SliceCosts c;
  c.f = t.f;
  c.b = t.b;
  c.w = t.w;
  c.fb = t.fb;
  return c;
}

SliceCosts chunk_costs(const UniformTimes& share, int v) {
  SliceCosts c = to_slice(share);
  c.f /= v;
  c.b /= v;
  c.w /= v;
  c.fb /= v;
  return c;
}

}  // namespace ppsim::api
