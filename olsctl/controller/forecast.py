"""The power forecast of a what-if: the machine's energy, mean and peak power over the
coming interval, from the start times the what-if gave (used by trial scoring for power
costs and to tell a cap that could not be kept), and floors under the energy and the
peak known before the what-if runs (:func:`forecast_floor`, for searches that rank
candidates by a lower bound of their cost).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from olsctl.policies.core.jit import compiled, kernel, warm_up
from olsctl.policies.core.score import N_ROW, score_columns

if TYPE_CHECKING:
    from olsctl.state import SimState, Snapshot


class ForecastSpan(Protocol):
    """What a forecast needs of a what-if's task
    (:class:`olsctl.controller.scoring.WhatIfTask` is one)."""

    #: how far ahead the forecast looks, s
    power_s: float
    #: energy to wake one sleeping processor, J
    wake_energy_j: float


def power_forecast(snap: Snapshot, state: SimState, task: ForecastSpan,
                   active: int) -> tuple[float, float, float, float]:
    """Energy (J), mean and peak power (W) of the machine over [now, now + power_s] in
    the what-if: for energy and mean power every job at its profile's mean power, for
    the peak at its profile's maximum (what a cap must allow for); idle active
    processors at idle power, the rest asleep, plus the wakes the candidate needs. Last,
    the idle energy (J): the part of that energy no job draws (idle and sleeping
    processors, the wakes), the part a setting can save, as a job draws the same energy
    whenever it runs. The sums are :func:`forecast_sums`'s (compiled)."""
    return forecast_of(snap, task, active, state.power,
                       np.asarray(state.procs, dtype=np.int64),
                       np.asarray(state.start_s, dtype=float),
                       np.asarray(state.runtime_s, dtype=float))


def forecast_of(snap: Snapshot, task: ForecastSpan, active: int, p, procs: np.ndarray,
                start: np.ndarray, runtime: np.ndarray) -> tuple[float, float, float, float]:
    """:func:`power_forecast` of a what-if's jobs given as columns (``p``: their power
    data; the starts so far, NaN for a job not started)."""
    mean_w, max_w = profile_columns(p)
    sums = compiled().forecast_sums(snap.now_s, snap.now_s + task.power_s, procs, start,
                                    runtime, mean_w, max_w, snap.total_procs, active,
                                    p.idle_w, p.sleep_w)
    return with_wakes(snap, task, active, *sums)


def with_wakes(snap: Snapshot, task: ForecastSpan, active: int, energy: float,
               peak: float, idle_energy: float) -> tuple[float, float, float, float]:
    """:func:`power_forecast`'s figures from :func:`forecast_sums`' (energy, peak and
    idle energy over the span): the wakes ``active`` processors need from the
    snapshot's added to the energy and the idle energy, and the mean power."""
    wakes = task.wake_energy_j * max(0, active - snap.active_procs)
    energy += wakes
    return energy, energy / task.power_s, peak, idle_energy + wakes


def profile_columns(p) -> tuple[np.ndarray, np.ndarray]:
    """The jobs' mean and maximum power of the power data ``p`` as arrays
    (:meth:`olsctl.power.runtime.PowerState.columns`)."""
    return p.columns()[:2]


@kernel
def forecast_sums(now: float, end: float, procs: np.ndarray, start: np.ndarray,
                  runtime: np.ndarray, mean_w: np.ndarray, max_w: np.ndarray, total: int,
                  active: int, idle_w: float, sleep_w: float) -> tuple:
    """The sums of :func:`power_forecast` over [``now``, ``end``]: (energy, peak power,
    idle energy), without the wakes, of the jobs with a start (not NaN) and a profile
    (the first ``len(mean_w)``) that run in the span. Each instant where jobs start or
    end changes the busy processors and the jobs' power by the sum of its changes, in
    job order (a job's start before its end)."""
    n = min(len(start), len(mean_w))
    at = np.empty(2 * n)
    change = np.empty((2 * n, 3))  # busy processors, watts, watts at the maximum
    m = 0
    for j in range(n):
        s = start[j]
        if s != s or s >= end:
            continue
        e = s + runtime[j]
        if e <= now:
            continue
        w = procs[j] * mean_w[j]
        top = procs[j] * max_w[j]
        at[m] = s if s > now else now
        change[m, 0], change[m, 1], change[m, 2] = procs[j], w, top
        m += 1
        if e < end:
            at[m] = e
            change[m, 0], change[m, 1], change[m, 2] = -procs[j], -w, -top
            m += 1
    order = np.argsort(at[:m], kind="mergesort")  # (stable: job order within an instant)
    busy = busy_w = busy_top = 0.0
    energy = idle_energy = peak = 0.0
    t_prev = now
    i = 0
    while True:
        t = at[order[i]] if i < m else end
        if t > t_prev:
            idle = active - busy if active > busy else 0.0
            asleep = total - (active if active > busy else busy)
            rest = idle_w * idle + sleep_w * asleep
            energy += (busy_w + rest) * (t - t_prev)
            idle_energy += rest * (t - t_prev)
            top = busy_top + rest
            peak = top if top > peak else peak
            t_prev = t
        if i == m:
            return energy, peak, idle_energy
        d0 = d1 = d2 = 0.0
        while i < m and at[order[i]] == t:
            k = order[i]
            d0 += change[k, 0]
            d1 += change[k, 1]
            d2 += change[k, 2]
            i += 1
        busy += d0
        busy_w += d1
        busy_top += d2


