// The planner (planner.h) in four stages:
//   1. enumerate the candidates of every variant and keep this shard's (id % n == i);
//   2. cheap checks, one thread, no simulation: GPU count, expert parallelism, global batch,
//      the family's rule, op limits, the layer split; what passes names a layout (its config)
//      and a schedule (family, pp, v, M);
//   3. build and validate each layout's config once (apply_set on a cloned tree, one thread;
//      validation in parallel: every tree is private to its task);
//   4. per schedule, in parallel: generate it once, then for each of its candidates derive the
//      costs, check the weights against the memory cap, simulate (identical costs share one
//      simulation), and check the peak memory.
// Every outcome lands in the candidate's own slot, so the thread count cannot change a result.
#include "plan/planner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <optional>

#include "core/thread_pool.h"
#include "cost/derive.h"
#include "cost/invariants.h"
#include "cost/layer_split.h"
#include "cost/memory.h"
#include "plan/candidate_config.h"
#include "plan/searched_family.h"
#include "plan/whatif.h"
#include "schedules/registry.h"
#include "sim/engine.h"
#include "sim/metrics.h"

namespace ppsim {

const char* reason_name(Reason r) {
  switch (r) {
    case Reason::gpu_count: return "GPU count";
    case Reason::expert_parallel: return "expert parallel";
    case Reason::global_batch: return "global batch";
    case Reason::schedule_constraint: return "schedule constraint";
    case Reason::layers_not_divisible: return "layers not divisible";
    case Reason::invalid_config: return "invalid config";
    case Reason::resource_limit: return "resource limit";
    case Reason::memory_cap: return "memory cap";
    case Reason::simulation_failed: return "simulation failed";
  }
  return "?";
}

bool ranks_before(const PlanRow& a, const PlanRow& b, Objective o) {
  if (o == Objective::tokens_per_second) {
    if (a.tokens_per_second != b.tokens_per_second) return a.tokens_per_second > b.tokens_per_second;
  } else if (a.step_ns != b.step_ns) {
    return a.step_ns < b.step_ns;
  }
  return a.id < b.id;
}

std::vector<std::string> reproduce_sets(const VariantResult& v, const PlanRow& row) {
  std::vector<std::string> out = v.given_sets;
  out.insert(out.end(), v.overrides.begin(), v.overrides.end());
  out.push_back("parallel.schedule=" + row.schedule);
  out.push_back(fmt::format("parallel.microbatches={}", row.microbatches));
  auto it = v.layout_sets.find(row.layout());
  if (it != v.layout_sets.end()) out.insert(out.end(), it->second.begin(), it->second.end());
  return out;
}

namespace {

constexpr double kGB = 1e9;

struct Variant {
  ModelConfigData cfg;
  std::vector<std::string> overrides;
  SearchSpace space;
  int gpus = 0;             // the budget: dp = gpus / (pp * tp)
  bool write_gpus = false;  // the layout sets hardware.gpus
  double cap_bytes = 0;
  std::uint64_t first_id = 0, count = 0;
};

enum class Status : std::uint8_t { pending, rejected, feasible };

struct Outcome {
  Status status = Status::pending;
  Reason reason = Reason::gpu_count;
  std::string detail;
  double need_bytes = 0;       // a memory rejection: the candidate's peak per GPU
  bool need_simulated = true;  // false: weights, gradients and optimizer states alone (a lower bound)
  PlanRow row;
};

struct Layout {
  LayoutKey key;
  int dp = 1;
  std::vector<std::string> sets;
  YAML::Node tree;
  std::shared_ptr<const ModelConfigData> cfg;  // null when the loader refused it
  std::string error;
};

struct ScheduleKey {
  int family = 0;  // index in families()
  int pp = 0, v = 1, microbatches = 0;
  auto operator<=>(const ScheduleKey&) const = default;
};

struct Group {
  ScheduleKey key;
  const Family* family = nullptr;
  ScheduleParams params;
  std::vector<std::size_t> slots;  // ascending candidate ids
  double work = 0;                 // ops x candidates, for ordering the tasks
};

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string gb_text(double bytes) { return fmt::format("{:.1f} GB", bytes / kGB); }

// `bytes` in GB with as many decimals (1 to 4) as it takes to print apart from `other` (a peak
// just over its cap: "62.44 GB ... over the cap of 62.38 GB", not 62.4 over 62.4).
std::string gb_apart(double bytes, double other) {
  int d = 1;
  while (d < 4 && fmt::format("{:.{}f}", bytes / kGB, d) == fmt::format("{:.{}f}", other / kGB, d)) ++d;
  return fmt::format("{:.{}f} GB", bytes / kGB, d);
}

std::string constraints_text(const PlanSpec& spec) {
  std::vector<std::string> parts;
  if (spec.constraints.memory_gb) parts.push_back(fmt::format("memory <= {:g} GB per GPU", *spec.constraints.memory_gb));
  else if (spec.constraints.reserve_gb > 0)
    parts.push_back(fmt::format("memory <= hardware.hbm_gb - {:g} GB per GPU", spec.constraints.reserve_gb));
  else parts.push_back("memory <= hardware.hbm_gb per GPU");
  const auto& c = spec.constraints;
  if (c.has_global_batch()) {
    if (c.global_batch_min == c.global_batch_max) parts.push_back(fmt::format("global batch = {} sequences", c.global_batch_min));
    else parts.push_back(fmt::format("global batch in [{}, {}] sequences", c.global_batch_min, c.global_batch_max));
  }
  if (c.gpus > 0) parts.push_back(fmt::format("{} GPUs", c.gpus));
  else parts.push_back("GPUs as configured");
  return fmt::format("{}", fmt::join(parts, "; "));
}

template <typename T, typename F>
std::string join_values(const std::vector<T>& v, F&& f) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + f(x);
  return s;
}

std::vector<std::string> space_text(const SearchSpace& s) {
  auto num = [](int x) { return std::to_string(x); };
  std::vector<std::string> out;
  out.push_back("schedules: " + join_values(s.families, [](const Family* f) { return f->name; }));
  out.push_back("pp: " + join_values(s.pp, num));
  bool interleaved = false;
  for (const Family* f : s.families) interleaved |= family_takes_vpp(f->name);
  if (interleaved) out.push_back("vpp (interleaved families): " + join_values(s.vpp, num));
  out.push_back("microbatches: " + join_values(s.microbatches, num));
  out.push_back("micro_batch_size: " + join_values(s.micro_batch_size, num));
  out.push_back("ep: " + join_values(s.ep, num));
  out.push_back("recompute: " + join_values(s.recompute, [](Recompute r) { return std::string(recompute_name(r)); }));
  return out;
}

bool same_costs(const SimCosts& a, const SimCosts& b) {
  if (a.slice.size() != b.slice.size() || a.moe.size() != b.moe.size() || a.call_restart != b.call_restart ||
      a.eager_bytes != b.eager_bytes)
    return false;
  for (std::size_t i = 0; i < a.slice.size(); ++i) {
    const SliceCosts &x = a.slice[i], &y = b.slice[i];
    if (x.f != y.f || x.b != y.b || x.w != y.w || x.w_apart != y.w_apart || x.i_apart != y.i_apart || x.fb != y.fb ||
        x.act_bytes != y.act_bytes || x.grad_bytes != y.grad_bytes)
      return false;
  }
  for (std::size_t i = 0; i < a.moe.size(); ++i) {
    const MoeSliceCosts &x = a.moe[i], &y = b.moe[i];
    if (x.layers != y.layers || x.attn_f != y.attn_f || x.attn_b != y.attn_b || x.attn_w != y.attn_w || x.mlp_f != y.mlp_f ||
        x.mlp_b != y.mlp_b || x.mlp_w != y.mlp_w || x.dispatch != y.dispatch || x.combine != y.combine ||
        x.dispatch_b != y.dispatch_b || x.combine_b != y.combine_b)
      return false;
  }
  return a.link.latency == b.link.latency && a.link.bytes_per_tick == b.link.bytes_per_tick &&
         a.link.blocking == b.link.blocking && a.comm_sm_fraction == b.comm_sm_fraction && a.rank_node == b.rank_node &&
         a.inter_node_link.latency == b.inter_node_link.latency &&
         a.inter_node_link.bytes_per_tick == b.inter_node_link.bytes_per_tick;
}

// One simulation of a group's schedule, shared by the candidates with the same costs and the same
// p2p runtime (parallel.p2p_runtime changes the result for the same costs).
struct Memo {
  SimCosts costs;  // as derived (the key)
  P2pRuntime runtime = P2pRuntime::dataflow;
  double clock_duty_slope = 0, clock_duty_ref = 0;  // hardware.clock (simulate_config)
  SimCosts run_costs;  // as simulated: scaled by hardware.clock's factor where it applies
  SimResult sim;
  double p2p_sm_share = 0;  // parallel.p2p_sm_share (simulate_config)
  // hardware.clock's response (clock_key)
  std::array<double, 6> clock_response{};
};

std::array<double, 6> clock_key(const HardwareSpec& h) {
  return {h.clock_reset_idle_ms, h.clock_warm, h.clock_warm_ms, h.clock_slow, h.clock_slow_at_ms, h.clock_slow_ms};
}

// make_schedule without its last step (the Boost.Graph validator): see planner.h.
Schedule generate(const Family& fam, const ScheduleParams& p) {
  Schedule s = fam.generate(p);
  s.family = fam.name;
  s.parameter_copies = fam.parameter_copies;
  PPSIM_CHECK(s.stages_per_pipe == p.vpp * p.pp, "{}: {} slices, expected v*P = {}*{}", fam.name, s.stages_per_pipe, p.vpp, p.pp);
  return s;
}

int family_index(const Family* f) {
  const auto& all = families();
  if (is_searched(f)) return static_cast<int>(all.size());
  for (std::size_t i = 0; i < all.size(); ++i)
    if (&all[i] == f) return static_cast<int>(i);
  PPSIM_CHECK(false, "family {} is not in the registry", f->name);
  return -1;
}

class Planner {
 public:
  Planner(const ModelConfigData& base, const PlanOptions& opt)
      : base_(base), opt_(opt), set_paths_(set_key_paths(opt.sets)) {}

