// Plug-ins opened on demand (see plugin.h).
#include "launch/plugin.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <vector>

namespace ppsim::launch {

namespace {

std::string exe_dir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<std::size_t>(n));
  return p.substr(0, p.rfind('/'));
}

// The directory of the shared object (or executable) this code is linked into.
std::string own_dir() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&exe_dir), &info) == 0 || !info.dli_fname) return {};
  char real[PATH_MAX];
  std::string p(::realpath(info.dli_fname, real) ? real : info.dli_fname);
  const std::size_t slash = p.rfind('/');
  return slash == std::string::npos ? std::string() : p.substr(0, slash);
}

}  // namespace

Plugin open_plugin(const std::string& file, const char* entry_symbol, int flags, const std::string& what) {
  const std::string dir = exe_dir();
  std::vector<std::string> candidates = {dir + "/" + file, dir + "/../lib/" + file};
  if (const std::string own = own_dir(); !own.empty() && own != dir) candidates.push_back(own + "/" + file);
  Plugin p;
  std::string tried;
  for (const auto& path : candidates) {
    if (::access(path.c_str(), F_OK) != 0) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    p.path = path;
    void* h = ::dlopen(path.c_str(), flags);
    if (!h) {
      const char* e = ::dlerror();
      p.error = fmt::format("cannot load {} {}: {}", what, path, e ? e : "unknown error");
      return p;
    }
    p.entry = ::dlsym(h, entry_symbol);
    if (!p.entry) p.error = fmt::format("{} {} is from another ppsim build (rebuild ppsim)", what, path);
    return p;
  }
  p.error = fmt::format("{} {} is missing (looked for {})", what, file, tried);
  return p;
}

}  // namespace ppsim::launch
