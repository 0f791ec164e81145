"""Run configuration: defaults, YAML loading, and validation in one place.

Every key is checked once, when the config is built: unknown keys and bad values are
rejected with the key path (``ConfigError: easy.yaml: policy.order: must be one of ...``).
Command-line options override the file and are checked by the same code.
"""

from __future__ import annotations

import copy

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import yaml

from olsctl import backends
from olsctl.errors import ConfigError
from olsctl.metrics import WEEK_S, SlaSpec
from olsctl.policies import REGISTRY, policy_error
from olsctl.workload import DEFAULT_TRACE, ESTIMATE_MODES

#: Top-level keys: (type, default, help). The README's config reference mirrors this.
TOP_LEVEL: dict[str, tuple[Any, Any, str]] = {
    "trace": (str, DEFAULT_TRACE, "bundled log name (KTH-SP2, SDSC-SP2, CTC-SP2, SDSC-BLUE) "
                                  "or SWF path, relative to the config file"),
    "procs": (int, None, "machine size; default: the trace header's MaxProcs, else MaxNodes"),
    "active_procs": (int, None, "processors active at the start; default: all"),
    "estimates": (str, "exact", "runtime estimates the policy sees: exact or user"),
    "load_scale": (float, 1.0, "offered load factor: submit times, counted from the first "
                               "submission, are divided by it (1.5: the same jobs arriving "
                               "1.5 times as fast)"),
    "policy": (dict, {"name": "easy"}, "policy name and parameters"),
    "out": (str, "olsctl-out", "output directory"),
    "strict": (bool, False, "check every scheduling decision"),
    "skip_bad_lines": (bool, False, "count and skip malformed SWF lines instead of failing"),
    "sla": (dict, None, "the SLA runs are measured against, window by window: {metric, max, "
                        "window_s}; default: the controller's metric and max, else mean_bsld "
                        "<= 200, over calendar weeks"),
    "power": (dict, None, "job power profiles, machine power states and a power cap "
                          "(omit for no power accounting)"),
    "controller": (dict, None, "the online-simulation controller (omit to keep the "
                               "active processors fixed)"),
}

#: ``controller:`` keys: (type, default, help).
CONTROLLER_KEYS: dict[str, tuple[Any, Any, str]] = {
    "interval_s": (float, 3600.0, "simulated seconds between ticks"),
    "candidates": (dict, {"active_procs": {"fraction": [0.25, 0.375, 0.5, 0.625, 0.75, 0.875,
                                                         1.0]}},
                   "settings to try, combined: active_procs ({fraction: L} or {procs: L}), "
                   "power_cap ({fraction: L} or {watts: L}), window (L); L is a list or "
                   "{from, to, step}"),
    "sla": (dict, {},
            "{metric: mean_bsld | p95_bsld | mean_wait_s | max_wait_s, max: number, "
            "feedback: false | true | {relax_below, full_above}}; metric and max default "
            "to the run's sla"),
    "cost": (object, "active_procs", "what makes a candidate cheaper: active_procs, energy, "
                                     "power_cap, peak_power, or {weights: {name: w, ...}}"),
    "search": (str, "grid", "grid (every candidate), bisect (fewer what-ifs; assumes more "
                            "processors never raise slowdown) or cheapest-first (grid's "
                            "choice, stopping at the first candidate meeting the SLA)"),
    "arrivals": (str, "none", "arrivals in the what-ifs: none, recent (the last interval's, "
                              "replayed) or oracle (the log's next interval, for studies)"),
    "horizon": (object, "drain", "drain (until every job of the snapshot has started) or "
                                 "seconds"),
    "min_dwell_s": (float, 0.0, "keep a new setting at least this long"),
    "max_step": (int, None, "move at most this many places in the active-processor list "
                            "per tick"),
    "n_jobs": (int, 1, "what-ifs run in parallel, this process included (-1: all cores)"),
    "backend": (str, "processes", "processes (olsctl's worker processes), or a joblib "
                                  "backend (loky, threading, multiprocessing, dask, ray)"),
    "cluster": (str, None, "with backend dask or ray: local (default: a cluster on this "
                           "machine for the run) or the address of a running one"),
    "parallel_min_waiting": (int, 100, "ticks with fewer waiting jobs run their what-ifs in "
                                       "process (too small to pay for a worker)"),
    "pool_min_s": (object, "auto", "auto, or the expected in-process seconds of a tick's "
                                   "what-ifs from which they go to the worker pool"),
    "seed": (int, 0, "seed passed to every what-if"),
}

