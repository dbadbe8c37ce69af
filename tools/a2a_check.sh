#!/usr/bin/env bash
# One call on a GPU machine for the expert-parallel all-to-all (issue 18): build (sm_90a), the
# host-side plan tests ([ep]), the GPU correctness tests ("a2a*": one GPU with two EP ranks as two
# buffer sets, and across two GPUs with peer access when two are visible; "*ep=2*": a chunk split
# over two EP ranks against one chunk with every expert), then bench/a2a_bench:
# ours vs NCCL at 20, 8 and 4 SMs from 1 MiB to 256 MiB per rank, and a 4096^3 GEMM loop beside
# each. One bench process per SM count, with NCCL_MAX_NCHANNELS set to it (NCCL reads it once per
# process; the bench also caps each communicator with ncclConfig_t maxCTAs).
# Files go to $OUT (default ./a2a-check-out): build.log, tests.txt, bench_<sms>.txt, summary.txt.
#   usage: bash tools/a2a_check.sh                       (from anywhere)
#          A2A_SMS="20" A2A_MIB="4,64" bash tools/a2a_check.sh   (a shorter bench)
#          A2A_PLAIN=1 bash tools/a2a_check.sh     (also the bench without the PTX forms, own build dir)
# Exit code: 0 when the build and the tests passed (the bench's figures are for the docs).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/a2a-check-out}
BUILD=${BUILD:-$ROOT/build-gpu}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
START=$(date +%s)

nvidia-smi --query-gpu=index,name,clocks.max.sm --format=csv 2>&1 | tee "$OUT/build.log"
nvidia-smi topo -m 2>&1 | head -6 | tee -a "$OUT/build.log"
if cmake -S "$ROOT" -B "$BUILD" -G Ninja -DPPSIM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release \
     >> "$OUT/build.log" 2>&1 && timeout 500 ninja -C "$BUILD" -j"$(nproc)" ppsim_tests a2a_bench >> "$OUT/build.log" 2>&1; then
  note "build: ok after $(( $(date +%s) - START )) s"
else
  note "build: FAILED (see $OUT/build.log)"; grep -E "error|FAILED" "$OUT/build.log" | head -20; exit 1
fi

TESTS_OK=0
timeout 300 "$BUILD/ppsim_tests" "[ep],a2a*,*ep=2*,ChunkShape refuses*" --durations yes > "$OUT/tests.txt" 2>&1 && TESTS_OK=1
# The lines that say what was checked and why a check failed or was skipped.
grep -E "^a2a |^chunk ep=2 |FAILED|failed|skipped|no GPU|status|blocks that ran|relative L2|test cases" "$OUT/tests.txt" | head -40
note "tests ([ep], a2a*, chunk ep=2): $([ $TESTS_OK = 1 ] && echo passed || echo FAILED) ($(tail -2 "$OUT/tests.txt" | head -1))"

for sms in ${A2A_SMS:-20 8 4}; do
  NCCL_MAX_NCHANNELS=$sms NCCL_MAX_P2P_NCHANNELS=$sms timeout 240 "$BUILD/a2a_bench" --sms "$sms" \
    --mib "${A2A_MIB:-1,2,4,8,16,32,64,128,256}" > "$OUT/bench_$sms.txt" 2>&1
  note "bench at $sms SMs: exit $? ($OUT/bench_$sms.txt)"
  cat "$OUT/bench_$sms.txt"
done
# A2A_PLAIN=1: the same bench (ours, 20 SMs) built with plain loads/stores and fenced volatile
# flags instead of the PTX forms (kernels/a2a.cuh, PPSIM_A2A_PLAIN): what the PTX buys.
if [ "${A2A_PLAIN:-0}" = 1 ]; then
  PLAIN=${BUILD}-a2a-plain
  if cmake -S "$ROOT" -B "$PLAIN" -G Ninja -DPPSIM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_BUILD_TYPE=Release \
       -DCMAKE_CUDA_FLAGS=-DPPSIM_A2A_PLAIN=1 -DPPSIM_BUILD_TESTS=OFF >> "$OUT/build.log" 2>&1 &&
     timeout 500 ninja -C "$PLAIN" -j"$(nproc)" a2a_bench >> "$OUT/build.log" 2>&1; then
    timeout 240 "$PLAIN/a2a_bench" --a2a ours --sms 20 --mib "${A2A_MIB:-1,4,16,64,256}" > "$OUT/bench_plain_20.txt" 2>&1
    note "bench without the PTX forms, 20 SMs: exit $? ($OUT/bench_plain_20.txt)"
    cat "$OUT/bench_plain_20.txt"
  else
    note "plain build: FAILED (see $OUT/build.log)"
  fi
fi
note "done in $(( $(date +%s) - START )) s"
[ $TESTS_OK = 1 ]
