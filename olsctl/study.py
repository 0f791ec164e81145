"""Studies: a grid of runs over one base config, run in parallel and stored run by run.

A study file (YAML) holds ``base`` (a run config, or the path of one), ``grid`` (config
keys, dotted into the ``policy``, ``power`` and ``controller`` sections, each with a list
of values; or named axes whose labels each stand for several settings applied together)
and optionally ``out``, ``n_jobs``, ``backend`` and ``scheduler``. The study is the
cartesian product of the grid, in grid order (the last key varies fastest).

Every grid point is a validated :class:`RunConfig` whose id is a readable prefix and a
hash of the config, so the same run keeps the same id whatever the grid around it. A
study directory holds:

- ``runs/<id>/``: a finished run's files, moved into place whole by one rename, so a run
  directory that exists is a complete run;
- ``results.csv``: one row per finished run of the grid, in grid order, rewritten
  (atomically) after every run;
- ``failed.csv``: the runs that failed in the current invocation, and why;
- ``.partial/``: runs being written; what an interrupted study left there is removed at
  the next start (a lock keeps two studies out of one directory).

Everything in the study file is checked, every grid point built and its trace found,
before anything is written.
"""

from __future__ import annotations

import copy
import csv
import hashlib
import io
import itertools
import json
import os
import re
import shutil
import tempfile
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator

import yaml

from olsctl.config import TOP_LEVEL, RunConfig, build_config
from olsctl.errors import ConfigError, OlsctlError, TraceError
from olsctl.output import json_text, num, write_atomic
from olsctl.policies import REGISTRY
from olsctl.workload import BUNDLED, resolve_trace

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
RUN_FILES = ("jobs.csv", "timeseries.csv", "summary.json")


class StudyError(OlsctlError):
    """A study could not go on (its directory is in use, a worker process died)."""

    kind = "StudyError"


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


# --- reading and checking a study file -------------------------------------------------

def load_study(path: str | Path, out: str | None = None, n_jobs: int | None = None) -> Study:
    """Read and validate a study file; ``out`` and ``n_jobs`` override the file's."""
    path = Path(path)
    return study_from_data(_read_yaml(path), path, out, n_jobs)


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


def _read_yaml(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{where}: {getattr(exc, 'problem', None) or 'not valid YAML'}"
                          ) from None
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
        data = _read_yaml(base_path)
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
    parts = [_trace_name(config.trace), config.policy["name"]]
    if config.controller is not None:
        parts.append("ols")
    prefix = re.sub(r"[^A-Za-z0-9._+-]+", "_", "-".join(parts))
    return f"{prefix}-{digest}"


def _trace_name(trace: str) -> str:
    name = Path(trace).name
    for short, file_name in BUNDLED.items():
        if name in (short, file_name):
            return short
    for suffix in (".gz", ".swf"):
        name = name[: -len(suffix)] if name.endswith(suffix) else name
    return name or "trace"


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number", type(None): "nothing"}.get(
        type(value), type(value).__name__)


# --- one run in a worker ---------------------------------------------------------------

@dataclass
class Outcome:
    """What a worker hands back: a summary and the run's files (still in a directory of
    the study's ``.partial``, or as bytes from a remote worker), or a one-line error."""

    run_id: str
    summary: dict | None = None
    error: str | None = None
    path: str | None = None
    files: dict[str, bytes] | None = None
    wall_s: float = 0.0


def run_point(rid: str, config: RunConfig, scratch: str | None) -> Outcome:
    """Run one grid point into a new directory under ``scratch`` (kept there for the
    caller to move), or, with ``scratch`` None, under the system's temporary directory
    and hand the files back as bytes. Errors become the outcome's one-line ``error``."""
    from olsctl.runner import execute

    t0 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix=f"{rid}.")) if scratch is None else _new_dir(scratch, rid)
    try:
        execute(replace(config, out=str(tmp)))
        summary_path = tmp / "summary.json"
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
        summary["config"]["out"] = config.out  # the run's place in the study, not tmp
        write_atomic(summary_path, json_text(summary))
        outcome = Outcome(rid, summary=summary, path=str(tmp))
        if scratch is None:
            outcome.files = {p.name: p.read_bytes() for p in sorted(tmp.iterdir())}
            outcome.path = None
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if not isinstance(exc, Exception):
            raise
        text = str(exc) if isinstance(exc, OlsctlError) else f"{type(exc).__name__}: {exc}"
        outcome = Outcome(rid, error=" ".join(text.split()))
    outcome.wall_s = time.perf_counter() - t0
    return outcome