#: where a controller's what-ifs may run besides this process: olsctl's own worker
#: processes, or a joblib backend (dask and ray once their packages are installed)
BACKENDS = backends.BACKENDS

#: ``power:`` keys: (type, default, help). Watts and seconds per processor.
POWER_KEYS: dict[str, tuple[Any, Any, str]] = {
    "profiles": (str, "synthetic", "synthetic, or a CSV of job_id,mean_w[,max_w,std_w] "
                                   "(relative to the config file)"),
    "seed": (int, 0, "seed of the synthetic profiles"),
    "procs_per_node": (int, 1, "processors per node (NREL powers are per node)"),
    "idle_w": (float, 250.0, "idle processor power"),
    "peak_w": (float, 1150.0, "processor peak power (the cap's 100%)"),
    "sleep_w": (float, 20.0, "power of a processor beyond the active count, once idle"),
    "wake_latency_s": (float, 60.0, "time a wake takes"),
    "wake_energy_j": (float, 30000.0, "energy of one wake"),
    "sample_s": (float, 300.0, "power sampling interval"),
    "cap": (object, None, "watts, {fraction: f} of peak, or {schedule: [{at_s, fraction|watts}]}"),
    "limit": (str, "none", "none, or throttle: a hardware limit lowers running jobs' clocks "
                           "so the draw never passes the cap"),
    "share": (str, "clock", "how throttle shares a reduction: clock (one clock for all) "
                            "or largest (largest draw per processor first)"),
    "min_clock": (float, 0.4, "lowest clock throttle may set, a fraction of the top clock"),
}


@dataclass(frozen=True)
class RunConfig:
    """A validated run configuration; ``trace`` is resolved relative to ``base_dir``."""

    trace: str = DEFAULT_TRACE
    procs: int | None = None
    active_procs: int | None = None
    estimates: str = "exact"
    load_scale: float = 1.0
    policy: dict = field(default_factory=lambda: {"name": "easy", "order": "fcfs"})
    out: str = "olsctl-out"
    strict: bool = False
    skip_bad_lines: bool = False
    sla: dict | None = None
    power: dict | None = None
    controller: dict | None = None
    base_dir: Path | None = None
    source: str = "<defaults>"

    def as_dict(self) -> dict:
        """The settings as plain data (what summary.json records)."""
        return {key: getattr(self, key) for key in TOP_LEVEL}

    def sla_spec(self) -> SlaSpec:
        """The SLA the run's windows are judged by: ``sla`` as given, its metric and max
        defaulting to the controller's, then to mean_bsld <= 200."""
        return self._sla_from(self.sla, None if self.controller is None
                              else self.controller["sla"], self.sla)

    def controller_sla(self) -> SlaSpec:
        """The SLA the controller keeps: its own metric and max, defaulting to the run's
        ``sla``, then to mean_bsld <= 200 (the window is the run's)."""
        return self._sla_from(self.controller["sla"], self.sla, self.sla)

    @staticmethod
    def _sla_from(first: dict | None, then: dict | None, window: dict | None) -> SlaSpec:
        first, then = first or {}, then or {}
        pick = {k: first.get(k, then.get(k)) for k in ("metric", "max")}  # key by key
        return SlaSpec(pick["metric"] or "mean_bsld",
                       float(200.0 if pick["max"] is None else pick["max"]),
                       float((window or {}).get("window_s", WEEK_S)))