@kernel
def scored_forecast(start: np.ndarray, submit: np.ndarray, runtime: np.ndarray,
                    censor: bool, until: float, bsld_s: float, row: np.ndarray, now: float,
                    end: float, procs: np.ndarray, mean_w: np.ndarray, max_w: np.ndarray,
                    total: int, active: int, idle_w: float, sleep_w: float) -> tuple:
    """A what-if that ran to its end, scored into ``row``
    (:func:`olsctl.policies.core.score.score_columns`) and its power forecast's sums
    over [``now``, ``end``] (:func:`forecast_sums`) returned, in one call."""
    score_columns(start, submit, runtime, censor, until, bsld_s, row)
    return forecast_sums(now, end, procs, start, runtime, mean_w, max_w, total, active,
                         idle_w, sleep_w)


@warm_up
def forecast_warm_up(k) -> None:
    """Run :func:`forecast_sums`, :func:`scored_forecast` and the scores alone (compiled:
    ``k``) on a tiny what-if."""
    x = np.array([0.0, 5.0, np.nan])
    procs, runtime = np.array([1, 2, 1], dtype=np.int64), np.array([8.0, 10.0, 1.0])
    k.forecast_sums(0.0, 10.0, procs, x, runtime, np.full(3, 100.0), np.full(3, 120.0), 4,
                    3, 50.0, 5.0)
    k.scored_forecast(x, np.zeros(3), runtime, False, 10.0, 10.0, np.empty(N_ROW), 0.0,
                      10.0, procs, np.full(3, 100.0), np.full(3, 120.0), 4, 3, 50.0, 5.0)
    k.score_columns(x, np.zeros(3), runtime, True, 10.0, 10.0, np.empty(N_ROW))


#: the share of the forecast's magnitude a floor stays below it by, so that the rounding
#: of either sum (each within a few hundred ulps of the magnitude) cannot lift it above
ROUNDING_SHARE = 1e-9


@dataclass(frozen=True)
class Cheapest:
    """The processors the jobs that may start in a what-if ask for, cheapest first:
    ``power_w`` per processor ascending, ``upto`` the processors before each (one more
    entry: all of them, possibly inf) and ``upto_w`` their watts."""

    power_w: tuple[float, ...]
    upto: tuple[float, ...]
    upto_w: tuple[float, ...]

    @classmethod
    def of(cls, pairs: list[tuple[float, float]]) -> "Cheapest":
        """From (W per processor, processors) pairs."""
        pairs = sorted(pairs)
        upto, upto_w = [0.0], [0.0]
        for w, n in pairs:
            upto.append(upto[-1] + n)
            upto_w.append(upto_w[-1] + (w * n if n else 0.0))
        return cls(tuple(w for w, _ in pairs), tuple(upto), tuple(upto_w))

    def least_w(self, x: float) -> float:
        """The least watts of ``x`` of these processors (a share of a job's counts)."""
        i = bisect_right(self.upto, x) - 1
        if i >= len(self.power_w):
            return self.upto_w[-1]
        return self.upto_w[i] + ((x - self.upto[i]) * self.power_w[i] if x > self.upto[i]
                                 else 0.0)

    def below(self, w: float) -> float:
        """How many of these processors draw less than ``w`` each."""
        return self.upto[bisect_left(self.power_w, w)]


@dataclass(frozen=True)
class FloorBasis:
    """What the floors of one snapshot's candidates share (:func:`floor_basis`).

    Over [now, now + power_s], split where a running job ends: ``starts_s`` the
    segments' starts (``ends_s`` their ends), and per segment the processors the
    running jobs with power hold (``busy``) with their watts at mean (``busy_w``) and at
    maximum power (``busy_top_w``). ``mean`` and ``top``: the processors of the jobs that
    may start in the what-if (waiting ones and arrivals, with power) at their mean and
    maximum power (:class:`Cheapest`; under RMAP/PARM, which resize jobs, any number of
    processors at the least power per processor). ``slack_w`` is a magnitude of the
    forecast's watts (the whole machine at the largest per-processor power in play,
    idle and sleep included)."""

    starts_s: tuple[float, ...]
    ends_s: tuple[float, ...]
    busy: tuple[float, ...]
    busy_w: tuple[float, ...]
    busy_top_w: tuple[float, ...]
    mean: Cheapest
    top: Cheapest
    slack_w: float


