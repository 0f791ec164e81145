"""The knapsack policies under a power cap: Wallace et al.'s window 0-1 knapsack and the
greedy knapsack by profit per predicted power increase.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING

import numpy as np

from olsctl.policies.core.jit import compiled
from olsctl.policies.core.order import ORDER_CODES
from olsctl.policies.power.capping import FORCE, _PowerPolicy, _increase, force_if_idle
from olsctl.power.predict import History
from olsctl.policies.power.kernels import (FORCE_CODES, K_FORCE, K_FORCED, K_PREDICTED,
                                           K_TOTAL, K_WINDOW, N_KINT)

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
    only on an idle machine, once all have). Either way, like in every power-aware policy
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

    def schedule(self, state: "SimState") -> None:
        """One pass: :func:`olsctl.policies.power.kernels.knapsack_pass` (compiled) over
        the running and waiting jobs, numbered here in that order."""
        self._check(state)
        if state.busy_procs >= state.active_procs or not state.queue:
            return  # nothing can start (a job enters the window at a pass that can)
        p, queue, running = state.power, state.queue, state.running
        nr = len(running)
        jobs = [j for _, j in running] + queue
        m = len(jobs)
        pick = itemgetter(*jobs) if m > 1 else (lambda values: [values[jobs[0]]])
        rows = np.empty((m, 2))
        rows[:nr, 0] = [end for end, _ in running]
        rows[:nr, 1] = np.arange(nr)
        run_w = np.array([p.job_power_now(state, j) for _, j in running] + [0.0] * (m - nr))
        juser, gpred = self._predictions(state, jobs)
        kint = np.zeros(N_KINT, dtype=np.int64)
        kint[K_WINDOW], kint[K_FORCE] = self.window, FORCE_CODES[self.force]
        kint[K_PREDICTED], kint[K_TOTAL] = self.headroom == "predicted", state.total_procs
        kflt = np.array((p.idle_w, p.sleep_w, p.cap_now(state)))
        entry = np.array(pick(p.window_entry), dtype=float)
        started = np.empty(m, dtype=np.int64)
        k = compiled()
        procs = np.array(pick(state.procs), dtype=np.int64)
        est = np.array(pick(state.estimate_s), dtype=float)
        ordered = k.ordered_queue(ORDER_CODES[self.order], state.now_s, np.arange(nr, m),
                                  procs, est, np.array(pick(state.submit_s), dtype=float))
        ns, _ = k.knapsack_pass(state.now_s, state.active_procs, state.busy_procs, ordered,
                                m - nr, procs, est, np.full(m, np.nan), rows, nr, run_w,
                                juser, gpred, entry, kint, kflt, started)
        window_entry = p.window_entry
        for i, j in enumerate(queue, nr):
            window_entry[j] = float(entry[i])
        for i in started[:ns].tolist():
            state.start(jobs[i])
        p.forced_starts += int(kint[K_FORCED])

    def _predictions(self, state: "SimState", jobs: list[int]) -> tuple:
        """Each of ``jobs``' prediction group and each group's predicted ``stat``: under
        the history predictor a group is a user (whose jobs it predicts alike), else a
        job."""
        predict, stat = self._predictor.predict, self.stat
        if not isinstance(self._predictor, History):
            return (np.arange(len(jobs)),
                    np.array([predict(state, j, stat) for j in jobs], dtype=float))
        group: dict[int, int] = {}
        first: list[int] = []
        juser = []
        user = state.power.user
        for j in jobs:
            g = group.get(user[j])
            if g is None:
                g = group[user[j]] = len(first)
                first.append(j)
            juser.append(g)
        return (np.array(juser, dtype=np.int64),
                np.array([predict(state, j, stat) for j in first], dtype=float))

    def settings(self) -> dict:
        return {"name": self.name, "window": self.window, "order": self.order,
                "stat": self.stat, "headroom": self.headroom, "force": self.force,
                "predictor": self.predictor}


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