def load_config(path: str | Path) -> RunConfig:
    """Read and validate a YAML run config."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise ConfigError(f"{path}{where}: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping of keys, got {_kind(data)}")
    return build_config(data, source=str(path), base_dir=path.resolve().parent)


def build_config(data: Mapping[str, Any], source: str = "<defaults>",
                 base_dir: Path | None = None) -> RunConfig:
    """Fill defaults and validate ``data``; raise :class:`ConfigError` naming the key."""
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key not in TOP_LEVEL:
            raise ConfigError(f"{source}: {key}: unknown key (known: {', '.join(TOP_LEVEL)})")
        values[key] = value
    config = RunConfig(base_dir=base_dir, source=source)
    return with_overrides(config, values)


def with_overrides(config: RunConfig, overrides: Mapping[str, Any],
                   source: str | None = None) -> RunConfig:
    """Apply settings (from a file or the command line) and validate the result;
    errors name ``source`` (default: the config's own source)."""
    src = source or config.source
    changes: dict[str, Any] = {}
    for key, value in overrides.items():
        if value is None and TOP_LEVEL[key][1] is None:
            changes[key] = None
            continue
        kind = TOP_LEVEL[key][0]
        _check_type(src, key, value, kind)
        changes[key] = value
    if "policy" in changes:
        changes["policy"] = _check_policy(src, changes["policy"])
    if changes.get("power") is not None:
        changes["power"] = _check_power(src, changes["power"])
    if changes.get("controller") is not None:
        changes["controller"] = _check_controller(src, changes["controller"])
    if changes.get("sla") is not None:
        changes["sla"] = _check_run_sla(src, changes["sla"])
    cfg = replace(config, **changes)
    if cfg.procs is not None and cfg.procs < 1:
        raise ConfigError(f"{src}: procs: must be >= 1 (got {cfg.procs})")
    if cfg.active_procs is not None:
        if cfg.active_procs < 0:
            raise ConfigError(f"{src}: active_procs: must be >= 0 (got {cfg.active_procs})")
        if cfg.procs is not None and cfg.active_procs > cfg.procs:
            raise ConfigError(f"{src}: active_procs: must be <= procs ({cfg.procs}), "
                              f"got {cfg.active_procs}")
    if not cfg.load_scale > 0 or math.isinf(cfg.load_scale):
        raise ConfigError(f"{src}: load_scale: must be a number > 0 (got {cfg.load_scale!r})")
    if cfg.estimates not in ESTIMATE_MODES:
        raise ConfigError(f"{src}: estimates: must be one of {', '.join(ESTIMATE_MODES)} "
                          f"(got {cfg.estimates!r})")
    if not cfg.trace:
        raise ConfigError(f"{src}: trace: must not be empty")
    if not cfg.out:
        raise ConfigError(f"{src}: out: must not be empty")
    return cfg


def check_run(config: RunConfig, workload, estimates) -> None:
    """The checks across sections (policy, power, controller) and against the loaded
    workload, made once every key is in and before anything runs; raises
    :class:`ConfigError` naming the key. ``estimates`` are the ones the policy will see."""
    from olsctl.policies import make_policy

    src, policy = config.source, config.policy
    entry = REGISTRY[policy["name"]]
    if config.power is None and entry.needs == "power":
        raise ConfigError(f"{src}: policy.name: {policy['name']} needs power: add a power "
                          f"section")
    if config.power is not None and entry.needs == "budget":
        raise ConfigError(f"{src}: power: policy {policy['name']} keeps its own power budget "
                          f"(policy.bound); remove the power section")
    machine = workload.machine_procs
    active = config.active_procs
    if active is not None and active > machine:
        raise ConfigError(f"{src}: active_procs: must be <= the machine's {machine} "
                          f"processors (got {active})")
    problem = make_policy(policy).check_jobs(workload.job_id.tolist(), workload.procs.tolist(),
                                             estimates.tolist(),
                                             machine if active is None else active)
    if problem is not None:
        raise ConfigError(f"{src}: policy.{problem}")
    if config.controller is not None:
        _check_controller_run(config, workload, entry)


def _check_controller_run(config: RunConfig, workload, entry) -> None:
    """The controller's candidates and cost against the policy, the power section and the
    workload (a candidate set under which some job could never start is refused)."""
    from olsctl.policies import make_policy

    src, policy = f"{config.source}: controller", config.policy
    cands = config.controller["candidates"]
    if "power_cap" in cands and config.power is None:
        raise ConfigError(f"{src}.candidates.power_cap: needs a power section")
    if "window" in cands and "window" not in policy:
        raise ConfigError(f"{src}.candidates.window: policy {policy['name']} has no window")
    for name, values in cands.get("policy", {}).items():
        if name not in entry.tunable:
            raise ConfigError(f"{src}.candidates.policy.{name}: not a tunable setting of "
                              f"{policy['name']} (tunable: {', '.join(entry.tunable) or 'none'})")
        for i, value in enumerate(values):
            try:
                make_policy({**policy, name: value})
            except (ValueError, TypeError) as exc:
                raise ConfigError(f"{src}.candidates.policy.{name}[{i}]: {exc}") from None
    names = list(cost_weights(config.controller["cost"]))
    for name in names:
        if name.startswith("policy.") and name[7:] not in cands.get("policy", {}):
            raise ConfigError(f"{src}.cost: {name} is not among candidates.policy")
    if config.power is None and any(n in ("energy", "power_cap", "peak_power") for n in names):
        raise ConfigError(f"{src}.cost: {', '.join(names)} needs a power section")
    if entry.needs != "budget":  # RMAP and PARM may resize a job to fit
        counts = active_counts(cands["active_procs"], workload.machine_procs)
        wide = np.flatnonzero(workload.procs > counts[-1])
        if wide.size:
            i = int(wide[0])
            raise ConfigError(f"{src}.candidates.active_procs: job {int(workload.job_id[i])} "
                              f"needs {int(workload.procs[i])} processors but the largest "
                              f"candidate has {counts[-1]}, so it could never start "
                              f"({wide.size} such job(s))")


def cost_weights(cost: Any) -> dict[str, float]:
    """A controller ``cost`` (a name, or ``{weights: {name: w}}``) as weights by name."""
    if isinstance(cost, str):
        return {cost: 1.0}
    return {k: float(v) for k, v in cost["weights"].items()}


def active_counts(spec: dict, total_procs: int) -> list[int]:
    """The active-processor counts of ``candidates.active_procs``, ascending: the listed
    counts (within 1 .. the machine), or the fractions of the machine rounded (at least 1)."""
    if "procs" in spec:
        return sorted({min(max(1, int(p)), total_procs) for p in spec["procs"]})
    return sorted({max(1, int(round(f * total_procs))) for f in spec.get("fraction", ())})


def with_settings(config: RunConfig, assignments: list[str],
                  source: str = "command line") -> RunConfig:
    """Apply ``KEY=VALUE`` settings, then validate once: ``KEY`` is a dotted path into the
    config (``controller.sla.max``), ``VALUE`` is read as YAML (``200``, ``[1, 2]``,
    ``{a: 1}``). Setting ``policy.name`` starts that policy from its defaults."""
    import copy

    changes: dict[str, Any] = {}
    for assignment in assignments:
        key, sep, text = assignment.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"{source}: --set {assignment!r}: must be KEY=VALUE")
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            raise ConfigError(f"{source}: --set {key}: value is not valid YAML ({text!r})") from None
        path = key.split(".")
        top = path[0]
        if top not in TOP_LEVEL:
            raise ConfigError(f"{source}: {key}: unknown key (known: {', '.join(TOP_LEVEL)})")
        if len(path) == 1:
            changes[top] = value
            continue
        if top not in changes or not isinstance(changes[top], dict):
            changes[top] = copy.deepcopy(getattr(config, top)) or {}
        if path == ["policy", "name"]:
            changes[top] = {}
        node = changes[top]
        for i, part in enumerate(path[1:-1], start=1):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ConfigError(f"{source}: {'.'.join(path[:i + 1])}: is not a mapping "
                                  f"(got {_kind(child)})")
            node = child
        node[path[-1]] = value
    return with_overrides(config, changes, source) if changes else config