def floor_basis(snap: Snapshot, task: Any) -> FloorBasis | None:
    """The :class:`FloorBasis` of a snapshot with power under ``task`` (a
    :class:`olsctl.controller.trials.WhatIfTask`: its ``power_s``, and its arrivals with
    their power); None when the snapshot's power data do not cover its jobs one to one
    (the forecast could then pair an arrival's power with another job)."""
    p = snap.power
    n = int(snap.job_id.size)
    mean_w, max_w = list(p.true_mean_w), list(p.true_max_w)
    if len(mean_w) != n or len(max_w) != n:
        return None
    now = snap.now_s
    end = now + task.power_s
    events: dict[float, list[float]] = {}
    for j in range(snap.n_running):  # (a running job started at or before now)
        s = float(snap.start_s[j])
        e = s + float(snap.runtime_s[j])
        if s != s or s >= end or e <= now:
            continue
        k = float(snap.procs[j])
        a = events.setdefault(now, [0.0, 0.0, 0.0])
        a[0] += k
        a[1] += k * mean_w[j]
        a[2] += k * max_w[j]
        if e < end:
            b = events.setdefault(e, [0.0, 0.0, 0.0])
            b[0] -= k
            b[1] -= k * mean_w[j]
            b[2] -= k * max_w[j]
    starts, busy, busy_w, busy_top = [], [], [], []
    level = [0.0, 0.0, 0.0]
    for t in sorted(set(events) | {now}):
        d = events.get(t, (0.0, 0.0, 0.0))
        level = [level[0] + d[0], level[1] + d[1], level[2] + d[2]]
        starts.append(t)
        busy.append(level[0])
        busy_w.append(level[1])
        busy_top.append(level[2])
    procs = [float(k) for k in snap.procs[snap.n_running:]]
    means, tops = mean_w[snap.n_running:], max_w[snap.n_running:]
    arrivals, arrivals_power = getattr(task, "arrivals", None), getattr(task, "arrivals_power",
                                                                        None)
    if arrivals is not None and len(arrivals) and arrivals_power is not None:
        procs += [float(k) for k in arrivals.procs]
        means += list(arrivals_power.true_mean_w)
        tops += list(arrivals_power.true_max_w)
    if snap.budget is not None:  # a job may start on more or fewer processors
        procs = [math.inf] * min(1, len(procs))
        means, tops = [min(means, default=0.0)][:len(procs)], [min(tops, default=0.0)][:len(procs)]
    watts = [abs(p.idle_w) + abs(p.sleep_w)] + [abs(v) for v in mean_w + max_w + means + tops]
    slack_w = snap.total_procs * (abs(p.idle_w) + abs(p.sleep_w) + max(watts))
    if any(v != v for v in watts):  # a NaN power: no floor (min, max and sort skip NaNs)
        slack_w = math.nan
    return FloorBasis(tuple(starts), tuple(starts[1:]) + (end,), tuple(busy), tuple(busy_w),
                      tuple(busy_top), Cheapest.of(list(zip(means, procs))),
                      Cheapest.of(list(zip(tops, procs))), slack_w)


#: the cost parts :func:`forecast_floor` gives floors of
FLOOR_PARTS = ("energy", "peak_power", "idle_energy")


