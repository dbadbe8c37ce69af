"""search, import_trace, profile and validate from Python: the same library calls as the CLI
(src/api/), so their results equal its JSON; the notebook views (_repr_svg_, _repr_html_,
to_pandas)."""
import json
import os
import shutil
import subprocess

import pytest

import ppsim


def _has_gpu():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    return subprocess.run([smi, "-L"], capture_output=True).returncode == 0


def test_search_equals_cli_json(cli):
    # -j 1 and a time limit that does not bind at this size: deterministic for the seed.
    rc, out, err = cli("search", "-p", 4, "-m", 8, "--times", "F=1,B=2,W=1", "-j", 1, "-q", "--format", "json")
    assert rc == 0, err
    want = json.loads(out)
    got = ppsim.search(pp=4, microbatches=8, times="F=1,B=2,W=1", threads=1)
    assert got["results"] == want["results"]
    assert got["skipped"] == want["skipped"]
    for k in ("memory_cap", "memory_cap_source", "lower_bound", "gap", "best_family", "searched_peak_shares"):
        assert got["search"][k] == want["search"][k], k
    # The default cap is the best family's peak, and the searched schedule fits it.
    assert got["search"]["memory_cap_source"] == "best family"
    assert got["search"]["memory_cap"] == got["search"]["best_family_peak_shares"]
    assert got["search"]["searched_peak_shares"] <= got["search"]["memory_cap"] + 1e-9
    # The searched schedule simulates to the reported makespan.
    s = got["schedule"]
    assert isinstance(s, ppsim.Schedule)
    assert ppsim.simulate(s, times="F=1,B=2,W=1", timeline=False)["makespan"] == got["results"][0]["makespan"]
    assert got["table"].startswith("schedule search: P=4 M=8")


def test_search_without_cap_and_errors():
    got = ppsim.search(pp=4, microbatches=8, times="F=1,B=2,W=1", threads=1, memory_cap="none", time_limit=3)
    assert got["search"]["memory_cap"] is None
    assert got["search"]["memory_cap_source"] == "none"
    with pytest.raises(ppsim.Error) as e:
        ppsim.search(pp=4, microbatches=8, placement="diagonal")
    assert e.value.exit_code == 2
    with pytest.raises(ppsim.Error) as e:  # below one micro-batch: nothing fits
        ppsim.search(pp=4, microbatches=8, memory_cap=0.5, time_limit=2)
    assert e.value.exit_code == 3


def test_search_span_objective():
    # P = 4, M = 8, F = I = W = 1, no cap: every rank's own span reaches its work, 8 x 3 = 24.
    got = ppsim.search(pp=4, microbatches=8, times="F=1,B=2,W=1", threads=1, memory_cap="none", placement="linear",
                       objective="span")
    assert got["search"]["objective"] == "span"
    assert got["search"]["longest_span"] == 24.0
    with pytest.raises(ppsim.Error) as e:
        ppsim.search(pp=4, microbatches=8, objective="fastest")
    assert e.value.exit_code == 2


def test_search_w_hold():
    # P = 2, M = 2, F = I = W = 1, cap 1.5 shares: with every share held until its W, each
    # micro-batch's round trip (5) is serial on rank 0: 10. With w_hold = 1/4 an I frees 3/4 of its
    # share, F1 fits before W0: 9, at a peak of 5/4 (tests/search/search_test.cc works both).
    kw = dict(pp=2, microbatches=2, times="F=1,B=2,W=1", threads=1, memory_cap=1.5, placement="linear")
    assert ppsim.search(**kw)["results"][0]["makespan"] == 10.0
    got = ppsim.search(w_hold=0.25, **kw)
    assert got["results"][0]["makespan"] == 9.0
    assert got["search"]["searched_peak_shares"] == 1.25
    with pytest.raises(ppsim.Error) as e:
        ppsim.search(w_hold=1.5, **kw)
    assert e.value.exit_code == 2


