#!/usr/bin/env python3
"""Browser tests of the HTML report (`--html FILE`, src/report/html.cc, web/report.js).

Each report kind is written by the ppsim binary, opened in Debian's headless Chromium
(tools/install-test-extras.sh) with --dump-dom, and checked:
  - the page finished rendering (body[data-ready="1"]) with no script error (body[data-errors="0"]
    and no "Uncaught" console line);
  - every number of the results table in the DOM (td[data-key][data-value]) equals the same
    command's `--format json`;
  - with the WebAssembly engine embedded: a URL fragment the file was not written with is
    re-simulated in the page and equals `ppsim simulate` for it.
Screenshots go to OUT_DIR (--screenshots). Exit 77 (CTest's skip) with the reason when no
Chromium is installed.

usage: browser_test.py PPSIM_BINARY OUT_DIR [--keep]
"""
import html.parser
import json
import os
import shutil
import subprocess
import sys
import urllib.parse

SKIP = 77


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


class TableParser(html.parser.HTMLParser):
    """Collects body's data-* attributes, the #results table's cells and any element by id."""

    def __init__(self):
        super().__init__()
        self.body = {}
        self.rows = {}  # table id -> list of {key: value}
        self.table = None
        self.row = None
        self.ids = {}
        self.text_of = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        if tag == "table" and a.get("id"):
            self.table = a["id"]
            self.rows[self.table] = []
        if tag == "tr" and self.table and "data-row" in a:
            self.row = {"_index": int(a["data-row"]), "_class": a.get("class") or ""}
            self.rows[self.table].append(self.row)
        if tag == "td" and self.row is not None and "data-key" in a and "data-value" in a:
            self.row[a["data-key"]] = a["data-value"]
        if a.get("id"):
            self.ids[a["id"]] = ""
            self.text_of = a["id"]

    def handle_endtag(self, tag):
        self.text_of = None
        if tag == "table":
            self.table = None
        if tag == "tr":
            self.row = None

    def handle_data(self, data):
        if self.text_of:
            self.ids[self.text_of] += data


def run_chromium(chromium, url, out_dir, name, screenshot=False):
    base = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--no-first-run", "--allow-file-access-from-files", "--virtual-time-budget=20000",
            "--enable-logging=stderr", "--v=0", "--window-size=1400,1000",
            "--user-data-dir=" + os.path.join(out_dir, "profile")]
    r = subprocess.run(base + ["--dump-dom", url], capture_output=True, text=True, timeout=180)
    if screenshot:
        png = os.path.join(out_dir, name + ".png")
        subprocess.run(base + ["--hide-scrollbars", "--screenshot=" + png, url], capture_output=True, text=True, timeout=180)
    return r.stdout, r.stderr


def near(a, b):
    a, b = float(a), float(b)
    return a == b or abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def check_table(dom_rows, json_rows, what):
    """Every data-value in the DOM equals the JSON's value at its key; every JSON row is shown."""
    bad = []
    # The page shows rows equal but for their id and rank once (web/report.js distinctRows).
    distinct = {json.dumps({k: v for k, v in r.items() if k not in ("id", "rank", "example_id")}, sort_keys=True)
                for r in json_rows}
    if len(dom_rows) not in (len(json_rows), len(distinct)):
        bad.append(f"{what}: {len(dom_rows)} rows in the page, {len(json_rows)} in the JSON ({len(distinct)} distinct)")
    checked = 0
    for dom in dom_rows:
        row = json_rows[dom["_index"]]
        for key, value in dom.items():
            if key.startswith("_"):
                continue
            want = row
            for k in key.split("."):
                want = want[k]
            checked += 1
            if isinstance(want, bool):
                if value != json.dumps(want):
                    bad.append(f"{what}: {key}: page {value}, JSON {want}")
            elif isinstance(want, list):
                got = json.loads(value)
                if len(got) != len(want) or not all(near(g, w) if isinstance(w, (int, float)) else g == w
                                                    for g, w in zip(got, want)):
                    bad.append(f"{what}: {key}: page {value}, JSON {want}")
            elif isinstance(want, (int, float)):
                if not near(value, want):
                    bad.append(f"{what}: {row.get('schedule', dom['_index'])} {key}: page {value}, JSON {want}")
            elif str(want) != value:
                bad.append(f"{what}: {row.get('schedule', dom['_index'])} {key}: page {value!r}, JSON {want!r}")
    return bad, checked


