// SVG timelines in the style of the DualPipe paper's figure (see report/svg.h).
//
// Not obvious: the contract tests rely on. Every compute-stream Interval is exactly one
// `<rect class="op">` (bubbles are plain background, never an op rect); communication is drawn
// as `class="comm"` (comm-stream intervals) and `class="xfer"` (transfers that take time) in a
// thin lane under the rank's row, only when the timeline has any; each rank's activation memory
// is one `<polyline class="mem">`. Stages of an odd block of P stages (DualPipe's reverse pipe,
// the second chunk of V-shaped and interleaved schedules) use a darker shade of their kind's
// colour. Checked by tests/report/svg_test.cc (well-formed XML, cell count, a headless render).
#include "report/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "core/error.h"
#include "report/html.h"
#include "report/results.h"

namespace ppsim {

namespace {

// Layout, in pixels: margins; a rank's row, its gap and its comm lane; the memory lane; the axis,
// the gap between schedules, the title and the legend.
constexpr double kMarginLeft = 64, kMarginRight = 24, kMarginTop = 12;
constexpr double kRowHeight = 22, kRowGap = 3, kCommHeight = 7;
constexpr double kMemHeight = 16, kMemGap = 3;
constexpr double kAxisHeight = 38, kBlockGap = 26, kTitleHeight = 24, kLegendHeight = 30;
constexpr double kMinCellPx = 22;     // the shortest op gets at least this width ...
constexpr double kMinPlotPx = 900;    // ... and the plot at least this ...
constexpr double kMaxPlotPx = 6000;   // ... but never more than this.
constexpr double kFontPx = 11;
constexpr double kCharPx = 0.62;      // average glyph advance per font pixel (DejaVu Sans digits)

enum class Kind { F, B, I, W, FB, Comm, Xfer };

struct Palette {
  const char* light;
  const char* dark;
  const char* label;
};

Palette palette(Kind k) {
  switch (k) {
    case Kind::F: return {"#f6c28b", "#d07a26", "F forward"};
    case Kind::B: return {"#9fd69f", "#3f8f45", "B full backward"};
    case Kind::I: return {"#9cc8ef", "#3a76b5", "I input-grad"};
    case Kind::W: return {"#efe08a", "#b99c1e", "W weight-grad"};
    case Kind::FB: return {"#dca0d8", "#9a4a98", "F&B overlapped pair"};
    case Kind::Comm: return {"#b4b4b4", "#7a7a7a", "communication"};
    case Kind::Xfer: return {"#8c8c8c", "#8c8c8c", "transfer"};
  }
  return {"#cccccc", "#888888", "?"};
}

Kind kind_of(const Interval& iv) {
  if (iv.stream == Stream::Comm) return Kind::Comm;
  const bool one_op = iv.op_index >= 0 && iv.op_index < iv.action.size();
  if (iv.action.overlapped && !one_op) return Kind::FB;
  switch ((one_op ? iv.action.op(iv.op_index) : iv.action.first).kind) {
    case OpKind::F: return Kind::F;
    case OpKind::B: return Kind::B;
    case OpKind::I: return Kind::I;
    case OpKind::W: return Kind::W;
  }
  return Kind::F;
}

bool dark_stage(int stage, int pp) { return pp > 0 && (stage / pp) % 2 == 1; }

}  // namespace

std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters other than tab/newline are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') out += '?';
        else out += c;
    }
  }
  return out;
}

namespace {

std::string num(double v) { return fmt::format("{:.2f}", v); }

// 1, 2 or 5 times a power of ten, the smallest not below `raw`.
double nice_step(double raw) {
  if (!(raw > 0) || !std::isfinite(raw)) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw * (1 - 1e-9)) return m * p;
  return 10 * p;
}

std::string fmt_display(double v) {
  if (std::fabs(v - std::round(v)) < 1e-9) return fmt::format("{}", static_cast<long long>(std::llround(v)));
  if (std::fabs(v) >= 100) return fmt::format("{:.1f}", v);
  return fmt::format("{:.4g}", v);
}

class SvgWriter {
 public:
  explicit SvgWriter(const std::vector<NamedTimeline>& tls) : tls_(tls) {}

  std::string render() {
    for (std::size_t i = 0; i < tls_.size(); ++i)
      PPSIM_CHECK(tls_[i].timeline != nullptr, "timeline {} ('{}') is null", i, tls_[i].name);
    choose_scale();
    std::string body;
    double y = kMarginTop;
    y = legend(body, y);
    for (const auto& nt : tls_) y = block(body, nt, y) + kBlockGap;
    const double height = std::ceil(y);
    std::string out = fmt::format(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
        "font-family=\"DejaVu Sans, Arial, Helvetica, sans-serif\" font-size=\"{2}\">\n"
        "<rect class=\"bg\" x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"#ffffff\"/>\n",
        width_, height, kFontPx);
    out += body;
    out += "</svg>\n";
    return out;
  }

