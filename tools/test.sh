#!/usr/bin/env bash
# Runs every test, as CI does: installs dependencies, then
#   pass 1: a warnings-as-errors build with the CUDA back-end (when nvcc exists: CI compiles it
#           for sm_90a; GPU tests skip with a printed reason where no GPU is present), ctest,
#           every config in configs/ through `ppsim compare`, and a check that the binary holds
#           the CUDA back-end's object code;
#   pass 2: AddressSanitizer + UndefinedBehaviorSanitizer build (host code; -O1 -g1, which
#           compiles in half the time of -O2 -g), ctest again;
#   pass 3: each libFuzzer target for 20 s (tools/fuzz.sh --ci) where clang's libFuzzer exists.
# Build trees: build-test/, build-asan/, build-fuzz/. PPSIM_TEST_QUICK=1 skips passes 2 and 3.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

bash tools/install-deps.sh
if [ -f tools/install-test-extras.sh ]; then bash tools/install-test-extras.sh || echo "test extras not installed; those tests skip"; fi

# The HTML report's in-page engine (WebAssembly), when the test extras brought emscripten:
# build-test embeds it and tools/browser_test.py (CTest browser_report) re-simulates in the page.
wasm=()
if command -v em++ >/dev/null 2>&1; then
  echo "== WebAssembly engine (tools/build_wasm.sh)"
  bash tools/build_wasm.sh build-wasm-test
  wasm=(-DPPSIM_WASM_ENGINE="$PWD/build-wasm-test/ppsim_engine.js")
fi
echo "== pass 1: -Werror build, CUDA back-end ${PPSIM_CUDA:-AUTO}"
cmake -S . -B build-test -G Ninja -DCMAKE_BUILD_TYPE=Release -DPPSIM_WERROR=ON -DPPSIM_CUDA="${PPSIM_CUDA:-AUTO}" -DPPSIM_PYTHON=ON "${wasm[@]}" >/dev/null
cmake --build build-test -j "$jobs"
ctest --test-dir build-test --output-on-failure -j "$jobs"
# The Python module's tests (python/tests), with the interpreter the module was built for.
[ -f build-test/python/python_executable.txt ] || { echo "the Python module was not built (needs python3-dev and pybind11-dev: tools/install-deps.sh)" >&2; exit 1; }
py=$(cat build-test/python/python_executable.txt)
"$py" -c "import pytest" 2>/dev/null || { echo "pytest is not installed for $py (apt install python3-pytest: tools/install-deps.sh)" >&2; exit 1; }
echo "== pytest python/tests ($py)"
PYTHONPATH=build-test/python PPSIM_BINARY=build-test/ppsim "$py" -m pytest -q python/tests
# (ctest above ran tools/check_pip_install.sh, CTest pip_install: `pip install .` in bare venvs of
# python3 and Debian's, no index, packaging build-test: no system fmt/yaml-cpp/toml++/MPI linked,
# imports, the console script runs; and tools/check_notebook.sh, python_notebook.)
# The same tests against the package `pip install .` installs into a fresh
# venv (docs/PYTHON.md), with build-test's binary and module (PPSIM_BUILD_DIR); the console script is
# the CLI the tests compare with. python/ppsim is not on sys.path (the root has no ppsim/), so the
# installed package is what the tests import; the check after them says so.
venv=$(mktemp -d)/venv
"$py" -m venv --system-site-packages "$venv"
echo "== pip install . (venv $venv)"
PPSIM_BUILD_DIR=build-test "$venv/bin/pip" install -q --no-deps --no-index . >/dev/null
"$venv/bin/ppsim" --version
"$venv/bin/python" -m ppsim compare >/dev/null
echo "== pytest python/tests (the installed package)"
PPSIM_BINARY="$venv/bin/ppsim" "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests
"$venv/bin/python" - <<'PY'
import ppsim, pathlib
assert "site-packages" in ppsim.__file__, ppsim.__file__  # the installed package, not the tree's
print("installed:", pathlib.Path(ppsim.__file__).parent)
PY
rm -rf "$(dirname "$venv")"
if [ -f build-test/libppsim_cuda.a ]; then
  echo "== GPU tests here (they skip, with the reason, where no GPU is present):"
  ./build-test/ppsim_tests "[gpu]" 2>&1 | grep -i -m 3 "skipped" || true
