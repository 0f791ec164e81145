"""The online-simulation (OLS) controller: fork what-ifs of the main simulator, keep the
candidates that meet the slowdown SLA, apply the cheapest.

Every ``interval_s`` of simulated time the controller snapshots the main simulator and
runs :func:`what_if` for candidate settings (active processors x power caps x knapsack
windows), in this process, or split between it and worker processes kept for the whole
run (olsctl's own, or any joblib backend) when a tick's work pays for the trip. A
what-if runs the snapshot forward with the candidate applied (no new arrivals by
default, as Lawson & Smirni; or an arrivals model) until every job of the snapshot has started, or until a horizon, and
scores the snapshot's jobs: bounded slowdowns (known for running jobs, predicted for
waiting ones), waits, and with power the machine's energy and power over the coming
interval. Among the candidates meeting the SLA the cheapest wins, ties to the larger
machine; when none meets it, the one closest to it, and the tick is an SLA miss. With
SLA feedback (:mod:`olsctl.feedback`) the limit they must meet is tightened from the
slowdown the main simulator has realized in the current and previous SLA windows. The
choice is applied at once (that instant's pass uses it) and logged in
``decisions.jsonl``.

:func:`what_if` is a pure top-level function of (task, candidate, seed), so results do
not depend on the number of workers or the backend.
"""

from __future__ import annotations

import json
import math
import sys
import time
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field, replace
from itertools import product
from typing import Any, Sequence


from olsctl.policies import make_policy
from olsctl.power.runtime import PowerState
from olsctl.state import SimState, Snapshot
from olsctl.whatif import JobTable, steps
from olsctl.workers import processes_for

SLA_METRICS = ("mean_bsld", "p95_bsld", "mean_wait_s", "max_wait_s")
COSTS = ("active_procs", "energy", "power_cap", "peak_power")
ARRIVAL_MODELS = ("none", "recent", "oracle")
SEARCHES = ("grid", "bisect", "cheapest-first")
#: cost parts a ``cheapest-first`` search can rank candidates by before running them
KNOWN_COSTS = ("active_procs", "power_cap")
INF = math.inf


@dataclass(frozen=True, order=True)
class Candidate:
    """One setting to try: active processors, and (None: unchanged) a power cap in watts,
    a knapsack window, and values of other tunable policy settings, as (name, value)."""

    active_procs: int
    cap_w: float | None = None
    window: int | None = None
    params: tuple = ()

    def as_dict(self) -> dict:
        out: dict[str, Any] = {"active_procs": self.active_procs}
        if self.cap_w is not None:
            out["cap_w"] = self.cap_w
        if self.window is not None:
            out["window"] = self.window
        for name, value in self.params:
            out[f"policy.{name}"] = value
        return out

    def policy_spec(self, base: dict) -> dict:
        """``base`` (a policy spec) with this candidate's window and settings."""
        spec = dict(base)
        if self.window is not None:
            spec["window"] = int(self.window)
        spec.update(self.params)
        return spec


@dataclass(frozen=True)
class WhatIfTask:
    """Everything a what-if needs besides the candidate (picklable, shipped once per batch).

    ``cost`` is a tuple of (name, weight) pairs; ``power_s`` the span over which energy and
    power are predicted (the controller's interval); ``horizon_s`` None runs until every
    snapshot job has started."""

    snapshot: Snapshot
    policy: dict
    cost: tuple[tuple[str, float], ...] = (("active_procs", 1.0),)
    arrivals: JobTable | None = None
    arrivals_power: Any = None
    horizon_s: float | None = None
    power_s: float = 3600.0
    wake_energy_j: float = 0.0
    #: (metric, limit): cut a what-if short once it surely misses this SLA (None: never)
    stop_above: tuple[str, float] | None = None
    #: processors a candidate adds become usable this long after the tick
    wake_latency_s: float = 0.0


