"""The files a run writes: ``jobs.csv``, ``timeseries.csv``, ``power.csv`` and
``summary.json``, and the deterministic number text (:func:`num`) and atomic writes
(:func:`write_atomic`) every other file olsctl writes uses too.

Column names of ``jobs.csv`` follow the Batsim/evalys convention so their tools read it.
Every file is written to a temporary name and renamed into place, so a reader never
sees half a file. Numbers are formatted deterministically: same records, same bytes. The
CSV files are formatted a column at a time (integral values by array arithmetic, the
others by ``repr``) and written piece by piece, with the text :func:`num` gives.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Iterator

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


def column_bytes(values) -> np.ndarray:
    """The text :func:`num` gives every value of a column (an array, or a list of numbers
    of one kind), as ASCII in a (rows, width) uint8 matrix padded with NUL bytes (where in
    a row the padding sits is of no account: :func:`csv_chunks` drops it). Integral
    values are written by array arithmetic; only the others go through ``repr``."""
    a = np.asarray(values)
    if a.dtype.kind in "biu":
        a = a.astype(np.int64, copy=False)
        if a.size and a.min() == np.iinfo(np.int64).min:  # (no magnitude in int64)
            return _text_matrix([str(v) for v in a.tolist()])
        return _int_matrix(a)
    a = a.astype(float, copy=False)
    whole = (np.trunc(a) == a) & (np.abs(a) < 2**53)  # (False for inf and nan)
    if whole.all():
        return _int_matrix(a.astype(np.int64))
    ints = _int_matrix(a[whole].astype(np.int64))
    others = _text_matrix(list(map(repr, a[~whole].tolist())))
    out = np.zeros((a.size, max(ints.shape[1], others.shape[1])), np.uint8)
    out[whole, :ints.shape[1]] = ints
    out[~whole, :others.shape[1]] = others
    return out


def _int_matrix(v: np.ndarray) -> np.ndarray:
    """Decimal text of int64 values (never the int64 minimum), right-aligned."""
    neg = v < 0
    mag = np.abs(v)
    top = int(mag.max()) if mag.size else 0
    width = len(str(top)) + bool(neg.any())
    digits = np.ones(v.shape, np.int64)  # digits of each value
    for k in range(1, len(str(top))):
        digits += mag >= 10**k
    out = np.zeros((v.size, width), np.uint8)
    for k in range(width):  # k-th position from the right
        col = out[:, width - 1 - k]
        np.add(48, mag % 10, out=col, where=k < digits, casting="unsafe")
        col[neg & (k == digits)] = 45  # "-" just before the first digit
        mag //= 10
    return out


def _text_matrix(texts: list[str]) -> np.ndarray:
    """ASCII ``texts`` as a (rows, width) uint8 matrix, left-aligned, NUL-padded."""
    if not texts:
        return np.zeros((0, 1), np.uint8)
    packed = np.array(texts, dtype=np.bytes_)
    return packed.view(np.uint8).reshape(len(texts), packed.dtype.itemsize)


#: rows formatted per piece of a file being written (bounds the memory a file takes)
CHUNK_ROWS = 1 << 15


def csv_chunks(header: Iterable[str], columns: list) -> Iterator[str]:
    """CSV text in pieces: the header line, then rows of ``columns`` (arrays or lists of
    equal length), :data:`CHUNK_ROWS` at a time, each value as :func:`num` writes it."""
    yield ",".join(header) + "\n"
    yield from table_chunks(columns, ",")


def table_chunks(columns: list, sep: str = ",") -> Iterator[str]:
    """Rows of ``columns`` (arrays or lists of equal length) as text lines, values
    (:func:`num`) joined by ``sep`` (one ASCII character), :data:`CHUNK_ROWS` rows a
    piece."""
    sep_byte = np.array([[ord(sep)]], np.uint8)
    n = len(columns[0]) if columns else 0
    for lo in range(0, n, CHUNK_ROWS):
        parts = []
        for col in columns:
            parts += [column_bytes(col[lo:lo + CHUNK_ROWS]), sep_byte]
        rows = len(parts[0])
        parts[-1] = _NEWLINE
        table = np.concatenate([np.broadcast_to(p, (rows, p.shape[1])) for p in parts],
                               axis=1).ravel()
        yield table[table != 0].tobytes().decode("ascii")


_NEWLINE = np.array([[10]], np.uint8)


def write_atomic(path: Path, text: str | Iterable[str]) -> None:
    """Write ``text`` (a string, or the pieces of one) to ``path`` via a temporary file in
    the same folder and a rename."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            if isinstance(text, str):
                fh.write(text)
            else:
                fh.writelines(text)
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
    return "".join(jobs_chunks(c, job_power, logged))


