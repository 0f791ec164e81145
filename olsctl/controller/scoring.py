"""Trial scoring: what a candidate setting is, and what its what-if says about it.

Here belong the candidate (:class:`Candidate`), the picklable work shipped to a worker
(:class:`WhatIfTask`), the frozen result (:class:`Trial`), the pure top-level what-if
(:func:`what_if`, :class:`WhatIfRun`, :func:`what_if_batch`) and how a trial is scored:
SLA metrics of the snapshot's jobs, the power forecast over the coming interval, and the
cost. Nothing here knows about ticks, searches or worker pools.

:func:`what_if` is a pure top-level function of (task, candidate, seed), so results do
not depend on the number of workers or the backend.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, fields, replace
from typing import Any, Callable, Sequence

import numpy as np

from olsctl.metrics import BSLD_BOUND_S
from olsctl.policies import forward as fw
from olsctl.policies import make_policy
from olsctl.policies.easy import EasyBackfill
from olsctl.policies.mqbf import MultiQueueBackfill
from olsctl.state import SimState, Snapshot
from olsctl.controller.forecast import power_forecast
from olsctl.mqbf_whatif import MqbfTemplate
from olsctl.whatif import EasyTemplate, JobTable, steps

#: metrics an SLA can bound (of the snapshot's jobs in a what-if)
SLA_METRICS = ("mean_bsld", "p95_bsld", "mean_wait_s", "max_wait_s")
#: cost parts a candidate's cost can weigh
COSTS = ("active_procs", "energy", "power_cap", "peak_power")
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
    #: the setting in force (what a candidate changes, see :func:`apply_candidate`);
    #: None: a candidate's cap, window and settings count as changes
    current: "Candidate | None" = None
    #: the arrivals' job model under RMAP/PARM (olsctl.perfmodel.BudgetRun)
    arrivals_budget: Any = None


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
        out = self.candidate.as_dict()
        out["jobs"] = self.jobs
        out["unstarted"] = self.unstarted
        if self.censored:
            out["censored"] = self.censored
        out["mean_bsld"] = _json_float(self.mean_bsld)  # (SLA_METRICS, in their order)
        out["p95_bsld"] = _json_float(self.p95_bsld)
        out["mean_wait_s"] = _json_float(self.mean_wait_s)
        out["max_wait_s"] = _json_float(self.max_wait_s)
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


#: the fields of :class:`Trial` that :func:`new_trial` leaves at their defaults
_TRIAL_REST = {f.name: f.default for f in fields(Trial)
               if f.name not in ("candidate", "jobs", "unstarted", "censored", "mean_bsld",
                                 "p95_bsld", "mean_wait_s", "max_wait_s", "cost")}


def new_trial(candidate: Candidate, jobs: int, unstarted: int, censored: int,
              mean_bsld: float, p95_bsld: float, mean_wait_s: float, max_wait_s: float,
              cost: float, stopped_at_s: float | None = None,
              queue_mean_bsld: tuple[float, ...] | None = None) -> Trial:
    """``Trial(candidate, ..., cost, stopped_at_s=..., queue_mean_bsld=...)``, the other
    fields at their defaults, made in a third of the time (without the frozen
    dataclass's ``__init__``, which sets each of the 16 fields through
    ``object.__setattr__``): a tick's batch of what-ifs makes one per candidate."""
    trial = object.__new__(Trial)
    d = trial.__dict__
    d["candidate"] = candidate
    d["jobs"] = jobs
    d["unstarted"] = unstarted
    d["censored"] = censored
    d["mean_bsld"] = mean_bsld
    d["p95_bsld"] = p95_bsld
    d["mean_wait_s"] = mean_wait_s
    d["max_wait_s"] = max_wait_s
    d["cost"] = cost
    d.update(_TRIAL_REST)
    if stopped_at_s is not None:
        d["stopped_at_s"] = stopped_at_s
    if queue_mean_bsld is not None:
        d["queue_mean_bsld"] = queue_mean_bsld
    return trial


def known_costs(task: WhatIfTask, candidate: Candidate) -> dict[str, float]:
    """The parts of a candidate's cost known before its what-if runs: its active
    processors, its tuned numeric policy settings (``policy.<name>``) and, when a policy
    meters power against a cap, the cap it sets (or the one in force)."""
    snap = task.snapshot
    parts: dict[str, float] = {"active_procs": float(candidate.active_procs)}
    for name, value in candidate.params:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            parts[f"policy.{name}"] = float(value)
    if snap.power is not None:
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


