"""The event model, by hand: changes the state holds as data (a wake under way, the cap
schedule's next change) run at their instant in the main simulator and in what-ifs alike.
"""

from __future__ import annotations

import math
import pickle

import numpy as np

from conftest import make_main, workload_from_rows
from olsctl.checker import StrictChecker
from olsctl.policies import make_policy
from olsctl.power.cap import CapSchedule
from olsctl.power.profiles import PowerProfiles
from olsctl.power.runtime import power_state
from olsctl.whatif import run_whatif


def _flat(levels: list[float]) -> PowerProfiles:
    """One phase per job at the given power per processor."""
    n = len(levels)
    return PowerProfiles(np.arange(n + 1), np.ones(n), np.asarray(levels, dtype=float), 0)


def _starts(records) -> dict[int, float]:
    return {int(r.job_id): float(r.start_s) for r in records.jobs}


def test_a_later_wake_request_supersedes_one_still_under_way():
    """8 processors, 2 active. Job 1 (4 processors) waits. At t=10 the run asks for 6
    (awake at 70), at t=30 for 4 (awake at 90): the first request is dropped, so job 1
    starts at 90, not at 70. A snapshot at 40 carries the wake under way, and its what-if
    starts job 1 at 90 too."""
    w = workload_from_rows([(1, 0, 500, 4), (2, 0, 50, 2)], machine_procs=8)
    snaps = []
    sim = make_main(w, active_procs=2)
    sim.wake_latency_s = 60.0
    sim.at(10, lambda s: s.request_active_procs(6))
    sim.at(30, lambda s: s.request_active_procs(4))
    sim.at(40, lambda s: snaps.append(s.state.snapshot()))
    starts = _starts(sim.run())
    assert starts == {2: 0.0, 1: 90.0}
    snap = snaps[0]
    assert snap.active_procs == 2 and snap.wake == (90.0, 4)
    snap = pickle.loads(pickle.dumps(snap))  # the wake rides in the pickled snapshot
    res = run_whatif(snap, make_policy({"name": "easy"}), checker=StrictChecker())
    assert dict(zip(res.job_id.tolist(), res.start_s.tolist()))[1] == 90.0


def test_lowering_drops_a_wake_under_way():
    """A request for fewer processors applies at once and drops the pending raise."""
    w = workload_from_rows([(1, 0, 500, 4)], machine_procs=8)
    sim = make_main(w, active_procs=2)
    sim.wake_latency_s = 60.0
    sim.at(10, lambda s: s.request_active_procs(6))
    sim.at(20, lambda s: s.request_active_procs(3))
    sim.at(200, lambda s: s.request_active_procs(4))  # awake at 260
    assert _starts(sim.run()) == {1: 260.0}


def _capped(w, policy_spec, cap):
    sim = make_main(w, policy=make_policy(policy_spec))
    sim.state.power = power_state(_flat([400.0] * len(w)), [0] * len(w), 0.0, 0.0, 400.0,
                                  cap)
    return sim


def test_a_pass_runs_at_each_cap_change():
    """naive-cap assumes 400 W a processor. The cap is 1000 W until t=500, then 2000 W.
    Job 1 (2 procs, 800 W) runs from 0 to 1000; job 2 (2 procs) arrives at 10 and needs
    800 W more than the 1000 W cap allows: it starts at 500, when the cap rises, not at
    1000 when job 1 ends. A what-if from a snapshot at 10 starts it at 500 too."""
    w = workload_from_rows([(1, 0, 1000, 2), (2, 10, 100, 2)], machine_procs=4)
    cap = CapSchedule((-math.inf, 500.0), (1000.0, 2000.0))
    snaps = []
    sim = _capped(w, {"name": "naive-cap"}, cap)
    sim.at(10, lambda s: snaps.append(s.state.snapshot()))
    assert _starts(sim.run()) == {1: 0.0, 2: 500.0}
    res = run_whatif(snaps[0], make_policy({"name": "naive-cap"}), checker=StrictChecker())
    assert dict(zip(res.job_id.tolist(), res.start_s.tolist())) == {1: 0.0, 2: 500.0}


def test_a_cap_change_dropped_by_a_later_cap_runs_no_pass():
    """The controller's set_cap replaces the schedule from now on: the change due at 500
    is gone, so nothing happens then (job 2 starts when job 1 ends, at 1000)."""
    w = workload_from_rows([(1, 0, 1000, 2), (2, 10, 100, 2)], machine_procs=4)
    cap = CapSchedule((-math.inf, 500.0), (1000.0, 2000.0))
    sim = _capped(w, {"name": "naive-cap"}, cap)
    sim.at(20, lambda s: s.set_cap(1000.0))
    assert _starts(sim.run()) == {1: 0.0, 2: 1000.0}
    assert 500.0 not in sim.samples.time_s  # no pass at the dropped change


def test_one_event_per_instant_not_per_job():
    """Jobs share SimPy events: the three jobs submitted at 0 arrive in one event, and
    the four that end at 10 (three started at 0, one at 5) complete in one event."""
    from olsctl.sim import ARRIVAL, COMPLETION

    w = workload_from_rows([(1, 0, 10, 1), (2, 0, 10, 1), (3, 0, 10, 1), (4, 5, 5, 1)],
                           machine_procs=4)
    sim = make_main(w)
    due: list[tuple[int, float]] = []
    schedule = sim.env.schedule

    def counted(event, priority=1, delay=0):
        due.append((priority, sim.env.now + delay))
        schedule(event, priority, delay)

    sim.env.schedule = counted
    records = sim.run()
    assert sorted(t for kind, t in due if kind == ARRIVAL) == [5.0]  # (0: the first)
    assert [t for kind, t in due if kind == COMPLETION] == [10.0]
    assert {r.job_id: r.end_s for r in records.jobs} == {1: 10.0, 2: 10.0, 3: 10.0, 4: 10.0}
    assert list(records.samples.time_s) == [0.0, 5.0, 10.0]
