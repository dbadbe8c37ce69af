// Launch environment, message order per link, and Timeline shares (see launch.h).
#include "launch/launch.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "core/enum_names.h"
#include "core/error.h"

namespace ppsim::launch {

namespace {

// A non-negative decimal integer, or -1.
int read_int(const char* s) {
  if (!s || !*s) return -1;
  int v = 0;
  const char* end = s + std::strlen(s);
  const auto [p, ec] = std::from_chars(s, end, v);
  return ec == std::errc() && p == end && v >= 0 ? v : -1;
}

}  // namespace

LaunchEnv detect_launch(const EnvLookup& lookup) {
  const EnvLookup get = lookup ? lookup : EnvLookup([](const char* k) -> const char* { return std::getenv(k); });
  // name, size, rank, local rank variables; the first launcher whose size and rank both read wins.
  struct Vars {
    const char* name;
    const char* size;
    const char* rank;
    const char* local;
  };
  static constexpr Vars kinds[] = {
      {"openmpi", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"srun", "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_LOCALID"},  // set by srun, not by sbatch
      {"pmi", "PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID"},
  };
  LaunchEnv e;
  for (const Vars& v : kinds) {
    const int size = read_int(get(v.size)), rank = read_int(get(v.rank));
    if (size < 1 || rank < 0 || rank >= size) continue;
    e.launcher = v.name;
    e.size = size;
    e.rank = rank;
    e.local_rank = std::max(0, read_int(get(v.local)));
    return e;
  }
  if (read_int(get("PMIX_RANK")) >= 0) e.launcher = "pmix";  // size known only once MPI starts
  return e;
}

std::string launch_problem(const LaunchEnv& env, bool built_with_mpi) {
  if (built_with_mpi || !env.multi()) return {};
  return fmt::format("started by {} as process {} of {}, but this ppsim was built without MPI", env.launcher, env.rank,
                     env.size);
}

bool shared_gpus_allowed(const EnvLookup& lookup) {
  const EnvLookup get = lookup ? lookup : EnvLookup([](const char* k) -> const char* { return std::getenv(k); });
  const char* v = get("PPSIM_ALLOW_SHARED_GPU");
  return v && std::strcmp(v, "1") == 0;
}

std::string placement_problem(int processes, int local, int gpus, int ranks) {
  if (local > gpus)
    return fmt::format("{} processes on this node but {} GPU(s) visible: start one process per GPU", local, gpus);
  if (processes > ranks)
    return fmt::format("{} processes for {} pipeline ranks: start at most one process per rank", processes, ranks);
  return {};
}

bool output_message(const Schedule& s, const Op& op, MsgKey& key) {
  if (op.kind == OpKind::F && !s.is_last_stage(op.stage)) {
    key = MsgKey{0, op.stage + 1, op.microbatch};
    return true;
  }
  if ((op.kind == OpKind::I || op.kind == OpKind::B) && !s.is_first_stage(op.stage)) {
    key = MsgKey{1, op.stage - 1, op.microbatch};
    return true;
  }
  return false;
}

int producer_rank(const Schedule& s, const MsgKey& key) {
  return s.stage_rank.at(static_cast<std::size_t>(key.grad ? key.stage + 1 : key.stage - 1));
}
int consumer_rank(const Schedule& s, const MsgKey& key) { return s.stage_rank.at(static_cast<std::size_t>(key.stage)); }

std::map<std::pair<int, int>, std::vector<MsgKey>> link_sequences(const Schedule& s) {
  std::map<std::pair<int, int>, std::vector<MsgKey>> links;
  for (int r = 0; r < static_cast<int>(s.ranks.size()); ++r) {
    for (const Action& a : s.ranks[static_cast<std::size_t>(r)]) {
      for (int k = 0; k < a.size(); ++k) {
        MsgKey key;
        if (!output_message(s, a.op(k), key)) continue;
        const int dst = consumer_rank(s, key);
        if (dst != r) links[{r, dst}].push_back(key);
      }
    }
  }
  return links;
}

bool input_message(const Schedule& s, const Op& op, MsgKey& key) {
  if (op.kind == OpKind::F && !s.is_first_stage(op.stage)) {
    key = MsgKey{0, op.stage, op.microbatch};
    return true;
  }
  if ((op.kind == OpKind::I || op.kind == OpKind::B) && !s.is_last_stage(op.stage)) {
    key = MsgKey{1, op.stage, op.microbatch};
    return true;
  }
  return false;
}

std::vector<MsgKey> message_order(const Schedule& s) {
  const int P = static_cast<int>(s.ranks.size());
  std::set<MsgKey> produced;  // every message made so far, cross-rank or within a rank
  std::vector<std::size_t> next(static_cast<std::size_t>(P), 0);
  std::vector<MsgKey> order;
  std::size_t done = 0, total = 0;
  for (const auto& acts : s.ranks) total += acts.size();
  while (done < total) {
    bool progressed = false;
    for (int r = 0; r < P; ++r) {
      const auto& acts = s.ranks[static_cast<std::size_t>(r)];
      std::size_t& i = next[static_cast<std::size_t>(r)];
      while (i < acts.size()) {
        const Action& a = acts[i];
        bool ready = true;
        for (int k = 0; k < a.size() && ready; ++k)
          if (MsgKey in; input_message(s, a.op(k), in) && !produced.count(in)) ready = false;
        if (!ready) break;
        for (int k = 0; k < a.size(); ++k) {
          MsgKey out;
          if (!output_message(s, a.op(k), out)) continue;
          produced.insert(out);
          if (consumer_rank(s, out) != r) order.push_back(out);
        }
        ++i;
        ++done;
        progressed = true;
      }
    }
    if (!progressed)
      throw InputError("replay: the schedule cannot run to its end (an op waits for a message nobody sends first); "
                       "`ppsim show --schedule-file` reports the cycle");
  }
  return order;
}

const char* transport_name(TransportKind k) {
  return enum_name(k, {{TransportKind::Peer, "peer"}, {TransportKind::Ipc, "ipc"}, {TransportKind::Nccl, "nccl"}});
}

TransportKind choose_transport(const std::string& requested, int processes, int local) {
  const bool one_host = local >= processes;
  if (requested == "auto") {
    if (processes <= 1) return TransportKind::Peer;
    return one_host ? TransportKind::Ipc : TransportKind::Nccl;
  }
  if (requested == "peer") {
    if (processes > 1)
      throw InputError(fmt::format("--transport peer moves tensors within one process, but {} processes were started",
                                   processes),
                       one_host ? "--transport ipc" : "--transport nccl", kExitUsage);
    return TransportKind::Peer;
  }
  if (requested == "ipc") {
    if (processes <= 1)
      throw InputError("--transport ipc connects several processes (mpirun/srun), but this is the only one",
                       "--transport peer", kExitUsage);
    if (!one_host)
      throw InputError(fmt::format("--transport ipc needs every process on one host; {} of {} are on this one", local,
                                   processes),
                       "--transport nccl", kExitUsage);
    return TransportKind::Ipc;
  }
  if (requested == "nccl") return TransportKind::Nccl;
  throw InputError(fmt::format("unknown transport '{}' (auto, peer, ipc or nccl)", requested), {}, kExitUsage);
}

std::string ep_launch_problem(int processes, int local, TransportKind kind) {
  if (processes <= 1) return {};
  if (local < processes)
    return fmt::format("expert parallelism across processes needs every process on one host (its receive buffers "
                       "travel as CUDA IPC handles); {} of {} are on this one: start them on one host",
                       local, processes);
  if (kind != TransportKind::Ipc)
    return fmt::format("expert parallelism across processes moves stage messages by --transport ipc, not {}: leave "
                       "--transport out (auto) or give ipc",
                       transport_name(kind));
  return {};
}

// ---- Timeline shares ----------------------------------------------------------------------------

std::string encode_part(const TimelinePart& part, const Schedule& s) {
  using nlohmann::json;
  json j;
  j["ranks"] = part.ranks;
  json iv = json::array();
  std::map<int, int> next_index;  // per rank: intervals come in action order
  for (const Interval& i : part.local.intervals) {
    const int idx = next_index[i.rank]++;
    const auto& list = s.ranks.at(static_cast<std::size_t>(i.rank));
    if (idx >= static_cast<int>(list.size()) || !(list[static_cast<std::size_t>(idx)] == i.action))
      throw InputError(fmt::format("replay: rank {}'s measured actions are not the schedule's, in order", i.rank), {},
                       kExitInternal);
    iv.push_back({i.rank, idx, i.start, i.end});
  }
  j["intervals"] = iv;
  json act = json::array();
  for (int r : part.ranks)
    for (const MemSample& m : part.local.activations.at(static_cast<std::size_t>(r))) act.push_back({r, m.t, m.activations});
  j["activations"] = act;
  json tr = json::array();
  for (const Transfer& t : part.local.transfers)
    tr.push_back({t.src_rank, t.dst_rank, t.start, t.end, static_cast<int>(t.producer.kind), t.producer.stage,
                  t.producer.microbatch, t.bytes});
  j["transfers"] = tr;
  json sends = json::array();
  for (const SendHalf& h : part.sends)
    sends.push_back({h.key.grad, h.key.stage, h.key.microbatch, h.src_rank, h.dst_rank, h.start,
                     static_cast<int>(h.producer.kind), h.producer.stage, h.producer.microbatch, h.bytes});
  j["sends"] = sends;
  json recvs = json::array();
  for (const RecvHalf& h : part.receives) recvs.push_back({h.key.grad, h.key.stage, h.key.microbatch, h.end});
  j["receives"] = recvs;
  return j.dump();
}

namespace {

[[noreturn]] void bad_part(const std::string& what) {
  throw InputError("replay: the processes' measurements do not fit together (" + what +
                       "); every process must run the same ppsim command on the same config",
                   {}, kExitInput);
}

Op op_from(int kind, int stage, int mb) {
  if (kind < 0 || kind >= kNumOpKinds) bad_part("an op kind out of range");
  return Op{static_cast<OpKind>(kind), stage, mb};
}

}  // namespace

Timeline merge_parts(const std::vector<std::string>& parts, const Schedule& s) {
  using nlohmann::json;
  Timeline tl;
  tl.pp = s.pp;
  tl.scale = TimeScale::millis();
  tl.activations.resize(static_cast<std::size_t>(s.pp));
  std::vector<int> seen(static_cast<std::size_t>(s.pp), 0);
  std::map<MsgKey, SendHalf> sends;
  std::map<MsgKey, Time> arrivals;
  try {
    for (const std::string& text : parts) {
      const json j = json::parse(text);
      for (int r : j.at("ranks").get<std::vector<int>>()) {
        if (r < 0 || r >= s.pp) bad_part(fmt::format("rank {} is not a rank of P={}", r, s.pp));
        if (seen[static_cast<std::size_t>(r)]++) bad_part(fmt::format("rank {} was replayed twice", r));
      }
      for (const auto& e : j.at("intervals")) {
        const int r = e.at(0).get<int>(), idx = e.at(1).get<int>();
        if (r < 0 || r >= s.pp || idx < 0 || idx >= static_cast<int>(s.ranks[static_cast<std::size_t>(r)].size()))
          bad_part(fmt::format("action {} of rank {} is not in the schedule", idx, r));
        Interval iv;
        iv.rank = r;
        iv.start = e.at(2).get<Time>();
        iv.end = e.at(3).get<Time>();
        iv.action = s.ranks[static_cast<std::size_t>(r)][static_cast<std::size_t>(idx)];
        tl.intervals.push_back(iv);
      }
      for (const auto& e : j.at("activations")) {
        const int r = e.at(0).get<int>();
        if (r < 0 || r >= s.pp) bad_part("an activation sample of an unknown rank");
        tl.activations[static_cast<std::size_t>(r)].push_back(MemSample{e.at(1).get<Time>(), e.at(2).get<std::int32_t>()});
      }
      for (const auto& e : j.at("transfers")) {
        Transfer t;
        t.src_rank = e.at(0).get<int>();
        t.dst_rank = e.at(1).get<int>();
        t.start = e.at(2).get<Time>();
        t.end = e.at(3).get<Time>();
        t.producer = op_from(e.at(4).get<int>(), e.at(5).get<int>(), e.at(6).get<int>());
        t.bytes = e.at(7).get<Bytes>();
        tl.transfers.push_back(t);
      }
      for (const auto& e : j.at("sends")) {
        SendHalf h;
        h.key = MsgKey{e.at(0).get<int>(), e.at(1).get<int>(), e.at(2).get<int>()};
        h.src_rank = e.at(3).get<int>();
        h.dst_rank = e.at(4).get<int>();
        h.start = e.at(5).get<Time>();
        h.producer = op_from(e.at(6).get<int>(), e.at(7).get<int>(), e.at(8).get<int>());
        h.bytes = e.at(9).get<Bytes>();
        if (!sends.emplace(h.key, h).second) bad_part("a message was sent twice");
      }
      for (const auto& e : j.at("receives")) {
        const MsgKey k{e.at(0).get<int>(), e.at(1).get<int>(), e.at(2).get<int>()};
        if (!arrivals.emplace(k, e.at(3).get<Time>()).second) bad_part("a message was received twice");
      }
    }
  } catch (const json::exception& e) {
    bad_part(std::string("unreadable share (") + e.what() + ")");
  }
  for (int r = 0; r < s.pp; ++r)
    if (!seen[static_cast<std::size_t>(r)]) bad_part(fmt::format("no process replayed rank {}", r));
  if (sends.size() != arrivals.size()) bad_part(fmt::format("{} messages left, {} arrived", sends.size(), arrivals.size()));
  for (const auto& [key, h] : sends) {
    const auto it = arrivals.find(key);
    if (it == arrivals.end()) bad_part(fmt::format("the message into stage {} micro-batch {} never arrived", key.stage, key.microbatch));
    tl.transfers.push_back(Transfer{h.src_rank, h.dst_rank, h.start, std::max(h.start, it->second), h.producer, h.bytes});
  }
  std::stable_sort(tl.intervals.begin(), tl.intervals.end(), [](const Interval& a, const Interval& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.start < b.start;
  });
  std::stable_sort(tl.transfers.begin(), tl.transfers.end(),
                   [](const Transfer& a, const Transfer& b) { return a.start < b.start; });
  tl.start = 0;
  tl.end = 0;
  for (const auto& iv : tl.intervals) tl.end = std::max(tl.end, iv.end);
  for (const auto& t : tl.transfers) tl.end = std::max(tl.end, t.end);
  return tl;
}

}  // namespace ppsim::launch
