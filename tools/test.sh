#!/usr/bin/env bash
# Runs every test, as CI does: installs dependencies, then
#   pass 1: a warnings-as-errors build with the CUDA back-end (when nvcc exists: CI compiles it
#           for sm_90a; GPU tests skip with a printed reason where no GPU is present), ctest,
#           every config in configs/ through `ppsim compare`, and a check that the binary holds
#           the CUDA back-end's object code;
#   pass 2: AddressSanitizer + UndefinedBehaviorSanitizer build (host code), ctest again.
# Build trees: build-test/ and build-asan/. Set PPSIM_TEST_QUICK=1 to skip pass 2.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

bash tools/install-deps.sh
if [ -f tools/install-test-extras.sh ]; then bash tools/install-test-extras.sh || echo "test extras not installed; those tests skip"; fi

echo "== pass 1: -Werror build, CUDA back-end ${PPSIM_CUDA:-AUTO}"
cmake -S . -B build-test -G Ninja -DCMAKE_BUILD_TYPE=Release -DPPSIM_WERROR=ON -DPPSIM_CUDA="${PPSIM_CUDA:-AUTO}" >/dev/null
cmake --build build-test -j "$jobs"
ctest --test-dir build-test --output-on-failure -j "$jobs"

for cfg in configs/*.yaml; do
  [ -e "$cfg" ] || continue
  echo "== config $cfg"
  ./build-test/ppsim compare "$cfg" >/dev/null
done
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  if grep -q "PPSIM_HAVE_CUDA:INTERNAL=ON\|ppsim: CUDA back-end ON" build-test/CMakeCache.txt 2>/dev/null || [ -f build-test/libppsim_cuda.a ]; then
    n=$( (/usr/local/cuda/bin/cuobjdump --list-elf build-test/ppsim 2>/dev/null || true) | grep -c "sm_90a" || true)
    echo "== CUDA object code in ppsim: $n sm_90a ELF images"
    [ "$n" -gt 0 ] || { echo "ppsim was built without CUDA device code" >&2; exit 1; }
  fi
fi

if [ "${PPSIM_TEST_QUICK:-0}" != "1" ]; then
  echo "== pass 2: AddressSanitizer + UndefinedBehaviorSanitizer"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPPSIM_SANITIZE=ON -DPPSIM_CUDA=OFF \
    -DPPSIM_WERROR=ON -DPPSIM_BUILD_BENCH=OFF >/dev/null
  cmake --build build-asan -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-asan --output-on-failure -j "$jobs"
fi
echo "== all tests passed"