 private:
  // One pixel scale for all blocks: the shortest compute op gets kMinCellPx, within limits.
  void choose_scale() {
    Time span = 0, shortest = 0;
    t0_ = kNever;
    for (const auto& nt : tls_) {
      const Timeline& t = *nt.timeline;
      t0_ = std::min(t0_, t.start);
      for (const auto& iv : t.intervals)
        if (iv.stream == Stream::Compute && iv.end > iv.start)
          shortest = shortest == 0 ? iv.duration() : std::min(shortest, iv.duration());
    }
    if (t0_ == kNever) t0_ = 0;
    for (const auto& nt : tls_) span = std::max(span, nt.timeline->end - t0_);
    if (span <= 0) span = 1;
    double ppt = shortest > 0 ? kMinCellPx / static_cast<double>(shortest) : 0;
    ppt = std::max(ppt, kMinPlotPx / static_cast<double>(span));
    ppt = std::min(ppt, kMaxPlotPx / static_cast<double>(span));
    px_per_tick_ = ppt;
    plot_w_ = static_cast<double>(span) * ppt;
    width_ = std::ceil(kMarginLeft + plot_w_ + kMarginRight);
    width_ = std::max(width_, 760.0);  // room for the legend
  }

  double x_of(Time t) const { return kMarginLeft + static_cast<double>(t - t0_) * px_per_tick_; }

