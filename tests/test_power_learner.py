"""Wallace's learner: readings, the t-test rule, and its learning curve on a log."""

from __future__ import annotations

import json

import pytest

from olsctl.cli import main
from olsctl.power.learn import EMPTY, learn, readings


def test_readings_count_one_per_sample_interval_in_each_phase():
    # 1000 s at 300 s sampling: readings at 0, 300, 600, 900 -> 4. Phases of 0.5 / 0.5:
    # the first two in phase 0 (100 W), the last two in phase 1 (300 W).
    n, mean, m2 = readings([0.0, 0.5], [100.0, 300.0], 1000.0, 300.0)
    assert (n, mean) == (4, 200.0)
    assert m2 == pytest.approx(4 * 100.0 ** 2)
    assert readings([0.0], [50.0], 10.0, 300.0)[:2] == (1, 50.0)  # short job: one reading


def _add(profile, values):
    for v in values:
        learn(profile, 1, float(v), 0.0, 20, 0.01)


def test_profile_unknown_until_twenty_readings_then_moves_only_on_a_real_change():
    p = list(EMPTY)
    _add(p, [100, 102] * 9 + [100])  # 19 readings
    assert p[0] is None
    _add(p, [102])
    assert p[0] == pytest.approx(101.0)
    # 20 more readings from the same distribution: the t-test keeps the value
    _add(p, [101, 100, 102, 101] * 5)
    assert p[0] == pytest.approx(101.0)
    # 19 readings at 150 W are not enough to move it, the 20th is
    _add(p, [149, 151] * 9 + [150])
    assert p[0] == pytest.approx(101.0)
    _add(p, [150])
    assert p[0] == pytest.approx(150.0, abs=0.1)


def test_learning_curve_and_error_on_learned_jobs(capsys):
    assert main(["predict", "KTH-SP2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    weeks = report["weekly"]
    early = weeks[0]["learned_share"]
    late = sum(w["learned_share"] * w["jobs"] for w in weeks[-10:]) / sum(w["jobs"] for w in weeks[-10:])
    assert late > early + 0.1
    assert report["learned_jobs_mae_w"]["learner"] < report["learned_jobs_mae_w"]["naive"]
