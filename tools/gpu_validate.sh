#!/usr/bin/env bash
# On a GPU machine, in one call: build + GPU tests (tools/gpu_check.sh's quick mode), the
# simulator benchmark on one of the host's cores, then `ppsim validate` for every config that the
# GPUs present can hold: small-4gpu on 4 GPUs, small-2gpu on 2, small-1gpu on 1 (virtual ranks).
# Results go to $OUT (default ./gpu-validate-out): gpu_check.txt (+ its build.log, tests.txt,
# summary.txt), sim_bench.txt, validate.txt (every run's tables, one after another) and
# traces.tar.gz (trace_<n>gpu.json). The last lines printed are the summary tables.
# Then, where they apply: the same multi-GPU config with `--transport nccl` (the default is peer
# copies on the copy engines), and under mpirun (one process per GPU: CUDA IPC; on one GPU,
# `mpirun -np 1`, the refusal of two processes for one GPU, and the IPC path run functionally by
# two processes sharing the GPU with PPSIM_ALLOW_SHARED_GPU=1), and on one GPU the virtual ranks
# time-slicing the GPU (`--sm-split off`) beside the default (each rank on its own SM partition),
# and predicted with sharing by op kind (`--sharing kind`) beside the default; and compute-sanitizer
# (memcheck) over the replay and watchdog GPU tests.
# Env: SCHEDULES (default 1f1b,zb-h1,zbv,chimera,dualpipe,dualpipev), GPU_CHECK_BUDGET (330),
# VALIDATE_SETS ("4 2 1": which of the runs to do, by GPU count), VALIDATE_ARGS (more validate flags,
# e.g. --set model.seq_len=4096), VALIDATE_EXTRA ("nccl mpi ep searched timeslice kind sanitize python": the extra runs;
# "" for none; "a2a" adds tools/a2a_check.sh on 2+ GPUs). The ep extra: the hidden EP replay test,
# `validate --ep-replay` in one process, EP across two processes under mpirun (tests/cuda_validate/
# ep_ipc_check for ours and nccl, then validate; on one GPU the processes share it), and
# `--a2a nccl` on 2 GPUs (on one: its refusal); EP_SCHEDULES / EP_SCHEDULES_MORE pick the schedules,
# EP_HIDDEN_RUNS how often the hidden EP replay test runs (3);
# its summary (ep_summary.txt) is printed last, the logs of the multi-process runs in ep_logs.txt;
# EP_MPI_TIMEOUT bounds the multi-process validate (240 s; on one GPU it runs under MPS where
# nvidia-cuda-mps-control exists).
# The python extra (last): builds the module in build-gpu (pybind11 from python3 -m pybind11) and
# runs tools/python_gpu_check.py: ppsim.profile and ppsim.validate against `ppsim profile` and
# `ppsim validate --format json` on small-1gpu (python_summary.txt, printed last).
# Issue 18 on two GPUs, in one call: VALIDATE_SETS=2 VALIDATE_EXTRA="ep a2a" bash tools/gpu_validate.sh
# On one H100, the EP runs in under 10 minutes: SCHEDULES=1f1b VALIDATE_SETS=1 VALIDATE_EXTRA=ep
#   EP_SCHEDULES=1f1b,dualpipev EP_HIDDEN_RUNS=1 bash tools/gpu_validate.sh
# MODE=replay: issue 47's check instead (tools/gpu_replay_check.sh: build, the replay test repeated
# with its checking mode, validate with the replay's mechanics switched; its env applies).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ "${MODE:-}" = replay ] && exec bash "$ROOT/tools/gpu_replay_check.sh"
OUT=${OUT:-$ROOT/gpu-validate-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
START=$(date +%s)
GPU_CHECK_QUICK=1 GPU_CHECK_BUDGET=${GPU_CHECK_BUDGET:-330} bash "$ROOT/tools/gpu_check.sh" > "$OUT/gpu_check.txt" 2>&1
echo "gpu_check exit $? after $(( $(date +%s) - START )) s"; tail -4 "$OUT/gpu_check.txt"
P=$ROOT/build-gpu/ppsim
[ -x "$P" ] || { echo "no ppsim binary"; exit 1; }
if [ -x "$ROOT/build-gpu/sim_bench" ]; then
  lscpu | grep -m1 "Model name" > "$OUT/sim_bench.txt"
  timeout 60 taskset -c 1 "$ROOT/build-gpu/sim_bench" >> "$OUT/sim_bench.txt" 2>&1
  echo "sim_bench exit $? after $(( $(date +%s) - START )) s"
fi
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
# How the GPUs are connected, and which transport NCCL picks for the replay's send/recv.
{ nvidia-smi topo -m 2>&1 | head -8; } > "$OUT/topology.txt"
S=${SCHEDULES:-1f1b,zb-h1,zbv,chimera,dualpipe,dualpipev}
for n in ${VALIDATE_SETS:-4 2 1}; do
  [ "$ngpu" -ge "$n" ] || { echo "validate on $n GPUs skipped: $ngpu present"; continue; }
  mkdir -p "$OUT/tmp"
  [ "$n" = 2 ] && export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P,SHM,NET NCCL_DEBUG_FILE="$OUT/tmp/nccl.%h.%p.log"
  timeout 150 "$P" validate "$ROOT/configs/small-${n}gpu.yaml" -s "$S" --devices "$n" ${VALIDATE_ARGS:-} --trace "$OUT/tmp/trace_${n}gpu.json" \
    -o "$OUT/tmp/validate_${n}gpu.txt" 2>&1 | tail -3
  echo "validate on $n GPUs: exit ${PIPESTATUS[0]} after $(( $(date +%s) - START )) s"
  unset NCCL_DEBUG NCCL_DEBUG_SUBSYS NCCL_DEBUG_FILE
done
# Extra runs on the largest set that fits: the per-pair transport, and one process per GPU.
big=0
for n in ${VALIDATE_SETS:-4 2 1}; do [ "$ngpu" -ge "$n" ] && [ "$n" -gt "$big" ] && big=$n; done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
for extra in ${VALIDATE_EXTRA-nccl mpi ep searched timeslice kind sanitize python}; do
  [ "$big" -gt 0 ] || break
  cfg=$ROOT/configs/small-${big}gpu.yaml
  case $extra in
    nccl)
      [ "$big" -ge 2 ] || { echo "validate --transport nccl skipped: one GPU moves every message within itself"; continue; }
      timeout 150 "$P" validate "$cfg" -s "$S" --devices "$big" --transport nccl ${VALIDATE_ARGS:-} \
        -o "$OUT/tmp/validate_${big}gpu_nccl.txt" 2>&1 | tail -3
      echo "validate --transport nccl on $big GPUs: exit ${PIPESTATUS[0]} after $(( $(date +%s) - START )) s" ;;
    searched)  # a schedule `ppsim search` found (tests/golden), replayed like the families
      [ "$big" = 1 ] || continue
      timeout 150 "$P" validate "$cfg" --devices 1 --schedule-file "$ROOT/tests/golden/searched_small_1gpu_p2_m8.csv" \
        ${VALIDATE_ARGS:-} -o "$OUT/tmp/validate_1gpu_searched.txt" 2>&1 | tail -3
      echo "validate --schedule-file (searched, P=2 M=8) on 1 GPU: exit ${PIPESTATUS[0]} after $(( $(date +%s) - START )) s" ;;
    ep)  # expert parallelism: PP x EP = 2 x 2 shards, tokens exchanged by the all-to-all
      EPCFG=$ROOT/configs/small-2gpu-ep.yaml
      EPS=${EP_SCHEDULES:-1f1b,zb-h1,zbv,dualpipe,dualpipev}
      EPS2=${EP_SCHEDULES_MORE:-1f1b,dualpipev}  # the multi-process and NCCL runs
      eps() { echo "$*" | tee -a "$OUT/ep_summary.txt"; }
      # Last line of a validate output's summary table for a schedule: "name predicted measured error".
      epsum() { [ -f "$1" ] && awk '/^summary \(makespan\):/ {on=1; next} on && NF >= 4 {printf "      %s\n", $0}' "$1" | tee -a "$OUT/ep_summary.txt"; }
      : > "$OUT/ep_summary.txt"
      # The hidden test EP_HIDDEN_RUNS times, 3 by default (it deadlocked 3-4 times in 5 before
      # EpGroupSync, session 7).
      for i in $(seq 1 "${EP_HIDDEN_RUNS:-3}"); do
        CUDA_DEVICE_MAX_CONNECTIONS=32 timeout 90 "$ROOT/build-gpu/ppsim_tests" "[.ep-replay]" > "$OUT/tmp/ep_replay_test_$i.txt" 2>&1
        eps "EP replay test (hidden) run $i: exit $? after $(( $(date +%s) - START )) s"; grep -E "replay |FAILED|passed" "$OUT/tmp/ep_replay_test_$i.txt" | head -3
      done
      timeout 240 "$P" validate "$EPCFG" -s "$EPS" --ep-replay --devices "$big" ${VALIDATE_ARGS:-} \
        -o "$OUT/tmp/validate_${big}gpu_ep.txt" 2>&1 | tail -3
      eps "validate --ep-replay (one process, PP 2 x EP 2) on $big GPU(s): exit ${PIPESTATUS[0]} after $(( $(date +%s) - START )) s"
      epsum "$OUT/tmp/validate_${big}gpu_ep.txt"
      # Across processes (issue 18): EP shards in two processes, their receive buffers shared by
      # CUDA IPC, the handshake in shared memory. One GPU: both processes share it
      # (PPSIM_ALLOW_SHARED_GPU=1, time-sliced: functional only, timings mean nothing).
      if command -v mpirun >/dev/null; then
        SHARE=(); SPLIT=()
        [ "$ngpu" -lt 2 ] && SHARE=(-x PPSIM_ALLOW_SHARED_GPU=1) && SPLIT=(--sm-split off)
        MPI=(mpirun --allow-run-as-root -np 2 --bind-to none "${SHARE[@]}")
        timeout 120 ninja -C "$ROOT/build-gpu" ep_ipc_check > "$OUT/tmp/ep_ipc_build.txt" 2>&1 ||
          { eps "ep_ipc_check: not built (no MPI in this build?): $(tail -1 "$OUT/tmp/ep_ipc_build.txt")"; }
        if [ -x "$ROOT/build-gpu/ep_ipc_check" ]; then
          for b in ours nccl; do
            timeout 90 "${MPI[@]}" "$ROOT/build-gpu/ep_ipc_check" "$b" < /dev/null > "$OUT/tmp/ep_ipc_check_$b.txt" 2>&1
            eps "ep_ipc_check $b (2 processes, CUDA IPC$([ "$b" = nccl ] && echo ", NCCL over MPI")): exit $? after $(( $(date +%s) - START )) s"
            grep -E "skipped|FAILED|ep_ipc_check (ours|nccl): ok|\(ours|\(nccl|ppsim|error" "$OUT/tmp/ep_ipc_check_$b.txt" | grep -v ": ok: " | head -6 | sed 's/^/      /' | tee -a "$OUT/ep_summary.txt"
            { echo "== ep_ipc_check $b"; cat "$OUT/tmp/ep_ipc_check_$b.txt"; } >> "$OUT/ep_logs.txt"
          done
        fi
        # Two processes on one GPU run their kernels at once only under MPS: without it their
        # contexts time-slice, and every exchange's end spins until the peer's context gets its turn.
        MPS=""
        if [ "$ngpu" -lt 2 ] && command -v nvidia-cuda-mps-control >/dev/null; then
          export CUDA_MPS_PIPE_DIRECTORY=/tmp/ppsim-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/ppsim-mps-log
          mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
          nvidia-cuda-mps-control -d && MPS=", under MPS" && MPI+=(-x CUDA_MPS_PIPE_DIRECTORY -x CUDA_MPS_LOG_DIRECTORY)
        fi
        timeout "${EP_MPI_TIMEOUT:-240}" "${MPI[@]}" "$P" validate "$EPCFG" -s "$EPS2" --ep-replay "${SPLIT[@]}" ${VALIDATE_ARGS:-} \
          -o "$OUT/tmp/validate_${big}gpu_ep_mpi.txt" > "$OUT/tmp/ep_mpi_validate.txt" 2>&1
        rc=$?
        { echo "== mpirun -np 2 validate --ep-replay$MPS (exit $rc)"; tail -40 "$OUT/tmp/ep_mpi_validate.txt"; } >> "$OUT/ep_logs.txt"
        [ -n "$MPS" ] && { echo quit | nvidia-cuda-mps-control; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY; }
        eps "mpirun -np 2 validate --ep-replay (EP across processes$([ "$ngpu" -lt 2 ] && echo ", sharing one GPU$MPS: functional")): exit $rc after $(( $(date +%s) - START )) s"
        tail -3 "$OUT/tmp/ep_mpi_validate.txt" | sed 's/^/      /' | tee -a "$OUT/ep_summary.txt"
        epsum "$OUT/tmp/validate_${big}gpu_ep_mpi.txt"
      else
        eps "EP across processes skipped: mpirun not installed"
      fi
      # NCCL's all-to-all in the replay where each EP group's shards have their own GPUs; else its
      # refusal (one line, exit 2, before any GPU work).
      if [ "$ngpu" -ge 2 ]; then
        timeout 240 "$P" validate "$EPCFG" -s "$EPS2" --ep-replay --a2a nccl --devices 2 ${VALIDATE_ARGS:-} \
          -o "$OUT/tmp/validate_2gpu_ep_nccl.txt" 2>&1 | tail -3
        eps "validate --ep-replay --a2a nccl on 2 GPUs: exit ${PIPESTATUS[0]} after $(( $(date +%s) - START )) s"
        epsum "$OUT/tmp/validate_2gpu_ep_nccl.txt"
      else
        timeout 60 "$P" validate "$EPCFG" -s 1f1b --ep-replay --a2a nccl --devices 1 > "$OUT/tmp/ep_nccl_refusal.txt" 2>&1
        eps "validate --ep-replay --a2a nccl on one GPU: exit $? (2 expected): $(head -2 "$OUT/tmp/ep_nccl_refusal.txt")"
      fi ;;
    a2a)  # issue 18's all-to-all on 2+ GPUs: correctness, ours vs NCCL bandwidth and the GEMM beside it
      [ "$ngpu" -ge 2 ] || { echo "a2a check skipped: needs 2 GPUs ($ngpu present)"; continue; }
      OUT="$OUT/a2a" BUILD="$ROOT/build-gpu" timeout 300 bash "$ROOT/tools/a2a_check.sh" > "$OUT/tmp/a2a_check.txt" 2>&1
      echo "a2a check: exit $? after $(( $(date +%s) - START )) s"; tail -12 "$OUT/tmp/a2a_check.txt" ;;
    sanitize)  # the replay (peer; nccl on 2+ GPUs) and the watchdog under memcheck, tiny shapes
      command -v compute-sanitizer >/dev/null || { echo "compute-sanitizer skipped: not installed"; continue; }
      PPSIM_TEST_UNDER_SANITIZER=1 timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 \
        "$ROOT/build-gpu/ppsim_tests" "replay runs 1F1B*" \
        > "$OUT/tmp/sanitize.txt" 2>&1
      echo "compute-sanitizer memcheck over the replay test on $ngpu GPU(s): exit $? after $(( $(date +%s) - START )) s"
      grep -m2 "ERROR SUMMARY\|test cases" "$OUT/tmp/sanitize.txt" ;;
    python)  # issue 29: ppsim.profile and ppsim.validate from Python against the CLI, on one GPU
      pyexe=$(command -v python3)
      pbd=$("$pyexe" -m pybind11 --cmakedir 2>/dev/null) ||
        { echo "python vs CLI skipped: no pybind11 for $pyexe" | tee "$OUT/python_summary.txt"; continue; }
      if ! { cmake -S "$ROOT" -B "$ROOT/build-gpu" -DPPSIM_PYTHON=ON -Dpybind11_DIR="$pbd" -DPython3_EXECUTABLE="$pyexe" &&
             ninja -C "$ROOT/build-gpu" ppsim ppsim_python; } > "$OUT/python_build.log" 2>&1; then
        echo "python vs CLI: the module did not build (python_build.log)" | tee "$OUT/python_summary.txt"
        tail -5 "$OUT/python_build.log"; continue
      fi
      PYTHONPATH="$ROOT/build-gpu/python" timeout 400 "$pyexe" "$ROOT/tools/python_gpu_check.py" "$P" \
        "$ROOT/configs/small-1gpu.yaml" 1f1b > "$OUT/python_summary.txt" 2>&1
      echo "python vs CLI (ppsim.profile, ppsim.validate -s 1f1b on small-1gpu): exit $? after $(( $(date +%s) - START )) s"
      tail -1 "$OUT/python_summary.txt" ;;
    kind)  # virtual ranks shared by op kind instead of one slowdown for any two ops
      [ "$big" = 1 ] || continue
      timeout 150 "$P" validate "$cfg" -s "$S" --devices 1 --sharing kind ${VALIDATE_ARGS:-} \
        -o "$OUT/tmp/validate_1gpu_kind.txt" 2>&1 | tail -3
      echo "validate --sharing kind on 1 GPU: exit ${PIPESTATUS[0]} after $(( $(date +%s) - START )) s" ;;
    timeslice)  # virtual ranks time-slicing the whole GPU instead of each on its own SMs
      [ "$big" = 1 ] || continue
      timeout 150 "$P" validate "$cfg" -s "$S" --devices 1 --sm-split off ${VALIDATE_ARGS:-} \
        -o "$OUT/tmp/validate_1gpu_timeslice.txt" 2>&1 | tail -3
      echo "validate --sm-split off on 1 GPU: exit ${PIPESTATUS[0]} after $(( $(date +%s) - START )) s" ;;
    mpi)
      command -v mpirun >/dev/null || { echo "mpirun skipped: not installed"; continue; }
      grep -q "PPSIM_HAVE_MPI:INTERNAL=ON\|ppsim: MPI ON" "$ROOT/build-gpu/CMakeCache.txt" "$OUT/build.log" 2>/dev/null ||
        echo "(ppsim may be built without MPI: see build.log)"
      timeout 150 mpirun -np "$big" --bind-to none "$P" validate "$cfg" -s "$S" ${VALIDATE_ARGS:-} \
        -o "$OUT/tmp/validate_${big}gpu_mpi.txt" 2>&1 | tail -3
      echo "mpirun -np $big validate: exit ${PIPESTATUS[0]} after $(( $(date +%s) - START )) s"
      if [ "$big" = 1 ]; then  # two processes for one GPU: refused with one line each, exit 2
        timeout 60 mpirun -np 2 --bind-to none "$P" validate "$cfg" -s 1f1b 2>&1 | grep "^ppsim" | head -2
        echo "mpirun -np 2 on one GPU: exit ${PIPESTATUS[0]} (2 expected)"
        # ... unless allowed for a test: the IPC path between two processes on one GPU (functional only)
        timeout 150 mpirun -np 2 --bind-to none -x PPSIM_ALLOW_SHARED_GPU=1 "$P" validate "$ROOT/configs/small-2gpu.yaml" \
          -s 1f1b,dualpipev --sm-split off --transport ipc -o "$OUT/tmp/validate_ipc_shared1gpu.txt" 2>&1 | tail -3
        echo "mpirun -np 2 --transport ipc sharing one GPU (functional): exit ${PIPESTATUS[0]} after $(( $(date +%s) - START )) s"
      fi ;;
  esac
