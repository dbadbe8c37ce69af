#!/usr/bin/env bash
# Builds the HTML report's engine: src/core, src/schedules, src/sim and the unit-cost path of
# src/api (api::run, the same code as `ppsim compare`), compiled to WebAssembly with Debian's
# emscripten (tools/install-test-extras.sh installs it) by the CMake project web/CMakeLists.txt,
# into build-wasm/ppsim_engine.js: one file, the wasm inside as base64. The main CMake build
# embeds that file in every --html page when it exists at configure time (PPSIM_WASM_ENGINE):
# reconfigure after building it. Header-only fmt (FMT_HEADER_ONLY), Boost.Graph and nlohmann
# from the system. Without em++ it says so and exits 0: the pages then show their precomputed data.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-wasm}
if ! command -v emcmake >/dev/null 2>&1 || ! command -v em++ >/dev/null 2>&1; then
  echo "build_wasm: emscripten not found (tools/install-test-extras.sh installs it); the report has no engine" >&2
  exit 0
fi
# emscripten's JavaScript optimizer needs Debian's node-acorn, under /usr/share/nodejs: a node
# that is not Debian's (e.g. /usr/bin/node from NodeSource) does not look there by itself.
export NODE_PATH="/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}"
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
[ -f "$out/CMakeCache.txt" ] || emcmake cmake -S web -B "$out" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$out" -j "${JOBS:-$(nproc 2>/dev/null || echo 2)}"
echo "build_wasm: $out/ppsim_engine.js ($(stat -c %s "$out/ppsim_engine.js") bytes)"