def _check_policy(src: str, spec: Any) -> dict:
    if not isinstance(spec, dict):
        raise ConfigError(f"{src}: policy: must be a mapping with a name (got {_kind(spec)})")
    name = spec.get("name")
    if name not in REGISTRY:
        raise ConfigError(f"{src}: policy.name: must be one of {', '.join(REGISTRY)} "
                          f"(got {name!r})")
    entry = REGISTRY[name]
    out = {"name": name}
    for key, value in spec.items():
        if key == "name":
            continue
        if key not in entry.params:
            known = ", ".join(entry.params) or "none"
            raise ConfigError(f"{src}: policy.{key}: unknown parameter of {name} "
                              f"(known: {known})")
        param = entry.params[key]
        if value is None and param.default is None:
            continue
        if param.kind is not object:
            _check_type(src, f"policy.{key}", value, param.kind)
        if param.choices is not None and value not in param.choices:
            raise ConfigError(f"{src}: policy.{key}: must be one of "
                              f"{', '.join(map(str, param.choices))} (got {value!r})")
        if param.kind is list and value is not None:
            for i, item in enumerate(value):
                if isinstance(item, bool) or not isinstance(item, (int, float)):
                    raise ConfigError(f"{src}: policy.{key}[{i}]: must be a number "
                                      f"(got {_kind(item)} {item!r})")
    defaults = entry.defaults()  # copies: a run never holds the registry's own lists
    for key in entry.params:
        out[key] = copy.deepcopy(spec[key]) if key in spec else defaults[key]
    problem = policy_error(out)
    if problem is not None:
        raise ConfigError(f"{src}: policy.{problem}")
    return out


