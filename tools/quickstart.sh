#!/usr/bin/env bash
# README command 1: install dependencies, build, and run the main job on the embedded default
# (`ppsim compare`: the DualPipe paper's setting P=8, M=20, F=1, B=2, W=1, F&B=3).
# Builds the CLI, the Python module (so that PYTHONPATH=build/python imports, and `pip install .`
# reuses this tree: docs/PYTHON.md) and, where emscripten is installed (install-deps.sh installs
# it when apt can), the HTML report's in-page engine (tools/build_wasm.sh), before configuring so
# that every --html page embeds it. Build output goes to stderr; stdout is compare's report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
bash tools/build_wasm.sh >&2 || echo "quickstart: the page engine did not build (see above); --html pages will say so" >&2
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
targets=(ppsim)
[ -f build/python/python_executable.txt ] && targets+=(ppsim_python)
cmake --build build -j "$(nproc 2>/dev/null || echo 2)" --target "${targets[@]}" >&2
./build/ppsim compare