@dataclass(frozen=True)
class Trial:
    """One candidate's what-if: SLA metrics of the snapshot's jobs, power, and its cost.

    ``unstarted`` jobs could never start (the metrics are then infinite); ``censored`` jobs
    were still waiting at the horizon (their waits count up to it, a lower bound). An
    incomplete trial (``stopped_at_s`` set) was cut short once it surely missed the SLA:
    its SLA metric is the lower bound that proved it, the other metrics are unknown."""

    candidate: Candidate
    jobs: int
    unstarted: int
    censored: int
    mean_bsld: float
    p95_bsld: float
    mean_wait_s: float
    max_wait_s: float
    cost: float
    queue_mean_bsld: tuple[float, ...] | None = None
    energy_j: float | None = None
    mean_power_w: float | None = None
    peak_power_w: float | None = None
    error: str | None = None
    stopped_at_s: float | None = None
    #: the candidate's cap is below the power forecast (it could not be kept)
    over_cap: bool = False

    @property
    def complete(self) -> bool:
        return self.stopped_at_s is None

    @property
    def active_procs(self) -> int:
        return self.candidate.active_procs

    def metric(self, name: str) -> float:
        return INF if (self.unstarted or self.error or self.over_cap) else getattr(self, name)

    def as_dict(self) -> dict:
        out = {**self.candidate.as_dict(), "jobs": self.jobs, "unstarted": self.unstarted}
        if self.censored:
            out["censored"] = self.censored
        for name in SLA_METRICS:
            out[name] = _json_float(getattr(self, name))
        if self.queue_mean_bsld is not None:
            out["queue_mean_bsld"] = [_json_float(v) for v in self.queue_mean_bsld]
        if self.energy_j is not None:
            out["energy_j"] = _json_float(self.energy_j)
            out["mean_power_w"] = _json_float(self.mean_power_w)
            out["peak_power_w"] = _json_float(self.peak_power_w)
        out["cost"] = _json_float(self.cost)
        if self.stopped_at_s is not None:
            out["stopped_at_s"] = self.stopped_at_s
        if self.over_cap:
            out["over_cap"] = True
        if self.error is not None:
            out["error"] = self.error
        return out


def known_costs(task: WhatIfTask, candidate: Candidate) -> dict[str, float]:
    """The parts of a candidate's cost known before its what-if runs: its active
    processors, its tuned numeric policy settings (``policy.<name>``) and, when a policy
    meters power against a cap, the cap it sets (or the one in force)."""
    snap = task.snapshot
    parts: dict[str, float] = {"active_procs": float(candidate.active_procs)}
    for name, value in candidate.params:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            parts[f"policy.{name}"] = float(value)
    if isinstance(snap.power, PowerState):
        cap_w = candidate.cap_w
        parts["power_cap"] = float(snap.power.cap.cap_at(snap.now_s) if cap_w is None
                                   else cap_w)
    return parts


def weighted_cost(weights: tuple[tuple[str, float], ...], parts: dict[str, float]) -> float:
    """The cost of a candidate whose cost parts are ``parts`` (a part not there is
    unknown: infinite)."""
    return float(sum(w * parts.get(name, INF) for name, w in weights))


def what_if(task: WhatIfTask, candidate: Candidate, seed: int = 0) -> Trial:
    """Run the task's snapshot with ``candidate`` applied; score the snapshot's jobs.
    Pure: the same inputs give the same trial (``seed`` is reserved for randomised
    arrival models; the bundled ones are deterministic)."""
    return WhatIfRun(task, candidate).trial


