"""MQBF's pivots and the run's record of those that started late (docs/mqbf.md, Pivots
and borrowing; docs/policies.md, MQBF in more detail).

A pivot is a queue's first job that cannot start; it gets a reservation, rebuilt at
every pass. Without borrowing, under FCFS and with the active processors left alone, each
queue is EASY on its own partition, and no pivot starts later than a reservation it
held, with exact or user estimates (jobs end by their expected end, so a pivot's
reservation only moves earlier). With borrowing a pivot can start later than a
reservation it held (so can one displaced by another queue order, or one whose partition
shrank with the machine); the run counts those pivots (``late_pivots``) and the worst
delay (``max_pivot_delay_s``) in ``summary.json``.

The record is checked against an oracle that computes every pivot's reservation at every
pass with the independent Python pass of ``mqbf_oracle`` (whose decisions must be the
compiled pass's) and compares the earliest with the start.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from conftest import make_main, starts_of, trace_path, workload_from_rows
from mqbf_oracle import oracle_pass
from olsctl.cli import main
from olsctl.metrics import summarize
from olsctl.policies import make_policy
from olsctl.policies.mqbf import PIVOTS_KEY
from olsctl.policies.core.order import ORDERS
from olsctl.workload import Workload, load_workload


class Oracle:
    """Runs the oracle's MQBF pass (:func:`mqbf_oracle.oracle_pass`), then computes every
    reservation of it (pending ones too) and keeps each job's earliest; :meth:`report`
    weighs the starts against them."""

    name = "oracle"

    def __init__(self, inner) -> None:
        self.inner = inner
        self.earliest: dict[int, float] = {}

    def schedule(self, state) -> None:
        resources = oracle_pass(self.inner, state)
        if resources is None:
            return
        for res in resources.settle():
            job = state.job_id[res.job]
            if res.shadow_s < self.earliest.get(job, math.inf):
                self.earliest[job] = res.shadow_s

    def report(self, starts: dict[int, float]) -> dict:
        """The record's figures, from the start times: pivots that started, those that
        started later than their earliest reservation, the worst delay (s)."""
        started = [(starts[j], s) for j, s in self.earliest.items() if j in starts]
        delays = [start - held for start, held in started if start > held]
        return {"pivots": len(started), "late_pivots": len(delays),
                "max_pivot_delay_s": max(delays, default=0.0)}


def run_recorded(w: Workload, estimates: str, spec: dict, at=()) -> tuple[dict, dict, object]:
    """A strict main-simulator run with the record on (``prepare``, as ``olsctl run``
    does); ``at``: (time, active processors) changes. Returns (starts, the policy's run
    report, the record)."""
    policy = make_policy(spec)
    sim = make_main(w, estimates, policy=policy)
    assert policy.prepare(sim.state, w) is None
    for t, n in at:
        sim.at(t, lambda s, n=n: s.set_active_procs(n))
    records = sim.run()
    return starts_of(records), policy.run_report(sim.state, records), sim.state.cache[PIVOTS_KEY]


def run_oracle(w: Workload, estimates: str, spec: dict, at=()) -> tuple[dict, dict]:
    oracle = Oracle(make_policy(spec))
    sim = make_main(w, estimates, policy=oracle)
    for t, n in at:
        sim.at(t, lambda s, n=n: s.set_active_procs(n))
    starts = starts_of(sim.run())
    return starts, oracle.report(starts)


# ------------------------------------------------------------- seeded random workloads

#: queue settings of the random examples: (queues, boundaries_s, shares)
QUEUES = [(1, [], None), (2, [50], None), (3, [20, 120], None), (4, [10, 40, 200], None),
          (3, [30, 90], [1, 2, 3]), (4, [15, 60, 240], [3, 1, 1, 2])]
SEEDS = range(25)


def random_case(seed: int, queues: int, bounds: list, shares, borrow: bool,
                estimates: str, order: str = "fcfs") -> tuple[Workload, dict]:
    """A bursty workload on 4-16 processors and the MQBF spec: each job is drawn for a
    queue (with an estimate in its range; the runtime is the estimate, or with user
    estimates a fraction of it down to a tenth) and, without borrowing, is at most as
    wide as that queue's partition; wide jobs are common, so queues block."""
    rng = np.random.default_rng(seed)
    spec = {"name": "mqbf", "queues": queues, "boundaries_s": bounds, "order": order,
            "borrow": borrow}
    if shares is not None:
        spec["shares"] = shares
    machine = int(rng.integers(4, 17))
    owned = make_policy(spec).owned(machine)
    usable = [q for q in range(queues) if borrow or owned[q] > 0]
    edges = [1, *bounds, 400]
    rows, t = [], 0
    for i in range(1, int(rng.integers(15, 41)) + 1):
        t += int(rng.choice([0, 0, 0, 1, 5, 20]))
        q = int(rng.choice(usable))
        estimate = int(rng.integers(edges[q], edges[q + 1]))
        widest = machine if borrow else owned[q]
        procs = widest if rng.random() < 0.3 else int(rng.integers(1, widest + 1))
        if estimates == "exact":
            rows.append((i, t, estimate, procs, -1))
        else:
            runtime = max(1, round(estimate * float(rng.choice([1, 1, 0.9, 0.5, 0.1]))))
            rows.append((i, t, runtime, procs, estimate))
    w = workload_from_rows(rows, machine)
    assert make_policy(spec).check_jobs(w.job_id, w.procs, w.estimate_s(estimates),
                                        machine) is None
    return w, spec


