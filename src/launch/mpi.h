// MPI for multi-process runs (ppsim validate under mpirun or srun): starting MPI, and the few
// collectives the replay needs (the NCCL ids go out with bcast; the measured shares come back
// with allgather). The MPI calls are made by the MPI launcher libppsim_mpi.so (built against
// OpenMPI when CMake finds it: PPSIM_MPI; mpi_table.h), opened only when mpirun/srun started the
// process, so ppsim links no MPI library. Without it, a process that finds itself one of several
// (launch::detect_launch) stops with one line instead of replaying the whole schedule on its own
// beside the others.
// Not obvious: MPI is started only by commands that need it (validate), at their start, and
// with MPI_THREAD_SERIALIZED: the replay's rank threads call barrier() one at a time.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace ppsim::mpi {

struct World {
  bool active = false;  // MPI was started
  int rank = 0;         // this process
  int size = 1;         // processes in the job
  int local_rank = 0;   // among the processes on this node
  int local_size = 1;
  std::string launcher;  // as launch::detect_launch() named it
};

bool built_with_mpi();  // the MPI launcher libppsim_mpi.so opens (it is loaded for this)
// Starts MPI when the environment says mpirun/srun started this process; otherwise a single
// process. Throws InputError(kExitUsage) when several processes were started but this ppsim was
// built without MPI, and InputError(kExitGpu) when MPI fails to start.
const World& init_if_launched();
const World& world();  // what init_if_launched() found; a single process before it ran

void barrier();
void bcast(void* data, std::size_t bytes, int root);
// Every process's string, in process order, on every process.
std::vector<std::string> allgather(const std::string& mine);
// True on every process when `mine` is true on any.
bool any_of(bool mine);
// Ends this process with `code`, and under MPI every process of the job (MPI_Abort): for a
// watchdog that finds a thread stuck where no wait can be bounded.
[[noreturn]] void abort_job(int code);

}  // namespace ppsim::mpi