def apply_candidate(state: SimState, candidate: Candidate, current: Candidate | None,
                    wake_latency_s: float) -> None:
    """Apply ``candidate`` to a what-if's state as the controller applies it to the main
    simulator: only what differs from the setting in force (``current``) changes. More
    active processors than in force wait for the wake latency, fewer apply at once; a
    cap holds from now on; a change makes the snapshot instant's pass due (it may start
    jobs), as it does in the main simulator."""
    if candidate.active_procs != state.target_active:
        state.request_active(candidate.active_procs, wake_latency_s)
    cap_w = candidate.cap_w
    if state.power is not None and cap_w is not None and (current is None
                                                           or cap_w != current.cap_w):
        from olsctl.power.cap import CapSchedule

        state.power.cap = CapSchedule.constant(cap_w)
        state.pass_due = True
        if state.limit is not None:
            state.limit.dirty = True
    if current is not None and (candidate.window, candidate.params) != (current.window,
                                                                         current.params):
        state.pass_due = True
    elif current is None and (candidate.window is not None or candidate.params):
        state.pass_due = True


class _Machine:
    """The part of a what-if's state a candidate changes (:func:`apply_candidate`) when
    there is no power to meter: active processors, a wake under way, whether the pass
    is due. The rules are :class:`SimState`'s own methods."""

    __slots__ = ("now_s", "active_procs", "wake", "pass_due", "power", "limit")
    target_active = SimState.target_active
    request_active = SimState.request_active
    set_active = SimState.set_active


def setting_of(snap: Snapshot, candidate: Candidate, current: Candidate | None,
               wake_latency_s: float) -> tuple[int, "tuple[float, int] | None", bool]:
    """What :func:`apply_candidate` makes of a snapshot without power (no jobs needed):
    (active processors, the wake under way, whether the pass is due)."""
    m = _Machine()
    m.now_s, m.active_procs, m.wake, m.pass_due = (snap.now_s, snap.active_procs, snap.wake,
                                                   snap.pass_due)
    m.power = m.limit = None
    apply_candidate(m, candidate, current, wake_latency_s)  # type: ignore[arg-type]
    return m.active_procs, m.wake, m.pass_due


def cut_trial(candidate: Candidate, n: int, metric: str, bound: float, cost: float,
              stopped_at_s: float) -> Trial:
    """The trial of a what-if of ``n`` jobs cut short at ``stopped_at_s`` by the
    ``bound`` of ``metric``: the other metrics unknown (NaN)."""
    values = [math.nan] * len(SLA_METRICS)
    values[SLA_METRICS.index(metric)] = bound
    return new_trial(candidate, n, 0, 0, *values, cost, stopped_at_s)


