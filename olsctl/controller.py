"""The online-simulation (OLS) controller: fork what-ifs of the main simulator, keep the
candidates that meet the slowdown SLA, apply the cheapest.

Every ``interval_s`` of simulated time the controller snapshots the main simulator and
runs :func:`what_if` for each candidate active-processor count, in parallel through
joblib (any backend; the pool lasts the whole run). A what-if runs the snapshot forward
with the candidate applied and no new arrivals until every job in it has started
(Lawson & Smirni), and scores the jobs of the snapshot: their bounded slowdowns (known
for running jobs, predicted for waiting ones) and waits. Among the candidates meeting
the SLA the cheapest wins, ties to the larger machine; when none meets it, the one
closest to it, and the tick is an SLA miss. The choice is applied to the main simulator
at once (that instant's pass uses it) and written to ``decisions.jsonl``.

:func:`what_if` is a pure top-level function of (snapshot, candidate, policy settings),
so results do not depend on the number of workers or the backend.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Sequence

import numpy as np

from olsctl.metrics import bounded_slowdown
from olsctl.policies import make_policy
from olsctl.state import Snapshot
from olsctl.whatif import run_whatif

SLA_METRICS = ("mean_bsld", "p95_bsld", "mean_wait_s", "max_wait_s")


@dataclass(frozen=True)
class Trial:
    """One candidate's what-if: SLA metrics of the snapshot's jobs, and its cost."""

    active_procs: int
    jobs: int
    unstarted: int
    mean_bsld: float
    p95_bsld: float
    mean_wait_s: float
    max_wait_s: float
    cost: float

    def metric(self, name: str) -> float:
        return math.inf if self.unstarted else getattr(self, name)


def what_if(snapshot: Snapshot, active_procs: int, policy: dict) -> Trial:
    """Run ``snapshot`` with ``active_procs`` active under ``policy`` (settings) until all
    its jobs have started; score its jobs. Pure: same inputs, same trial."""
    snap = replace(snapshot, active_procs=int(active_procs))
    res = run_whatif(snap, make_policy(policy))
    n = int(res.job_id.size)
    if n == 0:
        return Trial(int(active_procs), 0, 0, 1.0, 1.0, 0.0, 0.0, float(active_procs))
    started = ~np.isnan(res.start_s)
    wait = np.where(started, res.start_s - res.submit_s, np.inf)
    bsld = bounded_slowdown(wait, res.runtime_s)
    unstarted = int((~started).sum())
    if unstarted:
        inf = float("inf")
        return Trial(int(active_procs), n, unstarted, inf, inf, inf, inf, float(active_procs))
    return Trial(int(active_procs), n, 0, float(bsld.mean()), float(np.percentile(bsld, 95)),
                 float(wait.mean()), float(wait.max()), float(active_procs))


@dataclass(frozen=True)
class ControllerSettings:
    """Validated ``controller:`` settings."""

    interval_s: float = 3600.0
    fractions: tuple[float, ...] = (0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0)
    sla_metric: str = "mean_bsld"
    sla_max: float = 200.0
    n_jobs: int = 1
    backend: str = "loky"

    def candidates(self, total_procs: int) -> list[int]:
        """Active-processor counts to try: the fractions of the machine, rounded, >= 1."""
        return sorted({max(1, int(round(f * total_procs))) for f in self.fractions})


def choose(trials: Sequence[Trial], metric: str, limit: float) -> tuple[Trial, str, bool]:
    """The cheapest trial meeting ``metric <= limit`` (ties: larger machine), else the one
    closest to it (ties: larger machine). Returns (trial, reason, SLA met)."""
    ok = [t for t in trials if t.metric(metric) <= limit]
    if ok:
        best = min(ok, key=lambda t: (t.cost, -t.active_procs))
        return best, "cheapest meeting the SLA", True
    best = min(trials, key=lambda t: (t.metric(metric), -t.active_procs))
    return best, "no candidate meets the SLA: closest to it", False


@dataclass
class Controller:
    """Drives ticks on a :class:`olsctl.sim.MainSimulator`; keeps the decision log."""

    settings: ControllerSettings
    policy: dict
    parallel: Any = None  # a joblib.Parallel kept open for the run (None: in process)
    decisions: list[dict] = field(default_factory=list)
    wall_s: float = 0.0

    def start(self, sim) -> None:
        """Schedule the first tick at the first submission."""
        sim.at(sim.env.now, self._tick)

    def _tick(self, sim) -> None:
        t0 = time.perf_counter()
        snap = sim.state.snapshot()
        cands = self.settings.candidates(sim.state.total_procs)
        if self.parallel is None or len(cands) < 2:
            trials = [what_if(snap, c, self.policy) for c in cands]
        else:
            from joblib import delayed

            trials = list(self.parallel(delayed(what_if)(snap, c, self.policy) for c in cands))
        best, reason, met = choose(trials, self.settings.sla_metric, self.settings.sla_max)
        sim.set_active_procs(best.active_procs)
        self.wall_s += time.perf_counter() - t0
        self.decisions.append({
            "time_s": sim.env.now,
            "running": snap.n_running,
            "waiting": snap.n_waiting,
            "trials": [_finite(asdict(t)) for t in trials],
            "chosen_active_procs": best.active_procs,
            "reason": reason,
            "sla_met": met,
        })
        if not sim.finished:
            sim.at(sim.env.now + self.settings.interval_s, self._tick)

    def jsonl(self) -> str:
        return "".join(json.dumps(d, sort_keys=False) + "\n" for d in self.decisions)

    def summary(self) -> dict:
        ticks = len(self.decisions)
        return {"ticks": ticks,
                "sla_misses": sum(1 for d in self.decisions if not d["sla_met"]),
                "interval_s": self.settings.interval_s,
                "candidates": list(self.settings.fractions),
                "sla": {"metric": self.settings.sla_metric, "max": self.settings.sla_max}}


def _finite(d: dict) -> dict:
    """JSON has no infinity: write it as null."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in d.items()}
