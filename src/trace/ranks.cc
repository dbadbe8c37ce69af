// Several ranks' traces (ranks.h): merge by rank, clock offsets from collectives' ends, waiting.
#include "trace/ranks.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

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

Time median(std::vector<Time> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string ms(Time t) { return fmt::format("{:.3f}", static_cast<double>(t) / 1e6); }

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

MultiRank merge_ranks(std::vector<RankTrace> ranks) {
  MultiRank m;
  // ---- ranks ---------------------------------------------------------------------------------
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

  // ---- communication kernels, grouped by kernel name, in time order --------------------------
  const std::size_t R = ranks.size();
  std::vector<std::map<std::string, std::vector<std::size_t>>> by_kind(R);
  for (std::size_t r = 0; r < R; ++r) {
    RankTrace& rt = ranks[r];
    const KinetoTrace& t = rt.trace;
    rt.comm.assign(t.gpu.size(), false);
    rt.transfer.assign(t.gpu.size(), 0);
    std::vector<signed char> comm_name(t.names.size(), -1);
    for (std::size_t i = 0; i < t.gpu.size(); ++i) {
      signed char& c = comm_name[static_cast<std::size_t>(t.gpu[i].name)];
      if (c < 0) c = Rules::is_comm_kernel(t.names[static_cast<std::size_t>(t.gpu[i].name)]) ? 1 : 0;
      rt.comm[i] = c == 1;
      rt.transfer[i] = t.gpu[i].dur;
      if (rt.comm[i]) by_kind[r][t.names[static_cast<std::size_t>(t.gpu[i].name)]].push_back(i);
    }
    for (auto& [k, v] : by_kind[r])
      std::sort(v.begin(), v.end(), [&](std::size_t a, std::size_t b) { return t.gpu[a].ts < t.gpu[b].ts; });
  }
  // A kind is matched when every rank ran it equally often (point-to-point: only with 2 ranks).
  std::vector<std::string> kinds;
  if (R >= 2) {
    std::set<std::string> all;
    for (const auto& bk : by_kind)
      for (const auto& [k, v] : bk) all.insert(k);
    for (const auto& k : all) {
      bool ok = !(is_p2p_kernel(k) && R > 2);
      std::size_t count = 0;
      for (std::size_t r = 0; r < R && ok; ++r) {
        auto it = by_kind[r].find(k);
        const std::size_t n = it == by_kind[r].end() ? 0 : it->second.size();
        if (r == 0) count = n;
        ok = n > 0 && n == count;
      }
      (ok ? m.kinds_matched : m.kinds_skipped).push_back(k);
    }
  }
  // ---- offsets: the median of the end differences to the reference rank ------------------------
  for (std::size_t r = 1; r < R; ++r) {
    std::vector<Time> d;
    for (const auto& k : m.kinds_matched) {
      const auto& ref = by_kind[0][k];
      const auto& mine = by_kind[r][k];
      for (std::size_t j = 0; j < ref.size(); ++j)
        d.push_back(ranks[0].trace.gpu[ref[j]].end() - ranks[r].trace.gpu[mine[j]].end());
    }
    if (!d.empty()) ranks[r].offset = median(std::move(d));
  }
  if (R < 2)
    m.note = "one rank: no clock to align";
  else if (m.kinds_matched.empty())
    m.note =
        "no collective ran equally often on every rank: clocks taken as they are, communication not split "
        "(all counted as transfer)";
  else
    m.note = fmt::format("clocks aligned on the ends of {} kind(s) of collective, rank {}'s clock the reference",
                         m.kinds_matched.size(), ranks[0].rank);
  // ---- waiting: before the last rank joined ----------------------------------------------------
  for (const auto& k : m.kinds_matched) {
    const std::size_t count = by_kind[0][k].size();
    m.matched_groups += static_cast<int>(count);
    for (std::size_t j = 0; j < count; ++j) {
      Time last_start = std::numeric_limits<Time>::min();
      Time ref_end = 0;
      for (std::size_t r = 0; r < R; ++r) {
        const GpuEvent& g = ranks[r].trace.gpu[by_kind[r][k][j]];
        last_start = std::max(last_start, g.ts + ranks[r].offset);
        if (r == 0) ref_end = g.end();
      }
      for (std::size_t r = 0; r < R; ++r) {
        const std::size_t i = by_kind[r][k][j];
        const GpuEvent& g = ranks[r].trace.gpu[i];
        const Time s = g.ts + ranks[r].offset, e = g.end() + ranks[r].offset;
        ranks[r].transfer[i] = std::clamp<Time>(e - std::max(s, last_start), 0, g.dur);
        ++ranks[r].matched_kernels;
        ranks[r].residual = std::max(ranks[r].residual, e > ref_end ? e - ref_end : ref_end - e);
      }
    }
  }
  for (auto& rt : ranks) {
    for (std::size_t i = 0; i < rt.trace.gpu.size(); ++i)
      if (rt.comm[i]) {
        ++rt.comm_kernels;
        rt.comm_total += rt.trace.gpu[i].dur;
        rt.comm_transfer += rt.transfer[i];
      }
    rt.comm_wait = rt.comm_total - rt.comm_transfer;
  }
  m.ranks = std::move(ranks);
  return m;
}

MultiRank read_ranks(const std::vector<std::string>& paths) {
  std::vector<RankTrace> ranks;
  ranks.reserve(paths.size());
  for (const auto& p : paths) {
    RankTrace r;
    r.path = p;
    r.trace = read_kineto(p);
    ranks.push_back(std::move(r));
  }
  return merge_ranks(std::move(ranks));
}

std::string render_ranks_report(const MultiRank& m) {
  std::string o = fmt::format("ranks: {} traces; {}\n", m.ranks.size(), m.note);
  if (m.matched_groups > 0) {
    std::string kinds;
    for (const auto& k : m.kinds_matched) kinds += (kinds.empty() ? "" : ", ") + k.substr(0, 60);
    o += fmt::format("  matched {} collectives: {}\n", m.matched_groups, kinds.substr(0, 240));
  }
  if (!m.kinds_skipped.empty())
    o += fmt::format("  not matched (counts differ between ranks, or point-to-point among more than 2): {} kind(s)\n",
                     m.kinds_skipped.size());
  o += fmt::format("{:>5} {:>12} {:>12} {:>10} {:>12} {:>12} {:>12}  {}\n", "rank", "offset ms", "residual us",
                   "comm", "comm ms", "transfer ms", "waiting ms", "trace");
  for (const auto& r : m.ranks)
    o += fmt::format("{:>5} {:>12} {:>12.1f} {:>10} {:>12} {:>12} {:>12}  {}{}\n", r.rank, ms(r.offset),
                     static_cast<double>(r.residual) / 1e3, r.comm_kernels, ms(r.comm_total), ms(r.comm_transfer),
                     ms(r.comm_wait), r.path, r.rank_from_trace ? "" : " (rank: file order)");
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
                  {"residual_us", static_cast<double>(r.residual) / 1e3},
                  {"communication_kernels", r.comm_kernels},
                  {"matched_kernels", r.matched_kernels},
                  {"communication_ms", msd(r.comm_total)},
                  {"transfer_ms", msd(r.comm_transfer)},
                  {"waiting_ms", msd(r.comm_wait)}});
  j["ranks"] = rs;
  return j;
}

}  // namespace ppsim::trace