class WhatIfRun:
    """One what-if (see :func:`what_if`; ``trial`` is its result). One cut short can go
    on under a higher limit (:meth:`resume`), with the trial a new what-if under that
    limit would give, without running its start again."""

    def __init__(self, task: WhatIfTask, candidate: Candidate) -> None:
        self.task, self.candidate = task, candidate
        self.steps = self.arrays = None
        snap = task.snapshot
        n = self.n = int(snap.job_id.size)
        active = self.active = int(candidate.active_procs)
        self.cost_parts = known_costs(task, candidate)
        self.metered = snap.power is not None  # a policy meters power
        too_wide = 0 if active >= _widest_waiting(snap) else \
            int((snap.procs[snap.n_running:] > active).sum())
        if too_wide:  # they can never start on this machine: no need to simulate
            self.trial = Trial(candidate, n, too_wide, 0, INF, INF, INF, INF, self._cost())
            return
        self.policy = _policy(candidate.policy_spec(task.policy))
        self.until = INF if task.horizon_s is None else snap.now_s + task.horizon_s
        template = _template(snap, self.policy, self.until, task)
        if template is not None:
            # the policy's compiled loop, from the tick's arrays (no live state)
            setting = setting_of(snap, candidate, task.current, task.wake_latency_s)
            if type(template) is EasyTemplate:
                self.arrays = template.run(self.policy.order_code, *setting)
            else:
                self.arrays = template.run(*setting)
            self.state = None
            self.steps = self.arrays.steps()
        else:
            state = self.state = SimState.from_snapshot(snap)
            apply_candidate(state, candidate, task.current, task.wake_latency_s)
            self.steps = steps(state, self.policy, task.arrivals, task.arrivals_power,
                               watch_snapshot=True, until_s=self.until,
                               stop_above=task.stop_above,
                               arrivals_budget=task.arrivals_budget)
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
        task, candidate, n, state, arrays = (self.task, self.candidate, self.n, self.state,
                                             self.arrays)
        snap = task.snapshot
        if stopped is not None:
            return cut_trial(candidate, n, task.stop_above[0], stopped, self._cost(),
                             (state or arrays).now_s)
        if arrays is not None:
            start = arrays.column(fw.START).copy()
            submit, runtime = arrays.column(fw.SUBMIT), arrays.column(fw.RUNTIME)
        else:
            start = np.array(state.start_s[:n], dtype=float)
            submit = np.array(state.submit_s[:n], dtype=float)
            runtime = np.array(state.runtime_s[:n], dtype=float)
        censored = unstarted = 0
        waiting = np.isnan(start)
        if waiting.any():
            if task.horizon_s is not None:
                # still waiting at the horizon: it has waited at least until then
                start[waiting] = self.until
                censored = int(waiting.sum())
            else:
                unstarted = int(waiting.sum())
        energy = mean_w = peak_w = None
        over_cap = False
        if self.metered:
            energy, mean_w, peak_w = power_forecast(snap, state, task, self.active)
            self.cost_parts.update(energy=energy, peak_power=peak_w)
            # (under a power limit the cap holds: what it costs is the jobs' stretch)
            over_cap = (candidate.cap_w is not None and peak_w > candidate.cap_w
                        and state.limit is None)
        cost = self._cost()
        if n == 0:
            return Trial(candidate, 0, 0, 0, 1.0, 1.0, 0.0, 0.0, cost, None, energy,
                         mean_w, peak_w, over_cap=over_cap)
        if unstarted:
            return Trial(candidate, n, unstarted, censored, INF, INF, INF, INF, cost, None,
                         energy, mean_w, peak_w, over_cap=over_cap)
        wait = start - submit
        if state is not None and state.limit is not None:
            # throttled jobs' stretch counts as delay
            stretch_of = state.limit.stretch_of
            wait += np.array([stretch_of(state, k) for k in range(n)], dtype=float)
        # olsctl.metrics.job_bsld: 1 + wait / max(runtime, BSLD_BOUND_S), job by job
        b = BSLD_BOUND_S
        bsld_array = 1.0 + wait / np.where(runtime > b, runtime, b)
        bsld = bsld_array.tolist()
        wait = wait.tolist()
        queue_bsld = None
        if arrays is not None and self.policy.n_queues:  # the compiled MQBF loop's
            # queues: each queue's bsld summed in job order, as below
            queue_of = arrays.queue_of
            sums = np.bincount(queue_of, weights=bsld_array, minlength=self.policy.n_queues)
            counts = np.bincount(queue_of, minlength=self.policy.n_queues).tolist()
            queue_bsld = tuple(total / count if count else 1.0
                               for total, count in zip(sums.tolist(), counts))
        elif self.policy.n_queues:  # a multi-queue policy: its queues scored apart too
            queue_index = self.policy.queue_index
            sums = [[0.0, 0] for _ in range(self.policy.n_queues)]
            for e, b in zip(state.estimate_s, bsld):
                q = sums[queue_index(e)]
                q[0] += b
                q[1] += 1
            queue_bsld = tuple(total / count if count else 1.0 for total, count in sums)
        return Trial(candidate, n, 0, censored, math.fsum(bsld) / n, percentile(bsld, 95.0),
                     math.fsum(wait) / n, max(wait), cost, queue_bsld, energy, mean_w,
                     peak_w, over_cap=over_cap)


#: the last snapshot seen by :func:`_widest_waiting`, and its widest waiting job
_WIDEST: list = [None, 0]


def _widest_waiting(snap: Snapshot) -> int:
    """The most processors a waiting job of ``snap`` asks for (0: none waits), found once
    for all the candidates of a tick."""
    if _WIDEST[0] is not snap:
        waiting = snap.procs[snap.n_running:]
        _WIDEST[:] = [snap, int(waiting.max()) if waiting.size else 0]
    return _WIDEST[1]


#: the tick's what-if arrays (:class:`olsctl.whatif.EasyTemplate`,
#: :class:`olsctl.mqbf_whatif.MqbfTemplate`, or None when its snapshot fits neither), one
#: at a time, by (snapshot, horizon, SLA bound[, MQBF policy])
_TEMPLATE: list = [None, None]


def _template(snap: Snapshot, policy: Any, until_s: float,
              task: WhatIfTask) -> "EasyTemplate | MqbfTemplate | None":
    """The template of this snapshot's what-ifs under ``policy``, made once for all the
    candidates of a tick (or of a batch, in a worker); None when the policy's compiled
    loop cannot run them (another policy or order, power, a limit, a budget, arrivals):
    its Python pass runs them instead."""
    if task.arrivals is not None and len(task.arrivals):
        return None
    kind = type(policy)
    if kind is EasyBackfill:
        key = (snap, until_s, task.stop_above)
    elif kind is MultiQueueBackfill:
        key = (snap, until_s, task.stop_above, policy)
    else:
        return None
    old, got = _TEMPLATE
    if old is not None and old[0] is snap and old[1:] == key[1:]:
        return got  # (a template, or None when the snapshot does not fit one)
    if kind is EasyBackfill:
        got = EasyTemplate(snap, until_s, task.stop_above) if EasyTemplate.fits(snap) \
            else None
    else:
        got = MqbfTemplate(snap, policy, until_s, task.stop_above) \
            if MqbfTemplate.fits(snap, policy) else None
    _TEMPLATE[:] = [key, got]
    return got


