"""The compiled MQBF what-if (policies/mqbf/, run by policies/mqbf/template.py): its
pieces against the policy's own, hand-worked tiny cases, and the start times of the what-if
run by the Python what-if engine (:func:`olsctl.whatif.steps` over a live state, whose
passes call the same compiled pass), exactly, on random snapshots and on snapshots of real
logs: the compiled loop's events, wakes and SLA bound against the engine's. The pass itself
is held to an independent Python oracle in test_mqbf_properties.py and test_mqbf_pivots.py.

Every pass is a full pass (profiles built from the running jobs, each pivot's reservation
made with it). Run with the JIT on and with ``NUMBA_DISABLE_JIT=1``.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO_ROOT, same_trials, trace_path, workload_from_rows
from property_tally import checked, run_counted
from olsctl.controller.trials import Candidate, apply_candidate, setting_of
from olsctl.policies.mqbf.template import MqbfRun, MqbfTemplate, mqbf_whatif
from olsctl.policies import make_policy
from mqbf_oracle import largest_remainder
from olsctl.policies.core.jit import compiled, plain
from olsctl.sim import MainSimulator
from olsctl.state import SimState, Snapshot
from olsctl.whatif import run_whatif, steps
from olsctl.workload import load_workload

INF = math.inf


def _kernels():
    """The plain kernels and their compiled copies (the same ones when the JIT is off)."""
    return [plain(), compiled()]


# -- the pieces ----------------------------------------------------------------------------


def test_partition_counts_are_the_largest_remainder_split():
    rng = np.random.default_rng(3)
    for k in _kernels():
        for _ in range(300):
            parts = int(rng.integers(1, 7))
            shares = [[0, 1, 2, 3, 0.5, 1.25, 0.333, 7][int(rng.integers(8))]
                      for _ in range(parts)]
            if not any(shares):
                shares[0] = 1
            policy = make_policy({"name": "mqbf", "queues": parts, "shares": shares})
            weights = policy.weights
            fractions = tuple(Fraction(str(s)) for s in shares)
            for total in [0, 1, 2, 3, 7, int(rng.integers(1, 500))]:
                owned = np.empty(parts, dtype=np.int64)
                k.partition_counts(weights, total, owned)
                assert tuple(owned.tolist()) == largest_remainder(fractions, total) \
                    == policy.owned(total), (shares, total)


def test_queue_indices_are_the_policy_queues():
    policy = make_policy({"name": "mqbf", "queues": 4, "boundaries_s": [100, 1000, 10000]})
    est = np.array([1.0, 99.0, 99.9999, 100.0, 100.5, 999.0, 1000.0, 9999.0, 10000.0, 1e9])
    for k in _kernels():
        got = np.empty(est.size, dtype=np.int64)
        k.queue_indices(np.asarray(policy.boundaries_s), est, got)
        assert got.tolist() == [policy.queue_index(e) for e in est] \
            == [0, 0, 0, 1, 1, 1, 2, 2, 3, 3]


# -- hand-worked cases -----------------------------------------------------------------------


def _snapshot(now: float, active: int, total: int, running: list, waiting: list) -> Snapshot:
    """Running rows (id, submit, procs, estimate = runtime, start, processors per
    partition), then waiting rows (id, submit, procs, estimate = runtime), in order."""
    rows = running + waiting
    return Snapshot(
        now, total, active, len(running),
        np.array([r[0] for r in rows], dtype=np.int64),
        np.array([float(r[1]) for r in rows]), np.array([r[2] for r in rows], dtype=np.int64),
        np.array([float(r[3]) for r in rows]), np.array([float(r[3]) for r in rows]),
        np.array([float(r[4]) for r in running] + [np.nan] * len(waiting)),
        running_alloc=tuple(tuple(r[5]) for r in running))


def _python_starts(snap: Snapshot, policy, active: int) -> dict[int, float]:
    st = SimState.from_snapshot(snap)
    st.active_procs = active
    next(steps(st, policy, watch_snapshot=True), None)
    return dict(zip(snap.job_id[snap.n_running:].tolist(), st.start_s[snap.n_running:]))


def _kernel_starts(snap: Snapshot, policy, active: int) -> dict[int, float]:
    got = mqbf_whatif(snap, policy, active)
    return dict(zip(snap.job_id[snap.n_running:].tolist(),
                    got.start_s[snap.n_running:].tolist()))


ENGINES = {"kernel": _kernel_starts, "python": _python_starts}


def _two_queues(borrow: bool):
    """Queue 1: estimates under 100 s, partition 1; queue 2: the rest, partition 2."""
    return make_policy({"name": "mqbf", "queues": 2, "boundaries_s": [100], "borrow": borrow})


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_pivot_that_must_borrow(engine):
    """8 processors, partitions of 4 and 4. Job 9 runs on partition 2 (4 procs) until 200.
    Waiting: 1 (queue 1, 6 procs, 50 s), 2 (queue 2, 2 procs, 300 s), 3 (queue 2, 4
    procs, 150 s), 4 (queue 1, 1 proc, 10 s); exact estimates.

    t=0: the queues by their heads: queue 1 (job 1), then queue 2 (job 2). Job 1 needs
    6: partition 1 has 4, partition 2 none: blocked; its own partition never has 6, so it
    borrows: at 200, 4 own + 2 of partition 2 over [200, 250). Job 2: partition 2 has 0
    until 200; partition 1 is taken on [200, 250): blocked; reserved at 200 on its own
    partition (2 left there until 250, then 4). Phase B: job 3 (4 procs until 150) finds
    nothing in partition 2 but all 4 of partition 1 until 150, before job 1 needs them:
    it starts, borrowing 4. Job 4: no processor left.
    t=150: job 3 ends. Jobs 1 and 2 are blocked as before; job 4 (1 proc, until 160)
    fits partition 1 before 200: it starts.
    t=200: job 9 ends: job 1 starts (4 + 2 borrowed), job 2 on the 2 left."""
    snap = _snapshot(0.0, 8, 8, [(9, 0, 4, 200, 0.0, (0, 4))],
                     [(1, 0, 6, 50), (2, 0, 2, 300), (3, 0, 4, 150), (4, 0, 1, 10)])
    assert ENGINES[engine](snap, _two_queues(True), 8) == {1: 200.0, 2: 200.0, 3: 0.0,
                                                           4: 150.0}


@pytest.mark.parametrize("kernels", ["plain", "compiled"])
def test_a_pass_reports_each_queues_pivot(kernels):
    """:func:`test_a_pivot_that_must_borrow`'s pass at t=0, run alone: job 3 (index 3)
    starts; queue 1's pivot is job 1 (index 1), queue 2's job 2 (index 2), both reserved
    at 200. With only job 4 waiting, it starts and no queue has a pivot (-1, NaN)."""
    k = dict(zip(["plain", "compiled"], _kernels()))[kernels]
    policy = _two_queues(True)
    for waiting, starts, pivots, reserved in [
            ([(1, 0, 6, 50), (2, 0, 2, 300), (3, 0, 4, 150), (4, 0, 1, 10)], [3], [1, 2],
             [200.0, 200.0]),
            ([(4, 0, 1, 10)], [1], [-1, -1], [np.nan, np.nan])]:
        snap = _snapshot(0.0, 8, 8, [(9, 0, 4, 200, 0.0, (0, 4))], waiting)
        a = MqbfTemplate(snap, policy).run(8).arrays
        ns, n_run = k.mqbf_pass(0, True, 0.0, 8, 4, a["queue"], a["procs"], a["est"],
                                a["submit"], a["queue_of"], a["owned"], a["held"],
                                a["running"], 1, a["alloc"], a["times"], a["free"],
                                a["pivot_s"], a["pivot_j"], a["started"])
        assert (ns, n_run) == (len(starts), 1 + len(starts))
        assert a["started"][:ns].tolist() == starts
        assert a["pivot_j"].tolist() == pivots
        assert np.array_equal(a["pivot_s"], reserved, equal_nan=True)


@pytest.mark.parametrize("kernels", ["plain", "compiled"])
def test_an_overdue_job_gives_its_processors_back_just_after_now(kernels):
    """Under a power limit a running job can outlive its expected end. At now = 100, two
    partitions of 4 with nothing free: job 0 (2 + 1 processors) was expected to end at
    90, job 1 (2 + 3) at 150. The profile: nothing free at 100; job 0's processors back
    at the float just after 100 (never now, never before it); job 1's at 150."""
    k = dict(zip(["plain", "compiled"], _kernels()))[kernels]
    alloc = np.array([[2, 1], [2, 3]], dtype=np.int64)
    running = np.array([[90.0, 0.0], [150.0, 1.0]])
    times, free = np.zeros(6), np.zeros((2, 6), dtype=np.int64)
    m = k.profile_build(100.0, np.array([0, 0], dtype=np.int64), running, 2, alloc, times,
                        free)
    assert m == 3
    assert times[:3].tolist() == [100.0, np.nextafter(100.0, np.inf), 150.0]
    assert free[:, :3].tolist() == [[0, 2, 4], [0, 1, 4]]
    # a job of 2 processors and 30 s in queue 0 cannot start now; reserved just after now
    mins, got, room = np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64), \
        np.array([m, 0, 0, 0, -1], dtype=np.int64)
    assert k.mqbf_reserve(0, 2, 30.0, True, times, free, room, mins, got) == \
        np.nextafter(100.0, np.inf)


