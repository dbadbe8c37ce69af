#!/usr/bin/env bash
# The measurements behind docs/CALIBRATION.md "PyTorch's schedules on two GPUs, calibrated on one":
# PyTorch's six pipelining schedules on two GPUs at M = 8, 4 and 16 (a step time each, rank 0's CUDA
# events), one profiled step of each (per-layer ranges, for `ppsim calibrate CONFIG TRACE...`) and
# PyTorch's own order of each multi-stage schedule. Run on a host with 2 GPUs and torch >= 2.9:
#   tools/experiments/record_pp_calibration.sh OUTDIR
# writes OUTDIR/m{8,4,16}.tar: pp_runs.json (each timed step too), order_*.csv, pp_*_rank*.json.gz and
# the log, and OUTDIR/smi.csv (each GPU's SM clock, power and temperature once a second, time-stamped).
# STEADY_S (default 5): each schedule warms up for that many seconds of back-to-back steps, then its
# timed steps and its profiled step follow with no idle GPU between them (the power-limited steady
# state a training run is in); STEADY_S=0: the first recordings' form (3 warm-up steps, the profiled
# step and its export, then the timed steps starting on an idle GPU).
set -euo pipefail
out=${1:?usage: record_pp_calibration.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTHONUNBUFFERED=1
args=(--block llama --hidden 4096 --heads 32 --ffn 11008 --batch 4 --seq 2048 --stages-per-rank 2
      --layers-per-stage 2 --layer-ranges --orders --steady-s "${STEADY_S:-5}")
schedules=GPipe,1F1B,Interleaved1F1B,ZBVZeroBubble,DualPipeV,InterleavedZeroBubble
work=$(mktemp -d)
mkdir -p "$out"
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu --format=csv -lms 1000 >"$work/smi.csv" &
smi=$!
for m in 8 4 16; do
  mkdir -p "$work/m$m"
  torchrun --standalone --nproc-per-node 2 "$here/record_pp_traces.py" --out "$work/m$m" --microbatches "$m" \
    --schedules "$schedules" "${args[@]}" 2>&1 | tee "$work/m$m/log.txt" || echo "M = $m: failed (see log.txt)"
  tar cf "$out/m$m.tar" -C "$work" "m$m"
done
kill "$smi"
cp "$work/smi.csv" "$out/smi.csv"
