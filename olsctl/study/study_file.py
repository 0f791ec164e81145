"""Reading a study file: its keys checked, its base config read (relative paths
rebased onto the study file's directory), its grid expanded (:mod:`olsctl.study.grid`)
and its ``out``, ``n_jobs``, ``backend`` and ``scheduler`` checked, before anything is
written.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any


from olsctl.config import build_config
from olsctl.config.building import read_yaml
from olsctl.errors import ConfigError
from olsctl.study.grid import (BASE_METRICS, CONTROLLER_METRICS, POWER_METRICS, SLA_METRICS,
                               Study, _axes, _expand, _kind)
from olsctl.workload import BUNDLED

#: Study file keys: (meaning, default).
STUDY_KEYS: dict[str, str] = {
    "base": "the run config every point starts from: a mapping, or a path to a config file",
    "grid": "config keys (dotted into sections) to lists of values, or named axes",
    "out": "study directory (default: the study file's name, in the working directory)",
    "n_jobs": "runs in parallel, one per worker process (-1: all cores; default 1)",
    "backend": "loky (local processes, the default) or dask (a Dask cluster)",
    "scheduler": "the Dask scheduler's address, e.g. tcp://10.0.0.5:8786 (backend: dask)",
}
BACKENDS = ("loky", "dask")


def load_study(path: str | Path, out: str | None = None, n_jobs: int | None = None) -> Study:
    """Read and validate a study file; ``out`` and ``n_jobs`` override the file's."""
    path = Path(path)
    return study_from_data(read_mapping(path), path, out, n_jobs)


def study_from_data(data: dict, path: Path, out: str | None = None,
                    n_jobs: int | None = None) -> Study:
    """A validated study from the parsed study file ``path`` (paths are relative to it)."""
    src = str(path)
    for key in data:
        if key not in STUDY_KEYS:
            raise ConfigError(f"{src}: {key}: unknown key (known: {', '.join(STUDY_KEYS)})")
    study_dir = path.resolve().parent
    base = _base_data(src, study_dir, data.get("base"))
    axes = _axes(src, data.get("grid"))
    settings = _run_settings(src, data, out, n_jobs, path)
    points = _expand(src, study_dir, base, axes)
    columns = tuple(a.name for a in axes)
    taken = {"id", *BASE_METRICS, *CONTROLLER_METRICS, *POWER_METRICS, *SLA_METRICS} \
        & set(columns)
    if taken:
        raise ConfigError(f"{src}: grid.{sorted(taken)[0]}: the name of a results.csv column "
                          f"olsctl fills; name the axis otherwise")
    return Study(src, columns=columns, points=points, **settings)


def read_mapping(path: Path) -> dict:
    """The data of a YAML file whose top level must be a mapping (a study, tune or base
    config file); anything else is a :class:`ConfigError` naming the file."""
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping of keys, got {_kind(data)}")
    return data


def _base_data(src: str, study_dir: Path, spec: Any) -> dict:
    """The base run config as plain data, its relative paths made relative to the study
    file; checked on its own so that its errors name the base."""
    if spec is None:
        raise ConfigError(f"{src}: base: missing (a run config mapping, {{}} for the "
                          f"defaults, or the path of a config file)")
    if isinstance(spec, str):
        base_path = study_dir / spec
        if not base_path.is_file():
            raise ConfigError(f"{src}: base: no such config file: {spec} (looked in {study_dir})")
        data = read_mapping(base_path)
        build_config(data, source=str(base_path), base_dir=base_path.parent)
        data = _rebase_paths(data, base_path.parent, study_dir)
    elif isinstance(spec, dict):
        data = copy.deepcopy(spec)
        build_config(data, source=f"{src}: base", base_dir=study_dir)
    else:
        raise ConfigError(f"{src}: base: must be a mapping or a file path (got {_kind(spec)})")
    data.pop("out", None)  # every run gets its own directory in the study
    return data


def _rebase_paths(data: dict, from_dir: Path, to_dir: Path) -> dict:
    """``trace`` and ``power.profiles`` of a config in ``from_dir`` as seen from ``to_dir``."""
    data = copy.deepcopy(data)

    def moved(text: str) -> str:
        p = Path(text).expanduser()
        if p.is_absolute():
            return text
        try:
            return Path(os.path.relpath(from_dir / p, to_dir)).as_posix()
        except ValueError:  # another drive
            return str((from_dir / p).resolve())

    if isinstance(data.get("trace"), str) and data["trace"] not in BUNDLED:
        data["trace"] = moved(data["trace"])
    power = data.get("power")
    if isinstance(power, dict) and isinstance(power.get("profiles"), str) \
            and power["profiles"] != "synthetic":
        power["profiles"] = moved(power["profiles"])
    return data


def _run_settings(src: str, data: dict, out: str | None, n_jobs: int | None,
                  path: Path) -> dict:
    """``out_dir``, ``n_jobs``, ``backend`` and ``scheduler`` of a study, checked."""
    out = out if out is not None else data.get("out", path.stem)
    if not isinstance(out, str) or not out:
        raise ConfigError(f"{src}: out: must be a non-empty string (got {out!r})")
    out_dir = Path(out)
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"{src}: out: {out} exists and is not a directory")
    n = n_jobs if n_jobs is not None else data.get("n_jobs", 1)
    if isinstance(n, bool) or not isinstance(n, int) or n == 0 or n < -1:
        raise ConfigError(f"{src}: n_jobs: must be an integer >= 1 or -1 (got {n!r})")
    backend = data.get("backend", "loky")
    if backend not in BACKENDS:
        raise ConfigError(f"{src}: backend: must be one of {', '.join(BACKENDS)} "
                          f"(got {backend!r})")
    scheduler = data.get("scheduler")
    if backend == "dask":
        if not isinstance(scheduler, str) or "://" not in scheduler:
            raise ConfigError(f"{src}: scheduler: backend dask needs the scheduler's address, "
                              f"e.g. tcp://127.0.0.1:8786 (got {scheduler!r})")
        try:
            import dask.distributed  # noqa: F401
        except ImportError:
            raise ConfigError(f"{src}: backend: dask needs the dask extra: "
                              f"pip install 'olsctl[dask]'") from None
    elif scheduler is not None:
        raise ConfigError(f"{src}: scheduler: only used with backend: dask")
    return {"out_dir": out_dir, "n_jobs": n, "backend": backend, "scheduler": scheduler}
