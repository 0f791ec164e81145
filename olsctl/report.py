"""``olsctl report``: tables and plots from a run or a study directory.

A run directory holds ``summary.json``, ``jobs.csv``, ``timeseries.csv`` and, with power,
``power.csv``; a study directory holds ``results.csv`` and ``runs/<id>/``; either, or a
directory of its own, may hold ``predict.json`` (``olsctl predict --out``). Everything a
report needs is read and checked before anything is printed or drawn; bad input is one
:class:`ReportError` line naming the file.

The tables need only rich. The plots need matplotlib (the ``plot`` extra); they are drawn
on matplotlib's Agg canvas (no pyplot, no global backend), one figure at a time, and only
where the data supports them:

- ``aggregate``: mean bounded slowdown, utilization and processor savings per log and
  scheme (Lawson & Smirni, Fig. 1), for a study;
- ``tradeoff``: per run, the share of SLA windows kept against processor savings (and
  energy, with power), for a study whose runs have summary.json ``sla``;
- ``weekly``: mean bounded slowdown and utilization per calendar week (Fig. 2), with the
  SLA's bound on the mean bounded slowdown dashed;
- ``sla``: a run's mean and 95th-percentile bounded slowdown (or waits, for a wait SLA)
  per SLA window against the SLA, the windows that broke it marked, and the mean active
  processors per window, for a run whose summary.json has ``sla`` and its window rows;
- ``activity``: active and busy processors over time, and the bounded-slowdown ECDF
  (Fig. 3), per log;
- ``power``: machine power against the cap over time (Wallace et al., Fig. 6/7), per run
  with ``power.csv``;
- ``predictor-error``: job power predictors' error by week, from ``predict.json``.

Long series are reduced before drawing (time-weighted means over at most
:data:`MAX_POINTS` bins, the ECDF at as many quantiles), so a plot's size and drawing time
do not grow with the log. The same data and matplotlib version give the same bytes.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np
from rich import box
from rich.table import Table

from olsctl.errors import OlsctlError
from olsctl.metrics import WEEK_S
from olsctl.output import json_text, write_atomic
from olsctl.reporting import _f, _pct, run_summary_table, sla_window_text
from olsctl.workload import BUNDLED

PREDICT_FILE = "predict.json"
PLOT_HINT = "no plots: they need matplotlib, which pip install 'olsctl[plot]' adds"
FORMATS = ("png", "svg")
#: most points a reduced series keeps (bins of a time series, quantiles of an ECDF)
MAX_POINTS = 2000
#: most steps of the processor lines (more would be a solid band: bin means instead)
ACTIVITY_POINTS = 500
DAY_S = 86400.0
#: summary.json metrics the tables and plots read
SUMMARY_METRICS = ("jobs", "processors", "first_submit_s", "makespan_s", "mean_bsld",
                   "p95_bsld", "max_bsld", "mean_wait_s", "max_wait_s", "mean_turnaround_s",
                   "utilization", "utilization_active", "processor_savings")
#: study table: results.csv column, heading, scale, digits (None: a percentage)
STUDY_FIGURES = (("mean_bsld", "mean bsld", 1.0, 2), ("mean_wait_s", "wait h", 1 / 3600, 2),
                 ("utilization", "util", 1.0, 3), ("processor_savings", "savings", 1.0, None),
                 ("energy_j", "energy MWh", 1 / 3.6e9, 2), ("csr", "CSR", 1.0, None),
                 ("sla_windows_kept_share", "SLA kept", 1.0, None))
#: window row figures that summary.json files written before the SLA windows may lack
ROW_FIGURES = ("start_s", "jobs", "p95_bsld", "mean_wait_s", "max_wait_s", "mean_active_procs")


class ReportError(OlsctlError):
    """A report directory or one of its files cannot be read."""

    kind = "ReportError"


@dataclass(frozen=True)
class RunEntry:
    """One run in a report: its directory and summary, the log it replays, the variant
    (the study's non-trace grid labels) it stands for, and its results.csv row."""

    path: Path
    summary: dict
    log: str
    variant: str
    run_id: str = ""
    results: dict | None = None
    labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class Source:
    """A report directory: ``kind`` is ``run``, ``study`` or ``predict``."""

    path: Path
    kind: str
    runs: tuple[RunEntry, ...] = ()
    grid: tuple[str, ...] = ()
    metric_columns: tuple[str, ...] = ()
    failed: int = 0
    predict: dict | None = None

    @property
    def logs(self) -> list[str]:
        return list(dict.fromkeys(r.log for r in self.runs))

    @property
    def variants(self) -> list[str]:
        return list(dict.fromkeys(r.variant for r in self.runs))


# --- reading ---------------------------------------------------------------------------

def load_source(path: Path) -> Source:
    """What ``path`` holds: a study (``results.csv`` and ``runs/``), a run
    (``summary.json``) or only a predictor report (``predict.json``)."""
    if not path.exists():
        raise ReportError(f"{path}: no such directory")
    if not path.is_dir():
        raise ReportError(f"{path}: not a directory")
    predict = read_predict(path / PREDICT_FILE) if (path / PREDICT_FILE).is_file() else None
    if (path / "results.csv").is_file() and (path / "runs").is_dir():
        return _load_study(path, predict)
    if (path / "summary.json").is_file():
        summary = read_summary(path / "summary.json")
        log = log_name(summary["trace"])
        return Source(path, "run", (RunEntry(path, summary, log, _scheme(summary)),),
                      predict=predict)
    if predict is not None:
        return Source(path, "predict", predict=predict)
    raise ReportError(f"{path}: neither a run directory (summary.json) nor a study "
                      f"directory (results.csv and runs/)")


def log_name(trace: str) -> str:
    """A log's short name: the bundled name, else the file name without .swf[.gz]."""
    name = Path(trace).name
    for short, file_name in BUNDLED.items():
        if name in (short, file_name):
            return short
    for suffix in (".gz", ".swf"):
        name = name[: -len(suffix)] if name.endswith(suffix) else name
    return name or trace


def _scheme(summary: dict) -> str:
    """A run's policy name, with /OLS under the controller (e.g. ``easy/OLS``)."""
    name = str(_section(summary, "policy").get("name", "run"))
    return name + ("/OLS" if _section(summary, "controller") else "")


def _section(summary: dict, name: str) -> dict:
    """A section of a run's config (``policy``, ``power``, ``controller``); {} if none."""
    section = summary["config"].get(name)
    return section if isinstance(section, dict) else {}


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"{path}: missing") from None
    except json.JSONDecodeError as exc:
        raise ReportError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: cannot read: {exc}") from None