def _queues_apart():
    """8 processors, partitions of 4 and 4. Job 9 runs on partition 2 (3 procs) until 200.
    Waiting: 1 (queue 2, 4 procs, 300 s), 2 (queue 1, 2 procs, 50 s), 3 (queue 2, 1
    proc, 150 s), 4 (queue 2, 1 proc, 500 s), 5 (queue 1, 3 procs, 80 s)."""
    return _snapshot(0.0, 8, 8, [(9, 0, 3, 200, 0.0, (0, 3))],
                     [(1, 0, 4, 300), (2, 0, 2, 50), (3, 0, 1, 150), (4, 0, 1, 500),
                      (5, 0, 3, 80)])


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_without_borrowing_each_queue_is_easy_on_its_partition(engine):
    """:func:`_queues_apart` without borrowing.

    t=0: queue 2 (head: job 1) comes first: partition 2 has 1 free: job 1 is reserved at
    200 (all 4, until 500). Queue 1: job 2 starts (2 of 4, until 50); job 5 (3 procs)
    does not fit the 2 left: reserved at 50. Phase B: job 3 (1 proc until 150) ends
    before 200: it starts on partition 2's last processor; job 4 (until 500) would not.
    t=50: job 2 ends; job 1 still blocked (reserved at 200); job 5 starts (until 130).
    t=130, t=150: nothing can start in partition 2 without delaying job 1.
    t=200: job 9 ends: job 1 starts; job 4 is reserved at 500, and starts then."""
    assert ENGINES[engine](_queues_apart(), _two_queues(False), 8) == {
        1: 200.0, 2: 0.0, 3: 0.0, 4: 500.0, 5: 50.0}


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_with_borrowing_the_same_jobs_start_otherwise(engine):
    """:func:`_queues_apart` with borrowing.

    t=0: job 1 (4 procs) takes partition 2's free one and 3 of partition 1 (lowest
    index): it starts, until 300. Queue 1: job 2 (2 procs) finds 1 free: blocked; reserved
    at 200 (partition 1's 1 and 1 of partition 2, freed by job 9). Phase B: job 3 (1 proc,
    until 150) borrows partition 1's last processor; then none is left.
    t=150: job 3 ends. Job 2 (2 procs) is wider than the one processor idle: blocked,
    reserved at 200 again. Job 4 (queue 2's head, until 650) cannot have partition 1's
    processor past 200: blocked, reserved at 200 on its own partition.
    t=200: job 9 ends: job 2 starts (1 + 1 borrowed, until 250); job 5 (3 procs) has 2
    idle: reserved at 250 (1 of its own, 2 of partition 2). Job 4 starts on partition 2
    (1 proc), leaving the 2 job 5 needs at 250.
    t=250: job 2 ends: job 5 starts (1 + 2 borrowed)."""
    assert ENGINES[engine](_queues_apart(), _two_queues(True), 8) == {
        1: 0.0, 2: 200.0, 3: 0.0, 4: 200.0, 5: 250.0}


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_machine_shrunk_below_its_busy_processors(engine):
    """8 processors shrunk to 6: partitions of 3 and 3, but job 9 still holds 4 of
    partition 1 (until 100): partition 1 has -1 free, partition 2 has 3, and 2 are idle.
    Waiting: 1 (queue 2, 3 procs, 150 s), 2 (queue 1, 1 proc, 20 s).

    t=0: job 1 fits partition 2 but not the 2 idle processors: blocked, and its
    reservation is at once (partition 2's 3 over [0, 150)). Job 2: partition 1 has none,
    and partition 2's are reserved: blocked; reserved at 100 on its own partition.
    t=100: job 9 ends: both start."""
    snap = _snapshot(0.0, 8, 8, [(9, 0, 4, 100, 0.0, (4, 0))], [(1, 0, 3, 150), (2, 0, 1, 20)])
    assert ENGINES[engine](snap, _two_queues(True), 6) == {1: 100.0, 2: 100.0}


