"""The policy contract, shipped with olsctl: :func:`check_policy` checks a policy, built
in or a user's own, the way olsctl's test suite checks every registered one.

What belongs here: the contract's checks, the small seeded cases they run on (synthetic
workloads, power profiles, cap schedules, active-processor requests, snapshot instants),
and what a check returns (:class:`ContractReport`) or raises (:class:`ContractError`).

The checks, each under every queue order the policy accepts, exact and user estimates,
and every event kind its registry entry allows (completions and arrivals always; with
power, a constant cap, a cap schedule, and a cap schedule held by a hardware limit that
throttles running jobs; active processors lowered and raised again, raises waiting for
a wake latency):

- ``strict-decisions``: every decision, in the main simulator and in what-ifs, passes
  the strict checker (no job started twice or before its submission, never more busy
  processors than active ones);
- ``whatif-fidelity``: a what-if started from a main-simulator snapshot, with no new
  arrivals and no setting change, gives the snapshot's jobs exactly the starts the main
  simulator gives them when no job arrives after the snapshot (with and without the
  strict checker, which may take different code paths);
- ``whatif-arrivals``: fed the jobs submitted after the snapshot as arrivals, the
  what-if gives exactly the main simulator's starts of the whole run;
- ``pickle``: the policy and the snapshot round-trip through pickle, and the copies
  give the same starts;
- ``settings``: ``policy.settings()`` names the policy and rebuilds an equal policy
  (through ``make_policy`` and a run config's policy section, for a registered one).

Nothing here imports numba; a what-if that runs compiled kernels imports it when run.
"""

from __future__ import annotations

import math
import pickle
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from olsctl.checker import NULL_CHECKER, Checker, StrictChecker
from olsctl.errors import OlsctlError, SimulationError
from olsctl.policies import REGISTRY, PolicyEntry, make_policy
from olsctl.power.cap import CapSchedule
from olsctl.power.limit import SHARES, Limit, LimitSettings
from olsctl.power.profiles import ProfileSettings, synthetic_profiles
from olsctl.power.runtime import PowerState, power_state
from olsctl.sim import MainSimulator
from olsctl.state import SimState, Snapshot
from olsctl.swf import SwfHeader
from olsctl.whatif import JobTable, WhatIfResult, run_whatif
from olsctl.workload import LoadReport, Workload

#: power of a processor idle, at full load and asleep in the synthetic cases, W
IDLE_W, PEAK_W, SLEEP_W = 100.0, 500.0, 10.0
#: seconds a sleeping processor takes to wake in the cases with active-processor changes
WAKE_S = 7.0

#: the checks :func:`check_policy` makes, in the order it reports them
CHECKS = ("settings", "strict-decisions", "whatif-fidelity", "whatif-arrivals", "pickle")

#: (power, wake) of a case: power None, ``"constant"`` (one cap), ``"schedule"`` (the cap
#: changes) or ``"throttle"`` (the cap changes and a hardware limit throttles running
#: jobs to hold it); wake: the active processors lowered and raised again before the
#: snapshot, one raise superseded by a later one while it waits for the wake latency
SCENARIOS: tuple[tuple[str | None, bool], ...] = (
    (None, False), (None, True), ("constant", False), ("schedule", False),
    ("schedule", True), ("throttle", False), ("throttle", True))

ESTIMATES = ("exact", "user")


class ContractError(OlsctlError):
    """A policy broke its contract: which check, in which case, and the first
    difference (for a start-time difference: the job, the expected and the got start)."""

    kind = "ContractError"

    def __init__(self, check: str, where: str, detail: str, job_id: int | None = None,
                 expected_s: float | None = None, got_s: float | None = None) -> None:
        super().__init__(f"{check}: {where}: {detail}" if where else f"{check}: {detail}")
        self.check, self.where, self.detail = check, where, detail
        self.job_id, self.expected_s, self.got_s = job_id, expected_s, got_s