def _check_power(src: str, spec: dict) -> dict:
    from olsctl.power.cap import parse_cap

    out = {}
    for key, value in spec.items():
        if key not in POWER_KEYS:
            raise ConfigError(f"{src}: power.{key}: unknown key (known: {', '.join(POWER_KEYS)})")
    for key, (kind, default, _help) in POWER_KEYS.items():
        value = spec.get(key, default)
        if kind is not object:
            _check_type(src, f"power.{key}", value, kind)
        if kind is float:
            value = float(value)
            if value < 0 or (key in ("peak_w", "sample_s") and value == 0):
                raise ConfigError(f"{src}: power.{key}: must be {'> 0' if key in ('peak_w', 'sample_s') else '>= 0'} (got {value:g})")
        out[key] = value
    if out["procs_per_node"] < 1:
        raise ConfigError(f"{src}: power.procs_per_node: must be >= 1 (got {out['procs_per_node']})")
    if out["idle_w"] > out["peak_w"]:
        raise ConfigError(f"{src}: power.idle_w: must not exceed peak_w ({out['peak_w']:g})")
    parse_cap(out["cap"], 1.0, f"{src}: power.cap")  # structure and order; watts later
    from olsctl.power.limit import LIMITS, SHARES

    for key, known in (("limit", LIMITS), ("share", SHARES)):
        if out[key] not in known:
            raise ConfigError(f"{src}: power.{key}: must be one of {', '.join(known)} "
                              f"(got {out[key]!r})")
    if not 0 < out["min_clock"] <= 1:
        raise ConfigError(f"{src}: power.min_clock: must be in (0, 1] (got {out['min_clock']:g})")
    return out


