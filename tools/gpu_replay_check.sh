#!/usr/bin/env bash
# Issue 47 on a multi-GPU machine, in one call (tools/gpu_validate.sh with MODE=replay runs it):
# build ppsim and ppsim_tests, repeat the replay test (its order checks and its checking mode:
# every consumer must read its producer's bytes; peer and nccl transports), then `ppsim validate`
# with the replay's own mechanics switched (PPSIM_REPLAY_CLOCK=gate|barrier, PPSIM_REPLAY_WAITS=
# event|value: src/cuda_validate/gpu_api.h) at the shapes asked for. The last lines are a
# table: per schedule, the makespan error of each variant.
# Env: REPLAY_RUNS (10: the test with the defaults), REPLAY_BARRIER_RUNS (3: with barrier clocks),
#   REPLAY_VALUE_RUNS (3: with value waits), REPLAY_GRAPH_RUNS (0: with each action one CUDA graph,
#   PPSIM_REPLAY_LAUNCH=graphs), GRAPH_TESTS (1: the GPU tests of the graph launch, once),
#   RUNS (the validate runs, space-separated SHAPE:CLOCK:WAITS[:TRANSPORT[:LAUNCH]] (TRANSPORT peer,
#   nccl, or mpi: under mpirun -np NGPU; LAUNCH streams or graphs: validate --launch),
#   default "small:barrier:event small:gate:event small:gate:value";
#   SHAPE "small" is configs/small-${NGPU}gpu.yaml, "seq4096" the same with seq 4096, hidden 2048,
#   16 heads), SCHEDULES (the six families), NGPU (2), VALIDATE_TIMEOUT (validate --timeout, 60),
#   SKIP_BUILD (1: reuse build-gpu), VALIDATE_ARGS (more validate flags, e.g. --co-run off), TRACES (1: each
#   validate's --trace into $OUT). Two GPUs in one process: each run's table has its prediction with the co-run
#   model and, in the column ending "/plain", without it (the same replay); with --co-run sustained (the
#   default) also "/full": the co-run model at 100% duty (--co-run full); "/nodelays": without the replay's
#   own delays that the link probe measured (the reported prediction has them); "/nonccl" (--transport nccl):
#   without the NCCL kernels' share; "/profstep" (ranks sharing a GPU, NGPU=1): with the sharing profile's step
#   instead of the replay's fit (--sharing uniform); "/fitonly" (NGPU=1): the fit for ops of one kind started together too.
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
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm --format=csv,noheader
T="replay runs 1F1B*"  # Catch2 splits a filter at commas: the test's name up to its first
# order_runs N LABEL [ENV...]: the replay test N times; prints the passes and, per transport, the
# earliest consumer (us after its producer's end; negative: it began before) and checksum mismatches.
order_runs() {
  local n=$1 label=$2 pass=0 f all; shift 2
  all=$OUT/tmp/order_${label}.txt
  for i in $(seq 1 "$n"); do
    f=$OUT/tmp/order_${label}_$i.txt
    env "$@" timeout 150 "$BUILD/ppsim_tests" "$T" > "$f" 2>&1 && pass=$((pass + 1)) ||
      { echo "== $label run $i"; grep -E -B2 -A6 "FAILED|error|with expansion" "$f" | head -60; } \
        >> "$OUT/order_failures.txt"
    cat "$f" >> "$all"
  done
  local worst bad verified
  worst=$(awk '/earliest consumer/ {
      for (i = 1; i <= NF; ++i) if ($i == "consumer") {
        t = $0; sub(/.*GPU\(s\), /, "", t); sub(/:.*/, "", t); v = $(i + 1) + 0
        if (!(t in w) || v < w[t]) w[t] = v
      }
    } END {for (t in w) printf "%s %+.1f us; ", t, w[t]}' "$all")
  bad=$(grep -c "read other bytes" "$all")
  verified=$(grep -ho "[0-9]* messages verified" "$all" | awk '{s += $1} END {print s + 0}')
  echo "replay test, $label: $pass of $n passed; earliest consumer after its producer's end: ${worst:-?}" \
    "checksum mismatches: $bad; $verified messages verified (after $(el))" | tee -a "$OUT/order_summary.txt"
}
: > "$OUT/order_summary.txt"
if [ "${REPLAY_RUNS:-10}" -gt 0 ]; then
  order_runs "${REPLAY_RUNS:-10}" gate
  [ "${REPLAY_BARRIER_RUNS:-3}" -gt 0 ] && order_runs "${REPLAY_BARRIER_RUNS:-3}" barrier PPSIM_REPLAY_CLOCK=barrier
  [ "${REPLAY_VALUE_RUNS:-3}" -gt 0 ] && order_runs "${REPLAY_VALUE_RUNS:-3}" value PPSIM_REPLAY_WAITS=value
