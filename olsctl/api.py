"""The Python API: one run, a study and a workload from a script or a notebook, as the
command line makes them, with their results as numpy arrays (and pandas DataFrames when
pandas is installed).

What belongs here: the calls a researcher makes (:func:`run`, :func:`study`,
:func:`load_trace`, :func:`load_run`), what they return (:class:`RunResult`,
:class:`StudyResult`), and the building of a run's config from a file, a mapping or
nothing, with overrides (:func:`run_config`), which ``olsctl run`` calls too. The work
itself is the command line's: :func:`olsctl.runner.execute` for a run and
:func:`olsctl.study.run_study` for a study.

Bad input raises olsctl's own errors (:class:`olsctl.errors.ConfigError`,
:class:`olsctl.errors.TraceError`, ...) whose text is the line ``olsctl`` prints; their
traceback stops at the call the user made.
"""

from __future__ import annotations

import csv
import functools
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, TypeVar

import numpy as np

from olsctl.config import RunConfig, build_config, load_config, with_overrides
from olsctl.config.building import _top_level_key, with_values
from olsctl.errors import ConfigError, OlsctlError

if TYPE_CHECKING:
    from olsctl.study import Study
    from olsctl.workload import Workload

__all__ = ["RunResult", "StudyResult", "load_run", "load_trace", "run", "run_config",
           "study", "study_of"]

#: where errors say keyword arguments of :func:`run`, :func:`study` and
#: :func:`load_trace` came from
ARGUMENTS = "arguments"
#: where errors say a config given as a mapping came from
MAPPING = "<mapping>"
#: where errors say a study given as a mapping came from
STUDY_MAPPING = "<study mapping>"

F = TypeVar("F", bound=Callable[..., Any])


def _public(fn: F) -> F:
    """``fn`` raising olsctl's errors with a traceback that stops at the caller's call
    (the one-line message is the whole story; the frames inside olsctl are noise)."""
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except OlsctlError as exc:
            raise exc.with_traceback(None) from None
    return call  # type: ignore[return-value]


# --- a run's config ----------------------------------------------------------------------