@pytest.mark.parametrize("estimates", ["exact", "user"])
@pytest.mark.parametrize("queues,bounds,shares", QUEUES)
def test_without_borrowing_no_pivot_starts_later_than_a_reservation_it_held(
        queues, bounds, shares, estimates):
    with_pivots = 0
    for seed in SEEDS:
        w, spec = random_case(seed, queues, bounds, shares, False, estimates)
        starts, report, _ = run_recorded(w, estimates, spec)
        assert len(starts) == len(w)
        assert report["late_pivots"] == 0, (seed, report)
        assert report["max_pivot_delay_s"] == 0.0
        # the oracle (every reservation of every pass) agrees, and so does the count
        ostarts, oracle = run_oracle(w, estimates, spec)
        assert ostarts == starts
        assert oracle == report, seed
        with_pivots += report["pivots"] > 0
    # each example must have had pivots for the property to say anything
    assert with_pivots >= 0.9 * len(SEEDS), f"only {with_pivots} examples had pivots"


@pytest.mark.parametrize("order", sorted(ORDERS))
@pytest.mark.parametrize("estimates", ["exact", "user"])
def test_the_record_agrees_with_the_oracle_and_changes_no_decision(order, estimates):
    # with and without borrowing, every order, some runs shrinking and growing the
    # machine: the record's figures are the oracle's, and a run with the record makes
    # the same decisions as one without
    totals = {"pivots": 0, "late_pivots": 0}
    for seed in SEEDS:
        queues, bounds, shares = QUEUES[seed % len(QUEUES)]
        borrow = seed % 3 != 0
        w, spec = random_case(seed, queues, bounds, shares, borrow, estimates, order)
        at = ()
        if borrow and seed % 2:
            t0, m = float(w.submit_s[0]), w.machine_procs
            at = ((t0 + 3, max(1, m // 2)), (t0 + 40, m))
        starts, report, record = run_recorded(w, estimates, spec, at)
        ostarts, oracle = run_oracle(w, estimates, spec, at)
        plain = make_main(w, estimates, policy=make_policy(spec))  # no record
        for t, n in at:
            plain.at(t, lambda s, n=n: s.set_active_procs(n))
        assert starts == ostarts == starts_of(plain.run()), seed
        assert report == oracle, seed
        assert not record.reserved_s, "a started pivot left in the record"
        for key in totals:
            totals[key] += report[key]
    assert totals["pivots"] > 0 and totals["late_pivots"] > 0, totals


# --------------------------------------------------------------- a hand-worked trace

#: 2 processors, 2 queues split at 100 s, partitions 1 / 1, exact estimates, all at t=0:
#: (job, submit, runtime, procs)
TRACE = [(1, 0, 40, 1), (2, 0, 40, 1), (3, 0, 60, 1), (4, 0, 70, 1), (5, 0, 300, 1)]
MQBF2 = {"name": "mqbf", "queues": 2, "boundaries_s": [100]}


def test_borrowing_delays_a_pivot_past_its_reservation():
    # t=0: queue 0 (head job 1) comes first: job 1 starts on partition 0, job 2 borrows
    #      partition 1 until 40; job 3 is queue 0's pivot, reserved at 40 on partition
    #      0. Queue 1's head, job 5, is its pivot, reserved at 40 on its own partition
    #      1 (partition 0 is promised to job 3 over [40, 100)). Job 4 finds no room.
    # t=40: jobs 1 and 2 end. Queue 0 still comes first: job 3 starts on partition 0,
    #      and job 4, next in queue 0, borrows partition 1 until 110 before queue 1
    #      reserves again. Job 5's reservation is now at 100, borrowing partition 0
    #      when job 3 ends (its own partition is free only at 110).
    # t=100: job 5 starts: 60 s later than its reservation at 40. Job 3 started on time.
    w = workload_from_rows(TRACE, machine_procs=2)
    starts, report, _ = run_recorded(w, "exact", MQBF2)
    assert starts == {1: 0, 2: 0, 3: 40, 4: 40, 5: 100}
    assert report == {"pivots": 2, "late_pivots": 1, "max_pivot_delay_s": 60.0}


def test_the_same_trace_without_borrowing_has_no_late_pivot():
    # t=0: job 1 starts on partition 0, job 5 on partition 1; job 2 (no borrowing) is
    #      queue 0's pivot at 40. Then each queue-0 job is the pivot in turn and starts
    #      at its reservation: job 2 at 40, job 3 at 80, job 4 at 140.
    w = workload_from_rows(TRACE, machine_procs=2)
    starts, report, _ = run_recorded(w, "exact", {**MQBF2, "borrow": False})
    assert starts == {1: 0, 2: 40, 3: 80, 4: 140, 5: 0}
    assert report == {"pivots": 3, "late_pivots": 0, "max_pivot_delay_s": 0.0}


def test_without_borrowing_another_order_can_displace_a_pivot():
    # 4 processors, 2 queues split at 1000 s, partitions 2 / 2, no borrowing; every job
    # is in queue 0 (partition 1 stays idle). The guarantee is FCFS's: under SJF a
    # shorter job that arrives takes the pivot's place, as under EASY with that order.
    # t=0: job 1 fills partition 0 until 100. t=1: job 2 is the pivot, reserved at 100.
    # t=10: job 3 (20 s) comes first under SJF: it is the pivot now, reserved at 100.
    # t=100: job 3 starts; job 2 is the pivot again, reserved at 120, and starts then:
    #        20 s later than the reservation it held. Under FCFS job 2 keeps its place.
    w = workload_from_rows([(1, 0, 100, 2), (2, 1, 50, 2), (3, 10, 20, 2)], machine_procs=4)
    spec = {"name": "mqbf", "queues": 2, "boundaries_s": [1000], "borrow": False}
    starts, report, _ = run_recorded(w, "exact", {**spec, "order": "sjf"})
    assert starts == {1: 0, 2: 120, 3: 100}
    assert report == {"pivots": 2, "late_pivots": 1, "max_pivot_delay_s": 20.0}
    starts, report, _ = run_recorded(w, "exact", {**spec, "order": "fcfs"})
    assert starts == {1: 0, 2: 100, 3: 150}
    assert report == {"pivots": 2, "late_pivots": 0, "max_pivot_delay_s": 0.0}


def test_without_borrowing_lowering_the_active_processors_can_delay_a_pivot():
    # 8 processors, 2 queues split at 1000 s, no borrowing: partitions 4 / 4, every job
    # in queue 0. t=0: job 1 (3 processors) starts; job 2 (3) is the pivot, reserved at
    # 100 with 3 of partition 0; job 3 (1 processor, 200 s) starts on the one left over.
    # With the machine as it is, job 2 starts at 100. Lowered to 6 active processors at
    # t=5, partition 0 owns 3: when job 1 ends, job 3 still holds one of them, so job 2
    # waits for job 3's end at 200, 100 s after the reservation it held.
    w = workload_from_rows([(1, 0, 100, 3), (2, 0, 50, 3), (3, 0, 200, 1)], machine_procs=8)
    spec = {"name": "mqbf", "queues": 2, "boundaries_s": [1000], "borrow": False}
    starts, report, _ = run_recorded(w, "exact", spec)
    assert starts == {1: 0, 2: 100, 3: 0}
    assert report == {"pivots": 1, "late_pivots": 0, "max_pivot_delay_s": 0.0}
    starts, report, _ = run_recorded(w, "exact", spec, at=((5, 6),))
    assert starts == {1: 0, 2: 200, 3: 0}
    assert report == {"pivots": 1, "late_pivots": 1, "max_pivot_delay_s": 100.0}


# ------------------------------------------------------------------------- the CLI


def test_the_figures_are_in_summary_json(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    lines = ["; MaxProcs: 2"] + [f"{j} {s} -1 {r} {p} -1 -1 {p} -1 -1 1 1 1 -1 -1 -1 -1 -1"
                                 for j, s, r, p in TRACE]
    (tmp_path / "t.swf").write_text("\n".join(lines) + "\n")
    assert main(["run", "--trace", "t.swf", "--policy", "mqbf", "--set", "policy.queues=2",
                 "--set", "policy.boundaries_s=[100]", "--strict", "--out", "out",
                 "--quiet"]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["strict_checks"] == 5
    # olsctl.runner files a policy's run report under its report_key
    assert summary["pivots"] == {"pivots": 2, "late_pivots": 1, "max_pivot_delay_s": 60.0}


def test_kth_reference_figure_stays_with_the_record_on():
    # KTH-SP2, exact estimates, MQBF's defaults (4 queues, borrowing): the record
    # changes no decision and pins the figures (every pass a full pass; no reservation
    # is made at an instant where no waiting job is narrow enough for the idle
    # processors); test_kth_record_agrees_with_the_oracle holds them to the oracle
    w = load_workload(trace_path("KTH-SP2-1996-2.1-cln.swf.gz"))
    policy = make_policy({"name": "mqbf"})
    sim = make_main(w, "exact", policy=policy)
    policy.prepare(sim.state, w)
    records = sim.run()
    assert round(summarize(records)["mean_bsld"], 4) == 58.5090
    report = policy.run_report(sim.state, records)
    assert report == {"pivots": 5372, "late_pivots": 1153, "max_pivot_delay_s": 179842.0}


@pytest.mark.slow
def test_kth_record_agrees_with_the_oracle():
    # the oracle's Python pass over the whole of KTH-SP2 (about two minutes) starts
    # every job when the compiled pass does, and its reservations give the same figures
    w = load_workload(trace_path("KTH-SP2-1996-2.1-cln.swf.gz"))
    starts, report, _ = run_recorded(w, "exact", {"name": "mqbf"})
    ostarts, oracle = run_oracle(w, "exact", {"name": "mqbf"})
    assert ostarts == starts
    assert report == oracle
