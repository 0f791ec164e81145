"""The controller's tick: snapshot, limit, search, choose, apply, log.

Here belongs :class:`Controller`, which a run schedules on its
:class:`olsctl.sim.MainSimulator` every ``interval_s``: it builds the tick's
:class:`WhatIfTask` (with the arrival models), sets the limit the what-ifs must meet
(the SLA's, or SLA feedback's), hands the candidates to the search strategy, applies the
choice to the main simulator (within ``max_step``), and keeps the decision log
(``decisions.jsonl``) and its summary. Scoring, searching and where what-ifs run live in
:mod:`.scoring`, :mod:`.search` and :mod:`.dispatch`.
"""

from __future__ import annotations

import json
import math
import time
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

import numpy as np

from olsctl.backends import BackendDown
from olsctl.controller.dispatch import Dispatcher
from olsctl.controller.trials import INF, Candidate, Trial, WhatIfTask
from olsctl.controller.scoring import what_if_batch
from olsctl.controller.search import (STRATEGIES, SearchContext, _bigger_first,
                                      _complete_closest, choose, settled)
from olsctl.controller.settings import ControllerSettings
from olsctl.metrics import bounded_slowdown
from olsctl.policies import make_policy
from olsctl.policies.core.bound import BOUND_METRICS, missed
from olsctl.state import Snapshot
from olsctl.whatif import JobTable

if TYPE_CHECKING:
    from olsctl.sim import MainSimulator
    from olsctl.state import SimState


#: the reason logged for a tick that finds the machine overloaded (see
#: :meth:`Controller._overloaded`)
OVERLOADED = ("overloaded: more work waits than the machine does in an SLA window, and "
              "it already misses the SLA; the largest setting, without what-ifs")


def waiting_work(snap: Snapshot) -> float:
    """The work the waiting jobs of ``snap`` ask for: processors x estimates, summed."""
    k = snap.n_running
    return float(np.dot(snap.procs[k:], snap.estimate_s[k:]))


def metric_floor(snap: Snapshot, metric: str) -> float | None:
    """The least ``metric`` the jobs of ``snap`` can end with under any setting (None
    for a metric without one): the running ones with the waits they had, the waiting
    ones with the waits they have had so far, as the SLA bound of a what-if starts
    (:func:`olsctl.policies.core.bound.bound_open`)."""
    n = snap.job_id.size
    if n == 0 or metric not in BOUND_METRICS:
        return None
    k = snap.n_running
    wait_s = np.empty(n)
    wait_s[:k] = snap.start_s[:k] - snap.submit_s[:k]
    wait_s[k:] = snap.now_s - snap.submit_s[k:]
    if metric == "mean_bsld":
        return float(np.mean(bounded_slowdown(wait_s, snap.runtime_s)))
    return float(np.max(wait_s) if metric == "max_wait_s" else np.mean(wait_s))


class _Outcome(NamedTuple):
    """A tick's search: its trials and the best one, why, and whether it meets the SLA;
    or the ``failure`` (a what-if failed or raised) that keeps the current setting."""

    trials: list[Trial]
    best: Trial | None = None
    reason: str = ""
    sla_met: bool | None = None
    failure: str | None = None


