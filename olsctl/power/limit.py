"""A hardware power limit under the scheduler (RAPL- or node-manager-style).

With ``power.limit: throttle`` the machine never draws more than the cap in force: when
the draw would pass it (a forced start, a job's phase rising, a start whose prediction
was too low, a scheduled cap drop), running jobs' power is lowered until the draw equals
the cap, and each throttled job's remaining work stretches by the clock model of
:mod:`olsctl.perfmodel`; when headroom returns, clocks rise again.

The clock model, per processor (W): a share ``static`` of the processor's peak power
``S = static x peak_w`` does not scale with the clock; the rest does as clock^``exponent``.
A job in a phase that draws ``d`` W uncapped, held to ``p < d``, runs at the clock
``f = ((p - S) / (d - S)) ^ (1 / exponent)``, and its time grows by ``g = 1 + kappa x
(1 / f - 1)`` (``kappa``: its compute-boundness, drawn per project as perfmodel draws it).
A phase at or below ``S`` cannot be throttled. Clocks go no lower than ``min_clock``: if
even that leaves the draw above the cap, the limit cannot hold and the time above the cap
is counted (``over_cap_s``).

How a reduction is shared (``share``):

- ``clock``: one clock for every job that can be throttled (solved in closed form);
- ``largest``: the largest draw per processor first: every job is held to at most one
  level ``L`` per processor (never below its floor), the highest level that fits.

The limit's state is plain data on :class:`olsctl.state.SimState` (``state.limit``),
copied into snapshots, so what-ifs throttle exactly as the main simulator does. Work is
tracked per running job as the share of it done by ``t_ref`` and the seconds one whole
job takes at its current clock (``span``): an unthrottled job's boundaries are exactly
``start + runtime x fraction``, as in the records of a run without the limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from heapq import heappop, heappush
from typing import TYPE_CHECKING

import numpy as np

from olsctl.perfmodel import clock_at, time_factor

if TYPE_CHECKING:
    from olsctl.state import SimState

SHARES = ("clock", "largest")
LIMITS = ("none", "throttle")


@dataclass(frozen=True)
class LimitSettings:
    """The limit's model (module docstring); ``static_w`` is ``static x peak_w``."""

    share: str = "clock"
    min_clock: float = 0.4
    static_w: float = 345.0
    exponent: float = 3.0