def test_a_fresh_pass_after_the_machine_shrinks():
    """12 processors, queues split at 203 s, exact estimates; job 1 (7 procs, 400 s)
    starts at 60 borrowing 1 of partition 1; the machine shrinks to 10 at 115 (partitions
    of 5 and 5: partition 2 is over by 1, 3 idle); job 2 (9 procs) is reserved at 460;
    job 4 (4 procs, 200 s, t=140) has partition 1's 4 free but only 3 idle: its
    reservation is at once, [140, 340); job 6 (2 procs, 10 s, t=145) finds partition 1
    reserved for job 4 and waits.

    At 435 job 11 arrives. The pass rebuilds the reservations: job 4's, made at 435,
    would overlap job 2's on partition 1, so it moves to 860, and job 6 starts at once.
    The main simulator, the what-if engine from its snapshot at 435 and the compiled
    loop agree."""
    w = workload_from_rows([(1, 60, 400, 7), (2, 80, 400, 9), (4, 140, 200, 4),
                            (6, 145, 10, 2), (11, 435, 20, 4)], 12)
    policy = make_policy({"name": "mqbf", "queues": 2, "boundaries_s": [203]})
    snaps: list = []
    sim = MainSimulator(w, policy, w.estimate_s("exact"))
    sim.at(115.0, lambda s: s.set_active_procs(10))
    sim.at(435.0, lambda s: snaps.append(s.state.snapshot()))
    want = {1: 60.0, 2: 460.0, 4: 860.0, 6: 435.0, 11: 860.0}
    assert {int(r.job_id): r.start_s for r in sim.run().jobs} == want
    for result in (run_whatif(snaps[0], policy), mqbf_whatif(snaps[0], policy)):
        assert dict(zip(result.job_id.tolist(), result.start_s.tolist())) == want


