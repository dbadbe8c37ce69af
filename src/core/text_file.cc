// Input files read whole (text_file.h).
#include "core/text_file.h"

#include <fmt/format.h>

#include <fstream>

namespace ppsim {

bool read_capped(std::istream& in, std::size_t max_bytes, std::string& text) {
  char buf[1 << 16];
  while (text.size() <= max_bytes && in.read(buf, sizeof buf).gcount() > 0)
    text.append(buf, static_cast<std::size_t>(in.gcount()));
  return text.size() <= max_bytes;
}

std::string read_text_file(const std::string& path, const SourceLoc& where, const std::string& what,
                           std::size_t max_bytes, const std::string& over) {
  const SourceLoc at = where.file.empty() ? SourceLoc{path, 0, 0} : where;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(at, fmt::format("cannot open the {} '{}'", what, path), {}, kExitIo);
  std::string text;
  const bool whole = read_capped(in, max_bytes, text);
  if (in.bad()) throw InputError(at, fmt::format("cannot read the {} '{}'", what, path), {}, kExitIo);
  if (!whole) throw InputError(at, fmt::format("'{}' is over {} MiB{}", path, max_bytes >> 20, over), {}, kExitLimit);
  return text;
}

}  // namespace ppsim
