// Splits text at each separator: "a.b" -> {"a", "b"}; an empty text or separators side by side
// give empty parts ("" -> {""}, "a..b" -> {"a", "", "b"}). Config key paths are split so.
#pragma once
#include <string>
#include <vector>

namespace ppsim {

inline std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  for (std::size_t pos = 0; pos <= text.size();) {
    std::size_t at = text.find(sep, pos);
    if (at == std::string::npos) at = text.size();
    parts.push_back(text.substr(pos, at - pos));
    pos = at + 1;
  }
  return parts;
}

}  // namespace ppsim
