"""Runs with power on a real log: cap schedules take effect at their time; predictors."""

from __future__ import annotations

import json

import numpy as np

from olsctl.cli import main


def test_cap_schedule_takes_effect_at_its_times(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yaml").write_text(
        "trace: KTH-SP2\nout: out\npolicy: {name: knapsack, window: 20, predictor: oracle}\n"
        "power:\n  sample_s: 600\n  cap:\n    schedule:\n"
        "      - {at_s: 0, fraction: 0.417}\n      - {at_s: 600000, fraction: 0.625}\n"
        "      - {at_s: 1200000, fraction: 0.833}\n      - {at_s: 1800000, fraction: 0.417}\n")
    assert main(["run", "c.yaml", "--quiet"]) == 0
    rows = [line.split(",") for line in (tmp_path / "out" / "power.csv").read_text().splitlines()[1:]]
    t = np.array([float(r[0]) for r in rows])
    cap = np.array([float(r[3]) for r in rows])
    first = 599850.0  # KTH-SP2's first submission
    peak = 100 * 1150.0
    for lo, hi, frac in ((0, 600000, 0.417), (600000, 1200000, 0.625),
                         (1200000, 1800000, 0.833), (1800000, 9e9, 0.417)):
        sel = (t >= first + lo) & (t + 600 <= first + hi)
        assert sel.any() and np.allclose(cap[sel], frac * peak)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["power"]["csr"] > 0.9


def test_predict_history_beats_naive(capsys):
    assert main(["predict", "KTH-SP2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    overall = report["overall_mae_w"]
    assert overall["history"] < overall["naive"]
    assert sum(row["jobs"] for row in report["weekly"]) == 28_467
