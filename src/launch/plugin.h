// Finding and opening a ppsim plug-in: a shared library built with ppsim and opened with dlopen
// only when a command needs it, so that the binary and the Python module link none of its
// libraries (the GPU back-end libppsim_gpu.so: CUDA; the MPI launcher libppsim_mpi.so: MPI).
// Looked for beside the executable, then in ../lib (an installed binary), then beside the object
// holding this code when that is not the executable (the Python module).
#pragma once
#include <string>

namespace ppsim::launch {

struct Plugin {
  void* entry = nullptr;  // the entry symbol, or null
  std::string path;       // the file opened
  std::string error;      // why entry is null, one line
};

// `what` names the plug-in in messages ("the GPU back-end"); `flags` are dlopen's.
Plugin open_plugin(const std::string& file, const char* entry_symbol, int flags, const std::string& what);

}  // namespace ppsim::launch