def _trace(path):
    """A Kineto-shaped trace: layer 0's F and B, one kernel each (100 us and 200 us)."""
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "layer0.attention.F", "pid": 100, "tid": 1, "ts": 0, "dur": 50},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 1, "ts": 10, "dur": 2,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "gemm_f", "pid": 0, "tid": 7, "ts": 100, "dur": 100,
         "args": {"stream": 7, "device": 0, "correlation": 1}},
        {"ph": "X", "cat": "user_annotation", "name": "layer0.attention.B", "pid": 100, "tid": 1, "ts": 300, "dur": 50},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 1, "ts": 310, "dur": 2,
         "args": {"correlation": 2}},
        {"ph": "X", "cat": "kernel", "name": "gemm_b", "pid": 0, "tid": 7, "ts": 400, "dur": 200,
         "args": {"stream": 7, "device": 0, "correlation": 2}},
    ]
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU", "numSms": 132}],
                                "traceEvents": ev}))
    return path


def test_import_trace_equals_cli_json(cli, tmp_path):
    t = _trace(tmp_path / "t.json")
    rc, out, err = cli("import-trace", t, "--format", "json")
    assert rc == 0, err
    got = ppsim.import_trace(t)
    want = json.loads(out)
    for k in want:
        assert got[k] == want[k], k
    assert got["profile_yaml"] is not None
    got = ppsim.import_trace(t, output=tmp_path / "p.yaml")
    assert (tmp_path / "p.yaml").read_text() == got["profile_yaml"]
    assert "applies_to" not in got["profile_yaml"]
    # moe_layers_only: the same profile, marked for a config's MoE layers; it needs output=
    moe = ppsim.import_trace(t, output=tmp_path / "m.yaml", moe_layers_only=True)
    assert "\napplies_to: moe_layers\n" in (tmp_path / "m.yaml").read_text() == moe["profile_yaml"]
    rc, out, err = cli("import-trace", t, "-o", tmp_path / "c.yaml", "--moe-layers-only")
    assert rc == 0, err
    assert (tmp_path / "c.yaml").read_text() == moe["profile_yaml"]
    with pytest.raises(ppsim.Error) as e:
        ppsim.import_trace(t, moe_layers_only=True)
    assert e.value.exit_code == 2
    with pytest.raises(ppsim.Error) as e:
        ppsim.import_trace(tmp_path / "missing.json")
    assert e.value.exit_code == 4


_P2P = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"


def _rank_trace(path, rank, pid, device, shift, items):
    """One rank's trace as torch.distributed.pipelining records it: items are (range name, CPU
    start us, kernel name, GPU start us, duration us, stream, thread); times shifted by `shift`."""
    ev, corr = [], 1
    for name, cpu, kernel, ts, dur, stream, tid in items:
        ev.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": pid, "tid": 1, "ts": cpu + shift,
                   "dur": 2})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": tid,
                   "ts": cpu + 1 + shift, "dur": 0.5, "args": {"correlation": corr}})
        ev.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": device, "tid": stream, "ts": ts + shift,
                   "dur": dur, "args": {"correlation": corr, "stream": stream, "device": device}})
        corr += 1
    path.write_text(json.dumps({"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
                                "traceEvents": ev}))
    return path


def _two_ranks(folder):
    """1F1B, P = 2, M = 2, F 10 us and B 20 us, transfers of 2 us (tests/trace/ranks_test.cc's
    one_f_one_b): the step is 94 us measured, and simulated from its own costs the same. Rank 1's
    clock runs 5000 us ahead."""
    folder.mkdir()
    r0 = _rank_trace(folder / "r0.json", 0, 100, 0, 0, [
        ("PP:0F0", 0, "gemm_fwd", 100, 10, 7, 1), ("PP:0SEND_F0", 4, _P2P, 110, 2, 20, 1),
        ("PP:0F1", 8, "gemm_fwd", 110, 10, 7, 1), ("PP:0SEND_F1", 12, _P2P, 120, 2, 20, 1),
        ("PP:0RECV_B0", 16, _P2P, 122, 22, 20, 1), ("PP:0B0", 20, "gemm_bwd", 144, 20, 7, 2),
        ("PP:0RECV_B1", 24, _P2P, 164, 10, 20, 1), ("PP:0B1", 28, "gemm_bwd", 174, 20, 7, 2)])
    r1 = _rank_trace(folder / "r1.json", 1, 200, 1, 5000, [
        ("PP:1RECV_F0", 0, _P2P, 105, 7, 20, 1), ("PP:1F0", 4, "gemm_fwd", 112, 10, 7, 1),
        ("PP:1RECV_F1", 8, _P2P, 118, 4, 20, 1), ("PP:1B0", 12, "gemm_bwd", 122, 20, 7, 2),
        ("PP:1SEND_B0", 16, _P2P, 142, 2, 20, 1), ("PP:1F1", 20, "gemm_fwd", 142, 10, 7, 1),
        ("PP:1B1", 24, "gemm_bwd", 152, 20, 7, 2), ("PP:1SEND_B1", 28, _P2P, 172, 2, 20, 1)])
    return r0, r1