  PlanResult run() {
    spec_ = read_plan_spec(base_, set_paths_);
    make_variants();
    for (std::size_t vi = 0; vi < variants_.size(); ++vi) {
      Variant& v = variants_[vi];
      v.first_id = all_.size();
      enumerate_candidates(v.space, static_cast<int>(vi), all_);
      v.count = all_.size() - v.first_id;
    }
    const std::uint64_t n = static_cast<std::uint64_t>(opt_.shard_count);
    for (const PlanCandidate& c : all_)
      if (c.id % n == static_cast<std::uint64_t>(opt_.shard_index)) mine_.push_back(c.id);
    outcomes_.resize(mine_.size());
    slot_layout_.assign(mine_.size(), 0);
    total_ = mine_.size();

    check_cheap();
    build_layouts();
    evaluate_groups();
    return collect();
  }

 private:
  void make_variants() {
    auto add = [&](ModelConfigData cfg, std::vector<std::string> overrides) {
      Variant v;
      v.cfg = std::move(cfg);
      v.overrides = std::move(overrides);
      v.space = resolve_space(spec_.search, v.cfg);
      const PlanConstraints& c = spec_.constraints;
      v.gpus = c.gpus > 0 ? c.gpus : v.cfg.hardware.gpus > 0 ? v.cfg.hardware.gpus : v.cfg.parallel.gpus();
      v.write_gpus = c.gpus > 0 || v.cfg.hardware.gpus > 0;
      v.cap_bytes = (c.memory_gb ? *c.memory_gb : v.cfg.hardware.hbm_gb - c.reserve_gb) * kGB;
      // A cap above the GPU's memory would rank layouts that do not fit the GPU as feasible.
      if (c.memory_gb && *c.memory_gb > v.cfg.hardware.hbm_gb)
        throw InputError(
            c.memory_gb_at.file.empty() ? SourceLoc{base_.file, 0, 0} : c.memory_gb_at,
            fmt::format(
                "plan.constraints.memory_gb = {:g} is above the GPU's memory, hardware.hbm_gb = "
                "{:g}{}: give at most {:g} (or reserve_gb for headroom below it)",
                *c.memory_gb, v.cfg.hardware.hbm_gb,
                variants_.empty() ? std::string{} : " in what-if '" + spec_.whatif[variants_.size() - 1].name + "'",
                v.cfg.hardware.hbm_gb));
      if (v.cap_bytes <= 0)
        throw InputError(SourceLoc{base_.file, 0, 0},
                         fmt::format("plan.constraints.reserve_gb = {:g} leaves no memory of hardware.hbm_gb = {:g}{}",
                                     c.reserve_gb, v.cfg.hardware.hbm_gb,
                                     variants_.empty() ? std::string{} : " in what-if '" + spec_.whatif[variants_.size() - 1].name + "'"));
      variants_.push_back(std::move(v));
    };
    add(base_, {});
    for (const WhatIf& w : spec_.whatif) add(build_variant(base_, w, set_paths_), whatif_sets(w));
  }

