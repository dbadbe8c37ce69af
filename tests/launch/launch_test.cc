// Multi-process launch without MPI or a GPU: reading the launcher's environment, the order of
// messages on each link between two ranks, and a measured Timeline split into per-process
// shares and merged back.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "catch.h"
#include "core/error.h"
#include "launch/launch.h"
#include "schedules/registry.h"
#include "sim/engine.h"
#include "shares.h"
#include "test_util.h"

using namespace ppsim;
using namespace ppsim::launch;
using ppsim::launch::test::simulated;
using ppsim::launch::test::split;

namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* k) -> const char* {
    auto it = shared->find(k);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

// Where `op` sits in its rank's list: (action index, op index within the action).
std::pair<int, int> position_of(const Schedule& s, int rank, const Op& op) {
  const auto& list = s.ranks[static_cast<std::size_t>(rank)];
  for (std::size_t i = 0; i < list.size(); ++i)
    for (int k = 0; k < list[i].size(); ++k)
      if (list[i].op(k) == op) return {static_cast<int>(i), k};
  return {-1, -1};
}

}  // namespace

TEST_CASE("detect_launch reads OpenMPI, srun and PMI environments", "[launch]") {
  const LaunchEnv none = detect_launch(env_of({}));
  CHECK(none.launcher.empty());
  CHECK(none.size == 1);
  CHECK_FALSE(none.multi());

  const LaunchEnv ompi = detect_launch(env_of(
      {{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}));
  CHECK(ompi.launcher == "openmpi");
  CHECK(ompi.size == 4);
  CHECK(ompi.rank == 3);
  CHECK(ompi.local_rank == 1);
  CHECK(ompi.multi());

  const LaunchEnv srun = detect_launch(
      env_of({{"SLURM_STEP_NUM_TASKS", "8"}, {"SLURM_PROCID", "5"}, {"SLURM_LOCALID", "1"}, {"SLURM_NTASKS", "8"}}));
  CHECK(srun.launcher == "srun");
  CHECK(srun.size == 8);
  CHECK(srun.rank == 5);
  CHECK(srun.local_rank == 1);

  // An sbatch script (no srun step) is one process even though Slurm's variables are set.
  const LaunchEnv batch = detect_launch(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}}));
  CHECK(batch.launcher.empty());
  CHECK(batch.size == 1);

  const LaunchEnv pmi = detect_launch(env_of({{"PMI_SIZE", "2"}, {"PMI_RANK", "1"}}));
  CHECK(pmi.launcher == "pmi");
  CHECK(pmi.rank == 1);
  CHECK(pmi.local_rank == 0);

  // Malformed or inconsistent numbers are not a launch.
  CHECK(detect_launch(env_of({{"OMPI_COMM_WORLD_SIZE", "2x"}, {"OMPI_COMM_WORLD_RANK", "0"}})).launcher.empty());
  CHECK(detect_launch(env_of({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "2"}})).launcher.empty());
  CHECK(detect_launch(env_of({{"OMPI_COMM_WORLD_SIZE", "-2"}, {"OMPI_COMM_WORLD_RANK", "0"}})).launcher.empty());
  CHECK(detect_launch(env_of({{"PMIX_RANK", "0"}})).launcher == "pmix");
}

TEST_CASE("launch_problem: several processes need MPI to work together", "[launch]") {
  const LaunchEnv alone;
  CHECK(launch_problem(alone, false).empty());
  CHECK(launch_problem(alone, true).empty());
  LaunchEnv two;
  two.launcher = "srun";
  two.size = 2;
  two.rank = 1;
  CHECK(launch_problem(two, true).empty());
  CHECK(launch_problem(two, false) == "started by srun as process 1 of 2, but this ppsim was built without MPI");
  LaunchEnv one = two;
  one.size = 1;
  one.rank = 0;
  CHECK(launch_problem(one, false).empty());  // mpirun -np 1: a single process, MPI or not
}

TEST_CASE("process_of_rank deals ranks round-robin, as ranks share GPUs", "[launch]") {
  CHECK(process_of_rank(5, 1) == 0);
  CHECK(process_of_rank(5, 2) == 1);
  CHECK(process_of_rank(6, 4) == 2);
  CHECK(process_of_rank(3, 4) == 3);
}