def test_import_trace_several_ranks_equals_cli_json(cli, tmp_path):
    r0, r1 = _two_ranks(tmp_path / "run")
    rc, out, err = cli("import-trace", r1, r0, "--schedule", "executed", "--format", "json")
    assert rc == 0, err
    want = json.loads(out)
    got = ppsim.import_trace([r1, r0], schedule="executed")
    for k in want:
        assert got[k] == want[k], k
    # Rank 1's clock, 5000 us ahead, put back on rank 0's; the step as measured and as simulated
    # from its own costs: 94 us each.
    assert got["ranks"]["ranks"][1]["offset_ms"] == pytest.approx(-5.0)
    assert got["prediction"]["measured_makespan_ms"] == pytest.approx(0.094)
    assert got["prediction"]["simulated_makespan_ms"] == pytest.approx(0.094)
    assert got["executed_csv"] == "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n"
    assert got["profile_yaml"] is None
    # The folder reads as its two traces; a profile of several ranks is refused as -o is (exit 2),
    # and nothing is written.
    assert ppsim.import_trace(tmp_path / "run")["executed_csv"] == got["executed_csv"]
    with pytest.raises(ppsim.Error) as e:
        ppsim.import_trace([r0, r1], output=tmp_path / "p.yaml")
    assert e.value.exit_code == 2
    assert not (tmp_path / "p.yaml").exists()
    # One trace alone: no pipeline rebuilt without asking for it.
    assert ppsim.import_trace(r0)["executed_csv"] is None
    # PyTorch's runtime for the simulation, as --p2p-runtime torch: at P = 2 its one stream per
    # rank holds nothing back (hand-worked in tests/trace/ranks_test.cc), so 94 us again; the
    # runtime named in the JSON; a bad name or torch without schedule="executed" is exit 2.
    rc, out, err = cli("import-trace", r1, r0, "--schedule", "executed", "--p2p-runtime", "torch", "--format", "json")
    assert rc == 0, err
    tor = ppsim.import_trace([r1, r0], schedule="executed", p2p_runtime="torch")
    assert tor["prediction"] == json.loads(out)["prediction"]
    assert tor["prediction"]["p2p_runtime"] == "torch"
    assert tor["prediction"]["simulated_makespan_ms"] == pytest.approx(0.094)
    for kwargs in ({"schedule": "executed", "p2p_runtime": "tourch"}, {"p2p_runtime": "torch"}):
        with pytest.raises(ppsim.Error) as e:
            ppsim.import_trace([r1, r0], **kwargs)
        assert e.value.exit_code == 2


@pytest.mark.skipif(_has_gpu(), reason="a GPU is present: tools/gpu_validate.sh compares profile/validate with the CLI")
def test_profile_and_validate_without_gpu_are_exit_5(cli):
    cfg = "configs/small-1gpu.yaml"
    import pathlib
    cfg = str(pathlib.Path(__file__).resolve().parents[2] / cfg)
    for call in (lambda: ppsim.validate(cfg), lambda: ppsim.profile(cfg)):
        with pytest.raises(ppsim.Error) as e:
            call()
        assert e.value.exit_code == 5
    # The CLI says the same line.
    with pytest.raises(ppsim.Error) as e:
        ppsim.validate(cfg)
    rc, _, err = cli("validate", cfg)
    assert rc == 5
    assert err == f"ppsim: {e.value}\n"


