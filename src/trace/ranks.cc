// Several ranks' traces (ranks.h): merge by rank, clock offsets from collectives' ends, waiting.
#include "trace/ranks.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "core/error.h"
#include "trace/rules.h"

namespace ppsim::trace {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

bool is_p2p_kernel(const std::string& name) {
  return name.find("SendRecv") != std::string::npos || name.find("ncclKernel_Send") != std::string::npos ||
         name.find("ncclKernel_Recv") != std::string::npos || name.find("ncclDevKernel_Send") != std::string::npos ||
         name.find("ncclDevKernel_Recv") != std::string::npos;
}

namespace {

std::string ms(Time t) { return fmt::format("{:.3f}", static_cast<double>(t) / 1e6); }

// The ends of one collective's kernels on two ranks agree within this (clock conversion, launch
// skew); HolisticTraceAnalysis's sample traces show up to ~60 us between genuine pairs.
constexpr Time kEndTolerance = 100'000;

struct OffsetFit {
  Time offset = 0;  // added to the second rank's times
  int matches = 0;  // kernel ends paired one to one within the tolerance
  Time spread = 0;  // sum of |difference| over the pairs
  std::vector<Time> diffs;  // |difference| of each pair (kept for the best fit)
};

// Pairs the sorted ends a[] and b[] + c one to one, in time order, each with its nearest within
// the tolerance.
void pair_ends(const std::vector<Time>& a, const std::vector<Time>& b, Time c, OffsetFit& f) {
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const Time d = b[j] + c - a[i];
    if (d >= -kEndTolerance && d <= kEndTolerance) {
      const auto dist = [](Time x) { return x < 0 ? -x : x; };
      // The nearest partner, not the first within the tolerance.
      if (i + 1 < a.size() && dist(b[j] + c - a[i + 1]) < dist(d)) {
        ++i;
        continue;
      }
      if (j + 1 < b.size() && dist(b[j + 1] + c - a[i]) < dist(d)) {
        ++j;
        continue;
      }
      ++f.matches;
      f.spread += d < 0 ? -d : d;
      f.diffs.push_back(d < 0 ? -d : d);
      ++i, ++j;
    } else if (d < 0) {
      ++j;
    } else {
      ++i;
    }
  }
}

// The offset that pairs the most kernel ends of the same kinds (then the closest): candidates
// are the end differences in the densest window of twice the tolerance.
OffsetFit fit_offset(const std::vector<std::pair<std::vector<Time>, std::vector<Time>>>& kinds) {
  constexpr std::size_t kCap = 400;  // ends per kind and rank looked at for candidates (400^2 differences)
  auto sample = [](const std::vector<Time>& v) {
    if (v.size() <= kCap) return v;
    std::vector<Time> s;
    for (std::size_t i = 0; i < kCap; ++i) s.push_back(v[i * v.size() / kCap]);
    return s;
  };
  std::vector<Time> d;
  for (const auto& [a, b] : kinds) {
    const std::vector<Time> sa = sample(a), sb = sample(b);
    for (Time x : sa)
      for (Time y : sb) d.push_back(x - y);
  }
  OffsetFit best;
  if (d.empty()) return best;
  std::sort(d.begin(), d.end());
  std::size_t lo = 0, best_lo = 0, best_hi = 0;
  for (std::size_t hi = 0; hi < d.size(); ++hi) {
    while (d[hi] - d[lo] > 2 * kEndTolerance) ++lo;
    if (hi - lo > best_hi - best_lo) best_lo = lo, best_hi = hi;
  }
  const std::size_t n = best_hi - best_lo + 1, step = std::max<std::size_t>(1, n / 256);
  Time last = std::numeric_limits<Time>::min();
  for (std::size_t x = best_lo; x <= best_hi; x += step) {
    if (d[x] == last) continue;
    last = d[x];
    OffsetFit f;
    f.offset = d[x];
    for (const auto& [a, b] : kinds) pair_ends(a, b, d[x], f);
    if (f.matches > best.matches || (f.matches == best.matches && f.spread < best.spread)) best = f;
  }
  return best;
}

}  // namespace

