// The HTML report's compact timeline encoding; no page assets here, so that the WebAssembly
// engine (tools/build_wasm.sh) compiles this file too and the page decodes one format.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "report/html.h"
#include "report/results.h"

namespace ppsim {

namespace {

// Stages per pipe, for the page's "waited on": one pipe of S stages, or two of S/2 (DualPipe,
// Chimera) when the second half's first F of micro-batch 0 starts before the first half's last
// F of it ends (in one pipe, a V, it waits for that F).
int stages_per_pipe(const Timeline& t) {
  int S = 0;
  for (const Interval& iv : t.intervals) S = std::max({S, iv.action.first.stage + 1, iv.action.overlapped ? iv.action.second.stage + 1 : 0});
  if (S % 2 != 0) return S;
  Time second_start = kNever, first_end = -1;
  for (const Interval& iv : t.intervals) {
    for (int k = 0; k < iv.action.size(); ++k) {
      const Op& op = iv.action.op(k);
      if (op.kind != OpKind::F || op.microbatch != 0) continue;
      if (op.stage == S / 2) second_start = std::min(second_start, iv.start);
      if (op.stage == S / 2 - 1) first_end = std::max(first_end, iv.end);
    }
  }
  return (second_start != kNever && first_end >= 0 && second_start < first_end) ? S / 2 : S;
}

}  // namespace

int timeline_chunks_per_rank(const Timeline& t) { return t.pp > 0 ? std::max(1, stages_per_pipe(t) / t.pp) : 1; }

nlohmann::json compact_timeline(const HtmlTimeline& h) {
  const Timeline& t = *h.timeline;
  Time q = 0;
  for (const Interval& iv : t.intervals) q = std::gcd(std::gcd(q, iv.start), iv.end);
  if (h.memory)
    for (const auto& rank : *h.memory)
      for (const MemorySample& s : rank) q = std::gcd(q, s.t);
  else
    for (const auto& rank : t.activations)
      for (const MemSample& s : rank) q = std::gcd(q, s.t);
  if (q <= 0) q = 1;

  std::vector<std::vector<const Interval*>> per_rank(static_cast<std::size_t>(std::max(t.pp, 0)));
  for (const Interval& iv : t.intervals)
    if (iv.rank >= 0 && iv.rank < t.pp) per_rank[static_cast<std::size_t>(iv.rank)].push_back(&iv);
  nlohmann::json ranks = nlohmann::json::array();
  for (auto& ivs : per_rank) {
    std::stable_sort(ivs.begin(), ivs.end(), [](const Interval* a, const Interval* b) { return a->start < b->start; });
    std::vector<std::int64_t> flat;
    flat.reserve(ivs.size() * 5);
    Time prev = 0;
    for (const Interval* iv : ivs) {
      const Action& a = iv->action;
      const int flags = static_cast<int>(iv->stream) | (static_cast<int>(iv->part) << 1) | ((iv->op_index + 1) << 4) |
                        (static_cast<int>(a.first.kind) << 6) | ((a.overlapped ? 1 : 0) << 8) |
                        ((a.overlapped ? static_cast<int>(a.second.kind) : 0) << 9);
      flat.push_back(flags);
      flat.push_back(a.first.stage);
      flat.push_back(a.first.microbatch);
      if (a.overlapped) {
        flat.push_back(a.second.stage);
        flat.push_back(a.second.microbatch);
      }
      flat.push_back((iv->start - prev) / q);
      flat.push_back((iv->end - iv->start) / q);
      prev = iv->start;
    }
    ranks.push_back(std::move(flat));
  }
  nlohmann::json mem = nlohmann::json::array();
  std::string unit = "rank shares";
  if (h.memory) {
    unit = "GB";
    for (const auto& rank : *h.memory) {
      std::vector<double> flat;
      Time prev = 0;
      for (const MemorySample& s : rank) {
        flat.push_back(static_cast<double>((s.t - prev) / q));
        flat.push_back(std::round(s.bytes / 1e6) / 1e3);  // GB, to the MB
        prev = s.t;
      }
      mem.push_back(std::move(flat));
    }
  } else {
    const int v = timeline_chunks_per_rank(t);
    for (const auto& rank : t.activations) {
      std::vector<double> flat;
      Time prev = 0;
      for (const MemSample& s : rank) {
        flat.push_back(static_cast<double>((s.t - prev) / q));
        flat.push_back(rank_shares(s.activations, v));
        prev = s.t;
      }
      mem.push_back(std::move(flat));
    }
  }
  nlohmann::json j{{"name", h.name},        {"pp", t.pp},           {"spp", stages_per_pipe(t)},
                   {"q", q},                {"tpu", t.scale.ticks_per_unit}, {"unit", t.scale.unit},
                   {"ranks", std::move(ranks)}, {"mem", {{"unit", unit}, {"ranks", std::move(mem)}}}};
  if (h.row >= 0) j["row"] = h.row;
  if (!h.label.empty()) j["label"] = h.label;
  return j;
}

}  // namespace ppsim
