#!/usr/bin/env bash
# Does a one-GPU replay's error follow the schedule or its place in the run? Issue 47, one GPU:
# `ppsim validate` at seq 4096 (and the small shape) with the six families in their usual order and
# reversed, the GPU's clock, power and temperature sampled every 50 ms beside them. Writes
# $OUT/replay_order.tgz (each run's table, validate output, traces and residuals; clock.csv, and marks.txt
# with "<label> <unix time>" at each run's start and end) and prints the tables last.
#   run on the device: OUT=$OUT bash tools/experiments/replay_order.sh   (carry .deps)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/replay_order}
W=$OUT/work
mkdir -p "$W"
FWD=1f1b,zb-h1,zbv,chimera,dualpipe,dualpipev
REV=dualpipev,dualpipe,chimera,zbv,zb-h1,1f1b
CLOCK=$W/clock.csv
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv,noheader -lms 50 > "$CLOCK" 2>&1 &
SMI=$!
mark() { echo "$1 $(date +%s.%N)" >> "$W/marks.txt"; }  # not into clock.csv: nvidia-smi writes over it
run() {  # label shape schedules [SKIP_BUILD]
  mark "$1-start"
  NGPU=1 MODE=replay REPLAY_RUNS=0 GRAPH_TESTS=0 TRACES=1 SKIP_BUILD=${4:-1} SCHEDULES=$3 \
    RUNS="$2:gate:value:peer:graphs" OUT="$W/$1" bash "$ROOT/tools/gpu_validate.sh" > "$W/$1.log" 2>&1
  mark "$1-end"
}
run seq_fwd seq4096 "$FWD" 0
run seq_rev seq4096 "$REV"
run small_rev small "$REV"
run seq_fwd2 seq4096 "$FWD"
kill "$SMI"
tar -C "$W" -czf "$OUT/replay_order.tgz" .
for r in seq_fwd seq_rev small_rev seq_fwd2; do echo "== $r"; cat "$W/$r/table.txt" 2>/dev/null || tail -5 "$W/$r.log"; done
