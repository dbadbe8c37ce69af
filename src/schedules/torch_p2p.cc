// PyTorch's pipelining runtime: its send/receive lowering and one stream per rank (torch_p2p.h).
#include "schedules/torch_p2p.h"

#include <algorithm>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "core/error.h"

namespace ppsim {

namespace {

// What a rank has placed: compute ops and comm actions, keyed as PyTorch's _Action is compared.
enum PlacedKind : int { kF, kB, kI, kW, kRecvF, kRecvB };
using Placed = std::tuple<int, int, int>;  // (kind, stage, micro-batch)

int placed_kind(OpKind k) {
  switch (k) {
    case OpKind::F: return kF;
    case OpKind::B: return kB;
    case OpKind::I: return kI;
    case OpKind::W: return kW;
  }
  return kF;
}

// PyTorch's single-stage schedules, by the compute order they run on each rank.
enum class SingleStage { none, one_f_one_b, gpipe };

// The order of Schedule1F1B (stage r of N: min(M, N - r) forwards, then a backward and a forward
// in turn, then the backwards left) or of ScheduleGPipe (every forward, then every backward) on
// every rank, with stage r on rank r; none for any other order or layout.
SingleStage single_stage_kind(const Schedule& s) {
  const int N = s.pp, M = s.microbatches;
  if (s.num_pipes != 1 || s.num_stages() != N || M < 1) return SingleStage::none;
  for (int st = 0; st < N; ++st)
    if (s.stage_rank[static_cast<std::size_t>(st)] != st) return SingleStage::none;
  bool gpipe = true, ofob = M >= N;  // Schedule1F1B refuses fewer micro-batches than stages
  for (int r = 0; r < N; ++r) {
    std::vector<Op> want_gpipe, want_ofob;
    for (int i = 0; i < M; ++i) want_gpipe.push_back(Op{OpKind::F, r, i});
    for (int i = 0; i < M; ++i) want_gpipe.push_back(Op{OpKind::B, r, i});
    const int w = std::min(M, N - r);
    int f = 0, b = 0;
    for (; f < w; ++f) want_ofob.push_back(Op{OpKind::F, r, f});
    while (b < M) {
      want_ofob.push_back(Op{OpKind::B, r, b++});
      if (f < M) want_ofob.push_back(Op{OpKind::F, r, f++});
    }
    const std::vector<Action>& acts = s.ranks[static_cast<std::size_t>(r)];
    auto same = [&](const std::vector<Op>& want) {
      if (acts.size() != want.size()) return false;
      for (std::size_t i = 0; i < acts.size(); ++i)
        if (acts[i].overlapped || !(acts[i].first == want[i])) return false;
      return true;
    };
    gpipe = gpipe && same(want_gpipe);
    ofob = ofob && same(want_ofob);
  }
  return ofob ? SingleStage::one_f_one_b : gpipe ? SingleStage::gpipe : SingleStage::none;
}

// Schedule1F1B._step_microbatches and ScheduleGPipe._step_microbatches, call for call: each
// `_batch_p2p` is one batch (a send and a receive fused in one are posted together), each
// `_wait_batch_p2p` on a send's work holds the compute action issued after it.
Schedule lower_single_stage(Schedule s, SingleStage kind) {
  const int N = s.pp, M = s.microbatches;
  s.comm.assign(static_cast<std::size_t>(N), {});
  for (int r = 0; r < N; ++r) {
    std::vector<CommAction>& out = s.comm[static_cast<std::size_t>(r)];
    const bool first = r == 0, last = r == N - 1;
    std::size_t pos = 0;  // compute actions issued so far
    // Appends a comm action at the present position: a new batch, or joining the one before.
    auto put = [&](CommKind k, int mb, bool new_batch) -> std::size_t {
      out.push_back(CommAction{k, r, mb, pos, new_batch});
      return out.size() - 1;
    };
    auto wait_before = [&](const std::vector<std::size_t>& sends, std::size_t index) {
      for (std::size_t c : sends) out[c].waited_by = index;
    };
    if (kind == SingleStage::gpipe) {
      for (int i = 0; i < M; ++i) {
        if (!first) put(CommKind::RecvF, i, true);
        ++pos;  // F i
        // Every forward send is waited on before the first backward.
        if (!last) out[put(CommKind::SendF, i, true)].waited_by = static_cast<std::size_t>(M);
      }
      for (int i = 0; i < M; ++i) {
        if (!last) put(CommKind::RecvB, i, true);
        ++pos;  // B i; its send is waited on at the step's end
        if (!first) put(CommKind::SendB, i, true);
      }
      continue;
    }
    const int w = std::min(M, N - r);
    std::vector<std::size_t> send_work;
    int f = 0, b = 0;
    for (; f < w; ++f) {  // warm-up
      if (!first) put(CommKind::RecvF, f, true);
      ++pos;  // F f
      wait_before(send_work, pos);  // the previous forward's send holds the next compute action
      send_work.clear();
      if (f != w - 1 && !last) send_work.push_back(put(CommKind::SendF, f, true));
      // the last warm-up forward's send is fused with the first backward's receive below
    }
    while (true) {  // 1B1F
      if (!last) {  // the forward's send and the backward's receive, one batch, waited on by B
        const std::size_t a = put(CommKind::SendF, f - 1, true), c = put(CommKind::RecvB, b, false);
        wait_before({a, c}, pos);
      }
      ++pos;  // B b
      ++b;
      if (f == M) break;
      if (!first) {  // that backward's send and the next forward's receive, one batch, waited on by F
        const std::size_t a = put(CommKind::SendB, b - 1, true), c = put(CommKind::RecvF, f, false);
        wait_before({a, c}, pos);
      }
      ++pos;  // F f
      ++f;
    }
    send_work.clear();
    if (!first) send_work.push_back(put(CommKind::SendB, b - 1, true));
    for (; b < M; ++b) {  // cool-down
      if (!last) put(CommKind::RecvB, b, true);
      ++pos;  // B b
      wait_before(send_work, b + 1 < M ? pos : CommAction::kNotWaited);  // the last is waited on at the step's end
      send_work.clear();
      if (!first) send_work.push_back(put(CommKind::SendB, b, true));
    }
  }
  s.comm_in_order = true;
  return s;
}

}  // namespace

Schedule with_torch_p2p(Schedule s, TorchRuntime runtime) {
  if (s.num_pipes != 1)
    throw InputError(fmt::format("parallel.p2p_runtime torch: {} has {} pipes; PyTorch's runtime lowers one pipe", s.family, s.num_pipes));
  if (runtime != TorchRuntime::multi_stage) {
    // Schedule1F1B.__init__ raises ValueError for fewer micro-batches than stages.
    if (s.family == "1f1b" && s.num_stages() == s.pp && s.microbatches < s.pp)
      throw InputError(
          fmt::format("parallel.p2p_runtime torch: PyTorch's Schedule1F1B refuses {} micro-batches for {} "
                      "stages (it needs M >= P); give M >= {}, or ScheduleGPipe's order (gpipe)",
                      s.microbatches, s.pp, s.pp));
    const SingleStage kind = single_stage_kind(s);
    if (kind != SingleStage::none) return lower_single_stage(std::move(s), kind);
    if (runtime == TorchRuntime::single_stage)
      throw InputError(fmt::format("PyTorch's single-stage schedules: {} is neither Schedule1F1B's order nor ScheduleGPipe's "
                                   "(stage r on rank r, one stage each)",
                                   s.family));
  }
  const int P = s.pp;
  auto rank_of = [&](int stage) { return s.stage_rank[static_cast<std::size_t>(stage)]; };
  s.comm.assign(static_cast<std::size_t>(P), {});
  std::vector<std::set<Placed>> placed(static_cast<std::size_t>(P));
  // What each rank lowers, in order: its compute actions and the FSDP-style actions PyTorch's
  // runtime adds to them before lowering, each taking a round like a compute action. Before each
  // action, the next max_active_stages (3) distinct stages it will compute are fetched (UNSHARD,
  // in that order) and the other active stages evicted first (RESHARD, ascending); after each
  // stage's last backward (B or W) its REDUCE_GRAD; at the end the stages still active are
  // resharded (_add_unshard_reshard, _add_reduce_grad). They take no time here.
  struct Item {                      // the rank's next compute action, or one of these
    CommKind extra = CommKind::SendF;  // Unshard, ReduceGrad or Reshard
    int stage = -1;                    // its stage; -1: a compute action
  };
  constexpr std::size_t kMaxActiveStages = 3;  // PyTorch's default
  std::vector<std::vector<Item>> items(static_cast<std::size_t>(P));
  for (int r = 0; r < P; ++r) {
    const std::vector<Action>& acts = s.ranks[static_cast<std::size_t>(r)];
    std::vector<Item>& out = items[static_cast<std::size_t>(r)];
    std::vector<std::size_t> last_bwd(static_cast<std::size_t>(s.num_stages()), acts.size());
    for (std::size_t i = 0; i < acts.size(); ++i)
      for (int j = 0; j < acts[i].size(); ++j)  // an F&B pair's ops count as PyTorch's sub-actions do
        if (acts[i].op(j).kind == OpKind::B || acts[i].op(j).kind == OpKind::W) last_bwd[static_cast<std::size_t>(acts[i].op(j).stage)] = i;
    // How many distinct stages the rank computes from each action on: the scan for the next three
    // stops there (without it, a rank left with fewer would scan to its end at every action).
    std::vector<std::size_t> distinct_after(acts.size() + 1, 0);
    {
      std::set<int> seen;
      for (std::size_t i = acts.size(); i-- > 0;) {
        for (int j = 0; j < acts[i].size(); ++j) seen.insert(acts[i].op(j).stage);
        distinct_after[i] = seen.size();
      }
    }
    std::set<int> active;
    for (std::size_t i = 0; i < acts.size(); ++i) {
      std::vector<int> next_n;
      const std::size_t want = std::min(kMaxActiveStages, distinct_after[i]);
      for (std::size_t j = i; j < acts.size() && next_n.size() < want; ++j)
        for (int q = 0; q < acts[j].size() && next_n.size() < want; ++q)
          if (std::find(next_n.begin(), next_n.end(), acts[j].op(q).stage) == next_n.end()) next_n.push_back(acts[j].op(q).stage);
      for (auto it = active.begin(); it != active.end();) {
        if (std::find(next_n.begin(), next_n.end(), *it) == next_n.end()) {
          out.push_back(Item{CommKind::Reshard, *it});
          it = active.erase(it);
        } else {
          ++it;
        }
      }
      for (int st : next_n)
        if (active.insert(st).second) out.push_back(Item{CommKind::Unshard, st});
      out.push_back(Item{});
      for (int j = 0; j < acts[i].size(); ++j) {
        const Op& op = acts[i].op(j);
        if ((op.kind == OpKind::B || op.kind == OpKind::W) && last_bwd[static_cast<std::size_t>(op.stage)] == i)
          out.push_back(Item{CommKind::ReduceGrad, op.stage});
      }
    }
    for (int st : active) out.push_back(Item{CommKind::Reshard, st});
  }
  std::vector<std::size_t> next(static_cast<std::size_t>(P), 0);   // compute actions placed
  std::vector<std::size_t> item(static_cast<std::size_t>(P), 0);   // items placed
  // The input of `op` is on rank r: its receive was placed there, or its producer ran there.
  auto ready = [&](int r, const Op& op) {
    const std::set<Placed>& have = placed[static_cast<std::size_t>(r)];
    if (op.kind == OpKind::F) {
      if (s.is_first_stage(op.stage)) return true;
      return have.count({kRecvF, op.stage, op.microbatch}) > 0 || have.count({kF, op.stage - 1, op.microbatch}) > 0;
    }
    if (op.kind == OpKind::B || op.kind == OpKind::I) {
      if (s.is_last_stage(op.stage)) return true;
      return have.count({kRecvB, op.stage, op.microbatch}) > 0 || have.count({kI, op.stage + 1, op.microbatch}) > 0 ||
             have.count({kB, op.stage + 1, op.microbatch}) > 0;
    }
    return true;  // W: its own I ran on this rank
  };
  std::size_t left = 0;
  for (const auto& it : items) left += it.size();
  while (left > 0) {
    bool progress = false;
    for (int r = 0; r < P; ++r) {
      const std::vector<Action>& acts = s.ranks[static_cast<std::size_t>(r)];
      std::size_t& i = next[static_cast<std::size_t>(r)];
      std::size_t& k = item[static_cast<std::size_t>(r)];
      if (k == items[static_cast<std::size_t>(r)].size()) continue;
      const Item& it = items[static_cast<std::size_t>(r)][k];
      if (it.stage >= 0) {  // UNSHARD, REDUCE_GRAD or RESHARD: listed, and a round spent
        s.comm[static_cast<std::size_t>(r)].push_back(CommAction{it.extra, it.stage, -1, i, true});
        ++k;
        --left;
        progress = true;
        continue;
      }
      // An F&B pair (PyTorch's OVERLAP_F_B) waits until both of its ops' inputs are there, then
      // places each op's send after it in the pair's order.
      const Action& a = acts[i];
      bool all_ready = true;
      for (int j = 0; j < a.size(); ++j) all_ready = all_ready && ready(r, a.op(j));
      if (!all_ready) continue;
      ++k;
      ++i;
      --left;
      progress = true;
      for (int j = 0; j < a.size(); ++j) {
        const Op& op = a.op(j);
        placed[static_cast<std::size_t>(r)].insert({placed_kind(op.kind), op.stage, op.microbatch});
        // Its output crosses to another rank: the send here, after it; the receive on the consumer.
        int to = -1;
        CommKind send = CommKind::SendF, recv = CommKind::RecvF;
        if (op.kind == OpKind::F && !s.is_last_stage(op.stage) && rank_of(op.stage + 1) != r) {
          to = op.stage + 1;
        } else if ((op.kind == OpKind::B || op.kind == OpKind::I) && !s.is_first_stage(op.stage) && rank_of(op.stage - 1) != r) {
          to = op.stage - 1;
          send = CommKind::SendB;
          recv = CommKind::RecvB;
        }
        if (to < 0) continue;
        s.comm[static_cast<std::size_t>(r)].push_back(CommAction{send, op.stage, op.microbatch, i, true});
        const int dst = rank_of(to);
        s.comm[static_cast<std::size_t>(dst)].push_back(CommAction{recv, to, op.microbatch, next[static_cast<std::size_t>(dst)], true});
        placed[static_cast<std::size_t>(dst)].insert({recv == CommKind::RecvF ? kRecvF : kRecvB, to, op.microbatch});
      }
    }
    if (!progress) {
      for (int r = 0; r < P; ++r)
        if (item[static_cast<std::size_t>(r)] < items[static_cast<std::size_t>(r)].size())
          throw InputError(fmt::format("parallel.p2p_runtime torch: cannot place sends and receives for {}: rank {}'s action {} never gets "
                                       "its input (PyTorch's lowering stops there too)",
                                       s.family, r, format_action(s.ranks[static_cast<std::size_t>(r)][next[static_cast<std::size_t>(r)]])));
    }
  }
  s.comm_in_order = true;
  return s;
}

}  // namespace ppsim
