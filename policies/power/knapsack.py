"""The knapsack policies under a power cap: Wallace et al.'s window 0-1 knapsack and the
greedy knapsack by profit per predicted power increase.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING

import numpy as np

from olsctl.policies.power.capping import FORCE, _PowerPolicy, _increase, force_if_idle

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
        self._check(state)
        if state.busy_procs >= state.active_procs or not state.queue:
            return  # nothing can start (a job enters the window at a pass that can)
        p = state.power
        if self.headroom == "predicted":
            room = p.headroom_w(state, self._predictor, self.stat)
        else:
            room = p.headroom_w(state)
        ordered = self._order(state, state.queue)
        started: set[int] = set()
        until = None  # reserve: the held job is waiting; others must end by ``until``
        if self.force != "now":
            held = _held(p.window_entry, ordered, self.window)
            if held is not None:
                rise = _increase(state, self._predictor, held, self.stat)
                if (state.procs[held] > state.active_procs - state.busy_procs
                        or rise > room):
                    if self.force == "when-fits" or not state.running:
                        force_if_idle(state, [held] + [j for j in ordered if j != held])
                        return  # nothing else starts before the held job
                    until = self._fits_at(state, held, rise, room)
                else:
                    state.start(held)
                    started.add(held)
                    room -= rise
        while True:
            free = state.active_procs - state.busy_procs
            if free <= 0:
                return
            window = []
            for j in ordered:
                if j not in started:
                    window.append(j)
                    if len(window) == self.window:
                        break
            if not window:
                return
            entry = p.window_entry
            for j in window:
                if entry[j] != entry[j]:  # NaN: entering now
                    entry[j] = state.now_s
            if until is None:
                chosen = self._knapsack(state, window, free, room)
            else:
                now, est = state.now_s, state.estimate_s
                chosen = self._knapsack(state, [j for j in window if j != held
                                                and now + est[j] <= until], free, room)
            if not chosen:
                if until is not None or (len(window) < self.window
                                         and (state.running or state.started)):
                    return
                by_entry = [window[i] for i in sorted(range(len(window)),
                                                       key=lambda i: (entry[window[i]], i))]
                if len(window) == self.window and self.force != "now":
                    entry[by_entry[0]] = -math.inf  # held: waits for room, then starts
                elif len(window) == self.window and state.procs[by_entry[0]] <= free:
                    state.start(by_entry[0])  # at most one forced start a pass
                    p.forced_starts += 1
                    return
                force_if_idle(state, by_entry)
                return
            for j in chosen:
                state.start(j)
                started.add(j)
                room -= _increase(state, self._predictor, j, self.stat)

    def _fits_at(self, state: "SimState", held: int, rise: float, room: float) -> float:
        """Expected time (by the running jobs' estimates) at which the held job would fit
        the processors and the headroom, each running job leaving what the headroom
        counted for it; the last expected end if it fits only on an idle machine."""
        p, procs = state.power, state.procs
        free = state.active_procs - state.busy_procs
        for end, j in state.running:
            w = p.job_power_now(state, j)
            if self.headroom == "predicted":
                w = max(w, self._predictor.predict(state, j, self.stat))
            free += procs[j]
            room += procs[j] * (w - p.idle_w)
            if free >= procs[held] and room >= rise:
                return end
        return state.running[-1][0]

    def _knapsack(self, state: "SimState", window: list[int], free: int,
                  room: float) -> list[int]:
        """Jobs of ``window`` with the most processors whose predicted increases sum to at
        most ``room``; ties keep earlier jobs."""
        items = [(j, state.procs[j], _increase(state, self._predictor, j, self.stat))
                 for j in window if state.procs[j] <= free]
        if not items or all(0 <= w > room for _, _, w in items):
            return []  # every job alone is over the headroom: only the empty set fits
        if (sum(n for _, n, _ in items) <= free
                and sum(w for _, _, w in items) <= room):
            return [j for j, _, _ in items]  # all of them fit: the most processors
        best = np.full(free + 1, np.inf)
        best[0] = 0.0
        took = np.zeros((len(items), free + 1), dtype=bool)
        for i, (_, n, w) in enumerate(items):
            cand = best[:free + 1 - n] + w
            better = cand < best[n:]
            best[n:] = np.where(better, cand, best[n:])
            took[i, n:] = better
        fits = np.flatnonzero(best <= room)
        size = int(fits.max()) if fits.size else 0
        chosen = []
        for i in range(len(items) - 1, -1, -1):
            if size == 0:
                break
            if took[i, size]:
                chosen.append(items[i][0])
                size -= items[i][1]
        return chosen[::-1]

    def settings(self) -> dict:
        return {"name": self.name, "window": self.window, "order": self.order,
                "stat": self.stat, "headroom": self.headroom, "force": self.force,
                "predictor": self.predictor}


def _held(entry: list[float], ordered: list[int], window: int) -> int | None:
    """The waiting job the knapsack holds the machine for (window entry ``-inf``), or
    None. It is usually in the window (under FCFS it is the head), so look there first."""
    for j in ordered[:window]:
        if entry[j] == -math.inf:
            return j
    rest = ordered[window:]
    if len(rest) > 1 and -math.inf not in itemgetter(*rest)(entry):
        return None  # the usual case when nothing is held: one pass at C speed
    for j in rest:
        if entry[j] == -math.inf:
            return j
    return None


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