  void reject(std::size_t slot, Reason r, std::string detail) {
    Outcome& o = outcomes_[slot];
    o.status = Status::rejected;
    o.reason = r;
    o.detail = std::move(detail);
  }

  void reject_memory(std::size_t slot, double need_bytes, std::string detail, bool simulated) {
    reject(slot, Reason::memory_cap, std::move(detail));
    outcomes_[slot].need_bytes = need_bytes;
    outcomes_[slot].need_simulated = simulated;
  }

  // Stage 2: checks that need no config of the layout and no simulation.
  void check_cheap() {
    std::map<std::pair<int, int>, std::pair<std::vector<int>, std::string>> splits;  // (variant, slices)
    std::map<ScheduleKey, std::size_t> group_of;
    for (std::size_t slot = 0; slot < mine_.size(); ++slot) {
      const PlanCandidate& c = all_[mine_[slot]];
      const Variant& var = variants_[static_cast<std::size_t>(c.variant)];
      const ModelConfigData& cfg = var.cfg;
      const long long per_replica = static_cast<long long>(c.pp) * cfg.parallel.tp;
      if (var.gpus % per_replica != 0) {
        reject(slot, Reason::gpu_count,
               fmt::format("{} GPUs are not a multiple of pp*tp = {}*{}", var.gpus, c.pp, cfg.parallel.tp));
        continue;
      }
      const int dp = static_cast<int>(var.gpus / per_replica);
      if (c.ep > 1) {
        const MoeSpec& moe = cfg.model.moe;
        if (!moe.enabled()) {
          reject(slot, Reason::expert_parallel, fmt::format("ep={} needs an MoE model", c.ep));
          continue;
        }
        // Expert parallelism is carved out of dp, or of dp x tp with whole experts (parallel.etp 1).
        const bool whole = cfg.parallel.expert_tp() == 1 && cfg.parallel.tp > 1;
        if (moe.experts % c.ep != 0 || cfg.parallel.expert_pool(dp) % c.ep != 0) {
          reject(slot, Reason::expert_parallel,
                 moe.experts % c.ep != 0 ? fmt::format("ep={} does not divide the {} experts", c.ep, moe.experts)
                 : whole ? fmt::format("ep={} does not divide dp x tp = {} x {}", c.ep, dp, cfg.parallel.tp)
                         : fmt::format("ep={} does not divide dp={}", c.ep, dp));
          continue;
        }
      }
      const PlanConstraints& k = spec_.constraints;
      const long long batch = static_cast<long long>(c.microbatches) * c.mbs * dp;
      if (k.has_global_batch() && (batch < k.global_batch_min || batch > k.global_batch_max)) {
        reject(slot, Reason::global_batch,
               fmt::format("M*mbs*dp = {}*{}*{} = {} sequences, {}", c.microbatches, c.mbs, dp, batch,
                           k.global_batch_min == k.global_batch_max
                               ? fmt::format("not {}", k.global_batch_min)
                               : fmt::format("outside [{}, {}]", k.global_batch_min, k.global_batch_max)));
        continue;
      }
      ScheduleParams params = resolve_params(*c.family, ScheduleParams{c.pp, c.microbatches, c.v, 0});
      const Limits& lim = limits();
      const long long ops = 3LL * params.pp * std::max(params.vpp, 2) * static_cast<long long>(params.microbatches);
      if (params.pp > lim.max_pp || params.microbatches > lim.max_microbatches || ops > lim.max_ops) {
        reject(slot, Reason::resource_limit,
               fmt::format("P={}, M={}: about {} ops, over the limits (--max-ops {})", params.pp, params.microbatches, ops, lim.max_ops));
        continue;
      }
      if (std::string why = c.family->check(params); !why.empty()) {
        reject(slot, Reason::schedule_constraint, std::move(why));
        continue;
      }
      const int slices = c.v * c.pp;
      auto sit = splits.find({c.variant, slices});
      if (sit == splits.end()) {
        std::pair<std::vector<int>, std::string> entry;
        try {
          const std::vector<SliceLayout> lay = slice_layouts(cfg, slices);
          if (!cfg.parallel.layer_split.empty())
            for (const SliceLayout& s : lay) entry.first.push_back(s.layers);
        } catch (const InputError& e) {
          entry.second = e.message();
        }
        sit = splits.emplace(std::make_pair(c.variant, slices), std::move(entry)).first;
      }
      if (!sit->second.second.empty()) {
        reject(slot, Reason::layers_not_divisible, sit->second.second);
        continue;
      }
      const LayoutKey lk{c.variant, c.pp, c.v, c.mbs, c.ep, c.recompute};
      auto [lit, fresh] = layout_of_.emplace(lk, layouts_.size());
      if (fresh) {
        Layout l;
        l.key = lk;
        l.dp = dp;
        l.sets = layout_sets(cfg, lk, dp, var.write_gpus ? var.gpus : 0, sit->second.first);
        layouts_.push_back(std::move(l));
      }
      slot_layout_[slot] = lit->second;
      const ScheduleKey sk{family_index(c.family), c.pp, c.v, c.microbatches};
      auto [git, gfresh] = group_of.emplace(sk, groups_.size());
      if (gfresh) {
        Group g;
        g.key = sk;
        g.family = c.family;
        g.params = params;
        g.work = static_cast<double>(ops);
        groups_.push_back(std::move(g));
      }
      groups_[git->second].slots.push_back(slot);
    }
    for (auto& o : outcomes_) done_ += o.status == Status::rejected ? 1 : 0;
  }