std::vector<std::string> expand_trace_paths(const std::vector<std::string>& args) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  for (const auto& a : args) {
    std::error_code ec;
    if (!fs::is_directory(a, ec)) {
      out.push_back(a);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(a, ec)) {
      const std::string name = e.path().filename().string();
      if (e.is_regular_file(ec) && (ends_with(name, ".json") || ends_with(name, ".json.gz")))
        found.push_back(e.path().string());
    }
    if (found.empty())
      throw InputError(SourceLoc{a, 0, 0}, "the folder holds no trace (*.json or *.json.gz)");
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

namespace {

// Communication kernels of each rank (indices into its trace's GPU events), grouped by kernel
// name, each group in time order.
using ByKind = std::vector<std::map<std::string, std::vector<std::size_t>>>;

// Where the clocks stand once fitted: which ranks were aligned, and how close the ends of one
// collective's kernels are then.
struct Alignment {
  std::vector<bool> aligned;
  int count = 0;
  // Kernels of one collective, once aligned, end within this: 3x the median disagreement of the
  // pairs the offsets rest on, at least 5 us (tighter than the fit's tolerance, so that
  // collectives closer together than it are not merged).
  Time group_tolerance = 5'000;
};

// Each trace's rank (distributedInfo.rank, else its position), ranks sorted; a mix of traces
// with and without one, or two with one rank, is an InputError.
void number_ranks(std::vector<RankTrace>& ranks) {
  int with = 0;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    RankTrace& r = ranks[i];
    r.rank_from_trace = r.trace.rank >= 0;
    with += r.rank_from_trace ? 1 : 0;
    r.rank = r.rank_from_trace ? r.trace.rank : static_cast<int>(i);
  }
  if (with != 0 && with != static_cast<int>(ranks.size())) {
    const auto it = std::find_if(ranks.begin(), ranks.end(), [](const RankTrace& r) { return !r.rank_from_trace; });
    throw InputError(SourceLoc{it->path, 1, 1},
                     "has no distributedInfo.rank while other traces have one: cannot tell which rank it is",
                     "give the traces of one run, each written by its own process");
  }
  std::stable_sort(ranks.begin(), ranks.end(), [](const RankTrace& a, const RankTrace& b) { return a.rank < b.rank; });
  for (std::size_t i = 1; i < ranks.size(); ++i)
    if (ranks[i].rank == ranks[i - 1].rank)
      throw InputError(SourceLoc{ranks[i].path, 1, 1},
                       fmt::format("distributedInfo.rank {} is also the rank of {}", ranks[i].rank, ranks[i - 1].path),
                       "give one trace per rank");
}

// Marks each rank's communication kernels (all transfer until matched) and groups them by name.
ByKind group_comm_kernels(std::vector<RankTrace>& ranks, const Rules& rules) {
  ByKind by_kind(ranks.size());
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    RankTrace& rt = ranks[r];
    const KinetoTrace& t = rt.trace;
    rt.comm.assign(t.gpu.size(), false);
    rt.transfer.assign(t.gpu.size(), 0);
    std::vector<signed char> comm_name(t.names.size(), -1);
    for (std::size_t i = 0; i < t.gpu.size(); ++i) {
      signed char& c = comm_name[static_cast<std::size_t>(t.gpu[i].name)];
      if (c < 0) c = rules.comm(t.names[static_cast<std::size_t>(t.gpu[i].name)]) ? 1 : 0;
      rt.comm[i] = c == 1;
      rt.transfer[i] = t.gpu[i].dur;
      if (rt.comm[i]) by_kind[r][t.names[static_cast<std::size_t>(t.gpu[i].name)]].push_back(i);
    }
    for (auto& [k, v] : by_kind[r])
      std::sort(v.begin(), v.end(), [&](std::size_t a, std::size_t b) { return t.gpu[a].ts < t.gpu[b].ts; });
  }
  return by_kind;
}

// The sorted ends of kernels `idx` of one rank.
std::vector<Time> ends_of(const RankTrace& rt, const std::vector<std::size_t>& idx) {
  std::vector<Time> e;
  e.reserve(idx.size());
  for (std::size_t i : idx) e.push_back(rt.trace.gpu[i].end());
  std::sort(e.begin(), e.end());
  return e;
}