def _check_controller(src: str, spec: dict) -> dict:
    from olsctl.controller import ARRIVAL_MODELS, COSTS, KNOWN_COSTS, SEARCHES

    where = f"{src}: controller"
    for key in spec:
        if key not in CONTROLLER_KEYS:
            raise ConfigError(f"{where}.{key}: unknown key (known: {', '.join(CONTROLLER_KEYS)})")
    out = {}
    for key, (kind, default, _help) in CONTROLLER_KEYS.items():
        value = spec.get(key, default)
        if kind is not object and not (value is None and default is None):
            _check_type(src, f"controller.{key}", value, kind)
        out[key] = float(value) if kind is float else value
    if out["interval_s"] <= 0:
        raise ConfigError(f"{where}.interval_s: must be > 0 (got {out['interval_s']:g})")
    out["candidates"] = _check_candidates(f"{where}.candidates", out["candidates"])
    sla = out["sla"]
    if not isinstance(sla, dict):
        raise ConfigError(f"{where}.sla: must be a mapping (got {_kind(sla)})")
    if set(sla) - {"metric", "max", "feedback"}:
        raise ConfigError(f"{where}.sla.{sorted(set(sla) - {'metric', 'max', 'feedback'})[0]}: "
                          f"unknown key (known: metric, max, feedback)")
    _check_sla_limit(f"{where}.sla", sla)
    given = {k: (float(v) if k == "max" else v) for k, v in sla.items() if k in ("metric", "max")}
    out["sla"] = {**given,
                  "feedback": _check_feedback(f"{where}.sla.feedback", sla.get("feedback", False))}
    cost = out["cost"]
    if isinstance(cost, str):
        if cost not in COSTS and not cost.startswith("policy."):
            raise ConfigError(f"{where}.cost: must be one of {', '.join(COSTS)} or "
                              f"{{weights: ...}} (got {cost!r})")
    elif isinstance(cost, dict) and set(cost) == {"weights"} and isinstance(cost["weights"], dict) \
            and cost["weights"]:
        for name, w in cost["weights"].items():
            if name not in COSTS and not str(name).startswith("policy."):
                raise ConfigError(f"{where}.cost.weights.{name}: must be one of {', '.join(COSTS)}")
            if isinstance(w, bool) or not isinstance(w, (int, float)) or w < 0:
                raise ConfigError(f"{where}.cost.weights.{name}: must be a number >= 0 (got {w!r})")
    else:
        raise ConfigError(f"{where}.cost: must be one of {', '.join(COSTS)} or "
                          f"{{weights: {{name: weight, ...}}}} (got {cost!r})")
    for key, choices in (("search", SEARCHES), ("arrivals", ARRIVAL_MODELS)):
        if out[key] not in choices:
            raise ConfigError(f"{where}.{key}: must be one of {', '.join(choices)} "
                              f"(got {out[key]!r})")
    if out["search"] == "cheapest-first":
        names = [cost] if isinstance(cost, str) else list(cost["weights"])
        late = [n for n in names if n not in KNOWN_COSTS and not str(n).startswith("policy.")]
        if late:
            raise ConfigError(f"{where}.search: cheapest-first ranks candidates before their "
                              f"what-ifs run, so the cost must be known then ("
                              f"{', '.join(KNOWN_COSTS)}, policy.<setting>); {late[0]} is not")
    horizon = out["horizon"]
    if horizon != "drain" and (isinstance(horizon, bool) or not isinstance(horizon, (int, float))
                               or horizon <= 0):
        raise ConfigError(f"{where}.horizon: must be drain or a number of seconds > 0 "
                          f"(got {horizon!r})")
    if out["min_dwell_s"] < 0:
        raise ConfigError(f"{where}.min_dwell_s: must be >= 0 (got {out['min_dwell_s']:g})")
    if out["max_step"] is not None and out["max_step"] < 1:
        raise ConfigError(f"{where}.max_step: must be >= 1 (got {out['max_step']})")
    if out["n_jobs"] == 0 or out["n_jobs"] < -1:
        raise ConfigError(f"{where}.n_jobs: must be >= 1 or -1 (got {out['n_jobs']})")
    backends.check(where, out["backend"], out["cluster"])
    if out["parallel_min_waiting"] < 0:
        raise ConfigError(f"{where}.parallel_min_waiting: must be >= 0 "
                          f"(got {out['parallel_min_waiting']})")
    pool = out["pool_min_s"]
    if pool != "auto" and (isinstance(pool, bool) or not isinstance(pool, (int, float))
                           or not pool >= 0):
        raise ConfigError(f"{where}.pool_min_s: must be auto or a number of seconds >= 0 "
                          f"(got {pool!r})")
    return out