  // Stage 3: one validated config per layout.
  void build_layouts() {
    for (Layout& l : layouts_) {
      try {
        l.tree = layout_tree(variants_[static_cast<std::size_t>(l.key.variant)].cfg, l.sets);
      } catch (const InputError& e) {
        l.error = e.message();
      }
    }
    parallel_for(layouts_.size(), opt_.jobs, [&](std::size_t i) {
      Layout& l = layouts_[i];
      if (!l.error.empty()) return;
      try {
        l.cfg = std::make_shared<const ModelConfigData>(validate_layout(l.tree, variants_[static_cast<std::size_t>(l.key.variant)].cfg, l.sets));
      } catch (const InputError& e) {
        l.error = e.message();
      }
    });
  }

  // Stage 4: per schedule, simulate its candidates.
  void evaluate_groups() {
    std::vector<std::size_t> order(groups_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    // Largest tasks first, so that no long one starts last (the results do not depend on this).
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return groups_[a].work * static_cast<double>(groups_[a].slots.size()) >
             groups_[b].work * static_cast<double>(groups_[b].slots.size());
    });
    auto tick = [&] {
      if (opt_.progress) opt_.progress(done_.load(std::memory_order_relaxed), total_);
    };
    parallel_for(order.size(), opt_.jobs, [&](std::size_t i) { evaluate_group(groups_[order[i]]); }, tick);
  }

