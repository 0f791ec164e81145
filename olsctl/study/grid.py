"""A study's grid: its axes, the runs they expand to (grid order: the last axis varies
fastest), each a validated :class:`RunConfig` with an id that hashes its settings, and the
results.csv columns the runs fill.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from olsctl.config import TOP_LEVEL, RunConfig, build_config
from olsctl.errors import ConfigError, TraceError
from olsctl.policies import REGISTRY
from olsctl.run_files import num
from olsctl.workload import log_name, resolve_trace

#: run config keys that are mappings, so a grid key may go inside them
SECTIONS = ("policy", "power", "controller", "sla")
#: results.csv columns after the id and the grid: every run, then with a controller
#: somewhere in the grid, then with power somewhere in the grid, then every run again
#: (the last columns came last, so the earlier ones keep their places)
BASE_METRICS = ("jobs", "mean_bsld", "p95_bsld", "max_bsld", "mean_wait_s", "max_wait_s",
                "mean_turnaround_s", "utilization")
CONTROLLER_METRICS = ("utilization_active", "mean_active_procs", "processor_savings",
                      "ticks", "sla_misses")
POWER_METRICS = ("energy_j", "mean_power_w", "peak_power_w", "csr", "forced_starts",
                 "mean_cap_w")
#: the share of the run's SLA windows (those with jobs) that kept its SLA (summary.json
#: ``sla.kept_share``; empty for a run stored before olsctl wrote it)
SLA_METRICS = ("sla_windows_kept_share",)


@dataclass(frozen=True)
class Axis:
    """One grid dimension: its column name and, per value, a label and the settings
    ((dotted key, value) pairs) that value stands for."""

    name: str
    labels: tuple[str, ...]
    settings: tuple[tuple[tuple[str, Any], ...], ...]


@dataclass(frozen=True)
class GridPoint:
    """One run of a study: its id, its grid labels (one per axis) and its config."""

    index: int
    run_id: str
    labels: tuple[str, ...]
    config: RunConfig


@dataclass(frozen=True)
class Study:
    """A validated study: where it goes, how it runs, and its grid points in grid order."""

    source: str
    out_dir: Path
    columns: tuple[str, ...]
    points: tuple[GridPoint, ...]
    n_jobs: int = 1
    backend: str = "loky"
    scheduler: str | None = None

    @property
    def metric_columns(self) -> tuple[str, ...]:
        cols = BASE_METRICS
        if any(p.config.controller is not None for p in self.points):
            cols += CONTROLLER_METRICS
        if any(p.config.power is not None for p in self.points):
            cols += POWER_METRICS
        return cols + SLA_METRICS


def _axes(src: str, grid: Any) -> list[Axis]:
    if not isinstance(grid, dict) or not grid:
        got = "nothing" if grid is None else f"{_kind(grid)} {grid!r}"
        raise ConfigError(f"{src}: grid: must be a non-empty mapping of config keys to lists "
                          f"of values (got {got})")
    axes = []
    for name, values in grid.items():
        name = str(name)
        head = name.split(".", 1)[0]
        if head in TOP_LEVEL or "." in name or not isinstance(values, dict):
            _check_key(src, f"grid.{name}", name)
            if not isinstance(values, list) or not values:
                got = f"{_kind(values)} {values!r}" if values != [] else "an empty list"
                raise ConfigError(f"{src}: grid.{name}: must be a non-empty list of values "
                                  f"(got {got})")
            axes.append(Axis(name, tuple(label(v) for v in values),
                             tuple(((name, v),) for v in values)))
        else:
            axes.append(_named_axis(src, name, values))
    return axes


def _named_axis(src: str, name: str, values: dict) -> Axis:
    """``name: {label: {key: value, ...}, ...}``: each label sets several keys at once."""
    if not values:
        raise ConfigError(f"{src}: grid.{name}: a named axis needs at least one label")
    labels, settings = [], []
    for lab, spec in values.items():
        where = f"grid.{name}.{lab}"
        if not isinstance(spec, dict):
            raise ConfigError(f"{src}: {where}: must be a mapping of config keys to values "
                              f"(got {_kind(spec)} {spec!r})")
        for key in spec:
            _check_key(src, f"{where}.{key}", str(key))
        labels.append(label(lab))
        settings.append(tuple((str(k), v) for k, v in spec.items()))
    return Axis(name, tuple(labels), tuple(settings))


def _check_key(src: str, where: str, dotted: str) -> None:
    """A grid key must name a run config key, or a key inside one of its sections."""
    parts = dotted.split(".")
    if any(not p for p in parts):
        raise ConfigError(f"{src}: {where}: empty part in the dotted key {dotted!r}")
    head = parts[0]
    if head not in TOP_LEVEL:
        raise ConfigError(f"{src}: {where}: {head!r} is not a run config key (known: "
                          f"{', '.join(k for k in TOP_LEVEL if k != 'out')}; a named axis "
                          f"maps labels to settings)")
    if head == "out":
        raise ConfigError(f"{src}: {where}: the study gives every run its own directory")
    if len(parts) > 1 and head not in SECTIONS:
        raise ConfigError(f"{src}: {where}: {head} has no keys inside it (only "
                          f"{', '.join(SECTIONS)} do)")


def _expand(src: str, study_dir: Path, base: dict, axes: list[Axis]) -> tuple[GridPoint, ...]:
    """Every grid point as a validated config with its id; traces must exist."""
    points: list[GridPoint] = []
    seen: dict[str, int] = {}
    found: dict[str, bool] = {}
    for index, choice in enumerate(itertools.product(*(range(len(a.labels)) for a in axes))):
        labels = tuple(a.labels[i] for a, i in zip(axes, choice))
        where = f"{src}: grid point {index + 1} ({_describe(axes, labels)})"
        data = copy.deepcopy(base)
        for axis, i in zip(axes, choice):
            for key, value in axis.settings[i]:
                _set_dotted(data, key, value, where)
        config = build_config(data, source=where, base_dir=study_dir)
        _check_runnable(where, config, study_dir, found)
        rid = run_id(config)
        if rid in seen:
            raise ConfigError(f"{where}: the same run as grid point {seen[rid] + 1}: every "
                              f"point of the grid must differ")
        seen[rid] = index
        points.append(GridPoint(index, rid, labels, replace(config, out=f"runs/{rid}")))
    return tuple(points)


def _set_dotted(data: dict, dotted: str, value: Any, where: str) -> None:
    """Set ``a.b.c`` in nested mappings; an absent (or null) section starts from its
    default (``policy`` from ``{name: easy}``, the others empty)."""
    parts = dotted.split(".")
    node = data
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = (TOP_LEVEL[part][1] if i == 0 else None) or {}
        elif not isinstance(child, dict):
            raise ConfigError(f"{where}: {'.'.join(parts[:i + 1])}: is {_kind(child)} "
                              f"{child!r}, so {dotted} cannot be set inside it")
        node[part] = child = dict(child)
        node = child
    node[parts[-1]] = copy.deepcopy(value)


def _check_runnable(where: str, config: RunConfig, study_dir: Path,
                    found: dict[str, bool]) -> None:
    """Checks that need files: the trace and a power profile CSV must exist; power
    policies need a power section."""
    if config.trace not in found:
        try:
            resolve_trace(config.trace, study_dir)
        except TraceError as exc:
            raise ConfigError(f"{where}: trace: {exc.args[0]} (looked in {study_dir})") from None
        found[config.trace] = True
    if REGISTRY[config.policy["name"]].needs == "power" and config.power is None:
        raise ConfigError(f"{where}: policy.name: {config.policy['name']} needs power: add a "
                          f"power section")
    profiles = (config.power or {}).get("profiles", "synthetic")
    if profiles != "synthetic" and not (study_dir / profiles).is_file():
        raise ConfigError(f"{where}: power.profiles: no such file: {profiles} "
                          f"(looked in {study_dir})")


def label(value: Any) -> str:
    """A grid value as results.csv shows it: text as is, numbers exactly, null empty,
    lists and mappings as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return num(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), default=str)


def _describe(axes: list[Axis], labels: tuple[str, ...], width: int = 40) -> str:
    parts = []
    for axis, text in zip(axes, labels):
        text = text if len(text) <= width else text[:width - 3] + "..."
        parts.append(f"{axis.name}={text or 'null'}")
    return ", ".join(parts)


def canonical(config: RunConfig) -> str:
    """The resolved settings of a run (every default filled, ``out`` left out) as compact
    JSON with sorted keys: what a run's id hashes."""
    data = config.as_dict()
    data.pop("out")
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)


def run_id(config: RunConfig) -> str:
    """``<trace>-<policy>[-ols]-<10 hex digits of sha256(canonical config)>``."""
    digest = hashlib.sha256(canonical(config).encode("utf-8")).hexdigest()[:10]
    parts = [log_name(config.trace, "trace"), config.policy["name"]]
    if config.controller is not None:
        parts.append("ols")
    prefix = re.sub(r"[^A-Za-z0-9._+-]+", "_", "-".join(parts))
    return f"{prefix}-{digest}"




def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number", type(None): "nothing"}.get(
        type(value), type(value).__name__)