def plain(value: Any) -> Any:
    """``value`` as the plain data a YAML file gives: mappings as dicts, tuples and
    arrays as lists, numpy scalars as Python numbers, paths as text (what a notebook
    hands over: ``np.arange(...)``, ``Path(...)``)."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def _base_config(config: Any) -> RunConfig:
    """The config a run starts from: a YAML file, a mapping (relative paths from the
    working directory), a :class:`RunConfig`, or the defaults (None)."""
    if config is None:
        return build_config({})
    if isinstance(config, RunConfig):
        return config
    if isinstance(config, (str, os.PathLike)):
        return load_config(config)
    if isinstance(config, Mapping):
        return build_config(plain(config), source=MAPPING, base_dir=Path.cwd())
    raise ConfigError(f"{ARGUMENTS}: config: must be a file path, a mapping or None "
                      f"(got {type(config).__name__})")


def run_config(config: Any = None, options: Mapping[str, Any] | None = None,
               settings: Sequence[tuple[str, Any]] = (),
               source: str = ARGUMENTS) -> RunConfig:
    """A validated run config: ``config`` (a YAML file's path, a mapping, or None for the
    defaults), then ``options`` (whole top-level keys, as ``olsctl run``'s ``--trace``,
    ``--out``, ...: a ``trace`` given here is a path from the working directory), then
    ``settings`` ((dotted key, value) pairs, as ``--set``: see
    :func:`olsctl.config.building.with_values`). Errors name ``source`` for what came
    from ``options`` and ``settings``."""
    cfg = _base_config(config)
    options = dict(options or {})
    for key in options:
        _top_level_key(key, source)  # an unknown one: the line --set would give
    if "trace" in options:  # a path given here is relative to the working directory
        cfg = replace(cfg, base_dir=Path.cwd(), source=source)
    cfg = with_overrides(cfg, options, source) if options else cfg
    return with_values(cfg, list(settings), source) if settings else cfg


def _keyword_settings(keys: Mapping[str, Any], overrides: Mapping[str, Any] | None
                      ) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    """:func:`run`'s keywords and ``overrides`` as :func:`run_config`'s options and
    settings: a mapping given for a section updates its keys (``policy={"order": "wfp"}``
    is ``policy.order``), a text given for ``policy`` names the policy (``policy.name``),
    any other value sets the whole key; ``overrides`` are dotted keys, as ``--set``. A
    key given both ways is an error."""
    options: dict[str, Any] = {}
    settings: list[tuple[str, Any]] = []
    for key, value in keys.items():
        value = plain(value)
        if isinstance(value, dict):
            settings += [(f"{key}.{inner}", v) for inner, v in value.items()]
        elif key == "policy" and isinstance(value, str):
            settings.append(("policy.name", value))
        else:
            options[key] = value
    if overrides is not None and not isinstance(overrides, Mapping):
        raise ConfigError(f"{ARGUMENTS}: overrides: must be a mapping of dotted keys to "
                          f"values (got {type(overrides).__name__})")
    given = set(options) | {k for k, _ in settings}
    for key, value in (overrides or {}).items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"{ARGUMENTS}: overrides: {key!r}: must be a dotted key")
        if key in given:
            raise ConfigError(f"{ARGUMENTS}: {key}: given twice (as a keyword and in "
                              f"overrides)")
        settings.append((key, plain(value)))
    return options, settings


# --- one run -------------------------------------------------------------------------------

#: jobs.csv, timeseries.csv and power.csv columns that hold whole numbers
INT_COLUMNS = frozenset({"job_id", "requested_number_of_resources",
                         "allocated_number_of_resources", "queue_length", "busy_procs",
                         "active_procs"})
#: power.csv columns that hold 0 or 1
BOOL_COLUMNS = frozenset({"within_cap", "limit_acted"})


@dataclass(frozen=True, eq=False)
class RunResult:
    """What one run measured, read from the files it wrote.

    - ``summary``: ``summary.json`` as a dict;
    - ``jobs``: ``jobs.csv``'s columns by name (one row per job, in job-id order):
      ``job_id``, ``submission_time``, ``starting_time``, ``finish_time``,
      ``execution_time``, ``waiting_time``, ``turnaround_time``,
      ``requested_number_of_resources``, ``requested_time``, ``bounded_slowdown``, and
      the columns some runs add (``allocated_number_of_resources``,
      ``logged_execution_time``, ``power_w``, ``energy_j``); times in seconds;
    - ``timeseries``: ``timeseries.csv``'s columns (``time``, ``queue_length``,
      ``busy_procs``, ``active_procs``), one row per event instant;
    - ``weeks``: the SLA window table (``summary["weekly"]``) by column: ``week``,
      ``week_start`` (datetime64[D], NaT for a log without a date), ``start_s``, ``jobs``,
      metrics as floats (NaN for a window without jobs), ``sla_kept`` as 1.0, 0.0 or NaN;
    - ``decisions``: the controller's decisions (``decisions.jsonl``), a list of dicts;
      empty without a controller;
    - ``power``: ``power.csv``'s columns (``within_cap`` and ``limit_acted`` as booleans),
      None for a run without power;
    - ``out``: the folder the files are in, None when the run wrote into a temporary
      folder (since removed).
    """

    summary: dict
    jobs: dict[str, np.ndarray]
    timeseries: dict[str, np.ndarray]
    weeks: dict[str, np.ndarray]
    decisions: list[dict] = field(default_factory=list)
    power: dict[str, np.ndarray] | None = None
    out: Path | None = None

    def __repr__(self) -> str:
        metrics = self.summary.get("metrics", {})
        mean = metrics.get("mean_bsld")
        shown = "None" if mean is None else f"{mean:.4g}"
        return (f"RunResult(trace={self.summary.get('trace')!r}, "
                f"jobs={len(self.jobs.get('job_id', ()))}, mean_bsld={shown}, "
                f"out={None if self.out is None else str(self.out)!r})")

    def jobs_frame(self):
        """``jobs`` as a pandas DataFrame (needs pandas)."""
        return _pandas().DataFrame(self.jobs)

    def timeseries_frame(self):
        """``timeseries`` as a pandas DataFrame (needs pandas)."""
        return _pandas().DataFrame(self.timeseries)

    def weeks_frame(self):
        """``weeks`` as a pandas DataFrame (needs pandas)."""
        return _pandas().DataFrame(self.weeks)

    def decisions_frame(self):
        """``decisions`` as a pandas DataFrame, one row per controller tick (needs pandas)."""
        return _pandas().DataFrame(self.decisions)

    def power_frame(self):
        """``power`` as a pandas DataFrame, None for a run without power (needs pandas)."""
        pd = _pandas()
        return None if self.power is None else pd.DataFrame(self.power)

    def to_pandas(self) -> dict:
        """Every table of the run as a DataFrame by name (``jobs``, ``timeseries``,
        ``weeks``, and ``decisions`` and ``power`` when the run has them; needs pandas)."""
        pd = _pandas()
        frames = {"jobs": pd.DataFrame(self.jobs), "timeseries": pd.DataFrame(self.timeseries),
                  "weeks": pd.DataFrame(self.weeks)}
        if self.decisions:
            frames["decisions"] = pd.DataFrame(self.decisions)
        if self.power is not None:
            frames["power"] = pd.DataFrame(self.power)
        return frames


def _pandas():
    """pandas, which olsctl does not depend on: a clear ImportError without it."""
    try:
        import pandas
    except ImportError:
        raise ImportError("olsctl's DataFrames need pandas, which olsctl does not install: "
                          "pip install pandas (the arrays need nothing more)") from None
    return pandas


@_public
def run(config: Any = None, /, *, overrides: Mapping[str, Any] | None = None,
        out: str | os.PathLike | None = None, progress: bool = False,
        **keys: Any) -> RunResult:
    """Run a config as ``olsctl run`` does and return what it measured.

    ``config``: a YAML config's path, a mapping with a config's keys (relative paths from
    the working directory), or None (the defaults). Keywords named as the config's
    top-level keys (``trace``, ``procs``, ``estimates``, ``load_scale``, ``policy``,
    ``sla``, ``power``, ``controller``, ...) override it, as ``olsctl run``'s options do:
    a mapping updates a section key by key (``policy={"order": "wfp"}`` changes the
    order and keeps the rest; its keys may be dotted: ``controller={"sla.max": 100}``),
    a text for ``policy`` names the policy (started from its defaults, as ``--policy``),
    and any other value (None included) sets the whole key; a ``trace`` path is relative
    to the working directory. ``overrides`` maps dotted keys to values as ``--set`` does
    (``{"policy.order": "wfp", "power": None}``).

    ``out``: the folder to write the run's files into (the same bytes as ``olsctl run``
    writes for the same config). Without it the run writes into a temporary folder,
    removed once its files are read (``result.out`` is None, and the config's own
    ``out:`` is not used). ``progress``: print ``olsctl run``'s plain progress lines and
    compile notices on stderr (default: nothing)."""
    from olsctl.runner import execute

    if out is not None:
        keys["out"] = out
    options, settings = _keyword_settings(keys, overrides)
    config = run_config(config, options, settings, ARGUMENTS)
    if out is not None or any(key == "out" for key, _ in settings):
        return load_run(execute(config, *_progress(progress)).out_dir)
    tmp = Path(tempfile.mkdtemp(prefix="olsctl-run-"))
    try:
        execute(replace(config, out=str(tmp)), *_progress(progress))
        result = load_run(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result.summary["config"]["out"] = None  # the folder is gone
    return replace(result, out=None)


def _progress(shown: bool) -> tuple[Any, None, Callable[[str], None]]:
    """:func:`olsctl.runner.execute`'s progress, live view and say function: plain lines
    on stderr, or nothing."""
    from olsctl.policies.core.jit import on_stderr, silent
    from olsctl.runner import PlainProgress

    if not shown:
        return None, None, silent
    return PlainProgress(on_stderr), None, on_stderr


@_public
def load_run(folder: str | os.PathLike) -> RunResult:
    """The :class:`RunResult` of a run folder written earlier (``olsctl run --out``, a
    study's ``runs/<id>``, :func:`run`'s ``out``)."""
    folder = Path(folder)
    try:
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        jobs = read_table(folder / "jobs.csv")
        timeseries = read_table(folder / "timeseries.csv")
        power = read_table(folder / "power.csv") if (folder / "power.csv").is_file() else None
        decisions = []
        if (folder / "decisions.jsonl").is_file():
            with open(folder / "decisions.jsonl", encoding="utf-8") as fh:
                decisions = [json.loads(line) for line in fh if line.strip()]
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"{folder}: not a complete run folder ({why})") from None
    return RunResult(summary, jobs, timeseries, week_columns(summary.get("weekly", [])),
                     decisions, power, folder)


def read_table(path: Path) -> dict[str, np.ndarray]:
    """A CSV file olsctl wrote (numbers only) as its columns by name: floats, whole
    numbers (:data:`INT_COLUMNS`) as int64, 0/1 flags (:data:`BOOL_COLUMNS`) as bool."""
    with open(path, encoding="utf-8") as fh:
        header = fh.readline().strip().split(",")
        values = np.loadtxt(fh, delimiter=",", dtype=float, ndmin=2)
    if values.size == 0:
        values = np.zeros((0, len(header)))
    table = {}
    for i, name in enumerate(header):
        col = values[:, i]
        if name in BOOL_COLUMNS:
            col = col != 0
        elif name in INT_COLUMNS and np.array_equal(col, np.trunc(col)):
            col = col.astype(np.int64)
        table[name] = col
    return table


def week_columns(rows: list[dict]) -> dict[str, np.ndarray]:
    """The SLA window table (``summary.json``'s ``weekly``, one dict per window) by
    column: ``week`` and ``jobs`` as int64, ``week_start`` as datetime64[D] (NaT when
    unknown), the rest as floats (NaN where a window has no value; booleans 1.0/0.0)."""
    names = list(rows[0]) if rows else ["week", "week_start", "start_s", "jobs"]
    table = {}
    for name in names:
        values = [row.get(name) for row in rows]
        if name in ("week", "jobs"):
            table[name] = np.asarray(values, dtype=np.int64)
        elif name == "week_start":
            table[name] = np.asarray(["NaT" if v is None else v for v in values],
                                     dtype="datetime64[D]")
        else:
            table[name] = np.asarray([np.nan if v is None else float(v) for v in values])
    return table


# --- a workload ------------------------------------------------------------------------------

@_public
def load_trace(name_or_path: str | os.PathLike, *, procs: int | None = None,
               skip_bad_lines: bool = False, load_scale: float = 1.0) -> Workload:
    """A workload as ``olsctl run`` loads it: a bundled log's name (``"KTH-SP2"``) or an
    SWF file or Slurm sacct dump (relative to the working directory), the loading rules
    applied, ``procs`` the machine size (default: the header's), its submit times scaled
    by ``load_scale``. An :class:`olsctl.workload.Workload`: job columns as numpy arrays
    in (submit time, job id) order (``job_id``, ``submit_s``, ``runtime_s``, ``procs``,
    ``requested_time_s``, ``user_id``, ``group_id``, ``executable``), ``machine_procs``,
    ``report`` (what loading kept and dropped) and ``estimate_s(mode)``."""
    from olsctl.runner import _workload  # the run's own loading: found, loaded, scaled

    config = run_config(None, {"trace": plain(name_or_path), "procs": plain(procs),
                               "skip_bad_lines": skip_bad_lines,
                               "load_scale": plain(load_scale)}, (), ARGUMENTS)
    return _workload(config)


# --- a study ---------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class StudyResult:
    """A study's finished runs, as ``results.csv`` lists them.

    - ``results``: ``results.csv``'s columns by name, one row per finished run in grid
      order: ``id`` (text), one column per grid axis (numbers when every label is one,
      else text), then the metrics as floats (NaN where a run has none);
    - ``out``: the study directory (``runs/<id>/`` holds each run's files:
      :meth:`run` reads them);
    - ``failed``: the runs that failed now, their one-line errors by run id;
    - ``computed``: runs run by this call; ``reused``: runs found finished before
      (resumed); ``wall_s``: seconds this call took.
    """

    results: dict[str, np.ndarray]
    out: Path
    failed: dict[str, str]
    computed: int
    reused: int
    wall_s: float

    def __repr__(self) -> str:
        return (f"StudyResult(out={str(self.out)!r}, finished={len(self.results['id'])}, "
                f"computed={self.computed}, reused={self.reused}, failed={len(self.failed)})")

    def run(self, run_id: str) -> RunResult:
        """The finished run ``run_id`` (a value of ``results["id"]``), read from its folder."""
        return load_run(self.out / "runs" / run_id)

    def results_frame(self):
        """``results`` as a pandas DataFrame (needs pandas)."""
        return _pandas().DataFrame(self.results)

    def to_pandas(self):
        """The same as :meth:`results_frame`."""
        return self.results_frame()


def study_of(study: Any, out: str | os.PathLike | None = None,
             n_jobs: int | None = None) -> Study:
    """A validated study: ``study`` a study file's path, or a mapping with a study file's
    keys (relative paths from the working directory; it needs ``out``, here or in it);
    ``out`` and ``n_jobs`` override the study's."""
    from olsctl.study import load_study, study_from_data

    out = None if out is None else os.fspath(out)
    if isinstance(study, (str, os.PathLike)):
        return load_study(study, out=out, n_jobs=n_jobs)
    if isinstance(study, Mapping):
        data = plain(study)
        if out is None and "out" not in data:
            raise ConfigError(f"{STUDY_MAPPING}: out: a study given as a mapping needs the "
                              f"study directory (out=... or an out key)")
        return study_from_data(data, Path(STUDY_MAPPING), out, n_jobs)
    raise ConfigError(f"{ARGUMENTS}: study: must be a study file's path or a mapping "
                      f"(got {type(study).__name__})")


@_public
def study(study: Any, /, *, out: str | os.PathLike | None = None, n_jobs: int | None = None,
          progress: bool = False) -> StudyResult:
    """Run a study as ``olsctl study`` does: every run of its grid not finished yet in
    its directory (an earlier study's finished runs are kept, so a study that stopped
    goes on where it was), ``n_jobs`` at a time. ``study``: a study file's path or a
    mapping with its keys (then ``out`` is needed); ``out`` and ``n_jobs`` override the
    file's. Runs that fail do not stop the others: their errors are in ``failed``.
    ``progress``: print ``olsctl study``'s progress on stderr (default: nothing)."""
    from olsctl.study import NULL_STUDY_PROGRESS, run_study, study_progress

    spec = study_of(study, out, plain(n_jobs))
    shown = NULL_STUDY_PROGRESS
    if progress:
        from rich.console import Console
        shown = study_progress(Console(stderr=True))
    result = run_study(spec, shown)
    return StudyResult(results_columns(spec.out_dir / "results.csv", spec.columns),
                       spec.out_dir, dict(result.failed), result.computed, result.reused,
                       result.wall_s)


def results_columns(path: Path, axes: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """``results.csv`` by column: ``id`` as text, the grid ``axes`` as numbers when every
    label is one (int64 when whole) else as text, the metrics as floats (NaN if empty)."""
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        rows = list(reader)
    table = {}
    for i, name in enumerate(header):
        texts = [row[i] for row in rows]
        if name == "id":
            table[name] = np.asarray(texts, dtype=str)
        elif name in axes:
            table[name] = _label_column(texts)
        else:
            table[name] = np.asarray([float(t) if t else np.nan for t in texts])
    return table


def _label_column(texts: list[str]) -> np.ndarray:
    """A grid axis's labels: int64 or float when every one is a number, else text."""
    for kind in (int, float):
        try:
            return np.asarray([kind(t) for t in texts], dtype=kind)
        except ValueError:
            continue
    return np.asarray(texts, dtype=str)

