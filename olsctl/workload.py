"""Workloads: SWF records turned into jobs by the loading rules, with a load report.

Loading rules (docs/internals.md, Semantics): processors = field 8 if > 0 else field 5;
runtime = field 4;
records with an unknown submit time (-1), runtime <= 0 or processors <= 0 are dropped (the
first of these reasons counted); jobs wider than the machine are rejected (never clipped);
the machine size is the header's MaxProcs, else MaxNodes, unless the caller sets it. Jobs
are ordered by (submit time, job id).
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from olsctl import slurm
from olsctl.errors import TraceError
from olsctl.swf import SwfHeader, SwfReader

ESTIMATE_MODES = ("exact", "user")
#: SWF's "unknown" in field 2: such a record is dropped (counted as :data:`NO_SUBMIT`)
UNKNOWN_SUBMIT = -1.0
NO_SUBMIT = "submit time unknown"

#: Short names of the bundled logs; the first is the default trace.
BUNDLED = {
    "KTH-SP2": "KTH-SP2-1996-2.1-cln.swf.gz",
    "SDSC-SP2": "SDSC-SP2-1998-4.2-cln.swf.gz",
    "CTC-SP2": "CTC-SP2-1996-3.1-cln.swf.gz",
    "SDSC-BLUE": "SDSC-BLUE-2000-4.2-cln.swf.gz",
}
DEFAULT_TRACE = "KTH-SP2"


def bundled_dir() -> Path:
    """Folder holding the bundled traces (installed as package data ``olsctl.traces``)."""
    return Path(str(importlib.resources.files("olsctl.traces")))


def resolve_trace(name_or_path: str | Path, base: Path | None = None) -> Path:
    """A bundled log's short or file name, or a path (relative to ``base`` if given)."""
    text = str(name_or_path)
    if text in BUNDLED:
        return bundled_dir() / BUNDLED[text]
    path = Path(text).expanduser()
    if not path.is_absolute() and base is not None:
        path = base / path
    if not path.exists() and path.name in BUNDLED.values() and (bundled_dir() / path.name).exists():
        return bundled_dir() / path.name
    if not path.exists():
        known = ", ".join(BUNDLED)
        raise TraceError(f"{text}: no such file (bundled logs: {known})")
    return path


@dataclass
class LoadReport:
    """What loading kept and dropped, and why (counts by reason)."""

    source: str
    records: int = 0
    kept: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    bad_lines: int = 0
    first_bad_line: str | None = None

    def drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())

    def as_dict(self) -> dict:
        return {
            "source": self.source,
            "records": self.records,
            "kept": self.kept,
            "dropped": dict(sorted(self.dropped.items())),
            "bad_lines_skipped": self.bad_lines,
        }


@dataclass(frozen=True)
class Workload:
    """Jobs as column arrays, sorted by (submit time, job id); times in seconds.

    ``requested_time_s`` is SWF field 9 as logged (-1 when unknown); ``estimate_s(mode)``
    applies the estimate rule. ``user_id``/``group_id`` are -1 when unknown.
    """

    name: str
    machine_procs: int
    header: SwfHeader
    report: LoadReport
    job_id: np.ndarray
    submit_s: np.ndarray
    runtime_s: np.ndarray
    procs: np.ndarray
    requested_time_s: np.ndarray
    user_id: np.ndarray
    group_id: np.ndarray
    #: SWF field 14, the application number (-1 unknown); None when not loaded
    executable: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.job_id.size)

    def estimate_s(self, mode: str) -> np.ndarray:
        """Runtime estimates: ``exact`` = runtime; ``user`` = max(field 9, runtime), or the
        runtime when field 9 is missing (<= 0)."""
        if mode == "exact":
            return self.runtime_s.copy()
        if mode == "user":
            req = self.requested_time_s
            return np.where(req > 0, np.maximum(req, self.runtime_s), self.runtime_s)
        raise ValueError(f"unknown estimate mode {mode!r}; use one of {ESTIMATE_MODES}")

    def head(self, n_jobs: int) -> "Workload":
        """The first ``n_jobs`` jobs (same machine), e.g. for quick studies and tests."""
        return self.select(np.arange(min(n_jobs, len(self))))

    def select(self, index: np.ndarray) -> "Workload":
        """A workload of the jobs at ``index`` (kept in order)."""
        cols = {
            name: getattr(self, name)[index]
            for name in ("job_id", "submit_s", "runtime_s", "procs", "requested_time_s",
                         "user_id", "group_id")
        }
        exe = None if self.executable is None else self.executable[index]
        return Workload(self.name, self.machine_procs, self.header, self.report, **cols,
                        executable=exe)

    def load_scaled(self, factor: float) -> "Workload":
        """The same jobs arriving ``factor`` times as fast: submit times, counted from the
        first submission, divided by ``factor`` (1.0: this workload itself)."""
        if factor == 1.0 or len(self) == 0:
            return self
        first = float(self.submit_s[0])
        return replace(self, submit_s=first + (self.submit_s - first) / factor)

    def job_keys(self) -> list[int]:
        """A key per job for "the same job again": (user, application) when the log names
        the application, else (user, processors, requested time)."""
        exe = self.executable if self.executable is not None else np.full(len(self), -1)
        return [hash((u, e)) if e >= 0 else hash((u, p, r)) for u, e, p, r in
                zip(self.user_id.tolist(), exe.tolist(), self.procs.tolist(),
                    self.requested_time_s.tolist())]


