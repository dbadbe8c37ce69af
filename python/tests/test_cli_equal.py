"""Python results equal the CLI's JSON (`ppsim compare --format json`): the README's case, random
timings, every family simulated one by one, and a config with overrides."""
import random

import ppsim


def test_readme_case_equals_cli(cli_json):
    # The README's figure: P = 8, M = 20, F = 1, B = 2, W = 1, F&B = 3 (the defaults).
    assert ppsim.compare() == cli_json("compare")
    assert ppsim.compare(pp=8, microbatches=20, times={"F": 1, "B": 2, "W": 1, "FB": 3}) == cli_json("compare")


def test_every_family_simulated_alone_equals_its_cli_row(cli_json):
    want = cli_json("compare", "--pp", 4, "--microbatches", 8, "--times", "F=1,B=2,W=1,FB=2.5")
    rows = {r["schedule"]: r for r in want["results"]}
    assert len(rows) == sum(f["in_all"] for f in ppsim.families())  # P = 4, M = 8 suits every family
    named = cli_json("compare", "--pp", 4, "--microbatches", 8, "--times", "F=1,B=2,W=1,FB=2.5",
                     "--schedules", "interleaved-1f1b-overlap")
    rows.update({r["schedule"]: r for r in named["results"]})  # run when named: not in `all`
    for fam in ppsim.families():
        s = ppsim.generate(fam["name"], 4, 8)
        got = ppsim.simulate(s, times="F=1,B=2,W=1,FB=2.5", timeline=False)
        assert got == rows[fam["name"]], fam["name"]
        by_name = ppsim.simulate(fam["name"], pp=4, microbatches=8, times="F=1,B=2,W=1,FB=2.5", timeline=False)
        assert by_name == rows[fam["name"]], fam["name"]


def test_random_timings_equal_cli(cli_json):
    rng = random.Random(22)
    for _ in range(6):
        f = round(rng.uniform(0.1, 3), 2)
        b = round(rng.uniform(0.1, 4), 2)
        w = round(rng.uniform(0, b), 2)
        fb = round(rng.uniform(max(f, b), f + b), 2)
        lat = round(rng.uniform(0, 0.5), 2)
        pp = rng.choice([2, 4, 6, 8])
        m = rng.choice([4, 8, 12, 16, 24])
        spec = f"F={f},B={b},W={w},FB={fb}"
        want = cli_json("compare", "--pp", pp, "--microbatches", m, "--times", spec, "--p2p-latency", lat)
        got = ppsim.compare(pp=pp, microbatches=m, times={"F": f, "B": b, "W": w, "FB": fb}, p2p_latency=lat)
        assert got == want, spec
        want = cli_json("compare", "--pp", pp, "--microbatches", m, "--chunk-times", spec)
        assert ppsim.compare(pp=pp, microbatches=m, chunk_times=spec) == want, spec


def test_overlap_model_equals_cli(cli_json):
    want = cli_json("compare", "--pp", 4, "--microbatches", 8, "--a2a", 0.5, "--layers", 2, "--comm-sms", 24)
    got = ppsim.compare(pp=4, microbatches=8, overlap={"a2a": 0.5, "layers": 2, "comm_sms": 24})
    assert got == want


def test_config_with_overrides_equals_cli(cli_json):
    cfg = ppsim.load_config("configs/deepseek-v3.yaml", overrides={"parallel.microbatches": 32, "hardware.network_latency_us": 2.5})
    want = cli_json("compare", "configs/deepseek-v3.yaml", "--set", "parallel.microbatches=32", "--set", "hardware.network_latency_us=2.5")
    assert ppsim.compare(config=cfg) == want
    assert want["results"] and want["results"][0]["time_unit"] == "ms"


def test_plan_equals_cli(cli_json):
    cfg = ppsim.load_config("configs/deepseek-v3.yaml")
    assert ppsim.plan(cfg, top=3) == cli_json("plan", "configs/deepseek-v3.yaml", "--top", 3)


def test_timeline_columns():
    # ZB-V, P = 2, M = 4: 2 ranks x 2 chunks x 4 micro-batches x (F, I, W) = 48 ops, no pairs, so
    # 48 intervals; the last one ends at the makespan (the timeline starts at 0).
    s = ppsim.generate("zbv", 2, 4)
    r = ppsim.simulate(s, times="F=1,B=2,W=1")
    iv = r["timeline"]["intervals"]
    assert s.num_ops == 48
    assert len(iv["start"]) == len(iv["action"]) == 48
    assert max(iv["end"]) == r["makespan"] == r["timeline"]["end"]
    assert all(e > st for st, e in zip(iv["start"], iv["end"]))
    assert sorted(set(iv["action"])) == sorted({a for rank in s.ranks for a in rank})


def test_lowered_equals_show_lower(cli_json):
    # Schedule.lowered() is `ppsim show --lower torch`'s "lowered": single-stage 1F1B and GPipe,
    # the runtime's lowering for interleaved, ZB-V and DualPipeV.
    for fam, vpp in (("1f1b", 0), ("gpipe", 0), ("interleaved-1f1b", 2), ("zbv", 0), ("dualpipev", 0)):
        args = ["show", fam, "-p", 4, "-m", 8, "--lower", "torch"] + (["--vpp", vpp] if vpp else [])
        assert ppsim.generate(fam, 4, 8, vpp=vpp).lowered() == cli_json(*args)["lowered"], fam


def test_sequence_parallel_from_python_equals_cli(cli_json):
    # parallel.sequence_parallel from the config dict, as --set gives it; off, the TP ranks run the
    # per-token ops on the whole sequence, so the step is longer (megatron-18.4b: TP 8).
    path = "configs/published/megatron-18.4b.yaml"
    off = ppsim.load_config(path, overrides={"parallel.sequence_parallel": False})
    on = ppsim.load_config(path, overrides={"parallel.sequence_parallel": True})
    want = cli_json("compare", path, "--set", "parallel.sequence_parallel=false")
    assert ppsim.compare(config=off) == want
    t_off = ppsim.compare(config=off)["results"][0]["step_time"]
    t_on = ppsim.compare(config=on)["results"][0]["step_time"]
    assert t_off > t_on


def test_config_schedule_and_explicit_all_equal_cli(cli_json, tmp_path):
    # A config naming 1f1b: compare without schedules runs it alone, as the CLI without -s;
    # "all" runs every family even so, as -s all (CLI and Python alike).
    cfg = tmp_path / "one.yaml"
    cfg.write_text("model: {layers: 8, hidden: 512, heads: 8, ffn_hidden: 2048, vocab: 1000, seq_len: 512}\n"
                   "hardware: {name: h100, gpus: 8}\nparallel: {pp: 2, microbatches: 8, schedule: 1f1b}\n")
    one = ppsim.compare(config=str(cfg))
    assert one == cli_json("compare", str(cfg))
    assert [r["schedule"] for r in one["results"]] == ["1f1b"]
    every = ppsim.compare("all", config=str(cfg))
    assert every == cli_json("compare", str(cfg), "-s", "all")
    assert len(every["results"]) + len(every["skipped"]) == 9
