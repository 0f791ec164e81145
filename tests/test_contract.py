"""The contract every registered policy keeps, checked for every entry of the registry.

For each policy and each queue order it accepts, exact and user estimates, with and
without power (constant cap, cap schedule) and with active-processor changes that wait
for a wake latency, on seeded random small workloads cut at several instants:

(a) every decision passes the strict checker, in the main simulator and in what-ifs;
(b) what-if fidelity: from the main simulator's snapshot, with no new arrivals and no
    setting change, the what-if reproduces the main simulator's future start times
    exactly (the truth is the main simulator run on the jobs submitted by the cut); fed
    the later jobs as arrivals, it reproduces the whole run;
(c) snapshots pickle and round-trip (a what-if from the copy gives the same starts);
(d) the policy's settings round-trip through the config.

A policy gets all of this by being registered: the cases are built from ``REGISTRY``.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from olsctl.checker import StrictChecker
from olsctl.config import build_config
from olsctl.policies import REGISTRY, make_policy
from olsctl.power.cap import CapSchedule
from olsctl.power.limit import SHARES, Limit, LimitSettings
from olsctl.power.profiles import ProfileSettings, synthetic_profiles
from olsctl.power.runtime import power_state
from olsctl.sim import MainSimulator
from olsctl.whatif import JobTable, run_whatif
from olsctl.workload import Workload

from conftest import make_workload

IDLE_W, PEAK_W, SLEEP_W = 100.0, 500.0, 10.0
WAKE_S = 7.0


def _specs() -> list[dict]:
    out = []
    for name, entry in REGISTRY.items():
        if "order" in entry.params:
            out.extend({"name": name, "order": o} for o in entry.orders)
        else:
            out.append({"name": name})
    return out


#: (power, wake): power None, "constant" (one cap), "schedule" (the cap changes) or
#: "throttle" (the cap changes and a hardware limit throttles running jobs to hold it;
#: the two ways of sharing a reduction by turns); wake: active processors lowered and
#: raised again before the cut, raises waiting for the wake latency (one superseded by
#: a later request)
SCENARIOS = [(None, False), (None, True), ("constant", False), ("schedule", False),
             ("schedule", True), ("throttle", False), ("throttle", True)]


def _cases():
    for spec in _specs():
        needs = REGISTRY[spec["name"]].needs
        for power, wake in SCENARIOS:
            if needs == "power" and power is None:
                continue  # it meters a cap: a run without power is refused
            if needs == "budget" and power is not None:
                continue  # it keeps its own budget: a power section is refused
            for estimates in ("exact", "user"):
                label = "-".join([spec["name"], spec.get("order", ""), estimates,
                                  power or "nopower", "wake" if wake else "fixed"])
                yield pytest.param(spec, estimates, power, wake, id=label.replace("--", "-"))


CASES = list(_cases())


def _workload(rng: np.random.Generator) -> Workload:
    machine = int(rng.integers(4, 13))
    n = int(rng.integers(8, 22))
    gaps = rng.choice([0, 0, 1, 3, 10, 25], size=n)
    submit = np.cumsum(gaps).astype(float) + 100.0
    runtime = rng.choice([1, 5, 10, 10, 20, 37, 60, 100], size=n).astype(float)
    procs = rng.integers(1, machine + 1, size=n)
    # user estimates: over the runtime by a factor, or unknown (-1)
    factor = rng.choice([-1.0, 1.0, 1.5, 3.0], size=n)
    requested = np.where(factor < 0, -1.0, np.ceil(runtime * factor))
    return make_workload(list(range(1, n + 1)), submit, runtime, procs, requested,
                         machine_procs=machine)


def _cap(kind: str | None, w: Workload, rng: np.random.Generator) -> CapSchedule | None:
    if kind is None:
        return None
    peak = w.machine_procs * PEAK_W
    if kind == "constant":
        return CapSchedule.constant(float(rng.choice([0.35, 0.6, 1.0])) * peak)
    # "schedule" and "throttle"
    t0, t1 = float(w.submit_s[0]), float(w.submit_s[-1]) + 60.0
    times = sorted(set(np.round(rng.uniform(t0, t1, size=3)).tolist()) | {t0 + 20.0})
    fracs = rng.choice([0.3, 0.5, 0.8, 1.0], size=len(times) + 1)
    return CapSchedule((-math.inf, *times), tuple(float(f) * peak for f in fracs))


class Setup:
    """One example: a workload, and how to build the main simulator over any part of it
    (the same policy, power, cap schedule and active-processor requests each time)."""

    #: jobs the power limit throttled in main-simulator runs (the limit must act)
    throttled = 0

    def __init__(self, spec: dict, estimates: str, power: str | None, wake: bool,
                 seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.spec, self.estimates, self.seed = spec, estimates, seed
        self.w = _workload(rng)
        self.cap = _cap(power, self.w, rng)
        self.throttle = power == "throttle"
        self.requests: list[tuple[float, int]] = []
        if wake:
            m, t0 = self.w.machine_procs, float(self.w.submit_s[0])
            low = int(rng.integers(1, m))
            self.requests = [(t0 + 2.0, low), (t0 + 9.0, m - 1), (t0 + 12.0, m)]

    def build(self, w: Workload) -> MainSimulator:
        policy = make_policy(self.spec)
        sim = MainSimulator(w, policy, w.estimate_s(self.estimates), checker=StrictChecker())
        assert policy.prepare(sim.state, w) is None
        if self.cap is not None:
            sim.state.power = self.power_of(w)
        if self.throttle:
            share = SHARES[self.seed % len(SHARES)]
            sim.state.limit = Limit(LimitSettings(share=share, min_clock=0.3,
                                                  static_w=0.3 * PEAK_W))
        if self.requests:
            sim.wake_latency_s = WAKE_S
        return sim

    def power_of(self, w: Workload):
        prof = synthetic_profiles(w, IDLE_W, PEAK_W, ProfileSettings(seed=self.seed))
        ids = w.job_id.tolist()
        power = power_state(prof, [j % 3 for j in ids], IDLE_W, SLEEP_W, PEAK_W, self.cap,
                            [j % 5 for j in ids], sample_s=7.0)
        power.kappa = [(j % 7) / 6.0 for j in ids]
        return power

    def run(self, w: Workload, cut: float, snaps: list) -> dict[int, float]:
        """Run the main simulator over ``w`` with the requests due by ``cut`` and a
        snapshot at ``cut``; every job's start (NaN: never started)."""
        sim = self.build(w)
        for t, n in self.requests:
            if t <= cut:
                sim.at(t, lambda s, n=n: s.request_active_procs(n))
        sim.at(cut, lambda s: snaps.append(s.state.snapshot()))
        records = sim.run()
        if self.throttle:
            Setup.throttled += len(sim.state.limit.hit)
        starts = {int(r.job_id): float(r.start_s) for r in records.jobs}
        starts.update({int(j): math.nan for j in records.unstarted})
        return starts


