// The one entry point the MPI launcher libppsim_mpi.so exports (mpi_backend.cc, linked against
// MPI): a table of the MPI calls mpi.h's functions make, which mpi.cc in the ppsim binary and the
// Python module opens with dlopen only when mpirun/srun started the process. So neither links an
// MPI library, and a ppsim without MPI (or on a host without libmpi) still runs alone.
//
// Not obvious: each call returns "" or the MPI error in one line (no exception crosses the .so);
// the table is versioned (MpiTable::kVersion, its size) so that a .so of another build is refused.
#pragma once
#include <string>
#include <vector>

#include "launch/mpi.h"

namespace ppsim::mpi {

struct MpiTable {
  static constexpr int kVersion = 1;
  int version;                    // kVersion of the build that filled it,
  std::size_t size;               // and its sizeof(MpiTable) (launch::open_table checks both)
  std::string (*init)(World& w);  // MPI_Init_thread (serialized); fills active, rank, size, local_*
  std::string (*barrier)();
  std::string (*bcast)(void* data, int bytes, int root);
  std::string (*allgather)(const std::string& mine, int processes, std::vector<std::string>& all);
  std::string (*any_of)(bool mine, bool& any);
  void (*abort_job)(int code);  // MPI_Abort on the world
};

}  // namespace ppsim::mpi

extern "C" const ppsim::mpi::MpiTable* ppsim_mpi_table();
