#include "api/data_dir.h"

#include <dlfcn.h>

#include <filesystem>
#include <system_error>
#include <vector>

namespace ppsim::api {

std::string shipped_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(dir, ec) || fs::path(dir).is_absolute()) return dir;
  // The module this code is in (dladdr), and the executable (/proc/self/exe: for the main
  // program dladdr gives argv[0], e.g. a bare "ppsim").
  std::vector<fs::path> bases;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&shipped_dir), &info) != 0 && info.dli_fname &&
      fs::path(info.dli_fname).is_absolute())
    bases.push_back(fs::weakly_canonical(fs::path(info.dli_fname), ec).parent_path());
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) bases.push_back(exe.parent_path());
  for (fs::path here : bases)
    for (int up = 0; up <= 4 && !here.empty(); ++up, here = here.parent_path()) {
      if (fs::is_directory(here / dir, ec)) return (here / dir).string();
      if (here == here.parent_path()) break;
    }
  return dir;
}

}  // namespace ppsim::api
