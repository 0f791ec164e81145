"""The online-simulation controller: choice rules, a hand-checked tick, determinism."""

from __future__ import annotations

import math

import pytest

from conftest import make_main, workload_from_rows
from olsctl.cli import main
from olsctl.config import build_config
from olsctl.controller import Controller, ControllerSettings, Trial, choose, what_if
from olsctl.errors import ConfigError


def _trial(active, bsld, unstarted=0):
    return Trial(active, 3, unstarted, bsld, bsld, 0.0, 0.0, float(active))


def test_choose_cheapest_meeting_the_sla_ties_to_the_larger_machine():
    trials = [_trial(2, 250.0), _trial(4, 150.0), _trial(6, 100.0), _trial(8, 1.0)]
    best, reason, met = choose(trials, "mean_bsld", 200.0)
    assert best.active_procs == 4 and met and reason == "cheapest meeting the SLA"
    same_cost = [Trial(4, 1, 0, 5.0, 5.0, 0, 0, 1.0), Trial(8, 1, 0, 5.0, 5.0, 0, 0, 1.0)]
    assert choose(same_cost, "mean_bsld", 200.0)[0].active_procs == 8


def test_choose_closest_when_none_meets_and_unstarted_jobs_count_as_infinite():
    trials = [_trial(2, 0.0, unstarted=1), _trial(4, 400.0), _trial(8, 300.0)]
    best, reason, met = choose(trials, "mean_bsld", 200.0)
    assert best.active_procs == 8 and not met and reason.startswith("no candidate")
    assert trials[0].metric("mean_bsld") == math.inf


def test_what_if_scores_the_snapshot_jobs_by_hand():
    # 4 processors; at t=0 job 1 (4 procs, 100 s) and job 2 (2 procs, 10 s) wait.
    # With 4 active: job 1 runs 0-100, job 2 waits 100 s: bsld 1 and 1 + 100/10 = 11.
    # With 2 active: job 1 can never start (unstarted), the trial fails the SLA.
    w = workload_from_rows([(1, 0, 100, 4), (2, 0, 10, 2)], 4)
    sim = make_main(w)
    snaps = []
    sim.at(0, lambda s: snaps.append(s.state.snapshot()))
    sim.run()
    full = what_if(snaps[0], 4, {"name": "easy"})
    assert (full.mean_bsld, full.max_wait_s, full.unstarted) == (6.0, 100.0, 0)
    half = what_if(snaps[0], 2, {"name": "easy"})
    assert half.unstarted == 1 and half.metric("mean_bsld") == math.inf


def test_a_tick_applies_the_choice_to_the_main_simulator():
    # One 1-proc job of 1000 s on an 8-processor machine: every candidate meets the SLA,
    # so the cheapest (2 of 8 with fractions 0.25 and 1) is applied at the first tick.
    w = workload_from_rows([(1, 0, 1000, 1), (2, 5000, 10, 1)], 8)
    sim = make_main(w)
    ctl = Controller(ControllerSettings(interval_s=3600.0, fractions=(0.25, 1.0)), {"name": "easy"})
    ctl.start(sim)
    rec = sim.run()
    # ticks while work remains: at 3600 job 2 has yet to arrive, so one more at 7200
    assert [d["chosen_active_procs"] for d in ctl.decisions] == [2, 2, 2]
    assert [d["time_s"] for d in ctl.decisions] == [0, 3600, 7200]
    assert max(rec.samples.active_procs[1:]) == 2


def test_same_decisions_and_bytes_with_one_and_two_workers(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [(i, 300 * i, 200 + (37 * i) % 900, 1 + (i * 7) % 5) for i in range(1, 80)]
    lines = ["; MaxProcs: 8"] + [f"{j} {s} -1 {r} {p} -1 -1 {p} {r} -1 1 -1 -1 -1 -1 -1 -1 -1"
                                  for j, s, r, p in rows]
    (tmp_path / "t.swf").write_text("\n".join(lines) + "\n")
    outs = []
    for n_jobs in (1, 2):
        cfg = (f"trace: t.swf\nout: out{n_jobs}\ncontroller:\n  interval_s: 600\n"
               f"  n_jobs: {n_jobs}\n  sla: {{metric: mean_bsld, max: 3}}\n")
        (tmp_path / f"c{n_jobs}.yaml").write_text(cfg)
        assert main(["run", f"c{n_jobs}.yaml", "--quiet", "--strict"]) == 0
        outs.append(tmp_path / f"out{n_jobs}")
    for name in ("decisions.jsonl", "jobs.csv", "timeseries.csv"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes()
    decisions = (outs[0] / "decisions.jsonl").read_text().splitlines()
    assert len(decisions) > 10


@pytest.mark.parametrize("controller,key", [
    ({"interval_s": 0}, "controller.interval_s"),
    ({"candidates": {"power_cap": {}}}, "controller.candidates"),
    ({"candidates": {"active_procs": {"fraction": [0, 0.5]}}},
     "controller.candidates.active_procs.fraction"),
    ({"sla": {"metric": "speed", "max": 3}}, "controller.sla.metric"),
    ({"sla": {"metric": "mean_bsld", "max": 0.5}}, "controller.sla.max"),
    ({"cost": "energy"}, "controller.cost"),
    ({"n_jobs": 0}, "controller.n_jobs"),
    ({"knob": 1}, "controller.knob"),
])
def test_bad_controller_settings_name_the_key(controller, key):
    with pytest.raises(ConfigError) as err:
        build_config({"controller": controller}, source="x.yaml")
    assert f"x.yaml: {key}" in str(err.value)