def jobs_chunks(c: JobColumns, job_power=None, logged=None) -> Iterator[str]:
    """:func:`jobs_csv` in pieces (see :func:`csv_chunks`)."""
    requested = c.procs
    extra_cols, extra_head = [], []
    if logged is not None:
        index_of, procs, runtime = logged
        rows = _rows_of(c.job_id, index_of)
        requested = procs[rows]
        extra_cols = [c.procs, runtime[rows]]
        extra_head = ["allocated_number_of_resources", "logged_execution_time"]
    cols = [c.job_id, c.submit_s, c.start_s, c.end_s, c.runtime_s, c.wait_s,
            c.turnaround_s, requested, c.estimate_s, c.bsld] + extra_cols
    header = list(JOB_COLUMNS) + extra_head
    if job_power is not None:
        mean_w, index_of = job_power[:2]
        rows = _rows_of(c.job_id, index_of)
        if len(job_power) > 2:  # as drawn (throttled): energy first, power its mean
            energy = job_power[2][rows]
            power = np.divide(energy, c.runtime_s, out=mean_w[rows] * c.procs,
                              where=c.runtime_s > 0)
        else:
            power = mean_w[rows] * c.procs
            energy = power * c.runtime_s
        cols += [power, energy]
        header += ["power_w", "energy_j"]
    return csv_chunks(header, cols)


def _rows_of(job_id: np.ndarray, index_of: dict) -> np.ndarray:
    """The row (``index_of[id]``) of every job id."""
    return np.fromiter(map(index_of.__getitem__, job_id.tolist()), np.int64, job_id.size)


def timeseries_csv(s: TimeSeries) -> str:
    return "".join(timeseries_chunks(s))


def timeseries_chunks(s: TimeSeries) -> Iterator[str]:
    """:func:`timeseries_csv` in pieces (see :func:`csv_chunks`)."""
    return csv_chunks(TIMESERIES_COLUMNS, [s.time_s, s.queue_len, s.busy_procs,
                                           s.active_procs])


def json_text(data: dict) -> str:
    return json.dumps(data, indent=2, sort_keys=False, allow_nan=False) + "\n"


def power_csv(smp, limit_acted=None) -> str:
    """Power samples: interval start, mean and peak power, the cap, within the cap; under
    a power limit also ``limit_acted`` (1: the limit throttled jobs in the interval)."""
    cols = [smp.time_s, smp.mean_w, smp.peak_w, smp.cap_w, smp.within_cap.astype(int)]
    header = list(POWER_COLUMNS)
    if limit_acted is not None:
        cols.append(np.asarray(limit_acted).astype(int))
        header.append("limit_acted")
    return "".join(csv_chunks(header, cols))


def write_run(out_dir: Path, jobs: JobColumns, samples: TimeSeries, summary: dict,
              extra: dict[str, str] | None = None, job_power=None,
              logged=None) -> list[Path]:
    """Write the run files into ``out_dir`` (created if needed); returns their paths.
    ``job_power`` = (mean power per processor by profile row, job id -> row) adds each
    job's power (all its processors) and energy to ``jobs.csv``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {  # the CSV files are formatted piece by piece as they are written
        "jobs.csv": jobs_chunks(jobs, job_power, logged),
        "timeseries.csv": timeseries_chunks(samples),
        "summary.json": json_text(summary),
        **(extra or {}),
    }
    paths = []
    for name, text in files.items():
        path = out_dir / name
        write_atomic(path, text)
        paths.append(path)
    return paths
