// MPI wrapper (see mpi.h): one process unless mpirun/srun started it; then the MPI launcher
// libppsim_mpi.so (mpi_backend.cc, mpi_table.h), opened here on demand, makes the MPI calls, so
// that the ppsim binary and the Python module link no MPI library.
#include "launch/mpi.h"

#include <dlfcn.h>

#include <cstdlib>
#include <limits>

#include "core/error.h"
#include "launch/launch.h"
#include "launch/mpi_table.h"
#include "launch/plugin.h"

namespace ppsim::mpi {

namespace {
World g_world;
bool g_started = false;

// RTLD_GLOBAL: OpenMPI's own plug-ins (its MCA components) resolve libmpi's symbols globally.
const launch::LoadedTable<MpiTable>& loaded() {
  static const launch::LoadedTable<MpiTable> l = launch::open_table<MpiTable>(
      "libppsim_mpi.so", "ppsim_mpi_table", RTLD_NOW | RTLD_GLOBAL, "the MPI launcher", MpiTable::kVersion);
  return l;
}

void check(const std::string& why) {
  if (!why.empty()) throw InputError("MPI: " + why, {}, kExitGpu);
}
int as_count(std::size_t n) {
  if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw InputError("MPI: a message over 2 GiB", {}, kExitLimit);
  return static_cast<int>(n);
}
}  // namespace

bool built_with_mpi() { return loaded().table != nullptr; }

const World& world() { return g_world; }

const World& init_if_launched() {
  if (g_started) return g_world;
  g_started = true;
  const launch::LaunchEnv env = launch::detect_launch();
  g_world.launcher = env.launcher;
  if (env.launcher.empty()) return g_world;
  const auto& l = loaded();
  if (l.table) {
    check(l.table->init(g_world));
  } else if (const std::string why = launch::launch_problem(env, false); !why.empty()) {
    throw InputError(why + ": " + l.error + "; install OpenMPI (libopenmpi-dev) and rebuild, or run one ppsim " +
                         "process (it uses every visible GPU)",
                     {}, kExitUsage);
  }
  return g_world;
}

void barrier() {
  if (g_world.active) check(loaded().table->barrier());
}

void bcast(void* data, std::size_t bytes, int root) {
  if (g_world.active) check(loaded().table->bcast(data, as_count(bytes), root));
}

std::vector<std::string> allgather(const std::string& mine) {
  if (!g_world.active || g_world.size <= 1) return {mine};
  as_count(mine.size());
  std::vector<std::string> all;
  check(loaded().table->allgather(mine, g_world.size, all));
  return all;
}

bool any_of(bool mine) {
  if (!g_world.active || g_world.size <= 1) return mine;
  bool any = false;
  check(loaded().table->any_of(mine, any));
  return any;
}

void abort_job(int code) {
  if (g_world.active && g_world.size > 1) loaded().table->abort_job(code);
  std::_Exit(code);
}

}  // namespace ppsim::mpi
