#!/usr/bin/env bash
# Fails when an #include points up a layer (docs/ARCHITECTURE.md, "Layers"): each folder of src/
# (and python/) may include only its own files and those of the folders listed for it below.
# Usage: tools/check_layers.sh [ROOT]     (ROOT: the repository, default: this script's parent)
#        tools/check_layers.sh --self-test (an upward include in a scratch tree must be caught)
# CTest runs both (tests "check_layers" and "check_layers_self_test").
set -euo pipefail

if [[ "${1:-}" == "--self-test" ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/src/core" "$tmp/src/sim" "$tmp/src/cost"
  printf '#include "core/time.h"\n' > "$tmp/src/sim/ok.h"
  printf '#include <vector>\n#include "core/time.h"\n#include "report/results.h"\n' > "$tmp/src/cost/bad.h"
  if out=$("$0" "$tmp" 2>&1); then
    echo "self-test: an upward include (cost -> report) passed the check"; exit 1
  fi
  if [[ "$out" != *"src/cost/bad.h:3: cost includes report/results.h"* ]]; then
    echo "self-test: unexpected report: $out"; exit 1
  fi
  echo "self-test: caught: $out"
  exit 0
fi

root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

# folder -> the folders (or single headers, folder/file.h) it may include. Keep in step with the
# table in docs/ARCHITECTURE.md.
declare -A allowed=(
  [core]=""
  [schedules]="core"
  [sim]="core schedules"
  [cost]="core schedules sim"
  [report]="core schedules sim"
  [ep]="core"
  [launch]="core schedules"
  [trace]="core schedules sim cost"
  [search]="core schedules sim"
  [plan]="core schedules sim cost search report"
  [api]="core schedules sim cost report search plan trace ep launch cuda_validate/gpu_api.h"
  [cuda_validate]="core schedules sim ep launch"
  [cli]="core schedules sim cost report search plan trace ep launch api cuda_validate/gpu_api.h"
  [python]="core schedules sim cost report search plan trace ep launch api cuda_validate/gpu_api.h"
)

bad=0
check_file() {  # file, layer
  local file=$1 layer=$2 n=0 line inc dir ok a
  while IFS= read -r line; do
    n=$((n + 1))
    [[ "$line" =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\"([a-z_0-9]+)/([^\"]+)\" ]] || continue
    dir=${BASH_REMATCH[1]}
    inc="$dir/${BASH_REMATCH[2]}"
    [[ "$dir" == "$layer" ]] && continue
    [[ -d "src/$dir" || -n "${allowed[$dir]+x}" ]] || continue  # not a layer (e.g. generated/)
    ok=0
    for a in ${allowed[$layer]}; do
      if [[ "$a" == "$dir" || "$a" == "$inc" ]]; then ok=1; break; fi
    done
    if [[ $ok == 0 ]]; then
      echo "$file:$n: $layer includes $inc (allowed: ${allowed[$layer]:-nothing}; docs/ARCHITECTURE.md)"
      bad=1
    fi
  done < "$file"
}

for d in src/*/ python/; do
  [[ -d "$d" ]] || continue
  layer=$(basename "$d")
  if [[ -z "${allowed[$layer]+x}" ]]; then
    echo "$d: a folder the layer check does not know (add it to tools/check_layers.sh and docs/ARCHITECTURE.md)"
    bad=1
    continue
  fi
  while IFS= read -r -d '' f; do
    check_file "$f" "$layer"
  done < <(find "$d" -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) -print0 | sort -z)
done
if [[ $bad == 0 ]]; then echo "layers: every #include points down"; fi
exit $bad