@dataclass(frozen=True)
class ContractReport:
    """What :func:`check_policy` checked and found kept: the policy's name, the settings
    checked (one per queue order), the checks, the cases (settings x estimates x event
    kinds x workloads), the snapshots followed, the start times compared, and the jobs a
    hardware power limit throttled in the main simulator (the throttling cases act)."""

    policy: str
    specs: tuple[dict, ...]
    checks: tuple[str, ...]
    cases: int
    snapshots: int
    starts_compared: int
    throttled_jobs: int

    def __str__(self) -> str:
        return (f"{self.policy}: contract kept ({', '.join(self.checks)}) under "
                f"{len(self.specs)} setting(s), {self.cases} cases, {self.snapshots} "
                f"snapshots, {self.starts_compared} start times compared")


@dataclass(frozen=True)
class _Subject:
    """The policy under check: its name, its entry, and whether the registry holds the
    entry under that name (then it is built by ``make_policy``, else by the factory)."""

    name: str
    entry: PolicyEntry
    registered: bool

    def build(self, spec: Mapping[str, Any]):
        if self.registered:
            return make_policy({**spec, "name": self.name})
        return self.entry.factory(**{k: v for k, v in spec.items() if k != "name"})


def _subject(policy: str | PolicyEntry) -> _Subject:
    if isinstance(policy, PolicyEntry):
        for name, entry in REGISTRY.items():
            if entry is policy:
                return _Subject(name, policy, True)
        return _Subject(str(policy.factory(**policy.defaults()).name), policy, False)
    if policy not in REGISTRY:
        raise ValueError(f"no policy named {policy!r} is registered "
                         f"(registered: {', '.join(REGISTRY)})")
    return _Subject(policy, REGISTRY[policy], True)


def contract_specs(policy: str | PolicyEntry,
                   settings: Mapping[str, Any] | None = None) -> list[dict]:
    """The policy specs (``{"name": ..., **settings}``) that :func:`check_policy` checks:
    ``settings`` under each queue order the entry accepts, or under the order
    ``settings`` names."""
    subject = _subject(policy)
    base = {"name": subject.name, **{k: v for k, v in (settings or {}).items()
                                     if k != "name"}}
    if "order" not in subject.entry.params or "order" in base:
        return [base]
    return [{**base, "order": order} for order in subject.entry.orders]


def scenarios(entry: PolicyEntry) -> list[tuple[str | None, bool]]:
    """The (power, wake) cases of :data:`SCENARIOS` a policy runs under: a policy that
    meters a cap (``needs="power"``) only with power, one that keeps its own budget
    (``needs="budget"``) only without."""
    if entry.needs == "power":
        return [s for s in SCENARIOS if s[0] is not None]
    if entry.needs == "budget":
        return [s for s in SCENARIOS if s[0] is None]
    return list(SCENARIOS)


def check_policy(policy: str | PolicyEntry, settings: Mapping[str, Any] | None = None, *,
                 seeds: Sequence[int] = range(5)) -> ContractReport:
    """Check a policy against olsctl's policy contract (module docstring).

    ``policy``: a registered name, or a :class:`PolicyEntry` (registered or not; an
    unregistered one is built by its factory, and its name is its policy's ``name``).
    ``settings``: the policy's settings besides its name (its factory's defaults for the
    rest); with an ``order`` only that queue order is checked, else every order the
    entry accepts. ``seeds``: one small synthetic workload per seed, each followed from
    three snapshots. Raises :class:`ContractError` at the first broken check; returns
    what was checked. Deterministic: the same arguments check the same cases.
    """
    subject = _subject(policy)
    specs = contract_specs(policy, settings)
    tally = _Tally()
    for spec in specs:
        _check_settings(subject, spec)
    for spec in specs:
        for estimates in ESTIMATES:
            for power, wake in scenarios(subject.entry):
                for seed in seeds:
                    case = _Case(subject, spec, estimates, power, wake, int(seed))
                    for cut in case.cuts():
                        _check_snapshot(case, cut, tally)
                    tally.cases += 1
    return ContractReport(subject.name, tuple(specs), CHECKS, tally.cases, tally.snapshots,
                          tally.starts, tally.throttled)


class _Tally:
    """What the checks have gone through so far."""

    def __init__(self) -> None:
        self.cases = self.snapshots = self.starts = self.throttled = 0


# -- the synthetic cases -------------------------------------------------------------------

