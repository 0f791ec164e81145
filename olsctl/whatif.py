"""The what-if engine: a snapshot run forward in a plain event loop, without SimPy.

Same state, same policy code and same event order as the main simulator (completions,
then arrivals, then the setting changes the state holds as data: a wake under way, the
cap schedule's changes; then one pass, at each instant where something happened), so a
what-if started from a snapshot with no new arrivals and no setting changes reproduces
the main simulator's future starts exactly (the contract suite, tests/test_contract.py,
holds every registered policy to it). It stops once every job it knows of has started.

A what-if whose policy family declares a compiled path (its registry entry,
:class:`olsctl.policies.CompiledPath`), with no arrivals and a state that path takes (for
EASY: nothing but processors, no strict checker), runs that family's compiled loop over
the snapshot's jobs held as arrays; every other what-if runs the loop below, calling the
policy's pass at each instant.
"""

from __future__ import annotations

from dataclasses import dataclass
from heapq import heapify, heappop, heappush

import numpy as np

from olsctl.checker import NULL_CHECKER, Checker
from olsctl.metrics import BSLD_BOUND_S
from olsctl.policies import compiled_path
from olsctl.policies.core import bound as kernels
from olsctl.policies.core.jit import compiled
from olsctl.policies.core.run import PAUSED
from olsctl.state import SimState, Snapshot

INF = float("inf")


@dataclass(frozen=True)
class JobTable:
    """Jobs as columns (used for arrivals fed to a what-if); sorted by (submit, job id)."""

    job_id: np.ndarray
    submit_s: np.ndarray
    procs: np.ndarray
    estimate_s: np.ndarray
    runtime_s: np.ndarray

    def __len__(self) -> int:
        return int(self.job_id.size)


@dataclass(frozen=True)
class WhatIfResult:
    """Start times of every job the what-if knew of (snapshot jobs first, then arrivals).

    ``start_s`` is NaN for a job that could never start (e.g. wider than the active
    processors with nothing left running); ``end_time_s`` is when the last start happened.
    """

    job_id: np.ndarray
    submit_s: np.ndarray
    procs: np.ndarray
    runtime_s: np.ndarray
    start_s: np.ndarray
    n_running_at_start: int
    end_time_s: float
    #: when the run was cut short because the SLA was surely missed: the bound (else None)
    stopped_bound: float | None = None

    @property
    def unstarted(self) -> int:
        return int(np.isnan(self.start_s).sum())


def run_whatif(
    snapshot: Snapshot,
    policy,
    arrivals: JobTable | None = None,
    checker: Checker = NULL_CHECKER,
    arrivals_power=None,
    watch_snapshot: bool = False,
    until_s: float = INF,
    stop_above: "tuple[str, float] | None" = None,
    arrivals_budget=None,
) -> WhatIfResult:
    """Run ``snapshot`` forward under ``policy`` until every job has started.

    ``arrivals`` (submit times >= the snapshot time) join the queue at their submit times;
    with power, ``arrivals_power`` is their :class:`olsctl.power.runtime.PowerState`;
    under RMAP/PARM, ``arrivals_budget`` their :class:`olsctl.perfmodel.BudgetRun`.
    With ``watch_snapshot`` the run stops once the snapshot's own jobs have all started
    (later arrivals may still wait); it never goes past ``until_s`` (jobs not started by
    then keep a NaN start). With ``stop_above = (metric, limit)`` it stops as soon as the
    snapshot's jobs surely score ``metric > limit`` (see :class:`MissBound`); the result's
    ``stopped_bound`` then holds the lower bound that proved it.
    """
    state = SimState.from_snapshot(snapshot, checker)
    stopped = next(steps(state, policy, arrivals, arrivals_power, watch_snapshot, until_s,
                         stop_above, arrivals_budget=arrivals_budget), None)
    return WhatIfResult(
        job_id=np.asarray(state.job_id, dtype=np.int64),
        submit_s=np.asarray(state.submit_s, dtype=float),
        procs=np.asarray(state.procs, dtype=np.int64),
        runtime_s=np.asarray(state.runtime_s, dtype=float),
        start_s=np.asarray(state.start_s, dtype=float),
        n_running_at_start=snapshot.n_running,
        end_time_s=state.now_s,
        stopped_bound=stopped,
    )