fi
[ "${REPLAY_GRAPH_RUNS:-0}" -gt 0 ] && order_runs "${REPLAY_GRAPH_RUNS:-0}" graphs PPSIM_REPLAY_LAUNCH=graphs
if [ "${GRAPH_TESTS:-1}" = 1 ]; then
  for t in "graph launch*" "replay with each action one CUDA graph*"; do
    timeout 150 "$BUILD/ppsim_tests" "$t" > "$OUT/tmp/graph_test.txt" 2>&1
    echo "GPU test '$t': exit $? after $(el)" | tee -a "$OUT/order_summary.txt"
    grep -E "^replay |FAILED|passed|failed|with expansion|REQUIRE|CHECK|error" "$OUT/tmp/graph_test.txt" | head -30 \
      | tee -a "$OUT/order_summary.txt"
  done
fi
S=${SCHEDULES:-1f1b,zb-h1,zbv,chimera,dualpipe,dualpipev}
N=${NGPU:-2}
: > "$OUT/table.txt"
k=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
for v in ${RUNS:-small:barrier:event small:gate:event small:gate:value}; do
  IFS=: read -r shape clock waits transport launch <<< "$v"
  transport=${transport:-peer}
  launch=${launch:-streams}
  ARGS=()
  [ "$shape" = seq4096 ] && ARGS=(--set model.seq_len=4096 --set model.hidden=2048 --set model.heads=16)
  k=$((k + 1))
  f="$OUT/tmp/validate_${k}.txt"
  # transport "mpi": one process per GPU under mpirun (CUDA IPC between them)
  PRE=(); WHERE=(--devices "$N" --transport "$transport")
  if [ "$transport" = mpi ]; then
    PRE=(mpirun --allow-run-as-root -np "$N" --bind-to none -x PPSIM_REPLAY_CLOCK -x PPSIM_REPLAY_WAITS)
    WHERE=()
  fi
  TRACE=()
  [ "${TRACES:-0}" = 1 ] && TRACE=(--trace "$OUT/trace_${k}_${shape}_${transport}.json")
  PPSIM_REPLAY_CLOCK=$clock PPSIM_REPLAY_WAITS=$waits timeout 240 "${PRE[@]}" "$BUILD/ppsim" validate \
    --timeout "${VALIDATE_TIMEOUT:-60}" "$ROOT/configs/small-${N}gpu.yaml" -s "$S" "${WHERE[@]}" "${ARGS[@]}" \
    --launch "$launch" ${VALIDATE_ARGS:-} "${TRACE[@]}" -o "$f" < /dev/null > "$OUT/tmp/validate.log" 2>&1
  echo "validate $shape clock=$clock waits=$waits transport=$transport launch=$launch (run $k): exit $? after $(el)"
  tail -2 "$OUT/tmp/validate.log"
  # The summary, then (two GPUs in one process) the same without the co-run model: column "/plain".
  awk -v col="$k:$shape/$clock/$waits/$transport/$launch" '/^summary \(makespan\):/ {on=1; getline; next}
    /^without the co-run model/ {on=2; next} /^at 100% duty/ {on=3; next} /^without the replay.s delays/ {on=4; next}
    /^without the NCCL kernels. share/ {on=5; next} /^with the sharing profile.s step/ {on=6; next} /^with the replay.s fit for ops of one kind/ {on=7; next}
    /^$/ {on=0}
    on && NF >= 4 && $1 !~ /^skipped/ {print $1, col (on == 2 ? "/plain" : on == 3 ? "/full" : on == 4 ? "/nodelays" : on == 5 ? "/nonccl" : on == 6 ? "/profstep" : on == 7 ? "/fitonly" : ""), $2, $3, $4,
      ($5 == "host-bound" ? "HB" : "")}' "$f" \
    | tee -a "$OUT/table.txt"
  { echo "== $shape clock=$clock waits=$waits transport=$transport launch=$launch"; cat "$f"; } >> "$OUT/validate.txt" 2>/dev/null
done
rm -rf "$OUT/tmp" "$OUT/build.log" "$OUT/summary.txt"
if [ "${TRACES:-0}" = 1 ]; then  # where each run's error sits: op time or idle (tools/validate_residuals.py)
  for t in "$OUT"/trace_*.json; do
    [ -f "$t" ] && { echo "== residuals: $(basename "$t")"; python3 "$ROOT/tools/validate_residuals.py" "$t"; }
  done > "$OUT/residuals.txt" 2>&1
fi
echo "== order (replay test)"; cat "$OUT/order_summary.txt"
echo "== makespan error by variant (shape/clock/waits/transport/launch: predicted ms, measured ms, error; HB: host-bound)"
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