  void evaluate_group(const Group& g) {
    if (is_searched(g.family)) {  // a schedule per candidate: it depends on the costs
      for (std::size_t slot : g.slots) {
        const Layout& l = layouts_[slot_layout_[slot]];
        Schedule s = generate(*g.family, g.params);
        if (l.cfg) {
          try {
            s = search_for_candidate(ModelConfig{l.cfg}, g.params.pp, g.params.microbatches);
          } catch (const InputError& e) {
            reject(slot, Reason::schedule_constraint, e.message());
            done_.fetch_add(1, std::memory_order_relaxed);
            continue;
          }
        }
        std::vector<Memo> memo;
        evaluate_one(slot, g, s, memo);
        done_.fetch_add(1, std::memory_order_relaxed);
      }
      return;
    }
    const Schedule s = generate(*g.family, g.params);
    std::vector<Memo> memo;
    for (std::size_t slot : g.slots) {
      evaluate_one(slot, g, s, memo);
      done_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  void evaluate_one(std::size_t slot, const Group& g, const Schedule& s, std::vector<Memo>& memo) {
    const PlanCandidate& c = all_[mine_[slot]];
    const Variant& var = variants_[static_cast<std::size_t>(c.variant)];
    const Layout& l = layouts_[slot_layout_[slot]];
    if (!l.cfg) return reject(slot, Reason::invalid_config, l.error);
    const ModelConfig cfg{l.cfg};
    const ModelConfigData& data = *l.cfg;
    SimCosts costs;
    try {
      costs = derive_costs(cfg, s);
    } catch (const InputError& e) {
      return reject(slot, Reason::invalid_config, e.message());
    }
    // Weights, gradients and optimizer states alone: no simulation needed to see them overflow.
    const std::vector<SliceLayout> slices = slice_layouts(data, s.stages_per_pipe);
    const std::vector<RankMemory> fixed = rank_memory(data, s.stage_rank, s.slice, slices, std::vector<int>(static_cast<std::size_t>(s.pp), 0));
    auto states = [](const RankMemory& m) { return m.weights + m.grads + m.optimizer + m.ema; };
    for (std::size_t r = 0; r < fixed.size(); ++r)
      if (states(fixed[r]) > var.cap_bytes)
        return reject_memory(
            slot, states(fixed[r]),
            fmt::format("weights, gradients and optimizer states need {} on rank {} ({} parameter cop{}), over the "
                        "cap of {}",
                        gb_apart(states(fixed[r]), var.cap_bytes), r, s.parameter_copies,
                        s.parameter_copies == 1 ? "y" : "ies", gb_apart(var.cap_bytes, states(fixed[r]))),
            false);
    simulated_.fetch_add(1, std::memory_order_relaxed);
    const Memo* hit = nullptr;
    const P2pRuntime runtime = data.parallel.p2p_runtime;
    const HardwareSpec& hw = data.hardware;
    for (const Memo& m : memo)
      if (m.runtime == runtime && m.clock_duty_slope == hw.clock_duty_slope && m.clock_duty_ref == hw.clock_duty_ref &&
          m.p2p_sm_share == data.parallel.p2p_sm_share && m.clock_response == clock_key(hw) &&
          same_costs(m.costs, costs))
        hit = &m;
    if (hit == nullptr) {
      // parallel.p2p_runtime: the schedule as its runtime executes it (cost_model.h as_run); a
      // runtime that cannot run this family (torch: two pipes) is the family's constraint here.
      Schedule run;
      try {
        run = as_run(cfg, s);
      } catch (const InputError& e) {
        return reject(slot, Reason::schedule_constraint, e.message());
      }
      try {
        simulations_.fetch_add(1, std::memory_order_relaxed);
        // hardware.clock: simulate_config scales the costs it runs on.
        SimCosts run_costs = costs;
        SimResult r = simulate_config(cfg, run, run_costs);
        memo.push_back({costs, runtime, hw.clock_duty_slope, hw.clock_duty_ref, std::move(run_costs), std::move(r),
                        data.parallel.p2p_sm_share, clock_key(hw)});
        hit = &memo.back();
      } catch (const InputError& e) {
        return reject(slot, Reason::simulation_failed, e.message());
      }
    }
    const SimResult* sim = &hit->sim;
    const ScheduleMetrics m = compute_metrics(s, *sim, hit->run_costs, g.family, g.params);
    const PhysicalResult phys = physical_result(cfg, s, *sim);
    const AnswerSource src = source_of(cfg);
    check_timing(s, hit->run_costs, m, src);
    check_physical(cfg, s, *sim, phys, src);
    double peak = 0;
    std::size_t peak_rank = 0;
    for (std::size_t r = 0; r < phys.peak_memory_bytes.size(); ++r)
      if (phys.peak_memory_bytes[r] > peak) {
        peak = phys.peak_memory_bytes[r];
        peak_rank = r;
      }
    if (peak > var.cap_bytes)
      return reject_memory(
          slot, peak,
          fmt::format("peak memory {} on rank {} ({} of it activations of {} micro-batch chunks), over the cap of {}",
                      gb_apart(peak, var.cap_bytes), peak_rank, gb_text(phys.memory[peak_rank].activations),
                      sim->ranks[peak_rank].peak_activations, gb_apart(var.cap_bytes, peak)),
          true);
    Outcome& o = outcomes_[slot];
    o.status = Status::feasible;
    PlanRow& row = o.row;
    row.id = c.id;
    row.variant = c.variant;
    row.schedule = g.family->name;
    row.pp = c.pp;
    row.v = c.v;
    row.microbatches = c.microbatches;
    row.mbs = c.mbs;
    row.ep = c.ep;
    row.recompute = c.recompute;
    row.dp = l.dp;
    row.gpus = c.pp * data.parallel.tp * l.dp;
    row.step_ns = m.makespan;
    row.tokens_per_second = phys.tokens_per_second;
    row.mfu = phys.mfu;
    row.bubble_ratio = m.bubble_ratio;
    for (Time e : m.exposed_comm) row.exposed_comm_ns = std::max(row.exposed_comm_ns, e);
    row.peak_memory_bytes = peak;
  }

  PlanResult collect() {
    PlanResult out;
    out.config_name = base_.name;
    out.config_file = base_.file;
    out.fingerprint = fmt::format("{:016x}", fnv1a(flow_text(base_.tree)));
    out.objective = spec_.objective;
    out.top_k = opt_.top_k > 0 ? opt_.top_k : spec_.top_k;
    out.constraints = constraints_text(spec_);
    out.shard_index = opt_.shard_index;
    out.shard_count = opt_.shard_count;
    for (std::size_t vi = 0; vi < variants_.size(); ++vi) {
      const Variant& var = variants_[vi];
      VariantResult vr;
      vr.name = vi == 0 ? "base" : spec_.whatif[vi - 1].name;
      vr.overrides = var.overrides;
      vr.given_sets = opt_.sets;
      vr.space = space_text(var.space);
      vr.candidates = var.count;
      vr.memory_cap_bytes = var.cap_bytes;
      vr.gpus = var.gpus;
      for (const Family* f : var.space.families) vr.rejected_by_schedule.push_back({f->name, {}});
      out.variants.push_back(std::move(vr));
    }
    for (std::size_t slot = 0; slot < mine_.size(); ++slot) {
      const PlanCandidate& c = all_[mine_[slot]];
      VariantResult& vr = out.variants[static_cast<std::size_t>(c.variant)];
      ++vr.evaluated;
      Outcome& o = outcomes_[slot];
      PPSIM_CHECK(o.status != Status::pending, "candidate {} was not evaluated", c.id);
      if (o.status == Status::rejected) {
        Rejections& rj = vr.rejected[static_cast<std::size_t>(o.reason)];
        if (rj.count++ == 0) {
          rj.example_id = c.id;
          rj.example = describe_candidate(c) + ": " + o.detail;
        }
        for (auto& [name, counts] : vr.rejected_by_schedule)
          if (name == c.family->name) ++counts[static_cast<std::size_t>(o.reason)];
        if (o.reason == Reason::memory_cap) {
          const NearestPlan n{true, c.id, describe_candidate(c), o.need_bytes, o.need_simulated};
          if (n.before(vr.nearest)) vr.nearest = n;
        }
        continue;
      }
      const Layout& l = layouts_[slot_layout_[slot]];
      vr.layout_sets.emplace(l.key, l.sets);
      vr.feasible.push_back(std::move(o.row));
    }
    out.stats.candidates = mine_.size();
    out.stats.simulated = simulated_.load();
    out.stats.simulations = simulations_.load();
    out.stats.configs = layouts_.size();
    out.stats.schedules = groups_.size();
    finalize_plan(out);
    return out;
  }

  const ModelConfigData& base_;
  const PlanOptions& opt_;
  const std::vector<std::string> set_paths_;  // of opt_.sets: errors under them point at --set
  PlanSpec spec_;
  std::vector<Variant> variants_;
  std::vector<PlanCandidate> all_;
  std::vector<std::uint64_t> mine_;  // candidate ids of this shard; slot i holds mine_[i]
  std::vector<Outcome> outcomes_;
  std::vector<Layout> layouts_;
  std::map<LayoutKey, std::size_t> layout_of_;
  std::vector<std::size_t> slot_layout_;  // slot -> layout index (candidates that reach a layout)
  std::vector<Group> groups_;
  std::atomic<std::uint64_t> done_{0};
  std::atomic<std::uint64_t> simulated_{0};
  std::atomic<std::uint64_t> simulations_{0};
  std::uint64_t total_ = 0;
};

}  // namespace

PlanResult run_plan(const ModelConfig& cfg, const PlanOptions& opt) {
  PPSIM_CHECK(cfg.data != nullptr, "{}", "empty ModelConfig");
  if (opt.shard_count < 1 || opt.shard_index < 0 || opt.shard_index >= opt.shard_count)
    throw InputError(fmt::format("--shard {}/{}: expected i/n with 0 <= i < n", opt.shard_index, opt.shard_count), {}, kExitUsage);
  Planner p(*cfg.data, opt);
  return p.run();
}

void finalize_plan(PlanResult& r) {
  for (VariantResult& v : r.variants) {
    std::sort(v.feasible.begin(), v.feasible.end(),
              [&](const PlanRow& a, const PlanRow& b) { return ranks_before(a, b, r.objective); });
    v.ranking.assign(v.feasible.begin(), v.feasible.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(
                                                                     v.feasible.size(), static_cast<std::size_t>(r.top_k))));
    v.best_per_schedule.clear();
    for (const PlanRow& row : v.feasible) {
      bool seen = false;
      for (const PlanRow& b : v.best_per_schedule) seen |= b.schedule == row.schedule;
      if (!seen) v.best_per_schedule.push_back(row);
    }
  }
}