# -- against the Python what-if -----------------------------------------------------------


def _python_whatif(snap: Snapshot, policy, cand: Candidate, current, latency: float,
                   until_s: float, stop_above):
    """The what-if :class:`olsctl.controller.scoring.WhatIfRun` runs for ``cand`` (the
    policy's Python pass), as a generator of outcomes: (starts, stop instant, the bound
    that cut it short or None) at its first stop, then after going on with no bound."""
    state = SimState.from_snapshot(snap)
    apply_candidate(state, cand, current, latency)
    run = steps(state, policy, watch_snapshot=True, until_s=until_s, stop_above=stop_above)
    stopped = next(run, None)
    yield np.array(state.start_s), state.now_s, stopped
    if stopped is not None:
        try:
            stopped = run.send(None)
        except StopIteration:
            stopped = None
        yield np.array(state.start_s), state.now_s, stopped


def _kernel_whatif(snap: Snapshot, policy, cand: Candidate, current, latency: float,
                   until_s: float, stop_above):
    """The same what-if run by the compiled loop; also yields its run."""
    run = MqbfRun.of(snap, policy, *setting_of(snap, cand, current, latency), until_s,
                  stop_above)
    cut = run.forward()
    yield (run.start.copy(), run.now_s, run.bound if cut else None), run
    if cut:
        run.go_on(None)
        cut = run.forward()
        yield (run.start.copy(), run.now_s, run.bound if cut else None), run


def _same(a: tuple, b: tuple) -> bool:
    return (np.array_equal(a[0], b[0], equal_nan=True) and a[1] == b[1] and a[2] == b[2])


def _compare(snap, policy, cand, current, latency, until_s, stop_above) -> dict:
    """Both what-ifs, every outcome equal; returns what they went through."""
    seen = {"started": 0, "cut": False, "cut_late": False, "borrowed": False}
    python = list(_python_whatif(snap, policy, cand, current, latency, until_s, stop_above))
    kernel = list(_kernel_whatif(snap, policy, cand, current, latency, until_s, stop_above))
    assert len(python) == len(kernel)
    for want, (got, run) in zip(python, kernel):
        assert _same(got, want), (cand, got, want)
    start, run = kernel[-1][0][0], kernel[-1][1]
    nr = snap.n_running
    begun = np.flatnonzero(~np.isnan(start[nr:])) + nr
    seen["started"] = begun.size
    seen["cut"] = len(kernel) > 1
    seen["cut_late"] = seen["cut"] and bool(np.any(~np.isnan(kernel[0][0][0][nr:])))
    seen["borrowed"] = bool(((run.alloc[begun] > 0).sum(axis=1) > 1).any())
    return seen


