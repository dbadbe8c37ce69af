// Chrome trace-event JSON of one or more Timelines, and a plain JSON dump of one Timeline.
//
// Not obvious: where the flow arrows sit. A viewer binds a flow event ("s", and "f" with
// "bp":"e") to the slice that encloses it on its track, and Perfetto takes "encloses" loosely:
// the slice on top of the track's stack when the event is read, where a finished slice stays
// until the next one begins, and where slices starting at a timestamp are read before flow
// events at that timestamp. An event at a transfer's start (= its producer's end, when the next
// op may begin) or at its arrival (when the receiver may be idle, or busy with another op)
// would bind to the wrong slice. So each "s" sits at the middle of the op that produced the
// data and each "f" at the middle of the op that consumes it: strictly inside the right slice
// in every viewer. The transfer's own span (link start to arrival) is the "send" slice on the
// sender's communication track. Checked by tests/report/trace_test.cc.
#include "report/trace.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ppsim {

namespace {

using Json = nlohmann::ordered_json;

// Trace timestamps are microseconds. A display unit maps to 1000 us for abstract "units" (so
// that a 1-unit op reads as 1 ms in the viewer) and to its real length otherwise.
double us_per_display_unit(std::string_view unit) {
  if (unit == "s") return 1e6;
  if (unit == "us") return 1.0;
  if (unit == "ns") return 1e-3;
  return 1000.0;  // "units", "ms"
}

std::string kind_name(const Action& a) {
  if (a.overlapped) return "FB";
  return std::string(1, op_kind_char(a.first.kind));
}

// Direction of the data an op produces or consumes: activations (F) or gradients (B, I).
enum class Flow : int { Activation = 0, Gradient = 1 };

// Where a rank computed an op: its longest compute interval (an action split into sub-op
// parts may have gaps, where a flow event would bind to nothing).
struct OpSpan {
  Time start = kNever;
  Time end = 0;
  Time middle() const { return start + (end - start) / 2; }
};
using SpanKey = std::tuple<int, int, int, int>;  // rank, stage, microbatch, Flow

std::map<SpanKey, OpSpan> index_op_spans(const Timeline& t) {
  std::map<SpanKey, OpSpan> spans;
  for (const auto& iv : t.intervals) {
    if (iv.stream != Stream::Compute) continue;
    const bool one_op = iv.op_index >= 0 && iv.op_index < iv.action.size();
    for (int i = one_op ? iv.op_index : 0; i < (one_op ? iv.op_index + 1 : iv.action.size()); ++i) {
      const Op& op = iv.action.op(i);
      if (op.kind == OpKind::W) continue;
      const Flow f = op.kind == OpKind::F ? Flow::Activation : Flow::Gradient;
      OpSpan& s = spans[{iv.rank, op.stage, op.microbatch, static_cast<int>(f)}];
      if (s.start == kNever || iv.duration() > s.end - s.start) s = OpSpan{iv.start, iv.end};
    }
  }
  return spans;
}

// Events are written sorted by (time, order): where an op takes no time its flow events share
// its start, and must come after its slice (Perfetto reads ties in file order, or slices first).
enum Order : int { kSlice = 0, kFlow = 1 };

struct Event {
  Time t = 0;
  int order = kSlice;
  Json json;
};

class TraceWriter {
 public:
  explicit TraceWriter(const std::vector<NamedTimeline>& tls) : tls_(tls) {}

  std::string render() {
    for (std::size_t i = 0; i < tls_.size(); ++i) {
      PPSIM_CHECK(tls_[i].timeline != nullptr, "timeline {} ('{}') is null", i, tls_[i].name);
      add_timeline(static_cast<int>(i), tls_[i]);
    }
    std::stable_sort(events_.begin(), events_.end(),
                     [](const Event& a, const Event& b) { return std::tie(a.t, a.order) < std::tie(b.t, b.order); });
    std::string out = "{\"traceEvents\":[\n";
    bool first = true;
    auto put = [&](const Json& j) {
      if (!first) out += ",\n";
      first = false;
      out += j.dump(-1, ' ', false, Json::error_handler_t::replace);
    };
    for (const auto& m : meta_) put(m);
    for (const auto& e : events_) put(e.json);
    out += "\n],\"displayTimeUnit\":\"ns\"}\n";
    return out;
  }