def page_state(dom, stderr, what):
    p = TableParser()
    p.feed(dom)
    bad = []
    if p.body.get("data-ready") != "1":
        bad.append(f"{what}: the page did not finish rendering (body data-ready={p.body.get('data-ready')!r})")
    if p.body.get("data-errors", "0") != "0":
        bad.append(f"{what}: {p.body.get('data-errors')} script error(s)")
    for line in stderr.splitlines():
        if "CONSOLE" in line and ("Uncaught" in line or "Error" in line):
            bad.append(f"{what}: console: {line.strip()}")
    return p, bad


def check_search_cap(chromium, ppsim_run, out_dir):
    """search's page and `search --memory-cap` count activations alike (rank shares): at the cap
    the search ran under, no row of its page is over the page's cap; just under the searched
    row's peak, that row is."""
    j = json.loads(ppsim_run("search", "--pp", "4", "-m", "8", "--time-limit", "1", "-q", "--format", "json"))
    cap = j["search"]["memory_cap"]
    peak = j["results"][0]["peak_activations"]["max"]
    bad = []
    for c, want_over in ((cap, False), (peak - 0.25, True)):
        dom, err = run_chromium(chromium, "file://" + os.path.join(out_dir, "search.html") + f"#cap={c}", out_dir, "cap")
        p, b = page_state(dom, err, "search cap")
        bad += b
        rows = p.rows.get("results", [])
        over = [r for r in rows if "over-cap" in r["_class"]]
        if not rows or bool(over) != want_over or (want_over and rows[0] not in over):
            bad.append(f"search cap {c}: over-cap rows {len(over)} of {len(rows)}, expected the searched one: {want_over}")
    print(f"search: its cap {cap} (rank shares) marks no row of its page over it; {peak - 0.25} marks the searched")
    return bad


def check_without_engine(chromium, out_dir):
    """The compare page without its engine (the engine's script cut out when there is one): its
    controls but the memory cap are hidden, it says why, and a URL fragment for another schedule
    and size does not change the header, which keeps describing the table (P=4, M=8)."""
    text = open(os.path.join(out_dir, "compare.html")).read()
    start = text.find("<script>\n", text.find('id="ppsim-data"'))
    if "PpsimEngine" in text[start:text.find("</script>", start)]:
        text = text[:start] + text[text.find("</script>", start) + len("</script>"):]
    path = os.path.join(out_dir, "compare-no-engine.html")
    with open(path, "w") as f:
        f.write(text)
    dom, err = run_chromium(chromium, "file://" + path + "#family=dualpipe&pp=6&m=12", out_dir, "no-engine")
    p, bad = page_state(dom, err, "no engine")
    sub, status = p.ids.get("subtitle", ""), p.ids.get("engine-status", "")
    if not sub.startswith("P=4, M=8"):
        bad.append(f"no engine: the header says {sub!r} over the file's table (P=4, M=8)")
    if "no engine" not in status:
        bad.append(f"no engine: the page does not say why its controls are hidden: {status!r}")
    hidden = dom.count('hidden=""') + dom.count("hidden>")
    if hidden < 6:  # family, P, M, times, P2P latency, all-to-all
        bad.append(f"no engine: {hidden} hidden controls, not 6")
    print(f"no engine: header {sub!r}; {hidden} controls hidden; {status[:70]}")
    return bad


