"""The checks of a run config's keys and sections (policy, power, controller, sla):
types, ranges and choices, each error naming the key (``ConfigError: easy.yaml:
policy.order: must be one of ...``); each returns the section with its defaults filled.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Sequence

from olsctl import backends
from olsctl.config.defaults import CONTROLLER_KEYS, POWER_KEYS
from olsctl.controller.trials import COSTS, SLA_METRICS
from olsctl.controller.search import KNOWN_COSTS, STRATEGIES
from olsctl.controller.settings import ARRIVAL_MODELS
from olsctl.errors import ConfigError
from olsctl.feedback import FULL_ABOVE, RELAX_BELOW
from olsctl.policies import REGISTRY, policy_error
from olsctl.power.cap import parse_cap
from olsctl.power.limit import LIMITS, SHARES


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
            _check_type(src, f"policy.{key}", value, param.kind, param.choices)
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
    # defaults that depend on other settings (MQBF's boundaries on its number of queues)
    derive = getattr(entry.factory, "derived_defaults", None)
    if derive is not None:
        out.update({k: v for k, v in derive(out, set(spec)).items() if k not in spec})
    problem = policy_error(out)
    if problem is not None:
        raise ConfigError(f"{src}: policy.{problem}")
    return out


def _check_power(src: str, spec: dict) -> dict:
    out = {}
    for key, value in spec.items():
        if key not in POWER_KEYS:
            raise ConfigError(f"{src}: power.{key}: unknown key (known: {', '.join(POWER_KEYS)})")
    for key, (kind, default, _help) in POWER_KEYS.items():
        value = spec.get(key, default)
        if kind is not object:
            _check_type(src, f"power.{key}", value, kind,
                        {"limit": LIMITS, "share": SHARES}.get(key))
        if kind is float:
            value = float(value)
            if value < 0 or (key in ("peak_w", "sample_s") and value == 0):
                bound = "> 0" if key in ("peak_w", "sample_s") else ">= 0"
                raise ConfigError(f"{src}: power.{key}: must be {bound} (got {value:g})")
        out[key] = value
    if out["procs_per_node"] < 1:
        raise ConfigError(f"{src}: power.procs_per_node: must be >= 1 "
                          f"(got {out['procs_per_node']})")
    if out["idle_w"] > out["peak_w"]:
        raise ConfigError(f"{src}: power.idle_w: must not exceed peak_w ({out['peak_w']:g})")
    parse_cap(out["cap"], 1.0, f"{src}: power.cap")  # structure and order; watts later
    for key, known in (("limit", LIMITS), ("share", SHARES)):
        if out[key] not in known:
            raise ConfigError(f"{src}: power.{key}: must be one of {', '.join(known)} "
                              f"(got {out[key]!r})")
    if not 0 < out["min_clock"] <= 1:
        raise ConfigError(f"{src}: power.min_clock: must be in (0, 1] (got {out['min_clock']:g})")
    return out


def _check_controller(src: str, spec: dict) -> dict:
    where = f"{src}: controller"
    for key in spec:
        if key not in CONTROLLER_KEYS:
            raise ConfigError(f"{where}.{key}: unknown key (known: {', '.join(CONTROLLER_KEYS)})")
    out = {}
    for key, (kind, default, _help) in CONTROLLER_KEYS.items():
        value = spec.get(key, default)
        if kind is not object and not (value is None and default is None):
            _check_type(src, f"controller.{key}", value, kind,
                        {"search": tuple(STRATEGIES), "arrivals": ARRIVAL_MODELS,
                         "backend": backends.BACKENDS}.get(key))
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
    _check_cost(where, out["cost"])
    _check_search(where, out)
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
    backends.check(where, out["backend"], out["cluster"], out["n_jobs"])
    if out["parallel_min_waiting"] < 0:
        raise ConfigError(f"{where}.parallel_min_waiting: must be >= 0 "
                          f"(got {out['parallel_min_waiting']})")
    pool = out["pool_min_s"]
    if pool != "auto" and (isinstance(pool, bool) or not isinstance(pool, (int, float))
                           or not pool >= 0):
        raise ConfigError(f"{where}.pool_min_s: must be auto or a number of seconds >= 0 "
                          f"(got {pool!r})")
    return out


def _check_cost(where: str, cost: Any) -> None:
    """``controller.cost``: a cost's name, or ``{weights: {name: weight >= 0, ...}}``."""
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


def _check_search(where: str, out: dict) -> None:
    """``controller.search`` and ``arrivals`` among the known names, and a cost that
    ``cheapest-first`` can rank candidates by before their what-ifs run."""
    for key, choices in (("search", tuple(STRATEGIES)), ("arrivals", ARRIVAL_MODELS)):
        if out[key] not in choices:
            raise ConfigError(f"{where}.{key}: must be one of {', '.join(choices)} "
                              f"(got {out[key]!r})")
    if out["search"] == "cheapest-first":
        cost = out["cost"]
        names = [cost] if isinstance(cost, str) else list(cost["weights"])
        late = [n for n in names if n not in KNOWN_COSTS and not str(n).startswith("policy.")]
        if late:
            raise ConfigError(f"{where}.search: cheapest-first ranks candidates before their "
                              f"what-ifs run, so the cost must be known then ("
                              f"{', '.join(KNOWN_COSTS)}, policy.<setting>); {late[0]} is not "
                              f"(bound-first chooses as grid does for every cost)")


def _check_sla_limit(where: str, sla: dict) -> tuple[str, float]:
    """An SLA's metric and limit, checked (defaults: mean_bsld, 200)."""
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
    if spec is False or spec is None:
        return None
    if spec is True:
        spec = {}
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: must be true, false or a mapping (got {_kind(spec)} "
                          f"{spec!r})")
    known = {"relax_below": RELAX_BELOW, "full_above": FULL_ABOVE}
    for key in spec:
        if key not in known and key != "backlog":
            raise ConfigError(f"{where}.{key}: unknown key (known: {', '.join(known)}, "
                              f"backlog)")
    out: dict = {}
    backlog = spec.get("backlog", False)
    if not isinstance(backlog, bool):
        raise ConfigError(f"{where}.backlog: must be true or false (got {backlog!r})")
    if backlog:
        out["backlog"] = True
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
    if not cands:
        raise ConfigError(f"{where}: must name at least one setting to try "
                          f"({', '.join(known)}); leave candidates out for the default")
    for key in cands:
        if key not in known:
            raise ConfigError(f"{where}.{key}: unknown candidate setting "
                              f"(known: {', '.join(known)})")
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


def _check_type(src: str, key: str, value: Any, kind: type,
                choices: Sequence[Any] | None = None) -> None:
    """``value`` must be of ``kind``; the error names ``choices`` when the key has them,
    and says when the value is empty (``--set key=``, or ``key:`` with nothing after)."""
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok = True
    if ok:
        return
    what = _name(kind) if choices is None else f"one of {', '.join(map(str, choices))}"
    if value is None:
        raise ConfigError(f"{src}: {key}: is empty (must be {what})")
    got = f"{_kind(value)} {value!r}" if choices is None else repr(value)
    raise ConfigError(f"{src}: {key}: must be {what} (got {got})")


def _name(kind: type) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false",
            dict: "a mapping", list: "a list"}.get(kind, kind.__name__)


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number", type(None): "nothing"}.get(type(value),
                                                                          type(value).__name__)
