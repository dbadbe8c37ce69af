// Expert parallelism across processes: what each process publishes so that its EP shards' peers
// in other processes can write into their receive buffers. Per chunk it holds: the stage, the EP
// shard, the size of the chunk's receive slab (one allocation, ep::EpSlabLayout) and the slab's
// CUDA IPC handle (64 opaque bytes). Every process publishes its list (mpi::allgather) and opens
// the handles of the chunks its own chunks exchange with. `ok` = false (with `error`) when this
// process could not make its part: every process then stops, instead of waiting in a collective
// for a process that left it.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace ppsim::launch {

struct EpExport {
  int stage = 0, shard = 0;
  std::size_t bytes = 0;  // the slab's size (the importer checks it against its own layout)
  std::string handle;     // cudaIpcMemHandle_t's bytes
};

struct EpExports {
  bool ok = true;
  std::string error;  // why not ok (one line)
  std::vector<EpExport> chunks;
};

// Text form (JSON; handles as hex) and back. decode throws InputError(kExitInternal) on text that
// is not an encoded EpExports.
std::string encode_ep_exports(const EpExports& e);
EpExports decode_ep_exports(const std::string& text);

// The export of (stage, shard) in one process's list, or null.
const EpExport* find_ep_export(const EpExports& e, int stage, int shard);

}  // namespace ppsim::launch
