"""Search strategies: which candidates a tick runs what-ifs for, and the choice among them.

Here belong the strategies, registered by name in :data:`STRATEGIES` (the names
``controller.search`` accepts), the rule that picks the winner (:func:`choose`) and the
finishing of the closest candidate when none meets the SLA (:func:`_complete_closest`).
A strategy is a plain function of a :class:`SearchContext` returning the trials to log,
in the candidates' order; a new one is one function plus one line in the registry. A
strategy may run fewer what-ifs than ``grid`` but must choose as it would, given that a
larger setting never hurts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from olsctl.controller.forecast import FLOOR_PARTS, floor_basis, forecast_floor
from olsctl.controller.trials import INF, Candidate, Trial, WhatIfTask, known_costs, weighted_cost
from olsctl.policies.core.score import closest_pick

if TYPE_CHECKING:
    from olsctl.controller.dispatch import Dispatcher

#: cost parts a ``cheapest-first`` search can rank candidates by before running them
KNOWN_COSTS = ("active_procs", "power_cap")


@dataclass(frozen=True)
class SearchContext:
    """What a strategy works with in one tick: the ``dispatcher`` that runs (and counts)
    what-ifs, the ``task`` (snapshot and settings shipped with every what-if), the
    ``candidates`` in the settings' order, the number of ``waiting`` jobs (the pool is
    used only with enough of them), and the SLA the trials must meet (``sla_metric`` <=
    ``limit``: the SLA's own limit, or the one SLA feedback set for this tick)."""

    dispatcher: Dispatcher
    task: WhatIfTask
    candidates: list[Candidate]
    waiting: int
    sla_metric: str
    limit: float

    def evaluate(self, cands: list[Candidate], pool: bool | None = None) -> list[Trial]:
        """The trials of ``cands``, in order (see :meth:`Dispatcher.evaluate`)."""
        return self.dispatcher.evaluate(self.task, cands, self.waiting, pool)

    def meets(self, trial: Trial) -> bool:
        return trial.metric(self.sla_metric) <= self.limit


def grid_search(ctx: SearchContext) -> list[Trial]:
    """Every candidate."""
    return ctx.evaluate(ctx.candidates)


def bisect_search(ctx: SearchContext) -> list[Trial]:
    """Bisection along the first setting with several values (active processors, else
    the cap, else the window): per combination of the others, the smallest value meeting
    the SLA, assuming a larger one never hurts; all combinations advance together, one
    probe each per round. Stops at the first round with a failed what-if."""
    cands = ctx.candidates
    axis = next((k for k in range(3) if len({_axes(c)[k] for c in cands}) > 1), 0)
    groups: dict[tuple, list[Candidate]] = {}
    for c in sorted(cands, key=lambda c: _axes(c)[axis]):
        key = tuple(v for k, v in enumerate(_axes(c)) if k != axis) + (c.params,)
        groups.setdefault(key, []).append(c)
    bounds = {k: [0, len(g)] for k, g in groups.items()}
    done: dict[Candidate, Trial] = {}
    while True:
        probes = []
        for k, (lo, hi) in bounds.items():
            if lo < hi:
                probes.append(groups[k][(lo + hi) // 2])
        if not probes:
            break
        for t in ctx.evaluate(probes):
            done[t.candidate] = t
            if t.error is not None:
                return [done[c] for c in cands if c in done]
        for k, b in bounds.items():
            lo, hi = b
            if lo < hi:
                mid = (lo + hi) // 2
                if ctx.meets(done[groups[k][mid]]):
                    b[1] = mid
                else:
                    b[0] = mid + 1
    return [done[c] for c in cands if c in done]


def cheapest_first_search(ctx: SearchContext) -> list[Trial]:
    """The candidates from the cheapest up (by the cost known before the what-if,
    ties as :func:`choose` breaks them), in rounds (one candidate in this process, or
    one per worker when the pool pays), until one meets the SLA: every cheaper one was
    tried and missed, so it is the one ``grid`` would choose; when none meets, all were
    tried, as with ``grid``. Trials after the first that meets are dropped, so the log
    does not depend on the workers. Once a round would run in this process, the rest
    run there one after the other, in one call (:meth:`Dispatcher.until_met`)."""
    task, cands, dispatcher = ctx.task, ctx.candidates, ctx.dispatcher
    order = _cheapest_first(task, cands)
    workers = dispatcher.workers(ctx.waiting)
    kept: set[Candidate] = set()
    done: dict[Candidate, Trial] = {}
    i = 0
    while i < len(order):
        # a round: the next candidate in this process, or the next ones side by side
        # on the workers when that is expected to pay (decided again every round)
        width = min(workers, len(order) - i)
        pool = width > 1 and dispatcher.pool_pays(task, width, width)
        if not pool:  # here, one at a time to the first that meets: in one call
            # (which, for the whole list, also finishes the closest when none meets)
            rest = dispatcher.until_met(task, order[i:] if i else order, ctx.sla_metric,
                                        ctx.limit, then_closest=i == 0)
            if i == 0 and order == cands:  # (the same objects) already in their order
                return rest
            done.update((t.candidate, t) for t in rest)
            return [done[c] for c in cands if c in done]
        batch = order[i:i + width]
        i += len(batch)
        done.update(zip(batch, ctx.evaluate(batch, pool)))
        for c in batch:
            kept.add(c)
            if done[c].error is not None or ctx.meets(done[c]):
                dispatcher.whatifs -= len(done) - len(kept)  # count only what is logged
                return [done[c] for c in cands if c in kept]
    return [done[c] for c in cands]


#: the last order of :func:`_cheapest_first`: (key, order)
_ORDER: list = [None, None]


def _cheapest_first(task: WhatIfTask, cands: list[Candidate]) -> list[Candidate]:
    """``cands`` from the cheapest up by the cost known before their what-ifs, ties as
    :func:`choose` breaks them. That cost depends on the candidates, the weights and,
    with power, the cap in force alone (:func:`known_costs`), so the order of the last
    tick serves again while they are the same."""
    snap = task.snapshot
    key = (task.cost, tuple(cands),
           None if snap.power is None else snap.power.cap.cap_at(snap.now_s))
    if _ORDER[0] == key:
        return _ORDER[1]

    def rank(c: Candidate) -> tuple:
        return (weighted_cost(task.cost, known_costs(task, c)), *_bigger_first(c))

    order = sorted(cands, key=rank)
    _ORDER[:] = [key, order]
    return order


def bound_first_search(ctx: SearchContext) -> list[Trial]:
    """Branch and bound: the candidates from the lowest floor of their cost up (a lower
    bound known before the what-if, :func:`cost_floors`; ties as :func:`choose` breaks
    them, then the candidates' order), until the best trial meeting the SLA so far
    comes before the next candidate's floor. Runs of candidates before the first that
    meets go in one call (:meth:`Dispatcher.until_met`); with the pool, rounds as
    ``cheapest-first`` runs them, and trials past the stop are dropped, so the log does
    not depend on the workers.

    Why it chooses what ``grid`` chooses. Among the trials meeting the SLA,
    :func:`choose` takes the least (cost, :func:`_bigger_first`, place in the
    candidates' order), whatever others are in the list. A candidate's floor key (its
    floor, then the same tie order and place) is never above its trial's key, as the
    floor is never above the cost. The search stops only when the best key found is
    below the floor key of the next candidate in floor order, hence below the key of
    every candidate not run: none of them could be chosen, so the best found is
    ``grid``'s choice, and ``choose`` over the trials run picks it. When none meets
    the SLA every candidate has run, and the tick finishes the closest over the same
    trials as under ``grid``. When a floor or a cost meeting the SLA is NaN (no order
    to trust), or a what-if fails, it runs the rest: the trials are ``grid``'s."""
    task, cands, dispatcher = ctx.task, ctx.candidates, ctx.dispatcher
    floors = cost_floors(task, cands)
    if any(f != f for f in floors):
        return ctx.evaluate(cands)
    rank = [(f, *_bigger_first(c), k) for k, (c, f) in enumerate(zip(cands, floors))]
    order = sorted(range(len(cands)), key=rank.__getitem__)
    workers = dispatcher.workers(ctx.waiting)
    done: dict[int, Trial] = {}
    best: tuple | None = None  # the least key (cost, tie order, place) meeting the SLA
    i = 0
    while i < len(order) and (best is None or not best < rank[order[i]]):
        width = min(workers, len(order) - i)
        if width > 1 and dispatcher.pool_pays(task, width, width):
            trials = ctx.evaluate([cands[k] for k in order[i:i + width]], True)
        elif best is None:  # every one up to the first that meets must run: one call
            trials = dispatcher.until_met(task, [cands[k] for k in order[i:]],
                                          ctx.sla_metric, ctx.limit, then_closest=i == 0)
        else:
            trials = ctx.evaluate([cands[order[i]]], False)
        for n, t in enumerate(trials):
            k = order[i]
            if best is not None and best < rank[k]:
                dispatcher.whatifs -= len(trials) - n  # count only what is logged
                break
            done[k] = t
            i += 1
            met = ctx.meets(t)
            if t.error is not None or (met and t.cost != t.cost):
                done.update((order[i + m], u) for m, u in enumerate(trials[n + 1:]))
                return _run_the_rest(ctx, done)
            if met and (best is None or (t.cost, *rank[k][1:]) < best):
                best = (t.cost, *rank[k][1:])
    return [done[k] for k in sorted(done)]


def _run_the_rest(ctx: SearchContext, done: dict[int, Trial]) -> list[Trial]:
    """Every candidate's trial, in order: those in ``done`` (by place) and the rest run."""
    rest = [k for k in range(len(ctx.candidates)) if k not in done]
    done.update(zip(rest, ctx.evaluate([ctx.candidates[k] for k in rest])))
    return [done[k] for k in range(len(ctx.candidates))]


def cost_floors(task: WhatIfTask, cands: list[Candidate]) -> list[float]:
    """Per candidate, a lower bound of its trial's cost known before its what-if: the
    weighted sum (as :func:`weighted_cost` adds it, each weight >= 0) of the parts
    known then (:func:`known_costs`), and with power the floors of ``energy``,
    ``peak_power`` and ``idle_energy`` the cost weighs
    (:func:`olsctl.controller.forecast.forecast_floor`, once per active count: the
    floors depend on nothing else of a candidate); a part with no floor counts as -inf
    (such candidates run first). Only a trial meeting the SLA
    needs the bound: it ran to the end, with its forecast."""
    snap = task.snapshot
    wanted = tuple(name for name in FLOOR_PARTS if any(n == name for n, _ in task.cost))
    basis = None if snap.power is None or not wanted else floor_basis(snap, task)
    floors: dict[int, dict[str, float]] = {}  # by active count: all a floor depends on
    out = []
    for c in cands:
        parts = known_costs(task, c)
        if basis is not None:
            got = floors.get(c.active_procs)
            if got is None:
                got = floors[c.active_procs] = forecast_floor(basis, snap, task,
                                                              c.active_procs, wanted)
            parts.update(got)
        out.append(float(sum(w * parts.get(name, -INF) for name, w in task.cost)))
    return out


#: the search strategies by name (``controller.search``); the first is the default
STRATEGIES: dict[str, Callable[[SearchContext], list[Trial]]] = {
    "grid": grid_search,
    "bisect": bisect_search,
    "cheapest-first": cheapest_first_search,
    "bound-first": bound_first_search,
}


def _complete_closest(ctx: SearchContext, trials: list[Trial]) -> list[Trial]:
    """No candidate meets the SLA, so the closest wins: what-ifs cut short hold only a
    lower bound, so each one that could still be the closest goes on (from where it
    stopped when it ran in this process, else from the start), from the lowest bound
    up, until the complete ones settle it (the choice is then the one a run without
    cut-offs makes). It is cut short again once it surely scores worse than the best
    complete one so far; ``best`` only falls, so it never goes on again, and in this
    process each what-if of the tick runs at most once from its start, in pieces. The
    bounds of the what-ifs cut short at the SLA are nearly equal, so the larger machine
    (the tie order), usually the closest, tends to go first. Raises RuntimeError when
    such a what-if fails."""
    metric = ctx.sla_metric
    trials = list(trials)
    first = True
    while True:
        i, best = _closest_next(trials, metric)
        if i < 0:
            return trials
        if first:  # all in one compiled call, when the what-ifs allow it
            fast = ctx.dispatcher.closest_here(trials, metric)
            if fast is not None:
                return fast
            first = False
        # a run that surely scores worse than the best complete one cannot be the
        # closest: it is cut short again, with a bound above that one
        stop = None if best == INF else (metric, best)
        trials[i] = ctx.dispatcher.go_on(ctx.task, trials[i].candidate, stop, ctx.waiting)
        if trials[i].error is not None:
            raise RuntimeError(trials[i].error)


def _closest_next(trials: Sequence[Trial], metric: str) -> tuple[int, float]:
    """The closest search's next step over ``trials``, by the one rule the compiled
    batches take too (:func:`olsctl.policies.core.score.closest_pick`): (the trial cut
    short to go on, -1 when none could still be the closest; the best complete trial's
    ``metric``, INF when none is complete)."""
    done = np.array([t.complete for t in trials], dtype=np.bool_)
    value = np.array([t.metric(metric) for t in trials], dtype=float)
    active = np.array([t.active_procs for t in trials], dtype=np.int64)
    pick, best = closest_pick(done, value, active)
    return int(pick), float(best)


def settled(trials: Sequence[Trial], metric: str) -> bool:
    """Whether :func:`_complete_closest` has nothing to finish in ``trials``."""
    return _closest_next(trials, metric)[0] < 0


def _bigger_first(c: Candidate) -> tuple:
    """Tie order among candidates: the larger machine, then the higher cap, the larger
    window and the larger tuned settings first."""
    return (-c.active_procs, -(INF if c.cap_w is None else c.cap_w),
            -(0 if c.window is None else c.window),
            tuple(-v if isinstance(v, (int, float)) else 0 for _, v in c.params))


def choose(trials: Sequence[Trial], metric: str, limit: float) -> tuple[Trial, str, bool]:
    """The cheapest trial meeting ``metric <= limit`` (ties: larger machine, then higher
    cap, larger window), else the one closest to it (same ties). Returns (trial, reason,
    SLA met)."""
    values = [t.metric(metric) for t in trials]
    ok = [t for t, v in zip(trials, values) if v <= limit]
    if ok:
        return _least(ok, [t.cost for t in ok]), "cheapest meeting the SLA", True
    return (_least(trials, values), "no candidate meets the SLA: closest to it", False)


def _least(trials: Sequence[Trial], keys: list[float]) -> Trial:
    """The trial with the least key, ties by :func:`_bigger_first` (then the first):
    ``min`` over (key, tie order), with the tie order made only for the tied ones."""
    least = min(keys)
    if least != least or any(k != k for k in keys):  # NaN: every key in full
        return min(zip(keys, trials), key=lambda kt: (kt[0], *_bigger_first(kt[1].candidate)))[1]
    tied = [t for t, k in zip(trials, keys) if k == least]
    return tied[0] if len(tied) == 1 else min(tied, key=lambda t: _bigger_first(t.candidate))


def _axes(c: Candidate) -> tuple:
    """A candidate's searchable settings: (active processors, cap, window)."""
    return (c.active_procs, -INF if c.cap_w is None else c.cap_w,
            0 if c.window is None else c.window)