def steps(
    state: SimState,
    policy,
    arrivals: JobTable | None = None,
    arrivals_power=None,
    watch_snapshot: bool = False,
    until_s: float = INF,
    stop_above: "tuple[str, float] | None" = None,
    raise_at: "tuple[float, int] | None" = None,
    arrivals_budget=None,
    pause_s: float = INF,
):
    """The loop of :func:`run_whatif` on a live ``state`` (changed in place; its jobs
    are the snapshot's), as a generator: it yields the bound each time ``stop_above``
    cuts the run short, and ends when the run does (``next(steps(...), None)``: the
    bound, or None). ``send(limit)`` goes on with a higher limit (None: no more cuts),
    exactly as a run started with that limit would have: until then the bound stayed
    below the old limit, so below the new one. With ``pause_s``, it may yield
    :data:`olsctl.policies.core.run.PAUSED`, at most once, when every instant up to
    ``pause_s`` has run (the next call goes on).

    Setting changes come from the state's own data, as in the main simulator: a wake
    under way (``state.wake``; ``raise_at = (t, n)`` sets one) and the cap schedule's
    changes run after the instant's completions and arrivals, before its pass. An
    instant has a pass when something happened that may change what it does
    (``state.pass_due``): at the snapshot's instant, when the main simulator's pass was
    still due then, or a setting was changed on the state before this call."""
    path = None if arrivals is not None and len(arrivals) else compiled_path(policy)
    fast = None if path is None else \
        path.template_module().steps(policy, state, until_s, stop_above, raise_at)
    if fast is not None:  # the family's compiled loop runs it
        return (yield from fast)
    n_snap = len(state.job_id)
    arr_time: list[float] = []
    if arrivals is not None and len(arrivals):
        _append_jobs(state, arrivals)
        arr_time = arrivals.submit_s.tolist()
        if arrivals_power is not None:
            if state.power is None and n_snap == 0:
                state.power = arrivals_power.subset(list(range(len(arrivals))))
            elif state.power is not None:
                state.power.extend(arrivals_power)
        if arrivals_budget is not None:
            if state.budget is None:
                state.budget = arrivals_budget.subset(list(range(len(arrivals))))
            else:
                state.budget.extend(arrivals_budget)
    n_arr = len(arr_time)
    runtime = state.runtime_s
    power_limit = state.limit
    ends = None if power_limit is None else power_limit.end  # under a power limit, ends move
    heap = [(state.end_of(j), j) for _, j in state.running]
    heapify(heap)
    queue_left = len(state.queue)
    snap_left = queue_left if watch_snapshot else -1
    a = 0
    now = state.now_s
    # Arrivals due exactly at the snapshot time join before the first pass.
    while a < n_arr and arr_time[a] <= now:
        state.arrive(n_snap + a)
        a += 1
        queue_left += 1
    run_pass = state.run_pass
    bound = None if stop_above is None else MissBound.make(state, n_snap, *stop_above)
    if raise_at is not None:
        state.wake = (float(raise_at[0]), int(raise_at[1]))
    t_change = state.next_change_s()
    while True:
        started = run_pass(policy) if state.pass_due else ()
        if started:
            queue_left -= len(started)
            for j in started:
                heappush(heap, (now + runtime[j], j) if ends is None else (ends[j], j))
                if j < n_snap:
                    snap_left -= 1
                    if bound is not None:
                        bound.start(j, now)
        if power_limit is not None:  # the limit ends the instant (as in olsctl.sim)
            for j in state.settle():
                heappush(heap, (ends[j], j))
            t_change = state.next_change_s()
        if (queue_left == 0 and a == n_arr) or snap_left == 0:
            break
        while bound is not None and bound.missed(now):
            limit = yield bound.value(now)
            if limit is None:
                bound = None
            else:
                bound.limit = limit
        t_done = heap[0][0] if heap else INF
        t_arr = arr_time[a] if a < n_arr else INF
        now = t_done if t_done < t_arr else t_arr
        if t_change < now:
            now = t_change
        if now > pause_s:  # (the caller looks at the run so far; it then goes on)
            pause_s = INF
            yield PAUSED
        if now == INF or now > until_s:
            break
        state.now_s = now
        while heap and heap[0][0] == now:
            j = heappop(heap)[1]
            if ends is None or ends.get(j) == now:  # (else its end has moved since)
                state.finish(j)
        while a < n_arr and arr_time[a] == now:
            state.arrive(n_snap + a)
            a += 1
            queue_left += 1
        if now == t_change:
            state.apply_changes()
            t_change = state.next_change_s()


