#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, into build-fuzz/ with clang++ and ASan + UBSan) and runs
# each one after the other, one process on one core, for a number of seconds
# (docs/ROBUSTNESS.md).
#
#   tools/fuzz.sh                 30 s per target
#   tools/fuzz.sh 600             10 minutes per target
#   tools/fuzz.sh --ci            20 s per target (CI)
#   tools/fuzz.sh 60 fuzz_cli     only the named targets
#
# Each target runs in a fresh temp dir (its cwd; TMPDIR too), reads its seeds from
# fuzz/corpus/<kind>/ and its dictionary from fuzz/<kind>.dict, and keeps what it finds in
# fuzz-out/<target>/corpus/ (so later runs go on from there); crash-, leak-, timeout- and oom-
# artifacts land in fuzz-out/<target>/, the log in fuzz-out/<target>/log.txt.
# Exit status: 1 when a new artifact appeared or libFuzzer failed, 2 on usage or build errors,
# else 0. Env: PPSIM_FUZZ_JOBS (build parallelism, default 2), CXX (default clang++),
# PPSIM_FUZZ_FLAGS (more libFuzzer flags, e.g. -len_control=0 to try long inputs at once).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

seconds=30
ci=0
targets=()
for arg in "$@"; do
  case "$arg" in
    --ci) seconds=20 ci=1 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    fuzz_config|fuzz_schedule_csv|fuzz_cli) targets+=("$arg") ;;
    *)
      if [[ "$arg" =~ ^[0-9]+$ ]] && [ "$arg" -gt 0 ]; then seconds=$arg
      else echo "fuzz.sh: unknown argument '$arg' (seconds, --ci, or a target: fuzz_config fuzz_schedule_csv fuzz_cli)" >&2; exit 2
      fi ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_config fuzz_schedule_csv fuzz_cli)

build="$root/build-fuzz"
echo "== building fuzz targets in $build"
# --ci: -O1 -g1 (as the ASan pass of tools/test.sh), which compiles in about half the time of -O2 -g.
flags=()
[ "$ci" = 1 ] && flags=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG")
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="${CXX:-clang++}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "${flags[@]}" -DPPSIM_FUZZ=ON -DPPSIM_CUDA=OFF -DPPSIM_BUILD_TESTS=OFF -DPPSIM_BUILD_BENCH=OFF >/dev/null || exit 2
cmake --build "$build" -j "${PPSIM_FUZZ_JOBS:-2}" --target "${targets[@]}" || exit 2

# Per target: seed corpus and the largest input libFuzzer may make (bytes).
seeds_of() { case "$1" in fuzz_config) echo config ;; fuzz_schedule_csv) echo csv ;; fuzz_cli) echo cli ;; esac; }
max_len_of() { case "$1" in fuzz_config) echo 4096 ;; fuzz_schedule_csv) echo 4096 ;; fuzz_cli) echo 512 ;; esac; }

artifacts() { find "$1" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | sort; }

status=0
summary=()
for t in "${targets[@]}"; do
  out="$root/fuzz-out/$t"
  mkdir -p "$out/corpus"
  before=$(artifacts "$out")
  work=$(mktemp -d "${TMPDIR:-/tmp}/ppsim_fuzz.XXXXXX")
  # fuzz_config reads `profile:` paths relative to its cwd: give it one valid profile there.
  printf 'version: 1\nop_ms: {F: 1, B: 2, W: 1}\n' >"$work/profile.yaml"
  echo "== $t: ${seconds}s, max_len $(max_len_of "$t"), artifacts in $out"
  rc=0
  (cd "$work" && TMPDIR="$work" ASAN_OPTIONS="detect_leaks=1:${ASAN_OPTIONS:-}" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}" \
    "$build/fuzz/$t" -max_total_time="$seconds" -max_len="$(max_len_of "$t")" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$out/" -close_fd_mask=3 -print_final_stats=1 -dict="$root/fuzz/$(seeds_of "$t").dict" \
      ${PPSIM_FUZZ_FLAGS:-} "$out/corpus" "$root/fuzz/corpus/$(seeds_of "$t")") >"$out/log.txt" 2>&1 || rc=$?
  rm -rf "$work"
  after=$(artifacts "$out")
  new=$(comm -13 <(echo "$before") <(echo "$after") | sed '/^$/d' || true)
  # The last status line ("#N DONE cov: C ft: F corp: ..."), and the executions per second.
  last=$(grep -E '^#[0-9]+' "$out/log.txt" | tail -1 || true)
  cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9A-Za-z]*\).*/\1/p' <<<"$last")
  runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\)/\1/p' "$out/log.txt" | tail -1)
  eps=$(sed -n 's/^stat::average_exec_per_sec: *\([0-9]*\)/\1/p' "$out/log.txt" | tail -1)
  line="$t: ${seconds}s, ${runs:-?} runs, ${eps:-?} exec/s, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}"
  if [ -n "$new" ] || [ "$rc" -ne 0 ]; then
    status=1
    line="$line -- FAILED (libFuzzer exit $rc)"
    echo "$line"
    grep -E 'ERROR: |SUMMARY: |runtime error|fuzz_schedule_csv: |libFuzzer: ' "$out/log.txt" | head -5 || true
    [ -z "$new" ] || echo "new artifacts:"$'\n'"$new"
  else
    echo "$line"
  fi
  summary+=("$line")
done

echo "== summary"
printf '%s\n' "${summary[@]}"
old=$(for t in "${targets[@]}"; do artifacts "$root/fuzz-out/$t"; done)
if [ -n "$old" ] && [ "$status" -eq 0 ]; then
  echo "note: older artifacts remain in fuzz-out/ (delete them once fixed):"
  echo "$old"
fi
exit $status
