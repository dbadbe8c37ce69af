// Expert parallelism in a replay: which all-to-all moves the rows (`--a2a ours|nccl`), where each
// (pipeline rank, EP shard) runs - which process, which GPU - and whether NCCL can carry every EP
// group's all-to-all there.
//
// Slots: shard e of pipeline rank r is slot q = r * ep + e (ep_plan.h's EP-layout rank).
//   One process on G GPUs: slot q on GPU q % G (EpLayout; G is capped at pp * ep).
//   P processes of one host (mpirun): slot q in process q % P, on that process's one GPU. With
//   P = ep every process holds one shard of every stage (the one-process layout on P GPUs), so
//   stage-to-stage messages stay in a process and every all-to-all crosses processes.
// Not obvious: NCCL cannot put two ranks of one communicator on one GPU, so --a2a nccl needs every
// EP group's shards on distinct GPUs; ours writes through peer pointers and does not care.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ppsim::ep {

enum class A2aBackend : std::uint8_t { ours, nccl };
// "ours" | "nccl"; throws InputError(kExitUsage) naming the choices otherwise.
A2aBackend parse_a2a_backend(const std::string& name);
const char* a2a_backend_name(A2aBackend b);

struct EpPlacement {
  int pp = 1, ep = 1;
  bool across_processes = false;
  std::vector<int> process;  // by slot r * ep + e
  std::vector<int> gpu;      // by slot: the host's GPU index

  int slot(int rank, int shard) const { return rank * ep + shard; }
  int process_of(int rank, int shard) const { return process.at(static_cast<std::size_t>(slot(rank, shard))); }
  int gpu_of(int rank, int shard) const { return gpu.at(static_cast<std::size_t>(slot(rank, shard))); }
};

// One process on `gpus` GPUs (at most pp * ep are used); throws as make_ep_layout does. ep 1:
// rank r on GPU r % GPUs, whether or not they divide evenly.
EpPlacement place_in_process(int pp, int ep, int gpus);
// process_gpu.size() processes of one host, process p on GPU process_gpu[p].
EpPlacement place_across_processes(int pp, int ep, const std::vector<int>& process_gpu);

// "" when NCCL can carry every EP group's all-to-all (each group's shards on distinct GPUs);
// otherwise one line naming the shards that share a GPU, why that cannot work, and what does.
std::string nccl_a2a_problem(const EpPlacement& p);

}  // namespace ppsim::ep