class MissBound:
    """A lower bound, at time ``now``, on an SLA metric of a what-if's snapshot jobs: jobs
    started count with their wait, jobs still waiting with the wait they have so far.

    Kept up to date in O(1) per start, for ``mean_bsld``, ``mean_wait_s`` and
    ``max_wait_s`` (a percentile has no such bound: :meth:`make` returns None). Sums are
    taken relative to the snapshot time to keep rounding small, and :meth:`missed` asks
    for a margin far above it, so a what-if is only cut short when it surely fails. The
    arithmetic is the kernels' (:func:`olsctl.policies.core.bound.bound_open` and after,
    compiled), which EASY's compiled what-if loop keeps itself.
    """

    __slots__ = ("metric", "limit", "code", "acc", "cnt", "seen", "submit", "runtime", "k")

    @classmethod
    def make(cls, state: SimState, n_snap: int, metric: str, limit: float) -> "MissBound | None":
        if metric not in kernels.BOUND_METRICS or n_snap == 0:
            return None
        return cls(state, n_snap, metric, limit)

    def __init__(self, state: SimState, n_snap: int, metric: str, limit: float) -> None:
        self.metric, self.limit = metric, limit
        self.code = kernels.BOUND_METRICS[metric]
        cols = np.array((state.submit_s[:n_snap], state.runtime_s[:n_snap],
                         state.start_s[:n_snap]), dtype=float)
        self.submit, self.runtime = cols[0], cols[1]
        self.acc = np.zeros(4)
        self.cnt = np.zeros(2, dtype=np.int64)
        self.seen = np.zeros(n_snap, dtype=np.bool_)
        self.k = compiled()
        self.k.bound_open(self.code, self.acc, self.cnt, self.seen, state.now_s,
                           np.array([j for _, j in state.running], dtype=np.int64), cols[2],
                           self.submit, self.runtime, BSLD_BOUND_S)

    def start(self, j: int, now: float) -> None:
        self.k.bound_start(self.code, self.acc, self.cnt, self.seen, j, now, self.submit,
                            self.runtime, BSLD_BOUND_S)

    def value(self, now: float) -> float:
        return float(self.k.bound_value(self.code, self.acc, self.cnt, self.seen, now,
                                         self.submit))

    def missed(self, now: float) -> bool:
        return kernels.missed(self.value(now), self.limit)


def empty_snapshot(now_s: float, total_procs: int, active_procs: int | None = None) -> Snapshot:
    """A machine with no jobs at ``now_s`` (start a what-if of a whole workload from it)."""
    none_i = np.empty(0, dtype=np.int64)
    none_f = np.empty(0, dtype=float)
    return Snapshot(now_s, total_procs, total_procs if active_procs is None else active_procs,
                    0, none_i, none_f, none_i, none_f, none_f, none_f)


def _append_jobs(state: SimState, jobs: JobTable) -> None:
    state.job_id.extend(jobs.job_id.astype(int).tolist())
    state.submit_s.extend(jobs.submit_s.astype(float).tolist())
    state.procs.extend(jobs.procs.astype(int).tolist())
    state.estimate_s.extend(jobs.estimate_s.astype(float).tolist())
    state.runtime_s.extend(jobs.runtime_s.astype(float).tolist())
    state.start_s.extend([float("nan")] * len(jobs))