// Rank r's best fit against the ranks before it already aligned; `best_q`: the one it fits.
OffsetFit best_fit(const std::vector<RankTrace>& ranks, const ByKind& by_kind, const std::vector<bool>& aligned,
                   std::size_t r, std::size_t& best_q) {
  OffsetFit best;
  best_q = 0;
  for (std::size_t q = 0; q < r; ++q) {
    if (!aligned[q]) continue;
    std::vector<std::pair<std::vector<Time>, std::vector<Time>>> kinds;
    for (const auto& [k, v] : by_kind[q])
      if (auto it = by_kind[r].find(k); it != by_kind[r].end())
        kinds.emplace_back(ends_of(ranks[q], v), ends_of(ranks[r], it->second));
    const OffsetFit f = fit_offset(kinds);
    if (f.matches > best.matches || (f.matches == best.matches && f.matches > 0 && f.spread < best.spread))
      best = f, best_q = q;
  }
  return best;
}

// Offsets: each rank against the aligned rank whose kernel ends it matches best.
Alignment align_clocks(std::vector<RankTrace>& ranks, const ByKind& by_kind) {
  const std::size_t R = ranks.size();
  // Before any fit, the clocks as written: Times count from each trace's first event.
  for (std::size_t r = 0; r < R; ++r)
    ranks[r].shift = ranks[r].trace.origin_epoch_ns() - ranks[0].trace.origin_epoch_ns();
  Alignment al;
  al.aligned.assign(R, false);
  if (R > 0) al.aligned[0] = true;
  al.count = R > 0 ? 1 : 0;
  for (std::size_t r = 1; r < R; ++r) {
    std::size_t best_q = 0;
    OffsetFit best = best_fit(ranks, by_kind, al.aligned, r, best_q);
    std::size_t nr = 0;
    for (const auto& [k, v] : by_kind[r]) nr += v.size();
    // Enough ends agree: two at least (one where a rank ran only one), a fifth of its kernels.
    const int need = std::max<int>(std::min<std::size_t>(nr, 2), static_cast<int>((nr + 4) / 5));
    if (best.matches > 0 && best.matches >= need) {
      const Time written = ranks[r].shift;
      ranks[r].shift = ranks[best_q].shift + best.offset;
      ranks[r].offset = ranks[r].shift - written;
      ranks[r].aligned_to = ranks[best_q].rank;
      ranks[r].support = best.matches;
      al.aligned[r] = true;
      std::vector<Time>& dd = best.diffs;
      std::nth_element(dd.begin(), dd.begin() + static_cast<long>(dd.size() / 2), dd.end());
      al.group_tolerance = std::max(al.group_tolerance, 3 * dd[dd.size() / 2]);
      ++al.count;
    }
  }
  return al;
}

std::string alignment_note(const std::vector<RankTrace>& ranks, const Alignment& al) {
  const std::size_t R = ranks.size();
  if (R < 2) return "one rank: no clock to align";
  if (al.count == static_cast<int>(R))
    return fmt::format("clocks aligned on the ends of collectives, rank {}'s clock the reference", ranks[0].rank);
  if (std::none_of(ranks.begin(), ranks.end(),
                   [](const RankTrace& t) { return t.comm_kernels > 0 || t.rank_from_trace; }))
    return fmt::format(
        "no trace has a communication kernel or a distributedInfo rank: are these {} ranks of one run (or {} separate "
        "runs)? Their clocks are kept as written, nothing aligned",
        R, R);
  return fmt::format(
      "{} of {} ranks' clocks aligned on the ends of collectives; the others kept as written (too few "
      "communication kernels end together), their communication counted as transfer",
      al.count, R);
}

// One kernel of a kind on an aligned rank: its end and start on the reference clock.
struct End {
  Time end, start;
  std::size_t r, i;
};

