"""Power-aware policies: naive capping, Wallace's window knapsack, a greedy knapsack,
and EASY with a power verification method (Carastan-Santos et al.).

All need a run with power (``state.power``). The cap is kept on the machine's measured
power: starting ``n`` processors predicted at ``p`` W each adds ``n x (p - idle_w)``
(an idle processor already drew ``idle_w``), and a pass may add at most the headroom,
cap in force minus measured power. Predictions come from a pluggable predictor
(:mod:`olsctl.power.predict`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from olsctl.policies.base import PolicyBase
from olsctl.policies.verify import VERIFY
from olsctl.policies.backfill import CountResources, backfill_pass
from olsctl.policies.order import ORDERS, Order
from olsctl.power.predict import make_predictor

if TYPE_CHECKING:
    from olsctl.state import SimState

#: what the window knapsack does when its window is full and nothing fits
FORCE = ("now", "when-fits", "reserve")


def force_if_idle(state: "SimState", ordered: list[int]) -> None:
    """[choice] When nothing runs and nothing started in this pass, the first waiting job
    that has the processors starts anyway (a forced start): an idle machine frees no
    power by waiting, so the job would otherwise wait for ever."""
    if state.running or state.started:
        return
    free = state.active_procs - state.busy_procs
    for j in ordered:
        if state.procs[j] <= free:
            state.start(j)
            state.power.forced_starts += 1
            return


def _increase(state: "SimState", predictor, j: int, stat: str = "mean") -> float:
    """Predicted rise of machine power if job ``j`` starts on idle processors."""
    return state.procs[j] * (predictor.predict(state, j, stat) - state.power.idle_w)


@dataclass(frozen=True)
class _PowerPolicy(PolicyBase):
    predictor: Any = "oracle"
    order: str = "fcfs"
    _order: Order = field(init=False, repr=False, compare=False)
    _predictor: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_order", ORDERS[self.order])
        object.__setattr__(self, "_predictor", make_predictor(self.predictor))

    def _check(self, state: "SimState") -> None:
        if state.power is None:
            raise ValueError(f"policy {self.name} needs power: add a power section")


@dataclass(frozen=True)
class NaiveCapping(_PowerPolicy):
    """FCFS, one job at a time, assuming every processor draws its peak; stops at the
    first job that does not fit (Wallace et al.'s baseline)."""

    name: str = field(default="naive-cap", init=False)

    def schedule(self, state: "SimState") -> None:
        self._check(state)
        p = state.power
        free = state.active_procs - state.busy_procs
        room = p.headroom_w(state)
        ordered = self._order(state, state.queue)
        for j in ordered:
            need = state.procs[j] * (p.peak_w - p.idle_w)
            if state.procs[j] > free or need > room:
                break
            state.start(j)
            free -= state.procs[j]
            room -= need
        force_if_idle(state, ordered)

    def settings(self) -> dict:
        return {"name": self.name, "order": self.order}


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
    stat: str = "mean"
    headroom: str = "measured"
    force: str = "now"
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


class PowerCountResources(CountResources):
    """EASY's fit test plus the policy's power verification (:data:`VERIFY`) of the
    running jobs and the candidate against the cap in force."""

    __slots__ = ("predict", "predictor", "sigma", "sum_w", "sum_var", "base_w", "cap_w")

    def __init__(self, state: "SimState", policy: "PowerEasy") -> None:
        super().__init__(state)
        self.predict = VERIFY[policy.verify]
        self.predictor = policy._predictor
        self.sigma = policy.sigma
        p = state.power
        self.sum_w = self.sum_var = 0.0
        for _, j in state.running:
            m, sd = self.predict(state, self.predictor, j)
            self.sum_w += m
            if sd is not None:
                self.sum_var += sd * sd
        busy, active = state.busy_procs, state.active_procs
        sleeping = state.total_procs - (active if active > busy else busy)
        self.base_w = p.sleep_w * sleeping
        self.cap_w = p.cap_now(state)

    def try_start(self, j: int) -> bool:
        st = self.state
        m, sd = self.predict(st, self.predictor, j)
        var = self.sum_var if sd is None else self.sum_var + sd * sd
        idle = st.active_procs - st.busy_procs - st.procs[j]
        margin = 0.0 if sd is None else self.sigma * math.sqrt(var)
        total = (self.sum_w + m + margin
                 + st.power.idle_w * (idle if idle > 0 else 0) + self.base_w)
        if total > self.cap_w:
            return False
        if not super().try_start(j):
            return False
        self.sum_w += m
        self.sum_var = var
        return True


@dataclass(frozen=True)
class PowerEasy(_PowerPolicy):
    """EASY backfilling (FCFS or SAF) where a job also has to pass a power verification
    of the predicted power of it and the running jobs against the cap."""

    verify: str = "gaussian"
    sigma: float = 3.0
    name: str = field(default="easy-power", init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.verify not in VERIFY:
            raise ValueError(f"verify: must be one of {', '.join(VERIFY)} (got {self.verify!r})")
        if self.sigma < 0:
            raise ValueError(f"sigma: must be >= 0 (got {self.sigma})")

    def schedule(self, state: "SimState") -> None:
        self._check(state)
        if state.busy_procs >= state.active_procs or not state.queue:
            return
        ordered = self._order(state, state.queue)
        backfill_pass(state, ordered, PowerCountResources(state, self))
        force_if_idle(state, ordered)

    def settings(self) -> dict:
        return {"name": self.name, "order": self.order, "verify": self.verify,
                "sigma": self.sigma, "predictor": self.predictor}
