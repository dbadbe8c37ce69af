#!/usr/bin/env bash
# On a GPU machine: build (via tools/gpu_check.sh's quick mode: build + GPU tests), then
# `ppsim profile` and `ppsim validate` on the small configs, on all GPUs and on one GPU.
# Results go to $OUT (default ./gpu-validate-out): validate_<n>gpu.txt/.json, trace_<n>gpu.json,
# profile.yaml, compare_profile.txt. The last lines printed are the summary tables.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-validate-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
GPU_CHECK_QUICK=1 GPU_CHECK_BUDGET=${GPU_CHECK_BUDGET:-240} bash "$ROOT/tools/gpu_check.sh" > "$OUT/gpu_check.txt" 2>&1
echo "gpu_check exit $?"; tail -5 "$OUT/gpu_check.txt"
P=$ROOT/build-gpu/ppsim
[ -x "$P" ] || { echo "no ppsim binary"; exit 1; }
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
S=${SCHEDULES:-1f1b,zb-h1,zbv,chimera,dualpipe,dualpipev}
timeout 120 "$P" profile "$ROOT/configs/small-2gpu.yaml" -o "$OUT/profile.yaml" 2>&1 | tail -2
sed "s|^name: .*|name: small-2gpu-profiled|" "$ROOT/configs/small-2gpu.yaml" > "$OUT/profiled.yaml"
echo "profile: $OUT/profile.yaml" >> "$OUT/profiled.yaml"
timeout 60 "$P" compare "$OUT/profiled.yaml" -s 1f1b,dualpipe > "$OUT/compare_profile.txt" 2>&1; echo "compare with profile: exit $?"
if [ "$ngpu" -ge 2 ]; then
  timeout 240 "$P" validate "$ROOT/configs/small-2gpu.yaml" -s "$S" --devices 2 --trace "$OUT/trace_2gpu.json" -o "$OUT/validate_2gpu.txt" 2>&1 | tail -3
  timeout 60 "$P" validate "$ROOT/configs/small-2gpu.yaml" -s 1f1b,dualpipe --devices 2 --format json -o "$OUT/validate_2gpu.json" 2>&1 | tail -3
fi
timeout 240 "$P" validate "$ROOT/configs/small-1gpu.yaml" -s "$S" --devices 1 --trace "$OUT/trace_1gpu.json" -o "$OUT/validate_1gpu.txt" 2>&1 | tail -3
for f in "$OUT"/validate_*gpu.txt; do echo "== $f"; sed -n '/^summary/,$p' "$f"; done