def _bulk_columns(reader, report: LoadReport) -> list[np.ndarray] | None:
    """The loading rules over a whole clean SWF file at once (:meth:`SwfReader.table`):
    the kept records' columns (job id, submit time, runtime, processors, fields 9, 12, 13
    and 14), counted in ``report`` as the line-by-line rules count them. None when the
    file needs those rules line by line (a malformed line, a known submit time that is
    negative or goes back, a job id that repeats: they name the line, or skip it)."""
    table = reader.table() if isinstance(reader, SwfReader) else None
    if table is None:
        return None
    job_id, submit, runtime = table[:, 0], table[:, 1], table[:, 3]
    no_submit = submit == UNKNOWN_SUBMIT
    known = submit[~no_submit]
    if ((known < 0).any() or (np.diff(known) < 0).any()
            or np.unique(job_id).size < job_id.size):
        reader.header = SwfHeader()  # (the line reader fills it again)
        return None
    procs = np.where(table[:, 7] > 0, table[:, 7], table[:, 4])
    no_runtime = ~no_submit & (runtime <= 0)
    no_procs = ~no_submit & ~no_runtime & (procs <= 0)
    report.records += len(table)
    drops = [(int(np.argmax(bad)), reason, int(bad.sum())) for reason, bad in
             ((NO_SUBMIT, no_submit), ("runtime <= 0", no_runtime),
              ("processors <= 0", no_procs)) if bad.any()]
    for _, reason, n in sorted(drops):  # in the order the line-by-line rules meet them
        report.dropped[reason] = n
    keep = np.flatnonzero(~(no_submit | no_runtime | no_procs))
    return [job_id[keep], submit[keep], runtime[keep], procs[keep],
            *(table[keep, k] for k in (8, 11, 12, 13))]


def log_name(trace: str, empty: str | None = None) -> str:
    """A log's short name: the bundled name, else the file name without .swf[.gz]
    (``empty`` when nothing is left: ``trace`` itself by default)."""
    name = Path(trace).name
    for short, file_name in BUNDLED.items():
        if name in (short, file_name):
            return short
    for suffix in (".gz", ".swf"):
        name = name[: -len(suffix)] if name.endswith(suffix) else name
    return name or (trace if empty is None else empty)