@st.composite
def _mqbf_specs(draw):
    k = draw(st.integers(1, 6))
    bounds = sorted(draw(st.sets(st.integers(2, 500), min_size=k - 1, max_size=k - 1)))
    spec = {"name": "mqbf", "queues": k, "boundaries_s": bounds,
            "order": draw(st.sampled_from(["fcfs", "fcfs", "saf", "sjf", "wfp"])),
            "borrow": draw(st.booleans())}
    if draw(st.booleans()):
        shares = draw(st.lists(st.integers(0, 3), min_size=k, max_size=k))
        spec["shares"] = shares if sum(shares) else [1] + shares[1:]
    return spec


def _random_mqbf_snapshot(data) -> tuple:
    """A random MQBF policy and a random small workload run by the main simulator, its
    active processors changed on the way (partitions may end up holding more than they
    own), and a snapshot when a random job arrives (before the pass: it waits). Returns
    (the policy, the machine's processors, the snapshot)."""
    spec = data.draw(_mqbf_specs())
    machine = data.draw(st.integers(2, 20))
    estimates = data.draw(st.sampled_from(["exact", "user"]))
    rows, t = [], 0
    for i in range(data.draw(st.integers(3, 45))):
        t += data.draw(st.sampled_from([0, 0, 0, 1, 5, 30, 200]))
        runtime = data.draw(st.integers(1, 600))
        rows.append((i + 1, t, runtime, data.draw(st.integers(1, machine)),
                     data.draw(st.sampled_from([runtime, runtime, 2 * runtime, 600]))))
    w = workload_from_rows(rows, machine)
    policy = make_policy(spec)
    if not policy.borrow and policy.check_jobs(w.job_id, w.procs, w.estimate_s(estimates),
                                               machine):
        policy = make_policy({**spec, "borrow": True})  # (a job wider than its partition)
    sim = MainSimulator(w, policy, w.estimate_s(estimates))
    for _ in range(data.draw(st.integers(0, 3))):
        sim.at(float(data.draw(st.integers(0, t + 100))),
               lambda s, a=data.draw(st.integers(1, machine)): s.set_active_procs(a))
    snaps: list = []
    sim.at(float(rows[data.draw(st.integers(0, len(rows) - 1))][1]),
           lambda s: snaps.append(s.state.snapshot()))
    sim.run()
    return policy, machine, snaps[0]


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow],
          derandomize=True)  # the same examples each run: the tallies below hold
@given(st.data())
def _the_kernel_gives_the_python_what_if(data):
    # A random MQBF policy and a random small workload run by the main simulator, its
    # active processors changed on the way (partitions may end up holding more than they
    # own), a snapshot when a random job arrives (before the pass: it waits), and random
    # candidates: narrowed or widened
    # machines, with or without a wake latency, a horizon and an SLA bound. The compiled
    # what-if gives the Python one's starts, stop and bound, also going on after a cut.
    policy, machine, snap = _random_mqbf_snapshot(data)
    current = data.draw(st.sampled_from([None, Candidate(snap.active_procs)]))
    until_s = data.draw(st.sampled_from([INF, INF, snap.now_s + 300.0]))
    metric = data.draw(st.sampled_from(["mean_bsld", "mean_wait_s", "max_wait_s"]))
    stop_above = data.draw(st.sampled_from([None, (metric, 2.0), (metric, 100.0)]))
    latency = data.draw(st.sampled_from([0.0, 0.0, 45.0]))
    tally = {"started": 0, "cut": False, "borrowed": False, "over": False, "wake": False}
    # (the setting in force, and one processor more: with a latency, a wake under way)
    widened = {snap.active_procs, min(machine, snap.active_procs + 1)}
    for active in sorted(set(data.draw(st.lists(st.integers(1, machine), min_size=1,
                                                max_size=3))) | widened):
        seen = _compare(snap, policy, Candidate(active), current, latency, until_s,
                        stop_above)
        tally["started"] += seen["started"]
        tally["cut"] |= seen["cut"]
        tally["borrowed"] |= seen["borrowed"]
        owned = policy.owned(active)
        held = np.zeros(len(owned), dtype=np.int64)
        for alloc in snap.running_alloc:
            held += alloc
        tally["over"] |= bool((held > np.array(owned)).any()) and snap.n_waiting > 0
        tally["wake"] |= setting_of(snap, Candidate(active), current, latency)[1] is not None
    checked(snap.n_waiting > 0, started=tally["started"] > 0, cut=tally["cut"], borrowed=tally["borrowed"],
            oversubscribed=tally["over"], wake=tally["wake"],
            several_queues=policy.queues > 1, no_borrowing=not policy.borrow)


