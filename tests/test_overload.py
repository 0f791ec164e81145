"""An overloaded tick: when the waiting jobs ask for more than the whole machine does in
an SLA window and the jobs in the system surely miss the SLA's own limit whatever the
setting (their waits so far alone put the metric above it), the controller takes the
largest setting without running what-ifs. Hand-worked traces.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from olsctl.cli import main
from olsctl.controller.tick import OVERLOADED, metric_floor
from olsctl.state import Snapshot


def _run(tmp_path, rows, sla, extra=""):
    """Run a 4-processor trace of (id, submit, runtime, procs) under the controller
    over 2 or 4 processors, hourly; returns the decisions by time."""
    lines = ["; MaxProcs: 4"] + [
        f"{j} {s} -1 {r} {p} -1 -1 {p} {r} -1 1 -1 -1 -1 -1 -1 -1 -1" for j, s, r, p in rows]
    (tmp_path / "t.swf").write_text("\n".join(lines) + "\n")
    (tmp_path / "c.yaml").write_text(
        "trace: t.swf\ncontroller:\n  interval_s: 3600\n"
        "  candidates: {active_procs: {procs: [2, 4]}}\n"
        f"  sla: {sla}\n  search: cheapest-first\n{extra}out: out\n")
    assert main(["run", "c.yaml", "--quiet", "--strict"]) == 0
    return {d["time_s"]: d for d in map(json.loads, (tmp_path / "out" / "decisions.jsonl")
                                         .read_text().splitlines())}


#: A (4 processors, 10,000 s) at 0, B (1 processor, 5 s) at 10, C (4 processors,
#: 700,000 s) at 20: B and C wait behind A; C alone asks for 2,800,000 processor-seconds,
#: more than the machine's 4 x 604,800 in a week
ROWS = [(1, 0, 10_000, 4), (2, 10, 5, 1), (3, 20, 700_000, 4)]


def _least(t: float) -> float:
    """The least mean bsld at ``t`` (A running since 0; B and C waiting)."""
    return (1 + (1 + (t - 10) / 10) + (1 + (t - 20) / 700_000)) / 3


def test_a_tick_whose_jobs_already_miss_the_sla_takes_the_whole_machine(tmp_path,
                                                                         monkeypatch):
    """The tick at 0 sees A alone: 2 processors cannot run it, 4 can (bsld 1), so 4. At
    3600 the system holds A (bsld 1), B, which has waited 3590 s (bsld 360), and C:
    their mean is at least 120.67, above the SLA's 50 whatever the setting, and the
    queue asks for more than a week of the machine: 4 processors without a what-if;
    at 7200 again. A ends at 10,000, B runs to 10,005, then C starts: at 10,800 nothing
    waits, a plain tick."""
    monkeypatch.chdir(tmp_path)
    at = _run(tmp_path, ROWS, "{metric: mean_bsld, max: 50}")
    assert at[0.0]["trials"] and at[0.0]["chosen"] == {"active_procs": 4}
    for t in (3600.0, 7200.0):
        assert at[t]["reason"] == OVERLOADED
        assert at[t]["trials"] == [] and at[t]["sla_met"] is False
        assert at[t]["floor"] == pytest.approx(_least(t))
        assert at[t]["chosen"] == {"active_procs": 4}
    assert at[10_800.0]["reason"] != OVERLOADED and "floor" not in at[10_800.0]


def test_a_tick_just_within_the_sla_runs_its_what_ifs(tmp_path, monkeypatch):
    """The same trace under an SLA exactly the least mean at 3600: not surely missed, so
    the what-ifs run there; at 7200 it is overloaded."""
    monkeypatch.chdir(tmp_path)
    at = _run(tmp_path, ROWS, f"{{metric: mean_bsld, max: {_least(3600.0)!r}}}")
    assert at[3600.0]["trials"] and at[3600.0]["reason"] != OVERLOADED
    assert at[7200.0]["reason"] == OVERLOADED


def test_a_short_queue_that_misses_the_sla_is_not_overload(tmp_path, monkeypatch):
    """Without C the queue asks for 5 processor-seconds: the ticks miss the SLA but run
    their what-ifs and take the closest."""
    monkeypatch.chdir(tmp_path)
    at = _run(tmp_path, ROWS[:2], "{metric: mean_bsld, max: 50}")
    assert at[3600.0]["trials"] and at[3600.0]["sla_met"] is False
    assert all(d["reason"] != OVERLOADED for d in at.values())


def test_other_arrival_models_are_not_bound_by_the_snapshot(tmp_path, monkeypatch):
    """With arrivals fed to the what-ifs, new jobs could bring the mean down: no
    overloaded tick."""
    monkeypatch.chdir(tmp_path)
    at = _run(tmp_path, ROWS, "{metric: mean_bsld, max: 50}", "  arrivals: recent\n")
    assert all(d["reason"] != OVERLOADED for d in at.values())


def test_metric_floor_counts_running_waits_and_waits_so_far():
    # at 100: job 0 ran from 40 (submitted 0, runtime 20: bsld 1 + 40/20 = 3); job 1
    # waits since 50 (runtime 5: bsld 1 + 50/10 = 6); job 2 waits since 90 (runtime
    # 100: 1 + 10/100 = 1.1)
    snap = Snapshot(now_s=100.0, total_procs=4, active_procs=4, n_running=1,
                    job_id=np.arange(3), submit_s=np.array([0.0, 50.0, 90.0]),
                    procs=np.ones(3, dtype=np.int64), estimate_s=np.array([20.0, 5.0, 100.0]),
                    runtime_s=np.array([20.0, 5.0, 100.0]),
                    start_s=np.array([40.0, np.nan, np.nan]))
    assert metric_floor(snap, "mean_bsld") == pytest.approx((3 + 6 + 1.1) / 3)
    assert metric_floor(snap, "mean_wait_s") == pytest.approx((40 + 50 + 10) / 3)
    assert metric_floor(snap, "max_wait_s") == 50.0
    assert metric_floor(snap, "p95_bsld") is None
