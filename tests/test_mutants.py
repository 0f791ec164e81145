"""Hand-worked cases that pin rules a mutation check found unguarded by the rest of the
suite: the event model at a snapshot's own instant and under a wake still under way, the
SLA cut-off of what-ifs at its limit, the controller's dwell and the order in which it
finishes the closest candidate, the wake energy of the power forecast, and the tie rules
of the knapsack policies.

Every expected value below is worked out by hand in the test's docstring. The SLA
cut-off cases also run with numba's JIT disabled (marker ``nojit``, see conftest.py).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from conftest import make_main, run_main, workload_from_rows
from olsctl.checker import StrictChecker
from olsctl.controller import (Candidate, Controller, ControllerSettings, WhatIfTask,
                               choose, what_if)
from olsctl.policies import make_policy
from olsctl.power.cap import CapSchedule
from olsctl.power.profiles import PowerProfiles
from olsctl.power.runtime import power_state
from olsctl.state import SimState, Snapshot
from olsctl.whatif import JobTable, run_whatif


def _snapshot_at(sim, t: float) -> Snapshot:
    snaps = []
    sim.at(t, lambda s: snaps.append(s.state.snapshot()))
    sim.run()
    return snaps[0]


def _flat(levels: list[float]) -> PowerProfiles:
    """One phase per job at the given power per processor (mean = max = that level)."""
    n = len(levels)
    return PowerProfiles(np.arange(n + 1), np.ones(n), np.asarray(levels, dtype=float), 0)


# -- the what-if engine: arrivals at the snapshot's own instant ---------------------------


def test_arrivals_at_the_snapshot_instant_join_before_its_one_pass():
    """4 processors, EASY with SJF, exact estimates. Job 1 (4 procs, 100 s) and job 2
    (4 procs, 10 s) are both submitted at t=0. The instant has ONE pass, after all its
    arrivals: SJF puts job 2 (10 s) first, so job 2 starts at 0 and job 1 at 10 (job 2's
    end); the main simulator says so. A what-if from the machine at t=0 holding only
    job 1 (its pass still due), fed job 2 as an arrival at t=0, must give the same
    starts: the arrival joins before the pass. (Were the pass run before the arrival,
    job 1 would take the machine at 0 and job 2 would start at 100.)"""
    policy = make_policy({"name": "easy", "order": "sjf"})
    w = workload_from_rows([(1, 0, 100, 4), (2, 0, 10, 4)], machine_procs=4)
    assert run_main(w, policy=policy) == {2: 0.0, 1: 10.0}
    one = np.asarray
    snap = Snapshot(0.0, 4, 4, 0, one([1]), one([0.0]), one([4]), one([100.0]),
                    one([100.0]), one([np.nan]), pass_due=True)
    arrivals = JobTable(one([2]), one([0.0]), one([4]), one([10.0]), one([10.0]))
    res = run_whatif(snap, policy, arrivals=arrivals, checker=StrictChecker())
    assert dict(zip(res.job_id.tolist(), res.start_s.tolist())) == {1: 10.0, 2: 0.0}


# -- scoring: a candidate applied over a wake still under way ------------------------------


def test_a_candidate_is_compared_with_the_processors_a_pending_wake_brings():
    """8 processors, 2 active, wake latency 60 s, EASY. Job 1 (2 procs, 100 s) runs from
    0; job 2 (2 procs, 10 s) waits for processors. At t=10 the run asks for 6 (awake at
    70). The snapshot at t=40 holds 2 active processors and the wake (70, 6); the setting
    in force (the controller's) is 6.

    - Candidate 6 changes nothing: the wake under way finishes at 70 and job 2 starts
      then (wait 70). Re-requesting 6 would restart the wake (awake at 100) and delay
      job 2 to 100.
    - Candidate 2 is a change from 6: it applies at once and drops the pending wake, so
      job 2 waits for job 1's end at 100 (wait 100). Treating it as "no change" (2 are
      active) would let the wake finish and start job 2 at 70.
    Job 1 (wait 0) is in the snapshot too, so max_wait_s is job 2's wait."""
    w = workload_from_rows([(1, 0, 100, 2), (2, 0, 10, 2)], machine_procs=8)
    sim = make_main(w, active_procs=2)
    sim.wake_latency_s = 60.0
    sim.at(10, lambda s: s.request_active_procs(6))
    snap = _snapshot_at(sim, 40)
    assert (snap.active_procs, snap.wake, snap.n_running, snap.n_waiting) == (2, (70.0, 6), 1, 1)
    task = WhatIfTask(snap, {"name": "easy"}, wake_latency_s=60.0, current=Candidate(6))
    keep = what_if(task, Candidate(6))
    assert (keep.max_wait_s, keep.unstarted) == (70.0, 0)
    lower = what_if(task, Candidate(2))
    assert (lower.max_wait_s, lower.unstarted) == (100.0, 0)


