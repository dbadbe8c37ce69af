// The name of an enum value from a table of (value, name) pairs, for the small name functions of
// the enums that config keys and reports spell out. "?" for a value the table does not list.
#pragma once
#include <initializer_list>
#include <utility>

namespace ppsim {

template <class E>
const char* enum_name(E value, std::initializer_list<std::pair<E, const char*>> names) {
  for (const auto& [v, n] : names)
    if (v == value) return n;
  return "?";
}

}  // namespace ppsim