def test_the_kernel_gives_the_python_what_if():
    run_counted(_the_kernel_gives_the_python_what_if, started=0.8, cut=0.3, borrowed=0.3,
                oversubscribed=0.3, wake=0.08, several_queues=0.7,
                no_borrowing=0.05)  # observed 94%, 35%, 55%, 49%, 10%, 79%, 12%


# -- real logs ---------------------------------------------------------------------------

#: configs/mqbf-ols.yaml's policy and candidates
MQBF_OLS = {"name": "mqbf", "queues": 4, "boundaries_s": [100, 1000, 10000], "order": "fcfs"}
FRACTIONS = (0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0)


def _hourly_snapshots(trace: str, n: int, seed: int) -> tuple:
    """The main simulator runs the log under configs/mqbf-ols.yaml's policy (exact
    estimates) with its active processors set every hour, as a controller would, to one
    of the config's four widest candidate counts (drawn with ``seed``): partitions are
    often left holding more than they own. Returns the policy, the 7 candidate counts and
    snapshots at ``n`` hourly ticks spread over the log."""
    w = load_workload(trace_path(trace))
    total = w.machine_procs
    counts = sorted({max(1, int(round(f * total))) for f in FRACTIONS})
    assert len(counts) == 7
    policy = make_policy(MQBF_OLS)
    sim = MainSimulator(w, policy, w.estimate_s("exact"))
    rng = np.random.default_rng(seed)
    ticks = np.arange(float(w.submit_s[0]), float(w.submit_s[-1]), 3600.0)
    for t in ticks.tolist():
        sim.at(t, lambda s, a=int(rng.choice(counts[3:])): s.set_active_procs(a))
    snaps: list = []
    for t in ticks[np.linspace(24, len(ticks) - 24, n).astype(int)].tolist():
        sim.at(t, lambda s: snaps.append(s.state.snapshot()))
    sim.run()
    return policy, counts, snaps


@pytest.mark.parametrize("trace", ["KTH-SP2-1996-2.1-cln.swf.gz",
                                   "SDSC-SP2-1998-4.2-cln.swf.gz"])
def test_the_kernel_gives_the_python_what_if_on_a_real_log(trace):
    """At 20 hourly ticks of a log run as :func:`_hourly_snapshots` runs it, the what-ifs
    of all 7 candidates (the setting in force being the snapshot's), run to the end and
    under the SLA bound (mean bounded slowdown 200), give the same outcomes compiled
    and in Python."""
    policy, counts, snaps = _hourly_snapshots(trace, 20, seed=5)
    compared = started = over = 0
    for snap in snaps:
        current = Candidate(snap.active_procs)
        for active in counts:
            for stop_above in (None, ("mean_bsld", 200.0)):
                seen = _compare(snap, policy, Candidate(active), current, 0.0, INF,
                                stop_above)
                compared += 1
                started += seen["started"]
            held = np.sum([a for a in snap.running_alloc], axis=0)
            over += bool((held > np.array(policy.owned(active))).any())
    assert compared == 280 and started > 2500 and over > 50, (compared, started, over)


def _congested_mqbf_snapshot(seed: int, spec: dict, estimates: str) -> tuple:
    """A snapshot with hundreds of jobs waiting under the MQBF policy ``spec``: more work
    offered than the machine does, narrow and wide jobs and short and long ones mixed
    (all four queues of configs/mqbf-ols.yaml's boundaries used). Returns (the policy,
    the snapshot)."""
    rng = np.random.default_rng(seed)
    machine, n = 48, 600
    rows, t = [], 0
    for i in range(n):
        t += int(rng.choice([0, 1, 3, 10]))
        runtime = int(rng.choice([5, 60, 400, 2000, 12000]))
        wide = rng.random() < 0.4
        procs = int(rng.integers(8, 25) if wide else rng.integers(1, 5))
        requested = runtime * int(rng.choice([1, 3]))
        rows.append((i + 1, t, runtime, procs, requested))
    w = workload_from_rows(rows, machine)
    policy = make_policy(spec)
    sim = MainSimulator(w, policy, w.estimate_s(estimates))
    snaps: list = []
    sim.at(float(t), lambda s: snaps.append(s.state.snapshot()))
    sim.run()
    return policy, snaps[0]


