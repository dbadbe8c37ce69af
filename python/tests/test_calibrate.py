"""ppsim.calibrate and calibration=: the CLI's calibration from Python, a step made at a known
scale recovered, and a calibration applied through load_config changing the predicted step."""
import os

import pytest
import yaml

import ppsim

_RUN = """name: tiny
model: {layers: 4, hidden: 256, ffn_hidden: 1024, heads: 4, vocab: 1000, seq_len: 512}
cluster: {gpu: a100-80gb, gpus: 4}
parallel: {pp: 2, dp: 2, microbatches: 4, schedule: 1f1b}
"""


def _step(cfg):
    return ppsim.compare(schedules="1f1b", config=cfg)["results"][0]["step_time"]


def test_calibrate_step_recovers_scale(tmp_path, cli):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(_RUN)
    # The A100's compute efficiencies (gemm 0.75, attention 0.55, elementwise 0.8) at 0.9 of the preset.
    slow = ppsim.load_config(str(cfg), {"hardware.efficiency.gemm": 0.675, "hardware.efficiency.attention": 0.495,
                                        "hardware.efficiency.elementwise": 0.72})
    t = _step(slow)
    out_py = tmp_path / "py.yaml"
    got = ppsim.calibrate(str(cfg), step_ms=t * 1e3, output=str(out_py))
    fitted = {f["key"]: f for f in got["fitted"]}
    assert fitted["hardware.efficiency.gemm"]["value"] == pytest.approx(0.675, rel=1e-5)
    assert "hardware.efficiency.comm" in [u["key"] for u in got["not_identified"]]
    # The CLI writes the same figures.
    out_cli = tmp_path / "cli.yaml"
    rc, _, err = cli("calibrate", str(cfg), "--step-ms", repr(t * 1e3), "-o", str(out_cli))
    assert rc == 0, err
    a = yaml.safe_load(out_py.read_text())["calibration"]["fitted"]
    b = yaml.safe_load(out_cli.read_text())["calibration"]["fitted"]
    assert [(x["key"], x["value"]) for x in a] == [(x["key"], x["value"]) for x in b]
    # Applied, the config predicts the measured step, and says what it changed.
    cal = ppsim.load_config(str(cfg), calibration=str(out_py))
    assert _step(cal) == pytest.approx(t, rel=1e-5)
    res = ppsim.compare(schedules="1f1b", config=cal)
    assert [c["key"] for c in res["calibration"]["changed"]][0] == "hardware.efficiency.gemm"
    assert res["calibration"]["results"][0]["extrapolates"] == []


def test_calibrate_needs_one_input(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(_RUN)
    with pytest.raises(ppsim.Error) as e:
        ppsim.calibrate(str(cfg))
    assert e.value.exit_code == 2