done
[ -f "$OUT/sim_bench.txt" ] && sed -n '1,4p' "$OUT/sim_bench.txt"
for f in "$OUT"/tmp/validate_*gpu*.txt; do [ -f "$f" ] || continue; echo "== $(basename "$f")" >> "$OUT/validate.txt"; cat "$f" >> "$OUT/validate.txt"; done
(cd "$OUT/tmp" && ls trace_*gpu.json >/dev/null 2>&1 && tar czf "$OUT/traces.tar.gz" trace_*gpu.json)
cat "$OUT"/tmp/nccl.*.log 2>/dev/null | grep -E "via (P2P|SHM|NET)|NCCL version|P2P is disabled|P2P/CUMEM|P2P level" | sort | uniq -c | head -12 >> "$OUT/topology.txt"
rm -rf "$OUT/tmp"
cat "$OUT/topology.txt"
awk '/^== validate_/ {print} /^link probe/,/^== validate_|^$/ {if ($0 !~ /^== /) print}' "$OUT/validate.txt"
# Expert parallelism's runs (the ep extra), last: each step's exit code, and its makespan table
# (schedule, predicted ms, measured ms, error).
[ -s "$OUT/ep_summary.txt" ] && { echo "== expert parallelism (issue 18)"; cat "$OUT/ep_summary.txt"; }
# Python's profile and validate against the CLI's (the python extra): each figure, then the verdict.
[ -s "$OUT/python_summary.txt" ] && { echo "== python vs CLI (issue 29)"; cat "$OUT/python_summary.txt"; }