TEST_CASE("link_sequences: 1F1B P=2 M=3 by hand", "[launch]") {
  const Schedule s = make_schedule("1f1b", ScheduleParams{2, 3, 0, 0});
  const auto links = link_sequences(s);
  REQUIRE(links.size() == 2);
  // rank 0 (stage 0) sends the activations of micro-batches 0, 1, 2 into stage 1, in its F order;
  // rank 1 (stage 1) sends their gradients back into stage 0 in its B order.
  const std::vector<MsgKey> down{{0, 1, 0}, {0, 1, 1}, {0, 1, 2}};
  const std::vector<MsgKey> up{{1, 0, 0}, {1, 0, 1}, {1, 0, 2}};
  CHECK(links.at({0, 1}) == down);
  CHECK(links.at({1, 0}) == up);
}

TEST_CASE("link_sequences: every cross-rank message once, in the producer's action order", "[launch]") {
  for (const char* fam : {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zbv", "chimera", "dualpipe", "dualpipev"}) {
    for (int pp : {2, 4}) {
      const Schedule s = make_schedule(fam, resolve_params(find_family(fam), ScheduleParams{pp, 2 * pp, 0, 0}));
      INFO(fam << " P=" << pp);
      // How many messages cross ranks, by hand: 2 per micro-batch per boundary between two
      // consecutive stages on different ranks. Linear and bidirectional layouts: P-1 boundaries per
      // pipe (each pipe carries M / pipes micro-batches); interleaved: every one of the v*P-1;
      // V-shaped: 2P-1 boundaries, of which the turn (stage P-1 to P, both on rank P-1) is local.
      const std::string f = fam;
      std::size_t expected = 0;
      if (f == "interleaved") expected = static_cast<std::size_t>(2 * s.microbatches * (s.num_stages() - 1));
      else if (f == "zbv" || f == "dualpipev") expected = static_cast<std::size_t>(2 * s.microbatches * (2 * pp - 2));
      else expected = static_cast<std::size_t>(2 * s.microbatches * (pp - 1));
      std::set<std::tuple<int, int, int>> got;
      for (const auto& [pair, order] : link_sequences(s)) {
        const auto [src, dst] = pair;
        CHECK(src != dst);
        std::pair<int, int> last{-1, -1};
        for (const MsgKey& k : order) {
          CHECK(got.insert({k.grad, k.stage, k.microbatch}).second);
          CHECK(consumer_rank(s, k) == dst);
          CHECK(producer_rank(s, k) == src);
          const int pst = k.grad ? k.stage + 1 : k.stage - 1;
          auto pos = position_of(s, src, Op{OpKind::F, pst, k.microbatch});
          if (k.grad) {
            pos = position_of(s, src, Op{OpKind::I, pst, k.microbatch});
            if (pos.first < 0) pos = position_of(s, src, Op{OpKind::B, pst, k.microbatch});
          }
          REQUIRE(pos.first >= 0);
          CHECK(pos > last);  // strictly after the previous message's producer
          last = pos;
        }
      }
      CHECK(got.size() == expected);
    }
  }
}

namespace {

auto transfer_tuple(const Transfer& t) {
  return std::make_tuple(t.start, t.end, t.src_rank, t.dst_rank, static_cast<int>(t.producer.kind), t.producer.stage,
                         t.producer.microbatch, t.bytes);
}

}  // namespace

TEST_CASE("a Timeline split into process shares merges back whole", "[launch]") {
  const Schedule s = make_schedule("dualpipe", ScheduleParams{4, 8, 0, 0});
  const Timeline whole = simulated(s);
  REQUIRE(!whole.transfers.empty());
  // The merged Timeline lists intervals rank by rank, each rank's in time order.
  std::vector<Interval> by_rank = whole.intervals;
  std::stable_sort(by_rank.begin(), by_rank.end(), [](const Interval& x, const Interval& y) {
    return x.rank != y.rank ? x.rank < y.rank : x.start < y.start;
  });
  for (int w : {1, 2, 3, 4}) {
    INFO(w << " processes");
    std::vector<std::string> texts;
    std::size_t halves = 0;
    for (const TimelinePart& p : split(whole, s, w)) {
      texts.push_back(encode_part(p, s));
      halves += p.sends.size();
    }
    if (w > 1) CHECK(halves > 0);
    const Timeline m = merge_parts(texts, s);
    CHECK(m.pp == whole.pp);
    CHECK(m.end == whole.end);
    REQUIRE(m.intervals.size() == by_rank.size());
    for (std::size_t i = 0; i < m.intervals.size(); ++i) {
      CHECK(m.intervals[i].rank == by_rank[i].rank);
      CHECK(m.intervals[i].start == by_rank[i].start);
      CHECK(m.intervals[i].end == by_rank[i].end);
      CHECK(m.intervals[i].action == by_rank[i].action);
    }
    std::multiset<decltype(transfer_tuple(whole.transfers[0]))> a, b;
    for (const auto& t : whole.transfers) a.insert(transfer_tuple(t));
    for (const auto& t : m.transfers) b.insert(transfer_tuple(t));
    CHECK(a == b);
    for (int r = 0; r < s.pp; ++r) {
      const auto& x = m.activations[static_cast<std::size_t>(r)];
      const auto& y = whole.activations[static_cast<std::size_t>(r)];
      REQUIRE(x.size() == y.size());
      for (std::size_t i = 0; i < x.size(); ++i) {
        CHECK(x[i].t == y[i].t);
        CHECK(x[i].activations == y[i].activations);
      }
    }
  }
}

TEST_CASE("merge_parts refuses shares that do not fit together", "[launch]") {
  const Schedule s = make_schedule("1f1b", ScheduleParams{2, 3, 0, 0});
  const Timeline whole = simulated(s);
  auto parts = split(whole, s, 2);
  const std::string p0 = encode_part(parts[0], s), p1 = encode_part(parts[1], s);
  CHECK_NOTHROW(merge_parts({p0, p1}, s));
  auto fails_with = [&](const std::vector<std::string>& texts, const std::string& needle) {
    try {
      merge_parts(texts, s);
      FAIL("merged");
    } catch (const InputError& e) {
      INFO(e.message());
      CHECK(e.message().find(needle) != std::string::npos);
    }
  };
  fails_with({p0}, "no process replayed rank 1");
  fails_with({p0, p0, p1}, "replayed twice");
  fails_with({p0, "{\"ranks\": [1]}"}, "unreadable share");
  auto lost = parts[1];
  lost.receives.pop_back();
  fails_with({p0, encode_part(lost, s)}, "messages left");
  auto misnamed = parts[1];
  misnamed.receives.back().key.microbatch += 100;
  fails_with({p0, encode_part(misnamed, s)}, "never arrived");
  auto wrong = parts[0];
  std::swap(wrong.local.intervals[0], wrong.local.intervals[1]);  // out of action order
  CHECK_THROWS_AS(encode_part(wrong, s), InputError);
}

TEST_CASE("placement_problem: one GPU per process, at most one process per rank", "[launch]") {
  CHECK(placement_problem(2, 2, 2, 4).empty());
  CHECK(placement_problem(4, 2, 2, 4).empty());  // two nodes of two
  CHECK(placement_problem(2, 2, 1, 2) == "2 processes on this node but 1 GPU(s) visible: start one process per GPU");
  CHECK(placement_problem(4, 4, 8, 2) == "4 processes for 2 pipeline ranks: start at most one process per rank");
}

TEST_CASE("message_order: 1F1B P=2 M=2 by hand", "[launch]") {
  const Schedule s = make_schedule("1f1b", ScheduleParams{2, 2, 0, 0});
  // Rank 0: F0 F1 B0 B1 (warm-up of P-1 = 1 F, then 1F1B); rank 1: F0 B0 F1 B1.
  // Turn 1: rank 0 runs F0 (sends act 1/0), F1 (act 1/1), then waits for grad 0/0;
  //         rank 1 runs F0, B0 (grad 0/0), F1, B1 (grad 0/1): everything it needs is there.
  // Turn 2: rank 0 runs B0, B1 (stage 0 sends nothing back).
  const std::vector<MsgKey> expected{{0, 1, 0}, {0, 1, 1}, {1, 0, 0}, {1, 0, 1}};
  CHECK(message_order(s) == expected);
}

TEST_CASE("message_order: every cross-rank message once, after its producer's inputs, links in sender order",
          "[launch]") {
  for (const char* fam : {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zbv", "chimera", "dualpipe", "dualpipev"}) {
    for (int pp : {2, 4, 8}) {
      const Schedule s = make_schedule(fam, resolve_params(find_family(fam), ScheduleParams{pp, 2 * pp, 0, 0}));
      INFO(fam << " P=" << pp);
      const std::vector<MsgKey> order = message_order(s);
      std::map<MsgKey, std::size_t> at;
      for (std::size_t i = 0; i < order.size(); ++i) CHECK(at.emplace(order[i], i).second);
      // The same messages as the links carry, and on each link in the sender's order.
      std::size_t on_links = 0;
      for (const auto& [pair, seq] : link_sequences(s)) {
        on_links += seq.size();
        for (std::size_t k = 1; k < seq.size(); ++k) CHECK(at.at(seq[k - 1]) < at.at(seq[k]));
      }
      CHECK(order.size() == on_links);
      // Causality: a message made by an action on rank r comes after every cross-rank message
      // that r consumed in that action or before it.
      for (int r = 0; r < s.pp; ++r) {
        std::size_t latest_in = 0;
        bool any_in = false;
        for (const Action& a : s.ranks[static_cast<std::size_t>(r)]) {
          for (int k = 0; k < a.size(); ++k) {
            const Op& op = a.op(k);
            MsgKey in;
            bool has = false;
            if (op.kind == OpKind::F && !s.is_first_stage(op.stage)) in = MsgKey{0, op.stage, op.microbatch}, has = true;
            if ((op.kind == OpKind::I || op.kind == OpKind::B) && !s.is_last_stage(op.stage))
              in = MsgKey{1, op.stage, op.microbatch}, has = true;
            if (has && at.count(in)) latest_in = std::max(latest_in, at.at(in)), any_in = true;
          }
          for (int k = 0; k < a.size(); ++k)
            if (MsgKey out; output_message(s, a.op(k), out) && at.count(out) && any_in) CHECK(at.at(out) > latest_in);
        }
      }
    }
  }
}

TEST_CASE("message_order refuses a schedule that waits for a message nobody sends", "[launch]") {
  Schedule s = make_schedule("1f1b", ScheduleParams{2, 2, 0, 0});
  // Rank 0 never runs F of micro-batch 1: rank 1's F1 waits forever.
  auto& r0 = s.ranks[0];
  r0.erase(std::remove_if(r0.begin(), r0.end(),
                          [](const Action& a) { return a.first.kind == OpKind::F && a.first.microbatch == 1; }),
           r0.end());
  CHECK_THROWS_AS(message_order(s), InputError);
}

TEST_CASE("choose_transport: auto by where the peers are; impossible choices refused", "[launch]") {
  CHECK(choose_transport("auto", 1, 1) == TransportKind::Peer);
  CHECK(choose_transport("auto", 2, 2) == TransportKind::Ipc);   // both processes on this host
  CHECK(choose_transport("auto", 4, 2) == TransportKind::Nccl);  // two of four here: several hosts
  CHECK(choose_transport("nccl", 1, 1) == TransportKind::Nccl);  // for comparison, on one host too
  CHECK(choose_transport("peer", 1, 1) == TransportKind::Peer);
  CHECK(choose_transport("ipc", 2, 2) == TransportKind::Ipc);
  auto code_of = [](const std::string& req, int procs, int local) {
    try {
      (void)choose_transport(req, procs, local);
    } catch (const InputError& e) {
      return std::make_pair(e.exit_code(), e.one_line());
    }
    return std::make_pair(0, std::string());
  };
  CHECK(code_of("peer", 2, 2).first == kExitUsage);
  CHECK(code_of("peer", 2, 2).second.find("did you mean '--transport ipc'") != std::string::npos);
  CHECK(code_of("ipc", 1, 1).first == kExitUsage);
  CHECK(code_of("ipc", 4, 2).second.find("did you mean '--transport nccl'") != std::string::npos);
  CHECK(code_of("pairs", 1, 1).first == kExitUsage);
  CHECK(std::string(transport_name(TransportKind::Ipc)) == "ipc");
}
