"""On a GPU machine: ppsim.profile and ppsim.validate from Python against the CLI's `ppsim profile`
and `ppsim validate --format json` on the same config (tools/gpu_validate.sh, extra "python").

Both sides run the same library calls (src/api/gpu.h), but each profiles and replays on the GPU
anew, so measured figures agree only within run-to-run noise: the check passes when every op time,
predicted and measured makespan agree within TOL (default 0.15) and the outputs have the same
schedules and keys. Usage: python_gpu_check.py PPSIM_BINARY CONFIG [SCHEDULES] (PYTHONPATH: the
build's python/). Prints one line per figure and a last line "python vs CLI: ok|DIFFERENT ...".
"""
import json
import os
import subprocess
import sys
import tempfile

import ppsim

TOL = float(os.environ.get("TOL", "0.15"))


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def main():
    exe, cfg = sys.argv[1], sys.argv[2]
    sched = sys.argv[3] if len(sys.argv) > 3 else "1f1b"
    worst, lines, same_shape = 0.0, [], True
    with tempfile.TemporaryDirectory() as d:
        prof_path = os.path.join(d, "p.yaml")
        subprocess.run([exe, "profile", cfg, "-o", prof_path], check=True, capture_output=True)
        cli_ops = {}
        for line in open(prof_path):
            if line.startswith("op_ms:"):
                body = line.split("{", 1)[1].split("}", 1)[0]
                cli_ops = {k.strip(): float(v) for k, v in (kv.split(":") for kv in body.split(","))}
        py = ppsim.profile(cfg)
        for k in ("F", "B", "W", "FB"):
            r = rel(py["op_ms"][k], cli_ops[k])
            worst = max(worst, r)
            lines.append(f"  profile {k:<2} ms: python {py['op_ms'][k]:.4f}  cli {cli_ops[k]:.4f}  ({100 * r:+.1f}%)")
        p = subprocess.run([exe, "validate", cfg, "-s", sched, "--devices", "1", "--format", "json"], check=True,
                           capture_output=True, text=True)
        cli = json.loads(p.stdout)
    pv = ppsim.validate(cfg, schedules=sched, devices=1)
    same_shape = [r["schedule"] for r in pv["results"]] == [r["schedule"] for r in cli["results"]] and \
        sorted(k for k in pv if k != "text") == sorted(cli)
    for a, b in zip(pv["results"], cli["results"]):
        for field in ("predicted", "measured"):
            x, y = a["rows"][0][field + "_ms"], b["rows"][0][field + "_ms"]
            r = rel(x, y)
            worst = max(worst, r)
            lines.append(f"  validate {a['schedule']} {field} makespan ms: python {x:.3f}  cli {y:.3f}  ({100 * r:+.1f}%)")
    print("\n".join(lines))
    ok = same_shape and worst <= TOL
    print(f"python vs CLI: {'ok' if ok else 'DIFFERENT'} (largest difference {100 * worst:.1f}%, tolerance "
          f"{100 * TOL:.0f}%; same schedules and keys: {same_shape})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
