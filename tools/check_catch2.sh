#!/usr/bin/env bash
# Fails when a test names a Catch2 matcher that only one of the two Catch2 majors has: CI builds
# the tests with Debian's Catch2 v2, the GPU machines with v3 (Ubuntu 24.04), and v3 renamed
# Catch::Matchers::Contains (a substring) to ContainsSubstring (its Contains is a range matcher).
# tests/catch.h's PPSIM_CONTAINS(text) is the one spelling both build.
# Usage: tools/check_catch2.sh [ROOT]     (ROOT: the repository, default: this script's parent)
#        tools/check_catch2.sh --self-test (a v2-only spelling in a scratch tree must be caught)
# CTest runs both (tests "check_catch2" and "check_catch2_self_test").
set -euo pipefail

if [[ "${1:-}" == "--self-test" ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/tests/cost"
  printf 'CHECK_THROWS_WITH(f(), PPSIM_CONTAINS("x"));\n' > "$tmp/tests/cost/ok_test.cc"
  printf '// one line\nCHECK_THROWS_WITH(f(), Catch::Matchers::Contains("x"));\n' > "$tmp/tests/cost/bad_test.cc"
  if out=$("$0" "$tmp" 2>&1); then
    echo "self-test: Catch::Matchers::Contains( passed the check"; exit 1
  fi
  if [[ "$out" != *"tests/cost/bad_test.cc:2:"* || "$out" == *"ok_test.cc"* ]]; then
    echo "self-test: unexpected report: $out"; exit 1
  fi
  echo "self-test: caught: $out"
  exit 0
fi

root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
if hits=$(grep -rnE 'Matchers::(Contains|ContainsSubstring)\(' tests --include='*.cc' --include='*.h' |
          grep -v '^tests/catch\.h:'); then
  while IFS= read -r h; do
    echo "${h%%:*}:$(cut -d: -f2 <<<"$h"): a Catch2-major-specific matcher; use PPSIM_CONTAINS(text) (tests/catch.h)"
  done <<<"$hits"
  exit 1
fi
echo "tests: every substring matcher is PPSIM_CONTAINS"