def check_large(chromium, ppsim_run, out_dir):
    """compare at P=64, M=1024 (1.4 million intervals): the page carries timelines up to its
    budget (the others are stubs), stays under 8 MB and renders without error."""
    path = os.path.join(out_dir, "compare-large.html")
    ppsim_run("compare", "--pp", "64", "-m", "1024", "--html", path)
    size = os.path.getsize(path)
    dom, err = run_chromium(chromium, "file://" + path, out_dir, "large")
    p, bad = page_state(dom, err, "large")
    if size > 8e6:
        bad.append(f"large: the page is {size / 1e6:.1f} MB")
    if len(p.rows.get("results", [])) != 9:
        bad.append(f"large: {len(p.rows.get('results', []))} rows, not the 9 families")
    print(f"large (P=64 M=1024): {size / 1e6:.1f} MB, first render {p.body.get('data-load-ms')} ms")
    return bad


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    ppsim, out_dir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    chromium = find_chromium()
    if not chromium:
        print("SKIP: no chromium on PATH (tools/install-test-extras.sh installs Debian's chromium)")
        return SKIP
    os.makedirs(out_dir, exist_ok=True)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def ppsim_run(*args):
        r = subprocess.run([ppsim, *args], capture_output=True, text=True, cwd=root)
        if r.returncode != 0:
            raise SystemExit(f"ppsim {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
        return r.stdout

    failures = []
    checked_total = 0
    # A small profiler trace (Kineto's shape: CPU ranges named layer<i>.<sub-op>.<pass>, each
    # launching one kernel) for import-trace's page: per-layer cells and streams.
    trace_path = os.path.join(out_dir, "trace.json")
    events, corr, ts = [], 1, 0
    for layer in (0, 1):
        for sub, dur in (("attention", 40), ("mlp", 60)):
            for pas in ("F", "B"):
                events.append({"ph": "X", "cat": "user_annotation", "name": f"layer{layer}.{sub}.{pas}", "pid": 100,
                               "tid": 1, "ts": ts, "dur": 100})
                events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 1,
                               "ts": ts + 5, "dur": 2, "args": {"correlation": corr}})
                events.append({"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": ts + 10, "dur": dur,
                               "args": {"stream": 7, "device": 0, "correlation": corr}})
                corr, ts = corr + 1, ts + 100
    with open(trace_path, "w") as f:
        json.dump({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU", "numSms": 132}],
                   "traceEvents": events}, f)

    # (name, command, screenshot, tables: [(table id in the page, path of its rows in the JSON)])
    results = [("results", ["results"])]
    cases = [
        ("compare", ["compare", "--pp", "4", "-m", "8"], True, results),
        ("simulate", ["simulate", "-s", "zb-h1", "--pp", "4", "-m", "8", "--times", "F=1,B=1,W=1"], True, results),
        ("compare-config", ["compare", "configs/small-4gpu.yaml"], False, results),
        ("compare-overlap", ["compare", "-s", "dualpipe,dualpipev", "--pp", "4", "-m", "8", "--a2a", "0.2", "--layers", "2"],
         False, results),
        ("plan", ["plan", "configs/whatif-h800-vs-h100.yaml", "--top", "5"], True,
         [("plan-ranking-0", ["variants", 0, "ranking"]), ("plan-best-0", ["variants", 0, "best_per_schedule"]),
          ("plan-rejected-0", ["variants", 0, "rejected"]), ("plan-ranking-1", ["variants", 1, "ranking"])]),
        ("import-trace", ["import-trace", trace_path], True, [("t-cells", ["cells"]), ("t-streams", ["streams"])]),
        # search (deterministic here: its time limit never binds at P=4 M=8): its two rows, searched
        # and the best family, equal its JSON, the peak in rank shares as its cap.
        ("search", ["search", "--pp", "4", "-m", "8", "--time-limit", "1", "-q"], False, results),
    ]
    engine = None
    for name, args, shot, tables in cases:
        html_path = os.path.join(out_dir, name + ".html")
        ppsim_run(*args, "--html", html_path)
        want = json.loads(ppsim_run(*args, "--format", "json")) if tables else None
        dom, err = run_chromium(chromium, "file://" + html_path, out_dir, name, screenshot=shot)
        p, bad = page_state(dom, err, name)
        failures += bad
        n = 0
        for table_id, path in tables:
            rows = want
            for k in path:
                rows = rows[k]
            b, k = check_table(p.rows.get(table_id, []), rows, name + " " + table_id)
            failures += b
            n += k
        checked_total += n
        if tables and n == 0:
            failures.append(f"{name}: no numbers found in the page's tables")
        if name == "search" and len(p.rows.get("results", [])) != 2:
            failures.append(f"{name}: {len(p.rows.get('results', []))} rows in the page, not 2 (searched, best family)")
        status = p.ids.get("engine-status", "")
        if name == "compare":
            engine = "WebAssembly" in status
        print(f"{name}: {n} values in {len(tables)} table(s) equal the JSON; {status.strip()[:80]}")

    # Interaction, driven by the page itself (#selftest: synthetic hover, wheel, double-click,
    # clicks on a row, a timeline's title and a column header).
    want = json.loads(ppsim_run("compare", "--pp", "4", "-m", "8", "--format", "json"))["results"]
    dom, err = run_chromium(chromium, "file://" + os.path.join(out_dir, "compare.html") + "#selftest", out_dir, "selftest")
    p, bad = page_state(dom, err, "selftest")
    failures += bad
    st = json.loads(p.ids.get("selftest", "{}") or "{}")
    expect = [
        ("hover names the op", st.get("hovered", "?") in st.get("tip", "")),
        ("hover gives start, end and what it waited on", all(s in st.get("tip", "") for s in ("start ", "end ", "waited on:"))),
        ("rank 1's first op waited on rank 0's 0F0", "waited on: 0F0 (rank 0)" in st.get("tip1", "")),
        ("wheel zooms in", 0 < st.get("zoomed", 1) < 1),
        ("double-click resets the view", st.get("reset") is True),
        ("a row selects its timeline", st.get("row_selects_timeline") == [want[1]["schedule"]]),
        ("a timeline selects its row", st.get("timeline_selects_row") == [want[0]["schedule"]]),
        ("a header sorts (makespan, descending)",
         st.get("sorted_desc") == sorted((r["makespan"] for r in want), reverse=True)),
    ]
    # The cap counts rank shares, as the JSON and search's --memory-cap: ZB-V's 2P = 8 chunks of
    # half a rank are P = 4 (per rank: each chunk is 1/vpp), so ZB-V fits and ZB-H2's 2P-1 does not.
    over = sorted(r["schedule"] for r in want if max(r["peak_activations"]["per_rank"]) > 4 + 1e-9)
    expect.append(("ZB-V (2P chunks / 2 = P) fits cap P = 4, ZB-H2 (2P-1) does not",
                   "zbv" not in over and "zb-h2" in over))
    expect.append(("memory cap 4 (rank shares) marks the schedules over it", sorted(st.get("over_cap", [])) == over))
    if engine:
        expect.append(("changing M re-simulates every schedule at M=12",
                       bool(st.get("m_after_change")) and set(st.get("m_after_change")) == {12}))
        expect.append(("the fragment follows the controls", "m=12" in st.get("fragment", "") and "cap=4" in st.get("fragment", "")))
    for what, ok in expect:
        if not ok:
            failures.append(f"selftest: {what}: {st}")
    print(f"selftest: {sum(ok for _, ok in expect)} of {len(expect)} interactions as expected")

    # A fragment the file was not written with: re-simulated in the page, equal to `ppsim simulate`.
    if engine:
        frag = {"family": "dualpipe", "pp": "6", "m": "12", "times": "F=1,B=2,W=1,FB=2.5", "p2p": "0.1"}
        url = "file://" + os.path.join(out_dir, "compare.html") + "#" + "&".join(
            k + "=" + urllib.parse.quote(v, safe=",=") for k, v in frag.items())
        dom, err = run_chromium(chromium, url, out_dir, "fragment", screenshot=True)
        p, bad = page_state(dom, err, "fragment")
        failures += bad
        if p.body.get("data-resimulated") != "1":
            failures.append("fragment: the page did not re-simulate (body data-resimulated missing): " + p.ids.get("engine-status", ""))
        want = json.loads(ppsim_run("simulate", "-s", "dualpipe", "--pp", "6", "-m", "12", "--times", frag["times"],
                                    "--p2p-latency", "0.1", "--format", "json"))
        b, n = check_table(p.rows.get("results", []), want["results"], "fragment")
        failures += b
        checked_total += n
        # The header describes the table under it: the fragment's schedule and sizes.
        if not p.ids.get("subtitle", "").startswith("dualpipe, P=6, M=12"):
            failures.append(f"fragment: header {p.ids.get('subtitle')!r} over dualpipe P=6 M=12")
        print(f"fragment {url.split('#')[1]}: {n} numbers equal `ppsim simulate`")
    else:
        print("fragment: SKIPPED, the report has no WebAssembly engine (tools/build_wasm.sh needs emscripten)")
    failures += check_search_cap(chromium, ppsim_run, out_dir)
    failures += check_without_engine(chromium, out_dir)
    failures += check_large(chromium, ppsim_run, out_dir)

    for f in failures:
        print("FAIL " + f)
    if failures:
        return 1
    print(f"browser tests passed: {checked_total} numbers checked; screenshots in {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