class WhatIfRun:
    """One what-if (see :func:`what_if`; ``trial`` is its result). One cut short can go
    on under a higher limit (:meth:`resume`), with the trial a new what-if under that
    limit would give, without running its start again."""

    def __init__(self, task: WhatIfTask, candidate: Candidate) -> None:
        self.task, self.candidate = task, candidate
        self.steps = None
        snap = task.snapshot
        n = self.n = int(snap.job_id.size)
        active = self.active = int(candidate.active_procs)
        self.cost_parts = known_costs(task, candidate)
        self.metered = isinstance(snap.power, PowerState)  # a policy meters power
        too_wide = int((snap.procs[snap.n_running:] > active).sum())
        if too_wide:  # they can never start on this machine: no need to simulate
            self.trial = Trial(candidate, n, too_wide, 0, INF, INF, INF, INF, self._cost())
            return
        state = self.state = SimState.from_snapshot(snap)
        raise_at = None
        if active > snap.active_procs and task.wake_latency_s > 0:
            raise_at = (snap.now_s + task.wake_latency_s, active)  # the added ones wake first
        else:
            state.active_procs = active
        if self.metered and candidate.cap_w is not None:
            from olsctl.power.cap import CapSchedule

            state.power.cap = CapSchedule.constant(candidate.cap_w)
        self.policy = _policy(candidate.policy_spec(task.policy))
        self.until = INF if task.horizon_s is None else snap.now_s + task.horizon_s
        self.steps = steps(state, self.policy, task.arrivals, task.arrivals_power,
                           watch_snapshot=True, until_s=self.until,
                           stop_above=task.stop_above, raise_at=raise_at)
        self.trial = self._score(next(self.steps, None))

    def resume(self, stop_above: tuple[str, float] | None) -> Trial:
        """The trial under ``stop_above``: the task's metric with a higher limit, or None
        to run to the end. Only for a what-if cut short."""
        if self.trial.complete:
            raise ValueError("only a what-if cut short can go on")
        if stop_above is not None and stop_above[0] != self.task.stop_above[0]:
            raise ValueError("a what-if goes on under the same metric")
        try:
            stopped = self.steps.send(None if stop_above is None else stop_above[1])
        except StopIteration:
            stopped = None
        self.task = replace(self.task, stop_above=stop_above)
        self.trial = self._score(stopped)
        return self.trial

    def _cost(self) -> float:
        return weighted_cost(self.task.cost, self.cost_parts)

    def _score(self, stopped: float | None) -> Trial:
        task, candidate, n, state = self.task, self.candidate, self.n, self.state
        snap = task.snapshot
        if stopped is not None:
            values = {name: math.nan for name in SLA_METRICS}
            values[task.stop_above[0]] = stopped
            return Trial(candidate, n, 0, 0, *(values[m] for m in SLA_METRICS),
                         self._cost(), stopped_at_s=state.now_s)
        start = state.start_s[:n]
        censored = unstarted = 0
        for k, s in enumerate(start):
            if s != s:  # NaN: not started
                if task.horizon_s is not None:
                    # still waiting at the horizon: it has waited at least until then
                    start[k] = self.until
                    censored += 1
                else:
                    unstarted += 1
        energy = mean_w = peak_w = None
        over_cap = False
        if self.metered:
            energy, mean_w, peak_w = _power_forecast(snap, state, task, self.active)
            self.cost_parts.update(energy=energy, peak_power=peak_w)
            over_cap = candidate.cap_w is not None and peak_w > candidate.cap_w
        cost = self._cost()
        if n == 0:
            return Trial(candidate, 0, 0, 0, 1.0, 1.0, 0.0, 0.0, cost, None, energy,
                         mean_w, peak_w, over_cap=over_cap)
        if unstarted:
            return Trial(candidate, n, unstarted, censored, INF, INF, INF, INF, cost, None,
                         energy, mean_w, peak_w, over_cap=over_cap)
        submit, runtime = state.submit_s, state.runtime_s
        wait = [start[k] - submit[k] for k in range(n)]
        bsld = [1.0 + w / (r if r > 10.0 else 10.0) for w, r in zip(wait, runtime)]
        queue_bsld = None
        queue_index = getattr(self.policy, "queue_index", None)
        if queue_index is not None:
            sums = [[0.0, 0] for _ in range(self.policy.queues)]
            for e, b in zip(state.estimate_s, bsld):
                q = sums[queue_index(e)]
                q[0] += b
                q[1] += 1
            queue_bsld = tuple(total / count if count else 1.0 for total, count in sums)
        return Trial(candidate, n, 0, censored, math.fsum(bsld) / n, percentile(bsld, 95.0),
                     math.fsum(wait) / n, max(wait), cost, queue_bsld, energy, mean_w,
                     peak_w, over_cap=over_cap)


_POLICIES: dict[str, Any] = {}