def test_the_wake_energy_counts_each_processor_woken():
    """5 processors, 3 active (each idle active one 10 W, each sleeping one 2 W), one
    phase per job at mean = max power. Job 1 (2 procs, 100 s, 200 W each) and job 2
    (1 proc, 50 s, 100 W) start at 0; job 3 (4 procs, 40 s, 150 W each, submitted 10)
    waits. Snapshot at 10; power forecast over [10, 130], wake energy 1000 J a processor,
    no wake latency. Job 3 starts at 100 under both candidates (at 50 only 3 would be free
    on 5).
    - Candidate 4 (1 woken): [10,50) 400+100 + 1 idle x 10 + 1 asleep x 2 = 512 W;
      [50,100) 400 + 20 + 2 = 422 W; [100,130] 600 + 0 + 2 = 602 W:
      512x40 + 422x50 + 602x30 = 59,640 J, + 1 x 1000 J = 60,640 J.
    - Candidate 5 (2 woken): 520 W, 430 W, 610 W: 20,800 + 21,500 + 18,300 = 60,600 J,
      + 2 x 1000 J = 62,600 J."""
    w = workload_from_rows([(1, 0, 100, 2), (2, 0, 50, 1), (3, 10, 40, 4)], 5)
    sim = make_main(w, active_procs=3)
    sim.state.power = power_state(_flat([200.0, 100.0, 150.0]), [0, 0, 0], 10.0, 2.0, 500.0,
                                  CapSchedule.constant(10_000.0))
    snap = _snapshot_at(sim, 10)
    assert (snap.active_procs, snap.n_running, snap.n_waiting) == (3, 2, 1)
    task = WhatIfTask(snap, {"name": "easy"}, cost=(("energy", 1.0),), power_s=120.0,
                      wake_energy_j=1000.0)
    four, five = what_if(task, Candidate(4)), what_if(task, Candidate(5))
    assert four.max_wait_s == five.max_wait_s == 90.0  # job 3: 10 -> 100
    assert four.energy_j == pytest.approx(60_640.0, rel=1e-12)
    assert five.energy_j == pytest.approx(62_600.0, rel=1e-12)


# -- the SLA cut-off of what-ifs -------------------------------------------------------------


def test_a_what_if_whose_full_metric_equals_the_limit_is_not_cut_short():
    """A lower bound never exceeds the full metric, so a what-if whose limit is its own
    full metric must run to the end (and meet it), even where rounding of the bound's
    running sums lands an ulp above. 2 processors at t=10, EASY, exact estimates:
    job 1 (1 proc, submitted 7.6, started 8.9, 1.8 s) runs, expected end 8.9 + 1.8 =
    10.700000000000001 in binary floating point; job 2 (1 proc, 0.7 s, submitted 8.9)
    starts at 10 and ends at 10.0 + 0.7 = 10.7, one ulp earlier; job 3 (2 procs, 30 s,
    submitted 8.9) starts at 10.700000000000001. Bounded slowdowns 1 + wait / max(10,
    runtime): 1.13, 1.11 and 1 + 1.8/30 = 1.06, mean 1.1 (in floats 1.0999999999999999).
    At t=10.7 job 3 still waits, with a wait so far one ulp short of its final one: the
    bound is 1.1 in floats, above that limit by rounding alone. The trial must be the
    one without a limit."""
    one = np.asarray
    snap = Snapshot(10.0, 2, 2, 1, one([1, 2, 3]), one([7.6, 8.9, 8.9]), one([1, 1, 2]),
                    one([1.8, 0.7, 30.0]), one([1.8, 0.7, 30.0]), one([8.9, np.nan, np.nan]),
                    running_alloc=(None,), pass_due=True)
    task = WhatIfTask(snap, {"name": "easy"})
    full = what_if(task, Candidate(2))
    assert full.mean_bsld == pytest.approx(1.1, rel=1e-15)
    assert full.max_wait_s == pytest.approx(1.8, rel=1e-12)
    limited = what_if(replace(task, stop_above=("mean_bsld", full.mean_bsld)), Candidate(2))
    assert limited.complete and limited == full


