// One include for Catch2 v2 (Debian) and v3 (Ubuntu 24.04, the GPU machines).
// PPSIM_CONTAINS(text): the substring matcher (v3 renamed it ContainsSubstring).
// PPSIM_SKIP(msg) marks a test skipped in v3 and prints the reason (then returns) in v2.
#pragma once
#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_all.hpp>
#define PPSIM_SKIP(msg) SKIP(msg)
#define PPSIM_CONTAINS(text) Catch::Matchers::ContainsSubstring(text)
using Catch::Approx;  // v2 has it at global scope
#else
#include <catch2/catch.hpp>
#define PPSIM_CONTAINS(text) Catch::Matchers::Contains(text)
#define PPSIM_SKIP(msg)                  \
  do {                                   \
    WARN("skipped: " << msg);            \
    return;                              \
  } while (0)
#endif
