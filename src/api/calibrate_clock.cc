// hardware.clock's response fitted from a traced pipeline step (calibrate_clock.h).
#include "api/calibrate_clock.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>

namespace ppsim::api {

std::vector<ClockPoint> clock_points(const trace::PipelineRun& run, double reset_idle_ms) {
  std::vector<ClockPoint> out;
  for (const trace::RankRun& r : run.ranks) {
    std::vector<const trace::ExecutedAction*> acts;
    for (const trace::ExecutedAction& x : r.actions)
      if (x.gpu_start != kNever && x.compute > 0) acts.push_back(&x);
    std::sort(acts.begin(), acts.end(), [](auto* a, auto* b) { return a->gpu_start < b->gpu_start; });
    std::vector<std::pair<Time, Time>> spans;
    std::map<std::pair<int, int>, std::pair<double, int>> by;  // (stage, kind; a pair: -1) -> compute, count
    auto key = [](const Action& a) {
      return a.overlapped ? std::pair{a.first.stage, -1} : std::pair{a.first.stage, static_cast<int>(a.first.kind)};
    };
    for (const trace::ExecutedAction* x : acts) {
      spans.push_back({x->gpu_start, x->gpu_end});
      auto& [sum, n] = by[key(x->action)];
      sum += static_cast<double>(x->compute);
      ++n;
    }
    const std::vector<double> tau = busy_tau_ms(spans, reset_idle_ms);
    for (std::size_t i = 0; i < acts.size(); ++i) {
      const auto& [sum, n] = by[key(acts[i]->action)];
      if (n >= 3) out.push_back({tau[i], static_cast<double>(acts[i]->compute) * n / sum});
    }
  }
  return out;
}

namespace {

// Least squares of y on up to three columns; the residual sum and the coefficients' covariance
// over the residual variance ((X'X)^-1). `ok` false where X'X is singular.
struct Linear {
  std::array<double, 3> a{};
  std::array<double, 3> var{};  // diagonal of (X'X)^-1
  double sse = std::numeric_limits<double>::infinity();
  bool ok = false;
};

Linear solve(const std::vector<std::array<double, 3>>& x, const std::vector<double>& y, int k) {
  Linear out;
  double m[3][4] = {};
  for (std::size_t i = 0; i < y.size(); ++i)
    for (int r = 0; r < k; ++r) {
      for (int c = 0; c < k; ++c) m[r][c] += x[i][r] * x[i][c];
      m[r][3] += x[i][r] * y[i];
    }
  double inv[3][3] = {};
  double a[3][6] = {};
  for (int r = 0; r < k; ++r) {
    for (int c = 0; c < k; ++c) a[r][c] = m[r][c];
    a[r][3 + r] = 1;
  }
  for (int c = 0; c < k; ++c) {  // Gauss-Jordan with partial pivoting
    int p = c;
    for (int r = c + 1; r < k; ++r)
      if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
    if (std::abs(a[p][c]) < 1e-12) return out;
    for (int j = 0; j < 6; ++j) std::swap(a[c][j], a[p][j]);
    const double d = a[c][c];
    for (int j = 0; j < 6; ++j) a[c][j] /= d;
    for (int r = 0; r < k; ++r)
      if (r != c) {
        const double f = a[r][c];
        for (int j = 0; j < 6; ++j) a[r][j] -= f * a[c][j];
      }
  }
  for (int r = 0; r < k; ++r)
    for (int c = 0; c < k; ++c) inv[r][c] = a[r][3 + c];
  for (int r = 0; r < k; ++r) {
    for (int c = 0; c < k; ++c) out.a[r] += inv[r][c] * m[c][3];
    out.var[r] = inv[r][r];
  }
  out.sse = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    double p = 0;
    for (int r = 0; r < k; ++r) p += out.a[r] * x[i][r];
    out.sse += (y[i] - p) * (y[i] - p);
  }
  out.ok = true;
  return out;
}

std::vector<double> geometric(double lo, double hi, int n) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(n == 1 ? lo : lo * std::pow(hi / lo, static_cast<double>(i) / (n - 1)));
  return v;
}

// Half the range of a grid parameter's values whose best fit (over the others) is within `tol` of
// the minimum; at least half a grid step.
double profile_halfwidth(const std::map<double, double>& best, double tol) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, step = lo, prev = -lo, min = lo;
  for (const auto& [v, s] : best) {
    min = std::min(min, s);
    if (prev > -std::numeric_limits<double>::infinity()) step = std::min(step, v - prev);
    prev = v;
  }
  for (const auto& [v, s] : best)
    if (s <= min + tol) lo = std::min(lo, v), hi = std::max(hi, v);
  if (best.size() < 2) return 0;
  return std::max((hi - lo) / 2, step / 2);
}

