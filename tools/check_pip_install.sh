#!/usr/bin/env bash
# `pip install .` as a new user runs it: a bare venv (no system site packages) of each Python
# given (default: python3 on PATH and Debian's /usr/bin/python3), no package index (--no-index),
# then checks that the installed module links no fmt, yaml-cpp, toml++ or MPI library of the
# system (ldd; the wheel's own copy of yaml-cpp beside the module is allowed, except where
# yaml-cpp's position-independent archive is built: then no such NEEDED entry at all), nor the
# binary beside it MPI, that it imports and simulates, and that the console script runs from
# another directory.
# PPSIM_BUILD_DIR=dir packages that built tree instead of building (tools/test.sh: build-test);
# otherwise the in-tree backend reuses build/ when it suits (python/build_backend/ppsim_backend.py).
set -euo pipefail
cd "$(dirname "$0")/.."
pythons=("$@")
if [ ${#pythons[@]} -eq 0 ]; then
  pythons=("$(command -v python3)")
  [ -x /usr/bin/python3 ] && pythons+=(/usr/bin/python3)
fi
# With yaml-cpp's position-independent archive (tools/build_yaml_pic.sh) in the packaged tree
# (build/, or PPSIM_BUILD_DIR) no fmt, yaml-cpp, toml++ or MPI library is NEEDED at all.
tree=${PPSIM_BUILD_DIR:-build}
pic=$(grep -s '^PPSIM_YAML_PIC:INTERNAL=ON' "$tree/CMakeCache.txt" || true)
[ -n "$pic" ] || [ ! -f .deps/yaml-cpp-pic/lib/libyaml-cpp.a ] || [ -n "${PPSIM_BUILD_DIR:-}" ] || pic=yes
what="fmt/yaml-cpp/toml++/MPI of the system"
[ -z "$pic" ] || what="fmt/yaml-cpp/toml++/MPI library (readelf NEEDED)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
seen=" "
fail=0
for py in "${pythons[@]}"; do
  real=$("$py" -c 'import sys; print(sys.executable, sys.version.split()[0])')
  case "$seen" in *" $real "*) continue ;; esac
  seen="$seen$real "
  venv="$tmp/v$(echo "$real" | md5sum | cut -c1-8)"
  if ! "$py" -m venv "$venv" >/dev/null 2>&1; then
    echo "check_pip_install: skipped $py: no venv module (Debian: python3-venv)"
    continue
  fi
  start=$(date +%s)
  if ! "$venv/bin/pip" install -q --no-index --disable-pip-version-check . >"$tmp/pip.log" 2>&1; then
    echo "check_pip_install: FAIL: pip install . with $real:"; tail -30 "$tmp/pip.log"; fail=1; continue
  fi
  so=$(ls "$venv"/lib/python*/site-packages/ppsim/_ppsim*.so)
  libs='libfmt|libyaml-cpp|libtomlplusplus|libmpi'
  if [ -n "$pic" ]; then
    # tools/build_yaml_pic.sh's archive: yaml-cpp is compiled into the module, which needs none.
    if readelf -d "$so" | grep NEEDED | grep -E "$libs"; then
      echo "check_pip_install: FAIL: the installed module ($real) has the NEEDED entries above"; fail=1
    fi
  # Else yaml-cpp may be the copy the wheel carries beside the module (Debian's libyaml-cpp.a is
  # position-dependent: it goes into the binary only); nothing may come from the system.
  elif ldd "$so" | grep -E "$libs" | grep -v "=> $(dirname "$so")/"; then
    echo "check_pip_install: FAIL: the installed module ($real) links the libraries above"; fail=1
  fi
  # The binary beside it neither: MPI only in the launcher libppsim_mpi.so, opened under mpirun.
  bash tools/check_needed.sh "$(dirname "$so")/ppsim" --none 'libmpi|libopen-(pal|rte)' >"$tmp/needed.log" ||
    { cat "$tmp/needed.log"; fail=1; }
  (cd "$tmp" && "$venv/bin/python" -c '
import ppsim, pathlib
assert "site-packages" in ppsim.__file__, ppsim.__file__
r = ppsim.compare(["1f1b", "zbv"], pp=4, microbatches=8, times="F=1,B=2,W=1")
assert [x["schedule"] for x in r["results"]] == ["1f1b", "zbv"], r["results"]
assert r["results"][0]["makespan"] == (8 + 4 - 1) * 3, r["results"][0]["makespan"]  # (M+P-1)(F+B)
' && "$venv/bin/ppsim" compare -s 1f1b --pp 4 -m 8 >/dev/null) || {
    echo "check_pip_install: FAIL: $real"; fail=1; continue; }
  # `ppsim fidelity` from elsewhere finds the package's configs/published: an override every
  # published file refuses stops at the first one, whose path the message gives (a full run: 2 min).
  msg=$(cd "$tmp" && "$venv/bin/ppsim" fidelity --set 'published.source=[x]' 2>&1 || true)
  case "$msg" in
    *"$(dirname "$so")/configs/published/"*) ;;
    *) echo "check_pip_install: FAIL: ppsim fidelity from $tmp did not find the package's configs: $msg"
       fail=1; continue ;;
  esac
  echo "check_pip_install: $real: installed and imported in $(( $(date +%s) - start )) s;" \
    "the module links no $what"
done
exit $fail
