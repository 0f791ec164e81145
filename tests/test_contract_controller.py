"""The contract seen from the controller: with one candidate (the setting in force) and
every job already submitted, each tick's what-if predicts exactly what then happens to
the jobs of its snapshot, for every registered policy and order.

A black-box check of the whole path: snapshot, task, candidate applied, what-if, scoring.
Ticks themselves are events of the main simulator (each runs a pass), so the what-if
must run the passes of the ticks to come too.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from olsctl.checker import StrictChecker
from olsctl.contract import PEAK_W, contract_specs, synthetic_power
from olsctl.controller import Controller, ControllerSettings
from olsctl.metrics import job_bsld
from olsctl.policies import REGISTRY, make_policy
from olsctl.power.cap import CapSchedule
from olsctl.sim import MainSimulator

from conftest import make_workload


def _cases():
    for spec in (s for name in REGISTRY for s in contract_specs(name)):
        needs = REGISTRY[spec["name"]].needs
        for cap in ((None, "schedule") if needs is None else
                    ("schedule",) if needs == "power" else (None,)):
            label = "-".join([*spec.values(), cap or "nopower"])
            yield pytest.param(spec, cap, id=label)


def _run(spec: dict, cap: str | None, seed: int):
    rng = np.random.default_rng(seed)
    machine = int(rng.integers(4, 11))
    n = int(rng.integers(10, 25))
    submit = np.full(n, 100.0)  # every job in at the first tick
    runtime = rng.choice([5, 10, 30, 60, 100, 250], size=n).astype(float)
    procs = rng.integers(1, machine + 1, size=n)
    requested = np.ceil(runtime * rng.choice([1.0, 1.0, 2.0], size=n))
    w = make_workload(list(range(1, n + 1)), submit, runtime, procs, requested,
                      machine_procs=machine)
    policy = make_policy(spec)
    sim = MainSimulator(w, policy, w.estimate_s("user"), checker=StrictChecker())
    assert policy.prepare(sim.state, w) is None
    if cap is not None:
        peak = machine * PEAK_W
        sched = CapSchedule((-math.inf, 170.0, 260.0), (0.4 * peak, 0.9 * peak, 0.6 * peak))
        sim.state.power = synthetic_power(w, sched, seed)
    settings = ControllerSettings(interval_s=37.0, procs=(machine,))
    controller = Controller(settings, dict(spec))
    controller.start(sim)
    records = sim.run()
    return controller.decisions, records


@pytest.mark.parametrize("spec,cap", list(_cases()))
def test_one_candidate_predicts_what_happens(spec, cap):
    checked = 0
    for seed in range(4):
        decisions, records = _run(spec, cap, seed)
        jobs = [(r.submit_s, r.start_s, r.end_s, r.runtime_s) for r in records.jobs]
        for d in decisions:
            if not d["trials"]:
                continue
            t = d["time_s"]
            # the snapshot's jobs: running at the tick, or waiting (started at it or later)
            mine = [j for j in jobs if j[0] <= t and (j[1] >= t or j[2] > t)]
            if not mine:
                continue
            realized = math.fsum(job_bsld(s - sub, run) for sub, s, _, run in mine) / len(mine)
            (trial,) = d["trials"]
            assert trial["mean_bsld"] == pytest.approx(realized, rel=1e-12), (seed, t)
            checked += 1
    assert checked >= 4
