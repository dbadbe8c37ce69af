#!/usr/bin/env bash
# The shared libraries an ELF file names (readelf -d, NEEDED), against a pattern:
#   check_needed.sh FILE --none REGEX   fails when a NEEDED entry matches (ppsim links no MPI:
#                                       MPI is in the launcher libppsim_mpi.so, opened on demand)
#   check_needed.sh FILE --some REGEX   fails when none does (the launcher does need libmpi: the
#                                       pattern above is one that matches the real name)
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: check_needed.sh FILE --none|--some REGEX" >&2; exit 2; }
file=$1 mode=$2 re=$3
needed=$(readelf -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
hits=$(grep -E "$re" <<<"$needed" || true)
case "$mode" in
  --none) [ -z "$hits" ] || { echo "check_needed: $file needs $(echo $hits) (matching $re)"; exit 1; } ;;
  --some) [ -n "$hits" ] || { echo "check_needed: $file needs none of $re; it needs: $(echo $needed)"; exit 1; } ;;
  *) echo "check_needed: --none or --some, not $mode" >&2; exit 2 ;;
esac
echo "check_needed: $file ${mode#--} of $re: ${hits:-none}" | tr '\n' ' '; echo