def read_summary(path: Path) -> dict:
    """A run's summary.json, checked for what reports read."""
    data = _read_json(path)
    shape = {"trace": str, "config": dict, "load": dict, "metrics": dict, "weekly": list}
    if not isinstance(data, dict):
        raise ReportError(f"{path}: not an olsctl summary (not a JSON object)")
    for key, kind in shape.items():
        if not isinstance(data.get(key), kind):
            raise ReportError(f"{path}: {key}: missing or not a {kind.__name__} "
                              f"(not an olsctl summary.json)")
    for key in SUMMARY_METRICS:
        if not _is_number(data["metrics"].get(key)):
            raise ReportError(f"{path}: metrics.{key}: missing or not a number")
    for i, week in enumerate(data["weekly"]):
        if not isinstance(week, dict) or not all(
                k in week and (week[k] is None or _is_number(week[k]))
                for k in ("week", "mean_bsld", "utilization")):
            raise ReportError(f"{path}: weekly[{i}]: needs week, mean_bsld and utilization")
        start = week.get("week_start")
        if start is not None and not (isinstance(start, str)
                                      and re.fullmatch(r"\d{4}-\d{2}-\d{2}", start)):
            raise ReportError(f"{path}: weekly[{i}].week_start: not a date: {start!r}")
        for key in ROW_FIGURES:  # absent in older files; a number or null when there
            if key in week and week[key] is not None and not _is_number(week[key]):
                raise ReportError(f"{path}: weekly[{i}].{key}: not a number: {week[key]!r}")
        if week.get("sla_kept") not in (None, True, False):
            raise ReportError(f"{path}: weekly[{i}].sla_kept: not true, false or null: "
                              f"{week['sla_kept']!r}")
    if "sla" in data:  # absent in files written before the SLA windows
        _check_sla(path, data["sla"])
    return data


def _check_sla(path: Path, sla: Any) -> None:
    """summary.json's ``sla``: the metric, its bound, the window length and the count of
    windows kept."""
    ok = (isinstance(sla, dict) and isinstance(sla.get("metric"), str)
          and all(_is_number(sla.get(k)) for k in ("max", "window_s", "windows",
                                                   "windows_kept"))
          and sla["window_s"] > 0 and 0 <= sla["windows_kept"] <= sla["windows"]
          and (sla.get("kept_share") is None or _is_number(sla["kept_share"])))
    if not ok:
        raise ReportError(f"{path}: sla: needs metric, max, window_s > 0, windows, "
                          f"windows_kept (at most windows) and kept_share (a number or null)")


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def read_predict(path: Path) -> dict:
    """A predictor report written by ``olsctl predict --out``, checked."""
    data = _read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("overall_mae_w"), dict) \
            or not isinstance(data.get("weekly"), list):
        raise ReportError(f"{path}: not an olsctl predictor report (needs overall_mae_w "
                          f"and weekly)")
    names = list(data["overall_mae_w"])
    for i, row in enumerate(data["weekly"]):
        if not isinstance(row, dict) or not all(_is_number(row.get(k))
                                                for k in ("week", "jobs", *names)):
            raise ReportError(f"{path}: weekly[{i}]: needs week, jobs and "
                              f"{', '.join(names)} as numbers")
    return data


def write_predict(out_dir: Path, report: dict) -> Path:
    """Write ``olsctl predict``'s report as ``out_dir/predict.json`` (NaN as null)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ReportError(f"{out_dir}: exists and is not a directory")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / PREDICT_FILE
    write_atomic(path, json_text(_no_nan(report)))
    return path


def _no_nan(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _no_nan(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_no_nan(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def read_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a CSV file; every row must have the header's width."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            rows = list(reader)
    except FileNotFoundError:
        raise ReportError(f"{path}: missing") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ReportError(f"{path}: cannot read: {exc}") from None
    if not header:
        raise ReportError(f"{path}: empty (no header line)")
    for i, row in enumerate(rows):
        if len(row) != len(header):
            raise ReportError(f"{path}:{i + 2}: {len(row)} fields, the header has "
                              f"{len(header)}")
    return header, rows


def read_columns(path: Path, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Numeric columns of an olsctl CSV file, by name (at least one row)."""
    header, rows = read_rows(path)
    missing = [n for n in names if n not in header]
    if missing:
        raise ReportError(f"{path}: no column {missing[0]!r} (columns: {', '.join(header)})")
    if not rows:
        raise ReportError(f"{path}: no rows")
    out = {}
    for name in names:
        k = header.index(name)
        try:
            out[name] = np.asarray([row[k] for row in rows], dtype=float)
        except ValueError:
            line, cell = next((i + 2, row[k]) for i, row in enumerate(rows)
                              if not _parses(row[k]))
            raise ReportError(f"{path}:{line}: {name}: not a number: {cell!r}") from None
    return out