PlanResult merge_plans(std::vector<PlanResult> shards, const std::vector<std::string>& names, int top_k) {
  if (shards.empty()) throw InputError("--merge needs at least one shard file", {}, kExitUsage);
  auto name = [&](std::size_t i) { return i < names.size() ? names[i] : fmt::format("input {}", i); };
  const int n = shards.front().shard_count;
  std::vector<int> seen(static_cast<std::size_t>(std::max(1, n)), -1);
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const PlanResult& s = shards[i];
    const SourceLoc at{name(i), 0, 0};
    if (s.fingerprint != shards.front().fingerprint)
      throw InputError(at, fmt::format("this shard comes from another config or plan than '{}' (fingerprint {} vs {})", name(0),
                                       s.fingerprint, shards.front().fingerprint));
    if (s.shard_count != n)
      throw InputError(at, fmt::format("shard {}/{} does not belong with '{}' (shard .../{})", s.shard_index, s.shard_count, name(0), n));
    if (s.variants.size() != shards.front().variants.size())
      throw InputError(at, "this shard has other what-if variants than the first");
    int& prev = seen[static_cast<std::size_t>(s.shard_index)];
    if (prev >= 0)
      throw InputError(at, fmt::format("shard {}/{} is given twice (also '{}')", s.shard_index, n, name(static_cast<std::size_t>(prev))));
    prev = static_cast<int>(i);
  }
  for (int k = 0; k < n; ++k)
    if (seen[static_cast<std::size_t>(k)] < 0)
      throw InputError(fmt::format("shard {}/{} is missing: merge needs all {} shards", k, n, n), {}, kExitInput);

  PlanResult out = std::move(shards.front());
  for (VariantResult& v : out.variants) {
    v.ranking.clear();
    v.best_per_schedule.clear();
  }
  for (std::size_t i = 1; i < shards.size(); ++i) {
    PlanResult& s = shards[i];
    out.stats.candidates += s.stats.candidates;
    out.stats.simulated += s.stats.simulated;
    out.stats.simulations += s.stats.simulations;
    out.stats.configs += s.stats.configs;
    out.stats.schedules += s.stats.schedules;
    for (std::size_t vi = 0; vi < out.variants.size(); ++vi) {
      VariantResult& a = out.variants[vi];
      VariantResult& b = s.variants[vi];
      if (a.name != b.name || a.candidates != b.candidates || a.rejected_by_schedule.size() != b.rejected_by_schedule.size())
        throw InputError(SourceLoc{name(i), 0, 0}, fmt::format("variant '{}' differs from the first shard's", b.name));
      a.evaluated += b.evaluated;
      for (int r = 0; r < kReasons; ++r) {
        Rejections& x = a.rejected[static_cast<std::size_t>(r)];
        const Rejections& y = b.rejected[static_cast<std::size_t>(r)];
        if (y.count > 0 && (x.count == 0 || y.example_id < x.example_id)) {
          x.example_id = y.example_id;
          x.example = y.example;
        }
        x.count += y.count;
      }
      if (b.nearest.any && b.nearest.before(a.nearest)) a.nearest = b.nearest;
      for (std::size_t f = 0; f < a.rejected_by_schedule.size(); ++f)
        for (int r = 0; r < kReasons; ++r)
          a.rejected_by_schedule[f].second[static_cast<std::size_t>(r)] += b.rejected_by_schedule[f].second[static_cast<std::size_t>(r)];
      a.feasible.insert(a.feasible.end(), std::make_move_iterator(b.feasible.begin()), std::make_move_iterator(b.feasible.end()));
      a.layout_sets.insert(b.layout_sets.begin(), b.layout_sets.end());
    }
  }
  for (const VariantResult& v : out.variants)
    if (v.evaluated != v.candidates)
      throw InputError(fmt::format("variant '{}': the shards evaluated {} of {} candidates", v.name, v.evaluated, v.candidates));
  out.shard_index = 0;
  out.shard_count = 1;
  if (top_k > 0) out.top_k = top_k;
  finalize_plan(out);
  return out;
}

}  // namespace ppsim
