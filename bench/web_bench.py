#!/usr/bin/env python3
"""The HTML report's in-page engine: 1F1B at P=16 simulated for N ops (default 1e5; no timeline
kept) by the WebAssembly engine in headless Chromium, 5 runs per page load, the fastest kept
(web/report.js, `#bench=N`). Needs a ppsim built with the engine (tools/build_wasm.sh, then
reconfigure) and chromium. Target (issue 30): <= 50 ms for 1e5 ops. docs/PERFORMANCE.md.

usage: web_bench.py PPSIM_BINARY [N] [LOADS]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    ppsim = os.path.abspath(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
    loads = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("no chromium on PATH (tools/install-test-extras.sh)")
        return 77
    with tempfile.TemporaryDirectory() as d:
        page = os.path.join(d, "bench.html")
        subprocess.run([ppsim, "compare", "-s", "1f1b", "--pp", "4", "-m", "8", "--html", page], check=True,
                       capture_output=True)
        figures = []
        for _ in range(loads):
            r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                                "--user-data-dir=" + os.path.join(d, "profile"), "--dump-dom",
                                "file://" + page + "#bench=" + str(n)], capture_output=True, text=True, timeout=180)
            m = re.search(r'id="bench" data-ms="([0-9.]+)" data-ops="([0-9]+)"', r.stdout)
            if not m:
                print("the page has no engine, or the bench did not run (#engine-status says why)")
                return 1
            figures.append(float(m.group(1)))
            ops = int(m.group(2))
    print(f"in-page engine: {ops} ops (1f1b, P=16, no timeline), best of 5 per load: "
          + ", ".join(f"{x:.1f}" for x in figures) + f" ms over {loads} loads; min {min(figures):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
