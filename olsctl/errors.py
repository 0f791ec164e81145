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


def cannot_write(where: str, path: object, exc: OSError, folder: bool = True) -> ConfigError:
    """The one-line error for an output ``path`` (a folder, or a file with ``folder``
    false) that cannot be written: ``where: cannot write into path: why``, ``where``
    naming what chose it (``study.yaml: out``, ``command line: --swf``)."""
    into = "into " if folder else ""
    why = exc.strerror or str(exc)
    if isinstance(exc, FileExistsError) and exc.filename:  # a folder to make is a file
        why = f"{exc.filename} is a file"
    return ConfigError(f"{where}: cannot write {into}{path}: {why}")