class Limit:
    """The throttle's data for one simulation (dicts keyed by running job index)."""

    __slots__ = ("settings", "demand", "level", "work", "t_ref", "span", "phase", "end",
                 "energy", "version", "heap", "demand_w", "dirty", "acting", "moved",
                 "stretch", "hit", "acting_s", "since", "over_cap_s", "over_since",
                 "lost_proc_s", "logging", "log_t", "log_dw", "intervals", "level_w",
                 "peak_w", "calm")

    def __init__(self, settings: LimitSettings, logging: bool = False) -> None:
        self.settings = settings
        self.demand: dict[int, float] = {}   # W per processor the current phase asks
        self.level: dict[int, float] = {}    # W per processor the job draws now
        self.work: dict[int, float] = {}     # share of the job done at t_ref
        self.t_ref: dict[int, float] = {}
        self.span: dict[int, float] = {}     # seconds a whole job takes at this clock
        self.phase: dict[int, int] = {}
        self.end: dict[int, float] = {}      # when the job ends at its current clock
        self.energy: dict[int, float] = {}   # J drawn until t_ref
        self.version: dict[int, int] = {}
        self.heap: list[tuple[float, int, int]] = []  # (phase boundary, job, version)
        self.demand_w = 0.0                  # sum of procs x demand over running jobs
        #: sum of procs x the highest level of any phase over running jobs (the most
        #: they could ask for before one more starts: see :attr:`calm`)
        self.peak_w = 0.0
        #: whether, at the last settle, no phase boundary before the next event could
        #: make the limit act: no job held, and the running jobs' highest levels within
        #: the budget (with room for rounding), which only an event changes (a start, an
        #: end, a wake, the cap schedule). A driver may then let boundaries pass without
        #: events and apply them at its next one (:meth:`apply_due` with ``before``:
        #: each at its own time, with the same arithmetic, in the same order).
        self.calm = False
        self.dirty = False
        self.acting = False                  # some job is held below its demand
        self.moved: list[int] = []           # jobs whose end moved (drivers reschedule)
        #: per finished or running job ever throttled: seconds beyond its full-clock run
        self.stretch: dict[int, float] = {}
        self.hit: set[int] = set()           # jobs throttled at some time
        self.acting_s = 0.0
        self.since: float | None = None
        self.over_cap_s = 0.0
        self.over_since: float | None = None
        self.lost_proc_s = 0.0
        #: the main simulator keeps the power changes and throttled intervals (records)
        self.logging = logging
        self.log_t: list[float] = []
        self.log_dw: list[float] = []
        self.intervals: list[tuple[float, float]] = []
        #: ``level`` as an array by job once a compiled pass asked for it
        #: (:meth:`levels`), kept in step with it from then on
        self.level_w: np.ndarray | None = None

    def levels(self, n: int) -> np.ndarray:
        """The running jobs' power per processor now (W, by job, ``n`` jobs; others 0),
        as an array a compiled pass reads; the limit keeps it up to date."""
        if self.level_w is None:
            self.level_w = np.zeros(n)
            for j, p in self.level.items():
                self.level_w[j] = p
        return self.level_w

    # -- events ----------------------------------------------------------------------
    def next_change_s(self) -> float:
        """The next phase boundary of a running job (inf: none)."""
        heap, version = self.heap, self.version
        while heap:
            t, j, v = heap[0]
            if version.get(j) == v:
                return t
            heappop(heap)
        return float("inf")

    def on_start(self, state: "SimState", j: int) -> None:
        now = state.now_s
        d = state.power.phase_w[j][0]
        n = state.procs[j]
        self.demand[j] = self.level[j] = d
        if self.level_w is not None:
            self.level_w[j] = d
        self.work[j] = 0.0
        self.t_ref[j] = now
        self.span[j] = state.runtime_s[j]
        self.phase[j] = 0
        self.end[j] = now + state.runtime_s[j]
        self.energy[j] = 0.0
        self.version[j] = 0
        self.demand_w += n * d
        self.peak_w += n * max(state.power.phase_w[j])
        self._push_boundary(state, j)
        self._log(now, n * d)
        self.dirty = True

    def on_finish(self, state: "SimState", j: int) -> None:
        now = state.now_s
        n = state.procs[j]
        level = self.level.pop(j)
        self.energy[j] += n * level * (now - self.t_ref[j])
        self.demand_w -= n * self.demand.pop(j)
        self.peak_w -= n * max(state.power.phase_w[j])
        if j in self.hit:
            extra = now - state.start_s[j] - state.runtime_s[j]
            self.stretch[j] = extra
            self.lost_proc_s += n * extra
        for d in (self.work, self.t_ref, self.span, self.phase, self.end, self.version):
            del d[j]
        self._log(now, -n * level)
        self.dirty = True

    def apply_due(self, state: "SimState", before: float | None = None) -> None:
        """Move the running jobs whose phase boundary is now into their next phase; with
        ``before``, those whose boundary came before it, each at its own time (the
        boundaries a driver let pass without an event: :attr:`calm`)."""
        now = real_now = state.now_s
        heap, version = self.heap, self.version
        starts_of, levels_of = state.power.phase_start, state.power.phase_w
        while heap and (heap[0][0] <= now if before is None else heap[0][0] < before):
            t, j, v = heappop(heap)
            if version.get(j) != v:
                continue
            if before is not None:
                now = state.now_s = t
            k = self.phase[j] + 1
            self._advance(state, j, now)
            self.work[j] = starts_of[j][k]
            self.phase[j] = k
            d_new = levels_of[j][k]
            n = state.procs[j]
            self.demand_w += n * (d_new - self.demand[j])
            following = self.level[j] == self.demand[j]  # at full clock: it follows
            self.demand[j] = d_new
            if following:
                self._log(now, n * (d_new - self.level[j]))
                self.level[j] = d_new
                if self.level_w is not None:
                    self.level_w[j] = d_new
                self._push_boundary(state, j)
            else:  # held: the same power is another clock in this phase
                self._set_level(state, j, min(self.level[j], d_new))
            self.dirty = True
        state.now_s = real_now

    def settle(self, state: "SimState") -> None:
        """Hold the machine's draw to the cap in force now (module docstring)."""
        if not self.dirty:
            return
        self.dirty = False
        power = state.power
        now = state.now_s
        busy, active = state.busy_procs, state.active_procs
        idle = active - busy if active > busy else 0
        sleeping = state.total_procs - (active if active > busy else busy)
        budget = power.cap.cap_at(now) - power.idle_w * idle - power.sleep_w * sleeping
        if self.demand_w <= budget and not self.acting:
            self.calm = self.peak_w * (1.0 + 1e-9) + 1e-6 <= budget
            return
        self.calm = False
        target = self._targets(state, budget)
        acting = False
        drawn = 0.0
        procs = state.procs
        for j, p in target.items():
            if p < self.demand[j]:
                acting = True
                self.hit.add(j)
            drawn += procs[j] * p
            if p != self.level[j]:
                self._set_level(state, j, p)
        self._note(now, acting, drawn > budget * (1.0 + 1e-12) + 1e-9)

    # -- the share rules -------------------------------------------------------------
    def _targets(self, state: "SimState", budget: float) -> dict[int, float]:
        s = self.settings
        S, low = s.static_w, s.min_clock ** s.exponent
        procs, demand = state.procs, self.demand
        if self.demand_w <= budget:
            return dict(demand)
        if s.share == "clock":
            fixed = scalable = 0.0
            for j, d in demand.items():
                if d > S:
                    fixed += procs[j] * S
                    scalable += procs[j] * (d - S)
                else:
                    fixed += procs[j] * d
            x = (budget - fixed) / scalable if scalable > 0 else 1.0
            x = min(max(x, low), 1.0)
            return {j: (S + (d - S) * x if d > S else d) for j, d in demand.items()}
        # largest draw first: the highest level L with sum min(d, max(L, floor)) <= budget
        floor = {j: (S + (d - S) * low if d > S else d) for j, d in demand.items()}
        points = sorted(set(demand.values()) | set(floor.values()))

        def total(level: float) -> float:
            return sum(procs[j] * min(d, max(level, floor[j])) for j, d in demand.items())

        lo, hi = 0, len(points) - 1
        if total(points[0]) > budget:
            level = points[0]
        else:  # total(points[lo]) <= budget < total(points[hi])
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if total(points[mid]) <= budget:
                    lo = mid
                else:
                    hi = mid
            a, b = points[lo], points[hi]
            ta, tb = total(a), total(b)
            level = a + (b - a) * (budget - ta) / (tb - ta) if tb > ta else a
        return {j: min(d, max(level, floor[j])) for j, d in demand.items()}

    # -- bookkeeping -----------------------------------------------------------------
    def _clock_span(self, state: "SimState", j: int, p: float) -> float:
        """Seconds the whole job takes when held to ``p`` W per processor now."""
        d, s = self.demand[j], self.settings
        base = state.runtime_s[j]
        if p >= d or d <= s.static_w:
            return base
        clock = clock_at(p, d, s.static_w, s.exponent)
        return base * time_factor(state.power.kappa[j], clock)

    def _advance(self, state: "SimState", j: int, now: float) -> None:
        dt = now - self.t_ref[j]
        if dt:
            self.energy[j] += state.procs[j] * self.level[j] * dt
            self.work[j] += dt / self.span[j]
            self.t_ref[j] = now

    def _set_level(self, state: "SimState", j: int, p: float) -> None:
        now = state.now_s
        self._advance(state, j, now)
        self._log(now, state.procs[j] * (p - self.level[j]))
        self.level[j] = p
        if self.level_w is not None:
            self.level_w[j] = p
        span = self.span[j] = self._clock_span(state, j, p)
        self.end[j] = now + (1.0 - self.work[j]) * span
        self.version[j] += 1
        self._push_boundary(state, j)
        self.moved.append(j)

    def _push_boundary(self, state: "SimState", j: int) -> None:
        starts = state.power.phase_start[j]
        k = self.phase[j] + 1
        if k < len(starts):
            if j in self.hit:
                t = self.t_ref[j] + (starts[k] - self.work[j]) * self.span[j]
            else:  # never throttled: exactly where a run without the limit has it
                t = state.start_s[j] + state.runtime_s[j] * starts[k]
            heappush(self.heap, (t, j, self.version[j]))

    def _note(self, now: float, acting: bool, over: bool) -> None:
        if acting and self.since is None:
            self.since = now
        elif not acting and self.since is not None:
            self.acting_s += now - self.since
            if self.logging:
                self.intervals.append((self.since, now))
            self.since = None
        self.acting = acting
        if over and self.over_since is None:
            self.over_since = now
        elif not over and self.over_since is not None:
            self.over_cap_s += now - self.over_since
            self.over_since = None

    def _log(self, t: float, dw: float) -> None:
        if self.logging and dw:
            self.log_t.append(t)
            self.log_dw.append(dw)

    def close(self, now: float) -> None:
        """End the run's open intervals at ``now``."""
        self._note(now, False, False)

    # -- snapshots -------------------------------------------------------------------
    def subset(self, idx: list[int]) -> "Limit":
        """The limit's data of jobs ``idx`` (re-indexed 0..), for a snapshot: running
        jobs carry their clocks and work; counters start at zero, nothing is logged."""
        new = {old: i for i, old in enumerate(idx)}
        out = Limit(self.settings)
        # (the running jobs' data in the order it has: the share rules sum over it)
        for name in ("demand", "level", "work", "t_ref", "span", "phase", "end",
                     "version"):
            src, dst = getattr(self, name), getattr(out, name)
            for old, v in src.items():
                i = new.get(old)
                if i is not None:
                    dst[i] = v
        # (kept for every job the run has started: looked up by job, never in order)
        for name in ("energy", "stretch"):
            src, dst = getattr(self, name), getattr(out, name)
            for old, i in new.items():
                v = src.get(old)
                if v is not None:
                    dst[i] = v
        hit = self.hit
        out.hit = {i for old, i in new.items() if old in hit}
        out.heap = [(t, new[j], v) for t, j, v in self.heap
                    if j in new and self.version.get(j) == v]
        out.heap.sort()
        out.demand_w = self.demand_w
        out.peak_w = self.peak_w
        out.dirty, out.acting = self.dirty, self.acting
        out.since, out.over_since = self.since, self.over_since
        return out

    def stretch_of(self, state: "SimState", j: int) -> float:
        """Seconds job ``j`` runs beyond its full-clock runtime: so far known when it
        ended, else as its clock now says (0 for a job never throttled)."""
        if j not in self.hit:
            return 0.0
        if j in self.end:
            return self.end[j] - state.start_s[j] - state.runtime_s[j]
        return self.stretch.get(j, 0.0)