struct GridFit {
  Linear lin;
  double warm_ms = 0, slow_at = 0, slow_ms = 0;
  std::map<double, double> by_warm_ms, by_slow_at, by_slow_ms;  // each value's best residual sum
};

GridFit grid_fit(const std::vector<ClockPoint>& pts, bool warm, bool slow, double span) {
  const std::vector<double> wms = warm ? geometric(5, 400, 24) : std::vector<double>{50};
  std::vector<double> at{900}, sms{150};
  if (slow) {
    at.clear();
    for (int i = 0; i <= 80; ++i) at.push_back(span * i / 80);
    sms = geometric(20, std::max(20.0, span / 2), 16);
  }
  std::vector<double> y;
  for (const ClockPoint& p : pts) y.push_back(p.ratio);
  GridFit g;
  auto keep = [](std::map<double, double>& m, double v, double s) {
    auto [it, fresh] = m.emplace(v, s);
    if (!fresh) it->second = std::min(it->second, s);
  };
  std::vector<std::array<double, 3>> x(pts.size());
  for (double w : wms)
    for (double c : at)
      for (double sw : sms) {
        for (std::size_t i = 0; i < pts.size(); ++i) {
          const double z = (pts[i].tau_ms - c) / sw;
          int k = 0;
          x[i][k++] = 1;
          if (warm) x[i][k++] = -std::exp(-pts[i].tau_ms / w);
          if (slow) x[i][k++] = std::exp(-0.5 * z * z);
        }
        const Linear l = solve(x, y, 1 + warm + slow);
        if (!l.ok) continue;
        keep(g.by_warm_ms, w, l.sse);
        keep(g.by_slow_at, c, l.sse);
        keep(g.by_slow_ms, sw, l.sse);
        if (l.sse < g.lin.sse) g.lin = l, g.warm_ms = w, g.slow_at = c, g.slow_ms = sw;
      }
  return g;
}

}  // namespace

ClockResponseFit fit_clock_response(const std::vector<ClockPoint>& pts, double reset_idle_ms) {
  ClockResponseFit f;
  f.response.reset_idle_ms = reset_idle_ms;
  f.points = static_cast<int>(pts.size());
  for (const ClockPoint& p : pts) f.span_ms = std::max(f.span_ms, p.tau_ms);
  if (pts.size() < 8 || f.span_ms <= 0) return f;
  bool warm = true, slow = true;
  GridFit g;
  for (;;) {  // drop a term whose coefficient is under twice its standard error, and fit again
    g = grid_fit(pts, warm, slow, f.span_ms);
    if (!g.lin.ok) return f;
    const double dof = static_cast<double>(pts.size()) - (1 + warm + slow) - (warm + 2 * slow);
    const double s2 = g.lin.sse / std::max(1.0, dof);
    auto t = [&](int i) { return std::abs(g.lin.a[i]) / std::sqrt(s2 * g.lin.var[i]); };
    const bool weak_warm = warm && !(t(1) >= 2), weak_slow = slow && !(t(warm ? 2 : 1) >= 2);
    if (!weak_warm && !weak_slow) {
      const double a0 = g.lin.a[0];
      f.level = a0;
      f.rms = std::sqrt(g.lin.sse / static_cast<double>(pts.size()));
      if (warm) {
        f.warm_identified = true;
        f.response.warm = g.lin.a[1] / a0;
        f.response.warm_ms = g.warm_ms;
        f.warm_err = std::sqrt(s2 * g.lin.var[1]) / a0;
        f.warm_ms_err = profile_halfwidth(g.by_warm_ms, s2);
      }
      if (slow) {
        const int i = warm ? 2 : 1;
        f.slow_identified = true;
        f.response.slow = g.lin.a[i] / a0;
        f.response.slow_at_ms = g.slow_at;
        f.response.slow_ms = g.slow_ms;
        f.slow_err = std::sqrt(s2 * g.lin.var[i]) / a0;
        f.slow_at_err = profile_halfwidth(g.by_slow_at, s2);
        f.slow_ms_err = profile_halfwidth(g.by_slow_ms, s2);
      }
      return f;
    }
    // Drop the weaker term first.
    if (weak_slow && (!weak_warm || t(warm ? 2 : 1) <= t(1)))
      slow = false;
    else
      warm = false;
    if (!warm && !slow) return f;
  }
}

}  // namespace ppsim::api
