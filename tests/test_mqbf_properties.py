"""Property tests for MQBF and the queue orderings on many random small workloads."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import make_main, run_main, run_whatif_all, starts_of, workload_from_rows
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
    bounds = sorted(draw(st.sets(st.integers(1, 450), min_size=k - 1, max_size=k - 1)))
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


@SETTINGS
@given(workloads(), mqbf_specs(), st.booleans())
def test_reservations_hold_in_every_pass(w, spec, borrow):
    spec["borrow"] = borrow
    policy = make_policy(spec)
    if policy.check_jobs(w.job_id, w.procs, w.estimate_s("exact"), w.machine_procs):
        return  # without borrowing some job could never run: refused at load
    rec = Recording(policy)
    starts = starts_of(make_main(w, "exact", policy=rec).run())
    assert len(starts) == len(w)


@SETTINGS
@given(workloads(), mqbf_specs())
def test_no_pivot_starts_later_than_its_reservation_without_borrowing(w, spec):
    # Each queue is then EASY on its own partition, and a pivot keeps its reservation.
    # With borrowing the rules do not promise this across passes: reservations are
    # rebuilt at every pass, and a queue taken earlier in Phase A may borrow what
    # another queue's pivot was promised at the previous pass (see the next test).
    spec.update(order="fcfs", borrow=False)
    policy = make_policy(spec)
    if policy.check_jobs(w.job_id, w.procs, w.estimate_s("exact"), w.machine_procs):
        return
    rec = Recording(policy)
    starts = starts_of(make_main(w, "exact", policy=rec).run())
    for job, reserved in rec.first.items():
        assert starts[job] <= reserved, (job, reserved, starts[job])


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
def busy_workloads(draw):
    # long queues: bursts of arrivals on a small machine, exact or inexact estimates
    machine = draw(st.integers(4, 24))
    n = draw(st.integers(10, 80))
    t, rows = 0, []
    for i in range(n):
        t += draw(st.sampled_from([0, 0, 0, 1, 2, 5, 20]))
        runtime = draw(st.integers(1, 300))
        req = draw(st.sampled_from([runtime, runtime, runtime * 3, 400]))
        rows.append((i + 1, t, runtime, draw(st.integers(1, machine)), req))
    return workload_from_rows(rows, machine)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(busy_workloads(), st.integers(1, 4), st.sampled_from(["exact", "user"]),
       st.booleans())
def test_arrivals_only_passes_reuse_the_last_profiles_without_changing_anything(
        w, k, estimates, borrow):
    import olsctl.policies.mqbf as mqbf

    spec = {"name": "mqbf", "queues": k, "boundaries_s": [20, 60, 150][:k - 1],
            "borrow": borrow}
    policy = make_policy(spec)
    if policy.check_jobs(w.job_id, w.procs, w.estimate_s(estimates), w.machine_procs):
        return
    fast = run_main(w, estimates, policy=policy)
    mqbf.ARRIVALS_SHORTCUT = False
    try:
        plain = run_main(w, estimates, policy=make_policy(spec))
    finally:
        mqbf.ARRIVALS_SHORTCUT = True
    assert fast == plain


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


@st.composite
def lockstep_workloads(draw):
    # few distinct runtimes and submit times on a grid: many jobs end together, at their
    # expected ends with exact estimates, while pivots wait behind them
    machine = draw(st.integers(4, 24))
    n = draw(st.integers(10, 80))
    t, rows = 0, []
    for i in range(n):
        t += draw(st.sampled_from([0, 0, 0, 10, 20, 50]))
        runtime = draw(st.sampled_from([10, 20, 30, 50, 100, 300]))
        req = draw(st.sampled_from([runtime, runtime, runtime * 2]))
        rows.append((i + 1, t, runtime, draw(st.integers(1, machine)), req))
    return workload_from_rows(rows, machine)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lockstep_workloads(), st.integers(1, 4), st.sampled_from(["exact", "user"]),
       st.booleans())
def test_passes_after_ends_at_the_expected_time_reuse_the_profiles_without_changing_anything(
        w, k, estimates, borrow):
    import olsctl.policies.mqbf as mqbf

    spec = {"name": "mqbf", "queues": k, "boundaries_s": [20, 60, 150][:k - 1],
            "borrow": borrow}
    policy = make_policy(spec)
    if policy.check_jobs(w.job_id, w.procs, w.estimate_s(estimates), w.machine_procs):
        return
    fast = run_main(w, estimates, policy=policy)
    mqbf.ARRIVALS_SHORTCUT = False
    try:
        plain = run_main(w, estimates, policy=make_policy(spec))
    finally:
        mqbf.ARRIVALS_SHORTCUT = True
    assert fast == plain


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
