// JSON null where a figure is absent: an empty optional, or a value whose own sentinel says "none".
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

namespace ppsim {

template <class T>
nlohmann::json or_null(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

template <class T>
nlohmann::json or_null(bool present, const T& v) {
  return present ? nlohmann::json(v) : nlohmann::json(nullptr);
}

}  // namespace ppsim
