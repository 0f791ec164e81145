"""What-if scoring by hand: per-queue bounded slowdowns under MQBF, and the power forecast
(energy, mean and peak power) of a what-if on a snapshot with power."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import make_main, workload_from_rows
from olsctl.controller import Candidate, WhatIfTask, what_if
from olsctl.policies import make_policy
from olsctl.power.cap import CapSchedule
from olsctl.power.profiles import PowerProfiles
from olsctl.power.runtime import power_state

MQBF2 = {"name": "mqbf", "queues": 2, "boundaries_s": [100]}


def _snapshot_at(sim, t: float):
    snaps = []
    sim.at(t, lambda s: snaps.append(s.state.snapshot()))
    sim.run()
    return snaps[0]


def test_per_queue_mean_bounded_slowdown_by_hand():
    # 4 processors, MQBF with 2 queues split at 100 s (partitions of 2 and 2), exact
    # estimates. Queue 1: estimate < 100 s; queue 2: >= 100 s.
    #   job 1: submit 0,  4 procs, 100 s  (queue 2)
    #   job 2: submit 0,  2 procs,   5 s  (queue 1)
    #   job 3: submit 30, 2 procs,  20 s  (queue 1)
    #   job 4: submit 40, 4 procs, 200 s  (queue 2)
    # t=0: job 1 (first in arrival order) starts on its 2 + 2 borrowed processors; job 2
    # waits. The snapshot at t=50: job 1 runs, jobs 2, 3, 4 wait. In the what-if with
    # all 4 processors: at 100 job 1 ends; queue 1 goes first (its head, job 2, is first
    # in order): job 2 starts in partition 1 and job 3 borrows partition 2; job 4 (4
    # procs) waits until job 3 ends at 120 (job 2 ends at 105, 2 processors are not
    # enough). Bounded slowdown 1 + wait / max(10 s, runtime):
    #   job 1: 1 + 0 = 1                       job 2: 1 + 100 / 10 = 11 (5 s -> 10 s)
    #   job 3: 1 + (100 - 30) / 20 = 4.5       job 4: 1 + (120 - 40) / 200 = 1.4
    # queue 1: (11 + 4.5) / 2 = 7.75; queue 2: (1 + 1.4) / 2 = 1.2; all: 17.9 / 4.
    w = workload_from_rows([(1, 0, 100, 4), (2, 0, 5, 2), (3, 30, 20, 2), (4, 40, 200, 4)], 4)
    snap = _snapshot_at(make_main(w, policy=make_policy(MQBF2)), 50)
    assert (snap.n_running, snap.n_waiting) == (1, 3)
    trial = what_if(WhatIfTask(snap, MQBF2), Candidate(4))
    assert trial.queue_mean_bsld == pytest.approx((7.75, 1.2), rel=1e-12)
    assert trial.mean_bsld == pytest.approx(17.9 / 4, rel=1e-12)
    assert (trial.max_wait_s, trial.unstarted, trial.censored) == (100.0, 0, 0)
    assert trial.mean_wait_s == pytest.approx((0 + 100 + 70 + 80) / 4, rel=1e-12)


def test_per_queue_mean_bounded_slowdown_of_a_queue_of_one_job():
    # the same policy, 2 processors: job 1 (queue 1, 2 procs, 50 s) runs 0-50; job 2
    # (queue 2, 1 proc, 300 s, submitted at 10) waits for it: wait 40, bsld 1 + 40/300;
    # job 3 (queue 1, 1 proc, 8 s, submitted at 20) starts beside it at 50: wait 30 on
    # a 10 s bound, bsld 4. Snapshot at 20 (job 1 running, jobs 2 and 3 waiting).
    # queue 1: (1 + 4) / 2 = 2.5; queue 2: 1 + 40 / 300.
    w = workload_from_rows([(1, 0, 50, 2), (2, 10, 300, 1), (3, 20, 8, 1)], 2)
    snap = _snapshot_at(make_main(w, policy=make_policy(MQBF2)), 20)
    trial = what_if(WhatIfTask(snap, MQBF2), Candidate(2))
    assert trial.queue_mean_bsld == pytest.approx((2.5, 1 + 40 / 300), rel=1e-12)
    assert trial.mean_bsld == pytest.approx((1 + 4 + 1 + 40 / 300) / 3, rel=1e-12)


def test_a_policy_without_queues_has_no_per_queue_slowdown():
    w = workload_from_rows([(1, 0, 50, 2), (2, 10, 300, 1)], 2)
    snap = _snapshot_at(make_main(w), 10)
    assert what_if(WhatIfTask(snap, {"name": "easy"}), Candidate(2)).queue_mean_bsld is None


def _profiles(phases: list[list[tuple[float, float]]]) -> PowerProfiles:
    """Per job, its phases as (fraction of the run, W per processor)."""
    offset = np.cumsum([0] + [len(p) for p in phases])
    frac = np.asarray([f for p in phases for f, _ in p], dtype=float)
    level = np.asarray([w for p in phases for _, w in p], dtype=float)
    return PowerProfiles(offset, frac, level, 0)


#: W per processor: idle active processors and sleeping ones
IDLE_W, SLEEP_W = 10.0, 2.0


def _power_snapshot():
    # 5 processors. Per processor: job 1 at 100 W for half its run, then 300 W (mean 200,
    # max 300); job 2 at 40 W for a quarter, then 120 W (mean 100, max 120); job 3 at
    # 100 W then 200 W, half and half (mean 150, max 200).
    #   job 1: submit 0,  2 procs, 100 s;  job 2: submit 0, 1 proc, 50 s;
    #   job 3: submit 10, 4 procs,  40 s  (waits: only 2 processors are free)
    # Snapshot at 10: jobs 1 and 2 run, job 3 waits.
    w = workload_from_rows([(1, 0, 100, 2), (2, 0, 50, 1), (3, 10, 40, 4)], 5)
    prof = _profiles([[(0.5, 100.0), (0.5, 300.0)], [(0.25, 40.0), (0.75, 120.0)],
                      [(0.5, 100.0), (0.5, 200.0)]])
    assert prof.mean_w.tolist() == [200.0, 100.0, 150.0]
    assert prof.max_w.tolist() == [300.0, 120.0, 200.0]
    sim = make_main(w)
    sim.state.power = power_state(prof, [0, 0, 0], IDLE_W, SLEEP_W, 500.0,
                                  CapSchedule.constant(10_000.0))
    return _snapshot_at(sim, 10)


def test_power_forecast_of_a_what_if_by_hand():
    # The candidate keeps 4 of the 5 processors active (1 asleep at 2 W) over the next
    # 120 s, [10, 130]. Job 2 ends at 50, job 1 at 100; job 3 (4 procs) starts at 100.
    # Energy and mean power take each job at its mean power, the peak at its maximum:
    #   [10, 50):  jobs 1 + 2, 1 idle, 1 asleep
    #              mean 2x200 + 100 + 10 + 2 = 512 W   peak 2x300 + 120 + 10 + 2 = 732 W
    #   [50, 100): job 1, 2 idle, 1 asleep
    #              mean 400 + 20 + 2 = 422 W           peak 600 + 20 + 2 = 622 W
    #   [100, 130]: job 3, 0 idle, 1 asleep
    #              mean 4x150 + 2 = 602 W              peak 4x200 + 2 = 802 W
    # energy 512x40 + 422x50 + 602x30 = 59,640 J; mean 59,640 / 120 = 497 W; peak 802 W
    # (at mean powers the highest level would be 602 W).
    snap = _power_snapshot()
    assert (snap.n_running, snap.n_waiting) == (2, 1)
    task = WhatIfTask(snap, {"name": "easy"}, cost=(("peak_power", 1.0),), power_s=120.0)
    trial = what_if(task, Candidate(4))
    assert trial.unstarted == 0 and trial.max_wait_s == 90.0  # job 3: 10 -> 100
    assert trial.energy_j == pytest.approx(59_640.0, rel=1e-12)
    assert trial.mean_power_w == pytest.approx(497.0, rel=1e-12)
    assert trial.peak_power_w == pytest.approx(802.0, rel=1e-12)
    assert trial.cost == pytest.approx(802.0, rel=1e-12)
    assert not trial.over_cap


def test_a_cap_between_the_mean_and_the_max_forecast_cannot_be_kept():
    # the same what-if under a 700 W cap (EASY does not meter power, so the schedule is
    # the same): the jobs at their maximum reach 802 W > 700 W, so the cap could not be
    # kept (the highest mean level, 602 W, is below it); under 900 W it could.
    snap = _power_snapshot()
    task = WhatIfTask(snap, {"name": "easy"}, power_s=120.0)
    low = what_if(task, Candidate(4, cap_w=700.0))
    assert low.peak_power_w == pytest.approx(802.0, rel=1e-12) and low.over_cap
    assert low.metric("mean_bsld") == float("inf")
    high = what_if(task, Candidate(4, cap_w=900.0))
    assert not high.over_cap and high.metric("mean_bsld") == pytest.approx(
        (1 + 1 + 1 + 90 / 40) / 3, rel=1e-12)


def test_new_trial_is_the_trial_the_dataclass_makes():
    """new_trial (a batch's fast way to make a Trial) sets every field, as Trial does."""
    from dataclasses import fields

    from olsctl.controller.trials import Trial, new_trial

    c = Candidate(8, params=(("share", 2),))
    inf, nan = float("inf"), float("nan")
    for args, stop in [((c, 5, 0, 0, 1.5, 2.5, 30.0, 60.0, 8.0), None),
                       ((c, 5, 2, 0, inf, inf, inf, inf, 8.0), None),
                       ((c, 7, 0, 3, 4.0, nan, nan, nan, 16.0), 3600.0)]:
        want = Trial(*args, stopped_at_s=stop)
        got = new_trial(*args, stop)
        assert type(got) is Trial
        assert set(vars(got)) == {f.name for f in fields(Trial)}
        assert repr(got) == repr(want)  # (repr: NaN fields compare unequal)
        assert got.as_dict() == want.as_dict() or stop is not None
        assert got.complete == (stop is None)


def test_a_snapshot_sets_every_field_by_hand():
    """SimState.snapshot (made without Snapshot's __init__) sets every field: job 0
    runs, jobs 2 then 1 wait (in queue order)."""
    from dataclasses import fields, replace

    from olsctl.state import SimState, Snapshot

    st = SimState(8, [10, 11, 12], [0.0, 1.0, 2.0], [4, 8, 2], [100.0, 50.0, 20.0],
                  [90.0, 40.0, 10.0])
    st.now_s = 5.0
    st.queue = [0, 2, 1]
    st.start(0)
    st.queue = [2, 1]
    st.wake = (60.0, 8)  # (fields that differ from Snapshot's defaults)
    st.pass_due = False
    snap = st.snapshot()
    assert set(vars(snap)) == {f.name for f in fields(Snapshot)}
    again = replace(snap)  # through __init__, every field read back
    assert type(again) is Snapshot
    assert (snap.now_s, snap.total_procs, snap.active_procs, snap.n_running) == (5.0, 8, 8, 1)
    assert snap.job_id.tolist() == [10, 12, 11] and snap.job_id.dtype == np.int64
    assert snap.procs.tolist() == [4, 2, 8] and snap.procs.dtype == np.int64
    assert snap.submit_s.tolist() == [0.0, 2.0, 1.0]
    assert snap.estimate_s.tolist() == [100.0, 20.0, 50.0]
    assert snap.runtime_s.tolist() == [90.0, 10.0, 40.0]
    assert snap.start_s[0] == 5.0 and np.isnan(snap.start_s[1:]).all()
    assert snap.running_alloc == (None,) and snap.wake == (60.0, 8) and snap.pass_due is False
    assert (snap.power, snap.budget, snap.limit) == (None, None, None)
    assert snap.n_waiting == 2


def test_a_snapshot_follows_jobs_appended_and_jobs_a_job_model_reshapes():
    """Snapshots read the job columns from copies made once; a job appended later (as
    what-ifs add arrivals) is in the next snapshot, and under a job model that reshapes
    jobs as they start (RMAP/PARM's budget) the snapshot reads the changed lists."""
    from olsctl.state import SimState

    st = SimState(8, [10, 11], [0.0, 1.0], [4, 8], [100.0, 50.0], [90.0, 40.0])
    st.queue = [0, 1]
    first = st.snapshot()
    assert first.job_id.tolist() == [10, 11]
    for column, value in ((st.job_id, 12), (st.submit_s, 2.0), (st.procs, 2),
                          (st.estimate_s, 20.0), (st.runtime_s, 10.0),
                          (st.start_s, float("nan"))):
        column.append(value)
    st.queue = [0, 2, 1]
    snap = st.snapshot()
    assert snap.job_id.tolist() == [10, 12, 11] and snap.procs.tolist() == [4, 2, 8]
    assert snap.estimate_s.tolist() == [100.0, 20.0, 50.0]
    class JobModel:  # (any job model: its jobs change as they start)
        def subset(self, rows):
            return list(rows)

    st.budget = JobModel()
    st.now_s = 3.0
    st.procs[2], st.estimate_s[2], st.runtime_s[2] = 4, 10.0, 5.0
    st.start(2)
    st.queue = [0, 1]
    snap = st.snapshot()
    assert snap.job_id.tolist() == [12, 10, 11] and snap.procs.tolist() == [4, 4, 8]
    assert snap.estimate_s.tolist() == [10.0, 100.0, 50.0]
    assert snap.runtime_s.tolist() == [5.0, 90.0, 40.0]
    assert snap.submit_s.tolist() == [2.0, 0.0, 1.0] and snap.budget == [2, 0, 1]


def test_a_candidates_policy_is_built_once_per_base_and_setting():
    from olsctl.controller.trials import candidate_policy

    base = {"name": "knapsack", "window": 20, "predictor": {"name": "history"}}
    five, twenty = Candidate(4, window=5), Candidate(8, cap_w=100.0, window=20)
    got = candidate_policy(base, five)
    assert got.window == 5 and candidate_policy(base, five) is got
    assert candidate_policy(base, Candidate(16, window=5)) is got  # the machine: no matter
    assert candidate_policy(base, twenty).window == 20
    other = dict(base, order="fcfs")  # another base spec: its own policy
    assert candidate_policy(other, five).order == "fcfs" and got.order == "wfp"
    assert candidate_policy(base, Candidate(4)).window == 20  # the base's own window


def _plain_forecast_sums(now, end, procs, start, runtime, mean_w, max_w, total, active,
                         idle_w, sleep_w):
    """The forecast's sums as plain Python over a dict of instants (each instant's
    changes summed in job order, a job's start before its end), to check the compiled
    :func:`olsctl.controller.forecast.forecast_sums` against."""
    events: dict = {}
    for j in range(min(len(start), len(mean_w))):
        s = start[j]
        if s != s or s >= end or s + runtime[j] <= now:
            continue
        e = s + runtime[j]
        w, top = procs[j] * mean_w[j], procs[j] * max_w[j]
        a = events.setdefault(max(s, now), [0.0, 0.0, 0.0])
        a[0] += procs[j]
        a[1] += w
        a[2] += top
        if e < end:
            b = events.setdefault(e, [0.0, 0.0, 0.0])
            b[0] -= procs[j]
            b[1] -= w
            b[2] -= top
    busy = busy_w = busy_top = energy = idle_energy = peak = 0.0
    t_prev = now
    for t in sorted(events) + [end]:
        if t > t_prev:
            idle = active - busy if active > busy else 0.0
            rest = idle_w * idle + sleep_w * (total - (active if active > busy else busy))
            energy += (busy_w + rest) * (t - t_prev)
            idle_energy += rest * (t - t_prev)
            peak = max(peak, busy_top + rest)
            t_prev = t
        d = events.get(t)
        if d is not None:
            busy, busy_w, busy_top = busy + d[0], busy_w + d[1], busy_top + d[2]
    return energy, peak, idle_energy


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_forecast_sums_equal_the_plain_sums_to_the_bit(seed):
    """On random what-ifs whose starts and ends fall on shared instants (a coarse grid,
    some before the span, some unstarted, fewer profiles than jobs), the compiled sums
    equal the plain ones exactly: the same additions in the same order."""
    from olsctl.controller.forecast import forecast_sums
    from olsctl.policies.core.jit import compiled

    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 80))
    procs = rng.integers(1, 9, n).astype(np.int64)
    start = rng.integers(-4, 12, n) * 10.0 + 0.1 * rng.integers(0, 2, n)
    start[rng.random(n) < 0.2] = np.nan
    runtime = rng.integers(0, 8, n) * 10.0
    mean_w = rng.uniform(50, 300, n)
    max_w = mean_w * rng.uniform(1, 1.5, n)
    n_power = int(rng.integers(max(n - 2, 0), n + 1))
    total = int(procs.sum()) + int(rng.integers(0, 8))
    args = (0.0, 100.0, procs, start, runtime, mean_w[:n_power], max_w[:n_power], total,
            int(rng.integers(1, total + 1)) if total else 0, 40.0, 3.0)
    want = _plain_forecast_sums(*args)
    assert compiled().forecast_sums(*args) == want
    assert forecast_sums(*args) == want  # (the same source, uncompiled)
