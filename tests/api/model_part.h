// One part of a `ppsim model` report (tests of src/api/model.cc).
#pragma once
#include <string>

#include "api/model.h"
#include "catch.h"

namespace ppsim::test {

inline double part(const api::ModelReport& r, const std::string& name, bool active = false) {
  for (const auto& p : r.parts)
    if (p.name == name) return active ? p.active : p.total;
  FAIL("no part " << name);
  return 0;
}

}  // namespace ppsim::test
