#!/usr/bin/env bash
# CTest format_check: every line of src/ changed since the baseline commit in
# tools/format_baseline.txt is as clang-format (the repository's .clang-format: Google style,
# 120 columns) writes it, as `git clang-format` checks a change. Older lines are left as they are:
# reformatting the whole tree rewraps thousands of lines for no reader. Formatting differs between
# clang-format majors, so the check runs with the one the rule was set with (14, Debian 12's) and
# skips (exit 77, the reason printed) without it or without the baseline in git's history.
#   usage: tools/check_format.sh [REPO]     tools/check_format.sh --self-test
# Fix a failure with: git clang-format $(cat tools/format_baseline.txt) -- src
set -uo pipefail
want=14
fmt() { clang-format "$@"; }
skip() { echo "skipped: $*"; exit 77; }

# check REPO BASE: 0 when every changed line of src/ since BASE is formatted.
check() {
  local repo=$1 base=$2 bad=0 files=0 f ranges
  cd "$repo" || return 2
  git cat-file -e "$base^{commit}" 2>/dev/null || skip "baseline $base is not in this clone's history"
  while IFS= read -r f; do
    [ -f "$f" ] || continue
    ranges=$(git diff -U0 --no-color "$base" -- "$f" | sed -n 's/^@@ -[0-9,]* +\([0-9]*\)\(,\([0-9]*\)\)\{0,1\} @@.*/\1 \3/p' |
      awk '{n = ($2 == "") ? 1 : $2; if (n > 0) printf "--lines=%d:%d ", $1, $1 + n - 1}')
    [ -n "$ranges" ] || continue
    files=$((files + 1))
    # shellcheck disable=SC2086
    if ! fmt --dry-run -Werror $ranges "$f" >/dev/null 2>&1; then
      echo "not clang-formatted: $f (lines changed since $base)"; bad=$((bad + 1))
    fi
  done < <(git diff --name-only "$base" -- 'src/*.cc' 'src/*.h' 'src/*.cu' 'src/*.cuh'; git ls-files --others --exclude-standard -- src)
  echo "clang-format $major: $files files changed since $base, $bad with unformatted lines"
  [ "$bad" -eq 0 ]
}

command -v clang-format >/dev/null 2>&1 || skip "clang-format is not installed"
major=$(clang-format --version | sed -n 's/.*version \([0-9]*\).*/\1/p' | head -1)
[ "$major" = "$want" ] || skip "clang-format $major here; the rule is set with $want"
root=$(cd "$(dirname "$0")/.." && pwd)

if [ "${1:-}" = "--self-test" ]; then
  t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
  ( cd "$t" && git init -q && cp "$root/.clang-format" . && mkdir src &&
    printf 'int  old( int x ){return x;}\n' > src/a.cc && git add -A &&
    git -c user.name=t -c user.email=t@t commit -qm base ) || exit 1
  base=$(git -C "$t" rev-parse HEAD)
  printf 'int  old( int x ){return x;}\nint f(int x) { return x + 1; }\n' > "$t/src/a.cc"
  (check "$t" "$base") >/dev/null || { echo "self-test: a formatted added line failed (an old one was checked)"; exit 1; }
  printf 'int  old( int x ){return x;}\nint g( int x ){return x+1;}\n' > "$t/src/a.cc"
  if (check "$t" "$base") >/dev/null; then echo "self-test: an unformatted added line passed"; exit 1; fi
  echo "self-test: ok"; exit 0
fi
check "${1:-$root}" "$(tr -d '[:space:]' < "$root/tools/format_baseline.txt")"
