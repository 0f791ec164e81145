"""The what-if engine: a snapshot run forward in a plain event loop, without SimPy.

Same state, same policy code and same event order as the main simulator (completions,
then arrivals, then one pass per instant), so a what-if started from a snapshot with no
new arrivals and no setting changes reproduces the main simulator's future starts
exactly. It stops once every job it knows of has started.
"""

from __future__ import annotations

from dataclasses import dataclass
from heapq import heapify, heappop, heappush

import numpy as np

from olsctl.checker import NULL_CHECKER, Checker
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
) -> WhatIfResult:
    """Run ``snapshot`` forward under ``policy`` until every job has started.

    ``arrivals`` (submit times >= the snapshot time) join the queue at their submit times;
    with power, ``arrivals_power`` is their :class:`olsctl.power.runtime.PowerState`.
    With ``watch_snapshot`` the run stops once the snapshot's own jobs have all started
    (later arrivals may still wait); it never goes past ``until_s`` (jobs not started by
    then keep a NaN start).
    """
    state = SimState.from_snapshot(snapshot, checker)
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
    n_arr = len(arr_time)
    runtime = state.runtime_s
    heap = [(state.start_s[j] + runtime[j], j) for _, j in state.running]
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
    while True:
        started = run_pass(policy)
        if started:
            queue_left -= len(started)
            for j in started:
                heappush(heap, (now + runtime[j], j))
                if j < n_snap:
                    snap_left -= 1
        if (queue_left == 0 and a == n_arr) or snap_left == 0:
            break
        t_done = heap[0][0] if heap else INF
        t_arr = arr_time[a] if a < n_arr else INF
        now = t_done if t_done < t_arr else t_arr
        if now == INF or now > until_s:
            break
        state.now_s = now
        while heap and heap[0][0] == now:
            state.finish(heappop(heap)[1])
        while a < n_arr and arr_time[a] == now:
            state.arrive(n_snap + a)
            a += 1
            queue_left += 1
    return WhatIfResult(
        job_id=np.asarray(state.job_id, dtype=np.int64),
        submit_s=np.asarray(state.submit_s, dtype=float),
        procs=np.asarray(state.procs, dtype=np.int64),
        runtime_s=np.asarray(runtime, dtype=float),
        start_s=np.asarray(state.start_s, dtype=float),
        n_running_at_start=snapshot.n_running,
        end_time_s=state.now_s,
    )


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