def test_a_what_if_is_cut_short_only_beyond_the_margin():
    """The margin of the cut-off is part of its rule: a what-if is cut short once its
    lower bound is MORE than 1e-6 (relative, absolute for limits up to 1) above the limit.
    2 processors, EASY: job 1 (2 procs) runs until 5; job 2 (1 proc, submitted 0) waits
    from 0. The snapshot is taken at t = 0.5 + 1e-6, so job 2's wait so far (the
    max_wait_s bound at the first check) is exactly limit + margin for a limit of 0.5:
    not beyond it, so the run goes on to the end (job 2 starts at 5: max wait 5 s, which
    misses the SLA). At a limit of 0.4 the bound is beyond the margin: cut short there,
    with the bound as its metric."""
    t0 = 0.5 + 1e-6
    one = np.asarray
    snap = Snapshot(t0, 2, 2, 1, one([1, 2]), one([0.0, 0.0]), one([2, 1]), one([5.0, 3.0]),
                    one([5.0, 3.0]), one([0.0, np.nan]), running_alloc=(None,), pass_due=True)
    task = WhatIfTask(snap, {"name": "easy"})
    full = what_if(task, Candidate(2))
    assert full.max_wait_s == 5.0
    at_margin = what_if(replace(task, stop_above=("max_wait_s", 0.5)), Candidate(2))
    assert at_margin.complete and at_margin == full
    beyond = what_if(replace(task, stop_above=("max_wait_s", 0.4)), Candidate(2))
    assert not beyond.complete and beyond.max_wait_s == t0


# -- the controller: dwell, and finishing the closest candidate -----------------------------


def test_a_setting_may_change_again_exactly_min_dwell_after_the_last_change():
    """8 processors, candidates 2 and 8, ticks every 100 s, min_dwell 100 s. Job 1
    (2 procs, 50 s) comes at 0: the tick at 0 picks 2 processors (a change). Job 2
    (8 procs, 10 s) comes at 100: the tick at 100 is exactly min_dwell after the change,
    so it may change again: 2 processors can never start job 2, 8 can, so 8 applies at
    once and job 2 starts at 100 (not at the next tick, 200). The tick at 200 finds the
    run empty, 100 s after the last change again, and goes back to 2: three changes."""
    w = workload_from_rows([(1, 0, 50, 2), (2, 100, 10, 8)], machine_procs=8)
    sim = make_main(w)
    ctl = Controller(ControllerSettings(interval_s=100.0, procs=(2, 8), min_dwell_s=100.0),
                     {"name": "easy"})
    ctl.start(sim)
    starts = {int(r.job_id): float(r.start_s) for r in sim.run().jobs}
    assert starts == {1: 0.0, 2: 100.0}
    assert [d["chosen"]["active_procs"] for d in ctl.decisions] == [2, 8, 2]
    assert ctl.summary()["changes"] == 3