def test_schedule_svg_is_its_timeline():
    s = ppsim.generate("1f1b", 2, 2)
    svg = s._repr_svg_()
    assert svg.startswith("<svg") or svg.startswith("<?xml")
    assert svg.rstrip().endswith("</svg>")
    # One box per op at least: 1F1B with P=2, M=2 has 2 ranks x 2 micro-batches x (F, B) = 8 ops.
    assert svg.count("<rect") >= 8
    assert s.svg(times="F=1,B=3") != svg  # other times, another picture


def test_result_html_and_pandas():
    r = ppsim.compare("1f1b,gpipe", pp=4, microbatches=8)
    assert isinstance(r, ppsim.Result) and isinstance(r, dict)
    html = r._repr_html_()
    assert html.startswith("<table>")
    assert html.count("<tr>") == 3  # the header and two schedules
    assert "<td>1f1b</td>" in html and "<td>gpipe</td>" in html
    rows = r.rows()
    assert [x["schedule"] for x in rows] == ["1f1b", "gpipe"]
    # GPipe's bubble at P=4, F=1, B=2: (P-1)(F+B) = 9 units on every rank; 1F1B's is the same.
    assert rows[1]["bubble.max"] == 9.0
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError):
            r.to_pandas()
        return
    df = r.to_pandas()  # long form: row, schedule, quantity, rank (None: the whole row's), value
    assert set(df["schedule"]) == {"1f1b", "gpipe"}
    whole = df[df["rank"].isna()]
    assert whole[(whole.schedule == "gpipe") & (whole.quantity == "bubble.max")]["value"].tolist() == [9.0]
    # Per-rank rows kept: 1F1B holds P - r micro-batches on rank r at its peak (P=4: 4 3 2 1).
    peak = df[(df.schedule == "1f1b") & (df.quantity == "peak_activations.per_rank")]
    assert peak.sort_values("rank")["value"].tolist() == [4, 3, 2, 1]
    assert peak["rank"].tolist() == [0, 1, 2, 3]


def test_every_result_has_rows_and_html():
    # model, fidelity and plan: a table (not None) and long rows, each from its own JSON's list.
    m = ppsim.model(os.path.join(_REPO, "configs/hf/mixtral-8x7b.json"), pp=4)
    assert len(m.rows()) == 4 and m.rows()[0]["stage"] == 0  # one row per stage
    assert "<table>" in m._repr_html_()
    f = ppsim.fidelity(files=[os.path.join(_REPO, "configs/published/bloom-176b.yaml")])
    assert [r["key"] for r in f.rows()] == [r["key"] for r in f["rows"]]
    assert any(x["quantity"] == "error" for x in f.long_rows())
    p = ppsim.plan(os.path.join(_REPO, "configs/small-4gpu.yaml"), top=2)
    assert isinstance(p, ppsim.Result)
    assert len(p.rows()) == sum(len(v["ranking"]) for v in p["variants"])
    s = ppsim.simulate("1f1b", pp=2, microbatches=2, times="F=1,B=2")
    assert s._repr_html_().count("<rect") == 8  # the timeline: 2 ranks x (2 F + 2 B)


def test_typed_errors():
    # The CLI's exit codes as classes (docs/CLI.md): 3 a constraint, 2 a bad value; pybind11's
    # argument TypeError becomes a one-line UsageError.
    with pytest.raises(ppsim.InputError) as e:
        ppsim.simulate("dualpipe", pp=8, microbatches=10)
    assert e.value.exit_code == 3 and str(e.value).startswith("dualpipe needs an even number")
    with pytest.raises(ppsim.UsageError) as e:
        ppsim.simulate("1f1b", pp="four", microbatches=8)
    assert e.value.exit_code == 2 and str(e.value) == "simulate(): pp must be an int, got str"
    assert isinstance(e.value, ppsim.Error) and isinstance(e.value, TypeError)
    with pytest.raises(ppsim.FileError):
        ppsim.load_config("/nonexistent/x.yaml")


