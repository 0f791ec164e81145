"""Property tests of EASY backfilling on many random small workloads.

Invariants checked with hypothesis: every job starts once, never early, never beyond the
machine or the active processors; the main simulator and the what-if engine agree; the
blocked head starts exactly at the reservation it first got (exact estimates); a
what-if from a snapshot reproduces the main simulator run on the workload cut at the
snapshot time; changing the active processors never kills a job; and the main
simulator matches a plain re-implementation of the EASY rules (an oracle).
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import (
    easy_policy,
    make_main,
    make_workload,
    run_main,
    run_whatif_all,
    starts_of,
)
from olsctl.checker import StrictChecker
from olsctl.policies.easy.passes import easy_pass
from olsctl.whatif import run_whatif

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
ESTIMATES = st.sampled_from(["exact", "user"])


@st.composite
def workloads(draw, max_jobs: int = 40, max_procs: int = 16):
    """1..max_jobs jobs on 1..max_procs processors; many submit ties; ids shuffled so
    that ties are broken by job id, not by list position; requests below, above or
    missing."""
    machine = draw(st.integers(1, max_procs))
    n = draw(st.integers(1, max_jobs))
    gap = st.one_of(st.just(0), st.integers(0, 50))
    gaps = draw(st.lists(gap, min_size=n, max_size=n))
    first = draw(st.integers(0, 1000))
    submit = (first + np.cumsum([0] + gaps[1:])).tolist()
    runtime = draw(st.lists(st.integers(1, 100), min_size=n, max_size=n))
    procs = draw(st.lists(st.integers(1, machine), min_size=n, max_size=n))
    requested = draw(st.lists(st.one_of(st.just(-1), st.integers(1, 200)),
                              min_size=n, max_size=n))
    ids = draw(st.permutations(range(1, n + 1)))
    return make_workload(ids, submit, runtime, procs, requested, machine_procs=machine)


def _running_procs(records, t: float) -> int:
    """Processors held at instant t after its pass, from the job records alone."""
    return sum(r.procs for r in records.jobs if r.start_s <= t < r.end_s)


# (i) ------------------------------------------------------------------------------------------

@SETTINGS
@given(wl=workloads(), estimates=ESTIMATES)
def test_main_sim_invariants(wl, estimates):
    checker = StrictChecker()
    records = make_main(wl, estimates, checker=checker).run()
    n = len(wl)
    by_id = {r.job_id: r for r in records.jobs}
    # every job started exactly once, never before its submission, ran its full runtime
    assert len(records.jobs) == n and set(by_id) == set(wl.job_id.tolist())
    assert checker.starts_checked == n
    for j, sub, run, p in zip(wl.job_id.tolist(), wl.submit_s.tolist(),
                              wl.runtime_s.tolist(), wl.procs.tolist()):
        r = by_id[j]
        assert r.start_s >= sub and r.submit_s == sub and r.procs == p
        assert r.end_s == r.start_s + run and r.runtime_s == run
    # the machine is never over-full, reconstructed from the records at every start
    for r in records.jobs:
        assert _running_procs(records, r.start_s) <= wl.machine_procs
    # samples: one pass per instant, busy <= active, and they agree with the records
    s = records.samples
    assert all(a < b for a, b in zip(s.time_s, s.time_s[1:]))
    instants = set(wl.submit_s.tolist()) | {r.end_s for r in records.jobs}
    assert set(s.time_s) == instants
    for t, busy, active, qlen in zip(s.time_s, s.busy_procs, s.active_procs, s.queue_len):
        assert busy <= active == wl.machine_procs
        assert busy == _running_procs(records, t)
        assert qlen == sum(1 for r in records.jobs if r.submit_s <= t < r.start_s)


# (ii) -----------------------------------------------------------------------------------------

@SETTINGS
@given(wl=workloads(), estimates=ESTIMATES, data=st.data())
def test_main_and_whatif_agree(wl, estimates, data):
    active = data.draw(st.one_of(st.none(), st.integers(1, wl.machine_procs)), "active")
    main = run_main(wl, estimates, active_procs=active)
    whatif = run_whatif_all(wl, estimates, active_procs=active)
    # jobs wider than the active processors never start (NaN in the what-if)
    too_wide = {j for j, p in zip(wl.job_id.tolist(), wl.procs.tolist())
                if active is not None and p > active}
    assert {j for j, s in whatif.items() if math.isnan(s)} == too_wide
    assert set(main) == set(whatif) - too_wide
    assert main == {j: s for j, s in whatif.items() if j not in too_wide}


# (iii) ----------------------------------------------------------------------------------------

class RecordingEasy:
    """EASY/FCFS that remembers the first reservation each blocked head got."""

    name = "easy-recording"

    def __init__(self) -> None:
        self.first: dict[int, tuple[float, float]] = {}  # job id -> (time, shadow_s)

    def schedule(self, state) -> None:
        res = easy_pass(state, state.queue)
        if res is not None:
            self.first.setdefault(state.job_id[res.job], (state.now_s, res.shadow_s))

    def settings(self) -> dict:
        return {"name": "easy", "order": "fcfs"}


@SETTINGS
@given(wl=workloads(), engine=st.sampled_from(["main", "whatif"]))
def test_head_starts_at_its_first_reservation(wl, engine):
    # With exact estimates nothing ends earlier than expected, so the head cannot start
    # before its shadow time; EASY guarantees it does not start later either.
    policy = RecordingEasy()
    run = run_main if engine == "main" else run_whatif_all
    starts = run(wl, "exact", policy=policy)
    assert starts == run_main(wl, "exact")  # the wrapper is the same EASY
    for job, (when, shadow_s) in policy.first.items():
        assert when < shadow_s < math.inf
        assert starts[job] <= shadow_s, (job, when, shadow_s, starts[job])
        assert starts[job] == shadow_s, (job, when, shadow_s, starts[job])


# (iv) -----------------------------------------------------------------------------------------

@SETTINGS
@given(wl=workloads(), estimates=ESTIMATES, data=st.data())
def test_whatif_from_snapshot_reproduces_main(wl, estimates, data):
    submits = wl.submit_s.tolist()
    cut_s = data.draw(st.one_of(st.sampled_from(submits),
                                st.integers(int(submits[0]), int(submits[-1]) + 150)),
                      "cut_s")
    snaps = []
    sim = make_main(wl, estimates)
    sim.at(cut_s, lambda s: snaps.append(s.state.snapshot()))
    full = sim.run()
    (snap,) = snaps
    assert snap.now_s == cut_s

    # the snapshot holds what the full run says is in the system at cut_s before its pass
    nr = snap.n_running
    running = {r.job_id for r in full.jobs if r.start_s < cut_s < r.end_s}
    waiting = {r.job_id for r in full.jobs if r.submit_s <= cut_s <= r.start_s}
    assert set(snap.job_id[:nr].tolist()) == running
    assert set(snap.job_id[nr:].tolist()) == waiting
    full_start = starts_of(full)
    assert all(full_start[j] == s for j, s in zip(snap.job_id[:nr].tolist(),
                                                  snap.start_s[:nr].tolist()))

    res = run_whatif(snap, easy_policy(), checker=StrictChecker())
    assert res.unstarted == 0
    cut = run_main(wl.select(wl.submit_s <= cut_s), estimates)
    got = dict(zip(res.job_id[nr:].tolist(), res.start_s[nr:].tolist()))
    assert got == {j: cut[j] for j in waiting}


# (v) ------------------------------------------------------------------------------------------

@SETTINGS
@given(wl=workloads(), data=st.data())
def test_changing_active_procs_never_kills_and_holds_back_starts(wl, data):
    machine = wl.machine_procs
    last = int(wl.submit_s[-1]) + 200
    changes = data.draw(st.lists(st.tuples(st.integers(int(wl.submit_s[0]), last),
                                           st.integers(0, machine)), max_size=6), "changes")
    changes.sort(key=lambda c: c[0])  # at one instant the later change wins
    changes.append((last + 1, machine))  # let everything finish
    sim = make_main(wl)
    for t, n in changes:
        sim.at(t, lambda s, n=n: s.set_active_procs(n))
    records = sim.run()

    def active_at(t: float) -> int:
        value = machine
        for when, n in changes:
            if when <= t:
                value = n
        return value

    assert len(records.jobs) == len(wl)
    for r in records.jobs:
        assert r.end_s == r.start_s + r.runtime_s  # never killed
        # everything running just after the pass that started r fits the active count
        assert _running_procs(records, r.start_s) <= active_at(r.start_s)
    for t, active in zip(records.samples.time_s, records.samples.active_procs):
        assert active == active_at(t)


# (vi) -----------------------------------------------------------------------------------------

def reference_easy(wl, estimates: str, active: int) -> dict[int, float]:
    """EASY/FCFS written out plainly from the rules, as an oracle: at each instant all
    completions, then all arrivals, then one pass; jobs wider than ``active`` never start.
    Returns ``{job_id: start_s}`` of the jobs that started."""
    est = wl.estimate_s(estimates).tolist()
    jobs = sorted(zip(wl.submit_s.tolist(), wl.job_id.tolist(), wl.runtime_s.tolist(),
                      wl.procs.tolist(), est))
    pending = list(jobs)  # (submit, id, runtime, procs, estimate), in (submit, id) order
    queue: list[tuple] = []
    running: list[tuple] = []  # (actual end, expected end, procs)
    start: dict[int, float] = {}
    t = pending[0][0]
    while True:
        running = [r for r in running if r[0] > t]
        while pending and pending[0][0] == t:
            queue.append(pending.pop(0))
        free = active - sum(r[2] for r in running)

        def run(job):
            nonlocal free
            start[job[1]] = t
            running.append((t + job[2], t + job[4], job[3]))
            free -= job[3]
            queue.remove(job)

        while queue and queue[0][3] <= free:
            run(queue[0])
        if queue:
            head = queue[0]
            shadow_s, extra = math.inf, 0
            avail = free
            for end in sorted({r[1] for r in running}):
                avail += sum(r[2] for r in running if r[1] == end)
                if avail >= head[3]:
                    shadow_s, extra = end, avail - head[3]
                    break
            for job in list(queue[1:]):
                if job[3] > free:
                    continue
                if t + job[4] <= shadow_s:
                    run(job)
                elif job[3] <= extra:
                    run(job)
                    extra -= job[3]
        if not pending and (not queue or not running):
            return start
        t = min([r[0] for r in running] + [p[0] for p in pending[:1]])


@SETTINGS
@given(wl=workloads(), estimates=ESTIMATES, data=st.data())
def test_main_matches_reference_easy(wl, estimates, data):
    active = data.draw(st.one_of(st.none(), st.integers(1, wl.machine_procs)), "active")
    expected = reference_easy(wl, estimates, wl.machine_procs if active is None else active)
    assert run_main(wl, estimates, active_procs=active) == expected
