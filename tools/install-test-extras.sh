#!/usr/bin/env bash
# Installs the optional tools the picture tests use (tests/report/svg_test.cc): xmllint
# (libxml2-utils) checks that SVGs are well-formed XML, headless chromium renders the DualPipe
# figure to a PNG and runs the HTML report's browser tests (tools/browser_test.py); emscripten
# compiles the report's in-page engine (tools/build_wasm.sh); jupyter's nbconvert, ipykernel and
# pandas execute the Python tour notebook (tools/check_notebook.sh). Without them those tests are
# skipped, not failed. Idempotent: prints nothing
# and touches nothing when every package is present; names what it could not install and exits
# 1 otherwise.
set -euo pipefail

pkgs=(chromium libxml2-utils emscripten jupyter-nbconvert python3-nbformat python3-ipykernel python3-pandas)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-test-extras: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null || { echo "install-test-extras: apt-get update failed" >&2; exit 1; }
if ! $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
  echo "install-test-extras: cannot install ${missing[*]}" >&2
  exit 1
fi
