"""A study directory: what a worker hands back of a run (:class:`Outcome`), moved into
``runs/<id>`` whole (one rename each) and found again on resume; ``results.csv``,
``failed.csv`` and ``infeasible.csv`` rewritten atomically; and the lock that keeps two
studies out of one directory.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from olsctl.errors import OlsctlError, cannot_write
from olsctl.run_files import num, write_atomic
from olsctl.study.grid import POWER_METRICS, Study

RUN_FILES = ("jobs.csv", "timeseries.csv", "summary.json")


class StudyError(OlsctlError):
    """A study could not go on (its directory is in use, a worker process died)."""

    kind = "StudyError"


@dataclass
class Outcome:
    """What a worker hands back: a summary and the run's files (still in a directory of
    the study's ``.partial``, or as bytes from a remote worker), or a one-line error;
    ``infeasible`` is why, when the error says that some job can never start under the
    setting."""

    run_id: str
    summary: dict | None = None
    error: str | None = None
    path: str | None = None
    files: dict[str, bytes] | None = None
    wall_s: float = 0.0
    infeasible: str | None = None


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


@contextmanager
def writing_into(out_dir: Path, where: str = "out") -> Iterator[None]:
    """An OSError raised in the block, which writes into the study directory ``out_dir``,
    becomes one line naming it, ``where`` naming what chose it (``study.yaml: out``)."""
    try:
        yield
    except OSError as exc:
        raise cannot_write(where, out_dir, exc) from None


@contextmanager
def _locked(out_dir: Path, where: str = "out") -> Iterator[None]:
    """Create ``out_dir`` and hold its lock (released by the system if the process dies);
    ``where`` as for :func:`writing_into`."""
    with writing_into(out_dir, where):
        out_dir.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # no advisory locks here: trust the user
        yield
        return
    with writing_into(out_dir, where):
        lock = open(out_dir / ".lock", "w")
    with lock as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise StudyError(f"{out_dir}: another olsctl study is running in this "
                             f"directory") from None
        yield


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


def write_tables(study: Study, done: dict[str, dict], failed: dict[str, str],
                 infeasible: dict[str, str] | None = None) -> None:
    """Rewrite results.csv (and failed.csv, removed when nothing failed; with
    ``infeasible``, infeasible.csv likewise), atomically."""
    write_atomic(study.out_dir / "results.csv", results_csv(study, done))
    tables = [("failed.csv", failed)]
    if infeasible is not None:
        tables.append((INFEASIBLE_FILE, infeasible))
    for name, rows in tables:
        path = study.out_dir / name
        if rows:
            write_atomic(path, failed_csv(study, rows, "error" if name == "failed.csv"
                                          else "why"))
        elif path.exists():
            path.unlink()


#: the settings of a tune's grid under which some job can never start (id, grid, why)
INFEASIBLE_FILE = "infeasible.csv"


def known_infeasible(study: Study) -> dict[str, str]:
    """The grid points ``infeasible.csv`` lists (why, by run id); a file that cannot be
    read counts as empty (its settings are then run again)."""
    path = study.out_dir / INFEASIBLE_FILE
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except (OSError, csv.Error, UnicodeDecodeError):
        return {}
    ids = {p.run_id for p in study.points}
    return {r["id"]: r["why"] for r in rows
            if isinstance(r.get("id"), str) and r["id"] in ids and isinstance(r.get("why"), str)}


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


def failed_csv(study: Study, failed: dict[str, str], column: str = "error") -> str:
    """One row per grid point in ``failed``, in grid order: id, grid labels, its text."""
    rows = [[p.run_id, *p.labels, failed[p.run_id]]
            for p in study.points if p.run_id in failed]
    return _csv(["id", *study.columns, column], rows)


def _cell(value: Any) -> str:
    return "" if value is None else num(value) if isinstance(value, (int, float)) else str(value)


def _csv(header: list[str], rows: list[list[str]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()
