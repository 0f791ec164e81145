"""Reading a report directory: a run (``summary.json``), a study (``results.csv`` and
``runs/``) or a predictor report (``predict.json``), every file checked before anything is
printed or drawn; bad input is one :class:`ReportError` line naming the file.
"""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from olsctl.errors import OlsctlError
from olsctl.run_files import json_text, write_atomic
from olsctl.terminal import capped
from olsctl.workload import log_name

PREDICT_FILE = "predict.json"
#: summary.json metrics the tables and plots read
SUMMARY_METRICS = ("jobs", "processors", "first_submit_s", "makespan_s", "mean_bsld",
                   "p95_bsld", "max_bsld", "mean_wait_s", "max_wait_s", "mean_turnaround_s",
                   "utilization", "utilization_active", "processor_savings")
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


def intervals_over_cap(run_dir: Path, summary: dict) -> int | None:
    """How many power sampling intervals of a run went over the cap: the rows of its
    power.csv with ``within_cap`` 0 (none to read when its CSR is 1); None for a run
    without a cap or without power.csv."""
    power = summary.get("power")
    if not isinstance(power, dict) or not _is_number(power.get("csr")) or not capped(power):
        return None
    if power["csr"] >= 1.0:
        return 0
    if not (run_dir / "power.csv").is_file():
        return None
    within = read_columns(run_dir / "power.csv", ("within_cap",))["within_cap"]
    return int(np.count_nonzero(within == 0))


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