def _check_sla_limit(where: str, sla: dict) -> tuple[str, float]:
    """An SLA's metric and limit, checked (defaults: mean_bsld, 200)."""
    from olsctl.controller import SLA_METRICS

    metric, limit = sla.get("metric", "mean_bsld"), sla.get("max", 200.0)
    if metric not in SLA_METRICS:
        raise ConfigError(f"{where}.metric: must be one of {', '.join(SLA_METRICS)} "
                          f"(got {metric!r})")
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not limit > 0 \
            or math.isinf(limit):
        raise ConfigError(f"{where}.max: must be a number > 0 (got {limit!r})")
    if metric.endswith("bsld") and limit < 1:
        raise ConfigError(f"{where}.max: a bounded slowdown is >= 1 (got {limit})")
    return metric, float(limit)


def _check_run_sla(src: str, sla: dict) -> dict:
    """The top-level ``sla``: metric and max (filled from the controller's when left out,
    see :meth:`RunConfig.sla_spec`) and the window length."""
    where = f"{src}: sla"
    if set(sla) - {"metric", "max", "window_s"}:
        raise ConfigError(f"{where}.{sorted(set(sla) - {'metric', 'max', 'window_s'})[0]}: "
                          f"unknown key (known: metric, max, window_s)")
    out = dict(sla)
    _check_sla_limit(where, {"metric": "mean_bsld", "max": 200.0, **sla})
    if "max" in out:
        out["max"] = float(out["max"])
    if "window_s" in out:
        w = out["window_s"]
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not w > 0 or math.isinf(w):
            raise ConfigError(f"{where}.window_s: must be a number of seconds > 0 (got {w!r})")
        out["window_s"] = float(w)
    return out


