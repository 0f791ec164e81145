"""Automatic tuning: the cheapest static setting of a policy whose whole run meets an SLA.

A tune file is a study file (``base``, ``grid``, ``out``, ``n_jobs``, ``backend``; see
:mod:`olsctl.study`) with three more keys: ``sla`` (a whole-run metric and its maximum),
``cost`` (what makes a setting cheaper) and ``write`` (where the winning config goes).
Every grid point is run as a study run (in parallel, stored run by run, resumable), then
the points are ranked: those meeting the SLA by cost (ties: the lower SLA metric, then
grid order), the others after them. The report lists the winner, the runners-up and the
trade-off curve (for each cost, the best SLA metric any setting reaches at that cost or
less), and the winner is written as a ready run config.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from olsctl.errors import ConfigError, cannot_write
from olsctl.run_files import write_atomic
from olsctl.study import (NULL_STUDY_PROGRESS, STUDY_KEYS, GridPoint, Study, StudyProgress,
                          read_mapping, run_study, study_from_data)
from olsctl.workload import BUNDLED

#: whole-run metrics an SLA may bound (summary.json ``metrics``)
TUNE_METRICS = ("mean_bsld", "p95_bsld", "max_bsld", "mean_wait_s", "p95_wait_s", "max_wait_s")
#: costs: processors the run keeps active (time average), energy, peak power
TUNE_COSTS = ("active_procs", "energy_j", "peak_power_w")
TUNE_KEYS = {
    "sla": "{metric: mean_bsld | p95_bsld | max_bsld | mean_wait_s | p95_wait_s | max_wait_s, "
           "max: number}: what every run must meet",
    "cost": "active_procs (time-average active processors), energy_j or peak_power_w "
            "(need power): lower is better",
    "write": "where the winning config is written (default: tuned.yaml in the tune directory)",
}


@dataclass(frozen=True)
class Tune:
    study: Study
    metric: str
    limit: float
    cost: str
    write: Path


@dataclass(frozen=True)
class Ranked:
    """One grid point with its whole-run figures."""

    point: GridPoint
    metric: float
    cost: float
    meets: bool


def load_tune(path: str | Path, out: str | None = None, n_jobs: int | None = None) -> Tune:
    """Read and validate a tune file."""
    path = Path(path)
    src = str(path)
    data = read_mapping(path)
    for key in data:
        if key not in STUDY_KEYS and key not in TUNE_KEYS:
            raise ConfigError(f"{src}: {key}: unknown key (known: "
                              f"{', '.join([*STUDY_KEYS, *TUNE_KEYS])})")
    sla = data.pop("sla", None)
    if not isinstance(sla, dict) or set(sla) != {"metric", "max"}:
        raise ConfigError(f"{src}: sla: must be {{metric: ..., max: number}} (got {sla!r})")
    if sla["metric"] not in TUNE_METRICS:
        raise ConfigError(f"{src}: sla.metric: must be one of {', '.join(TUNE_METRICS)} "
                          f"(got {sla['metric']!r})")
    limit = sla["max"]
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit <= 0:
        raise ConfigError(f"{src}: sla.max: must be a number > 0 (got {limit!r})")
    cost = data.pop("cost", "active_procs")
    if cost not in TUNE_COSTS:
        raise ConfigError(f"{src}: cost: must be one of {', '.join(TUNE_COSTS)} (got {cost!r})")
    write = data.pop("write", None)
    if write is not None and (not isinstance(write, str) or not write):
        raise ConfigError(f"{src}: write: must be a file path (got {write!r})")
    study = study_from_data(data, path, out, n_jobs)
    if cost != "active_procs" and any(p.config.power is None for p in study.points):
        raise ConfigError(f"{src}: cost: {cost} needs a power section in every run")
    target = Path(write) if write is not None else study.out_dir / "tuned.yaml"
    return Tune(study, sla["metric"], float(limit), cost, target)


def run_cost(summary: dict, cost: str) -> float:
    """A finished run's cost: time-average active processors, energy or peak power."""
    if cost == "active_procs":
        m = summary["metrics"]
        value = m.get("mean_active_procs")
        return float(value if value is not None else summary["active_procs_at_start"])
    return float(summary["power"][cost])


def rank(tune: Tune, done: dict[str, dict]) -> list[Ranked]:
    """Finished points, best first: meeting the SLA by (cost, metric, grid order), then
    the rest by (metric, cost, grid order)."""
    out = []
    for p in tune.study.points:
        summary = done.get(p.run_id)
        if summary is None:
            continue
        value = summary["metrics"].get(tune.metric)
        metric = math.inf if value is None else float(value)
        out.append(Ranked(p, metric, run_cost(summary, tune.cost), metric <= tune.limit))
    return sorted(out, key=lambda r: ((0, r.cost, r.metric, r.point.index) if r.meets
                                      else (1, r.metric, r.cost, r.point.index)))