// The kernels named `k` on the aligned ranks, by ascending end.
std::vector<End> aligned_ends(const std::vector<RankTrace>& ranks, const ByKind& by_kind, const Alignment& al,
                              const std::string& k) {
  std::vector<End> v;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    if (!al.aligned[r]) continue;
    auto it = by_kind[r].find(k);
    if (it == by_kind[r].end()) continue;
    for (std::size_t i : it->second) {
      const GpuEvent& g = ranks[r].trace.gpu[i];
      v.push_back(End{g.end() + ranks[r].shift, g.ts + ranks[r].shift, r, i});
    }
  }
  std::sort(v.begin(), v.end(), [](const End& a, const End& b) { return a.end < b.end; });
  return v;
}

// Waiting for the kernels named `k`: the kernels of one collective (ends in time order, each
// within the tolerance of the one before, one per rank) each waited until the last of them
// started; the rest is transfer. Returns
// whether any collective of that kind was matched.
bool split_waiting(std::vector<RankTrace>& ranks, const ByKind& by_kind, const Alignment& al, const std::string& k,
                   MultiRank& m) {
  const std::vector<End> v = aligned_ends(ranks, by_kind, al, k);
  std::vector<bool> grouped(v.size(), false);
  bool used = false;
  // Kernels `members` of v (ascending end) are one collective.
  auto take = [&](const std::vector<std::size_t>& members) {
    ++m.matched_groups;
    used = true;
    Time last_start = std::numeric_limits<Time>::min();
    for (std::size_t x : members) last_start = std::max(last_start, v[x].start);
    const Time spread = v[members.back()].end - v[members.front()].end;
    for (std::size_t x : members) {
      grouped[x] = true;
      RankTrace& rt = ranks[v[x].r];
      rt.transfer[v[x].i] = std::clamp<Time>(v[x].end - std::max(v[x].start, last_start), 0, rt.trace.gpu[v[x].i].dur);
      ++rt.matched_kernels;
      rt.residual = std::max(rt.residual, spread);
    }
  };
  std::size_t a = 0;
  while (a < v.size()) {
    std::size_t b = a + 1;
    std::vector<bool> in(ranks.size(), false);
    in[v[a].r] = true;
    // Single linkage: each next end within the tolerance of the one before (eight ranks' ends of one
    // all-reduce spread over 5 us in steps of 1-2 us: one group, not two).
    while (b < v.size() && v[b].end - v[b - 1].end <= al.group_tolerance && !in[v[b].r]) in[v[b++].r] = true;
    if (b - a >= 2) {
      std::vector<std::size_t> members(b - a);
      std::iota(members.begin(), members.end(), a);
      take(members);
    }
    a = b;
  }
  // Point-to-point pairs left apart: a kernel that waited long for its peer ends a little after
  // it (30-90 us after the sender's on four H200s, PyTorch's Schedule1F1B, where the pairs that
  // did not wait agree within a few): two kernels no group took, of two ranks, whose ends agree
  // within the fit's tolerance are one transfer, the closest pairs first.
  if (!is_p2p_kernel(k)) return used;
  std::vector<std::tuple<Time, std::size_t, std::size_t>> pairs;  // (end difference, x, y)
  for (std::size_t x = 0; x < v.size(); ++x) {
    if (grouped[x]) continue;
    for (std::size_t y = x + 1; y < v.size() && v[y].end - v[x].end <= kEndTolerance; ++y)
      if (!grouped[y] && v[y].r != v[x].r) pairs.emplace_back(v[y].end - v[x].end, x, y);
  }
  std::sort(pairs.begin(), pairs.end());
  for (const auto& [d, x, y] : pairs)
    if (!grouped[x] && !grouped[y]) take({x, y});
  return used;
}

// Each rank's communication: kernels, total, transfer and waiting.
void sum_communication(std::vector<RankTrace>& ranks) {
  for (auto& rt : ranks) {
    for (std::size_t i = 0; i < rt.trace.gpu.size(); ++i)
      if (rt.comm[i]) {
        ++rt.comm_kernels;
        rt.comm_total += rt.trace.gpu[i].dur;
        rt.comm_transfer += rt.transfer[i];
      }
    rt.comm_wait = rt.comm_total - rt.comm_transfer;
  }
}

}  // namespace