fi

for cfg in configs/*.yaml; do
  [ -e "$cfg" ] || continue
  echo "== config $cfg"
  ./build-test/ppsim compare "$cfg" >/dev/null
done
if [ -f build-test/libppsim_cuda.a ]; then
  # The CUDA back-end's device code lives in the .nv_fatbin section of libppsim_gpu.so, which
  # ppsim opens for GPU commands only (cuobjdump, when installed, also lists its sm_90a images).
  hex=$(readelf -S --wide build-test/libppsim_gpu.so | awk '$2 == ".nv_fatbin" {print $6}')
  size=$(( 16#${hex:-0} ))
  echo "== CUDA device code in libppsim_gpu.so: .nv_fatbin of ${size:-0} bytes"
  [ "${size:-0}" -gt 0 ] || { echo "libppsim_gpu.so was built without CUDA device code" >&2; exit 1; }
  if [ -x /usr/local/cuda/bin/cuobjdump ]; then
    /usr/local/cuda/bin/cuobjdump --list-elf build-test/libppsim_gpu.so | grep -c sm_90a | sed 's/^/   sm_90a ELF images: /'
  fi
  # CPU commands must not load the CUDA libraries (they are the .so's, not the binary's).
  if ldd build-test/ppsim | grep -E "libcudart|libcublas|libcudnn|libnccl"; then
    echo "ppsim links a CUDA library at start; it belongs in libppsim_gpu.so" >&2; exit 1
  fi
fi

if [ "${PPSIM_TEST_QUICK:-0}" != "1" ]; then
  echo "== pass 1 done after ${SECONDS} s"
  echo "== One Definition Rule: ppsim linked with -flto -Werror=odr (build-odr)"
  # -O0: the link-time optimizer's type merging finds an ODR violation at any -O (checked with
  # two TUs' ppsim::Candidate at -O0, -O1, -O3); without optimizing, the LTO link takes seconds.
  cmake -S . -B build-odr -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O0" -DPPSIM_ODR_CHECK=ON \
    -DPPSIM_CUDA=OFF -DPPSIM_PYTHON=OFF -DPPSIM_BUILD_TESTS=OFF -DPPSIM_BUILD_BENCH=OFF >/dev/null
  cmake --build build-odr -j "$jobs" --target ppsim
  echo "== pass 2: AddressSanitizer + UndefinedBehaviorSanitizer"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DPPSIM_SANITIZE=ON -DPPSIM_CUDA=OFF \
    -DPPSIM_WERROR=ON -DPPSIM_BUILD_BENCH=OFF -DPPSIM_PYTHON=OFF >/dev/null
  cmake --build build-asan -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-asan --output-on-failure -j "$jobs"
fi
if [ "${PPSIM_TEST_QUICK:-0}" != "1" ]; then
  # pass 3: each libFuzzer target briefly (tools/fuzz.sh --ci), where clang's libFuzzer exists.
  probe=$(mktemp -d)
  printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' > "$probe/p.cc"
  if command -v clang++ >/dev/null 2>&1 && clang++ -fsanitize=fuzzer "$probe/p.cc" -o "$probe/p" >/dev/null 2>&1; then
    echo "== pass 2 done after ${SECONDS} s; pass 3: fuzz targets, 20 s each"
    bash tools/fuzz.sh --ci
  else
    echo "== pass 3 skipped: clang++ with libFuzzer not available"
  fi
  rm -rf "$probe"
fi
echo "== all tests passed (${SECONDS} s)"