def test_fidelity_finds_its_configs_from_anywhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no configs/ here: the module's own (beside it, or the tree's)
    # An override every published file refuses: each file is refused at once and the first one's
    # error is raised, whose path shows where the configs were found (all 71 runs would take a minute
    # and a half).
    with pytest.raises(ppsim.InputError) as e:
        ppsim.fidelity(overrides={"published.source": ["x"]})
    found = str(e.value).split(":")[0]
    assert found.endswith(os.path.join("configs", "published", "bloom-176b.yaml")) and os.path.isfile(found)


_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_model_equals_cli_json(cli):
    rc, out, err = cli("model", "configs/hf/mixtral-8x7b.json", "--pp", 4, "--format", "json")
    assert rc == 0, err
    want = json.loads(out)
    got = ppsim.model(os.path.join(_REPO, "configs/hf/mixtral-8x7b.json"), pp=4)
    assert got["parameters"] == want["parameters"]
    assert got["stages"] == want["stages"]
    # The parts add up to the totals (MTP apart), and the stages hold every parameter.
    parts = got["parameters"]["by_part"]
    assert sum(v["total"] for k, v in parts.items() if k != "mtp") == got["parameters"]["total"]
    assert sum(s["params"] for s in got["stages"]) == got["parameters"]["total"]
    # Mixtral-8x7B: 46.7B total, 12.9B active (published), within 1%.
    assert abs(got["parameters"]["total"] / 46.7e9 - 1) < 0.01
    assert abs(got["parameters"]["active"] / 12.9e9 - 1) < 0.01
    with pytest.raises(ppsim.Error) as e:
        ppsim.model(os.path.join(_REPO, "configs/hf/mixtral-8x7b.json"), layer_split=[1, 2])
    assert e.value.exit_code == 2


def test_fidelity_skips_a_file_it_cannot_read(cli, tmp_path):
    # One good file and one with a misspelt key: the good one's results, the other skipped with its
    # file:line:col line, the same from Python and from the CLI (exit 3, the skipped file's, with the
    # other file's results written; the line on stderr too).
    good = os.path.join(_REPO, "configs/published/opt-175b.yaml")
    text = open(good).read()
    assert "  hidden: 12288" in text
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("  hidden: 12288", "  hiddn: 12288", 1))
    line = text[: text.index("  hidden: 12288")].count("\n") + 1
    got = ppsim.fidelity(files=[good, str(bad)])
    assert {r["key"].split("/")[0] for r in got["rows"]} == {"opt-175b"}
    assert [s["file"] for s in got["skipped"]] == [str(bad)]
    assert got["skipped"][0]["reason"].startswith(f"{bad}:{line}:3: unknown key 'hiddn'")
    rc, out, err = cli("fidelity", good, str(bad), "--format", "json")
    assert rc == 3 and json.loads(out)["skipped"] == got["skipped"]
    assert err.strip() == "ppsim: skipped: " + got["skipped"][0]["reason"]


def test_fidelity_one_file_equals_cli_json(cli):
    f = "configs/published/opt-175b.yaml"
    rc, out, err = cli("fidelity", f, "--format", "json")
    assert rc == 0, err
    want = json.loads(out)
    got = ppsim.fidelity(files=[os.path.join(_REPO, f)])
    assert [r["predicted_tokens_per_s"] for r in got["rows"]] == [r["predicted_tokens_per_s"] for r in want["rows"]]
    for r in got["rows"]:
        assert r["error"] == pytest.approx(r["predicted_tokens_per_s"] / r["published_tokens_per_s"] - 1, rel=1e-12)
        # OPT's "fit 80 GB" on A100 80GB: 80 GiB, the 81,920 MiB the driver reports, as GB of 1e9
        assert r["fits_gb"] == 80
        assert r["fits_limit_gb"] == pytest.approx(81920 * 2**20 / 1e9, rel=1e-12)
        assert r["fits"] == (r["predicted_memory_gb"] <= r["fits_limit_gb"])
