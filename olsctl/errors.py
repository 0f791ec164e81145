"""Errors a user can act on: each renders as one line naming the file, line, field or key."""

from __future__ import annotations


class OlsctlError(Exception):
    """Base class for input problems; the CLI prints ``Kind: message`` and exits with 2."""

    kind = "Error"

    def __str__(self) -> str:
        return f"{self.kind}: {self.args[0]}"


class TraceError(OlsctlError):
    """A workload file cannot be read: ``file:line: field N (name) ...``."""

    kind = "TraceError"


class ConfigError(OlsctlError):
    """A configuration value is unknown or invalid: ``file: key.path: ...``."""

    kind = "ConfigError"


class SimulationError(OlsctlError):
    """A scheduling decision broke an invariant (raised by the strict checker)."""

    kind = "SimulationError"


class Infeasible:
    """Marks an error that says a valid setting can never run the workload: some job can
    never start under it (too few processors, too little power). ``olsctl tune`` reports
    such settings as infeasible, and keeps them so, instead of counting failures."""


class InfeasibleConfig(ConfigError, Infeasible):
    """A setting refused before the run: some job could never start under it."""


class InfeasibleRun(SimulationError, Infeasible):
    """A run that ended with jobs that could never start."""
