"""Building a run config: from a YAML file, from plain data, with overrides (a file's
keys, the command line's options) and ``--set KEY=VALUE`` settings; every result is
checked (:mod:`olsctl.config.checks`) before it is returned.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

import yaml

from olsctl.config.checks import (_check_controller, _check_policy, _check_power,
                                  _check_run_sla, _check_type, _kind)
from olsctl.config.defaults import TOP_LEVEL, RunConfig
from olsctl.errors import ConfigError
from olsctl.workload import ESTIMATE_MODES


def read_yaml(path: Path) -> Any:
    """The data of a YAML file; a file that cannot be read or parsed is a
    :class:`ConfigError` naming it (and the line)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        _check_unique_keys(path, yaml.compose(text, Loader=yaml.SafeLoader), (), set())
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise ConfigError(f"{path}{where}: {problem}") from None


def _check_unique_keys(path: Path, node: yaml.Node | None, keys: tuple[str, ...],
                       seen: set[int]) -> None:
    """A key given twice in one mapping of the YAML file ``path`` (parsed as ``node``, under
    the keys ``keys``) is a :class:`ConfigError` naming it and its lines: YAML would
    keep the last silently. ``seen``: the nodes already checked (an alias repeats one)."""
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_unique_keys(path, item, (*keys, f"[{i}]"), seen)
    if not isinstance(node, yaml.MappingNode):
        return
    first_line: dict[tuple[str, str], int] = {}
    for key, value in node.value:
        if isinstance(key, yaml.ScalarNode):
            name = ".".join((*keys, key.value)).replace(".[", "[")
            line = key.start_mark.line + 1
            if (key.tag, key.value) in first_line:
                raise ConfigError(f"{path}:{line}: {name}: duplicate key (first on line "
                                  f"{first_line[key.tag, key.value]}; YAML would keep only "
                                  f"the last)")
            first_line[key.tag, key.value] = line
            _check_unique_keys(path, value, (*keys, key.value), seen)


def load_config(path: str | Path) -> RunConfig:
    """Read and validate a YAML run config."""
    path = Path(path)
    data = read_yaml(path)
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
        _check_type(src, key, value, kind, ESTIMATE_MODES if key == "estimates" else None)
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
    cfg = replace(cfg, load_scale=float(cfg.load_scale))  # (1 and 1.0: one run, one id)
    if cfg.estimates not in ESTIMATE_MODES:
        raise ConfigError(f"{src}: estimates: must be one of {', '.join(ESTIMATE_MODES)} "
                          f"(got {cfg.estimates!r})")
    if not cfg.trace:
        raise ConfigError(f"{src}: trace: must not be empty")
    if not cfg.out:
        raise ConfigError(f"{src}: out: must not be empty")
    return cfg


def with_settings(config: RunConfig, assignments: list[str],
                  source: str = "command line") -> RunConfig:
    """Apply ``KEY=VALUE`` settings, then validate once: ``KEY`` is a dotted path into the
    config (``controller.sla.max``), ``VALUE`` is read as YAML (``200``, ``[1, 2]``,
    ``{a: 1}``); see :func:`with_values` for how they combine."""
    return with_values(config, parse_settings(assignments, source), source)


def parse_settings(assignments: list[str], source: str = "command line"
                   ) -> list[tuple[str, Any]]:
    """``KEY=VALUE`` settings as (dotted key, value) pairs, each value read as YAML."""
    parsed = []
    for assignment in assignments:
        key, sep, text = assignment.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"{source}: --set {assignment!r}: must be KEY=VALUE")
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            raise ConfigError(f"{source}: --set {key}: value is not valid YAML ({text!r})") from None
        _top_level_key(key, source)
        parsed.append((key, value))
    return parsed


def _top_level_key(key: str, source: str) -> str:
    """The top-level key of the dotted ``key``; an unknown one is a :class:`ConfigError`."""
    top = key.split(".")[0]
    if top not in TOP_LEVEL:
        raise ConfigError(f"{source}: {key}: unknown key (known: {', '.join(TOP_LEVEL)})")
    return top


def with_values(config: RunConfig, settings: list[tuple[str, Any]],
                source: str = "command line") -> RunConfig:
    """Apply (dotted key, value) settings, then validate once. Setting ``policy.name``
    starts that policy from its defaults; a top-level key (``power``) sets its whole value.

    The order of the settings does not matter: a whole top-level key is set first, then
    ``policy.name``, then the keys inside sections (in the order given), so
    ``policy.order=sjf`` keeps its value whether it comes before ``policy.name`` or after."""
    import copy

    parsed = []
    for key, value in settings:
        _top_level_key(key, source)
        parsed.append((key, key.split("."), value))
    parsed.sort(key=lambda item: 0 if len(item[1]) == 1 else
                1 if item[1] == ["policy", "name"] else 2)
    changes: dict[str, Any] = {}
    for key, path, value in parsed:
        top = path[0]
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
