// The MPI launcher libppsim_mpi.so (see mpi_table.h): MPI's calls behind mpi.h, built only where
// CMake found MPI, opened by mpi.cc when mpirun/srun started the process.
#include <mpi.h>

#include <cstdlib>
#include <limits>

#include "launch/mpi_table.h"

namespace ppsim::mpi {

namespace {

std::string failed(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return {};
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return std::string(what) + " failed: " + text;
}

std::string init_world(World& w) {
  int provided = 0;
  if (std::string e = failed(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
      !e.empty())
    return e;
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  });
  if (provided < MPI_THREAD_SERIALIZED)
    return "this MPI library cannot be called from more than one thread (MPI_THREAD_SERIALIZED)";
  w.active = true;
  std::string e = failed(MPI_Comm_rank(MPI_COMM_WORLD, &w.rank), "MPI_Comm_rank");
  if (e.empty()) e = failed(MPI_Comm_size(MPI_COMM_WORLD, &w.size), "MPI_Comm_size");
  MPI_Comm node = MPI_COMM_NULL;
  if (e.empty())
    e = failed(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &node),
               "MPI_Comm_split_type");
  if (e.empty()) e = failed(MPI_Comm_rank(node, &w.local_rank), "MPI_Comm_rank");
  if (e.empty()) e = failed(MPI_Comm_size(node, &w.local_size), "MPI_Comm_size");
  if (node != MPI_COMM_NULL) MPI_Comm_free(&node);
  return e;
}

std::string barrier_all() { return failed(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

std::string bcast_bytes(void* data, int bytes, int root) {
  return failed(MPI_Bcast(data, bytes, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
}

std::string allgather_strings(const std::string& mine, int n, std::vector<std::string>& all) {
  int len = static_cast<int>(mine.size());  // mpi.cc refused a message over 2 GiB
  std::vector<int> lens(static_cast<std::size_t>(n)), offs(static_cast<std::size_t>(n));
  if (std::string e = failed(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
      !e.empty())
    return e;
  std::size_t total = 0;
  for (int i = 0; i < n; ++i) {
    offs[static_cast<std::size_t>(i)] = static_cast<int>(total);
    total += static_cast<std::size_t>(lens[static_cast<std::size_t>(i)]);
  }
  if (total > static_cast<std::size_t>(std::numeric_limits<int>::max())) return "MPI_Allgatherv: over 2 GiB in all";
  std::string joined(total, '\0');
  if (std::string e = failed(
          MPI_Allgatherv(mine.data(), len, MPI_CHAR, joined.data(), lens.data(), offs.data(), MPI_CHAR, MPI_COMM_WORLD),
          "MPI_Allgatherv");
      !e.empty())
    return e;
  all.clear();
  for (int i = 0; i < n; ++i)
    all.push_back(joined.substr(static_cast<std::size_t>(offs[static_cast<std::size_t>(i)]),
                                static_cast<std::size_t>(lens[static_cast<std::size_t>(i)])));
  return {};
}

std::string any_of_all(bool mine, bool& any) {
  int in = mine ? 1 : 0, out = 0;
  std::string e = failed(MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  any = out != 0;
  return e;
}

void abort_world(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

}  // namespace

}  // namespace ppsim::mpi

extern "C" __attribute__((visibility("default"))) const ppsim::mpi::MpiTable* ppsim_mpi_table() {
  using namespace ppsim::mpi;
  static const MpiTable table{MpiTable::kVersion, sizeof(MpiTable),  init_world, barrier_all,
                              bcast_bytes,        allgather_strings, any_of_all, abort_world};
  return &table;
}