def synthetic_workload(rng: np.random.Generator) -> Workload:
    """A small workload drawn from ``rng``: 4 to 12 processors, 8 to 21 jobs arriving
    in bursts (many at the same instant), runtimes 1 to 100 s, user estimates over the
    runtime by a factor of 1 to 3 or unknown."""
    machine = int(rng.integers(4, 13))
    n = int(rng.integers(8, 22))
    gaps = rng.choice([0, 0, 1, 3, 10, 25], size=n)
    submit = np.cumsum(gaps).astype(float) + 100.0
    runtime = rng.choice([1, 5, 10, 10, 20, 37, 60, 100], size=n).astype(float)
    procs = rng.integers(1, machine + 1, size=n).astype(np.int64)
    factor = rng.choice([-1.0, 1.0, 1.5, 3.0], size=n)
    requested = np.where(factor < 0, -1.0, np.ceil(runtime * factor))
    none = np.full(n, -1, dtype=np.int64)
    return Workload("contract", machine, SwfHeader(), LoadReport("contract", n, n),
                    np.arange(1, n + 1, dtype=np.int64), submit, runtime, procs, requested,
                    none, none.copy())


def synthetic_cap(kind: str | None, w: Workload,
                  rng: np.random.Generator) -> CapSchedule | None:
    """The power cap of a case (None: no power): ``"constant"``, one cap; else a cap
    schedule with changes while the jobs arrive, one 20 s after the first arrival."""
    if kind is None:
        return None
    peak = w.machine_procs * PEAK_W
    if kind == "constant":
        return CapSchedule.constant(float(rng.choice([0.35, 0.6, 1.0])) * peak)
    t0, t1 = float(w.submit_s[0]), float(w.submit_s[-1]) + 60.0
    times = sorted(set(np.round(rng.uniform(t0, t1, size=3)).tolist()) | {t0 + 20.0})
    fracs = rng.choice([0.3, 0.5, 0.8, 1.0], size=len(times) + 1)
    return CapSchedule((-math.inf, *times), tuple(float(f) * peak for f in fracs))


def synthetic_power(w: Workload, cap: CapSchedule, seed: int) -> PowerState:
    """Seeded power data of ``w``'s jobs under ``cap``: synthetic profiles, three users,
    five job keys, and compute-boundness spread over [0, 1] by job id."""
    prof = synthetic_profiles(w, IDLE_W, PEAK_W, ProfileSettings(seed=seed))
    ids = w.job_id.tolist()
    power = power_state(prof, [j % 3 for j in ids], IDLE_W, SLEEP_W, PEAK_W, cap,
                        [j % 5 for j in ids], sample_s=7.0)
    power.kappa = [(j % 7) / 6.0 for j in ids]
    return power


