#!/usr/bin/env bash
# Fails when a function in src/ runs over 150 lines (its first line to its last, as
# universal-ctags' `end:` field gives them; C++, CUDA .cu/.cuh included) and is not on the
# allow-list, or when a function on the allow-list is no longer over 150 (take it off: the list
# only shrinks). Allow-list: tools/function_length_allow.txt, one `path qualified::name` a line,
# `#` comments; overloads of one name in one file share their line.
# Usage: tools/check_function_length.sh [ROOT]      (ROOT: the repository, default: this script's parent)
#        tools/check_function_length.sh --self-test (a long function in a scratch tree must be caught)
#        tools/check_function_length.sh --list [ROOT] (every function over the limit, longest first)
# Exit 77 (CTest: skipped) when no universal-ctags is installed (tools/install-deps.sh installs it).
# CTest runs the check and the self-test ("function_length", "function_length_self_test").
set -euo pipefail
LIMIT=${FUNCTION_LENGTH_LIMIT:-150}

find_ctags() {
  for c in ctags-universal universal-ctags uctags ctags; do
    if command -v "$c" >/dev/null 2>&1 && "$c" --version 2>/dev/null | grep -q 'Universal Ctags'; then
      echo "$c"; return 0
    fi
  done
  return 1
}

# Prints `lines path qualified::name startline` for every function over LIMIT under $1/src.
long_functions() {
  (cd "$1" && "$CTAGS" -R --languages=C++ --langmap=C++:+.cu.cuh --kinds-C++=f --fields=+nKe --extras=-F \
     -f - src) | awk -F'\t' -v limit="$LIMIT" '
    { name = $1; path = $2; line = 0; end = 0; scope = ""
      for (i = 4; i <= NF; i++) {
        if ($i ~ /^line:/) line = substr($i, 6) + 0
        else if ($i ~ /^end:/) end = substr($i, 5) + 0
        else if ($i ~ /^(namespace|class|struct):/) { scope = $i; sub(/^[a-z]+:/, "", scope) }
      }
      if (end > 0 && end - line + 1 > limit)
        print end - line + 1, path, (scope == "" ? name : scope "::" name), line }' | sort -k1,1nr -k2,2 -k3,3
}

if [[ "${1:-}" == "--self-test" ]]; then
  CTAGS=$(find_ctags) || { echo "self-test: no universal-ctags; skipped"; exit 77; }
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/src/x" "$tmp/tools"
  { echo "namespace ppsim {"; echo "int long_one(int a) {"
    for i in $(seq 1 150); do echo "  a += $i;"; done
    echo "  return a;"; echo "}"
    echo "int short_one(int a) {"; echo "  return a;"; echo "}"; echo "}"; } > "$tmp/src/x/a.cc"
  : > "$tmp/tools/function_length_allow.txt"
  if out=$("$0" "$tmp" 2>&1); then echo "self-test: a 153-line function passed the check"; exit 1; fi
  [[ "$out" == *"src/x/a.cc:2: ppsim::long_one is 153 lines"* ]] ||
    { echo "self-test: unexpected report: $out"; exit 1; }
  echo "src/x/a.cc ppsim::long_one" > "$tmp/tools/function_length_allow.txt"
  "$0" "$tmp" >/dev/null || { echo "self-test: an allowed function failed the check"; exit 1; }
  echo "src/x/a.cc ppsim::short_one" >> "$tmp/tools/function_length_allow.txt"
  if out2=$("$0" "$tmp" 2>&1); then echo "self-test: a short function on the allow-list passed"; exit 1; fi
  [[ "$out2" == *"ppsim::short_one is no longer over"* ]] || { echo "self-test: unexpected report: $out2"; exit 1; }
  echo "self-test: caught: $out | $out2"
  exit 0
fi

list=0
if [[ "${1:-}" == "--list" ]]; then list=1; shift; fi
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
CTAGS=$(find_ctags) ||
  { echo "function length: no universal-ctags (tools/install-deps.sh installs it); skipped"; exit 77; }
long=$(long_functions "$root")
if [[ $list -eq 1 ]]; then echo "$long"; exit 0; fi

allow="$root/tools/function_length_allow.txt"
allowed=$( [[ -f "$allow" ]] && sed -e 's/#.*//' -e 's/[[:space:]]*$//' "$allow" | awk 'NF == 2' || true)
bad=0
while read -r n path name line; do
  [[ -z "${n:-}" ]] && continue
  if ! grep -qxF "$path $name" <<<"$allowed"; then
    echo "$path:$line: $name is $n lines, over $LIMIT: split it into named phases (CONTRIBUTING.md)"
    bad=1
  fi
done <<<"$long"
while read -r path name; do
  [[ -z "${path:-}" ]] && continue
  if ! awk -v p="$path" -v f="$name" '$2 == p && $3 == f { found = 1 } END { exit !found }' <<<"$long"; then
    echo "$allow: $path $name is no longer over $LIMIT lines (or no longer exists): take it off the list"
    bad=1
  fi
done <<<"$allowed"
[[ $bad -eq 0 ]] || exit 1
echo "src: no function over $LIMIT lines but the $(grep -c . <<<"$allowed" || true) on tools/function_length_allow.txt"