def test_the_closest_is_finished_from_the_lowest_bound_ties_to_the_larger_machine():
    """4 processors, EASY. Job 1 (4 procs, 100 s) runs from 0; jobs 2, 3, 4 (2 procs,
    100 s each, submitted 0) wait. Snapshot at 50; SLA mean bsld <= 1.2; candidates 2
    and 4.
    Both what-ifs are cut at the first check (t=50, nothing can start): bound
    (1 + 3 x (1 + 50/100)) / 4 = 1.375 > 1.2, the same for both. Full runs: with 4,
    jobs 2 and 3 start at 100, job 4 at 200: (1 + 2 + 2 + 3) / 4 = 2.0; with 2, one at a
    time at 100, 200, 300: (1 + 2 + 3 + 4) / 4 = 2.5. None meets: the closest is
    finished, lowest bound first, ties to the larger machine: 4 runs in full (2.0); then
    2 goes on with 2.0 as its limit and is cut at t=200, where job 4 still waits: bound
    (1 + 2 + 3 + (1 + 200/100)) / 4 = 2.25. The choice is 4, and only 4 ran in full."""
    w = workload_from_rows([(1, 0, 100, 4), (2, 0, 100, 2), (3, 0, 100, 2), (4, 0, 100, 2)], 4)
    snap = _snapshot_at(make_main(w), 50)
    assert (snap.n_running, snap.n_waiting) == (1, 3)
    s = ControllerSettings(procs=(2, 4), sla_max=1.2)
    ctl = Controller(s, {"name": "easy"})
    task = WhatIfTask(snap, {"name": "easy"}, stop_above=("mean_bsld", 1.2))
    trials = ctl._search(task, s.candidates(4), snap.n_waiting)
    assert [(t.active_procs, t.complete) for t in trials] == [(2, False), (4, False)]
    assert [t.mean_bsld for t in trials] == pytest.approx([1.375, 1.375], rel=1e-12)
    assert not choose(trials, "mean_bsld", 1.2)[2]
    trials = ctl._complete_closest(task, trials, snap.n_waiting)
    by = {t.active_procs: t for t in trials}
    assert by[4].complete and by[4].mean_bsld == pytest.approx(2.0, rel=1e-12)
    assert not by[2].complete and by[2].stopped_at_s == 200.0
    assert by[2].mean_bsld == pytest.approx(2.25, rel=1e-12)
    assert choose(trials, "mean_bsld", 1.2)[0].active_procs == 4


# -- power-aware policies: tie rules ---------------------------------------------------------


def _waiting(levels: list[float], cap_w: float, now: float = 0.0) -> SimState:
    """A 4-processor machine, idle processors at 0 W; one 1-processor job per level,
    all submitted at 0, waiting in job order; the clock at ``now``."""
    n = len(levels)
    st = SimState(4, list(range(n)), [0.0] * n, [1] * n, [100.0] * n, [100.0] * n,
                  checker=StrictChecker())
    st.power = power_state(_flat(levels), [0] * n, 0.0, 0.0, 100.0, CapSchedule.constant(cap_w))
    for i in range(n):
        st.arrive(i)
    st.now_s = now
    return st


def test_window_knapsack_ties_keep_the_earlier_job():
    """Window of 2: two 1-processor jobs at 100 W each, 150 W of headroom, 4 free
    processors. Both together (200 W) are over the cap; either alone gives the most
    processors (1) under it. The tie keeps the earlier job: job 0 starts, job 1 waits."""
    st = _waiting([100.0, 100.0], 150.0)
    st.run_pass(make_policy({"name": "knapsack", "window": 2, "predictor": "oracle"}))
    assert st.started == [0] and st.power.forced_starts == 0


def test_greedy_knapsack_ties_keep_the_queue_order():
    """At t=10, two 1-processor jobs submitted at 0 (wait 10 each) and predicted at 100 W
    each: the same profit / weight, 10 / 100. Headroom 150 W: only one fits; the tie
    keeps the queue order, so job 0 starts and job 1 waits."""
    st = _waiting([100.0, 100.0], 150.0, now=10.0)
    st.run_pass(make_policy({"name": "greedy-knapsack", "predictor": "oracle"}))
    assert st.started == [0] and st.power.forced_starts == 0
