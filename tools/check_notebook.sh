#!/usr/bin/env bash
# Executes python/examples/ppsim_tour.ipynb (every function docs/PYTHON.md documents) with
# Debian's jupyter-nbconvert against the module of a build tree (default build/), then checks
# that no cell failed and that every code cell that shows a result shows a table and a timeline
# (text/html and image/svg+xml outputs). Exit 77 (CTest's skip), with the reason, when nbconvert,
# ipykernel or the module is missing (tools/install-test-extras.sh installs the first two).
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
if ! command -v jupyter-nbconvert >/dev/null 2>&1; then
  echo "SKIP: jupyter-nbconvert is not installed (tools/install-test-extras.sh: jupyter-nbconvert," \
    "python3-nbformat, python3-ipykernel, python3-pandas)"
  exit 77
fi
[ -f "$build/python/python_executable.txt" ] || { echo "SKIP: no Python module in $build"; exit 77; }
py=$(cat "$build/python/python_executable.txt")
if ! "$py" -c "import ipykernel" 2>/dev/null; then
  echo "SKIP: no ipykernel for $py (apt install python3-ipykernel)"
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
PYTHONPATH="$build/python" jupyter-nbconvert --to notebook --execute --ExecutePreprocessor.timeout=600 \
  --output-dir "$out" python/examples/ppsim_tour.ipynb >/dev/null 2>"$out/log" || { cat "$out/log"; exit 1; }
"$py" - "$out/ppsim_tour.ipynb" <<'PY'
import json, sys
nb = json.load(open(sys.argv[1]))
code = [c for c in nb["cells"] if c["cell_type"] == "code"]
bad = []
for i, c in enumerate(code):
    kinds = set()
    for o in c.get("outputs", []):
        if o.get("output_type") == "error":
            bad.append(f"cell {i}: {o.get('ename')}: {o.get('evalue')}")
        kinds |= set(o.get("data", {}))
    if i == 0:
        continue  # the imports
    if "image/svg+xml" not in kinds and not any("<svg" in "".join(o.get("data", {}).get("text/html", ""))
                                                for o in c.get("outputs", [])):
        bad.append(f"cell {i}: no timeline (image/svg+xml) among {sorted(kinds)}")
    if i >= 2 and "text/html" not in kinds:
        bad.append(f"cell {i}: no table (text/html) among {sorted(kinds)}")
for b in bad:
    print("FAIL", b)
print(f"notebook: {len(code)} code cells executed, {len(bad)} problem(s)")
sys.exit(1 if bad else 0)
PY
