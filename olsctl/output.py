"""Output files of a run: ``jobs.csv``, ``timeseries.csv`` and ``summary.json``.

Column names of ``jobs.csv`` follow the Batsim/evalys convention so their tools read it.
Every file is written to a temporary name and renamed into place, so a reader never
sees half a file. Numbers are formatted deterministically: same records, same bytes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

import numpy as np

from olsctl.metrics import JobColumns
from olsctl.records import TimeSeries

JOB_COLUMNS = (
    "job_id", "submission_time", "starting_time", "finish_time", "execution_time",
    "waiting_time", "turnaround_time", "requested_number_of_resources", "requested_time",
    "bounded_slowdown",
)
TIMESERIES_COLUMNS = ("time", "queue_length", "busy_procs", "active_procs")
POWER_COLUMNS = ("time", "mean_power_w", "peak_power_w", "cap_w", "within_cap")


def num(x: float | int) -> str:
    """Shortest exact text for a number: integral values without a decimal point."""
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    x = float(x)
    if x.is_integer() and abs(x) < 2**53:
        return str(int(x))
    return repr(x)


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder and a rename."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def csv_text(header: Iterable[str], rows: Iterable[Iterable]) -> str:
    lines = [",".join(header)]
    lines.extend(",".join(num(v) for v in row) for row in rows)
    return "\n".join(lines) + "\n"


def jobs_csv(c: JobColumns, job_power=None, logged=None) -> str:
    """``jobs.csv``. ``logged`` = (job id -> row, logged processors, logged runtime by
    row), for runs where a job may get other than it asked (a power limit, RMAP/PARM):
    ``requested_number_of_resources`` is then the log's request, and
    ``allocated_number_of_resources`` and ``logged_execution_time`` sit beside what the
    job got. ``job_power`` = (mean power per processor by row, job id -> row[, energy by
    row]) adds each job's power (its processors, mean over its run) and energy."""
    requested = c.procs
    extra_cols, extra_head = [], []
    if logged is not None:
        index_of, procs, runtime = logged
        rows = np.asarray([index_of[j] for j in c.job_id.tolist()], dtype=np.int64)
        requested = procs[rows]
        extra_cols = [c.procs, runtime[rows]]
        extra_head = ["allocated_number_of_resources", "logged_execution_time"]
    cols = [c.job_id, c.submit_s, c.start_s, c.end_s, c.runtime_s, c.wait_s,
            c.turnaround_s, requested, c.estimate_s, c.bsld] + extra_cols
    header = list(JOB_COLUMNS) + extra_head
    if job_power is not None:
        mean_w, index_of = job_power[:2]
        rows = np.asarray([index_of[j] for j in c.job_id.tolist()], dtype=np.int64)
        if len(job_power) > 2:  # as drawn (throttled): energy first, power its mean
            energy = job_power[2][rows]
            power = np.divide(energy, c.runtime_s, out=mean_w[rows] * c.procs,
                              where=c.runtime_s > 0)
        else:
            power = mean_w[rows] * c.procs
            energy = power * c.runtime_s
        cols += [power, energy]
        header += ["power_w", "energy_j"]
    return csv_text(header, zip(*(col.tolist() for col in cols)))


def timeseries_csv(s: TimeSeries) -> str:
    return csv_text(TIMESERIES_COLUMNS,
                    zip(s.time_s, s.queue_len, s.busy_procs, s.active_procs))


def json_text(data: dict) -> str:
    return json.dumps(data, indent=2, sort_keys=False, allow_nan=False) + "\n"


def power_csv(smp, limit_acted=None) -> str:
    """Power samples: interval start, mean and peak power, the cap, within the cap; under
    a power limit also ``limit_acted`` (1: the limit throttled jobs in the interval)."""
    cols = [smp.time_s.tolist(), smp.mean_w.tolist(), smp.peak_w.tolist(),
            smp.cap_w.tolist(), smp.within_cap.astype(int).tolist()]
    header = list(POWER_COLUMNS)
    if limit_acted is not None:
        cols.append(np.asarray(limit_acted).astype(int).tolist())
        header.append("limit_acted")
    return csv_text(header, zip(*cols))


def write_run(out_dir: Path, jobs: JobColumns, samples: TimeSeries, summary: dict,
              extra: dict[str, str] | None = None, job_power=None,
              logged=None) -> list[Path]:
    """Write the run files into ``out_dir`` (created if needed); returns their paths.
    ``job_power`` = (mean power per processor by profile row, job id -> row) adds each
    job's power (all its processors) and energy to ``jobs.csv``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "jobs.csv": jobs_csv(jobs, job_power, logged),
        "timeseries.csv": timeseries_csv(samples),
        "summary.json": json_text(summary),
        **(extra or {}),
    }
    paths = []
    for name, text in files.items():
        path = out_dir / name
        write_atomic(path, text)
        paths.append(path)
    return paths