@pytest.mark.parametrize("order", ["fcfs", "saf", "sjf"])
@pytest.mark.parametrize("borrow", [True, False])
def test_the_kernel_gives_the_python_what_if_on_a_congested_queue(order, borrow):
    """With hundreds waiting (the compiled loop keeps the queue by position in its
    order, with holes and a deep index; the Python what-if orders the queue and reads
    all of it at every pass), every candidate's what-if gives the same outcomes:
    narrowed, widened with a wake under way, to the end, cut short by the SLA bound and
    gone on, and with a horizon."""
    spec = {**MQBF_OLS, "order": order, "borrow": borrow}
    tally = {"started": 0, "cut": 0, "cut_late": 0, "borrowed": 0}
    for seed, estimates in ((0, "exact"), (1, "user")):
        policy, snap = _congested_mqbf_snapshot(seed, spec, estimates)
        assert snap.n_waiting >= 200, snap.n_waiting
        current = Candidate(snap.active_procs)
        for active, latency in ((48, 0.0), (30, 0.0), (36, 0.0), (48, 600.0)):
            for stop_above, until_s in ((None, INF), (("mean_bsld", 3.0), INF),
                                        (("max_wait_s", 20000.0), INF),
                                        (None, snap.now_s + 3000.0)):
                seen = _compare(snap, policy, Candidate(active), current, latency,
                                until_s, stop_above)
                tally["started"] += seen["started"]
                tally["cut"] += seen["cut"]
                tally["cut_late"] += seen["cut_late"]  # (jobs started before the cut)
                tally["borrowed"] += seen["borrowed"]
    assert tally["started"] > 2000 and tally["cut_late"] >= 4, tally
    assert (tally["borrowed"] > 0) == borrow, tally


def _near_tied_wfp_workload(seed: int, widest: int):
    """Hundreds of jobs on 64 processors, more work offered than the machine does,
    under configs/mqbf-ols.yaml's queues with user estimates, whose WFP keys often tie
    or nearly tie: most come in pairs submitted at the same instant or a few units in
    the last place apart, the second 8 or 27 times as wide with an estimate 2 or 3 times
    as long (the same real key at every instant, the same float or a few units in the
    last place apart, so that cubes by multiplication and by ``** 3.0`` order them
    differently now and then); twins (the same job twice) and ordinary jobs besides;
    none wider than ``widest``. Submit times and runtimes are not whole seconds."""
    rng = np.random.default_rng(seed)
    rows, t = [], 1e5
    while len(rows) < 500:
        t += float(rng.exponential(12.0))
        width, est_s = [(1, 150.0), (1, 400.0), (2, 2000.0), (1, 30.0)][rng.integers(4)]
        kind = rng.random()
        if kind < 0.15:  # an ordinary job
            width, est_s = int(rng.integers(1, widest + 1)), float(rng.choice([60, 900, 5000]))
        elif kind < 0.25 and rows:  # a twin
            _, t, _, width, est_s = rows[-1]
        jobs = [(t, width, est_s)]
        if kind >= 0.25:  # a pair whose keys tie as real numbers
            factor = 3 if width * 27 <= widest and rng.random() < 0.5 else 2
            jobs.append((t + float(rng.integers(-2, 3)) * float(np.spacing(t)),
                         width * factor ** 3, est_s * factor))
        for submit, w, e in jobs:
            runtime = e * float(rng.choice([1.0, 0.5, 0.1])) * float(rng.uniform(0.9, 1.0))
            rows.append((len(rows) + 1, submit, runtime, w, e))
    return workload_from_rows(rows[:500], 64)


@pytest.mark.parametrize("borrow", [True, False])
def test_the_main_simulator_in_wfp_order_starts_as_the_oracle_with_near_tied_keys(borrow):
    """The main simulator's pass in WFP order (each queue's first jobs from trees built
    for the pass, by quick keys where they are apart) starts every job when MQBF's
    independent Python pass does (tests/mqbf_oracle.py, which sorts the queue by the exact
    keys), on congested workloads whose WFP keys often tie or nearly tie."""
    from mqbf_oracle import OracleMqbf

    for seed in range(2):
        w = _near_tied_wfp_workload(seed, 64 if borrow else 16)
        policy = make_policy({**MQBF_OLS, "order": "wfp", "borrow": borrow})
        runs = [MainSimulator(w, p, w.estimate_s("user")).run() for p in (policy,
                                                                          OracleMqbf(policy))]
        starts = [[(r.job_id, r.start_s) for r in run.jobs] for run in runs]
        assert starts[0] == starts[1]
        assert len(starts[0]) == 500