def _same(got: dict[int, float], want: dict[int, float]) -> list:
    """The jobs whose starts differ (NaN equals NaN)."""
    return [(j, got.get(j), s) for j, s in want.items()
            if not (got.get(j) == s or (s != s and got.get(j, 0.0) != got.get(j, 0.0)))]


def _cuts(w: Workload, rng: np.random.Generator) -> list[float]:
    submits = sorted(set(w.submit_s.tolist()))
    picks = rng.choice(submits, size=min(2, len(submits)), replace=False).tolist()
    return sorted(picks + [float(submits[0]) + 10.5])


EXAMPLES = 5


@pytest.mark.parametrize("spec,estimates,power,wake", CASES)
def test_whatif_reproduces_the_main_simulator(spec, estimates, power, wake):
    checked = 0
    Setup.throttled = 0
    for seed in range(EXAMPLES):
        case = Setup(spec, estimates, power, wake, seed)
        w = case.w
        for cut in _cuts(w, np.random.default_rng(1000 + seed)):
            snaps: list = []
            whole = case.run(w, cut, snaps)
            snap = snaps[0]
            # (b) no arrivals: the truth is the main simulator on the jobs in by the cut
            kept = np.flatnonzero(w.submit_s <= cut)
            truth_snaps: list = []
            truth = case.run(w.select(kept), cut, truth_snaps)
            res = run_whatif(snap, make_policy(spec), checker=StrictChecker())
            got = dict(zip(res.job_id.tolist(), res.start_s.tolist()))
            future = {j for j, s in truth.items() if not s < cut}  # NaN: never started
            assert future <= set(got) <= set(truth), cut
            wrong = _same(got, {j: truth[j] for j in got})
            assert not wrong, f"seed {seed}, cut {cut}: (job, what-if, main) {wrong}"
            # (b) the later jobs fed as arrivals: the whole run's future
            later = np.flatnonzero(w.submit_s > cut)
            if later.size:
                lw = w.select(later)
                arrivals = JobTable(lw.job_id, lw.submit_s, lw.procs,
                                    lw.estimate_s(estimates), lw.runtime_s)
                res = run_whatif(snap, make_policy(spec), arrivals, StrictChecker(),
                                 arrivals_power=None if case.cap is None else case.power_of(lw),
                                 arrivals_budget=_budget_of(spec, lw))
                got = dict(zip(res.job_id.tolist(), res.start_s.tolist()))
                wrong = _same(got, {j: whole[j] for j in got})
                assert not wrong, f"arrivals, seed {seed}, cut {cut}: {wrong}"
            # (c) a pickled snapshot gives the same future
            copy = pickle.loads(pickle.dumps(snap))
            res0 = run_whatif(snap, make_policy(spec))
            again = run_whatif(copy, make_policy(spec))
            assert np.array_equal(again.start_s, res0.start_s, equal_nan=True)
            checked += 1
    assert checked == EXAMPLES * 3
    assert (Setup.throttled > 0) == (power == "throttle")


def _budget_of(spec: dict, w: Workload):
    """The job model RMAP/PARM draw for ``w`` (None for other policies)."""
    if REGISTRY[spec["name"]].needs != "budget":
        return None
    from olsctl.state import SimState

    st = SimState(w.machine_procs, w.job_id, w.submit_s, w.procs, w.runtime_s, w.runtime_s)
    make_policy(spec).prepare(st, w)
    return st.budget


@pytest.mark.parametrize("spec", _specs(), ids=lambda s: "-".join(s.values()))
def test_settings_round_trip_through_the_config(spec):
    """(d) A policy's settings, given as a config's policy section, build the same policy."""
    policy = make_policy(spec)
    settings = policy.settings()
    config = build_config({"policy": settings})
    assert make_policy(config.policy).settings() == settings
    assert config.policy["name"] == spec["name"]
    # defaults are copies: changing one run's lists leaves the registry's alone
    for key, value in config.policy.items():
        if isinstance(value, list):
            value.append(-1)
            assert REGISTRY[spec["name"]].params[key].default != value


def test_every_registered_policy_and_order_is_covered():
    names = {c.values[0]["name"] for c in CASES}
    assert names == set(REGISTRY)
    for name, entry in REGISTRY.items():
        orders = {c.values[0].get("order", "fcfs") for c in CASES if c.values[0]["name"] == name}
        assert orders == set(entry.orders)