_POLICIES: dict[str, Any] = {}


def _policy(spec: dict) -> Any:
    """The policy of ``spec``, built once per process (policies hold settings only)."""
    try:  # the settings with their types: 1, 1.0 and True stay apart (in lists too)
        key: Any = tuple((k, type(v), tuple((type(x), x) for x in v) if type(v) is list
                          else v) for k, v in sorted(spec.items()))
        hash(key)
    except TypeError:  # a list among them
        key = json.dumps(spec, sort_keys=True, default=str)
    got = _POLICIES.get(key)
    if got is None:
        if len(_POLICIES) > 256:
            _POLICIES.clear()
        got = _POLICIES[key] = make_policy(spec)
    return got


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile with linear interpolation between order statistics (numpy's
    default method; :func:`olsctl.policies.forward.percentile_of`, which compiled
    what-if batches call too)."""
    return float(fw.percentile_of(np.asarray(values, dtype=float), q))


def what_if_batch(task: WhatIfTask, candidates: Sequence[Candidate], seed: int = 0,
                  keep: dict[Candidate, Any] | None = None,
                  first_met: tuple[str, float] | None = None) -> list[Trial]:
    """:func:`what_if` for several candidates (one shipment of the task); a candidate
    whose what-if raises gives a trial carrying the error instead. With ``keep`` (in
    this process only), the what-ifs cut short are kept there by candidate, to go on
    later (:meth:`WhatIfRun.resume`). With ``first_met`` = (metric, limit), only the
    trials up to the first with ``metric <= limit`` or an error. EASY batches that
    qualify run in one compiled call (:func:`olsctl.controller.easy_batch.easy_batch`),
    with the same trials."""
    return run_batch(task, candidates, keep, first_met)[0]


def run_batch(task: WhatIfTask, candidates: Sequence[Candidate],
              keep: dict[Candidate, Any] | None = None,
              first_met: tuple[str, float] | None = None,
              then_closest: bool = False) -> tuple[list[Trial], int]:
    """:func:`what_if_batch`'s trials, and how many times a what-if cut short went on:
    with ``then_closest`` (and ``first_met``), a compiled EASY batch in which no
    candidate meets the SLA also finishes the closest (see
    :func:`olsctl.controller.easy_batch.easy_batch`)."""
    # (modules importing this one)
    from olsctl.controller.easy_batch import easy_batch
    from olsctl.controller.mqbf_batch import mqbf_batch

    try:
        fast = easy_batch(task, candidates, keep, first_met, then_closest=then_closest)
        if fast is None:
            fast = mqbf_batch(task, candidates, keep, first_met, then_closest=then_closest)
    except Exception as exc:  # as when each what-if raises (the first, if it stops there)
        error = f"{type(exc).__name__}: {exc}"
        return [_failed(task, c, error) for c in candidates[:1 if first_met else None]], 0
    if fast is not None:
        return fast
    out: list[Trial] = []
    for c in candidates:
        try:
            run = WhatIfRun(task, c)
            out.append(run.trial)
            if keep is not None and not run.trial.complete:
                keep[c] = run
        except Exception as exc:  # reported in the decision log; the run goes on
            out.append(_failed(task, c, f"{type(exc).__name__}: {exc}"))
        if first_met is not None and (out[-1].error is not None
                                      or out[-1].metric(first_met[0]) <= first_met[1]):
            break
    return out, 0


def _timed_batch(batch: Callable[..., list[Trial]], task: WhatIfTask,
                 candidates: Sequence[Candidate], seed: int = 0) -> tuple[list[Trial], float]:
    """``batch(task, candidates, seed)`` and the wall seconds it took (in a worker)."""
    t0 = time.perf_counter()
    trials = batch(task, candidates, seed)
    return trials, time.perf_counter() - t0


def _failed(task: WhatIfTask, c: Candidate, error: str) -> Trial:
    return Trial(c, int(task.snapshot.job_id.size), 0, 0, INF, INF, INF, INF, INF, error=error)


def _json_float(v: float | None) -> float | None:
    """JSON has no infinity: write it as null."""
    return None if v is None or not math.isfinite(v) else v