def tradeoff(ranked: list[Ranked]) -> list[Ranked]:
    """The trade-off curve: by increasing cost, each point that improves on the best SLA
    metric reached at a lower cost (the cost-metric Pareto front)."""
    front, best = [], math.inf
    for r in sorted(ranked, key=lambda r: (r.cost, r.metric, r.point.index)):
        if r.metric < best:
            front.append(r)
            best = r.metric
    return front


def tuned_config(tune: Tune, winner: Ranked) -> str:
    """The winner as a ready run config (YAML, with its figures in a comment)."""
    cfg = winner.point.config
    data: dict[str, Any] = {}
    for key, value in cfg.as_dict().items():
        if value is None or key == "out":
            continue
        data[key] = value
    trace = Path(cfg.trace)
    if not trace.is_absolute() and cfg.base_dir is not None and cfg.trace not in _bundled():
        data["trace"] = str((cfg.base_dir / trace).resolve())
    data["out"] = f"runs/tuned-{winner.point.run_id}"
    head = (f"# Tuned by olsctl tune from {tune.study.source}: the cheapest setting whose\n"
            f"# whole run keeps {tune.metric} <= {tune.limit:g}.\n"
            f"# {tune.metric} = {winner.metric!r}, cost ({tune.cost}) = {winner.cost!r}\n")
    return head + yaml.safe_dump(data, sort_keys=False, default_flow_style=None)


def _bundled() -> set[str]:
    return set(BUNDLED)


@dataclass
class TuneResult:
    ranked: list[Ranked]
    #: runs that failed for another reason than the setting itself
    failed: dict[str, str]
    #: settings under which some job can never start (too few processors or power), and
    #: why, by run id: stored in the tune directory (``infeasible.csv``), not run again
    infeasible: dict[str, str]
    winner: Ranked | None
    written: Path | None
    wall_s: float
    #: settings whose runs were finished before this tune (in its directory)
    reused: int = 0


def run_tune(tune: Tune, progress: StudyProgress = NULL_STUDY_PROGRESS) -> TuneResult:
    """Run every missing grid point, rank them, write the winner's config."""
    result = run_study(tune.study, progress, keep_infeasible=True)
    ranked = rank(tune, result.done)
    winner = ranked[0] if ranked and ranked[0].meets else None
    written = None
    if winner is not None:
        try:
            tune.write.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(tune.write, tuned_config(tune, winner))
        except OSError as exc:
            raise cannot_write(f"{tune.study.source}: write", tune.write, exc,
                               folder=False) from None
        written = tune.write
    return TuneResult(ranked, result.failed, result.infeasible, winner, written, result.wall_s,
                      result.reused)


def tune_tables(tune: Tune, result: TuneResult, runners_up: int = 5):
    """Rich tables: the winner and runners-up, the trade-off curve, and the infeasible
    settings with why."""
    from rich.table import Table

    def settings(r: Ranked) -> str:
        return ", ".join(f"{c}={v}" for c, v in zip(tune.study.columns, r.point.labels))

    best = Table(title=f"cheapest settings with {tune.metric} <= {tune.limit:g} "
                       f"(cost: {tune.cost})")
    for col in ("rank", "settings", tune.metric, tune.cost, "meets SLA"):
        best.add_column(col, justify="left" if col == "settings" else "right")
    for i, r in enumerate(result.ranked[:1 + runners_up]):
        best.add_row(str(i + 1), settings(r), f"{r.metric:.4f}", f"{r.cost:,.2f}",
                     "yes" if r.meets else "no")
    curve = Table(title="trade-off: the best SLA metric reached at each cost")
    for col in (tune.cost, tune.metric, "settings"):
        curve.add_column(col, justify="left" if col == "settings" else "right")
    for r in tradeoff(result.ranked):
        curve.add_row(f"{r.cost:,.2f}", f"{r.metric:.4f}", settings(r))
    if not result.infeasible:
        return best, curve
    never = Table(title="infeasible: some job can never start under these settings")
    never.add_column("settings")
    never.add_column("why", overflow="fold")
    for p in tune.study.points:
        if p.run_id in result.infeasible:
            never.add_row(", ".join(f"{c}={v}" for c, v in zip(tune.study.columns, p.labels)),
                          result.infeasible[p.run_id])
    return best, curve, never
