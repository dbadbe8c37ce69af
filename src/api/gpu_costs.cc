#include "api/gpu_costs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "core/intervals.h"
#include "launch/launch.h"

namespace ppsim::api {

SimCosts profiled_costs(const ModelConfig& cfg, const Schedule& s, const ProfiledOps& p) {
  auto ns = [](double ms) { return static_cast<Time>(std::llround(ms * 1e6)); };
  SliceCosts sc;
  sc.f = ns(p.f_ms);
  sc.b = ns(p.b_ms);
  sc.w = std::min(sc.b, ns(p.w_ms));
  sc.fb = ns(p.fb_ms);
  sc.i_apart = std::max<Time>(0, ns(p.i_ms) - sc.input_grad());
  SimCosts costs = uniform_costs(s.stages_per_pipe, sc, TimeScale::millis());
  const SimCosts derived = derive_costs(cfg, s);
  costs.link = derived.link;
  costs.rank_node = derived.rank_node;
  costs.inter_node_link = derived.inter_node_link;
  for (std::size_t i = 0; i < costs.slice.size() && i < derived.slice.size(); ++i) {
    costs.slice[i].act_bytes = derived.slice[i].act_bytes;
    costs.slice[i].grad_bytes = derived.slice[i].grad_bytes;
  }
  return costs;
}

int replay_gpu(int r, int ep, int gpus) { return (r * std::max(1, ep)) % gpus; }

int replay_partition(int r, int ep, int gpus) {
  int g = 0;
  for (int q = 0; q < r; ++q) g += replay_gpu(q, ep, gpus) == replay_gpu(r, ep, gpus) ? 1 : 0;
  return g;
}

void share_devices(SimCosts& c, int pp, int gpus, double step, const std::vector<double>* by_kind, int ep) {
  PPSIM_CHECK(gpus >= 1, "gpus = {}", gpus);
  c.rank_device.resize(static_cast<std::size_t>(pp));
  for (int r = 0; r < pp; ++r) c.rank_device[static_cast<std::size_t>(r)] = replay_gpu(r, ep, gpus);
  c.share_slowdown = std::max(1.0, step);
  // Shard e of rank r is on GPU (r ep + e) % gpus: on shard 0's GPU when e % gpus == 0.
  c.share_copies = std::max(1, ep) > 1 ? (ep - 1) / gpus + 1 : 1;
  if (by_kind)
    for (double v : *by_kind) c.share_by_kind.push_back(std::max(1.0, v));  // beside another: never faster
}

void unshare_profiled_copies(SimCosts& c, int pp) {
  if (c.share_copies <= 1) return;
  scale_every_rank(c, pp, 1.0 / (1.0 + (c.share_copies - 1) * (c.share_slowdown - 1.0)));
}

void scale_every_rank(SimCosts& c, int pp, double factor) {
  PPSIM_CHECK(factor > 0 && std::isfinite(factor), "scale_every_rank: factor {}", factor);
  if (c.rank_kind_scale.empty()) c.rank_kind_scale.assign(static_cast<std::size_t>(3 * pp), 1.0);
  for (double& x : c.rank_kind_scale) x *= factor;
}

bool pipeline_on_one_gpu(int pp, int ep, int gpus) {
  if (gpus < 2 || ep < 2) return false;  // one GPU: every message is within it anyway, and no EP: not this case
  for (int r = 1; r < pp; ++r)
    if (replay_gpu(r, ep, gpus) != replay_gpu(0, ep, gpus)) return false;
  return true;
}

double ep_pace_factor(double fed_step_ms, double f_ms, double i_ms, double w_ms) {
  const double held = f_ms + i_ms + w_ms;
  if (fed_step_ms <= 0 || f_ms <= 0 || i_ms <= 0 || w_ms <= 0) return 1.0;
  return std::max(1.0, fed_step_ms / held);
}

void profiled_overlap_costs(SimCosts& c, const std::map<std::string, double>& sub_ops_ms, int layers,
                            double comm_sm_fraction) {
  PPSIM_CHECK(layers >= 1, "layers = {}", layers);
  MoeSliceCosts m;
  m.layers = layers;
  std::map<std::string, Time MoeSliceCosts::*> field = {
      {"attn_fwd", &MoeSliceCosts::attn_f},       {"attn_bwd", &MoeSliceCosts::attn_b},
      {"attn_w", &MoeSliceCosts::attn_w},         {"mlp_fwd", &MoeSliceCosts::mlp_f},
      {"mlp_bwd", &MoeSliceCosts::mlp_b},         {"mlp_w", &MoeSliceCosts::mlp_w},
      {"dispatch_fwd", &MoeSliceCosts::dispatch}, {"combine_fwd", &MoeSliceCosts::combine},
      {"dispatch_bwd", &MoeSliceCosts::dispatch_b}, {"combine_bwd", &MoeSliceCosts::combine_b}};
  for (const auto& [k, ms] : sub_ops_ms) {
    const auto it = field.find(k);
    if (it == field.end()) throw InputError(fmt::format("profiled sub-op '{}' is not one the overlap model takes", k));
    m.*(it->second) = static_cast<Time>(std::llround(ms * 1e6 / layers));  // ns per layer
  }
  c.moe.assign(c.slice.size(), m);
  c.comm_sm_fraction = comm_sm_fraction;
}

void scale_rank_speeds(SimCosts& c, int pp, int gpus, const std::vector<std::array<double, 3>>& g_alone, int ep) {
  PPSIM_CHECK(gpus >= 1 && !g_alone.empty(), "gpus = {}, partitions = {}", gpus, g_alone.size());
  const auto& sp0 = g_alone.front();
  c.rank_kind_scale.assign(static_cast<std::size_t>(3 * pp), 1.0);
  for (int r = 0; r < pp; ++r) {
    const auto& g = g_alone.at(static_cast<std::size_t>(replay_partition(r, ep, gpus)));
    for (std::size_t k = 0; k < 3; ++k)
      if (sp0[k] > 0 && g[k] > 0) c.rank_kind_scale[3 * static_cast<std::size_t>(r) + k] = g[k] / sp0[k];
  }
}

namespace {
// Whether action `a` holds an op that reads message `key` (launch::input_message: the
// schedule's own rule for what each op receives).
bool reads(const Schedule& s, const Action& a, const launch::MsgKey& key) {
  for (int i = 0; i < a.size(); ++i)
    if (launch::MsgKey in; launch::input_message(s, a.op(i), in) && in == key) return true;
  return false;
}
double median_us(std::vector<Time> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return static_cast<double>(v[v.size() / 2]) / 1e3;
}
}  // namespace

ReplayDelays replay_delays(const Schedule& s, const Timeline& t) {
  std::vector<std::vector<const Interval*>> by_rank(static_cast<std::size_t>(std::max(0, t.pp)));
  for (const Interval& iv : t.intervals)
    if (iv.stream == Stream::Compute && iv.part == Part::Whole && iv.rank >= 0 && iv.rank < t.pp)
      by_rank[static_cast<std::size_t>(iv.rank)].push_back(&iv);
  for (auto& v : by_rank)
    std::sort(v.begin(), v.end(), [](const Interval* a, const Interval* b) { return a->start < b->start; });
  std::vector<Time> sends, receives, gaps;
  // Per rank and interval index: the latest arrival of a message it consumes (kNever: none).
  std::vector<std::vector<Time>> arrival(by_rank.size());
  for (std::size_t r = 0; r < by_rank.size(); ++r) arrival[r].assign(by_rank[r].size(), kNever);
  for (const Transfer& tr : t.transfers) {
    launch::MsgKey key;
    if (tr.src_rank < 0 || tr.src_rank >= t.pp || tr.dst_rank < 0 || tr.dst_rank >= t.pp ||
        !launch::output_message(s, tr.producer, key))
      continue;
    for (const Interval* iv : by_rank[static_cast<std::size_t>(tr.src_rank)])
      if (iv->action.first == tr.producer || (iv->action.overlapped && iv->action.second == tr.producer))
        sends.push_back(tr.start - iv->end);
    const auto& dst = by_rank[static_cast<std::size_t>(tr.dst_rank)];
    for (std::size_t i = 0; i < dst.size(); ++i) {
      if (!reads(s, dst[i]->action, key)) continue;
      Time& a = arrival[static_cast<std::size_t>(tr.dst_rank)][i];
      a = a == kNever ? tr.end : std::max(a, tr.end);
      if (i == 0 || dst[i - 1]->end < tr.end) receives.push_back(dst[i]->start - tr.end);  // it waited
    }
  }
  for (std::size_t r = 0; r < by_rank.size(); ++r)
    for (std::size_t i = 1; i < by_rank[r].size(); ++i)
      if (arrival[r][i] == kNever || arrival[r][i] <= by_rank[r][i - 1]->end)
        gaps.push_back(by_rank[r][i]->start - by_rank[r][i - 1]->end);
  ReplayDelays d;
  d.sends = sends.size();
  d.receives = receives.size();
  d.gaps = gaps.size();
  d.send_us = std::max(0.0, median_us(std::move(sends)));
  d.receive_us = std::max(0.0, median_us(std::move(receives)));
  d.gap_us = std::max(0.0, median_us(std::move(gaps)));
  return d;
}

void apply_link_probe(SimCosts& c, double median_us, Bytes bytes, const ReplayDelays& d) {
  const Time measured = static_cast<Time>(std::llround((median_us + d.send_us + d.receive_us) * 1e3));
  c.link.latency = std::max<Time>(0, measured - c.link.occupancy(bytes));
  c.action_gap = static_cast<Time>(std::llround(d.gap_us * 1e3));
}

std::vector<Intervals> nccl_resident(const Schedule& s, const Timeline& t, const std::vector<int>& rank_device) {
  auto device = [&](int r) { return rank_device.empty() ? r : rank_device[static_cast<std::size_t>(r)]; };
  std::map<launch::MsgKey, const Transfer*> by_key;
  for (const Transfer& tr : t.transfers) {
    launch::MsgKey key;
    if (launch::output_message(s, tr.producer, key)) by_key[key] = &tr;
  }
  Time start = t.start;
  for (const Interval& iv : t.intervals) start = std::min(start, iv.start);
  std::map<int, Time> free;     // per GPU: when its NCCL stream frees
  std::map<int, Intervals> on;  // per GPU: its NCCL kernels' spans
  for (const launch::MsgKey& key : launch::message_order(s)) {
    const auto it = by_key.find(key);
    if (it == by_key.end()) continue;
    const Transfer& tr = *it->second;
    const int a = device(tr.src_rank), b = device(tr.dst_rank);
    if (a == b) continue;
    auto span = [&](int dev, Time from) {
      const Time begin = std::max(free.try_emplace(dev, start).first->second, from);
      if (tr.end > begin) on[dev].push_back({begin, tr.end});
      free[dev] = std::max(begin, tr.end);
    };
    span(a, tr.start);
    span(b, start);
  }
  std::vector<Intervals> out(static_cast<std::size_t>(s.pp));
  for (int r = 0; r < s.pp; ++r)
    if (auto g = on.find(device(r)); g != on.end()) out[static_cast<std::size_t>(r)] = merge_intervals(g->second);
  return out;
}

NcclShare fit_nccl_share(const Schedule& s, const Timeline& t, const std::vector<int>& rank_device, double f_ms,
                         double b_ms) {
  const std::vector<Intervals> on = nccl_resident(s, t, rank_device);
  double num = 0, den = 0;
  NcclShare out;
  for (const Interval& iv : t.intervals) {
    if (iv.stream != Stream::Compute || iv.part != Part::Whole || iv.rank < 0 || iv.rank >= s.pp) continue;
    const OpKind k = iv.action.first.kind;
    if (iv.action.overlapped || (k != OpKind::F && k != OpKind::B)) continue;
    const double o = static_cast<double>(covered(on[static_cast<std::size_t>(iv.rank)], iv.start, iv.end));
    if (o <= 0) continue;
    const double alone = (k == OpKind::F ? f_ms : b_ms) * 1e6;  // ns
    num += o * (static_cast<double>(iv.duration()) - alone);
    den += o * o;
    ++out.samples;
  }
  if (den > 0) out.share = std::clamp(num / den, 0.0, 0.9);
  return out;
}

SimResult simulate_nccl(const Schedule& s, const SimCosts& c, double share) {
  SimOptions opt;
  opt.record_timeline = true;
  SimResult r = simulate(s, c, opt);
  if (share <= 0) return r;
  SimCosts stretched = c;
  return with_action_effects(
      s, stretched, opt, share, [&](const SimResult& x) { return nccl_resident(s, x.timeline, c.rank_device); },
      ClockResponse{}, std::move(r));
}

namespace {

// Each rank's compute spans in `t` (`own`), and, per rank, what the other ranks compute as disjoint
// spans in time order: those on other GPUs (`same_gpu` false) or those sharing its GPU (true).
struct BesideSpans {
  std::vector<Intervals> own, others;
};
BesideSpans beside_spans(const Timeline& t, int pp, const std::vector<int>& rank_device, bool same_gpu) {
  auto device = [&](int r) { return rank_device.empty() ? r : rank_device[static_cast<std::size_t>(r)]; };
  BesideSpans out;
  out.own.resize(static_cast<std::size_t>(pp));
  for (const Interval& iv : t.intervals)
    if (iv.stream == Stream::Compute && iv.rank >= 0 && iv.rank < pp)
      out.own[static_cast<std::size_t>(iv.rank)].push_back({iv.start, iv.end});
  for (int r = 0; r < pp; ++r) {
    Intervals others;
    for (int q = 0; q < pp; ++q)
      if (q != r && (device(q) == device(r)) == same_gpu)
        others.insert(others.end(), out.own[static_cast<std::size_t>(q)].begin(),
                      out.own[static_cast<std::size_t>(q)].end());
    out.others.push_back(merge_intervals(std::move(others)));
  }
  return out;
}

}  // namespace

std::vector<std::vector<double>> peer_busy_share(const Timeline& t, int pp, const std::vector<int>& rank_device) {
  const BesideSpans sp = beside_spans(t, pp, rank_device, /*same_gpu=*/false);  // what the other GPUs compute
  std::vector<std::vector<double>> out(static_cast<std::size_t>(pp));
  for (int r = 0; r < pp; ++r)
    for (const auto& [a, b] : sp.own[static_cast<std::size_t>(r)])
      out[static_cast<std::size_t>(r)].push_back(
          b > a
              ? static_cast<double>(covered(sp.others[static_cast<std::size_t>(r)], a, b)) / static_cast<double>(b - a)
              : 0.0);
  return out;
}

namespace {

// An action's time alone (as the engine costs it without the overlap model) and its F, I, W shares.
std::pair<Time, std::array<double, 3>> alone_and_mix(const Schedule& s, const SimCosts& c, const Action& a) {
  std::array<double, 3> m{};
  for (int i = 0; i < a.size(); ++i) {
    const Op& op = a.op(i);
    const SliceCosts& sc = c.slice[static_cast<std::size_t>(s.slice[static_cast<std::size_t>(op.stage)])];
    const double in = static_cast<double>(sc.input_grad()), w = static_cast<double>(sc.w);
    if (op.kind == OpKind::F) m[0] += static_cast<double>(sc.f);
    if (op.kind == OpKind::I || op.kind == OpKind::B) m[1] += in;
    if (op.kind == OpKind::W || op.kind == OpKind::B) m[2] += w;
  }
  const double total = m[0] + m[1] + m[2];
  for (double& v : m) v = total > 0 ? v / total : 1.0 / 3;
  const SliceCosts& first = c.slice[static_cast<std::size_t>(s.slice[static_cast<std::size_t>(a.first.stage)])];
  if (!a.overlapped) return {op_duration(first, a.first.kind), m};
  const SliceCosts& second = c.slice[static_cast<std::size_t>(s.slice[static_cast<std::size_t>(a.second.stage)])];
  return {pair_duration(first, second, a.second.kind), m};
}

}  // namespace

std::vector<double> KindShareFit::by_kind() const {
  std::vector<double> t(9);
  for (std::size_t x = 0; x < 3; ++x)
    for (std::size_t y = 0; y < 3; ++y) t[3 * x + y] = factor[x];
  return t;
}

KindShareFit fit_share_by_kind(const Schedule& s, const Timeline& t, const SimCosts& alone) {
  const BesideSpans sp = beside_spans(t, s.pp, alone.rank_device, /*same_gpu=*/true);  // the others on its GPU
  std::array<double, 3> num{}, den{};
  KindShareFit out;
  for (const Interval& iv : t.intervals) {
    if (iv.stream != Stream::Compute || iv.part != Part::Whole || iv.rank < 0 || iv.rank >= s.pp) continue;
    const OpKind kind = iv.action.first.kind;
    const int k = kind == OpKind::F ? 0 : kind == OpKind::I ? 1 : kind == OpKind::W ? 2 : -1;
    if (iv.action.overlapped || k < 0) continue;
    const double o = static_cast<double>(covered(sp.others[static_cast<std::size_t>(iv.rank)], iv.start, iv.end));
    if (o <= 0) continue;
    double a = static_cast<double>(alone_and_mix(s, alone, iv.action).first);
    if (!alone.rank_kind_scale.empty()) a *= alone.rank_kind_scale[3 * static_cast<std::size_t>(iv.rank) + k];
    const auto kk = static_cast<std::size_t>(k);
    num[kk] += o * (static_cast<double>(iv.duration()) - a);
    den[kk] += o * o;
    ++out.samples[kk];
  }
  for (std::size_t k = 0; k < 3; ++k)
    if (den[k] > 0) out.factor[k] = std::clamp(1.0 / (1.0 - std::min(num[k] / den[k], 0.75)), 1.0, 4.0);
  return out;
}

std::array<double, 3> factors_at_duty(const std::vector<CorunLevel>& levels, const std::array<double, 3>& fixed,
                                      double d) {
  if (levels.empty()) return fixed;
  std::vector<CorunLevel> l = levels;
  std::sort(l.begin(), l.end(), [](const CorunLevel& a, const CorunLevel& b) { return a.duty < b.duty; });
  if (d <= l.front().duty) return l.front().factor;
  if (d >= l.back().duty) return l.back().factor;
  std::size_t i = 1;
  while (l[i].duty < d) ++i;  // l[i - 1].duty < d <= l[i].duty
  const double t = (d - l[i - 1].duty) / (l[i].duty - l[i - 1].duty);
  std::array<double, 3> out{};
  for (std::size_t k = 0; k < 3; ++k) out[k] = l[i - 1].factor[k] + t * (l[i].factor[k] - l[i - 1].factor[k]);
  return out;
}

std::vector<double> device_duty(const Timeline& t, int pp, const std::vector<int>& rank_device) {
  auto device = [&](int r) { return rank_device.empty() ? r : rank_device[static_cast<std::size_t>(r)]; };
  Time first = t.start, last = t.end;  // a timeline built by hand may leave them 0: its intervals' span
  if (last <= first && !t.intervals.empty()) {
    first = t.intervals.front().start;
    last = t.intervals.front().end;
    for (const Interval& iv : t.intervals) {
      first = std::min(first, iv.start);
      last = std::max(last, iv.end);
    }
  }
  const Time span = last - first;
  std::vector<double> out(static_cast<std::size_t>(pp), 0.0);
  if (span <= 0) return out;
  for (int r = 0; r < pp; ++r) {
    Intervals on;
    for (const Interval& iv : t.intervals)
      if (iv.stream == Stream::Compute && iv.rank >= 0 && iv.rank < pp && device(iv.rank) == device(r))
        on.push_back({iv.start, iv.end});
    Time busy = 0;
    for (const auto& [a, b] : merge_intervals(std::move(on))) busy += b - a;
    out[static_cast<std::size_t>(r)] = static_cast<double>(busy) / static_cast<double>(span);
  }
  return out;
}

namespace {

// The largest change between two per-rank, per-action tables (entries present in both).
double moved_by(const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b) {
  double moved = 0;
  for (std::size_t r = 0; r < a.size() && r < b.size(); ++r)
    for (std::size_t i = 0; i < a[r].size() && i < b[r].size(); ++i)
      moved = std::max(moved, std::abs(a[r][i] - b[r][i]));
  return moved;
}

}  // namespace

CorunResult simulate_corun(const Schedule& s, const SimCosts& c, const CorunFactors& f) {
  PPSIM_CHECK(c.moe.empty(), "the co-run model takes whole-action costs, not the overlap model's");
  SimOptions opt;
  opt.record_timeline = true;
  CorunResult out;
  out.result = simulate(s, c, opt);
  SimCosts stretched = c;
  const std::size_t pp = static_cast<std::size_t>(s.pp);
  std::vector<std::vector<double>> phi = peer_busy_share(out.result.timeline, s.pp, c.rank_device);
  std::vector<double> duty = device_duty(out.result.timeline, s.pp, c.rank_device);
  for (int round = 1; round <= 12; ++round) {
    stretched.action_time.assign(pp, {});
    out.factor.assign(pp, {});
    out.duty = duty;
    for (std::size_t r = 0; r < pp; ++r) {
      const std::array<double, 3> idle = factors_at_duty(f.idle_by_duty, f.idle, duty[r]);
      const std::array<double, 3> busy = factors_at_duty(f.busy_by_duty, f.busy, duty[r]);
      for (std::size_t i = 0; i < s.ranks[r].size(); ++i) {
        const auto [alone, mix] = alone_and_mix(s, c, s.ranks[r][i]);
        const double p = i < phi[r].size() ? phi[r][i] : 0.0;
        double k = 0;
        for (std::size_t x = 0; x < 3; ++x) k += mix[x] * ((1 - p) * idle[x] + p * busy[x]);
        out.factor[r].push_back(k);
        stretched.action_time[r].push_back(static_cast<Time>(std::llround(static_cast<double>(alone) * k)));
      }
    }
    out.result = simulate(s, stretched, opt);
    out.rounds = round;
    std::vector<std::vector<double>> next = peer_busy_share(out.result.timeline, s.pp, c.rank_device);
    std::vector<double> next_duty = device_duty(out.result.timeline, s.pp, c.rank_device);
    const bool by_duty = !f.idle_by_duty.empty() || !f.busy_by_duty.empty();  // else duty moves nothing
    const double moved = std::max(moved_by(next, phi), by_duty ? moved_by({next_duty}, {duty}) : 0.0);
    phi = std::move(next);
    duty = std::move(next_duty);
    if (moved <= 1e-3) break;
  }
  out.busy_share = std::move(phi);
  return out;
}

std::vector<ReplayMemoryPrediction> replay_memory(const std::string& config, const std::vector<std::string>& sets,
                                                  const Schedule& s, const SimResult* r) {
  std::vector<std::string> all = sets;
  all.push_back("parallel.embedding_on_first=false");
  all.push_back("parallel.head_on_last=false");
  std::vector<ReplayMemoryPrediction> out;
  for (const MemoryBreakdown& m : predicted_memory(load_config(config, all), s, r))
    out.push_back({m, m.weights + m.gradients + m.activations + m.comm_buffers + m.workspace});
  return out;
}

double middle_run(std::vector<double> runs) {
  PPSIM_CHECK(!runs.empty(), "no runs");
  std::sort(runs.begin(), runs.end());
  return runs[(runs.size() - 1) / 2];
}

}  // namespace ppsim::api