@dataclass
class Controller:
    """Drives ticks on a :class:`olsctl.sim.MainSimulator`; keeps the decision log.

    ``jobs`` (the workload as a :class:`JobTable`, in the main state's job order) feeds
    the ``recent`` and ``oracle`` arrival models; ``wake_energy_j`` the energy forecast.
    ``batch`` is the function a batch of what-ifs runs (a top-level function, shipped to
    workers); ``parallel`` the worker pool kept open for the run (a joblib.Parallel or
    :class:`olsctl.runner.WorkerPool`; None: in process), set once built; both belong to
    the :class:`Dispatcher`, which also counts ``whatifs``."""

    settings: ControllerSettings
    policy: dict
    jobs: JobTable | None = None
    wake_energy_j: float = 0.0
    batch: Callable[..., list[Trial]] = what_if_batch
    #: SLA feedback (:mod:`olsctl.feedback`): the limit of each tick's what-ifs from the
    #: slowdown realized so far (None: open loop, the SLA's own limit)
    feedback: Any = None
    decisions: list[dict] = field(default_factory=list)
    wall_s: float = 0.0
    dispatcher: Dispatcher = field(init=False, repr=False)
    _current: Candidate | None = None
    #: settings applied that differed from those in force (the first tick's included)
    changes: int = 0
    _last_change_s: float = -INF
    _submit: list[float] = field(default_factory=list)
    # the limit this tick's what-ifs must meet (the SLA's, or feedback's)
    _limit: float = INF
    # (total processors, the candidates, the active counts) of the last tick
    _grid_of: tuple | None = None

    def __post_init__(self) -> None:
        self._limit = self.settings.sla_max
        self.dispatcher = Dispatcher(self.settings, self.batch)

    @property
    def parallel(self) -> Any:
        return self.dispatcher.parallel

    @parallel.setter
    def parallel(self, pool: Any) -> None:
        self.dispatcher.parallel = pool

    @property
    def whatifs(self) -> int:
        return self.dispatcher.whatifs

    def start(self, sim: MainSimulator) -> None:
        """Schedule the first tick at the first submission."""
        sim.at(sim.env.now, self._tick)

    # -- one tick -------------------------------------------------------------------------
    def _tick(self, sim: MainSimulator) -> None:
        """One tick: snapshot, limit, search and choose, apply (within ``max_step``),
        log; then the next tick, unless the run is over. A tick within ``min_dwell_s``
        of the last change keeps the setting without a search."""
        t0 = time.perf_counter()
        s, st, now = self.settings, sim.state, sim.env.now
        if self._current is None:
            self._current = self._initial(st, now)
        snap = st.snapshot()
        record: dict[str, Any] = {"time_s": now, "running": snap.n_running,
                                  "waiting": snap.n_waiting}
        if now - self._last_change_s < s.min_dwell_s:
            record.update(trials=[], chosen=self._current.as_dict(),
                          reason="kept: changed less than min_dwell_s ago", sla_met=None)
        else:
            cands, counts = self._grid(st.total_procs)
            self._limit = self._limit_now(st, snap, now, record)
            if self._overloaded(snap, record):
                self._take(sim, record, min(cands, key=_bigger_first), counts, OVERLOADED,
                           [], False)
            else:
                out = self._search_and_choose(sim, snap, cands)
                trials = [t.as_dict() for t in out.trials]
                if out.failure is not None:
                    record.update(trials=trials, chosen=self._current.as_dict(),
                                  reason="kept: a what-if failed", sla_met=None,
                                  failure=out.failure)
                else:
                    self._take(sim, record, out.best.candidate, counts, out.reason,
                               trials, out.sla_met)
        self.dispatcher.cut.clear()
        if record["sla_met"] is not None:
            self.dispatcher.after_miss = not record["sla_met"]
        self.wall_s += time.perf_counter() - t0
        self.decisions.append(record)
        if not (sim.finished or sim.stalled):  # stalled: no later tick could see news
            sim.at(now + s.interval_s, self._tick)

    def _take(self, sim: MainSimulator, record: dict[str, Any], best: Candidate,
              counts: list[int], reason: str, trials: list[dict],
              sla_met: bool | None) -> None:
        """Apply ``best`` (within ``max_step``) and log it in ``record``."""
        chosen = self._limit_step(best, counts)
        if chosen != best:
            reason += f"; limited to max_step {self.settings.max_step}"
        record.update(trials=trials, chosen=chosen.as_dict(), reason=reason,
                      sla_met=sla_met)
        self._apply(sim, chosen)

    def _grid(self, total_procs: int) -> tuple[list[Candidate], list[int]]:
        """The candidates and the active counts to try on a machine of ``total_procs``
        (made once: they depend on nothing else)."""
        if self._grid_of is None or self._grid_of[0] != total_procs:
            s = self.settings
            self._grid_of = (total_procs, s.candidates(total_procs),
                             s.active_counts(total_procs))
        return self._grid_of[1], self._grid_of[2]

    def _initial(self, st: SimState, now: float) -> Candidate:
        """The setting in force before the first tick, as a candidate."""
        cap = None
        if self.settings.caps_w and st.power is not None:
            cap = float(st.power.cap.cap_at(now))
        spec = make_policy(self.policy).settings()
        params = tuple((name, spec.get(name)) for name, _ in self.settings.params)
        return Candidate(st.active_procs, cap, self._policy_window(), params)

    def _limit_now(self, st: SimState, snap: Snapshot, now: float,
                   record: dict[str, Any]) -> float:
        """The limit this tick's what-ifs must meet: the SLA's, or with feedback the one
        from the slowdown realized so far and, with ``backlog``, the work waiting in
        ``snap`` (then logged in ``record``)."""
        if self.feedback is None:
            return self.settings.sla_max
        self.feedback.follow(st.start_order)
        pressure = self.feedback.pressure(st.start_s, now)
        fb: dict[str, Any] = {"pressure": pressure}
        if self.feedback.settings.backlog:
            share = waiting_work(snap) / (snap.total_procs * self.feedback.window_s)
            fb["backlog"] = share
            pressure = max(pressure, share)
        limit = self.feedback.limit_at(pressure)
        fb["limit"] = limit
        record["feedback"] = fb
        return limit

    def _overloaded(self, snap: Snapshot, record: dict[str, Any]) -> bool:
        """Whether the machine is overloaded at ``snap``: the waiting jobs ask for more
        than the whole machine can do in one SLA window (processors x estimates), and
        their metric surely misses the SLA's own limit whatever the setting (the least
        it can end at, :func:`metric_floor`, logged in ``record`` as ``floor``, is above
        it). Only what-ifs of the snapshot's jobs alone (``arrivals: none``) are bound
        by it."""
        s = self.settings
        if s.arrivals != "none" or waiting_work(snap) <= snap.total_procs * s.sla_window_s:
            return False
        least = metric_floor(snap, s.sla_metric)
        if least is None or not missed(least, s.sla_max):
            return False
        record["floor"] = least
        return True

    def _search_and_choose(self, sim: MainSimulator, snap: Snapshot,
                           cands: list[Candidate]) -> _Outcome:
        """The search's trials and the choice among them; the closest is finished when
        none meets the SLA. Any error (e.g. a worker process died) is the failure."""
        s = self.settings
        self.dispatcher.cut.clear()
        try:
            task = self._task(sim, snap)
            trials = self._search(task, cands, snap.n_waiting)
            failed = [t for t in trials if t.error is not None]
            if failed:
                return _Outcome(trials, failure=failed[0].error)
            best, reason, met = choose(trials, s.sla_metric, self._limit)
            if not met:  # raises when a what-if run for it fails
                closest = self._complete_closest(task, trials, snap.n_waiting)
                if any(a is not b for a, b in zip(closest, trials)):  # (else: same choice)
                    trials = closest
                    best, reason, met = choose(trials, s.sla_metric, self._limit)
        except BackendDown:  # the pool cannot run what-ifs any more: the run stops
            raise
        except Exception as exc:  # e.g. a worker process died
            return _Outcome([], failure=f"{type(exc).__name__}: {exc}")
        return _Outcome(trials, best, reason, met)

    def _search(self, task: WhatIfTask, cands: list[Candidate], waiting: int) -> list[Trial]:
        """The trials of the ``settings.search`` strategy over ``cands``."""
        return STRATEGIES[self.settings.search](self._context(task, cands, waiting))

    def _complete_closest(self, task: WhatIfTask, trials: list[Trial],
                          waiting: int) -> list[Trial]:
        """``trials`` with the closest to the SLA finished (see
        :func:`olsctl.controller.search._complete_closest`); ``trials`` itself when
        nothing is left to finish (as a compiled batch leaves them)."""
        if settled(trials, self.settings.sla_metric):
            return trials
        cands = [t.candidate for t in trials]
        return _complete_closest(self._context(task, cands, waiting), trials)

    def _context(self, task: WhatIfTask, cands: list[Candidate],
                 waiting: int) -> SearchContext:
        return SearchContext(self.dispatcher, task, cands, waiting, self.settings.sla_metric,
                             self._limit)

    def _policy_window(self) -> int | None:
        if not self.settings.windows:
            return None
        return int(make_policy(self.policy).window)

    def _task(self, sim: MainSimulator, snap: Snapshot) -> WhatIfTask:
        """The work every what-if of this tick shares: the snapshot, and with an arrivals
        model the jobs it adds (``oracle``: those submitted in the coming interval;
        ``recent``: the last interval's, one interval later)."""
        s = self.settings
        arrivals = arrivals_power = arrivals_budget = None
        if s.arrivals != "none" and self.jobs is not None:
            if not self._submit:
                self._submit = self.jobs.submit_s.tolist()
            now = snap.now_s
            if s.arrivals == "oracle":
                lo = bisect_right(self._submit, now)
                hi = bisect_right(self._submit, now + s.interval_s)
                shift = 0.0
            else:  # recent: the last interval's arrivals, replayed one interval later
                lo = bisect_right(self._submit, now - s.interval_s)
                hi = bisect_right(self._submit, now)
                shift = s.interval_s
            if hi > lo:
                t = self.jobs
                arrivals = JobTable(t.job_id[lo:hi], t.submit_s[lo:hi] + shift, t.procs[lo:hi],
                                    t.estimate_s[lo:hi], t.runtime_s[lo:hi])
                rows = list(range(lo, hi))
                if sim.state.power is not None:
                    arrivals_power = sim.state.power.subset(rows)
                if sim.state.budget is not None:
                    arrivals_budget = sim.state.budget.subset(rows)
        return WhatIfTask(snap, self.policy, s.cost, arrivals, arrivals_power, s.horizon_s,
                          s.interval_s, self.wake_energy_j, (s.sla_metric, self._limit),
                          sim.wake_latency_s, self._current, arrivals_budget)

    def _limit_step(self, chosen: Candidate, counts: list[int]) -> Candidate:
        """``chosen``, or with ``max_step`` the active count at most that many steps
        (in ``counts``) from the current one toward it."""
        step = self.settings.max_step
        if step is None:
            return chosen
        here = bisect_left(counts, self._current.active_procs)
        here = min(here, len(counts) - 1)
        want = counts.index(chosen.active_procs)
        if abs(want - here) <= step:
            return chosen
        to = here + step if want > here else here - step
        return replace(chosen, active_procs=counts[to])

    def _apply(self, sim: MainSimulator, c: Candidate) -> None:
        """Apply ``c`` to the main simulator at once (what changed only)."""
        cur = self._current
        if c == cur:
            return
        self.changes += 1
        if c.active_procs != cur.active_procs:
            sim.request_active_procs(c.active_procs)
        if c.cap_w is not None and c.cap_w != cur.cap_w:
            sim.set_cap(c.cap_w)
        if (c.window is not None and c.window != cur.window) or c.params != cur.params:
            sim.policy = make_policy(c.policy_spec(self.policy))
        self._current = c
        self._last_change_s = sim.env.now

    # -- outputs --------------------------------------------------------------------------
    def jsonl(self) -> str:
        # (the log holds no cycles: json.dumps's check for them costs a tenth of the time)
        encode = json.JSONEncoder(check_circular=False).encode
        return "".join([encode(d) + "\n" for d in self.decisions])

    def summary(self) -> dict:
        s = self.settings
        ticks = [d for d in self.decisions if d["trials"]]
        return {"ticks": len(self.decisions),
                "sla_misses": sum(1 for d in ticks if d["sla_met"] is False),
                "failures": sum(1 for d in self.decisions if "failure" in d),
                "changes": self.changes,
                "whatifs": self.whatifs,
                "interval_s": s.interval_s,
                "search": s.search,
                "arrivals": s.arrivals,
                "horizon_s": s.horizon_s,
                "sla": {"metric": s.sla_metric, "max": s.sla_max},
                **self._feedback_summary()}

    def _feedback_summary(self) -> dict:
        """With feedback: its settings and the ticks whose limit it tightened."""
        if self.feedback is None:
            return {}
        fs = self.feedback.settings
        limits = [d["feedback"]["limit"] for d in self.decisions if "feedback" in d]
        backlog = {"backlog": True} if fs.backlog else {}
        return {"feedback": {"relax_below": fs.relax_below, "full_above": fs.full_above,
                             **backlog,
                             "window_s": self.feedback.window_s,
                             "tightened_ticks": sum(1 for v in limits
                                                    if v < self.settings.sla_max),
                             "mean_limit": math.fsum(limits) / len(limits) if limits
                             else None}}
