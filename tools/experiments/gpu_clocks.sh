#!/usr/bin/env bash
# Does the GPU slow down under a replay? Runs one `ppsim validate` (one schedule, no link probe)
# while nvidia-smi logs the SM and memory clocks, power and temperature every 20 ms, then prints
# the validate rows (predicted against measured) and the clocks' range over the run. Needs a
# built build-gpu/ppsim (tools/gpu_check.sh builds it).
# Env: CONFIG (configs/small-1gpu.yaml), SCHEDULE (1f1b), DEVICES (1), ARGS (more validate flags).
# Files in $OUT (default ./gpu-clocks-out): validate.json, clocks.csv, summary.txt.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/gpu-clocks-out}
mkdir -p "$OUT"
P=$ROOT/build-gpu/ppsim
[ -x "$P" ] || { echo "no $P: run tools/gpu_check.sh first"; exit 1; }
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader -lms 20 \
  > "$OUT/clocks.csv" 2>/dev/null &
SMI=$!
"$P" validate "${CONFIG:-$ROOT/configs/small-1gpu.yaml}" -s "${SCHEDULE:-1f1b}" --devices "${DEVICES:-1}" --no-link-probe \
  --format json -o "$OUT/validate.json" ${ARGS:-}
rc=$?
kill $SMI 2>/dev/null
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, statistics, sys
out = sys.argv[1]
try:
    v = json.load(open(f"{out}/validate.json"))
    for res in v["results"]:
        print(res["schedule"])
        for r in res["rows"]:
            print("  %-22s predicted %8.3f measured %8.3f  %+.1f%%" % (r["what"], r["predicted_ms"], r["measured_ms"], 100 * r["error"]))
except (OSError, ValueError, KeyError) as e:
    print("no validate results:", e)
rows = [l.strip().split(", ") for l in open(f"{out}/clocks.csv") if l.strip()]
def num(c, i):
    try: return float(c[i].split()[0])
    except (IndexError, ValueError): return None
for name, i in (("SM clock MHz", 1), ("memory clock MHz", 2), ("power W", 3), ("temperature C", 4)):
    v = [x for x in (num(c, i) for c in rows) if x is not None]
    if v: print("%-17s min %7.1f  median %7.1f  max %7.1f  (%d samples)" % (name, min(v), statistics.median(v), max(v), len(v)))
PY
exit $rc