def _parses(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _load_study(path: Path, predict: dict | None) -> Source:
    results = path / "results.csv"
    header, rows = read_rows(results)
    if header[0] != "id" or "jobs" not in header:
        raise ReportError(f"{results}: not an olsctl results.csv (its columns start with id "
                          f"and include jobs)")
    first_metric = header.index("jobs")
    grid, metrics = tuple(header[1:first_metric]), tuple(header[first_metric:])
    others = [c for c in grid if c != "trace"]
    runs = []
    for line, row in enumerate(rows, start=2):
        cells = dict(zip(header, row))
        values = {}
        for col in metrics:
            if cells[col] != "" and not _parses(cells[col]):
                raise ReportError(f"{results}:{line}: {col}: not a number: {cells[col]!r}")
            values[col] = float(cells[col]) if cells[col] != "" else None
        run_dir = path / "runs" / cells["id"]
        if not (run_dir / "summary.json").is_file():
            raise ReportError(f"{run_dir / 'summary.json'}: missing (results.csv line {line} "
                              f"lists run {cells['id']})")
        summary = read_summary(run_dir / "summary.json")
        log = log_name(cells["trace"] if "trace" in grid else summary["trace"])
        labels = tuple(cells[c] or "-" for c in others)
        variant = ", ".join(labels) or _scheme(summary)
        runs.append(RunEntry(run_dir, summary, log, variant, cells["id"], values, labels))
    failed = 0
    if (path / "failed.csv").is_file():
        failed = len(read_rows(path / "failed.csv")[1])
    return Source(path, "study", tuple(runs), grid, metrics, failed, predict)


# --- tables ----------------------------------------------------------------------------

def report_tables(source: Source) -> list[Table]:
    """The tables ``olsctl report`` prints for ``source``."""
    tables = []
    if source.kind == "study":
        tables.append(study_table(source))
    elif source.kind == "run":
        summary = source.runs[0].summary
        try:
            tables.append(run_summary_table(summary))
            extra = run_extra_table(summary)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ReportError(f"{source.path / 'summary.json'}: not an olsctl summary "
                              f"(missing or bad {exc})") from None
        if extra is not None:
            tables.append(extra)
    if source.predict is not None:
        tables.append(predict_table(source.predict))
    return tables


def study_table(source: Source) -> Table:
    """Per log and scheme: the main whole-run figures of results.csv."""
    others = [c for c in source.grid if c != "trace"]
    shown = [f for f in STUDY_FIGURES if f[0] in source.metric_columns]
    caption = f"{len(source.runs)} runs from {source.path / 'results.csv'}"
    if source.failed:
        caption += f"; {source.failed} failed (failed.csv)"
    table = Table(title=f"olsctl report: {source.path}", title_justify="left",
                  caption=caption, caption_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False)
    table.add_column("log", no_wrap=True)
    for col in others:
        table.add_column(col, overflow="fold")
    for _key, head, _scale, _digits in shown:
        table.add_column(head, justify="right", no_wrap=True)
    for i, log in enumerate(source.logs):
        group = [r for r in source.runs if r.log == log]
        for k, run in enumerate(group):
            cells = [_study_cell(run.results.get(key), scale, digits)
                     for key, _head, scale, digits in shown]
            table.add_row(log if k == 0 else "", *run.labels, *cells,
                          end_section=k == len(group) - 1 and i < len(source.logs) - 1)
    return table


def _study_cell(value: float | None, scale: float, digits: int | None) -> str:
    if value is None:
        return "-"
    return _pct(value) if digits is None else f"{value * scale:,.{digits}f}"


def run_extra_table(summary: dict) -> Table | None:
    """A run's controller and power figures, or None when it has neither."""
    c, p = summary.get("controller"), summary.get("power")
    if not isinstance(c, dict) and not isinstance(p, dict):
        return None
    table = Table(title="controller and power", show_header=False, title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value", justify="right")
    if isinstance(c, dict):
        fb = c.get("feedback")
        missed = "limit misses" if isinstance(fb, dict) else "SLA misses"
        table.add_row(f"controller ticks / {missed}", f"{c.get('ticks', 0):,} / "
                                                      f"{c.get('sla_misses', 0):,}")
        if isinstance(fb, dict):
            table.add_row("SLA feedback: ticks tightened / mean limit",
                          f"{fb.get('tightened_ticks', 0):,} / {_f(_num(fb.get('mean_limit')), 1)}")
        table.add_row("setting changes", f"{c.get('changes', 0):,}")
        table.add_row("mean active processors",
                      _f(summary["metrics"].get("mean_active_procs"), 1))
    if isinstance(p, dict):
        table.add_row("energy", f"{_f(_num(p.get('energy_j')) / 3.6e9, 2)} MWh")
        table.add_row("mean / peak power", f"{_f(_num(p.get('mean_power_w')) / 1e3, 1)} / "
                                           f"{_f(_num(p.get('peak_power_w')) / 1e3, 1)} kW")
        table.add_row("capping success rate", _pct(p.get("csr")))
        table.add_row("forced starts", f"{p.get('forced_starts', 0):,}")
    return table


def _num(x: Any) -> float:
    return float(x) if _is_number(x) else float("nan")


def predict_table(report: dict) -> Table:
    """Mean absolute error of each predictor per week (W per processor)."""
    names = list(report["overall_mae_w"])
    shares = all(_is_number(w.get("learned_share")) for w in report["weekly"])
    table = Table(title=f"job power predictors on {log_name(str(report.get('trace', '?')))}: "
                        f"mean absolute error (W per processor) by week", title_justify="left",
                  caption="learned: share of the week's jobs the learner predicts from a "
                          "learned profile" if shares else None, caption_justify="left")
    table.add_column("week", justify="right")
    table.add_column("jobs", justify="right")
    if shares:
        table.add_column("learned", justify="right")
    for name in names:
        table.add_column(name, justify="right")
    for row in report["weekly"]:
        learned = [_pct(row["learned_share"])] if shares else []
        table.add_row(str(int(row["week"])), f"{int(row['jobs']):,}", *learned,
                      *(f"{row[n]:.1f}" for n in names))
    table.add_row("all", "", *([""] if shares else []),
                  *(_f(report["overall_mae_w"][n], 1) for n in names), style="bold")
    return table


# --- reducing series -------------------------------------------------------------------

def step_integral(t: np.ndarray, v: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Integral from t[0] to ``at`` of the step function ``v[k]`` on ``[t[k], t[k+1])``."""
    cum = np.concatenate(([0.0], np.cumsum(v[:-1] * np.diff(t))))
    k = np.clip(np.searchsorted(t, at, side="right") - 1, 0, t.size - 1)
    return np.where(at <= t[0], 0.0, cum[k] + v[k] * (at - t[k]))


def change_points(t: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A step function (value ``v[k]`` from ``t[k]`` on, ending at ``t[-1]``) as the
    points to draw with ``steps-post``: where it changes, and its end."""
    keep = np.concatenate(([True], v[1:] != v[:-1]))
    x, y = t[keep], v[keep]
    return np.append(x, t[-1]), np.append(y, y[-1])


def bin_means(t: np.ndarray, v: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """The same step function's time-weighted means over ``bins`` equal bins of its span
    (which must be positive), as points to draw with ``steps-post``."""
    edges = np.linspace(t[0], t[-1], bins + 1)
    means = np.diff(step_integral(t, v, edges)) / np.diff(edges)
    return edges, np.append(means, means[-1])


def reduce_steps(t: np.ndarray, v: np.ndarray, max_points: int = MAX_POINTS
                 ) -> tuple[np.ndarray, np.ndarray, bool]:
    """Points of :func:`change_points` when at most ``max_points + 1``, else of
    :func:`bin_means` over ``max_points`` bins; the flag says which."""
    x, y = change_points(t, v)
    if x.size <= max_points + 1 or t[-1] <= t[0]:
        return x, y, False
    return (*bin_means(t, v, max_points), True)


def reduce_chunks(values: np.ndarray, max_points: int = MAX_POINTS,
                  how: Callable = np.add) -> tuple[np.ndarray, np.ndarray]:
    """First index and mean (``np.add``) or ``how``-reduction (e.g. ``np.maximum``) of
    consecutive chunks, at most ``max_points`` of them."""
    size = max(1, math.ceil(values.size / max_points))
    starts = np.arange(0, values.size, size)
    reduced = how.reduceat(values, starts)
    if how is np.add:
        reduced = reduced / np.diff(np.append(starts, values.size))
    return starts, reduced


def ecdf_points(values: np.ndarray, max_points: int = MAX_POINTS
                ) -> tuple[np.ndarray, np.ndarray]:
    """The empirical CDF at (at most) ``max_points`` evenly spaced ranks, from (min, 0)
    to (max, 1); exact within 1 / max_points."""
    x = np.sort(values)
    n = x.size
    idx = np.unique(np.linspace(0, n - 1, min(n, max_points)).round().astype(np.int64))
    return np.concatenate(([x[0]], x[idx])), np.concatenate(([0.0], (idx + 1) / n))


@dataclass(frozen=True)
class RunSeries:
    """What the plots draw of one run, reduced (times in days since the first submit)."""

    entry: RunEntry
    active: tuple[np.ndarray, np.ndarray]
    busy: tuple[np.ndarray, np.ndarray]
    bin_h: float | None
    active_varies: bool
    ecdf: tuple[np.ndarray, np.ndarray]
    power: dict | None


def run_series(entry: RunEntry) -> RunSeries:
    """Read a run's timeseries.csv, jobs.csv and power.csv (when present) and reduce them."""
    ts = read_columns(entry.path / "timeseries.csv", ("time", "busy_procs", "active_procs"))
    origin = float(entry.summary["metrics"]["first_submit_s"])
    t = (ts["time"] - origin) / DAY_S
    if np.any(np.diff(t) < 0):
        raise ReportError(f"{entry.path / 'timeseries.csv'}: times go back")
    active = change_points(t, ts["active_procs"])
    busy = change_points(t, ts["busy_procs"])
    bin_h = None
    if max(active[0].size, busy[0].size) > ACTIVITY_POINTS + 1 and t[-1] > t[0]:
        active = bin_means(t, ts["active_procs"], ACTIVITY_POINTS)
        busy = bin_means(t, ts["busy_procs"], ACTIVITY_POINTS)
        bin_h = 24 * float(t[-1] - t[0]) / ACTIVITY_POINTS
    bsld = read_columns(entry.path / "jobs.csv", ("bounded_slowdown",))["bounded_slowdown"]
    power = None
    if (entry.path / "power.csv").is_file():
        power = _power_series(entry.path / "power.csv", origin, entry.summary)
    varies = bool(np.any(ts["active_procs"] != ts["active_procs"][0]))
    return RunSeries(entry, active, busy, bin_h, varies, ecdf_points(bsld), power)


def _power_series(path: Path, origin_s: float, summary: dict) -> dict:
    p = read_columns(path, ("time", "mean_power_w", "peak_power_w", "cap_w"))
    sample_s = _section(summary, "power").get("sample_s")
    if not _is_number(sample_s):
        sample_s = float(np.median(np.diff(p["time"]))) if p["time"].size > 1 else 0.0
    t = (np.append(p["time"], p["time"][-1] + sample_s) - origin_s) / DAY_S
    starts, mean_kw = reduce_chunks(p["mean_power_w"] / 1e3)
    _, peak_kw = reduce_chunks(p["peak_power_w"] / 1e3, how=np.maximum)
    cap = p["cap_w"] / 1e3
    cap_x, cap_y, _ = reduce_steps(t, np.append(cap, cap[-1]))
    chunk_x = np.append(t[starts], t[-1])
    acted = None
    if "limit_acted" in read_rows(path)[0]:  # a power limit: where it throttled jobs
        _, acted = reduce_chunks(read_columns(path, ("limit_acted",))["limit_acted"],
                                 how=np.maximum)
    return {"x": chunk_x, "acted": acted, "mean_kw": np.append(mean_kw, mean_kw[-1]),
            "peak_kw": np.append(peak_kw, peak_kw[-1]), "cap_x": cap_x, "cap_kw": cap_y,
            "per": (f"{_duration(sample_s)} interval" if starts.size == p["time"].size
                    else _duration((starts[1] - starts[0]) * sample_s))}


def _duration(seconds: float) -> str:
    """``45 s``, ``10 min``, ``4.08 h``."""
    if seconds < 60:
        return f"{seconds:.3g} s"
    return f"{seconds / 60:.3g} min" if seconds < 3600 else f"{seconds / 3600:.3g} h"


@dataclass(frozen=True)
class PlotData:
    """Everything the plots of a report draw, read and checked."""

    source: Source
    series: tuple[RunSeries, ...]
    mpl: Any


def _matplotlib() -> SimpleNamespace | None:
    """The matplotlib pieces the plots use, or None when matplotlib is not installed."""
    try:
        import matplotlib
        import matplotlib.dates as mdates
        import matplotlib.ticker as mticker
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D
    except ImportError:
        return None
    return SimpleNamespace(matplotlib=matplotlib, dates=mdates, ticker=mticker,
                           Figure=Figure, Canvas=FigureCanvasAgg, Line2D=Line2D)


def plot_data(source: Source) -> PlotData | None:
    """The plots' data, read from the runs' files; None without matplotlib."""
    mpl = _matplotlib()
    if mpl is None:
        return None
    return PlotData(source, tuple(run_series(r) for r in source.runs), mpl)


# --- plots -----------------------------------------------------------------------------

RC = {"svg.hashsalt": "olsctl", "font.size": 9, "axes.titlesize": 10, "axes.grid": True,
      "grid.alpha": 0.3, "legend.fontsize": 8}


def check_out_dir(out_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise ReportError(f"{out_dir}: exists and is not a directory")


def write_plots(data: PlotData, out_dir: Path, fmt: str = "png") -> list[Path]:
    """Draw every plot the data supports into ``out_dir``; returns the files written."""
    if fmt not in FORMATS:
        raise ReportError(f"--format: must be one of {', '.join(FORMATS)} (got {fmt!r})")
    check_out_dir(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with data.mpl.matplotlib.rc_context(RC):
        return [_save(draw(), out_dir / f"{name}.{fmt}", fmt)
                for name, draw in _plan(data)]


def _plan(data: PlotData) -> list[tuple[str, Callable[[], Any]]]:
    """The plots the data supports, by file name (without the extension), each drawn
    only when its turn comes."""
    src, mpl = data.source, data.mpl
    plan: list[tuple[str, Callable[[], Any]]] = []
    if src.kind == "study" and any(k in src.metric_columns for k, *_ in AGGREGATE):
        plan.append(("aggregate", lambda: aggregate_figure(src, mpl)))
    if src.kind == "study" and any(_kept_share(r.summary) is not None for r in src.runs):
        plan.append(("tradeoff", lambda: tradeoff_figure(src, mpl)))
    if data.series:
        plan.append(("weekly", lambda: weekly_figure(src, mpl)))
    if src.kind == "run" and has_sla_windows(src.runs[0].summary):
        plan.append(("sla", lambda: sla_figure(src.runs[0], mpl)))
    for log in src.logs:
        series = [s for s in data.series if s.entry.log == log]
        name = "activity" if src.kind == "run" else f"activity-{_safe(log)}"
        plan.append((name, lambda series=series: activity_figure(src, series, mpl)))
    for s in data.series:
        if s.power is not None:
            name = "power" if src.kind == "run" else f"power-{_safe(s.entry.run_id)}"
            plan.append((name, lambda s=s: power_figure(src, s, mpl)))
    if src.predict is not None and src.predict["weekly"]:
        plan.append(("predictor-error", lambda: predict_figure(src.predict, mpl)))
    return plan


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", text).strip("_") or "run"


def _save(fig: Any, path: Path, fmt: str) -> Path:
    """Save with no date or version stamp, via a temporary file and a rename."""
    metadata = {"Software": None} if fmt == "png" else {"Date": None}
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        fig.savefig(tmp, format=fmt, metadata=metadata)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def _figure(mpl: SimpleNamespace, width_in: float, height_in: float) -> Any:
    fig = mpl.Figure(figsize=(width_in, height_in), dpi=100, layout="constrained")
    mpl.Canvas(fig)
    return fig


def _log_axis(axis: Any, mpl: SimpleNamespace, values: np.ndarray) -> None:
    """A log-scale axis labelled in plain numbers: 1, 2, 5, 10, 20, ... when ``values``
    span at most three decades, else 1, 10, 100, ..."""
    values = values[np.isfinite(values) & (values > 0)]
    wide = values.size > 0 and values.max() > 1000 * values.min()
    subs = (1.0,) if wide else (1.0, 2.0, 5.0)
    axis.set_major_locator(mpl.ticker.LogLocator(base=10, subs=subs))
    axis.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _pos: f"{v:,.10g}"))
    axis.set_minor_formatter(mpl.ticker.NullFormatter())


def _color(source: Source, variant: str) -> str:
    return f"C{source.variants.index(variant) % 10}"


def _name(source: Source) -> str:
    return source.path.resolve().name


#: bar panels: results.csv column, axis label, scale, bar label format
AGGREGATE = (("mean_bsld", "mean bounded slowdown (ratio, 1 = no wait)", 1.0, "{:.1f}"),
             ("utilization", "utilization (% of processors)", 100.0, "{:.1f}"),
             ("processor_savings", "processor savings (% of processors)", 100.0, "{:.1f}"))


def aggregate_figure(source: Source, mpl: SimpleNamespace) -> Any:
    """Lawson & Smirni's Fig. 1: one panel per figure, bars per log, one bar per scheme."""
    panels = [p for p in AGGREGATE if p[0] in source.metric_columns]
    logs, variants = source.logs, source.variants
    fig = _figure(mpl, min(20.0, 2.0 + len(panels) * max(3.2, 0.3 * len(logs) * len(variants))),
                  4.5)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    width = 0.8 / len(variants)
    x = np.arange(len(logs))
    for ax, (key, label, scale, fmt) in zip(axes, panels):
        for j, variant in enumerate(variants):
            values = [_value(source, log, variant, key) for log in logs]
            heights = [np.nan if v is None else v * scale for v in values]
            bars = ax.bar(x - 0.4 + width * (j + 0.5), heights, width, label=variant,
                          color=_color(source, variant))
            ax.bar_label(bars, labels=["" if np.isnan(h) else fmt.format(h) for h in heights],
                         fontsize=7, padding=2, rotation=90 if len(variants) > 3 else 0)
        ax.set_xticks(x, logs)
        ax.set_xlabel("log")
        ax.set_ylabel(label)
        ax.set_title(label.split(" (")[0])
        ax.margins(y=0.2)
        ax.grid(axis="x", visible=False)
    others = [c for c in source.grid if c != "trace"] or ["scheme"]
    axes[-1].legend(title=", ".join(others), loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(f"{_name(source)}: whole-run metrics per log and scheme")
    return fig


def _value(source: Source, log: str, variant: str, key: str) -> float | None:
    for run in source.runs:
        if run.log == log and run.variant == variant:
            return (run.results or {}).get(key)
    return None


def weekly_figure(source: Source, mpl: SimpleNamespace) -> Any:
    """Lawson & Smirni's Fig. 2: mean bounded slowdown (log scale) and utilization per
    calendar week; one column per log, one line per scheme, the SLA dashed."""
    logs = source.logs
    fig = _figure(mpl, min(20.0, max(7.0, 4.8 * len(logs))), 6.0)
    axes = fig.subplots(2, len(logs), squeeze=False, sharex="col")
    lengths = {float(r.summary["sla"]["window_s"]) for r in source.runs
               if isinstance(r.summary.get("sla"), dict)}
    in_weeks = lengths <= {WEEK_S}  # the rows are weeks (or a summary from before)
    unit = "week" if in_weeks else "SLA window"
    for col, log in enumerate(logs):
        top, bottom = axes[0][col], axes[1][col]
        runs = [r for r in source.runs if r.log == log]
        dated = all(w.get("week_start") for r in runs for w in r.summary["weekly"])
        for run in runs:
            weeks = run.summary["weekly"]
            x = (np.array([w["week_start"] for w in weeks], dtype="datetime64[D]") if dated
                 else np.array([w["week"] for w in weeks], dtype=float))
            label = run.variant if source.kind == "study" else None
            for ax, key, scale in ((top, "mean_bsld", 1.0), (bottom, "utilization", 100.0)):
                y = np.array([np.nan if w[key] is None else w[key] * scale for w in weeks])
                ax.plot(x, y, marker="o", markersize=2.5, linewidth=1.0, label=label,
                        color=_color(source, run.variant))
        for sla in sorted({_sla(r.summary) for r in runs} - {None}):
            top.axhline(sla, color="0.3", linestyle="--", linewidth=1.0,
                        label=f"SLA (mean bsld {sla:g})")
        top.set_yscale("log")
        _log_axis(top.yaxis, mpl, np.asarray([w["mean_bsld"] for r in runs
                                              for w in r.summary["weekly"]
                                              if w["mean_bsld"] is not None], dtype=float))
        bottom.set_ylim(0, 102)
        top.set_ylabel("mean bounded slowdown (log scale)")
        top.set_title(f"{log}: mean bounded slowdown of the {unit}'s jobs")
        bottom.set_ylabel("utilization (% of processors)")
        bottom.set_title(f"{log}: utilization per {unit}")
        bottom.set_xlabel((f"calendar {unit}" if in_weeks else unit) + " (start date)" if dated
                          else f"{unit} since the first submission")
        if dated:
            locator = mpl.dates.AutoDateLocator()
            bottom.xaxis.set_major_locator(locator)
            bottom.xaxis.set_major_formatter(mpl.dates.ConciseDateFormatter(locator))
        else:
            bottom.xaxis.set_major_locator(mpl.ticker.MaxNLocator(integer=True))
    # one legend for all columns, below them, so no curve is hidden under it
    handles: dict[str, Any] = {}
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    if handles:  # as many columns as fit the figure's width (about 0.07 in a character)
        per_col_in = 0.07 * max(len(label) for label in handles) + 0.7
        ncols = max(1, min(len(handles), 7, int(fig.get_figwidth() / per_col_in)))
        fig.legend(list(handles.values()), list(handles), loc="outside lower center",
                   ncols=ncols)
    fig.suptitle(f"{_name(source)}: {'weekly' if in_weeks else 'per SLA window'} transient "
                 f"metrics")
    return fig


def _sla(summary: dict) -> float | None:
    """The bound on the mean bounded slowdown a run is judged by: summary.json's ``sla``
    (in a summary from before it, the controller's), when its metric is mean_bsld."""
    sla = summary.get("sla")
    if not isinstance(sla, dict):
        sla = _section(summary, "controller").get("sla") or {}
    return float(sla["max"]) if sla.get("metric", "mean_bsld") == "mean_bsld" and \
        _is_number(sla.get("max")) else None


def _kept_share(summary: dict) -> float | None:
    """The share of a run's SLA windows (with jobs) that kept its SLA, if known."""
    sla = summary.get("sla")
    return float(sla["kept_share"]) if isinstance(sla, dict) and \
        _is_number(sla.get("kept_share")) else None


def has_sla_windows(summary: dict) -> bool:
    """Whether a run's summary.json has its SLA and window rows with every figure the
    ``sla`` plot draws (summaries from before the SLA windows do not)."""
    rows = summary["weekly"]
    return isinstance(summary.get("sla"), dict) and bool(rows) and all(
        "sla_kept" in w and all(k in w for k in ROW_FIGURES) for w in rows)


def _sla_words(summary: dict) -> str:
    """``mean_bsld <= 200 per calendar week``."""
    sla = summary["sla"]
    dated = any(w.get("week_start") for w in summary["weekly"])
    return (f"{sla['metric']} <= {float(sla['max']):g} "
            f"{sla_window_text(float(sla['window_s']), dated)}")


def sla_figure(entry: RunEntry, mpl: SimpleNamespace) -> Any:
    """One run's SLA windows: the window's mean and 95th-percentile bounded slowdown (log
    scale; mean and max wait for a wait SLA) against the SLA bound, the windows that broke
    it shaded and crossed; below, the mean active and busy processors per window and the
    machine size."""
    summary, rows = entry.summary, entry.summary["weekly"]
    sla, m = summary["sla"], summary["metrics"]
    window_s = float(sla["window_s"])
    dated = all(w.get("week_start") for w in rows)
    if dated:  # window starts as dates (a whole number of days long), drawn at mid-window
        start = np.array([w["week_start"] for w in rows], dtype="datetime64[D]").astype(
            "datetime64[s]")
        width = np.timedelta64(int(window_s), "s")
        x, edges = start + width // 2, (start, start + width)
    else:  # windows since the first: the origin is the first window's start
        index = np.array([w["week"] for w in rows], dtype=float)
        x, edges = index + 0.5, (index, index + 1.0)
    metric = str(sla["metric"])
    wait = metric.endswith("_s")
    series = ((("mean_wait_s", "mean wait"), ("max_wait_s", "max wait")) if wait
              else (("mean_bsld", "mean bounded slowdown"), ("p95_bsld", "p95 bounded "
                                                                         "slowdown")))
    scale = 1 / 3600 if wait else 1.0

    def column(key: str, factor: float = 1.0) -> np.ndarray:
        return np.array([np.nan if w.get(key) is None else w[key] * factor for w in rows],
                        dtype=float)

    fig = _figure(mpl, 11.0, 6.5)
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[3, 2])
    for (key, label), color in zip(series, ("C0", "C1")):
        top.plot(x, column(key, scale), marker="o", markersize=3, linewidth=1.0, color=color,
                 label=f"{label} of the window's jobs")
    limit = float(sla["max"]) * scale
    top.axhline(limit, color="0.2", linestyle="--", linewidth=1.2,
                label=f"SLA: {metric} <= {float(sla['max']):g}")
    broken = [i for i, w in enumerate(rows) if w.get("sla_kept") is False]
    for k, i in enumerate(broken):
        top.axvspan(edges[0][i], edges[1][i], color="C3", alpha=0.12, linewidth=0,
                    label=None if k else "window that broke the SLA")
    if broken:
        values = column(metric, scale)
        top.plot(x[broken], values[broken], linestyle="none", marker="x", markersize=7,
                 color="C3", label=f"{metric} of a window that broke it")
    if wait:
        top.set_ylabel("wait (hours)")
        top.set_ylim(bottom=0)
    else:
        top.set_yscale("log")
        shown = np.concatenate([column(k) for k, _ in series] + [np.array([limit])])
        _log_axis(top.yaxis, mpl, shown)
        top.set_ylabel("bounded slowdown (log scale)")
    top.set_title("the SLA per window: its jobs' " + ("waits" if wait else "slowdown"))
    top.legend(loc="upper left", ncols=3)
    top.margins(y=0.25 if wait else 0.1)
    if not wait:  # room above the curves for the legend, on the log scale
        lo, hi = top.get_ylim()
        top.set_ylim(lo, hi * (hi / lo) ** 0.35)
    procs = m["processors"]
    bottom.plot(x, column("mean_active_procs"), marker="o", markersize=3, linewidth=1.0,
                color="C0", label="mean active processors")
    bottom.plot(x, column("utilization", procs), marker=".", markersize=3, linewidth=0.8,
                color="0.5", label="mean busy processors (utilization x processors)")
    bottom.axhline(procs, color="0.2", linestyle=":", linewidth=1.0,
                   label=f"machine ({procs:,})")
    for i in broken:
        bottom.axvspan(edges[0][i], edges[1][i], color="C3", alpha=0.12, linewidth=0)
    bottom.set_ylim(0, procs * 1.3)
    bottom.set_xlim(edges[0][0], edges[1][-1])  # whole windows, first to last
    bottom.set_ylabel("processors")
    bottom.set_title("processors per window")
    bottom.legend(loc="upper left", ncols=3)
    if dated:
        locator = mpl.dates.AutoDateLocator()
        bottom.xaxis.set_major_locator(locator)
        bottom.xaxis.set_major_formatter(mpl.dates.ConciseDateFormatter(locator))
        bottom.set_xlabel("window (start date)")
    else:
        bottom.xaxis.set_major_locator(mpl.ticker.MaxNLocator(integer=True))
        bottom.set_xlabel("window (number, 0: the first)")
    n, kept = int(sla["windows"]), int(sla["windows_kept"])
    fig.suptitle(f"{entry.log}: SLA {_sla_words(summary)}: {kept:,} of {n:,} windows with "
                 f"jobs kept ({_pct(_kept_share(summary))})")
    return fig


#: one marker per scheme in the trade-off plot
MARKERS = "osD^vP*X<>hp"


def tradeoff_figure(source: Source, mpl: SimpleNamespace) -> Any:
    """What keeping the SLA costs, per log of a study (one column each): for every run
    with summary.json ``sla``, the share of its SLA windows that kept the SLA (x) against
    what it saved (y): processors, the power budget (1 - time-mean cap in force / machine
    peak) for runs whose cap moves, and with power the energy relative to the log's run
    that saved least. One colour per scheme; when a grid key holds numbers (an SLA
    level, say), each scheme's runs are joined in its order and labelled with it."""
    runs = [r for r in source.runs if _kept_share(r.summary) is not None]
    others = [c for c in source.grid if c != "trace"]
    level = next((i for i in range(len(others))
                  if all(len(r.labels) > i and _number_text(r.labels[i]) for r in runs)), None)

    def scheme(r: RunEntry) -> str:
        rest = [lab for i, lab in enumerate(r.labels) if i != level]
        return ", ".join(rest) if rest else r.variant

    schemes = list(dict.fromkeys(scheme(r) for r in runs))
    rows = [("processor savings (% of processors)", _processor_savings)]
    if any(_budget_saved(r.summary) is not None for r in runs):
        rows.append(("power budget saved (% of peak)",
                     _budget_saved))
    energy_rows = any(_energy_j(r.summary) is not None for r in runs)
    logs = [log for log in source.logs if any(r.log == log for r in runs)]
    n_rows = len(rows) + (1 if energy_rows else 0)
    fig = _figure(mpl, 1.0 + 3.6 * len(logs) + 2.6, 0.6 + 2.9 * n_rows)
    axes = fig.subplots(n_rows, len(logs), squeeze=False, sharex="col")
    for col, log in enumerate(logs):
        here = [r for r in runs if r.log == log]
        ref = None
        if energy_rows:
            powered = [r for r in here if _energy_j(r.summary) is not None]
            if powered:  # the log's run that saved least (first on ties)
                ref = min(powered, key=lambda r: (_processor_savings(r.summary),
                                                  _budget_saved(r.summary) or 0.0))
        series = list(rows)
        if energy_rows:
            series.append(("energy (% of the log's run that saves least)",
                           lambda sm, ref=ref: (100.0 * _energy_j(sm) / _energy_j(ref.summary)
                                                if ref is not None and _energy_j(sm) is not None
                                                else None)))
        for row, (label, value) in enumerate(series):
            ax = axes[row][col]
            for k, name in enumerate(schemes):
                pts = [r for r in here if scheme(r) == name]
                if level is not None:
                    pts.sort(key=lambda r: float(r.labels[level]))
                xy = [(100 * _kept_share(r.summary), value(r.summary), r) for r in pts]
                xy = [(x, y, r) for x, y, r in xy if y is not None]
                if not xy:
                    continue
                ax.plot([x for x, _, _ in xy], [y for _, y, _ in xy], marker="o",
                        markersize=5, linewidth=1.0, color=f"C{k % 10}", label=name)
                if level is not None and len(schemes) * len(xy) <= 40:
                    for x, y, r in xy:
                        ax.annotate(r.labels[level], (x, y), textcoords="offset points",
                                    xytext=(3, 3), fontsize=7, color=f"C{k % 10}")
            ax.grid(True, alpha=0.3)
            if col == 0:
                ax.set_ylabel(label, fontsize=8)
            if row == 0:
                ax.set_title(log)
            if row == n_rows - 1:
                ax.set_xlabel("SLA windows kept (%)")
    handles = [mpl.Line2D([], [], marker="o", color=f"C{k % 10}", label=name)
               for k, name in enumerate(schemes)]
    rest = [c for i, c in enumerate(others) if i != level] or ["scheme"]
    title = ", ".join(rest) + (f" (points: {others[level]})" if level is not None else "")
    fig.legend(handles=handles, loc="outside right center", title=title, fontsize=8)
    slas = sorted({_sla_words(r.summary) for r in runs})
    what = slas[0] if len(slas) == 1 else "each run judged by its own SLA"
    fig.suptitle(f"{_name(source)}: savings against the SLA windows kept ({what})",
                 fontsize=10)
    return fig


def _number_text(text: str) -> bool:
    try:
        float(text)
    except (TypeError, ValueError):
        return False
    return True


def _processor_savings(summary: dict) -> float:
    return 100.0 * float(summary["metrics"].get("processor_savings") or 0.0)


def _energy_j(summary: dict) -> float | None:
    power = summary.get("power")
    value = power.get("energy_j") if isinstance(power, dict) else None
    return float(value) if _is_number(value) else None


def _budget_saved(summary: dict) -> float | None:
    """1 - the time-mean cap in force / the machine's peak power (%), for a run whose
    controller chooses the cap; None otherwise."""
    power, config = summary.get("power"), summary.get("config")
    controller = config.get("controller") if isinstance(config, dict) else None
    if not (isinstance(power, dict) and _is_number(power.get("mean_cap_w"))
            and isinstance(controller, dict)
            and "power_cap" in (controller.get("candidates") or {})):
        return None
    peak = float(summary["metrics"]["processors"]) * float(config["power"]["peak_w"])
    return 100.0 * (1.0 - float(power["mean_cap_w"]) / peak) if peak > 0 else None


def activity_figure(source: Source, series: list[RunSeries], mpl: SimpleNamespace) -> Any:
    """Lawson & Smirni's Fig. 3 for one log: active and busy processors over time (one
    panel per run whose active count changes; every run of a single-run report) and the
    bounded-slowdown ECDF of every run."""
    shown = series if source.kind == "run" else [s for s in series if s.active_varies]
    rows = max(1, len(shown))
    fig = _figure(mpl, 12.0 if shown else 6.0, max(4.0, 2.2 * rows))
    grid = fig.add_gridspec(rows, 2 if shown else 1, width_ratios=[1.6, 1] if shown else None)
    first = None
    for i, s in enumerate(shown):
        ax = fig.add_subplot(grid[i, 0], sharex=first)
        first = first or ax
        _activity_panel(ax, s, source.kind == "run")
        if i == rows - 1:
            ax.set_xlabel("time (days since the first submission)")
    ecdf = fig.add_subplot(grid[:, 1] if shown else grid[0, 0])
    for s in series:
        x, y = s.ecdf
        mean = s.entry.summary["metrics"]["mean_bsld"]
        label = f"{s.entry.variant} (mean {mean:,.1f})"
        ecdf.plot(x, y, drawstyle="steps-post", linewidth=1.2, label=label,
                  color=_color(source, s.entry.variant))
    ecdf.set_xscale("log")
    _log_axis(ecdf.xaxis, mpl, np.concatenate([s.ecdf[0] for s in series]))
    ecdf.set_ylim(0, 1.02)
    ecdf.set_xlabel("bounded slowdown (log scale)")
    ecdf.set_ylabel("share of jobs at or below")
    ecdf.set_title("bounded slowdown ECDF")
    ecdf.legend(loc="lower right")
    log = series[0].entry.log
    fig.suptitle(f"{log}: processors over time and bounded slowdown"
                 if shown else f"{log}: bounded slowdown (active processors never change)")
    return fig


def _activity_panel(ax: Any, s: RunSeries, single: bool) -> None:
    m = s.entry.summary["metrics"]
    per = "" if s.bin_h is None else f" (mean per {_duration(3600 * s.bin_h)})"
    ax.plot(*s.busy, drawstyle="steps-post", color="0.55", linewidth=0.7, label="busy" + per)
    ax.plot(*s.active, drawstyle="steps-post", color="C0", linewidth=1.2, label="active" + per)
    ax.axhline(m["processors"], color="0.2", linestyle=":", linewidth=1.0,
               label=f"machine ({m['processors']:,})")
    ax.set_ylim(0, m["processors"] * 1.3)
    ax.set_ylabel("processors")
    what = "active and busy processors" if single else s.entry.variant
    ax.set_title(f"{what}: mean active {m.get('mean_active_procs', m['processors']):,.1f}, "
                 f"savings {100 * m['processor_savings']:.1f}%")
    ax.legend(loc="upper left", ncols=3)


def power_figure(source: Source, s: RunSeries, mpl: SimpleNamespace) -> Any:
    """Wallace et al.'s Fig. 6/7: the machine's power over time against the cap."""
    p = s.power
    power = s.entry.summary.get("power") or {}
    fig = _figure(mpl, 11.0, 4.2)
    ax = fig.subplots()
    per = p["per"]
    ax.plot(p["x"], p["peak_kw"], drawstyle="steps-post", color="C1", linewidth=0.5,
            alpha=0.6, label=f"peak power (max per {per})")
    ax.plot(p["x"], p["mean_kw"], drawstyle="steps-post", color="C0", linewidth=0.9,
            label=f"mean power (mean per {per})")
    finite = np.isfinite(p["cap_kw"])
    if finite.any():
        caps = np.unique(p["cap_kw"][finite])
        label = f"cap ({caps[0]:,.1f} kW)" if caps.size == 1 else "cap in force"
        ax.plot(p["cap_x"], np.where(finite, p["cap_kw"], np.nan), drawstyle="steps-post",
                color="C3", linestyle="--", linewidth=1.4, label=label)
    if p.get("acted") is not None and p["acted"].any():  # the limit's throttled intervals
        ax.fill_between(p["x"][:-1], 0, 1, where=p["acted"] > 0, step="post", color="C3",
                        alpha=0.12, linewidth=0, transform=ax.get_xaxis_transform(),
                        label="limit throttled jobs")
    cfg = _section(s.entry.summary, "power")
    if _is_number(cfg.get("peak_w")):
        peak = s.entry.summary["metrics"]["processors"] * cfg["peak_w"] / 1e3
        ax.axhline(peak, color="0.2", linestyle=":", linewidth=1.0,
                   label=f"machine peak ({peak:,.0f} kW)")
        ax.set_ylim(0, peak * 1.25)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("time (days since the first submission)")
    ax.set_ylabel("machine power (kW)")
    csr = power.get("csr")
    what = s.entry.log + ("" if source.kind == "run" else f", {s.entry.variant}")
    cap = f"capping success rate {100 * csr:.1f}%" if _is_number(csr) and finite.any() \
        else "no cap"
    title = f"{what}: machine power against the cap ({cap})"
    if power.get("limit") == "throttle" and _is_number(power.get("scheduler_csr")):
        title += (f"\nthe power limit held it: scheduler's own CSR "
                  f"{100 * power['scheduler_csr']:.1f}%, jobs throttled "
                  f"{100 * power['throttled_time_share']:.1f}% of the time, "
                  f"{power['work_lost_proc_h']:,.0f} processor-h lost")
    ax.set_title(title)
    ax.legend(loc="upper left", ncols=4)
    return fig


def predict_figure(report: dict, mpl: SimpleNamespace) -> Any:
    """Each predictor's mean absolute error per week of job start, and the share of jobs
    the learner predicts from a learned profile."""
    weeks = report["weekly"]
    names = list(report["overall_mae_w"])
    shares = all(_is_number(w.get("learned_share")) for w in weeks)
    fig = _figure(mpl, 10.0, 6.0 if shares else 4.0)
    axes = fig.subplots(2 if shares else 1, 1, squeeze=False, sharex=True)[:, 0]
    x = np.array([w["week"] for w in weeks], dtype=float)
    for i, name in enumerate(names):
        axes[0].plot(x, [w[name] for w in weeks], marker="o", markersize=2.5, linewidth=1.0,
                     label=f"{name} (all weeks {_f(report['overall_mae_w'][name], 1)} W)",
                     color=f"C{i % 10}")
    axes[0].set_ylabel("mean absolute error (W per processor)")
    axes[0].set_title(f"{log_name(str(report.get('trace', '?')))}: error of the predicted "
                      f"mean job power, "
                      f"by week of job start")
    axes[0].set_ylim(bottom=0)
    axes[0].legend(loc="best")
    if shares:
        axes[1].plot(x, [100 * w["learned_share"] for w in weeks], marker="o",
                     markersize=2.5, linewidth=1.0, color="C4")
        axes[1].set_ylabel("jobs (%)")
        axes[1].set_ylim(0, 102)
        axes[1].set_title("jobs the learner predicts from a learned profile")
    axes[-1].set_xlabel("week since the first submission")
    axes[-1].xaxis.set_major_locator(mpl.ticker.MaxNLocator(integer=True))
    return fig