MultiRank merge_ranks(std::vector<RankTrace> ranks, const std::string& comm_kernel) {
  MultiRank m;
  Rules rules({}, true);
  if (!comm_kernel.empty()) rules.set_comm_kernel(comm_kernel);
  number_ranks(ranks);
  const ByKind by_kind = group_comm_kernels(ranks, rules);
  const Alignment al = align_clocks(ranks, by_kind);
  m.note = alignment_note(ranks, al);
  std::set<std::string> all_kinds;
  for (const auto& bk : by_kind)
    for (const auto& [k, v] : bk) all_kinds.insert(k);
  for (const auto& k : all_kinds)
    (split_waiting(ranks, by_kind, al, k, m) ? m.kinds_matched : m.kinds_skipped).push_back(k);
  sum_communication(ranks);
  m.ranks = std::move(ranks);
  return m;
}

MultiRank read_ranks(const std::vector<std::string>& paths, const std::string& comm_kernel) {
  std::vector<RankTrace> ranks;
  ranks.reserve(paths.size());
  for (const auto& p : paths) {
    RankTrace r;
    r.path = p;
    r.trace = read_kineto(p);
    ranks.push_back(std::move(r));
  }
  return merge_ranks(std::move(ranks), comm_kernel);
}

std::string render_ranks_report(const MultiRank& m) {
  std::string o = fmt::format("ranks: {} traces; {}\n", m.ranks.size(), m.note);
  if (m.matched_groups > 0) {
    std::string kinds;
    for (const auto& k : m.kinds_matched) kinds += (kinds.empty() ? "" : ", ") + k.substr(0, 60);
    o += fmt::format("  matched {} collectives: {}\n", m.matched_groups, kinds.substr(0, 240));
  }
  if (!m.kinds_skipped.empty())
    o += fmt::format("  kinds of communication kernel in no matched collective: {}\n", m.kinds_skipped.size());
  o += fmt::format("{:>5} {:>12} {:>10} {:>12} {:>6} {:>12} {:>12} {:>12}  {}\n", "rank", "offset ms", "fitted on",
                   "spread us", "comm", "comm ms", "transfer ms", "waiting ms", "trace");
  for (const auto& r : m.ranks) {
    const std::string fit = r.aligned_to >= 0 ? fmt::format("{} ends", r.support) : r.rank == m.ranks[0].rank ? "reference" : "-";
    o += fmt::format("{:>5} {:>12} {:>10} {:>12.1f} {:>6} {:>12} {:>12} {:>12}  {}{}\n", r.rank, ms(r.offset), fit,
                     static_cast<double>(r.residual) / 1e3, r.comm_kernels, ms(r.comm_total), ms(r.comm_transfer),
                     ms(r.comm_wait), r.path, r.rank_from_trace ? "" : " (rank: file order)");
  }
  return o;
}

nlohmann::json ranks_json(const MultiRank& m) {
  auto msd = [](Time t) { return static_cast<double>(t) / 1e6; };
  nlohmann::json j;
  j["note"] = m.note;
  j["matched_collectives"] = m.matched_groups;
  j["kinds_matched"] = m.kinds_matched;
  j["kinds_not_matched"] = m.kinds_skipped;
  nlohmann::json rs = nlohmann::json::array();
  for (const auto& r : m.ranks)
    rs.push_back({{"rank", r.rank},
                  {"rank_from_trace", r.rank_from_trace},
                  {"trace", r.path},
                  {"offset_ms", msd(r.offset)},
                  {"spread_us", static_cast<double>(r.residual) / 1e3},
                  {"aligned_to", r.aligned_to >= 0 ? nlohmann::json(r.aligned_to) : nlohmann::json(nullptr)},
                  {"ends_agreeing", r.support},
                  {"communication_kernels", r.comm_kernels},
                  {"matched_kernels", r.matched_kernels},
                  {"communication_ms", msd(r.comm_total)},
                  {"transfer_ms", msd(r.comm_transfer)},
                  {"waiting_ms", msd(r.comm_wait)}});
  j["ranks"] = rs;
  return j;
}

}  // namespace ppsim::trace
