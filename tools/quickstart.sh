#!/usr/bin/env bash
# README command 1: install dependencies, build, and run the main job on the embedded default
# (`ppsim compare`: the DualPipe paper's setting P=8, M=20, F=1, B=2, W=1, F&B=3).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc 2>/dev/null || echo 2)" --target ppsim
./build/ppsim compare