def forecast_floor(basis: FloorBasis, snap: Snapshot, task: ForecastSpan, active: int,
                   parts: "tuple[str, ...] | frozenset[str]" = FLOOR_PARTS
                   ) -> dict[str, float]:
    """Floors under the energy (J), the peak power (W) and the idle energy (J) that
    :func:`power_forecast` gives (those of them named in ``parts``, by name) for a
    what-if of ``snap`` with ``active`` processors, whatever the what-if starts, known
    before it runs.

    Why they are floors. At any instant t of [now, now + power_s] the forecast's power
    is ``P(t) = W(t) + idle_w x max(A - B(t), 0) + sleep_w x (T - max(A, B(t)))``, with
    A the candidate's active processors, T the machine's, B(t) the processors busy with
    jobs that have power and W(t) their watts at mean power. Split B and W into the
    running jobs' (``B_R``, ``W_R``: their starts and ends are the snapshot's, which no
    what-if moves) and those of jobs that start in the what-if: ``x = B(t) - B_R(t)``
    processors, which draw at least ``g(x)``, the least watts of any x of the
    processors the startable jobs ask for (:meth:`Cheapest.least_w`; a job's power per
    processor may be below idle or even sleep power). So ``P(t) >= f(x) = W_R + g(x) +
    idle_w x max(A - B_R - x, 0) + sleep_w x (T - max(A, B_R + x))`` for some x in
    [0, X], X = min(T - B_R, all they ask for), as no processor is used twice. On [0,
    min(A - B_R, X)] f is convex (g's slopes rise) with slope ``w - idle_w`` at a
    processor of w watts: least where the processors below idle power run out (or at
    the end); beyond A - B_R the slope is ``w - sleep_w``: least where those below
    sleep power run out, kept within [A - B_R, X]. That least value, constant while the
    running jobs are (a segment of :class:`FloorBasis`), is under P(t) on the segment,
    and its integral is under the forecast's energy. The wakes, ``wake_energy_j x
    max(0, A - snapshot's active)``, are the forecast's own term, added exactly. The
    peak is the largest P over its segments with jobs at maximum power: at least each
    segment's floor taken with maximum powers, and at least 0. Both floors are then
    lowered by :data:`ROUNDING_SHARE` of the largest watts in play (times the span,
    for the energy), more than the rounding of either sum, so a floor computed in
    floating point stays under the forecast computed so too.

    The idle energy's floor: its power is ``idle_w x max(A - B, 0) + sleep_w x (T -
    max(A, B))``, and jobs start only on active processors, so B(t) is at most
    ``max(A, B_R(t))``; over B in [B_R, max(B_R, min(A, B_R + X))] it is linear, least
    at an end. The wakes are added exactly and the floor is lowered as the others."""
    p = snap.power
    total, idle_w, sleep_w = float(snap.total_procs), p.idle_w, p.sleep_w
    energy = idle_energy = 0.0
    peak = 0.0
    jobs = "energy" in parts or "peak_power" in parts
    idle = "idle_energy" in parts
    for t0, t1, b, w, top in zip(basis.starts_s, basis.ends_s, basis.busy, basis.busy_w,
                                 basis.busy_top_w):
        if t1 <= t0:
            continue
        if jobs:
            energy += (w + _least_rest(active, b, total, idle_w, sleep_w, basis.mean)) * \
                (t1 - t0)
            top_w = top + _least_rest(active, b, total, idle_w, sleep_w, basis.top)
            peak = top_w if top_w > peak else peak
        if idle:
            idle_energy += _least_idle(active, b, total, idle_w, sleep_w, basis.mean) * \
                (t1 - t0)
    lower = ROUNDING_SHARE * basis.slack_w * task.power_s
    wakes = task.wake_energy_j * max(0, active - snap.active_procs)
    out = {"energy": energy - lower + wakes, "peak_power": peak - ROUNDING_SHARE * basis.slack_w,
           "idle_energy": idle_energy - lower + wakes}
    return {name: out[name] for name in parts}


def _least_idle(active: int, busy: float, total: float, idle_w: float, sleep_w: float,
                cheap: Cheapest) -> float:
    """The least over x in [0, X] of the watts no job draws, ``idle_w x max(active -
    busy - x, 0) + sleep_w x (total - max(active, busy + x))``, X being what the jobs
    that may start ask for, but no more than the active processors the running jobs
    leave (a job starts only on an active processor, and a candidate's processors are
    all the what-if ever has active, those woken included): linear in x, so least at an
    end of the range."""
    most = max(0.0, min(active - busy, cheap.upto[-1]))
    best = math.inf
    for x in (0.0, most):
        v = idle_w * max(active - busy - x, 0.0) + sleep_w * (total - max(active, busy + x))
        best = v if v < best else best
    return best


def _least_rest(active: int, busy: float, total: float, idle_w: float, sleep_w: float,
                cheap: Cheapest) -> float:
    """The least over x in [0, X] of ``g(x) + idle_w x max(active - busy - x, 0) +
    sleep_w x (total - max(active, busy + x))`` (W), g being ``cheap.least_w`` and X
    what :func:`forecast_floor` says: at the minimisers it names, and at the ends."""
    def rest(x: float) -> float:
        return cheap.least_w(x) + idle_w * max(active - busy - x, 0.0) + \
            sleep_w * (total - max(active, busy + x))

    most = max(0.0, min(total - busy, cheap.upto[-1]))
    kink = min(max(active - busy, 0.0), most)
    points = {0.0, kink, most, min(kink, cheap.below(idle_w))}
    if most > kink:
        points.add(min(max(cheap.below(sleep_w), kink), most))
    return min(rest(x) for x in points)
