"""What a candidate setting is and what its what-if said about it: the candidate, the
picklable task shipped to a worker, the frozen trial, and the pure functions that cost a
candidate and set it on a state or read its machine setting. Nothing here runs a what-if.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from olsctl.policies import make_policy
from olsctl.policies.core.score import percentile_of
from olsctl.state import SimState, Snapshot
from olsctl.whatif import JobTable

#: metrics an SLA can bound (of the snapshot's jobs in a what-if)
SLA_METRICS = ("mean_bsld", "p95_bsld", "mean_wait_s", "max_wait_s")

#: cost parts a candidate's cost can weigh
COSTS = ("active_procs", "energy", "idle_energy", "power_cap", "peak_power")

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
    there is no power limit: active processors, a wake under way, whether the pass is
    due, and (with power) the cap. The rules are :class:`SimState`'s own methods."""

    __slots__ = ("now_s", "active_procs", "wake", "pass_due", "power", "limit")
    target_active = SimState.target_active
    request_active = SimState.request_active
    set_active = SimState.set_active


class _Meter:
    """The part of a what-if's power a candidate changes: the cap schedule."""

    __slots__ = ("cap",)

    def __init__(self, cap) -> None:
        self.cap = cap


def _applied(snap: Snapshot, candidate: Candidate, current: Candidate | None,
             wake_latency_s: float) -> _Machine:
    m = _Machine()
    m.now_s, m.active_procs, m.wake, m.pass_due = (snap.now_s, snap.active_procs, snap.wake,
                                                   snap.pass_due)
    m.power = None if snap.power is None else _Meter(snap.power.cap)
    m.limit = None
    apply_candidate(m, candidate, current, wake_latency_s)  # type: ignore[arg-type]
    return m


def setting_of(snap: Snapshot, candidate: Candidate, current: Candidate | None,
               wake_latency_s: float) -> tuple[int, "tuple[float, int] | None", bool]:
    """What :func:`apply_candidate` makes of a snapshot without a power limit (no jobs
    needed): (active processors, the wake under way, whether the pass is due)."""
    m = _applied(snap, candidate, current, wake_latency_s)
    return m.active_procs, m.wake, m.pass_due


def power_setting_of(snap: Snapshot, candidate: Candidate, current: Candidate | None,
                     wake_latency_s: float) -> tuple[int, "tuple[float, int] | None", bool,
                                                     float]:
    """:func:`setting_of` for a snapshot with power, and the cap in force now (W)."""
    m = _applied(snap, candidate, current, wake_latency_s)
    return m.active_procs, m.wake, m.pass_due, m.power.cap.cap_at(snap.now_s)


def cut_trial(candidate: Candidate, n: int, metric: str, bound: float, cost: float,
              stopped_at_s: float) -> Trial:
    """The trial of a what-if of ``n`` jobs cut short at ``stopped_at_s`` by the
    ``bound`` of ``metric``: the other metrics unknown (NaN)."""
    values = [math.nan] * len(SLA_METRICS)
    values[SLA_METRICS.index(metric)] = bound
    return new_trial(candidate, n, 0, 0, *values, cost, stopped_at_s)

_POLICIES: dict[str, Any] = {}
#: (id of a base spec, the candidate's window and settings with their types) -> (the
#: base, the policy): the base is kept, so its id names it while the entry lives
_FOR_CANDIDATE: dict[tuple, tuple[dict, Any]] = {}


def candidate_policy(base: dict, candidate: Candidate) -> Any:
    """``policy_of(candidate.policy_spec(base))``, without building the spec again for
    the same base spec object and the same window and settings (a tick asks for it once
    per what-if)."""
    w = candidate.window
    key = (id(base), type(w), w, tuple((n, type(v), v) for n, v in candidate.params))
    try:
        hit = _FOR_CANDIDATE.get(key)
    except TypeError:  # a setting that is a list: no shortcut
        return policy_of(candidate.policy_spec(base))
    if hit is not None and hit[0] is base:
        return hit[1]
    policy = policy_of(candidate.policy_spec(base))
    if len(_FOR_CANDIDATE) > 1024:
        _FOR_CANDIDATE.clear()
    _FOR_CANDIDATE[key] = (base, policy)
    return policy


def policy_of(spec: dict) -> Any:
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
    default method; :func:`olsctl.policies.core.score.percentile_of`, which compiled
    what-if batches call too)."""
    return float(percentile_of(np.asarray(values, dtype=float), q))


def failed_trial(task: WhatIfTask, c: Candidate, error: str) -> Trial:
    return Trial(c, int(task.snapshot.job_id.size), 0, 0, INF, INF, INF, INF, INF, error=error)


def _json_float(v: float | None) -> float | None:
    """JSON has no infinity: write it as null."""
    return None if v is None or not math.isfinite(v) else v
