"""Property tests for MQBF and the queue orderings on many random small workloads."""

from __future__ import annotations

from bisect import bisect_right
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import make_main, run_main, run_whatif_all, starts_of, workload_from_rows
from property_tally import checked, run_counted
from olsctl.checker import StrictChecker
from olsctl.policies import make_policy
from olsctl.policies.order import ORDERS
from olsctl.whatif import run_whatif

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def workloads(draw, max_jobs=30):
    machine = draw(st.integers(2, 16))
    n = draw(st.integers(1, max_jobs))
    t, rows = 0, []
    for i in range(n):
        t += draw(st.sampled_from([0, 0, 1, 3, 10, 40]))
        runtime = draw(st.integers(1, 400))
        req = draw(st.sampled_from([-1, runtime, runtime * 2, max(1, runtime // 2), 500]))
        rows.append((i + 1, t, runtime, draw(st.integers(1, machine)), req))
    return workload_from_rows(rows, machine)


@st.composite
def mqbf_specs(draw):
    k = draw(st.integers(1, 4))
    bounds = sorted(draw(st.sets(st.integers(2, 450), min_size=k - 1, max_size=k - 1)))
    spec = {"name": "mqbf", "queues": k, "boundaries_s": bounds,
            "order": draw(st.sampled_from(sorted(ORDERS)))}
    if draw(st.booleans()):
        spec["shares"] = draw(st.lists(st.integers(1, 4), min_size=k, max_size=k))
    return spec


@SETTINGS
@given(workloads(), mqbf_specs(), st.sampled_from(["exact", "user"]))
def test_mqbf_checker_invariants_and_whatif_agree(w, spec, estimates):
    policy = make_policy(spec)
    main = run_main(w, estimates, policy=policy)  # strict checker throughout
    assert sorted(main) == sorted(w.job_id.tolist())
    for job, submit in zip(w.job_id.tolist(), w.submit_s.tolist()):
        assert main[job] >= submit
    assert run_whatif_all(w, estimates, policy=policy) == main


@SETTINGS
@given(workloads(), st.sampled_from(sorted(ORDERS)), st.sampled_from(["exact", "user"]))
def test_one_queue_mqbf_is_easy_for_every_order(w, order, estimates):
    easy = make_policy({"name": "easy", "order": order})
    k1 = make_policy({"name": "mqbf", "queues": 1, "boundaries_s": [], "order": order})
    assert run_main(w, estimates, policy=k1) == run_main(w, estimates, policy=easy)


class Recording:
    """Runs a policy's pass; keeps the first reservation each pivot got, and checks at
    the end of every pass that the reservations hold: in every partition, what running
    jobs hold plus what reservations need never exceeds what the partition owns."""

    name = "recording"

    def __init__(self, inner) -> None:
        self.inner = inner
        self.first: dict[int, float] = {}
        self.reservations_checked = 0

    def schedule(self, state) -> None:
        resources = self.inner.backfill(state)
        if resources is None:
            return
        reservations = resources.settle()
        for res in reservations:
            self.first.setdefault(state.job_id[res.job], res.shadow_s)
        owned = self.inner.owned(state.active_procs)
        for res in reservations:
            end = res.shadow_s + state.estimate_s[res.job]
            points = {res.shadow_s} | {e for e, _ in state.running if res.shadow_s < e < end}
            points |= {r.shadow_s for r in reservations if res.shadow_s < r.shadow_s < end}
            for t in points:
                used = [0] * len(owned)
                for e, j in state.running:
                    if e > t:
                        used = [u + a for u, a in zip(used, state.alloc[j])]
                for r in reservations:
                    if r.shadow_s <= t < r.shadow_s + state.estimate_s[r.job]:
                        used = [u + a for u, a in zip(used, r.procs)]
                assert all(u <= o for u, o in zip(used, owned)), (t, used, owned)
            self.reservations_checked += 1


@st.composite
def blocked_cases(draw, borrow: bool | None = None, order: str | None = None):
    """(workload, spec): random MQBF settings (``borrow`` and ``order`` unless given) and
    a workload under them, exact estimates, in which every job can run (without
    borrowing, each fits its own partition) and some queue must make a reservation:
    it opens at t=0 with jobs 1 and 2 in the same queue, job 1 as wide as all the
    processors that queue can use (its partition, or with borrowing the machine), so
    they cannot both start then. Random jobs follow."""
    spec = draw(mqbf_specs())
    if order is not None:
        spec["order"] = order
    spec["borrow"] = draw(st.booleans()) if borrow is None else borrow
    machine = draw(st.integers(2, 16))
    k, bounds = spec["queues"], spec["boundaries_s"]
    owned = make_policy(spec).owned(machine)
    # integer runtimes (= estimates) of each queue: [lo, hi]
    ranges = [(1 if q == 0 else bounds[q - 1], bounds[q] - 1 if q < k - 1 else 500)
              for q in range(k)]
    usable = [q for q in range(k) if spec["borrow"] or owned[q] > 0]

    def width(q: int):
        return machine if spec["borrow"] else owned[q]

    def job(q: int, procs: int, submit: int, i: int) -> tuple:
        runtime = draw(st.integers(*ranges[q]))
        return (i, submit, runtime, procs, runtime)

    q = draw(st.sampled_from(usable))
    rows = [job(q, width(q), 0, 1), job(q, draw(st.integers(1, width(q))), 0, 2)]
    t = 0
    for i in range(3, 3 + draw(st.integers(0, 28))):
        t += draw(st.sampled_from([0, 0, 1, 3, 10, 40]))
        q = draw(st.sampled_from(usable))
        rows.append(job(q, draw(st.integers(1, width(q))), t, i))
    return workload_from_rows(rows, machine), spec


@SETTINGS
@given(blocked_cases())
def _reservations_hold_in_every_pass(case):
    w, spec = case
    policy = make_policy(spec)
    assert policy.check_jobs(w.job_id, w.procs, w.estimate_s("exact"),
                             w.machine_procs) is None
    rec = Recording(policy)
    starts = starts_of(make_main(w, "exact", policy=rec).run())
    assert len(starts) == len(w)
    checked(rec.reservations_checked > 0)


def test_reservations_hold_in_every_pass():
    run_counted(_reservations_hold_in_every_pass)


@SETTINGS
@given(blocked_cases(borrow=False, order="fcfs"))
def _no_pivot_starts_later_than_its_reservation_without_borrowing(case):
    # Each queue is then EASY on its own partition, and a pivot keeps its reservation.
    # With borrowing the rules do not promise this across passes: reservations are
    # rebuilt at every pass, and a queue taken earlier in Phase A may borrow what
    # another queue's pivot was promised at the previous pass (see the next test).
    w, spec = case
    policy = make_policy(spec)
    assert policy.check_jobs(w.job_id, w.procs, w.estimate_s("exact"),
                             w.machine_procs) is None
    rec = Recording(policy)
    starts = starts_of(make_main(w, "exact", policy=rec).run())
    for job, reserved in rec.first.items():
        assert starts[job] <= reserved, (job, reserved, starts[job])
    checked(len(rec.first) > 0)


def test_no_pivot_starts_later_than_its_reservation_without_borrowing():
    run_counted(_no_pivot_starts_later_than_its_reservation_without_borrowing)


def test_with_borrowing_a_pivot_can_lose_its_previous_reservation():
    # 2 processors, 2 queues (boundary 2 s), partitions 1 / 1, all jobs at t=0.
    # t=0: job 1 (queue 0) starts in partition 0, job 2 borrows partition 1; job 3 is
    #      queue 0's pivot (reserved at 1), job 5 (queue 1, 2 s) queue 1's pivot, also
    #      reserved at 1 in its own partition.
    # t=1: queue 0 comes first (its head, job 3, has the smaller id): job 3 starts and
    #      job 4, next in queue 0, borrows partition 1 before queue 1 reserves again.
    #      Job 5 starts at 2, after the reservation it had.
    w = workload_from_rows([(1, 0, 1, 1), (2, 0, 1, 1), (3, 0, 1, 1), (4, 0, 1, 1),
                            (5, 0, 2, 1)], machine_procs=2)
    rec = Recording(make_policy({"name": "mqbf", "queues": 2, "boundaries_s": [2]}))
    starts = starts_of(make_main(w, "exact", policy=rec).run())
    assert starts == {1: 0, 2: 0, 3: 1, 4: 1, 5: 2}
    assert rec.first[5] == 1
    assert rec.reservations_checked >= 2


@SETTINGS
@given(workloads(), st.one_of(mqbf_specs(), st.sampled_from(
    [{"name": "easy", "order": o} for o in sorted(ORDERS)])),
    st.sampled_from(["exact", "user"]), st.data())
def test_whatif_fidelity_from_snapshots(w, spec, estimates, data):
    policy = make_policy(spec)
    cut = data.draw(st.sampled_from(sorted(set(w.submit_s.tolist()))))
    snaps = []
    sim = make_main(w, estimates, policy=policy)
    sim.at(cut, lambda s: snaps.append(s.state.snapshot()))
    sim.run()
    truncated = w.select(np.flatnonzero(w.submit_s <= cut))
    truth = run_main(truncated, estimates, policy=policy)
    res = run_whatif(snaps[0], policy, checker=StrictChecker())
    assert res.unstarted == 0
    for job, start in zip(res.job_id.tolist(), res.start_s.tolist()):
        assert start == truth[job]


@st.composite
def shortcut_cases(draw, runtimes, gaps, estimate_factors):
    """(workload, spec, estimates) for the shortcut checks below: MQBF over 1-4 queues
    split at 20, 60 and 150 s, with or without borrowing, exact or user estimates
    (``estimate_factors`` x runtime, or 400 s when 0), every job able to run (without
    borrowing, each fits its own partition in both estimate modes).

    It opens so that both shortcuts must be taken with a job left waiting from an
    earlier pass: at t=0 job 1 (2 s, its estimate exact in both modes) and job 2, both
    in the first queue, job 1 leaving processors idle but too few for job 2 (with
    borrowing or one queue: machine - 1 and the machine; else job 1 fills its partition,
    which job 2 needs); the other jobs arrive from t=1 on, those at t=1 at least 2 s
    long. So at t=1 jobs only arrive (the arrivals-only pass) and at t=2 only job 1
    ends, at its expected end (the pass after ends at the expected time), job 2 waiting
    at both.
    """
    machine = draw(st.integers(4, 24))
    k = draw(st.integers(1, 4))
    bounds = [20, 60, 150][:k - 1]
    spec = {"name": "mqbf", "queues": k, "boundaries_s": bounds, "borrow": draw(st.booleans())}
    owned = make_policy(spec).owned(machine)
    if spec["borrow"] or k == 1:
        first, second = machine - 1, machine
    else:
        first, second = owned[0], draw(st.integers(1, owned[0]))
    runtime = draw(st.integers(2, 19))
    rows = [(1, 0, 2, first, 2), (2, 0, runtime, second, runtime)]
    t = 1
    for i in range(3, 3 + draw(st.integers(8, 78))):
        runtime = max(draw(runtimes), 2 if t == 1 else 1)
        factor = draw(st.sampled_from(estimate_factors))
        req = runtime * factor if factor else 400
        if spec["borrow"]:
            widest = machine
        else:  # its queue under exact estimates and under user ones
            widest = min(owned[bisect_right(bounds, runtime)],
                         owned[bisect_right(bounds, max(req, runtime))])
        rows.append((i, t, runtime, draw(st.integers(1, widest)), req))
        t += draw(gaps)
    return workload_from_rows(rows, machine), spec, draw(st.sampled_from(["exact", "user"]))


@contextmanager
def _taken_with_a_job_waiting(method: str):
    """While in the block, record for each call of MultiQueueBackfill's ``method`` (a
    pass that reuses the last pass's profiles) whether a job that arrived before that
    instant was waiting (then the reused reservations mattered)."""
    import olsctl.policies.mqbf as mqbf

    calls: list[bool] = []
    original = getattr(mqbf.MultiQueueBackfill, method)

    def spy(self, state, *args):
        calls.append(any(state.submit_s[j] < state.now_s for j in state.queue))
        return original(self, state, *args)

    setattr(mqbf.MultiQueueBackfill, method, spy)
    try:
        yield calls
    finally:
        setattr(mqbf.MultiQueueBackfill, method, original)


def _same_with_and_without_the_shortcut(case, method: str) -> None:
    """The run under the case's MQBF is the same without the profile-reusing passes;
    counts the example as checking something when ``method`` ran with a job waiting."""
    import olsctl.policies.mqbf as mqbf

    w, spec, estimates = case
    policy = make_policy(spec)
    assert policy.check_jobs(w.job_id, w.procs, w.estimate_s(estimates),
                             w.machine_procs) is None
    with _taken_with_a_job_waiting(method) as calls:
        fast = run_main(w, estimates, policy=policy)
    mqbf.ARRIVALS_SHORTCUT = False
    try:
        plain = run_main(w, estimates, policy=make_policy(spec))
    finally:
        mqbf.ARRIVALS_SHORTCUT = True
    assert fast == plain
    checked(any(calls))


#: long queues: bursts of arrivals on a small machine, exact or inexact estimates
BUSY = dict(runtimes=st.integers(1, 300), gaps=st.sampled_from([0, 0, 0, 1, 2, 5, 20]),
            estimate_factors=[1, 1, 3, 0])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shortcut_cases(**BUSY))
def _arrivals_only_passes_reuse_the_last_profiles_without_changing_anything(case):
    _same_with_and_without_the_shortcut(case, "_arrivals_pass")


def test_arrivals_only_passes_reuse_the_last_profiles_without_changing_anything():
    run_counted(_arrivals_only_passes_reuse_the_last_profiles_without_changing_anything)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_arrivals_shortcut_changes_nothing_on_a_long_loaded_workload(seed):
    # 3000 jobs on 64 processors at about 95% offered load, wide and narrow jobs of all
    # lengths: long queues in every MQBF queue, heads starting and pivots changing often
    import olsctl.policies.mqbf as mqbf

    rng = np.random.default_rng(seed)
    n, machine = 3000, 64
    procs = np.minimum(machine, rng.choice([1, 2, 4, 8, 16, 32, 48, 64], n,
                                           p=[.3, .15, .15, .12, .1, .08, .05, .05]))
    runtime = np.ceil(rng.lognormal(6.0, 2.0, n)).clip(1, 200_000)
    load = float((procs * runtime).sum()) / machine / 0.95
    submit = np.sort(rng.uniform(0, load, n)).round()
    rows = [(i + 1, submit[i], runtime[i], procs[i],
             runtime[i] * rng.choice([1, 1, 2, 5])) for i in range(n)]
    w = workload_from_rows(rows, machine)
    spec = {"name": "mqbf", "queues": 4}
    for estimates in ("exact", "user"):
        fast = run_main(w, estimates, policy=make_policy(spec))
        mqbf.ARRIVALS_SHORTCUT = False
        try:
            plain = run_main(w, estimates, policy=make_policy(spec))
        finally:
            mqbf.ARRIVALS_SHORTCUT = True
        assert fast == plain


def test_arrivals_shortcut_is_not_taken_after_a_partition_is_left_over_its_share():
    """12 processors, 2 queues split at 203 s, exact estimates. Job 1 (7 procs, 400 s)
    starts at 60 borrowing 1 processor of partition 2; at 115 the machine shrinks to 10
    (partitions of 5 and 5: partition 1 holds 6, 3 processors idle). Job 2 (9 procs,
    queue 2) is reserved at 460, when job 1 ends. Job 4 (4 procs, 200 s, queue 1) finds
    partition 2's 4 free over [140, 340) but only 3 idle: it is reserved at once and
    cannot start. Job 6 (2 procs, 10 s, queue 1) then finds partition 2's processors
    reserved and waits.

    Job 11 arrives at 435. A pass then makes job 4's reservation again, from 435: it would
    overlap job 2's, so it moves to 860 (job 2's end), and job 6 starts at once. A pass
    reusing the last profiles (the arrivals-only shortcut) would keep job 4's [140, 340)
    and start job 6 only at 860; the what-if of a snapshot at 435, as a fresh pass,
    starts it at 435."""
    import olsctl.policies.mqbf as mqbf

    w = workload_from_rows([(1, 60, 400, 7), (2, 80, 400, 9), (4, 140, 200, 4),
                            (6, 145, 10, 2), (11, 435, 20, 4)], 12)
    spec = {"name": "mqbf", "queues": 2, "boundaries_s": [203]}
    want = {1: 60.0, 2: 460.0, 4: 860.0, 6: 435.0, 11: 860.0}
    for shortcut in (True, False):
        mqbf.ARRIVALS_SHORTCUT = shortcut
        try:
            sim = make_main(w, "exact", policy=make_policy(spec))
            sim.at(115.0, lambda s: s.set_active_procs(10))
            snaps: list = []
            sim.at(435.0, lambda s: snaps.append(s.state.snapshot()))
            assert starts_of(sim.run()) == want
        finally:
            mqbf.ARRIVALS_SHORTCUT = True
        got = run_whatif(snaps[0], make_policy(spec))
        assert dict(zip(got.job_id.tolist(), got.start_s.tolist())) == want


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow],
          derandomize=True)
@given(shortcut_cases(**BUSY), st.data())
def _arrivals_shortcut_changes_nothing_when_the_machine_shrinks_and_grows(case, data):
    import olsctl.policies.mqbf as mqbf

    w, spec, estimates = case
    machine = w.machine_procs
    last = float(w.submit_s.max())
    # (from t=3 on: the cases' opening takes the shortcut at t=1 with a job waiting)
    changes = sorted((data.draw(st.integers(3, int(last) + 5)),
                      data.draw(st.integers(max(1, machine // 3), machine)))
                     for _ in range(data.draw(st.integers(1, 4))))
    changes.append((int(last) + 400, machine))  # every job can run in the end (a job
    # wider than its shrunk partition, without borrowing, waits for it)

    def run(shortcut: bool) -> dict:
        mqbf.ARRIVALS_SHORTCUT = shortcut
        try:
            sim = make_main(w, estimates, policy=make_policy(spec))
            for t, n in changes:
                sim.at(float(t), lambda s, n=n: s.set_active_procs(n))
            return starts_of(sim.run())
        finally:
            mqbf.ARRIVALS_SHORTCUT = True

    with _taken_with_a_job_waiting("_arrivals_pass") as calls:
        fast = run(True)
    assert fast == run(False)
    assert len(fast) == len(w.job_id)
    checked(any(calls))


def test_arrivals_shortcut_changes_nothing_when_the_machine_shrinks_and_grows():
    run_counted(_arrivals_shortcut_changes_nothing_when_the_machine_shrinks_and_grows)


#: few distinct runtimes and submit times on a grid: many jobs end together, at their
#: expected ends with exact estimates, while pivots wait behind them
LOCKSTEP = dict(runtimes=st.sampled_from([10, 20, 30, 50, 100, 300]),
                gaps=st.sampled_from([0, 0, 0, 10, 20, 50]), estimate_factors=[1, 1, 2])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shortcut_cases(**LOCKSTEP))
def _passes_after_ends_at_the_expected_time_reuse_the_profiles_without_changing_anything(
        case):
    _same_with_and_without_the_shortcut(case, "_ends_pass")


def test_passes_after_ends_at_the_expected_time_reuse_the_profiles_without_changing_anything():
    run_counted(
        _passes_after_ends_at_the_expected_time_reuse_the_profiles_without_changing_anything)


def test_passes_after_ends_at_the_expected_time_do_reuse_the_profiles(monkeypatch):
    # the shortcut is taken (else the property test above would check nothing)
    import olsctl.policies.mqbf as mqbf

    taken = []
    original = mqbf.MultiQueueBackfill._ends_pass

    def spy(self, *args):
        taken.append(1)
        return original(self, *args)

    monkeypatch.setattr(mqbf.MultiQueueBackfill, "_ends_pass", spy)
    # 8 processors, 4 queues of 2: two long wide jobs hold the machine, the narrow short
    # ones end at their expected ends while the wide pivots wait
    rows = [(1, 0, 1000, 4), (2, 0, 1000, 4), (3, 1, 50, 6), (4, 1, 5000, 6),
            (5, 2, 10, 1), (6, 3, 10, 1), (7, 50, 20, 2)]
    w = workload_from_rows(rows, 8)
    policy = make_policy({"name": "mqbf", "queues": 4})
    fast = run_main(w, "exact", policy=policy)
    assert taken
    monkeypatch.setattr(mqbf, "ARRIVALS_SHORTCUT", False)
    assert run_main(w, "exact", policy=make_policy({"name": "mqbf", "queues": 4})) == fast