def load_workload(
    path: str | Path,
    machine_procs: int | None = None,
    skip_bad_lines: bool = False,
) -> Workload:
    """Read an SWF file (plain or gzipped) and apply the loading rules. A sacct dump
    (:func:`olsctl.slurm.is_sacct`) is converted to SWF records in memory first; its jobs
    that never ran or had not ended count as dropped records.

    Raises :class:`TraceError` with file, line and field for malformed input, negative or
    decreasing submit times, duplicate job ids, an unknown machine size, or no jobs.
    """
    path = Path(path)
    reader = (slurm.SacctReader if slurm.is_sacct(path) else SwfReader)(
        path, skip_bad_lines=skip_bad_lines)
    report = LoadReport(source=path.name)
    bulk = _bulk_columns(reader, report)  # a clean SWF file at array speed, else None
    cols = _record_columns(reader, report, skip_bad_lines) if bulk is None else bulk
    report.bad_lines = reader.bad_lines
    report.first_bad_line = reader.first_error
    for why, n in getattr(reader, "dropped", {}).items():  # a sacct dump's jobs that never ran
        report.records += n
        report.dropped[why] = n
    size = _machine_size(reader, report, machine_procs)
    job_id, submit, runtime, procs, req, user, group, exe = (np.asarray(c, dtype=float)
                                                             for c in cols)
    fits = procs <= size
    if not fits.all():
        report.dropped["wider than the machine"] = int((~fits).sum())
    report.kept = int(fits.sum())
    if report.kept == 0:
        why = ", ".join(f"{n} {reason}" for reason, n in report.dropped.items())
        raise TraceError(f"{path.name}: no job is left after the loading rules "
                         f"({report.records} records, all dropped: {why})")
    order = np.lexsort((job_id[fits], submit[fits]))
    pick = np.flatnonzero(fits)[order]
    return Workload(
        name=path.name,
        machine_procs=int(size),
        header=reader.header,
        report=report,
        job_id=job_id[pick].astype(np.int64),
        submit_s=submit[pick],
        runtime_s=runtime[pick],
        procs=procs[pick].astype(np.int64),
        requested_time_s=req[pick],
        user_id=user[pick].astype(np.int64),
        group_id=group[pick].astype(np.int64),
        executable=exe[pick].astype(np.int64),
    )


def _record_columns(reader: SwfReader | slurm.SacctReader, report: LoadReport,
                    skip_bad_lines: bool) -> list[list]:
    """The columns (job id, submit, runtime, processors, requested time, user, group,
    executable) of the records ``reader`` yields, one record at a time: known submit
    times must not be negative or go back, job ids not repeat (with ``skip_bad_lines``
    such records are counted and skipped); records with an unknown submit time (-1, left
    out of the submit order), no runtime or no processors are dropped and counted in
    ``report``."""
    name = reader.source
    cols: list = [[] for _ in range(8)]
    seen_ids: dict[float, int] = {}
    last_submit = -1.0
    last_line = 0
    for rec in reader:
        v = rec.values
        job_id, submit, runtime = v[0], v[1], v[3]
        problem = None
        unknown = submit == UNKNOWN_SUBMIT
        if unknown:
            pass  # dropped below, wherever it stands in the submit order
        elif submit < 0:
            problem = f"field 2 (submit_time) is negative: {submit:g}"
        elif submit < last_submit:
            problem = (f"field 2 (submit_time) goes back in time: {submit:g} after "
                       f"{last_submit:g} on line {last_line}")
        if problem is None and job_id in seen_ids:
            problem = f"field 1 (job_number) {job_id:g} repeats line {seen_ids[job_id]}"
        if problem is not None:
            if not skip_bad_lines:
                raise TraceError(f"{name}:{rec.line_no}: {problem}")
            reader.bad_lines += 1
            reader.first_error = reader.first_error or f"{name}:{rec.line_no}: {problem}"
            continue
        seen_ids[job_id] = rec.line_no
        report.records += 1
        if unknown:
            report.drop(NO_SUBMIT)
            continue
        last_submit, last_line = submit, rec.line_no
        procs = v[7] if v[7] > 0 else v[4]
        if runtime <= 0:
            report.drop("runtime <= 0")
            continue
        if procs <= 0:
            report.drop("processors <= 0")
            continue
        for col, value in zip(cols, (job_id, submit, runtime, procs, v[8], v[11], v[12], v[13])):
            col.append(value)
    return cols


def _machine_size(reader: SwfReader | slurm.SacctReader, report: LoadReport,
                  machine_procs: int | None) -> int:
    """The machine's processors: ``machine_procs``, else the header's ``MaxProcs``, else
    its ``MaxNodes``. A log without job records is refused first."""
    name = reader.source
    if report.records == 0:
        what = "no job records" + (" (header only)" if reader.header.entries else " (empty file)")
        if report.bad_lines:  # (--skip-bad-lines skipped every one)
            what = (f"no job records: all {report.bad_lines} skipped as malformed (first: "
                    f"{report.first_bad_line})")
        raise TraceError(f"{name}: {what}")
    size = (machine_procs or reader.header.first_int("MaxProcs")
            or reader.header.first_int("MaxNodes"))
    if not size or size <= 0:
        raise TraceError(f"{name}: machine size unknown: no MaxProcs or MaxNodes header; set procs")
    return size