# --- running a study -------------------------------------------------------------------

@dataclass
class StudyResult:
    """Summaries of the finished runs and errors of the failed ones, by run id."""

    done: dict[str, dict] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    computed: int = 0
    wall_s: float = 0.0


class StudyProgress:
    """Told about a study's progress; this one shows nothing."""

    def start(self, study: Study, todo: int, done: int) -> None:
        """``todo`` runs to compute now, ``done`` already finished."""

    def advance(self, outcome: Outcome) -> None:
        """One run finished or failed."""

    def close(self) -> None:
        """The study stopped (finished or not)."""


NULL_STUDY_PROGRESS = StudyProgress()


def finished_runs(study: Study) -> dict[str, dict]:
    """Summaries of the grid's runs whose directories are complete, by id."""
    done = {}
    for point in study.points:
        d = study.out_dir / "runs" / point.run_id
        if not all((d / name).is_file() for name in RUN_FILES):
            continue
        try:
            done[point.run_id] = json.loads((d / "summary.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
    return done


def run_study(study: Study, progress: StudyProgress = NULL_STUDY_PROGRESS) -> StudyResult:
    """Compute the grid's missing runs, storing each run and the tables as it finishes."""
    t0 = time.perf_counter()
    client = _connect(study) if study.backend == "dask" else None  # before any write
    result = StudyResult()
    try:
        with _locked(study.out_dir):
            scratch = study.out_dir / ".partial"
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir()
            (study.out_dir / "runs").mkdir(exist_ok=True)
            result.done = finished_runs(study)
            todo = [p for p in study.points if p.run_id not in result.done]
            write_tables(study, result.done, result.failed)
            progress.start(study, len(todo), len(result.done))
            try:
                for outcome in _outcomes(study, todo, scratch, client):
                    if outcome.error is None:
                        _store(study.out_dir, outcome)
                        result.done[outcome.run_id] = outcome.summary
                    else:
                        result.failed[outcome.run_id] = outcome.error
                    result.computed += 1
                    write_tables(study, result.done, result.failed)
                    progress.advance(outcome)
            finally:
                progress.close()
            shutil.rmtree(scratch, ignore_errors=True)
    finally:
        if client is not None:
            client.close()
    result.wall_s = time.perf_counter() - t0
    return result


def _connect(study: Study):
    from dask.distributed import Client

    try:
        return Client(study.scheduler)
    except Exception as exc:  # unreachable, refused, a bad address: all the same to the user
        raise StudyError(f"{study.source}: scheduler: cannot connect to {study.scheduler}: "
                         f"{' '.join(str(exc).split()) or type(exc).__name__}") from None


@contextmanager
def _locked(out_dir: Path) -> Iterator[None]:
    """Create ``out_dir`` and hold its lock (released by the system if the process dies)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # no advisory locks here: trust the user
        yield
        return
    with open(out_dir / ".lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise StudyError(f"{out_dir}: another olsctl study is running in this "
                             f"directory") from None
        yield


def _outcomes(study: Study, todo: list[GridPoint], scratch: Path, client) -> Iterator[Outcome]:
    """Outcomes in the order the runs finish."""
    if not todo:
        return
    if client is not None:
        yield from _dask_outcomes(client, todo)
        return
    from joblib import Parallel, delayed
    from joblib.externals.loky.process_executor import TerminatedWorkerError

    parallel = Parallel(n_jobs=study.n_jobs, backend="loky", return_as="generator_unordered")
    try:
        where = str(scratch.resolve())  # pool workers may run in another directory
        yield from parallel(delayed(run_point)(p.run_id, p.config, where) for p in todo)
    except TerminatedWorkerError as exc:
        why = " ".join(str(exc).split())[:200]
        raise StudyError(f"{study.source}: a worker process died ({why}); the finished runs "
                         f"are kept: run the study again to go on") from None


def _dask_outcomes(client, todo: list[GridPoint]) -> Iterator[Outcome]:
    """Each run as a task on the cluster; files come back as bytes (no shared disk needed)."""
    from dask.distributed import as_completed

    ids = {}
    futures = []
    for p in todo:
        fut = client.submit(run_point, p.run_id, p.config, None, pure=False)
        ids[fut.key] = p.run_id
        futures.append(fut)
    for fut in as_completed(futures):
        try:
            yield fut.result()
        except Exception as exc:  # the task never ran to the end (a worker was lost)
            text = " ".join(f"{type(exc).__name__}: {exc}".split())
            yield Outcome(ids[fut.key], error=text)


def _new_dir(parent: str | Path, rid: str) -> Path:
    """A new directory for a run's files, with the usual permissions (unlike mkdtemp's)."""
    while True:
        path = Path(parent) / f"{rid}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue


def _store(out_dir: Path, outcome: Outcome) -> None:
    """Move a finished run into ``runs/<id>`` with one rename."""
    final = out_dir / "runs" / outcome.run_id
    if outcome.files is not None:
        tmp = _new_dir(out_dir / ".partial", outcome.run_id)
        for name, data in outcome.files.items():
            (tmp / name).write_bytes(data)
    else:
        tmp = Path(outcome.path)
    _sync(tmp, *tmp.iterdir())  # on disk before the rename makes the run count
    if final.exists():  # an incomplete directory (files deleted by hand): replaced
        shutil.rmtree(final)
    os.replace(tmp, final)
    _sync(final.parent)


def _sync(*paths: Path) -> None:
    """Flush files and directories to disk (where the system allows it)."""
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)


# --- tables ----------------------------------------------------------------------------

def write_tables(study: Study, done: dict[str, dict], failed: dict[str, str]) -> None:
    """Rewrite results.csv (and failed.csv, removed when nothing failed), atomically."""
    write_atomic(study.out_dir / "results.csv", results_csv(study, done))
    failed_path = study.out_dir / "failed.csv"
    if failed:
        write_atomic(failed_path, failed_csv(study, failed))
    elif failed_path.exists():
        failed_path.unlink()


#: the summary.json section of each results.csv figure that is not in ``metrics``
METRIC_SECTIONS = {"ticks": "controller", "sla_misses": "controller",
                   **{name: "power" for name in POWER_METRICS},
                   "sla_windows_kept_share": "sla"}
#: results.csv figures named otherwise in their summary.json section
METRIC_KEYS = {"sla_windows_kept_share": "kept_share"}


def metric_values(summary: dict, columns: tuple[str, ...]) -> list:
    """The ``columns`` of a run's summary.json (None where the run has no such figure)."""
    out = []
    for c in columns:
        section = summary.get(METRIC_SECTIONS.get(c, "metrics"))
        out.append(section.get(METRIC_KEYS.get(c, c)) if isinstance(section, dict) else None)
    return out


def results_csv(study: Study, done: dict[str, dict]) -> str:
    """One row per finished run, in grid order: id, grid labels, metrics."""
    cols = study.metric_columns
    rows = [[p.run_id, *p.labels, *(_cell(v) for v in metric_values(done[p.run_id], cols))]
            for p in study.points if p.run_id in done]
    return _csv(["id", *study.columns, *cols], rows)


def failed_csv(study: Study, failed: dict[str, str]) -> str:
    rows = [[p.run_id, *p.labels, failed[p.run_id]]
            for p in study.points if p.run_id in failed]
    return _csv(["id", *study.columns, "error"], rows)


def _cell(value: Any) -> str:
    return "" if value is None else num(value) if isinstance(value, (int, float)) else str(value)


def _csv(header: list[str], rows: list[list[str]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


# --- what the terminal shows -----------------------------------------------------------

class PlainStudyProgress(StudyProgress):
    """One line per finished or failed run (for logs and pipes)."""

    def __init__(self, console) -> None:
        self.console = console
        self.todo = self.count = self.failed = 0
        self.t0 = 0.0

    def start(self, study: Study, todo: int, done: int) -> None:
        self.todo, self.t0 = todo, time.perf_counter()
        self.console.print(f"study {study.source}: {len(study.points)} runs, {done} already "
                           f"finished, {todo} to compute in {study.out_dir}", markup=False,
                           highlight=False, soft_wrap=True)

    def advance(self, outcome: Outcome) -> None:
        self.count += 1
        self.failed += outcome.error is not None
        elapsed = time.perf_counter() - self.t0
        left = elapsed / self.count * (self.todo - self.count)
        what = f"failed: {outcome.error}" if outcome.error else "done"
        self.console.print(f"[{self.count}/{self.todo}] {outcome.run_id} {what} "
                           f"({outcome.wall_s:.1f} s; {self.failed} failed; about {left:.0f} s "
                           f"left)", markup=False, highlight=False, soft_wrap=True)


class RichStudyProgress(StudyProgress):
    """A progress bar: runs done of those to compute, failures, time left."""

    def __init__(self, console) -> None:
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)

        self.bar = Progress(TextColumn("[bold]study"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("runs, {task.fields[failed]} failed,"),
                            TimeRemainingColumn(), TextColumn("left,"), TimeElapsedColumn(),
                            TextColumn("elapsed"), console=console)
        self.task = None
        self.failed = 0

    def start(self, study: Study, todo: int, done: int) -> None:
        self.bar.start()
        self.task = self.bar.add_task("study", total=todo, failed=0)

    def advance(self, outcome: Outcome) -> None:
        self.failed += outcome.error is not None
        self.bar.update(self.task, advance=1, failed=self.failed)

    def close(self) -> None:
        self.bar.stop()


def study_progress(console) -> StudyProgress:
    """A bar on a terminal, plain lines otherwise."""
    return RichStudyProgress(console) if console.is_terminal else PlainStudyProgress(console)


def study_table(study: Study, done: dict[str, dict], failed: dict[str, str],
                ids: bool = False):
    """Every grid point in grid order with its status and main metrics (numbered as the
    rows of results.csv), or with ``ids`` its run id instead (a rich Table)."""
    from rich import box
    from rich.table import Table

    caption = f"runs in {study.out_dir / 'runs'}"
    if not ids:
        caption += ", ids in results.csv; SLA %: share of the SLA windows kept"
    table = Table(title=f"olsctl study: {study.source}", title_justify="left",
                  caption=caption, caption_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    if not ids:
        table.add_column("#", justify="right", no_wrap=True)
    for i, col in enumerate(study.columns):
        widest = max(len(p.labels[i]) for p in study.points)
        table.add_column(col, overflow="fold", min_width=min(max(widest, 1), 10))
    shown = [] if ids else _shown_metrics(study)
    if ids:
        table.add_column("id", no_wrap=True)
    for _key, (head, _scale), _digits in shown:
        table.add_column(head, justify="right", no_wrap=True)
    table.add_column("status", no_wrap=True)
    for p in study.points:
        status = "done" if p.run_id in done else "failed" if p.run_id in failed else "missing"
        if ids:
            cells = [p.run_id]
        elif p.run_id in done:
            values = metric_values(done[p.run_id], tuple(k for k, _h, _d in shown))
            cells = [_fmt(v, scale, d) for v, (_k, (_h, scale), d) in zip(values, shown)]
        else:
            cells = ["-"] * len(shown)
        number = [] if ids else [str(p.index + 1)]
        table.add_row(*number, *(text or "-" for text in p.labels), *cells, status)
    return table


def _shown_metrics(study: Study) -> list[tuple[str, tuple[str, float], int]]:
    """(summary key, (heading, scale), digits) of the metrics the table shows."""
    shown = [("mean_bsld", ("bsld", 1.0), 2), ("mean_wait_s", ("wait h", 1 / 3600), 1),
             ("utilization", ("util", 1.0), 3)]
    if CONTROLLER_METRICS[0] in study.metric_columns:
        shown.append(("processor_savings", ("saved", 1.0), 3))
    if POWER_METRICS[0] in study.metric_columns:
        shown += [("energy_j", ("MWh", 1 / 3.6e9), 2), ("csr", ("CSR", 1.0), 3)]
    shown.append(("sla_windows_kept_share", ("SLA %", 100.0), 1))
    return shown


def _fmt(value: Any, scale: float, digits: int) -> str:
    return "-" if value is None else f"{value * scale:,.{digits}f}"
