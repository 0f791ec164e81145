"""olsctl: trace-driven batch-scheduling simulation with an online-simulation controller.

The names in :data:`__all__` are the Python API (:mod:`olsctl.api`: ``run``, ``study``,
``load_trace``, ``load_run`` and what they return) and the errors it raises; they are
public and stable (``olsctl.study`` is also the package of studies: calling it runs one,
as :func:`olsctl.api.study`). They are imported at first use, so ``import olsctl`` (and
the command line, which starts with it) loads nothing else.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path as _Path
from typing import Any

from olsctl.errors import ConfigError, OlsctlError, SimulationError, TraceError

__version__ = "0.1.0"

__all__ = ["ConfigError", "OlsctlError", "RunResult", "SimulationError", "StudyError",
           "StudyResult", "TraceError", "load_run", "load_trace", "run", "study"]

#: the public names not imported above -> the module that holds each
_LAZY = {"RunResult": "olsctl.api", "StudyResult": "olsctl.api", "load_run": "olsctl.api",
         "load_trace": "olsctl.api", "run": "olsctl.api",
         "StudyError": "olsctl.study.storage"}


def __getattr__(name: str) -> Any:
    if name == "study":  # the package olsctl.study, which runs a study when called
        return import_module("olsctl.study")
    if name not in _LAZY:
        raise AttributeError(f"module 'olsctl' has no attribute {name!r}")
    value = getattr(import_module(_LAZY[name]), name)
    globals()[name] = value  # found here from now on
    return value


def api_study(study: Any, /, **kwargs: Any) -> Any:
    """:func:`olsctl.api.study`, what calling the package ``olsctl.study`` runs (found
    here, like every public name, so that the package does not import the API that
    imports it)."""
    return import_module("olsctl.api").study(study, **kwargs)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


# An installed olsctl carries the top-level policies/ and traces/ folders of the source
# tree as olsctl.policies and olsctl.traces. Imported straight from a source checkout
# (the checkout's root on sys.path, e.g. `python -c ...` run in it), those folders sit
# beside this package instead, so let the package look there too.
_root = _Path(__file__).resolve().parent.parent
if not (_Path(__file__).resolve().parent / "policies").is_dir() \
        and (_root / "policies" / "__init__.py").is_file():
    __path__.append(str(_root))  # type: ignore[name-defined]
