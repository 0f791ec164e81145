"""MQBF's two shortcuts in :class:`olsctl.policies.partitions.PartitionProfiles`, each
checked to change no start: a job refused at an instant makes every later job of that
instant at least as wide, whose window reaches as far, be refused at once
(``REFUSED_SHORTCUT``); and a pending pivot whose reservation would start now is dropped
without being made when profiles are carried to a later instant (``DROP_SHORTCUT``).
Hand-worked traces where each is taken, then random workloads with and without them.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import run_main, run_whatif_all, workload_from_rows
from olsctl.policies import make_policy, partitions

ONE_QUEUE = {"name": "mqbf", "queues": 1}


@pytest.fixture
def spied(monkeypatch):
    """Records, per call of ``try_start``: (now, job id, result, whether it looked at the
    profile's windows); and the instants at which a pending pivot was dropped unmade."""
    P = partitions.PartitionProfiles
    calls: list[tuple[float, int, bool, bool]] = []
    dropped: list[float] = []
    windows = [0]
    window, try_start, room_now = P._window, P.try_start, P._room_now

    def spy_window(self, end):
        windows[0] += 1
        return window(self, end)

    def spy_try_start(self, j):
        before = windows[0]
        got = try_start(self, j)
        calls.append((self.state.now_s, int(self.state.job_id[j]), got, windows[0] > before))
        return got

    def spy_room_now(self, j):
        got = room_now(self, j)
        if got:
            dropped.append(self.state.now_s)
        return got

    monkeypatch.setattr(P, "_window", spy_window)
    monkeypatch.setattr(P, "try_start", spy_try_start)
    monkeypatch.setattr(P, "_room_now", spy_room_now)
    return calls, dropped


def test_a_refusal_refuses_wider_jobs_reaching_as_far(spied):
    """8 processors, one queue. t=0: job 1 (4 procs, 100 s) starts; job 2 (8 procs, 50 s)
    is blocked: its pivot is reserved at 100, taking all 8 processors until 150. Job 3 (2
    procs, 200 s) would run past 100: refused, after looking at its window (segments
    starting at 0, 100 and 150). Job 4 (3 procs, 180 s) is wider and its window also
    reaches past 150: refused at once. Job 5 (1 proc, 50 s) and job 6 (2 procs, 90 s) end
    before 100: they start (job 6 is as wide as job 3, but its window stops before 150).
    t=100: job 2 starts; t=150: jobs 3 and 4."""
    rows = [(1, 0, 100, 4), (2, 0, 50, 8), (3, 0, 200, 2), (4, 0, 180, 3),
            (5, 0, 50, 1), (6, 0, 90, 2)]
    want = {1: 0.0, 2: 100.0, 3: 150.0, 4: 150.0, 5: 0.0, 6: 0.0}
    w = workload_from_rows(rows, 8)
    calls, _ = spied
    assert run_main(w, policy=make_policy(ONE_QUEUE)) == want
    at_zero = [c for c in calls if c[0] == 0.0]
    assert (0.0, 3, False, True) in at_zero  # looked, refused
    assert (0.0, 4, False, False) in at_zero  # refused at once
    assert (0.0, 6, True, False) in at_zero  # (ends before the reservation: now's counts)


def test_a_refusal_refuses_at_once_only_what_it_proves(spied, monkeypatch):
    """The same trace with and without the shortcut: the same starts, and without it job 4
    is refused only after looking at its window."""
    rows = [(1, 0, 100, 4), (2, 0, 50, 8), (3, 0, 200, 2), (4, 0, 180, 3),
            (5, 0, 50, 1), (6, 0, 90, 2)]
    w = workload_from_rows(rows, 8)
    calls, _ = spied
    fast = run_main(w, policy=make_policy(ONE_QUEUE))
    monkeypatch.setattr(partitions, "REFUSED_SHORTCUT", False)
    del calls[:]
    assert run_main(w, policy=make_policy(ONE_QUEUE)) == fast
    assert (0.0, 4, False, True) in calls


def test_a_pivot_whose_reservation_came_is_dropped_unmade(spied, monkeypatch):
    """4 processors, one queue, in the what-if engine (which keeps no record of pivots, so
    a pivot's reservation waits to be computed until a start needs it). t=0: job 1 (4
    procs, 100 s) starts; job 2 (4 procs, 50 s) is blocked: a pivot, its reservation not
    computed. t=100: job 1 ends at its expected end; job 2's reservation would start now:
    it is dropped without being made, and job 2 starts. t=150: job 2 ends; job 3 (arrived
    at 120, 2 procs) could not start before: it starts."""
    rows = [(1, 0, 100, 4), (2, 0, 50, 4), (3, 120, 10, 2)]
    want = {1: 0.0, 2: 100.0, 3: 150.0}
    w = workload_from_rows(rows, 4)
    _, dropped = spied
    assert run_whatif_all(w, policy=make_policy(ONE_QUEUE)) == want
    assert dropped == [100.0]
    monkeypatch.setattr(partitions, "DROP_SHORTCUT", False)
    del dropped[:]
    assert run_whatif_all(w, policy=make_policy(ONE_QUEUE)) == want
    assert dropped == []


def _random_rows(rng: np.random.Generator, machine: int) -> list[tuple]:
    """Bursty arrivals on a small machine (long queues, many jobs refused at one instant);
    few distinct runtimes (many jobs end together, at their expected ends with exact
    estimates); requested times from under to far over the runtime."""
    n = int(rng.integers(20, 100))
    submit = np.cumsum(rng.choice([0, 0, 0, 1, 5, 20, 60], size=n))
    runtime = rng.choice([5, 10, 20, 50, 100, 300], size=n)
    procs = rng.integers(1, machine + 1, size=n)
    factor = rng.choice([0.5, 1.0, 1.0, 2.0, 5.0], size=n)
    return [(i + 1, int(submit[i]), int(runtime[i]), int(procs[i]),
             max(1, int(runtime[i] * factor[i]))) for i in range(n)]


SPECS = [
    {"name": "mqbf", "queues": 4, "boundaries_s": [15, 60, 200]},
    {"name": "mqbf", "queues": 3, "boundaries_s": [30, 150], "shares": [1, 2, 1]},
    {"name": "mqbf", "queues": 2, "boundaries_s": [40], "borrow": False},
    ONE_QUEUE,
]


@pytest.mark.parametrize("shortcut", ["REFUSED_SHORTCUT", "DROP_SHORTCUT"])
@pytest.mark.parametrize("estimates", ["exact", "user"])
def test_the_shortcuts_change_no_start(shortcut, estimates, spied, monkeypatch):
    calls, dropped = spied
    taken = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        machine = int(rng.integers(4, 24))
        w = workload_from_rows(_random_rows(rng, machine), machine)
        spec = dict(SPECS[seed % len(SPECS)])
        if not spec.get("borrow", True) and max(w.procs) > machine // 2:
            spec["borrow"] = True  # (a job wider than its partition could never run)
        del calls[:], dropped[:]
        fast = run_main(w, estimates, policy=make_policy(spec))
        fast_whatif = run_whatif_all(w, estimates, policy=make_policy(spec))
        if shortcut == "REFUSED_SHORTCUT":
            used = sum(1 for _, _, got, looked in calls if not got and not looked)
        else:
            used = len(dropped)
        monkeypatch.setattr(partitions, shortcut, False)
        plain = run_main(w, estimates, policy=make_policy(spec))
        plain_whatif = run_whatif_all(w, estimates, policy=make_policy(spec))
        monkeypatch.setattr(partitions, shortcut, True)
        assert fast == plain, seed
        assert fast_whatif == plain_whatif, seed
        assert len(fast) == len(w.job_id), seed
        taken += used > 0
    assert taken >= 20  # most workloads took the shortcut at least once


def _loaded_rows(seed: int) -> tuple[list[tuple], int]:
    """1500 jobs on 64 processors at an offered load above 1, wide and narrow jobs of all
    lengths on few distinct runtimes: long queues in every MQBF queue, a pivot in each,
    many jobs ending together at their expected ends."""
    rng = np.random.default_rng(seed)
    n, machine = 1500, 64
    procs = rng.choice([1, 2, 4, 8, 16, 32, 48, 64], n,
                       p=[.3, .15, .15, .12, .1, .08, .05, .05])
    runtime = rng.choice([10, 30, 100, 300, 1000, 3000, 10000], n)
    submit = np.cumsum(rng.exponential(float((procs * runtime).mean()) / machine / 1.5, n))
    return [(i + 1, int(submit[i]), int(runtime[i]), int(procs[i]),
             int(runtime[i] * rng.choice([1, 1, 2, 5]))) for i in range(n)], machine


@pytest.mark.parametrize("shortcut", ["REFUSED_SHORTCUT", "DROP_SHORTCUT"])
def test_the_shortcuts_change_nothing_on_a_long_loaded_workload(shortcut, monkeypatch):
    rows, machine = _loaded_rows(1)
    w = workload_from_rows(rows, machine)
    spec = {"name": "mqbf", "queues": 4, "boundaries_s": [50, 500, 2000]}
    for estimates in ("exact", "user"):
        fast = run_whatif_all(w, estimates, policy=make_policy(spec))
        monkeypatch.setattr(partitions, shortcut, False)
        plain = run_whatif_all(w, estimates, policy=make_policy(spec))
        monkeypatch.setattr(partitions, shortcut, True)
        assert fast == plain


def test_a_pivot_is_dropped_unmade_exactly_when_its_reservation_would_start_now(
        monkeypatch):
    """Each time the shortcut asks, the answer is checked against the reservation itself,
    made on a copy of the profiles (its state too): it starts now iff the answer is yes.
    (A wrong yes is mostly undone by the next pass, which makes the pivot again, so
    comparing starts alone would seldom see it.)"""
    import copy

    P = partitions.PartitionProfiles
    room_now = P._room_now
    asked = []

    def checked_room_now(self, j):
        twin = copy.deepcopy(self)
        twin.pending = [p for p in twin.pending if p[0] == j][:1]
        twin._settle_next()
        made = twin.reservations[-1] if twin.reservations else None
        truth = made is not None and made.job == j and made.shadow_s <= self.state.now_s
        got = room_now(self, j)
        asked.append(got)
        assert got == truth
        return got

    monkeypatch.setattr(P, "_room_now", checked_room_now)
    for seed in range(12):
        rng = np.random.default_rng(seed)
        machine = int(rng.integers(4, 24))
        w = workload_from_rows(_random_rows(rng, machine), machine)
        for spec in SPECS[:2]:
            run_whatif_all(w, "exact", policy=make_policy(spec))
    rows, machine = _loaded_rows(2)
    w = workload_from_rows(rows, machine)
    run_whatif_all(w, "exact", policy=make_policy(SPECS[0]))
    assert any(asked) and not all(asked)