def _policy(spec: dict):
    """The policy of ``spec``, built once per process (policies hold settings only)."""
    key = json.dumps(spec, sort_keys=True, default=str)
    got = _POLICIES.get(key)
    if got is None:
        if len(_POLICIES) > 256:
            _POLICIES.clear()
        got = _POLICIES[key] = make_policy(spec)
    return got


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile with linear interpolation between order statistics (numpy's
    default method, computed the same way)."""
    x = sorted(values)
    h = (len(x) - 1) * q / 100.0
    lo = int(h)
    t = h - lo
    a = x[lo]
    b = x[lo + 1] if lo + 1 < len(x) else a
    d = b - a
    return a + d * t if t < 0.5 else b - d * (1.0 - t)


def what_if_batch(task: WhatIfTask, candidates: Sequence[Candidate], seed: int = 0,
                  keep: dict | None = None) -> list[Trial]:
    """:func:`what_if` for several candidates (one shipment of the task); a candidate
    whose what-if raises gives a trial carrying the error instead. With ``keep`` (in
    this process only), the what-ifs cut short are kept there by candidate, to go on
    later (:meth:`WhatIfRun.resume`)."""
    out = []
    for c in candidates:
        try:
            run = WhatIfRun(task, c)
            out.append(run.trial)
            if keep is not None and not run.trial.complete:
                keep[c] = run
        except Exception as exc:  # reported in the decision log; the run goes on
            out.append(_failed(task, c, f"{type(exc).__name__}: {exc}"))
    return out


def _timed_batch(batch, task: WhatIfTask, candidates: Sequence[Candidate],
                 seed: int = 0) -> tuple[list[Trial], float]:
    """``batch(task, candidates, seed)`` and the wall seconds it took (in a worker)."""
    t0 = time.perf_counter()
    trials = batch(task, candidates, seed)
    return trials, time.perf_counter() - t0


def _failed(task: WhatIfTask, c: Candidate, error: str) -> Trial:
    return Trial(c, int(task.snapshot.job_id.size), 0, 0, INF, INF, INF, INF, INF, error=error)


def _power_forecast(snap: Snapshot, state: SimState, task: WhatIfTask,
                    active: int) -> tuple[float, float, float]:
    """Energy (J), mean and peak power (W) of the machine over [now, now + power_s] in
    the what-if: for energy and mean power every job at its profile's mean power, for
    the peak at its profile's maximum (what a cap must allow for); idle active
    processors at idle power, the rest asleep, plus the wakes the candidate needs."""
    p = state.power
    now = snap.now_s
    end = now + task.power_s
    procs, start, runtime = state.procs, state.start_s, state.runtime_s
    mean_w, max_w = p.true_mean_w, p.true_max_w
    n_power = len(mean_w)
    events: dict[float, list[float]] = {}  # time -> [d busy procs, d watts, d max watts]
    for j, s in enumerate(start):
        if s != s or s >= end or j >= n_power:
            continue
        e = s + runtime[j]
        if e <= now:
            continue
        w, top = procs[j] * mean_w[j], procs[j] * max_w[j]
        a = events.setdefault(max(s, now), [0.0, 0.0, 0.0])
        a[0] += procs[j]
        a[1] += w
        a[2] += top
        if e < end:
            b = events.setdefault(e, [0.0, 0.0, 0.0])
            b[0] -= procs[j]
            b[1] -= w
            b[2] -= top
    total = snap.total_procs
    busy = busy_w = busy_top = 0.0
    energy = 0.0
    peak = 0.0
    times = sorted(events)
    times.append(end)
    t_prev = now
    for t in times:
        if t > t_prev:
            idle = active - busy if active > busy else 0.0
            asleep = total - (active if active > busy else busy)
            rest = p.idle_w * idle + p.sleep_w * asleep
            energy += (busy_w + rest) * (t - t_prev)
            top = busy_top + rest
            peak = top if top > peak else peak
            t_prev = t
        d = events.get(t)
        if d is not None:
            busy += d[0]
            busy_w += d[1]
            busy_top += d[2]
    energy += task.wake_energy_j * max(0, active - snap.active_procs)
    return energy, energy / task.power_s, peak


@dataclass(frozen=True)
class ControllerSettings:
    """Validated ``controller:`` settings (caps already in watts)."""

    interval_s: float = 3600.0
    fractions: tuple[float, ...] = (0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0)
    procs: tuple[int, ...] | None = None
    caps_w: tuple[float, ...] | None = None
    windows: tuple[int, ...] | None = None
    #: other tunable policy settings: (name, values) pairs
    params: tuple = ()
    sla_metric: str = "mean_bsld"
    sla_max: float = 200.0
    cost: tuple[tuple[str, float], ...] = (("active_procs", 1.0),)
    search: str = "grid"
    arrivals: str = "none"
    horizon_s: float | None = None
    min_dwell_s: float = 0.0
    max_step: int | None = None
    n_jobs: int = 1
    backend: str = "processes"
    parallel_min_waiting: int = 100
    #: expected in-process seconds from which a tick's what-ifs go to the pool (None:
    #: auto, when splitting them saves more than the pool's measured round trip)
    pool_min_s: float | None = None
    seed: int = 0

    def active_counts(self, total_procs: int) -> list[int]:
        """Active-processor counts to try, ascending: the listed counts, or the fractions
        of the machine rounded (at least 1)."""
        if self.procs is not None:
            return sorted({min(max(1, int(p)), total_procs) for p in self.procs})
        return sorted({max(1, int(round(f * total_procs))) for f in self.fractions})

    def candidates(self, total_procs: int) -> list[Candidate]:
        caps = sorted(set(self.caps_w)) if self.caps_w else [None]
        windows = sorted(set(self.windows)) if self.windows else [None]
        names = [name for name, _ in self.params]
        combos = list(product(*(values for _, values in self.params)))
        return [Candidate(a, c, w, tuple(zip(names, combo))) for c, w, combo, a in
                product(caps, windows, combos, self.active_counts(total_procs))]


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
    ok = [t for t in trials if t.metric(metric) <= limit]
    if ok:
        best = min(ok, key=lambda t: (t.cost, *_bigger_first(t.candidate)))
        return best, "cheapest meeting the SLA", True
    best = min(trials, key=lambda t: (t.metric(metric), *_bigger_first(t.candidate)))
    return best, "no candidate meets the SLA: closest to it", False


@dataclass
class Controller:
    """Drives ticks on a :class:`olsctl.sim.MainSimulator`; keeps the decision log.

    ``jobs`` (the workload as a :class:`JobTable`, in the main state's job order) feeds
    the ``recent`` and ``oracle`` arrival models; ``wake_energy_j`` the energy forecast."""

    settings: ControllerSettings
    policy: dict
    parallel: Any = None  # a joblib.Parallel kept open for the run (None: in process)
    jobs: JobTable | None = None
    wake_energy_j: float = 0.0
    #: the function a batch of what-ifs runs (a top-level function, shipped to workers)
    batch: Any = what_if_batch
    #: SLA feedback (:mod:`olsctl.feedback`): the limit of each tick's what-ifs from the
    #: slowdown realized so far (None: open loop, the SLA's own limit)
    feedback: Any = None
    decisions: list[dict] = field(default_factory=list)
    wall_s: float = 0.0
    whatifs: int = 0
    _current: Candidate | None = None
    _last_change_s: float = -INF
    _submit: list[float] = field(default_factory=list)
    # wall seconds per what-if at the last evaluation, and what a pool call adds
    _per_whatif_s: float | None = None
    _hop_s: float | None = None
    # this tick's what-ifs cut short in this process, by candidate (they may go on)
    _cut: dict = field(default_factory=dict)
    # the last tick missed the SLA (see _use_pool)
    _after_miss: bool = False
    # the limit this tick's what-ifs must meet (the SLA's, or feedback's)
    _limit: float = INF

    def __post_init__(self) -> None:
        self._limit = self.settings.sla_max

    def start(self, sim) -> None:
        """Schedule the first tick at the first submission."""
        sim.at(sim.env.now, self._tick)

    # -- one tick -------------------------------------------------------------------------
    def _tick(self, sim) -> None:
        t0 = time.perf_counter()
        st = sim.state
        now = sim.env.now
        if self._current is None:
            cap = None
            if self.settings.caps_w and isinstance(st.power, PowerState):
                cap = float(st.power.cap.cap_at(now))
            spec = make_policy(self.policy).settings()
            params = tuple((name, spec.get(name)) for name, _ in self.settings.params)
            self._current = Candidate(st.active_procs, cap, self._policy_window(), params)
        snap = st.snapshot()
        record: dict[str, Any] = {"time_s": now, "running": snap.n_running,
                                  "waiting": snap.n_waiting}
        s = self.settings
        if now - self._last_change_s < s.min_dwell_s:
            record.update(trials=[], chosen=self._current.as_dict(),
                          reason=f"kept: changed less than min_dwell_s ago", sla_met=None)
        else:
            cands = s.candidates(st.total_procs)
            self._limit = s.sla_max
            if self.feedback is not None:  # the limit from the slowdown realized so far
                pressure = self.feedback.pressure(st.start_s, now)
                self._limit = self.feedback.limit_at(pressure)
                record["feedback"] = {"pressure": pressure, "limit": self._limit}
            self._cut.clear()
            try:
                task = self._task(sim, snap)
                trials = self._search(task, cands, snap.n_waiting)
                failed = [t for t in trials if t.error is not None]
                if not failed:
                    best, reason, met = choose(trials, s.sla_metric, self._limit)
                    if not met:  # raises when a what-if run for it fails
                        trials = self._complete_closest(task, trials, snap.n_waiting)
                        best, reason, met = choose(trials, s.sla_metric, self._limit)
            except Exception as exc:  # e.g. a worker process died
                trials = []
                failed = [f"{type(exc).__name__}: {exc}"]
            if failed:
                record.update(trials=[t.as_dict() for t in trials], chosen=self._current.as_dict(),
                              reason="kept: a what-if failed", sla_met=None,
                              failure=failed[0] if isinstance(failed[0], str) else failed[0].error)
            else:
                chosen = self._limit_step(best.candidate, s.active_counts(st.total_procs))
                if chosen != best.candidate:
                    reason += f"; limited to max_step {s.max_step}"
                record.update(trials=[t.as_dict() for t in trials], chosen=chosen.as_dict(),
                              reason=reason, sla_met=met)
                self._apply(sim, chosen)
        self._cut.clear()
        if record["sla_met"] is not None:
            self._after_miss = not record["sla_met"]
        self.wall_s += time.perf_counter() - t0
        self.decisions.append(record)
        if not sim.finished:
            sim.at(now + s.interval_s, self._tick)

    def _policy_window(self) -> int | None:
        if not self.settings.windows:
            return None
        return int(make_policy(self.policy).window)

    def _task(self, sim, snap: Snapshot) -> WhatIfTask:
        s = self.settings
        arrivals = arrivals_power = None
        if s.arrivals != "none" and self.jobs is not None:
            if not self._submit:
                self._submit = self.jobs.submit_s.tolist()
            now = snap.now_s
            if s.arrivals == "oracle":
                lo, hi = bisect_right(self._submit, now), bisect_right(self._submit, now + s.interval_s)
                shift = 0.0
            else:  # recent: the last interval's arrivals, replayed one interval later
                lo = bisect_right(self._submit, now - s.interval_s)
                hi = bisect_right(self._submit, now)
                shift = s.interval_s
            if hi > lo:
                t = self.jobs
                arrivals = JobTable(t.job_id[lo:hi], t.submit_s[lo:hi] + shift, t.procs[lo:hi],
                                    t.estimate_s[lo:hi], t.runtime_s[lo:hi])
                if sim.state.power is not None:
                    arrivals_power = sim.state.power.subset(list(range(lo, hi)))
        return WhatIfTask(snap, self.policy, s.cost, arrivals, arrivals_power, s.horizon_s,
                          s.interval_s, self.wake_energy_j, (s.sla_metric, self._limit),
                          sim.wake_latency_s)

    def _evaluate(self, task: WhatIfTask, cands: list[Candidate], waiting: int,
                  pool: bool | None = None) -> list[Trial]:
        """The candidates' trials, in order: in this process, or split over the pool when
        the tick is worth a process hop (see :meth:`_use_pool`; ``pool`` True or False
        settles it instead). Either way the trials are the same; only the wall time
        differs."""
        self.whatifs += len(cands)
        s = self.settings
        n = 1 if self.parallel is None else min(len(cands), _workers(self.parallel))
        if pool is None:
            pool = (n >= 2 and waiting >= s.parallel_min_waiting
                    and self._pool_pays(task, len(cands), n))
        if n < 2 or not pool:
            t0 = time.perf_counter()
            trials = self._here(task, cands)
            self._per_whatif_s = (time.perf_counter() - t0) / max(1, len(cands))
            if self._hop_s is not None:  # an old measurement fades, so one slow trip
                self._hop_s *= 0.99        # does not keep the pool away for good
            return trials
        from joblib import delayed

        chunks = [cands[i::n] for i in range(n)]
        t0 = time.perf_counter()
        if not getattr(self.parallel, "overlaps", False):  # every share to the workers
            parts = self.parallel(delayed(_timed_batch)(self.batch, task, c, s.seed)
                                  for c in chunks)
        else:  # the first share here, while the workers run the others
            pending = self.parallel.submit(delayed(_timed_batch)(self.batch, task, c, s.seed)
                                           for c in chunks[1:])
            parts = [self._local_share(task, chunks[0], pending)]
            parts.extend(pending)
        wall = time.perf_counter() - t0
        busy = [seconds for _, seconds in parts]
        self._per_whatif_s = sum(busy) / len(cands)
        hop = max(0.0, wall - max(busy))
        self._hop_s = hop if self._hop_s is None else 0.5 * (self._hop_s + hop)
        by_cand = {t.candidate: t for part, _ in parts for t in part}
        return [by_cand[c] for c in cands]

    def _local_share(self, task: WhatIfTask, cands: list[Candidate],
                     pending) -> tuple[list[Trial], float]:
        """This process's share of a split evaluation (the workers' shares are
        ``pending``: dropped, with their workers stopped, if this one cannot finish).

        A joblib backend's threads in this process send the other shares off while
        this one runs; Python lets a waiting thread in only every
        ``sys.getswitchinterval()`` (5 ms by default, about what a tick's what-ifs
        take), so for the share it is 0.2 ms (through loky, sampled SDSC-BLUE ticks
        then took 1.00x of their in-process time instead of 1.27x). olsctl's own
        workers need no thread here: for them it changes nothing."""
        t0 = time.perf_counter()
        switch = sys.getswitchinterval()
        sys.setswitchinterval(min(switch, 2e-4))
        try:
            trials = self._here(task, cands)
        except BaseException:
            pending.close()
            raise
        finally:
            sys.setswitchinterval(switch)
        return trials, time.perf_counter() - t0

    def _here(self, task: WhatIfTask, cands: list[Candidate]) -> list[Trial]:
        """The trials of ``cands`` run in this process; those cut short are kept, to go
        on if needed (:meth:`_complete_closest`)."""
        if self.batch is what_if_batch:
            return what_if_batch(task, cands, self.settings.seed, keep=self._cut)
        return self.batch(task, cands, self.settings.seed)

    def _pool_pays(self, task: WhatIfTask, count: int, workers: int) -> bool:
        """:meth:`_use_pool`, once the round trip is known: in auto mode, the first time
        the pool could be used, two trips with no what-if in them measure it (the first
        also starts the workers, so it does not count)."""
        if (self.settings.pool_min_s is None and self._hop_s is None
                and self._per_whatif_s is not None):
            from joblib import delayed

            for _ in range(2):
                t0 = time.perf_counter()
                ((_, busy),) = self.parallel([delayed(_timed_batch)(self.batch, task, [],
                                                                    self.settings.seed)])
                self._hop_s = max(0.0, time.perf_counter() - t0 - busy)
        return self._use_pool(count, workers)

    def _use_pool(self, count: int, workers: int) -> bool:
        """Whether ``count`` what-ifs over ``workers`` workers should go to the pool.
        With ``pool_min_s`` set, when they are expected to take at least that long in
        this process; by default (auto), when splitting them is expected to save more
        than 1.5 times the wall time a pool round trip has been adding (measured on the
        pool's calls, 20 ms until then; a measurement fades by 1% a tick run here). The
        expectation is the last evaluation's time per what-if (ticks an hour apart see
        similar queues); the first evaluation runs
        in this process, unless ``pool_min_s`` is 0. Auto also keeps in this process the
        ticks after one that missed the SLA: such a tick likely misses too, and its
        what-ifs cut short then go on, which only those run here can do."""
        floor = self.settings.pool_min_s
        if self._per_whatif_s is None:
            return floor == 0
        if floor is None and self._after_miss:
            return False
        expected = self._per_whatif_s * count
        if floor is not None:
            return expected >= floor
        hop = 0.02 if self._hop_s is None else self._hop_s
        return expected * (1.0 - 1.0 / workers) > 1.5 * hop

    def _search(self, task: WhatIfTask, cands: list[Candidate], waiting: int) -> list[Trial]:
        s = self.settings
        if s.search == "grid":
            return self._evaluate(task, cands, waiting)
        if s.search == "cheapest-first":
            return self._cheapest_first(task, cands, waiting)
        # bisect along the first setting with several values (active processors, else the
        # cap, else the window): per combination of the others, the smallest value meeting
        # the SLA, assuming a larger one never hurts; all combinations advance together,
        # one probe each per round
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
            for t in self._evaluate(task, probes, waiting):
                done[t.candidate] = t
                if t.error is not None:
                    return [done[c] for c in cands if c in done]
            for k, b in bounds.items():
                lo, hi = b
                if lo < hi:
                    mid = (lo + hi) // 2
                    if done[groups[k][mid]].metric(s.sla_metric) <= self._limit:
                        b[1] = mid
                    else:
                        b[0] = mid + 1
        return [done[c] for c in cands if c in done]

    def _cheapest_first(self, task: WhatIfTask, cands: list[Candidate],
                        waiting: int) -> list[Trial]:
        """The candidates from the cheapest up (by the cost known before the what-if,
        ties as :func:`choose` breaks them), in rounds (one candidate in this process, or
        one per worker when the pool pays), until one meets the SLA: every cheaper one was tried and missed, so it is the one ``grid``
        would choose; when none meets, all were tried, as with ``grid``. Trials after
        the first that meets are dropped, so the log does not depend on the workers."""
        s = self.settings

        def rank(c: Candidate) -> tuple:
            return (weighted_cost(task.cost, known_costs(task, c)), *_bigger_first(c))

        order = sorted(cands, key=rank)
        workers = 1
        if self.parallel is not None and waiting >= s.parallel_min_waiting:
            workers = _workers(self.parallel)
        kept: set[Candidate] = set()
        done: dict[Candidate, Trial] = {}
        i = 0
        while i < len(order):
            # a round: the next candidate in this process, or the next ones side by side
            # on the workers when that is expected to pay (decided again every round)
            width = min(workers, len(order) - i)
            pool = width > 1 and self._pool_pays(task, width, width)
            batch = order[i:i + (width if pool else 1)]
            i += len(batch)
            done.update(zip(batch, self._evaluate(task, batch, waiting, pool)))
            for c in batch:
                kept.add(c)
                if done[c].error is not None or done[c].metric(s.sla_metric) <= self._limit:
                    self.whatifs -= len(done) - len(kept)  # count only what is logged
                    return [done[c] for c in cands if c in kept]
        return [done[c] for c in cands]

    def _complete_closest(self, task: WhatIfTask, trials: list[Trial], waiting: int) -> list[Trial]:
        """No candidate meets the SLA, so the closest wins: what-ifs cut short hold only a
        lower bound, so each one that could still be the closest goes on (from where it
        stopped when it ran in this process, else from the start), from the lowest bound
        up, until the complete ones settle it (the choice is then the one a run without
        cut-offs makes). It is cut short again once it surely scores worse than the best
        complete one so far."""
        metric = self.settings.sla_metric
        trials = list(trials)
        while True:
            best = min((t.metric(metric) for t in trials if t.complete), default=INF)
            open_ = [i for i, t in enumerate(trials) if not t.complete and t.metric(metric) <= best]
            if not open_:
                return trials
            i = min(open_, key=lambda i: (trials[i].metric(metric), -trials[i].active_procs))
            # a run that surely scores worse than the best complete one cannot be the
            # closest: it is cut short again, with a bound above that one
            stop = None if best == INF else (metric, best)
            c = trials[i].candidate
            run = self._cut.pop(c, None)
            if run is None:
                trials[i] = self._evaluate(replace(task, stop_above=stop), [c], waiting)[0]
            else:  # cut short in this process: it goes on from where it stopped
                self.whatifs += 1
                try:
                    trials[i] = run.resume(stop)
                except Exception as exc:  # as a what-if that raises
                    trials[i] = _failed(task, c, f"{type(exc).__name__}: {exc}")
                if not trials[i].complete:
                    self._cut[c] = run
            if trials[i].error is not None:
                raise RuntimeError(trials[i].error)

    def _limit_step(self, chosen: Candidate, counts: list[int]) -> Candidate:
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

    def _apply(self, sim, c: Candidate) -> None:
        cur = self._current
        if c == cur:
            return
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
        return "".join(json.dumps(d) + "\n" for d in self.decisions)

    def summary(self) -> dict:
        s = self.settings
        ticks = [d for d in self.decisions if d["trials"]]
        changes = 0
        prev = None
        for d in self.decisions:
            if prev is not None and d["chosen"] != prev:
                changes += 1
            prev = d["chosen"]
        return {"ticks": len(self.decisions),
                "sla_misses": sum(1 for d in ticks if d["sla_met"] is False),
                "failures": sum(1 for d in self.decisions if "failure" in d),
                "changes": changes,
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
        return {"feedback": {"relax_below": fs.relax_below, "full_above": fs.full_above,
                             "window_s": self.feedback.window_s,
                             "tightened_ticks": sum(1 for v in limits
                                                    if v < self.settings.sla_max),
                             "mean_limit": math.fsum(limits) / len(limits) if limits
                             else None}}


def _axes(c: Candidate) -> tuple:
    return (c.active_procs, -INF if c.cap_w is None else c.cap_w,
            0 if c.window is None else c.window)


def _workers(parallel) -> int:
    return processes_for(getattr(parallel, "n_jobs", 1) or 1)


def _json_float(v: float | None) -> float | None:
    """JSON has no infinity: write it as null."""
    return None if v is None or not math.isfinite(v) else v
