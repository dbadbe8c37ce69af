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

// A plug-in whose entry symbol returns its table of functions (`const Table* entry()`), refused
// unless the table's `version` and `size` are this build's: a .so of another build is one line
// instead of calls through a wrong layout.
template <class Table>
struct LoadedTable {
  const Table* table = nullptr;
  std::string error;  // why table is null
};
template <class Table>
LoadedTable<Table> open_table(const std::string& file, const char* entry_symbol, int flags, const std::string& what,
                              int version) {
  LoadedTable<Table> out;
  const Plugin p = open_plugin(file, entry_symbol, flags, what);
  using Entry = const Table* (*)();
  const Table* t = p.entry ? reinterpret_cast<Entry>(p.entry)() : nullptr;
  if (!p.entry)
    out.error = p.error;
  else if (!t || t->version != version || t->size != sizeof(Table))
    out.error = what + " " + p.path + " is from another ppsim build (rebuild ppsim)";
  else
    out.table = t;
  return out;
}

}  // namespace ppsim::launch
