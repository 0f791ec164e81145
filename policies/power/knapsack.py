"""The knapsack policies under a power cap: Wallace et al.'s window 0-1 knapsack and the
greedy knapsack by profit per predicted power increase.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain
from typing import TYPE_CHECKING

import numpy as np

from olsctl.policies.core.jit import compiled
from olsctl.policies.core.order import ORDER_CODES
from olsctl.policies.power.capping import FORCE, _PowerPolicy, _increase, force_if_idle
from olsctl.policies.power.held import BACKFILL_CODES
from olsctl.policies.power.kernels import FORCE_CODES, K_FORCED, N_KFLT, N_KINT
from olsctl.power.predict import History, Naive, Oracle
from olsctl.power.runtime import flat_phases

if TYPE_CHECKING:
    from olsctl.state import SimState


@dataclass(frozen=True)
class WindowKnapsack(_PowerPolicy):
    """Wallace et al.: the first ``window`` jobs of the queue form a 0-1 knapsack (value =
    processors, weight = predicted power increase, capacity = the headroom, and at most
    the free processors), solved exactly by dynamic programming over processor counts.
    ``stat`` chooses the predicted mean power (Wallace) or, more cautious, the maximum;
    ``headroom: predicted`` counts each running job at the larger of its measured power
    and its predicted ``stat``, so jobs about to draw more leave room for it.
    If the window is full and nothing fits, ``force`` decides what happens to the job in
    the window longest: ``now`` (Wallace's rule) starts it anyway when processors allow (a
    forced start, at most one a pass), even over the cap; ``when-fits`` holds the machine
    for it: from then on nothing else starts until it fits the free processors and the
    headroom, and it starts at the first pass where it does (then the knapsack goes on
    with what is left); ``reserve`` holds it too, but lets window jobs start meanwhile
    when they fit now and end, by their estimates, before it would fit (once enough
    running jobs, counted as in the headroom, have ended by their estimates; if it fits
    only on an idle machine, once all have; ``backfill: queue`` lets any waiting job do
    so, ``easy`` also one that leaves the held job its processors and headroom when it
    would fit, as EASY's backfilling does). Either way, like in every power-aware policy
    here, a job starts anyway when nothing runs (see :func:`force_if_idle`; the held job
    first), so a cap that no job fits under cannot stop the log.

    [choice] The held job is marked by its window entry time set to ``-inf`` (it comes
    before every job that entered a window), so the mark lives in the power state and
    snapshots carry it. At most one job is held at a time."""

    window: int = 20
    order: str = "wfp"
    stat: str = "mean"
    headroom: str = "measured"
    force: str = "reserve"
    backfill: str = "window"
    name: str = field(default="knapsack", init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.window < 1:
            raise ValueError(f"window: must be >= 1 (got {self.window})")
        if self.stat not in ("mean", "max"):
            raise ValueError(f"stat: must be mean or max (got {self.stat!r})")
        if self.headroom not in ("measured", "predicted"):
            raise ValueError(f"headroom: must be measured or predicted (got {self.headroom!r})")
        if self.force not in FORCE:
            raise ValueError(f"force: must be one of {', '.join(FORCE)} (got {self.force!r})")
        if self.backfill not in BACKFILL_CODES:
            raise ValueError(f"backfill: must be one of {', '.join(BACKFILL_CODES)} "
                             f"(got {self.backfill!r})")
        if self.backfill != "window" and self.force != "reserve":
            raise ValueError(f"backfill: {self.backfill} acts only while force: reserve "
                             f"holds the machine for a job (got force: {self.force})")
        # the key of the pass's arrays on the state (the same for every window, order
        # and force, so a controller changing those keeps them)
        object.__setattr__(self, "_cache_key", ("knapsack", self.stat, repr(self.predictor)))

    def schedule(self, state: "SimState") -> None:
        """One pass: :func:`olsctl.policies.power.kernels.knapsack_pass` (compiled) over
        the run's jobs as arrays (:class:`_PassArrays`, kept between passes)."""
        self._check(state)
        if state.busy_procs >= state.active_procs or not state.queue:
            return  # nothing can start (a job enters the window at a pass that can)
        p, queue, running = state.power, state.queue, state.running
        key = self._cache_key
        a = state.cache.get(key)
        if a is None or a.procs.size != len(state.procs):
            a = state.cache[key] = _PassArrays(state, self._predictor, self.stat)
        a.update(state, self._predictor, self.stat)
        nr, nq = len(running), len(queue)
        waiting, m = a.waiting, a.n_waiting
        if m and (nq < m or queue[m - 1] != a.last_waiting):
            m = 0  # (the queue lost a job another way since: read again whole)
        if nq > m:  # the jobs come since the last pass
            waiting[m:nq] = queue[m:] if m else queue
        rows = a.rows  # (with room for the jobs the pass starts)
        if a.rows_at != (len(state.start_order), state.finishes) or len(rows) < nr + nq:
            if len(rows) < nr + nq:
                rows = a.rows = np.empty((2 * (nr + nq), 2))
            rows[:nr] = np.fromiter(chain.from_iterable(running), float,
                                    2 * nr).reshape(nr, 2)
        metered = state.limit is not None
        # (under a limit, what each job draws as it holds it)
        run_w = state.limit.levels(a.procs.size) if metered else a.run_w
        ns, nm, a.n_kept, m = compiled().main_pass(
            state.now_s, state.active_procs, state.busy_procs, waiting, nq, a.procs, a.est,
            a.submit, a.start, rows, nr, run_w, metered, a.began, a.runtime, a.ph_off,
            a.ph_start, a.ph_w, a.juser, a.gpred, a.entry, a.seen, a.kint, a.kflt,
            self.window, FORCE_CODES[self.force], BACKFILL_CODES[self.backfill],
            self.headroom == "predicted", state.total_procs, float(p.idle_w),
            float(p.sleep_w), float(p.cap_now(state)), a.started, ORDER_CODES[self.order],
            a.kept, a.n_kept, a.listed, a.rank, a.key, a.order, a.marked, a.marked_at)
        a.n_waiting = m
        a.last_waiting = int(waiting[m - 1]) if m else -1
        # the window entries the pass marked (among the first window + ns in its order)
        window_entry = p.window_entry
        for j, t in zip(a.marked[:nm].tolist(), a.marked_at[:nm].tolist()):
            window_entry[j] = t
        for j in a.started[:ns].tolist():
            state.start(j)
        # (the pass put its starts into the rows as the state into its running jobs:
        # they stand for them until a job ends or another pass starts one)
        a.rows_at = (len(state.start_order), state.finishes)
        p.forced_starts += int(a.kint[K_FORCED])

    def settings(self) -> dict:
        return {"name": self.name, "window": self.window, "order": self.order,
                "stat": self.stat, "headroom": self.headroom, "force": self.force,
                "backfill": self.backfill, "predictor": self.predictor}


class _PassArrays:
    """The arrays the knapsack's pass reads in the main simulator, by job (made once per
    run): the jobs' columns, their window entries (mirroring ``PowerState.window_entry``,
    which only the pass changes), scratch for the start times and the running jobs'
    power, and the predictions as groups: under the history predictor a group is a user,
    predicted again when one of its jobs has ended; under the oracle and the naive
    predictor a job, predicted once; under any other, a job, predicted at each pass."""

    def __init__(self, state: "SimState", predictor, stat: str) -> None:
        p = state.power
        n = len(state.procs)
        self.procs = np.array(state.procs, dtype=np.int64)
        self.est = np.array(state.estimate_s, dtype=float)
        self.submit = np.array(state.submit_s, dtype=float)
        self.runtime = np.array(state.runtime_s, dtype=float)
        self.start = np.full(n, np.nan)
        #: each job's start as the state has it, kept up to the state's starts
        #: (``n_starts`` of ``state.start_order``) at each pass
        self.began = np.array(state.start_s, dtype=float)
        self.n_starts = len(state.start_order)
        self.run_w = np.zeros(n)
        self.kint = np.zeros(N_KINT, dtype=np.int64)
        self.kflt = np.zeros(N_KFLT)
        self.started = np.empty(n, dtype=np.int64)
        self.entry = np.array(p.window_entry, dtype=float)
        self.seen = self.entry.copy()  # (the entries as the power state has them)
        # (the power state's own, which its snapshots pick from too)
        self.ph_off, self.ph_start, self.ph_w = (p.flat() if len(p.phase_start) == n
                                                 else flat_phases(p, n))
        self.by_user = isinstance(predictor, History)
        self.fixed = isinstance(predictor, (Oracle, Naive))
        if self.by_user:
            group: dict[int, int] = {}
            first: list[int] = []
            for j, u in enumerate(p.user):
                if u not in group:
                    group[u] = len(first)
                    first.append(j)
            self.juser = np.array([group[u] for u in p.user], dtype=np.int64)
            self.gpred = np.array([predictor.predict(state, j, stat) for j in first],
                                  dtype=float)
        else:
            self.juser = np.arange(n, dtype=np.int64)
            self.gpred = np.array([predictor.predict(state, j, stat) for j in range(n)],
                                  dtype=float) if self.fixed else np.zeros(n)
        #: the state's ends (``state.end_order``) read so far
        self.n_ends = len(state.end_order)
        #: in WFP order: the waiting jobs in the last pass's order (``kept[:n_kept]``),
        #: whether each job is among them, each waiting job's rank in the queue and room
        #: for its key; in another order, room for it
        self.kept = np.empty(n, dtype=np.int64)
        self.n_kept = 0
        self.listed = np.zeros(n, dtype=np.bool_)
        self.rank = np.zeros(n, dtype=np.int64)
        self.key = np.zeros(n)
        self.order = np.empty(n, dtype=np.int64)
        #: the queue as the last pass left it (``waiting[:n_waiting]``: jobs join its
        #: end and leave it only by the pass's starts) and its last job
        self.waiting = np.empty(n, dtype=np.int64)
        self.n_waiting = 0
        self.last_waiting = -1
        #: the running jobs as (expected end, job) rows in the state's order, as they
        #: were when the state had made ``rows_at`` = (starts, finishes)
        self.rows = np.empty((0, 2))
        self.rows_at = (-1, -1)
        #: the jobs whose window entries a pass may have marked, and those entries
        self.marked = np.empty(n, dtype=np.int64)
        self.marked_at = np.empty(n)

    def update(self, state: "SimState", predictor, stat: str) -> None:
        """The starts since the last pass, and the predictions as they are now: the users
        of the jobs ended since the last pass (history), or every job in the system (a
        predictor that learns otherwise)."""
        order = state.start_order
        if len(order) != self.n_starts:
            began, start_s = self.began, state.start_s
            for j in order[self.n_starts:]:
                began[j] = start_s[j]
            self.n_starts = len(order)
        ended = state.end_order
        n_ends, self.n_ends = self.n_ends, len(ended)
        if self.fixed:
            return
        predict = predictor.predict
        if self.by_user:
            gpred, juser = self.gpred, self.juser
            for j in ended[n_ends:]:
                gpred[juser[j]] = predict(state, j, stat)
            return
        gpred = self.gpred
        for _, j in state.running:
            gpred[j] = predict(state, j, stat)
        for j in state.queue:
            gpred[j] = predict(state, j, stat)


@dataclass(frozen=True)
class GreedyKnapsack(_PowerPolicy):
    """Carastan-Santos et al.: waiting jobs in descending profit / predicted power
    increase (profit = wait, or stretch = (wait + estimate) / estimate); each job that
    fits the free processors and the headroom starts."""

    profit: str = "wait"
    name: str = field(default="greedy-knapsack", init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.profit not in ("wait", "stretch"):
            raise ValueError(f"profit: must be wait or stretch (got {self.profit!r})")

    def schedule(self, state: "SimState") -> None:
        self._check(state)
        room = state.power.headroom_w(state)
        free = state.active_procs - state.busy_procs
        now, submit, est = state.now_s, state.submit_s, state.estimate_s
        keyed = []
        for pos, j in enumerate(state.queue):
            wait = now - submit[j]
            gain = wait if self.profit == "wait" else (wait + est[j]) / est[j]
            weight = _increase(state, self._predictor, j)
            ratio = gain / weight if weight > 0 else float("inf")
            keyed.append((-ratio, pos, j, weight))
        keyed.sort()
        for _, _, j, weight in keyed:
            if state.procs[j] <= free and weight <= room:
                state.start(j)
                free -= state.procs[j]
                room -= weight
        force_if_idle(state, [j for _, _, j, _ in keyed])

    def settings(self) -> dict:
        return {"name": self.name, "profit": self.profit, "predictor": self.predictor}
