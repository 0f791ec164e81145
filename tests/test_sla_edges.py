"""An SLA is ``metric <= limit``: a metric exactly at the limit keeps it. Hand-worked
cases of that boundary where olsctl judges it: the SLA windows of summary.json (and
their share kept), and the controller's choice among its candidates, with the limit at
1.0 that SLA feedback sets under full pressure.

Every expected value below is worked out by hand in the test's docstring.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import make_main, workload_from_rows
from olsctl.cli import main
from olsctl.controller import Candidate, WhatIfTask, choose, what_if
from olsctl.metrics import SlaSpec, sla_summary, weekly
from olsctl.state import Snapshot

# -- SLA windows --------------------------------------------------------------------------

#: 2 processors, EASY, windows of 1000 s from the first submit (0). Window 0: job 1
#: (2 procs, 100 s) starts at 0; job 2 (2 procs, 100 s, submitted 0) waits for it and
#: starts at 100: bounded slowdowns 1 and 1 + 100/100 = 2, mean 1.5, p95 1 + 0.95 x 1 =
#: 1.95 (linear); waits 0 and 100 s: mean 50 s, max 100 s. Window 1: job 3 (1 proc,
#: 10 s, submitted 1000) starts at once: slowdown 1, wait 0.
ROWS = [(1, 0, 100, 2), (2, 0, 100, 2), (3, 1000, 10, 1)]
WINDOW_0 = {"mean_bsld": 1.5, "p95_bsld": 1.95, "mean_wait_s": 50.0, "max_wait_s": 100.0}


def _records():
    return make_main(workload_from_rows(ROWS, machine_procs=2)).run()


@pytest.mark.parametrize("metric", sorted(WINDOW_0))
def test_a_window_whose_metric_equals_the_limit_keeps_the_sla(metric):
    """With the limit exactly window 0's metric (worked out above), both windows keep
    the SLA; with the limit one representable step below it, window 0 breaks it."""
    records = _records()
    rows = weekly(records, window_s=1000.0)
    assert [r["jobs"] for r in rows] == [2, 1]
    assert rows[0][metric] == pytest.approx(WINDOW_0[metric], rel=1e-12)
    limit = rows[0][metric]
    sla = SlaSpec(metric, limit, 1000.0)
    kept = weekly(records, window_s=1000.0, sla=sla)
    assert [r["sla_kept"] for r in kept] == [True, True]
    assert sla_summary(kept, sla) == {"metric": metric, "max": limit, "window_s": 1000.0,
                                      "windows": 2, "windows_kept": 2, "kept_share": 1.0}
    below = SlaSpec(metric, float(np.nextafter(limit, 0.0)), 1000.0)
    broken = weekly(records, window_s=1000.0, sla=below)
    assert [r["sla_kept"] for r in broken] == [False, True]
    assert sla_summary(broken, below)["windows_kept"] == 1


def test_a_run_whose_window_metric_equals_its_sla_counts_the_window_kept(tmp_path, capsys):
    """The same log through ``olsctl run`` with ``sla: {metric: max_wait_s, max: 100,
    window_s: 1000}``: window 0's longest wait is exactly 100 s, so summary.json counts
    both windows kept, and the run's table says so."""
    lines = ["; MaxProcs: 2"] + [
        f"{j} {s} -1 {r} {p} -1 -1 {p} {r} -1 1 1 1 -1 1 -1 -1 -1" for j, s, r, p in ROWS]
    (tmp_path / "t.swf").write_text("\n".join(lines) + "\n")
    (tmp_path / "c.yaml").write_text(
        "trace: t.swf\nsla: {metric: max_wait_s, max: 100, window_s: 1000}\n")
    assert main(["run", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [w["max_wait_s"] for w in summary["weekly"]] == [100.0, 0.0]
    assert [w["sla_kept"] for w in summary["weekly"]] == [True, True]
    assert (summary["sla"]["windows"], summary["sla"]["windows_kept"]) == (2, 2)
    assert "2 of 2 (100.0%)" in out


# -- the controller's choice ---------------------------------------------------------------


def test_a_candidate_whose_score_equals_the_limit_meets_the_sla():
    """4 processors at t=0, EASY: job 1 (2 procs, 10 s, submitted 0) waits, its pass
    due. Under 2 active processors as under 4 it starts at once: mean bounded slowdown
    exactly 1.0 for both. With the limit 1.0 both meet the SLA, so the cheaper (2)
    wins as meeting it; were they taken as missing, the closest would win, the tie going
    to the larger machine (4)."""
    one = np.asarray
    snap = Snapshot(0.0, 4, 4, 0, one([1]), one([0.0]), one([2]), one([10.0]),
                    one([10.0]), one([np.nan]), pass_due=True)
    task = WhatIfTask(snap, {"name": "easy"})
    trials = [what_if(task, Candidate(n)) for n in (2, 4)]
    assert [(t.mean_bsld, t.unstarted, t.complete) for t in trials] == [(1.0, 0, True)] * 2
    best, reason, met = choose(trials, "mean_bsld", 1.0)
    assert (best.active_procs, reason, met) == (2, "cheapest meeting the SLA", True)
    # a hair below the limit the same trials miss it: the closest, the larger machine
    best, reason, met = choose(trials, "mean_bsld", float(np.nextafter(1.0, 0.0)))
    assert (best.active_procs, met) == (4, False)


#: 4 processors, EASY, SLA feedback over windows of 10,000 s; candidates 2 and 4
#: processors; a tick every 100 s from 0. Job 1 (4 procs, 100 s) and job 2 (4 procs,
#: 10 s) come at 0, job 3 (2 procs, 10 s) at 200.
FEEDBACK_ROWS = [(1, 0, 100, 4), (2, 0, 10, 4), (3, 200, 10, 2)]


@pytest.mark.parametrize("search", ["grid", "bisect", "cheapest-first", "bound-first"])
def test_under_full_feedback_pressure_a_what_if_at_slowdown_one_meets_the_limit(
        search, tmp_path, capsys):
    """The run of :data:`FEEDBACK_ROWS` under ``sla: {max: 2, feedback: true}``.

    - Tick at 0: nothing has waited yet, realized slowdown 1, pressure 1/2 = 0.5, beyond
      ``full_above`` (0.3): the limit is the least bounded slowdown, 1.0. Under 2
      processors neither 4-processor job can ever start, under 4 job 2 waits: none
      meets, the closest is 4; job 1 starts at 0.
    - Tick at 100: job 1 has ended, job 2 has waited 100 s: realized slowdowns 1 and
      1 + 100/10 = 11, mean 6, pressure 6/2 = 3: the limit is 1.0. Job 2's what-if
      slowdown is 11 under both candidates: none meets, the closest (a tie) is the
      larger machine, 4; job 2 starts at 100.
    - Tick at 200: job 3 has just come and waits with its pass due. The window's jobs
      so far: 1, 11 and 1 (job 3 has waited 0), mean 13/3, pressure above 2: the
      limit is 1.0 again. Job 3 starts at once under 2 processors as under 4: what-if
      slowdown exactly 1.0 for both, which meets the limit, so the cheaper, 2, is
      chosen as meeting the SLA (whatever the search), and job 3 starts at 200.
    """
    lines = ["; MaxProcs: 4"] + [
        f"{j} {s} -1 {r} {p} -1 -1 {p} {r} -1 1 1 1 -1 1 -1 -1 -1"
        for j, s, r, p in FEEDBACK_ROWS]
    (tmp_path / "t.swf").write_text("\n".join(lines) + "\n")
    (tmp_path / "c.yaml").write_text(
        "trace: t.swf\nsla: {window_s: 10000}\n"
        "controller:\n  interval_s: 100\n  candidates: {active_procs: {procs: [2, 4]}}\n"
        f"  search: {search}\n  sla: {{metric: mean_bsld, max: 2, feedback: true}}\n")
    out = tmp_path / "out"
    assert main(["run", str(tmp_path / "c.yaml"), "--out", str(out), "--quiet"]) == 0, \
        capsys.readouterr().err
    ticks = [json.loads(line) for line in (out / "decisions.jsonl").read_text().splitlines()]
    by_time = {d["time_s"]: d for d in ticks}
    assert [by_time[t]["feedback"]["limit"] for t in (0.0, 100.0)] == [1.0, 1.0]
    assert by_time[100.0]["feedback"]["pressure"] == pytest.approx(3.0, rel=1e-12)
    assert (by_time[100.0]["chosen"]["active_procs"], by_time[100.0]["sla_met"]) == (4, False)
    at_200 = by_time[200.0]
    assert at_200["feedback"]["pressure"] == pytest.approx(13 / 3 / 2, rel=1e-12)
    assert at_200["feedback"]["limit"] == 1.0
    assert at_200["waiting"] == 1
    assert {t["active_procs"]: t["mean_bsld"] for t in at_200["trials"]}[2] == 1.0
    assert all(t["mean_bsld"] == 1.0 for t in at_200["trials"])
    assert (at_200["chosen"]["active_procs"], at_200["sla_met"]) == (2, True)
    assert at_200["reason"].startswith("cheapest meeting the SLA")
    starts = _starts(out)
    assert starts == {1: 0.0, 2: 100.0, 3: 200.0}


def _starts(out: Path) -> dict[int, float]:
    import csv

    with open(out / "jobs.csv", newline="") as fh:
        return {int(r["job_id"]): float(r["starting_time"]) for r in csv.DictReader(fh)}
