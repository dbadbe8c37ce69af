// The invariant suite over every registered family: for P in 2..16 and many M, every legal
// request generates a schedule in which every op appears exactly once on the rank of its stage,
// the validator accepts it (acyclic), it exports to PyTorch CSV and imports back identically,
// and the simulated peak activations equal the family's stated memory formula.
#include <set>

#include "catch.h"
#include "schedules/notation.h"
#include "test_util.h"

using namespace ppsim;
using namespace ppsim::test;

namespace {

// Counts ops independently of the validator: for every (stage, mb), exactly one F and either
// one B or one I and one W, each on the stage's rank.
void check_every_op_once(const Schedule& s) {
  const int S = s.num_stages(), mbp = s.mb_per_pipe();
  std::vector<int> f(S * mbp), b(S * mbp), i(S * mbp), w(S * mbp);
  for (int r = 0; r < s.pp; ++r)
    for (const auto& a : s.ranks[r])
      for (int k = 0; k < a.size(); ++k) {
        const Op& op = a.op(k);
        REQUIRE(s.stage_rank[op.stage] == r);
        const int key = op.stage * mbp + op.microbatch;
        switch (op.kind) {
          case OpKind::F: ++f[key]; break;
          case OpKind::B: ++b[key]; break;
          case OpKind::I: ++i[key]; break;
          case OpKind::W: ++w[key]; break;
        }
      }
  for (int key = 0; key < S * mbp; ++key) {
    REQUIRE(f[key] == 1);
    REQUIRE(((b[key] == 1 && i[key] == 0 && w[key] == 0) || (b[key] == 0 && i[key] == 1 && w[key] == 1)));
  }
}

std::vector<int> legal_ms(const Family& fam, int p) {
  std::vector<int> out;
  for (int m : {1, 2, 3, p - 1, p, p + 1, 2 * p - 1, 2 * p, 2 * p + 2, 3 * p, 4 * p + 2, 5 * p}) {
    if (m < 1) continue;
    const ScheduleParams params = resolve_params(fam, ScheduleParams{p, m, 0, 0});
    if (fam.check(params).empty()) out.push_back(m);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

TEST_CASE("every family: every op once, acyclic, round-trips, memory as stated", "[schedules][invariants]") {
  const SliceCosts c = unit_costs(1, 2, 1, 3);
  for (const auto& fam : families()) {
    for (int p = 2; p <= 16; ++p) {
      for (int m : legal_ms(fam, p)) {
        INFO(fam.name << " P=" << p << " M=" << m);
        const ScheduleParams params = resolve_params(fam, ScheduleParams{p, m, 0, 0});
        const Schedule s = make_schedule(fam.name, params);
        REQUIRE(s.pp == p);
        REQUIRE(s.microbatches == m);
        check_every_op_once(s);
        // Round trip through PyTorch's CSV.
        const Schedule back = import_csv(schedule_to_csv(s), "roundtrip.csv", p, m);
        REQUIRE(back.num_pipes == s.num_pipes);
        REQUIRE(back.stage_rank == s.stage_rank);
        REQUIRE(back.ranks == s.ranks);
        // Memory: simulated peak activations per rank against the stated formula.
        const SimResult r = simulate(s, uniform_costs(s.stages_per_pipe, c));
        for (int rank = 0; rank < p; ++rank) {
          const int stated = fam.published_activations(params, rank);
          if (stated < 0) continue;
          INFO("rank " << rank);
          REQUIRE(r.ranks[rank].peak_activations == stated);
        }
      }
    }
  }
}

TEST_CASE("all nine families generate and validate for legal requests up to P = 64", "[schedules][invariants]") {
  for (const auto& fam : families()) {
    for (int p : {24, 32, 64}) {
      for (int m : {2 * p, 4 * p}) {
        const ScheduleParams params = resolve_params(fam, ScheduleParams{p, m, 0, 0});
        if (!fam.check(params).empty()) continue;
        INFO(fam.name << " P=" << p << " M=" << m);
        const Schedule s = make_schedule(fam.name, params);
        check_every_op_once(s);
      }
    }
  }
}

TEST_CASE("the registry has the nine families with aliases", "[schedules]") {
  std::set<std::string> names, beside;
  for (const auto& f : families()) (family_in_all(f) ? names : beside).insert(f.name);
  REQUIRE(names == std::set<std::string>{"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zbv", "chimera",
                                         "dualpipe", "dualpipev"});
  // Beside them, run when named: Megatron's EP all-to-all overlap.
  REQUIRE(beside == std::set<std::string>{"interleaved-1f1b-overlap"});
  REQUIRE(find_family("combined-1f1b").name == "interleaved-1f1b-overlap");
  REQUIRE(find_family("DualPipeV").name == "dualpipev");
  REQUIRE(find_family("zb-v").name == "zbv");
}

TEST_CASE("interleaved 1F1B's group refusals say what PyTorch's ScheduleInterleaved1F1B runs", "[schedules]") {
  // PyTorch: rounds = max(1, M // P), micro-batches per round = M // rounds. P 4, M 10: 2 rounds of
  // 5, which ppsim generates with --group-size 5; M 3 < P: one round of 3, which it does not.
  auto refusal = [](int pp, int m) {
    ScheduleParams p;
    p.pp = pp;
    p.microbatches = m;
    p.vpp = 2;
    try {
      (void)make_schedule("ScheduleInterleaved1F1B", p);
    } catch (const InputError& e) {
      return e.message();
    }
    return std::string("no error");
  };
  CHECK(refusal(4, 10) ==
        "interleaved-1f1b needs M mod G = 0 or >= P (P=4, G=4), got M=10 (M mod G = 2); PyTorch's "
        "ScheduleInterleaved1F1B runs rounds of 5: --group-size 5");
  CHECK_THAT(refusal(4, 3), PPSIM_CONTAINS("runs M < P in one round of 3, which ppsim generates only from its CSV"));
  ScheduleParams five;
  five.pp = 4;
  five.microbatches = 10;
  five.vpp = 2;
  five.group_size = 5;
  CHECK(make_schedule("interleaved-1f1b", five).microbatches == 10);
}
