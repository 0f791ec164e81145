"""Run configuration: defaults, YAML loading, and validation in one place.

Every key is checked once, when the config is built: unknown keys and bad values are
rejected with the key path (``ConfigError: easy.yaml: policy.order: must be one of ...``).
Command-line options override the file and are checked by the same code.

The parts: :mod:`~olsctl.config.defaults` (the keys and :class:`RunConfig`),
:mod:`~olsctl.config.building` (files, overrides, ``--set``),
:mod:`~olsctl.config.checks` (each key and section) and :mod:`~olsctl.config.run_checks`
(across sections and against the workload). The names other modules use are importable
from ``olsctl.config``.
"""

from __future__ import annotations

from olsctl.config.building import build_config, load_config, with_overrides, with_settings
from olsctl.config.defaults import BACKENDS, CONTROLLER_KEYS, POWER_KEYS, TOP_LEVEL, RunConfig
from olsctl.config.run_checks import check_run

__all__ = [
    "BACKENDS", "CONTROLLER_KEYS", "POWER_KEYS", "TOP_LEVEL", "RunConfig", "build_config",
    "check_run", "load_config", "with_overrides", "with_settings",
]
