// EpWiring: the EP groups' buffers, handshakes and communicators, in one process or across the
// processes of a host (see ep_wiring.h).
#include "cuda_validate/ep_wiring.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include <fmt/format.h>

#include "core/error.h"
#include "cuda_validate/check.h"
#include "cuda_validate/device_buffer.h"
#include "launch/ep_exchange.h"
#include "launch/mpi.h"

namespace ppsim::gpu {

EpWiring::EpWiring(int stages, int ep, std::vector<int> process_of, std::vector<Member> local,
                   std::vector<ChunkShape> shapes, bool across_processes, bool local_ok, bool handshake,
                   ep::A2aBackend backend)
    : stages_(stages), ep_(ep), process_of_(std::move(process_of)), local_(std::move(local)), shapes_(std::move(shapes)),
      backend_(backend), multi_(across_processes) {
  PPSIM_CHECK(static_cast<int>(process_of_.size()) == stages * ep && static_cast<int>(shapes_.size()) == stages,
              "EpWiring: {} processes and {} shapes for {} stages x ep {}", process_of_.size(), shapes_.size(), stages,
              ep);
  DeviceGuard guard;
  if (multi_) connect_across_processes(local_ok, handshake);
  else connect_in_process(handshake);
  if (backend_ == ep::A2aBackend::nccl) make_communicators();
}

EpWiring::~EpWiring() {
  int saved = 0;
  (void)cudaGetDevice(&saved);
  for (auto& [dev, c] : comms_) {
    (void)cudaSetDevice(dev);
    if (aborted_) (void)ncclCommAbort(c);
    else (void)ncclCommDestroy(c);
  }
  for (auto& [key, mapping] : opened_) {
    (void)cudaSetDevice(mapping.first);
    (void)cudaIpcCloseMemHandle(mapping.second);
  }
  (void)cudaSetDevice(saved);
}

void EpWiring::abort() {
  aborted_ = true;
  for (auto& s : syncs_) s->abort();
}

std::vector<const EpWiring::Member*> EpWiring::members_of(int stage) const {
  std::vector<const Member*> v;
  for (const Member& m : local_)
    if (m.stage == stage && m.chunk != nullptr) v.push_back(&m);
  return v;
}

void EpWiring::connect_in_process(bool handshake) {
  for (int st = 0; st < stages_; ++st) {
    std::vector<Chunk*> group(static_cast<std::size_t>(ep_), nullptr);
    for (const Member* m : members_of(st)) group.at(static_cast<std::size_t>(m->shard)) = m->chunk;
    if (std::find(group.begin(), group.end(), nullptr) != group.end()) continue;  // a shard's set-up failed
    if (auto sync = Chunk::connect_ep_group(group, handshake)) syncs_.push_back(std::move(sync));
  }
}

void EpWiring::connect_across_processes(bool local_ok, bool handshake) {
  const mpi::World& w = mpi::world();
  // 1. Every process publishes its chunks' slab handles (or why it cannot).
  launch::EpExports mine;
  mine.ok = local_ok;
  if (!local_ok) mine.error = fmt::format("a rank of process {} failed before the EP groups were connected", w.rank);
  try {
    for (const Member& m : local_) {
      if (!local_ok || m.chunk == nullptr) continue;
      PPSIM_CUDA_CHECK(cudaSetDevice(m.device));
      cudaIpcMemHandle_t h{};
      PPSIM_CUDA_CHECK(cudaIpcGetMemHandle(&h, m.chunk->ep_slab()->base()));
      mine.chunks.push_back(launch::EpExport{m.stage, m.shard, m.chunk->ep_slab()->layout().total_bytes(),
                                             std::string(reinterpret_cast<const char*>(&h), sizeof h)});
    }
  } catch (const InputError& e) {
    mine.ok = false;
    mine.error = e.one_line();
  }
  std::vector<launch::EpExports> all;
  for (const std::string& t : mpi::allgather(launch::encode_ep_exports(mine))) all.push_back(launch::decode_ep_exports(t));
  for (std::size_t p = 0; p < all.size(); ++p)
    if (!all[p].ok)
      throw_gpu_failure(fmt::format("expert parallelism: process {} could not share its receive buffers: {}", p,
                                    all[p].error),
                        "see that process's own message");

  // 2. Each process opens the slabs of its chunks' peers in other processes (once each) and
  //    connects its chunks; a failure anywhere stops every process.
  std::exception_ptr failed;
  try {
    for (int st = 0; st < stages_; ++st) {
      const std::vector<const Member*> mem = members_of(st);
      if (mem.empty()) continue;
      const ChunkShape& shape = mem.front()->chunk->shape();
      const ep::EpSlabLayout layout = Chunk::ep_slab_layout(shape);
      std::vector<std::vector<A2aRecvBuffer>> views(static_cast<std::size_t>(ep_));
      for (int e = 0; e < ep_; ++e) {
        const auto here = std::find_if(mem.begin(), mem.end(), [e](const Member* m) { return m->shard == e; });
        if (here != mem.end()) {
          views[static_cast<std::size_t>(e)] = (*here)->chunk->ep_receive_buffers();
          continue;
        }
        const int p = process_of_.at(static_cast<std::size_t>(st * ep_ + e));
        const launch::EpExport* x = launch::find_ep_export(all.at(static_cast<std::size_t>(p)), st, e);
        if (x == nullptr || x->handle.size() != sizeof(cudaIpcMemHandle_t))
          throw InputError(fmt::format("expert parallelism: process {} published no receive buffers for stage {} EP "
                                       "shard {}",
                                       p, st, e),
                           {}, kExitInternal);
        if (x->bytes != layout.total_bytes())
          throw InputError(fmt::format("expert parallelism: stage {} EP shard {}'s receive buffers in process {} are {} "
                                       "bytes, {} expected here (the same command on every process?)",
                                       st, e, p, x->bytes, layout.total_bytes()),
                           {}, kExitInternal);
        auto it = opened_.find({st, e});
        if (it == opened_.end()) {
          const int dev = mem.front()->device;
          PPSIM_CUDA_CHECK(cudaSetDevice(dev));
          cudaIpcMemHandle_t h{};
          std::memcpy(&h, x->handle.data(), sizeof h);
          void* base = nullptr;
          PPSIM_CUDA_CHECK(cudaIpcOpenMemHandle(&base, h, cudaIpcMemLazyEnablePeerAccess));
          it = opened_.emplace(std::make_pair(st, e), std::make_pair(dev, base)).first;
        }
        for (std::size_t i = 0; i < layout.buffers; ++i)
          views[static_cast<std::size_t>(e)].push_back(A2aSlab::view_at(it->second.second, layout, i));
      }
      for (const Member* m : mem) {
        PPSIM_CHECK(m->device == mem.front()->device,
                    "EpWiring: stage {}'s shards in this process are on GPUs {} and {} (one GPU per process)", st,
                    m->device, mem.front()->device);
        m->chunk->connect_ep(views);
      }
    }
  } catch (...) {
    failed = std::current_exception();
  }
  if (mpi::any_of(failed != nullptr)) {
    if (failed) std::rethrow_exception(failed);
    throw_gpu_failure("expert parallelism: another process could not map its peers' receive buffers",
                      "see that process's own message");
  }

  // 3. The host handshake: words in one shared segment, made by process 0.
  if (!handshake) return;
  std::vector<std::size_t> buffers;
  for (const ChunkShape& sh : shapes_) buffers.push_back(Chunk::ep_buffer_count(sh));
  const std::size_t words = launch::SharedEpGroupSync::shared_words(buffers, ep_);
  char name[64] = {};
  std::string why;
  if (w.rank == 0) {
    try {
      const std::string n = launch::SharedFlags::unique_name();
      shared_ = std::make_shared<launch::SharedFlags>(n, words, true);
      std::snprintf(name, sizeof name, "%s", n.c_str());
    } catch (const InputError& e) {
      why = e.one_line();
    }
  }
  mpi::bcast(name, sizeof name, 0);
  if (name[0] == '\0')
    throw_gpu_failure("expert parallelism: process 0 could not make the EP groups' shared handshake words" +
                          (why.empty() ? std::string() : ": " + why),
                      "is /dev/shm writable and large enough?");
  if (w.rank != 0) {
    try {
      shared_ = std::make_shared<launch::SharedFlags>(name, words, false);
    } catch (const InputError& e) {
      why = e.one_line();
    }
  }
  const bool bad = mpi::any_of(!why.empty());  // also: every process has the segment mapped
  if (w.rank == 0) shared_->unlink();         // nothing left behind in /dev/shm however the job ends
  if (bad)
    throw_gpu_failure("expert parallelism: a process could not map the EP groups' shared handshake words" +
                          (why.empty() ? std::string() : ": " + why),
                      "see each process's message");
  for (int st = 0; st < stages_; ++st) {
    const std::vector<const Member*> mem = members_of(st);
    if (mem.empty()) continue;
    auto sync = std::make_shared<launch::SharedEpGroupSync>(
        shared_, launch::SharedEpGroupSync::shared_base(buffers, ep_, static_cast<std::size_t>(st)), ep_,
        buffers[static_cast<std::size_t>(st)]);
    for (const Member* m : mem) m->chunk->set_ep_sync(sync);
    syncs_.push_back(std::move(sync));
  }
}

// One communicator per EP group, its rank e = shard e. One process: ncclCommInitAll over the
// group's GPUs. Across processes: the process holding shard 0 makes the id, every process takes
// part in its broadcast (a collective), and the members join in stage order (the same on every
// process, so no two groups' inits wait on each other).
void EpWiring::make_communicators() {
  setenv("NCCL_NVLS_ENABLE", "0", 0);  // NVLink multicast can take shared GPUs down (transport.cc)
  const mpi::World& w = mpi::world();
  for (int st = 0; st < stages_; ++st) {
    const std::vector<const Member*> mem = members_of(st);
    if (!multi_) {
      if (static_cast<int>(mem.size()) != ep_) continue;  // a shard's set-up failed
      std::vector<int> devs(static_cast<std::size_t>(ep_), -1);
      for (const Member* m : mem) devs.at(static_cast<std::size_t>(m->shard)) = m->device;
      for (int a = 0; a < ep_; ++a)
        for (int b = a + 1; b < ep_; ++b)
          if (devs[static_cast<std::size_t>(a)] == devs[static_cast<std::size_t>(b)])
            throw InputError(fmt::format("--a2a nccl: stage {}'s EP shards {} and {} are both on GPU {}, and NCCL cannot "
                                         "put two ranks of one communicator on one GPU: use --a2a ours, or at least "
                                         "ep ({}) GPUs",
                                         st, a, b, devs[static_cast<std::size_t>(a)], ep_),
                             {}, kExitUsage);
      std::vector<ncclComm_t> c(static_cast<std::size_t>(ep_), nullptr);
      PPSIM_NCCL_CHECK(ncclCommInitAll(c.data(), ep_, devs.data()));
      for (int e = 0; e < ep_; ++e) comms_.emplace_back(devs[static_cast<std::size_t>(e)], c[static_cast<std::size_t>(e)]);
      for (const Member* m : mem) m->chunk->set_ep_comm(c[static_cast<std::size_t>(m->shard)]);
      continue;
    }
    const int root = process_of_.at(static_cast<std::size_t>(st * ep_));
    ncclUniqueId id{};
    if (w.rank == root) PPSIM_NCCL_CHECK(ncclGetUniqueId(&id));
    mpi::bcast(&id, sizeof id, root);
    if (mem.empty()) continue;
    if (mem.size() > 1) PPSIM_NCCL_CHECK(ncclGroupStart());
    for (const Member* m : mem) {
      PPSIM_CUDA_CHECK(cudaSetDevice(m->device));
      ncclComm_t c = nullptr;
      PPSIM_NCCL_CHECK(ncclCommInitRank(&c, ep_, id, m->shard));
      comms_.emplace_back(m->device, c);
      m->chunk->set_ep_comm(c);
    }
    if (mem.size() > 1) PPSIM_NCCL_CHECK(ncclGroupEnd());
  }
}

}  // namespace ppsim::gpu