@pytest.mark.parametrize("borrow", [True, False])
def test_the_kernel_in_wfp_order_gives_the_oracles_what_if_with_near_tied_keys(borrow):
    """A what-if in WFP order (each queue's first jobs from its tree, kept from pass to
    pass by how long each node's first surely stays first; Phase B's next job from a
    heap of subtrees) gives the outcomes of the Python what-if run by MQBF's independent
    Python pass (tests/mqbf_oracle.py) and by the policy's own pass: narrowed, widened
    with a wake under way, to the end, cut short and gone on, and with a horizon, with
    hundreds waiting whose WFP keys often tie or nearly tie."""
    from mqbf_oracle import OracleMqbf

    started = cut = 0
    for seed in range(2):
        w = _near_tied_wfp_workload(seed, 64 if borrow else 16)
        policy = make_policy({**MQBF_OLS, "order": "wfp", "borrow": borrow})
        sim = MainSimulator(w, policy, w.estimate_s("user"))
        snaps: list = []
        sim.at(float(w.submit_s[-1]), lambda s: snaps.append(s.state.snapshot()))
        sim.run()
        snap = snaps[0]
        assert snap.n_waiting >= 200, snap.n_waiting
        current = Candidate(snap.active_procs)
        for active, latency in ((64, 0.0), (40, 0.0), (52, 0.0), (64, 900.0)):
            for stop_above, until_s in ((None, INF), (("mean_bsld", 3.0), INF),
                                        (None, snap.now_s + 4000.0)):
                args = (snap, Candidate(active), current, latency, until_s, stop_above)
                kernel = [got for got, _ in _kernel_whatif(snap, policy, *args[1:])]
                for python in (OracleMqbf(policy), policy):
                    want = list(_python_whatif(snap, python, *args[1:]))
                    assert len(want) == len(kernel)
                    for a, b in zip(kernel, want):
                        assert _same(a, b), (seed, active, latency, stop_above, until_s)
                start = kernel[-1][0]
                started += int(np.count_nonzero(~np.isnan(start[snap.n_running:])))
                cut += len(kernel) > 1
    assert started > 2000 and cut >= 4, (started, cut)


# -- the controller's what-ifs -------------------------------------------------------------


@pytest.mark.parametrize("trace", ["KTH-SP2-1996-2.1-cln.swf.gz"])
def test_the_controllers_mqbf_what_ifs_run_compiled_with_the_same_trials(trace, monkeypatch):
    """The controller's MQBF what-ifs (:class:`olsctl.controller.scoring.WhatIfRun`) run
    by the compiled loop give the trials of the policy's Python pass, field by field:
    each queue's mean bounded slowdown too, cut short under the SLA bound and then run to
    the end, at 12 hourly ticks of a real log whose active processors a controller-like
    schedule changes (:func:`_hourly_snapshots`), for configs/mqbf-ols.yaml's 7
    candidates."""
    from olsctl.controller.trials import WhatIfTask

    _, counts, snaps = _hourly_snapshots(trace, 12, seed=7)
    compared = cut = uneven = 0
    for snap in snaps:
        task = WhatIfTask(snap, MQBF_OLS, stop_above=("mean_bsld", 20.0),
                          current=Candidate(snap.active_procs))
        candidates = [Candidate(a) for a in counts]
        for got in same_trials(task, candidates, monkeypatch):
            compared += 1
            cut += len(got) > 1
            final = got[-1].queue_mean_bsld
            uneven += final is not None and len(set(final)) > 1
    assert compared == 84 and cut > 10 and uneven > 20, (compared, cut, uneven)


def test_the_what_if_benchmark_collects_the_controllers_what_ifs_and_compares_them():
    """``python -m olsctl.bench.mqbf_whatif_speed`` gathers the what-ifs of a real MQBF/OLS run
    (run by the Python pass there, though the controller would run them compiled) and
    runs each both ways, which must agree (it asserts so)."""
    from olsctl.bench import mqbf_whatif_speed as bench

    cases = bench.collect("KTH-SP2", ticks=60,
                          config=REPO_ROOT / "configs" / "mqbf-ols.yaml")
    assert len(cases) > 20 and any(c.stop_above for c in cases)
    python, compiled_rate = bench.bench(cases[:20], turns=1)
    assert python > 0 and compiled_rate > 0
