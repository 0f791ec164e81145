"""Metrics against hand-worked answers."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from olsctl.metrics import WEEK_S, bounded_slowdown, summarize, week_origin, weekly
from olsctl.records import JobRecord, RunRecords, TimeSeries
from olsctl.run_files import jobs_csv, num
from olsctl.metrics import job_columns


def _records(total, jobs, samples):
    ts = TimeSeries()
    for t, q, b, a in samples:
        ts.time_s.append(t)
        ts.queue_len.append(q)
        ts.busy_procs.append(b)
        ts.active_procs.append(a)
    return RunRecords(total, [JobRecord(*j) for j in jobs], ts)


def test_bounded_slowdown_uses_ten_second_floor():
    import numpy as np
    got = bounded_slowdown(np.array([0.0, 30.0, 30.0]), np.array([5.0, 5.0, 60.0]))
    assert got.tolist() == [1.0, 4.0, 1.5]


def test_summary_of_a_hand_worked_schedule():
    # 2 processors. A (2 procs, 5 s) runs 0-5; B (1 proc, 20 s, submitted 1) and
    # C (1 proc, 4 s, submitted 2) both start at 5 when A ends.
    # bsld: A 1, B 1 + 4/20 = 1.2, C 1 + 3/max(10, 4) = 1.3; waits 0, 4, 3.
    # utilization: (2*5 + 20 + 4) / (2 * (25 - 0)) = 0.68
    rec = _records(2,
                   [(1, 0, 0, 5, 5, 2, 5), (2, 1, 5, 25, 20, 1, 20), (3, 2, 5, 9, 4, 1, 4)],
                   [(0, 0, 2, 2), (1, 1, 2, 2), (2, 2, 2, 2), (5, 0, 2, 2), (9, 0, 1, 2),
                    (25, 0, 0, 2)])
    m = summarize(rec)
    assert m["jobs"] == 3
    assert m["mean_bsld"] == pytest.approx((1 + 1.2 + 1.3) / 3)
    assert m["max_bsld"] == pytest.approx(1.3)
    assert m["mean_wait_s"] == pytest.approx(7 / 3)
    assert m["mean_turnaround_s"] == pytest.approx((5 + 24 + 7) / 3)
    assert m["utilization"] == pytest.approx(0.68)
    assert m["utilization_active"] == pytest.approx(0.68)
    assert m["processor_savings"] == pytest.approx(0.0)


def test_active_processor_integral_and_savings():
    # 4 processors, 2 active for the first half of a 100 s run, 4 afterwards.
    # One job of 1 proc runs 0-100: area 100; active integral 2*50 + 4*50 = 300.
    rec = _records(4, [(1, 0, 0, 100, 100, 1, 100)],
                   [(0, 0, 1, 2), (50, 0, 1, 4), (100, 0, 0, 4)])
    m = summarize(rec)
    assert m["utilization"] == pytest.approx(100 / 400)
    assert m["utilization_active"] == pytest.approx(100 / 300)
    assert m["mean_active_procs"] == pytest.approx(3.0)
    assert m["processor_savings"] == pytest.approx(0.25)


def test_weekly_metrics_split_at_week_boundaries():
    # 1 processor. X runs the whole first week; Y (submitted 100 s into week 2) runs
    # 100 s. Week 0 is fully busy; week 1 is clipped to the run's end (200 s long),
    # busy for 100 s.
    w = WEEK_S
    rec = _records(1, [(1, 0, 0, w, w, 1, w), (2, w + 100, w + 100, w + 200, 100, 1, 100)],
                   [(0, 0, 1, 1), (w, 0, 0, 1), (w + 100, 0, 1, 1), (w + 200, 0, 0, 1)])
    rows = weekly(rec)
    assert [r["jobs"] for r in rows] == [1, 1]
    assert rows[0]["utilization"] == pytest.approx(1.0)
    assert rows[1]["utilization"] == pytest.approx(0.5)
    assert rows[0]["mean_bsld"] == pytest.approx(1.0)
    assert rows[0]["week_start"] is None


def test_week_origin_is_monday_midnight_in_trace_time_zone():
    unix_start, tz_s = 843480031, 3600  # KTH-SP2 header
    first = 599850.0
    origin, date = week_origin(first, unix_start, tz_s)
    assert 0 <= first - origin < WEEK_S
    local = datetime.fromtimestamp(unix_start + origin, timezone(timedelta(seconds=tz_s)))
    assert (local.weekday(), local.hour, local.minute, local.second) == (0, 0, 0, 0)
    assert date == local.date().isoformat()


def test_numbers_are_written_exactly():
    assert num(3.0) == "3"
    assert num(7) == "7"
    assert num(0.1) == "0.1"
    assert num(1 / 3) == repr(1 / 3)
    rec = _records(2, [(5, 0, 1.5, 3.5, 2, 1, 2)], [(0, 1, 0, 2), (1.5, 0, 1, 2)])
    text = jobs_csv(job_columns(rec))
    assert text.splitlines()[1] == "5,0,1.5,3.5,2,1.5,3.5,1,2,1.15"
