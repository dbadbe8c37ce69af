#include "schedules/registry.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "schedules/generators.h"
#include "schedules/validator.h"

namespace ppsim {

Limits& limits() {
  static Limits l;
  return l;
}

namespace {

std::string ok() { return {}; }

PublishedBubble bubble(Time value, bool holds, std::string formula, std::string condition, bool own_span = false) {
  PublishedBubble b;
  b.available = true;
  b.value = value;
  b.holds = holds;
  b.formula = std::move(formula);
  b.condition = std::move(condition);
  b.own_span = own_span;
  return b;
}

// ZB-H2's and ZB-V's published bubble: zero within each rank's own span, exact when F = b = W
// (per chunk for ZB-V) and M >= 2P-1.
PublishedBubble zero_own_span(const ScheduleParams& p, const UniformTimes& t, std::string condition) {
  const Time b = t.input_grad();
  return bubble(0, t.f == b && b == t.w && p.microbatches >= 2 * p.pp - 1, "0 (own span)", std::move(condition), true);
}

// What PyTorch's ScheduleInterleaved1F1B does with these P and M: its rounds of M // max(1, M // P)
// micro-batches (--group-size, where ppsim can generate it), or M < P in one round, which it cannot.
std::string torch_group_hint(const ScheduleParams& p) {
  const int rounds = std::max(1, p.microbatches / std::max(1, p.pp));
  if (p.microbatches % rounds != 0) return {};
  const int g = p.microbatches / rounds;
  if (g >= p.pp && g != p.group_size && p.microbatches % g == 0)
    return fmt::format("; PyTorch's ScheduleInterleaved1F1B runs rounds of {}: --group-size {}", g, g);
  if (g < p.pp)
    return fmt::format(
        "; PyTorch's ScheduleInterleaved1F1B runs M < P in one round of {}, which ppsim generates "
        "only from its CSV (--schedule-file)",
        g);
  return {};
}

// The interleaved families' micro-batch groups: P <= G <= M, and M mod G either 0 or >= P.
std::string group_check(const char* family, const ScheduleParams& p) {
  if (p.group_size < p.pp || p.group_size > p.microbatches)
    return fmt::format("{} needs P <= G <= M (P={}, M={}), got G={}{}", family, p.pp, p.microbatches, p.group_size,
                       torch_group_hint(p));
  const int rem = p.microbatches % p.group_size;
  if (rem != 0 && rem < p.pp)
    return fmt::format("{} needs M mod G = 0 or >= P (P={}, G={}), got M={} (M mod G = {}){}", family, p.pp,
                       p.group_size, p.microbatches, rem, torch_group_hint(p));
  return ok();
}

// Megatron's EP all-to-all overlap (interleaved_1f1b.cc): interleaved 1F1B's checks, no published bubble.
Family interleaved_overlap_family() {
  return Family{"interleaved-1f1b-overlap",
                {"combined-1f1b", "interleaved-1f1b-a2a", "ep-overlap", "a2a-overlap"},
                "Megatron's EP all-to-all overlap: interleaved 1F1B, one more warm-up, each steady F and B as a pair",
                "v >= 2 (v = 1 with P = 1), P <= G <= M, M mod G = 0 or >= P (G defaults to P)",
                "min(2(P-1-r) + (v-1)G + 2, vM) chunks",
                1,
                2,
                [](const ScheduleParams& p) -> std::string {
                  if (p.vpp == 1 && p.pp == 1) return ok();
                  if (p.vpp < 2)
                    return fmt::format(
                        "interleaved-1f1b-overlap needs v >= 2 chunks per rank with P > 1 (Megatron overlaps "
                        "the all-to-all only with virtual stages), got v={}",
                        p.vpp);
                  return group_check("interleaved-1f1b-overlap", p);
                },
                generate_interleaved_1f1b_overlap,
                [](const ScheduleParams&, const UniformTimes&) { return PublishedBubble{}; },  // none published
                [](const ScheduleParams& p, int r) {
                  return std::min(2 * (p.pp - 1 - r) + (p.vpp - 1) * p.group_size + 2, p.vpp * p.microbatches);
                }};
}

std::vector<Family> make_families() {
  std::vector<Family> v;
  v.push_back(Family{
      "gpipe", {"GPipe"}, "all forwards, then all backwards",
      "P >= 1, M >= 1", "M", 1, 1,
      [](const ScheduleParams&) { return ok(); },
      generate_gpipe,
      [](const ScheduleParams& p, const UniformTimes& t) {
        return bubble((p.pp - 1) * (t.f + t.b), true, "(P-1)(F+B)", "always");
      },
      [](const ScheduleParams& p, int) { return p.microbatches; }});
  v.push_back(Family{
      "1f1b", {"1F1B", "one-f-one-b", "megatron"}, "Megatron 1F1B: warm-up, one forward one backward, cool-down",
      "P >= 1, M >= 1", "min(P-r, M)", 1, 1,
      [](const ScheduleParams&) { return ok(); },
      generate_1f1b,
      [](const ScheduleParams& p, const UniformTimes& t) {
        return bubble((p.pp - 1) * (t.f + t.b), true, "(P-1)(F+B)", "always");
      },
      [](const ScheduleParams& p, int r) { return std::min(p.pp - r, p.microbatches); }});
  v.push_back(Family{
      "interleaved-1f1b", {"interleaved", "i1f1b", "vpp", "interleaved1f1b"},
      "Megatron virtual pipeline: v chunks per rank, micro-batches in groups of G",
      "v >= 2, P <= G <= M, M mod G = 0 or >= P (G defaults to P)",
      "min(2(P-1-r) + (v-1)G + 1, vM) chunks", 1, 2,
      [](const ScheduleParams& p) -> std::string {
        if (p.vpp < 2) return fmt::format("interleaved-1f1b needs v >= 2 chunks per rank, got v={}", p.vpp);
        return group_check("interleaved-1f1b", p);
      },
      generate_interleaved_1f1b,
      [](const ScheduleParams& p, const UniformTimes& t) {
        return bubble((p.pp - 1) * (t.f + t.b), true, "(P-1)(f+b), per-chunk f, b", "G valid");
      },
      [](const ScheduleParams& p, int r) {
        return std::min(2 * (p.pp - 1 - r) + (p.vpp - 1) * p.group_size + 1, p.vpp * p.microbatches);
      }});
  v.push_back(interleaved_overlap_family());
  v.push_back(Family{
      "zb-h1", {"zbh1", "zb1"}, "Zero Bubble H1: 1F1B with W deferred, memory as 1F1B",
      "P >= 1, M >= 1", "min(P, M) (W deferral keeps up to P live on every rank)", 1, 1,
      [](const ScheduleParams&) { return ok(); },
      generate_zb_h1,
      [](const ScheduleParams& p, const UniformTimes& t) {
        const Time b = t.input_grad();
        return bubble((p.pp - 1) * (t.f + t.b - 2 * t.w), t.w <= std::min(t.f, b), "(P-1)(F+B-2W)",
                      "W <= min(F, b)");
      },
      [](const ScheduleParams& p, int) { return std::min(p.pp, p.microbatches); }});
  v.push_back(Family{
      "zb-h2",
      {"zbh2", "zb2"},
      "Zero Bubble H2: extra warm-up forwards, W fills the drain",
      "P >= 1, M >= 1",
      "min(2P-1, M) on every rank",
      1,
      1,
      [](const ScheduleParams&) { return ok(); },
      generate_zb_h2,
      [](const ScheduleParams& p, const UniformTimes& t) { return zero_own_span(p, t, "F = b = W and M >= 2P-1"); },
      [](const ScheduleParams& p, int) { return std::min(2 * p.pp - 1, p.microbatches); }});
  v.push_back(Family{"zbv",
                     {"zb-v", "zero-bubble-v"},
                     "Zero Bubble V: two chunks per rank in a V, handcrafted",
                     "P >= 1, M >= 1",
                     "2P chunks (M >= 2P-1)",
                     1,
                     2,
                     [](const ScheduleParams&) { return ok(); },
                     generate_zbv,
                     [](const ScheduleParams& p, const UniformTimes& t) {
                       return zero_own_span(p, t, "F = b = W per chunk and M >= 2P-1");
                     },
                     [](const ScheduleParams& p, int) { return p.microbatches >= 2 * p.pp - 1 ? 2 * p.pp : -1; }});
  v.push_back(Family{
      "chimera", {"Chimera"}, "two pipelines in opposite directions, slot-ordered (Chimera, SC'21)",
      "P even, M mod P = 0", "P/2 + 1 + min(r, P-1-r) stages", 2, 1,
      [](const ScheduleParams& p) -> std::string {
        if (p.pp % 2 != 0) return fmt::format("chimera needs an even number of ranks, got P={}", p.pp);
        if (p.microbatches % p.pp != 0)
          return fmt::format("chimera needs micro-batches divisible by P (P={}), got {}", p.pp, p.microbatches);
        return ok();
      },
      generate_chimera,
      [](const ScheduleParams& p, const UniformTimes& t) {
        return bubble((p.pp - 2) * t.f, t.f == t.b, "(P-2) slots", "F = B");
      },
      [](const ScheduleParams& p, int r) { return p.pp / 2 + 1 + std::min(r, p.pp - 1 - r); }});
  v.push_back(Family{
      "dualpipe", {"DualPipe", "dual-pipe"}, "DeepSeek-V3 DualPipe: both ends feed, F&B pairs overlap",
      "P even, M even and >= 2P", "P+1", 2, 1,
      [](const ScheduleParams& p) -> std::string {
        if (p.pp % 2 != 0) return fmt::format("dualpipe needs an even number of ranks, got P={}", p.pp);
        if (p.microbatches % 2 != 0 || p.microbatches < 2 * p.pp)
          return fmt::format("dualpipe needs an even number of micro-batches >= 2*P (P={}), got {}", p.pp,
                             p.microbatches);
        return ok();
      },
      generate_dualpipe,
      [](const ScheduleParams& p, const UniformTimes& t) {
        const Time b = t.input_grad();
        return bubble((p.pp / 2 - 1) * (t.fb + t.b - 3 * t.w), t.f == b && t.w <= b, "(PP/2-1)(F&B+B-3W)",
                      "F = b and W <= b (worst rank)");
      },
      [](const ScheduleParams& p, int) { return p.pp + 1; }});
  v.push_back(Family{
      "dualpipev", {"DualPipeV", "dualpipe-v", "cut-in-half"}, "DualPipe cut in half: one pipe, two chunks per rank in a V",
      "M >= 2P", "2P+1 chunks", 1, 2,
      [](const ScheduleParams& p) -> std::string {
        if (p.microbatches < 2 * p.pp)
          return fmt::format("dualpipev needs micro-batches >= 2*P (P={}), got {}", p.pp, p.microbatches);
        return ok();
      },
      generate_dualpipev,
      [](const ScheduleParams& p, const UniformTimes& t) {
        const Time b = t.input_grad();
        return bubble((p.pp - 1) * (t.fb + t.b - 3 * t.w), t.f == b && t.w <= b,
                      "(PP/2-1)(F&B+B-3W), PP = 2P, per-chunk", "F = b and W <= b (worst rank)");
      },
      [](const ScheduleParams& p, int) { return 2 * p.pp + 1; }});
  return v;
}

}  // namespace

const std::vector<Family>& families() {
  static const std::vector<Family> f = make_families();
  return f;
}

namespace {

// torch.distributed.pipelining's names (its get_schedule_class keys and class names, lower case):
// accepted as aliases; the two ppsim has no generator for are refused with what to do instead.
struct TorchName {
  const char* torch;
  const char* family;  // nullptr: no generator in ppsim
};
constexpr TorchName kTorchNames[] = {
    {"schedule1f1b", "1f1b"},
    {"schedulegpipe", "gpipe"},
    {"scheduleinterleaved1f1b", "interleaved-1f1b"},
    {"interleaved1f1b", "interleaved-1f1b"},
    {"schedulezbvzerobubble", "zbv"},
    {"zbvzerobubble", "zbv"},
    {"scheduledualpipev", "dualpipev"},
    {"scheduleloopedbfs", nullptr},
    {"loopedbfs", nullptr},
    {"scheduleinterleavedzerobubble", nullptr},
    {"interleavedzerobubble", nullptr},
};

}  // namespace

const Family& find_family(const std::string& name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const TorchName& t : kTorchNames) {
    if (lower != t.torch) continue;
    if (!t.family)
      throw InputError(fmt::format("'{}' (PyTorch's) has no generator in ppsim: import its pipeline_order instead "
                                   "(ppsim.Schedule.from_pipeline_order, or its CSV with --schedule-file)",
                                   name),
                       {}, kExitUsage);
    lower = t.family;
  }
  std::vector<std::string> names;
  for (const auto& f : families()) {
    if (f.name == lower) return f;
    for (const auto& a : f.aliases) {
      std::string al;
      for (char c : a) al += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (al == lower) return f;
    }
    names.push_back(f.name);
  }
  throw InputError(fmt::format("unknown schedule '{}'", name), closest_match(lower, names), kExitUsage);
}