 private:
  void add_timeline(int index, const NamedTimeline& nt) {
    const Timeline& t = *nt.timeline;
    const double us_per_unit = us_per_display_unit(t.scale.unit);
    auto ts = [&](Time x) { return t.scale.to_display(x) * us_per_unit; };
    const bool several = tls_.size() > 1;
    auto pid_of = [&](int rank) { return several ? index * 1000 + rank : rank; };

    // Communication lanes per rank: comm-stream intervals and sends, greedily packed so that
    // the slices on one track nest properly (latency tails of back-to-back sends overlap).
    struct CommItem {
      Time start, end;
      const Interval* iv;
      const Transfer* tr;
    };
    std::vector<std::vector<CommItem>> comm(static_cast<std::size_t>(t.pp));
    for (const auto& iv : t.intervals)
      if (iv.stream == Stream::Comm && in_range(iv.rank, t.pp)) comm[iv.rank].push_back({iv.start, iv.end, &iv, nullptr});
    for (const auto& tr : t.transfers)
      if (in_range(tr.src_rank, t.pp)) comm[tr.src_rank].push_back({tr.start, tr.end, nullptr, &tr});

    for (int r = 0; r < t.pp; ++r) {
      const int pid = pid_of(r);
      const std::string pname = nt.name.empty() ? "rank " + std::to_string(r) : nt.name + " rank " + std::to_string(r);
      meta_.push_back(Json{{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", pname}}}});
      meta_.push_back(Json{{"name", "process_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", pid}}}});

      auto& items = comm[r];
      std::stable_sort(items.begin(), items.end(), [](const CommItem& a, const CommItem& b) { return a.start < b.start; });
      std::vector<Time> lane_end;
      for (const auto& it : items) {
        std::size_t lane = 0;
        while (lane < lane_end.size() && lane_end[lane] > it.start) ++lane;
        if (lane == lane_end.size()) lane_end.push_back(it.end);
        else lane_end[lane] = it.end;
        const int tid = 1 + static_cast<int>(lane);
        if (it.iv) add_interval(*it.iv, pid, tid, ts);
        else add_send(*it.tr, pid, tid, ts);
      }
      const std::size_t lanes = std::max<std::size_t>(1, lane_end.size());
      thread_meta(pid, 0, "compute");
      for (std::size_t l = 0; l < lanes; ++l)
        thread_meta(pid, 1 + static_cast<int>(l), l == 0 ? std::string("communication") : "communication " + std::to_string(l + 1));

      // Activation memory, starting from zero at the timeline's start.
      if (static_cast<std::size_t>(r) < t.activations.size()) {
        const auto& samples = t.activations[r];
        if (samples.empty() || samples.front().t > t.start) add_counter(pid, t.start, 0, ts);
        for (const auto& s : samples) add_counter(pid, s.t, s.activations, ts);
      }
      if (nt.memory != nullptr && static_cast<std::size_t>(r) < nt.memory->size())
        for (const MemorySample& s : (*nt.memory)[static_cast<std::size_t>(r)])
          events_.push_back({s.t, kSlice,
                             Json{{"name", "memory GB"}, {"ph", "C"}, {"pid", pid}, {"ts", ts(s.t)},
                                  {"args", {{"GB", s.bytes / 1e9}}}}});
    }

    for (const auto& iv : t.intervals)
      if (iv.stream == Stream::Compute) add_interval(iv, pid_of(iv.rank), 0, ts);

    const auto spans = index_op_spans(t);
    for (const auto& tr : t.transfers) {
      const Op& p = tr.producer;
      const bool fwd = p.kind == OpKind::F;
      const int flow = static_cast<int>(fwd ? Flow::Activation : Flow::Gradient);
      Time s_at = tr.start, f_at = tr.end;
      if (auto it = spans.find({tr.src_rank, p.stage, p.microbatch, flow}); it != spans.end()) s_at = it->second.middle();
      if (auto it = spans.find({tr.dst_rank, p.stage + (fwd ? 1 : -1), p.microbatch, flow}); it != spans.end())
        f_at = it->second.middle();
      const long long id = next_flow_id_++;
      const std::string name = fwd ? "activations" : "gradients";
      events_.push_back({s_at, kFlow,
                         Json{{"name", name}, {"cat", "transfer"}, {"ph", "s"}, {"id", id}, {"pid", pid_of(tr.src_rank)},
                              {"tid", 0}, {"ts", ts(s_at)}}});
      events_.push_back({f_at, kFlow,
                         Json{{"name", name}, {"cat", "transfer"}, {"ph", "f"}, {"bp", "e"}, {"id", id},
                              {"pid", pid_of(tr.dst_rank)}, {"tid", 0}, {"ts", ts(f_at)}}});
    }
  }

  static bool in_range(int rank, int pp) { return rank >= 0 && rank < pp; }

  void thread_meta(int pid, int tid, const std::string& name) {
    meta_.push_back(Json{{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
    meta_.push_back(Json{{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"sort_index", tid}}}});
  }

  template <class Ts>
  void add_interval(const Interval& iv, int pid, int tid, const Ts& ts) {
    std::string name = format_action(iv.action);
    if (iv.part != Part::Whole) name += std::string("/") + part_name(iv.part);
    Json args;
    // A part of one op of a pair describes that op; otherwise the action's first op.
    const bool one_op = iv.op_index >= 0 && iv.op_index < iv.action.size();
    const Op& op = one_op ? iv.action.op(iv.op_index) : iv.action.first;
    args["stage"] = op.stage;
    args["microbatch"] = op.microbatch;
    args["kind"] = one_op ? std::string(1, op_kind_char(op.kind)) : kind_name(iv.action);
    args["overlapped"] = iv.action.overlapped;
    if (iv.action.overlapped && !one_op) {
      args["backward_stage"] = iv.action.second.stage;
      args["backward_microbatch"] = iv.action.second.microbatch;
      args["backward_kind"] = std::string(1, op_kind_char(iv.action.second.kind));
    }
    if (iv.part != Part::Whole) args["part"] = part_name(iv.part);
    if (one_op) args["op_index"] = iv.op_index;
    events_.push_back({iv.start, kSlice,
                       Json{{"name", name}, {"cat", iv.stream == Stream::Compute ? "compute" : "communication"},
                            {"ph", "X"}, {"pid", pid}, {"tid", tid}, {"ts", ts(iv.start)},
                            {"dur", ts(iv.end) - ts(iv.start)}, {"args", std::move(args)}}});
  }

  template <class Ts>
  void add_send(const Transfer& tr, int pid, int tid, const Ts& ts) {
    events_.push_back({tr.start, kSlice,
                       Json{{"name", "send " + format_op(tr.producer)}, {"cat", "transfer"}, {"ph", "X"}, {"pid", pid},
                            {"tid", tid}, {"ts", ts(tr.start)}, {"dur", ts(tr.end) - ts(tr.start)},
                            {"args", {{"src_rank", tr.src_rank}, {"dst_rank", tr.dst_rank}, {"bytes", tr.bytes},
                                      {"stage", tr.producer.stage}, {"microbatch", tr.producer.microbatch},
                                      {"kind", std::string(1, op_kind_char(tr.producer.kind))}}}}});
  }

  template <class Ts>
  void add_counter(int pid, Time t, int value, const Ts& ts) {
    events_.push_back({t, kSlice,
                       Json{{"name", "activations"}, {"ph", "C"}, {"pid", pid}, {"ts", ts(t)},
                            {"args", {{"activations", value}}}}});
  }

  const std::vector<NamedTimeline>& tls_;
  std::vector<Json> meta_;
  std::vector<Event> events_;
  long long next_flow_id_ = 1;
};

}  // namespace

std::string render_trace(const std::vector<NamedTimeline>& timelines) { return TraceWriter(timelines).render(); }

std::string render_timeline_json(const Timeline& t) {
  auto d = [&](Time x) { return t.scale.to_display(x); };
  Json j;
  j["pp"] = t.pp;
  j["time_unit"] = t.scale.unit;
  j["start"] = d(t.start);
  j["end"] = d(t.end);
  Json intervals = Json::array();
  for (const auto& iv : t.intervals) {
    Json e{{"rank", iv.rank},
           {"stream", iv.stream == Stream::Compute ? "compute" : "comm"},
           {"part", part_name(iv.part)},
           {"start", d(iv.start)},
           {"end", d(iv.end)},
           {"action", format_action(iv.action)}};
    if (iv.op_index >= 0) e["op_index"] = iv.op_index;
    intervals.push_back(std::move(e));
  }
  j["intervals"] = std::move(intervals);
  Json transfers = Json::array();
  for (const auto& tr : t.transfers)
    transfers.push_back(Json{{"src_rank", tr.src_rank},
                             {"dst_rank", tr.dst_rank},
                             {"start", d(tr.start)},
                             {"end", d(tr.end)},
                             {"producer", format_op(tr.producer)},
                             {"bytes", tr.bytes}});
  j["transfers"] = std::move(transfers);
  Json act = Json::array();
  for (const auto& rank : t.activations) {
    Json samples = Json::array();
    for (const auto& s : rank) samples.push_back(Json{{"t", d(s.t)}, {"activations", s.activations}});
    act.push_back(std::move(samples));
  }
  j["activations"] = std::move(act);
  return j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace ppsim
