// Simulated time: a signed 64-bit count of ticks. Never a double, so that sums do not drift and
// equal inputs give byte-identical outputs.
//
// Two scales are in use. Physical costs (cost model, measured profiles) use 1 tick = 1 ns.
// Quick experiments in abstract "units" (--times F=1,B=2) use kTicksPerUnit ticks per unit:
// 18,018,000 = lcm(1..16) * 25, so any integer time split into v <= 16 chunks, and any time with
// two decimals, is represented exactly.
#pragma once
#include <cstdint>
#include <limits>

namespace ppsim {

using Time = std::int64_t;
using Bytes = std::int64_t;

inline constexpr Time kNever = std::numeric_limits<Time>::max();
inline constexpr Time kTicksPerUnit = 18'018'000;

constexpr Time ns(std::int64_t v) { return v; }
constexpr Time us(std::int64_t v) { return v * 1'000; }
constexpr Time ms(std::int64_t v) { return v * 1'000'000; }

// How ticks are shown to the user: `ticks_per_unit` ticks make one displayed unit.
struct TimeScale {
  Time ticks_per_unit = kTicksPerUnit;
  const char* unit = "units";  // "units", "ms", "s"
  double to_display(Time t) const { return static_cast<double>(t) / static_cast<double>(ticks_per_unit); }
  static TimeScale units() { return {kTicksPerUnit, "units"}; }
  static TimeScale millis() { return {1'000'000, "ms"}; }
};

}  // namespace ppsim