bool family_in_all(const Family& f) { return f.name != "interleaved-1f1b-overlap"; }

bool family_takes_vpp(const std::string& name) {
  return name == "interleaved-1f1b" || name == "interleaved-1f1b-overlap";
}

ScheduleParams resolve_params(const Family& fam, ScheduleParams p) {
  if (p.vpp == 0) p.vpp = fam.default_vpp;
  if (!family_takes_vpp(fam.name)) p.vpp = fam.default_vpp;
  if (p.group_size == 0) p.group_size = p.pp;
  return p;
}

Schedule make_schedule(const std::string& name, const ScheduleParams& params) {
  const Family& fam = find_family(name);
  const ScheduleParams p = resolve_params(fam, params);
  const Limits& lim = limits();
  if (p.pp < 1) throw InputError(fmt::format("--pp: P must be >= 1, got {}", p.pp), {}, kExitUsage);
  if (p.microbatches < 1) throw InputError(fmt::format("--microbatches: M must be >= 1, got {}", p.microbatches), {}, kExitUsage);
  if (p.vpp < 1 || p.vpp > kMaxVpp)
    throw InputError(fmt::format("chunks per rank v (--vpp, parallel.vpp) must be in 1..{}, got {}", kMaxVpp, p.vpp),
                     {}, kExitUsage);
  if (p.pp > lim.max_pp)
    throw InputError(fmt::format("P={} is over the limit of {} ranks (docs/ROBUSTNESS.md)", p.pp, lim.max_pp),
                     {}, kExitLimit);
  if (p.microbatches > lim.max_microbatches)
    throw InputError(fmt::format("M={} is over the limit of {} micro-batches (docs/ROBUSTNESS.md)", p.microbatches, lim.max_microbatches), {},
                     kExitLimit);
  // Every family runs at most 3 ops (F, I, W) per stage and micro-batch, and 2v stages per rank.
  const long long est = 3LL * p.pp * std::max(p.vpp, 2) * static_cast<long long>(p.microbatches);
  if (est > lim.max_ops)
    throw InputError(fmt::format("{} with P={}, M={} would generate about {} ops, over the limit of {} (raise it with --max-ops)",
                                 fam.name, p.pp, p.microbatches, est, lim.max_ops),
                     {}, kExitLimit);
  if (std::string why = fam.check(p); !why.empty()) throw InputError(why);
  Schedule s = fam.generate(p);
  s.family = fam.name;
  s.parameter_copies = fam.parameter_copies;
  validate_schedule(s);
  return s;
}

}  // namespace ppsim
