// The name (or another figure) of an enum value from a table of (value, name) pairs, for the small
// functions of the enums that config keys and reports spell out. "?" for a name the table lacks.
#pragma once
#include <initializer_list>
#include <utility>

namespace ppsim {

// The entry of `value` in a table of (value, entry) pairs; `otherwise` for a value not listed.
template <class E, class T>
T enum_lookup(E value, std::initializer_list<std::pair<E, T>> table, T otherwise) {
  for (const auto& [v, t] : table)
    if (v == value) return t;
  return otherwise;
}

template <class E>
const char* enum_name(E value, std::initializer_list<std::pair<E, const char*>> names) {
  return enum_lookup<E, const char*>(value, names, "?");
}

}  // namespace ppsim
