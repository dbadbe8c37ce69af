#include "api/data_dir.h"

#include <dlfcn.h>

#include <filesystem>
#include <system_error>

namespace ppsim::api {

std::string shipped_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(dir, ec) || fs::path(dir).is_absolute()) return dir;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&shipped_dir), &info) == 0 || !info.dli_fname) return dir;
  fs::path here = fs::weakly_canonical(fs::path(info.dli_fname), ec).parent_path();
  for (int up = 0; up <= 4 && !here.empty(); ++up, here = here.parent_path()) {
    if (fs::is_directory(here / dir, ec)) return (here / dir).string();
    if (here == here.parent_path()) break;
  }
  return dir;
}

}  // namespace ppsim::api
