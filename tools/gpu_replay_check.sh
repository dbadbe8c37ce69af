#!/usr/bin/env bash
# Issue 47 on a multi-GPU machine, in one call (tools/gpu_validate.sh with MODE=replay runs it):
# build ppsim and ppsim_tests, repeat the replay test (its order checks and its checking mode:
# every consumer must read its producer's bytes; peer and nccl transports), then `ppsim validate`
# with the replay's own mechanics switched (PPSIM_REPLAY_CLOCK=gate|barrier, PPSIM_REPLAY_WAITS=
# event|value: src/cuda_validate/replay_switches.h) at the shapes asked for. The last lines are a
# table: per schedule, the makespan error of each variant.
# Env: REPLAY_RUNS (10: the test with the defaults), REPLAY_BARRIER_RUNS (3: with barrier clocks),
#   VARIANTS (space-separated CLOCK:WAITS[:TRANSPORT], default "barrier:event gate:event gate:value"),
#   SHAPES ("small": configs/small-2gpu.yaml; "seq4096": the same with seq 4096, hidden 2048,
#   16 heads), SCHEDULES (the six families), NGPU (2), SKIP_BUILD (1: reuse build-gpu).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-validate-out}
BUILD=$ROOT/build-gpu
mkdir -p "$OUT/tmp"
export NCCL_NVLS_ENABLE=0
START=$(date +%s)
el() { echo "$(( $(date +%s) - START )) s"; }
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  GPU_CHECK_TARGETS="ppsim ppsim_tests" GPU_CHECK_TESTS=none GPU_CHECK_BUDGET=${GPU_CHECK_BUDGET:-330} \
    bash "$ROOT/tools/gpu_check.sh" > "$OUT/gpu_check.txt" 2>&1
  echo "build: exit $? after $(el)"; grep -E "error|FAILED" "$OUT/gpu_check.txt" | head -5
fi
[ -x "$BUILD/ppsim" ] && [ -x "$BUILD/ppsim_tests" ] || { echo "no binaries"; tail -20 "$OUT/gpu_check.txt"; exit 1; }
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/gpus.txt"
T="replay runs 1F1B, ZB-H1, DualPipe and DualPipeV schedules and measures a consistent timeline"
# order_runs N LABEL [ENV...]: the replay test N times; prints passes and the earliest consumer.
order_runs() {
  local n=$1 label=$2 pass=0; shift 2
  for i in $(seq 1 "$n"); do
    env "$@" timeout 150 "$BUILD/ppsim_tests" "$T" > "$OUT/tmp/order_${label}_$i.txt" 2>&1 && pass=$((pass + 1))
    cat "$OUT/tmp/order_${label}_$i.txt" >> "$OUT/order_${label}.txt"
  done
  local worst
  worst=$(grep -ho "earliest consumer [-+0-9.]* us" "$OUT/order_${label}.txt" | awk '{print $3}' | sort -g | head -1)
  local bad
  bad=$(grep -c "read other bytes" "$OUT/order_${label}.txt")
  echo "replay test, $label: $pass of $n passed; earliest consumer ${worst:-?} us after its producer's end;" \
       "checksum mismatches: $bad (after $(el))" | tee -a "$OUT/order_summary.txt"
}
: > "$OUT/order_summary.txt"
order_runs "${REPLAY_RUNS:-10}" gate
[ "${REPLAY_BARRIER_RUNS:-3}" -gt 0 ] && order_runs "${REPLAY_BARRIER_RUNS:-3}" barrier PPSIM_REPLAY_CLOCK=barrier
[ "${REPLAY_VALUE_RUNS:-3}" -gt 0 ] && order_runs "${REPLAY_VALUE_RUNS:-3}" value PPSIM_REPLAY_WAITS=value
S=${SCHEDULES:-1f1b,zb-h1,zbv,chimera,dualpipe,dualpipev}
N=${NGPU:-2}
: > "$OUT/table.txt"
for shape in ${SHAPES:-small}; do
  ARGS=()
  [ "$shape" = seq4096 ] && ARGS=(--set model.seq_len=4096 --set model.hidden=2048 --set model.heads=16)
  for v in ${VARIANTS:-barrier:event gate:event gate:value}; do
    IFS=: read -r clock waits transport <<< "$v"
    f="$OUT/validate_${shape}_${clock}_${waits}_${transport:-peer}.txt"
    PPSIM_REPLAY_CLOCK=$clock PPSIM_REPLAY_WAITS=$waits timeout 240 "$BUILD/ppsim" validate \
      "$ROOT/configs/small-${N}gpu.yaml" -s "$S" --devices "$N" --transport "${transport:-peer}" "${ARGS[@]}" \
      -o "$f" > "$OUT/tmp/validate.log" 2>&1
    echo "validate $shape clock=$clock waits=$waits transport=${transport:-peer}: exit $? after $(el)"
    tail -2 "$OUT/tmp/validate.log"
    awk -v col="$shape/$clock/$waits/${transport:-peer}" '/^summary \(makespan\):/ {on=1; getline; next}
      on && NF >= 4 && $1 !~ /^skipped/ {print $1, col, $2, $3, $4, ($5 == "host-bound" ? "HB" : "")}' "$f" \
      >> "$OUT/table.txt" 2>/dev/null
  done
done
rm -rf "$OUT/tmp"
echo "== order (replay test)"; cat "$OUT/order_summary.txt"
echo "== makespan error by variant (shape/clock/waits/transport: predicted ms, measured ms, error; HB: host-bound)"
python3 - "$OUT/table.txt" <<'PY'
import sys
rows, cols, cell = [], [], {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 5: continue
    if f[0] not in rows: rows.append(f[0])
    if f[1] not in cols: cols.append(f[1])
    cell[f[0], f[1]] = f"{f[4]}{' HB' if len(f) > 5 else ''} ({f[2]}/{f[3]})"
print(f"{'schedule':<10}" + "".join(f" | {c:<30}" for c in cols))
for r in rows: print(f"{r:<10}" + "".join(f" | {cell.get((r, c), '-'):<30}" for c in cols))
PY