  double legend(std::string& out, double y) {
    std::set<Kind> present;
    bool any_dark = false;
    for (const auto& nt : tls_) {
      const Timeline& t = *nt.timeline;
      for (const auto& iv : t.intervals) {
        present.insert(kind_of(iv));
        if (iv.stream == Stream::Compute && dark_stage(iv.action.first.stage, t.pp)) any_dark = true;
      }
      for (const auto& tr : t.transfers)
        if (tr.end > tr.start) present.insert(Kind::Xfer);
    }
    out += "<g class=\"legend\">\n";
    double x = kMarginLeft;
    const double sw = 18, sh = 12, cy = y + 8;
    auto item = [&](const char* fill, const std::string& label) {
      out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"#555\" stroke-width=\"0.5\"/>",
                         num(x), num(cy), sw, sh, fill);
      out += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", num(x + sw + 4), num(cy + sh - 2), xml_escape(label));
      x += sw + 10 + static_cast<double>(label.size()) * kFontPx * kCharPx + 14;
    };
    for (Kind k : {Kind::F, Kind::B, Kind::I, Kind::W, Kind::FB, Kind::Comm, Kind::Xfer})
      if (present.count(k)) item(palette(k).light, palette(k).label);
    item("#ffffff", "bubble (idle)");
    if (any_dark) {
      out += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#444\">darker shade: reverse pipe / second chunk (stage &#8805; P)</text>\n",
                         num(x), num(cy + sh - 2));
    }
    out += "</g>\n";
    return y + kLegendHeight;
  }

  // One timeline; returns the y below it.
  double block(std::string& out, const NamedTimeline& nt, double y) {
    const Timeline& t = *nt.timeline;
    const TimeScale& sc = t.scale;
    bool has_comm = false;
    for (const auto& iv : t.intervals) has_comm |= iv.stream == Stream::Comm && iv.end > iv.start;
    for (const auto& tr : t.transfers) has_comm |= tr.end > tr.start;
    const double lane_h = kRowHeight + (has_comm ? kCommHeight + 1 : 0);
    const double pitch = lane_h + kRowGap;

    out += fmt::format("<g class=\"timeline\" data-name=\"{}\">\n", xml_escape(nt.name));
    out += fmt::format("<text class=\"title\" x=\"{}\" y=\"{}\" font-size=\"14\" font-weight=\"bold\">{}</text>",
                       num(kMarginLeft), num(y + 15), xml_escape(nt.name.empty() ? std::string("timeline") : nt.name));
    out += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#444\">P = {}, makespan {} {}</text>\n",
                       num(kMarginLeft + static_cast<double>(nt.name.size() + 2) * 14 * kCharPx + 8), num(y + 15), t.pp,
                       fmt_display(sc.to_display(t.end - t.start)), xml_escape(sc.unit));
    y += kTitleHeight;
    const double rows_top = y;

    // Lanes: the background a rank's ops sit on; what stays visible is a bubble.
    for (int r = 0; r < t.pp; ++r) {
      const double ry = rows_top + r * pitch;
      out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">rank {}</text>", num(kMarginLeft - 6),
                         num(ry + kRowHeight / 2 + 4), r);
      out += fmt::format("<rect class=\"lane\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#ffffff\" stroke=\"#d0d0d0\" stroke-width=\"0.5\"/>\n",
                         num(x_of(t.start)), num(ry), num(static_cast<double>(t.end - t.start) * px_per_tick_), num(kRowHeight));
    }

    for (const auto& iv : t.intervals) {
      if (iv.rank < 0 || iv.rank >= t.pp) continue;
      const double ry = rows_top + iv.rank * pitch;
      if (iv.stream == Stream::Compute) cell(out, t, iv, ry);
      else if (has_comm) comm_bar(out, "comm", palette(Kind::Comm).light, iv.start, iv.end, ry + kRowHeight + 1,
                                  format_action(iv.action) + "/" + part_name(iv.part), sc);
    }
    if (has_comm)
      for (const auto& tr : t.transfers)
        if (tr.end > tr.start && tr.src_rank >= 0 && tr.src_rank < t.pp)
          comm_bar(out, "xfer", palette(Kind::Xfer).light, tr.start, tr.end, rows_top + tr.src_rank * pitch + kRowHeight + 1,
                   fmt::format("send {} to rank {}", format_op(tr.producer), tr.dst_rank), sc);

    y = rows_top + t.pp * pitch;
    y = axis(out, t, y);
    y = nt.memory != nullptr ? memory_bytes(out, t, *nt.memory, y) : memory(out, t, y);
    out += "</g>\n";
    return y;
  }

  void cell(std::string& out, const Timeline& t, const Interval& iv, double ry) {
    const Kind k = kind_of(iv);
    const bool one_op = iv.op_index >= 0 && iv.op_index < iv.action.size();
    const Op& op = one_op ? iv.action.op(iv.op_index) : iv.action.first;
    const bool dark = dark_stage(op.stage, t.pp);
    const Palette p = palette(k);
    const double x0 = x_of(iv.start), w = std::max(0.0, static_cast<double>(iv.duration()) * px_per_tick_);
    std::string name = format_action(iv.action);
    if (iv.part != Part::Whole) name += std::string("/") + part_name(iv.part);
    out += fmt::format(
        "<rect class=\"op\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"#ffffff\" "
        "stroke-width=\"0.75\">"
        "<title>rank {}: {} [{}, {}) {}</title></rect>",
        num(x0), num(ry), num(w), num(kRowHeight), dark ? p.dark : p.light, iv.rank, xml_escape(name),
        fmt_display(t.scale.to_display(iv.start)), fmt_display(t.scale.to_display(iv.end)), xml_escape(t.scale.unit));
    std::string label = iv.action.overlapped && !one_op
                            ? fmt::format("{}|{}", iv.action.first.microbatch, iv.action.second.microbatch)
                            : fmt::format("{}", op.microbatch);
    // Shrink the text to fit the cell; leave it out where it would be unreadable.
    double font = kFontPx;
    const double need = static_cast<double>(label.size()) * kCharPx;
    if (need * font > w - 2) font = (w - 2) / need;
    if (font >= 5) {
      out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"{}\" fill=\"{}\">{}</text>",
                         num(x0 + w / 2), num(ry + kRowHeight / 2 + font * 0.36), num(font),
                         dark ? "#ffffff" : "#1a1a1a", xml_escape(label));
    }
    out += "\n";
  }

  void comm_bar(std::string& out, const char* cls, const char* fill, Time a, Time b, double y, const std::string& what,
                const TimeScale& sc) {
    out += fmt::format(
        "<rect class=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" fill-opacity=\"0.7\"><title>{} "
        "[{}, {}) {}</title></rect>\n",
        cls, num(x_of(a)), num(y), num(std::max(0.5, static_cast<double>(b - a) * px_per_tick_)), num(kCommHeight),
        fill, xml_escape(what), fmt_display(sc.to_display(a)), fmt_display(sc.to_display(b)), xml_escape(sc.unit));
  }

  double axis(std::string& out, const Timeline& t, double y) {
    const TimeScale& sc = t.scale;
    const double ax = y + 4;
    const double x_end = x_of(t.end);
    out += fmt::format("<g class=\"axis\"><line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\" stroke-width=\"1\"/>\n",
                       num(x_of(t.start)), num(ax), num(x_end), num(ax));
    const double px_per_unit = px_per_tick_ * static_cast<double>(sc.ticks_per_unit);
    const double step = nice_step(60.0 / px_per_unit);  // labels at least 60 px apart
    const double d0 = sc.to_display(t.start), d1 = sc.to_display(t.end);
    const double first = std::ceil(d0 / step - 1e-9) * step;
    for (int i = 0;; ++i) {
      const double v = first + i * step;
      if (v > d1 + 1e-9 || i > 10000) break;
      const double x = kMarginLeft + (v - sc.to_display(t0_)) * px_per_unit;
      out += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#333\" stroke-width=\"1\"/>"
                         "<text x=\"{0}\" y=\"{3}\" text-anchor=\"middle\" font-size=\"10\">{4}</text>\n",
                         num(x), num(ax), num(ax + 4), num(ax + 15), fmt_display(v));
    }
    out +=
        fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"10\" fill=\"#444\">time ({})</text></g>\n",
                    num(x_end), num(ax + 28), xml_escape(sc.unit));
    return y + kAxisHeight;
  }

  using Lanes = std::vector<std::vector<std::pair<Time, double>>>;  // per rank, (time, value) samples

  // A step line per rank over the schedule, each sample holding until the next, scaled to the
  // peak; `baseline` draws each lane's zero line and starts its line at the schedule's start.
  double memory_lane(std::string& out, const Timeline& t, const std::string& title, double peak, bool baseline,
                     const Lanes& lanes, double y) {
    out += fmt::format("<g class=\"memory\"><text x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"#444\">{}</text>\n",
                       num(kMarginLeft), num(y + 8), title);
    y += 14;
    const double scale = peak > 0 ? (kMemHeight - 2) / peak : 0;
    for (int r = 0; r < t.pp; ++r) {
      const double base = y + kMemHeight;
      out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"9\">rank {}</text>",
                         num(kMarginLeft - 6), num(base - 3), r);
      if (baseline)
        out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#d0d0d0\" stroke-width=\"0.5\"/>",
                           num(x_of(t.start)), num(base), num(x_of(t.end)), num(base));
      std::string pts = baseline ? fmt::format("{},{}", num(x_of(t.start)), num(base)) : std::string();
      double level = 0;
      if (static_cast<std::size_t>(r) < lanes.size()) {
        for (const auto& [when, value] : lanes[static_cast<std::size_t>(r)]) {
          const double x = x_of(std::max(when, t.start));
          pts += fmt::format("{}{},{} {},{}", pts.empty() ? "" : " ", num(x), num(base - level * scale), num(x),
                             num(base - value * scale));
          level = value;
        }
      }
      if (pts.empty()) pts = fmt::format("{},{}", num(x_of(t.start)), num(base));
      pts += fmt::format(" {},{}", num(x_of(t.end)), num(base - level * scale));
      out += fmt::format(
          "<polyline class=\"mem\" points=\"{}\" fill=\"none\" stroke=\"#2f5f9f\" stroke-width=\"1.2\"/>\n", pts);
      y += kMemHeight + kMemGap;
    }
    out += "</g>\n";
    return y;
  }

  // The live activations the timeline recorded, in rank shares (report/results.h).
  double memory(std::string& out, const Timeline& t, double y) {
    const int v = timeline_chunks_per_rank(t);
    double peak = 0;
    Lanes lanes;
    for (const auto& rank : t.activations) {
      lanes.emplace_back();
      for (const auto& s : rank) {
        peak = std::max(peak, rank_shares(s.activations, v));
        lanes.back().emplace_back(s.t, rank_shares(s.activations, v));
      }
    }
    return memory_lane(out, t, fmt::format("activation memory per rank (rank shares, peak {:g})", peak), peak, true,
                       lanes, y);
  }

  // The same lane in GB of device memory (weights, optimizer, buffers and activations).
  double memory_bytes(std::string& out, const Timeline& t, const std::vector<std::vector<MemorySample>>& mem, double y) {
    double peak = 0;
    Lanes lanes;
    for (const auto& rank : mem) {
      lanes.emplace_back();
      for (const auto& s : rank) {
        peak = std::max(peak, s.bytes);
        lanes.back().emplace_back(s.t, s.bytes);
      }
    }
    return memory_lane(out, t, fmt::format("device memory per rank (GB, peak {:.1f})", peak / 1e9), peak, false, lanes,
                       y);
  }

  const std::vector<NamedTimeline>& tls_;
  Time t0_ = 0;
  double px_per_tick_ = 1;
  double plot_w_ = 0;
  double width_ = 0;
};

}  // namespace

std::string render_svg(const std::vector<NamedTimeline>& timelines) { return SvgWriter(timelines).render(); }

}  // namespace ppsim