class _Case:
    """One case: a policy spec, estimates, power and wake, and a seeded workload, with
    the main simulator over any part of it (the same policy, power, limit and
    active-processor requests each time)."""

    def __init__(self, subject: _Subject, spec: dict, estimates: str, power: str | None,
                 wake: bool, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.subject, self.spec, self.estimates, self.seed = subject, spec, estimates, seed
        self.power, self.wake = power, wake
        self.w = synthetic_workload(rng)
        self.cap = synthetic_cap(power, self.w, rng)
        self.requests: list[tuple[float, int]] = []
        if wake:
            m, t0 = self.w.machine_procs, float(self.w.submit_s[0])
            low = int(rng.integers(1, m))
            self.requests = [(t0 + 2.0, low), (t0 + 9.0, m - 1), (t0 + 12.0, m)]

    def describe(self, cut: float) -> str:
        settings = {k: v for k, v in self.spec.items() if k != "name"}
        power = {None: "no power", "constant": "constant cap", "schedule": "cap schedule",
                 "throttle": "cap schedule held by a throttling limit"}[self.power]
        wake = ", active processors changed" if self.wake else ""
        return (f"{self.subject.name} {settings}, {self.estimates} estimates, {power}{wake}, "
                f"seed {self.seed}, snapshot at t={cut:g}")

    def policy(self):
        return self.subject.build(self.spec)

    def cuts(self) -> list[float]:
        """The snapshot instants: two submit times and one 10.5 s after the first (a
        wake under way then, in the wake cases)."""
        submits = sorted(set(self.w.submit_s.tolist()))
        rng = np.random.default_rng(1000 + self.seed)
        picks = rng.choice(submits, size=min(2, len(submits)), replace=False).tolist()
        return sorted(picks + [float(submits[0]) + 10.5])

    def main(self, w: Workload) -> MainSimulator:
        policy = self.policy()
        sim = MainSimulator(w, policy, w.estimate_s(self.estimates), checker=StrictChecker())
        refused = policy.prepare(sim.state, w)
        if refused is not None:
            raise ContractError("strict-decisions", self.describe(float(w.submit_s[0])),
                                f"the policy refused the workload: {refused}")
        if self.cap is not None:
            sim.state.power = synthetic_power(w, self.cap, self.seed)
        if self.power == "throttle":
            sim.state.limit = Limit(LimitSettings(share=SHARES[self.seed % len(SHARES)],
                                                  min_clock=0.3, static_w=0.3 * PEAK_W))
        if self.requests:
            sim.wake_latency_s = WAKE_S
        return sim

    def run(self, w: Workload, cut: float) -> tuple[dict[int, float], Snapshot, int]:
        """The main simulator over ``w`` with the requests due by ``cut`` and a snapshot
        at ``cut``: every job's start (NaN: never started), the snapshot, and the jobs
        the power limit throttled."""
        sim = self.main(w)
        snaps: list[Snapshot] = []
        for t, n in self.requests:
            if t <= cut:
                sim.at(t, lambda s, n=n: s.request_active_procs(n))
        sim.at(cut, lambda s: snaps.append(s.state.snapshot()))
        try:
            records = sim.run()
        except SimulationError as exc:
            raise ContractError("strict-decisions", self.describe(cut),
                                f"main simulator: {exc.args[0]}") from exc
        starts = {int(r.job_id): float(r.start_s) for r in records.jobs}
        starts.update({int(j): math.nan for j in records.unstarted})
        throttled = 0 if sim.state.limit is None else len(sim.state.limit.hit)
        return starts, snaps[0], throttled

    def arrivals(self, w: Workload) -> dict:
        """:func:`run_whatif`'s arguments feeding ``w``'s jobs as arrivals."""
        return {"arrivals": JobTable(w.job_id, w.submit_s, w.procs,
                                     w.estimate_s(self.estimates), w.runtime_s),
                "arrivals_power": None if self.cap is None else
                synthetic_power(w, self.cap, self.seed),
                "arrivals_budget": self.budget(w)}

    def budget(self, w: Workload):
        """The job model a budget policy (RMAP, PARM) draws for ``w`` (else None)."""
        if self.subject.entry.needs != "budget":
            return None
        st = SimState(w.machine_procs, w.job_id, w.submit_s, w.procs, w.runtime_s,
                      w.runtime_s)
        self.policy().prepare(st, w)
        return st.budget

    def whatif(self, snap: Snapshot, cut: float, policy=None,
               checker: Checker = NULL_CHECKER, **arrivals) -> WhatIfResult:
        try:
            return run_whatif(snap, self.policy() if policy is None else policy,
                              checker=checker, **arrivals)
        except SimulationError as exc:
            raise ContractError("strict-decisions", self.describe(cut),
                                f"what-if: {exc.args[0]}") from exc


# -- the checks ----------------------------------------------------------------------------

def _check_snapshot(case: _Case, cut: float, tally: _Tally) -> None:
    """Every check that follows one snapshot of one case."""
    w = case.w
    where = case.describe(cut)
    whole, snap, throttled = case.run(w, cut)
    # no arrivals after the snapshot: the truth is the main simulator on the jobs in by then
    truth, _, throttled_truth = case.run(w.select(np.flatnonzero(w.submit_s <= cut)), cut)
    tally.throttled += throttled + throttled_truth
    future = {j for j, s in truth.items() if not s < cut}  # (NaN: never started)
    strict = case.whatif(snap, cut, checker=StrictChecker())
    plain = case.whatif(snap, cut)
    for res, how in ((strict, "with the strict checker"), (plain, "without a checker")):
        got = _starts(res)
        _same_jobs("whatif-fidelity", where, got, future, truth)
        tally.starts += _compare("whatif-fidelity", where, got, truth,
                                 f"what-if from the snapshot, {how}",
                                 "main simulator without later arrivals")
    later = np.flatnonzero(w.submit_s > cut)
    if later.size:
        res = case.whatif(snap, cut, checker=StrictChecker(), **case.arrivals(w.select(later)))
        tally.starts += _compare("whatif-arrivals", where, _starts(res), whole,
                                 "what-if fed the later jobs as arrivals",
                                 "main simulator over the whole workload")
    tally.starts += _check_pickle(case, cut, snap, plain)
    tally.snapshots += 1


def _starts(res: WhatIfResult) -> dict[int, float]:
    return dict(zip(res.job_id.tolist(), res.start_s.tolist()))


def _same_jobs(check: str, where: str, got: dict[int, float], future: set[int],
               truth: dict[int, float]) -> None:
    """The what-if knows every job still to start at the snapshot, and no other."""
    missing = sorted(future - set(got))
    if missing:
        raise ContractError(check, where, f"job {missing[0]} had not started by the "
                            "snapshot but is not in the what-if", job_id=missing[0])
    extra = sorted(set(got) - set(truth))
    if extra:
        raise ContractError(check, where, f"job {extra[0]} is in the what-if but not in "
                            "the main simulator", job_id=extra[0])


def _compare(check: str, where: str, got: dict[int, float], want: dict[int, float],
             got_name: str, want_name: str) -> int:
    """Raise at the earliest job of ``got`` whose start differs from ``want``'s (NaN:
    never started, equal to NaN); returns the starts compared."""
    def key(j: int) -> tuple:
        s = want[j]
        return (s != s, s if s == s else 0.0, j)

    for j in sorted(got, key=key):
        g, s = got[j], want[j]
        if not (g == s or (g != g and s != s)):
            raise ContractError(check, where, f"job {j}: expected start {s:g} "
                                f"({want_name}), got {g:g} ({got_name})", job_id=j,
                                expected_s=s, got_s=g)
    return len(got)


def _check_pickle(case: _Case, cut: float, snap: Snapshot, res: WhatIfResult) -> int:
    """The policy and the snapshot round-trip through pickle and the copies give the
    what-if ``res`` gave; returns the starts compared."""
    where = case.describe(cut)
    policy = case.policy()
    try:
        policy_copy = pickle.loads(pickle.dumps(policy))
        snap_copy = pickle.loads(pickle.dumps(snap))
    except (pickle.PicklingError, AttributeError, TypeError) as exc:
        raise ContractError("pickle", where, f"cannot pickle: {exc}") from exc
    if policy_copy.settings() != policy.settings():
        raise ContractError("pickle", where, f"the unpickled policy's settings "
                            f"{policy_copy.settings()} differ from {policy.settings()}")
    again = case.whatif(snap_copy, cut, policy_copy)
    return _compare("pickle", where, _starts(again), _starts(res),
                    "what-if from the unpickled snapshot and policy",
                    "what-if from the originals")


def _check_settings(subject: _Subject, spec: dict) -> None:
    """``settings()`` names the policy and rebuilds an equal policy, also through a run
    config's policy section when the policy is registered."""
    policy = subject.build(spec)
    settings = policy.settings()
    where = f"{subject.name} { {k: v for k, v in spec.items() if k != 'name'} }"
    if settings.get("name") != subject.name or policy.name != subject.name:
        raise ContractError("settings", where, f"settings() names {settings.get('name')!r} "
                            f"and the policy {policy.name!r}, not {subject.name!r}")
    for key, value in spec.items():
        if key not in settings or settings[key] != value:
            raise ContractError("settings", where, f"settings() gives {key}="
                                f"{settings.get(key, '(missing)')!r}, built with {value!r}")
    rebuilt = subject.build(settings)
    if rebuilt != policy or rebuilt.settings() != settings:
        raise ContractError("settings", where, f"the policy rebuilt from its settings "
                            f"{settings} differs: {rebuilt!r} vs {policy!r}")
    if subject.registered:
        from olsctl.config import build_config

        try:
            config = build_config({"policy": settings})
        except OlsctlError as exc:
            raise ContractError("settings", where, f"a config with these settings is "
                                f"refused: {exc}") from exc
        if make_policy(config.policy) != policy:
            raise ContractError("settings", where, f"the policy built from a config "
                                f"with its settings differs: {config.policy}")


__all__ = ["CHECKS", "ContractError", "ContractReport", "ESTIMATES", "SCENARIOS", "check_policy",
           "contract_specs", "scenarios", "synthetic_cap", "synthetic_power",
           "synthetic_workload"]