def _check_feedback(where: str, spec: Any) -> dict | None:
    """``controller.sla.feedback``: false (None), true (the defaults) or a mapping."""
    from olsctl.feedback import FULL_ABOVE, RELAX_BELOW

    if spec is False or spec is None:
        return None
    if spec is True:
        spec = {}
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: must be true, false or a mapping (got {_kind(spec)} "
                          f"{spec!r})")
    known = {"relax_below": RELAX_BELOW, "full_above": FULL_ABOVE}
    for key in spec:
        if key not in known:
            raise ConfigError(f"{where}.{key}: unknown key (known: {', '.join(known)})")
    out = {}
    for key, default in known.items():
        v = spec.get(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0 or math.isinf(v):
            raise ConfigError(f"{where}.{key}: must be a number >= 0 (got {v!r})")
        out[key] = float(v)
    if not out["full_above"] > out["relax_below"]:
        raise ConfigError(f"{where}.full_above: must be above relax_below "
                          f"({out['relax_below']:g}), got {out['full_above']:g}")
    return out


def _check_candidates(where: str, cands: dict) -> dict:
    """Candidate lists as plain sorted lists: {active_procs: {fraction|procs: [...]},
    power_cap: {fraction|watts: [...]}, window: [...]}."""
    known = ("active_procs", "power_cap", "window", "policy")
    for key in cands:
        if key not in known:
            raise ConfigError(f"{where}.{key}: unknown candidate setting (known: {', '.join(known)})")
    out: dict[str, Any] = {}
    ap = cands.get("active_procs", {"fraction": [1.0]})
    if not isinstance(ap, dict) or len(ap) != 1 or next(iter(ap)) not in ("fraction", "procs"):
        raise ConfigError(f"{where}.active_procs: must be {{fraction: [...]}} or {{procs: [...]}}")
    kind = next(iter(ap))
    if kind == "fraction":
        values = _values(f"{where}.active_procs.fraction", ap[kind], float, 0.0, 1.0)
    else:
        values = _values(f"{where}.active_procs.procs", ap[kind], int, 1, None)
    out["active_procs"] = {kind: values}
    if "power_cap" in cands:
        pc = cands["power_cap"]
        if not isinstance(pc, dict) or len(pc) != 1 or next(iter(pc)) not in ("fraction", "watts"):
            raise ConfigError(f"{where}.power_cap: must be {{fraction: [...]}} or {{watts: [...]}}")
        kind = next(iter(pc))
        values = _values(f"{where}.power_cap.{kind}", pc[kind], float, 0.0,
                         10.0 if kind == "fraction" else None)
        out["power_cap"] = {kind: values}
    if "window" in cands:
        out["window"] = _values(f"{where}.window", cands["window"], int, 1, None)
    if "policy" in cands:
        params = cands["policy"]
        if not isinstance(params, dict) or not params:
            raise ConfigError(f"{where}.policy: must map tunable policy settings to lists of "
                              f"values (got {params!r})")
        out["policy"] = {}
        for name, values in params.items():
            here = f"{where}.policy.{name}"
            if isinstance(values, dict):
                values = _values(here, values, float, -math.inf, None)
            if not isinstance(values, list) or not values:
                raise ConfigError(f"{here}: must be a non-empty list of values or "
                                  f"{{from, to, step}}")
            out["policy"][str(name)] = values
    return out


def _values(where: str, spec: Any, kind: type, low: float, high: float | None) -> list:
    """A non-empty list of numbers in (low, high] (integers >= low for ``int``), given as
    a list or as {from, to, step} (``to`` included when a step lands on it)."""
    if isinstance(spec, dict):
        if set(spec) != {"from", "to", "step"}:
            raise ConfigError(f"{where}: a range needs exactly from, to and step")
        for k in ("from", "to", "step"):
            v = spec[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ConfigError(f"{where}.{k}: must be a number (got {v!r})")
        a, b, step = spec["from"], spec["to"], spec["step"]
        if step <= 0 or b < a:
            raise ConfigError(f"{where}: a range needs step > 0 and to >= from")
        n = int(math.floor((b - a) / step + 1e-9)) + 1
        if n > 10_000:
            raise ConfigError(f"{where}: the range has {n} values (at most 10000)")
        spec = [round(a + i * step, 12) for i in range(n)]
    if not isinstance(spec, list) or not spec:
        raise ConfigError(f"{where}: must be a non-empty list or {{from, to, step}}")
    for i, v in enumerate(spec):
        bad = isinstance(v, bool) or not isinstance(v, (int, float))
        if kind is int:
            bad = bad or v != int(v) or v < low
        else:
            bad = bad or not v > low or (high is not None and v > high)
        if bad:
            rng = (f"an integer >= {low}" if kind is int else
                   f"a number in ({low:g}, {high:g}]" if high is not None else f"a number > {low:g}")
            raise ConfigError(f"{where}[{i}]: must be {rng} (got {v!r})")
    return sorted({kind(v) for v in spec})


def _check_type(src: str, key: str, value: Any, kind: type) -> None:
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok = True
    if not ok:
        raise ConfigError(f"{src}: {key}: must be {_name(kind)} (got {_kind(value)} {value!r})")


def _name(kind: type) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false",
            dict: "a mapping", list: "a list"}.get(kind, kind.__name__)


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number", type(None): "nothing"}.get(type(value),
                                                                          type(value).__name__)
