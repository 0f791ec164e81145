"""The converter behind ``olsctl convert slurm`` (a dump's SWF text, its key of names,
and counts of what was kept, dropped and skipped), and :class:`SacctReader`, through which
``olsctl run --trace jobs.sacct`` reads the same records in memory.
"""

from __future__ import annotations

import codecs
import gzip
import io
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Iterable, Iterator
from zoneinfo import ZoneInfo

from olsctl.errors import ConfigError, TraceError
from olsctl.run_files import write_atomic
from olsctl.slurm.jobs import Dropped, SlurmJob, _numbering, _peak, job_record, swf_line
from olsctl.slurm.sacct import (UNITS, SacctRow, group_lines, missing_columns, parse_header,
                                parse_row, zone_of)
from olsctl.swf import SwfHeader, SwfRecord, parse_line


@dataclass
class Conversion:
    """The SWF text of a dump, its key, and what was kept, dropped and skipped."""

    swf_text: str
    key_text: str
    header: list[tuple[str, str]]
    jobs: int
    machine_procs: int
    machine_from: str
    dropped: dict[str, int] = field(default_factory=dict)
    steps: int = 0
    orphan_steps: int = 0
    bad_lines: int = 0
    first_error: str | None = None
    elapsed_mismatches: int = 0
    #: what the user should know about the dump, a line each (``source: ...``)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line: jobs kept, dropped by reason, steps folded, lines skipped."""
        dropped = ", ".join(f"{n} {why}" for why, n in sorted(self.dropped.items()))
        parts = [f"{self.jobs:,} jobs",
                 f"dropped {sum(self.dropped.values()):,}" + (f" ({dropped})" if dropped else ""),
                 f"{self.steps:,} steps folded"]
        if self.orphan_steps:
            parts.append(f"{self.orphan_steps:,} steps without their job ignored")
        if self.bad_lines:
            lines = "bad line" if self.bad_lines == 1 else "bad lines"
            parts.append(f"{self.bad_lines:,} {lines} skipped (first: {self.first_error})")
        if self.elapsed_mismatches:
            whose = "job's" if self.elapsed_mismatches == 1 else "jobs'"
            parts.append(f"{self.elapsed_mismatches:,} {whose} End - Start differs from "
                         f"Elapsed (is --tz the cluster's zone?)")
        return ", ".join(parts)


# -- the converter ----------------------------------------------------------------------


def _rows(lines: Iterable[str], source: str, units: str, skip_bad_lines: bool,
          conv: Conversion) -> Iterator[SacctRow]:
    lines = iter(lines)
    header = next(lines, "")
    if not header.strip():
        raise TraceError(f"{source}: empty file (expected a sacct --parsable2 header line)")
    columns = parse_header(header, source, units)
    conv.notes += [f"{source}: {note}" for note in missing_columns(columns, units)]
    for line_no, text in enumerate(lines, start=2):
        if not text.strip():
            continue
        try:
            yield parse_row(text, columns, line_no, source)
        except TraceError as exc:
            if not skip_bad_lines:
                raise
            conv.bad_lines += 1
            conv.first_error = conv.first_error or exc.args[0]


def _jobs(lines: Iterable[str], source: str, units: str, zone: ZoneInfo,
          skip_bad_lines: bool, conv: Conversion) -> list[SlurmJob]:
    """The jobs that ran, in SWF order; drops, steps and skipped lines counted in ``conv``."""
    groups, conv.orphan_steps = group_lines(_rows(lines, source, units, skip_bad_lines, conv))
    jobs: list[SlurmJob] = []
    for lines_of_job in groups:
        try:
            rec = job_record(lines_of_job, zone, units, source)
        except TraceError as exc:
            if not skip_bad_lines:
                raise
            conv.bad_lines += 1
            conv.first_error = conv.first_error or exc.args[0]
            continue
        conv.steps += lines_of_job.steps
        if isinstance(rec, Dropped):
            conv.dropped[rec.reason] = conv.dropped.get(rec.reason, 0) + rec.tasks
        else:
            jobs.append(rec)
    if not jobs:
        why = ", ".join(f"{n} {r}" for r, n in sorted(conv.dropped.items())) or "no job lines"
        raise TraceError(f"{source}: no job in the log ran to an end ({why})")
    jobs.sort(key=lambda j: (j.submit_s, j.sort_key, j.line_no))
    return jobs


def _header(jobs: list[SlurmJob], source: str, procs: int | None, units: str, tz: str,
            n_queues: int) -> list[tuple[str, str]]:
    """The SWF header comments as (key, value), in order."""
    t0 = jobs[0].submit_s
    offset = datetime.fromtimestamp(t0, ZoneInfo(tz)).utcoffset() or timedelta(0)
    machine = procs or _peak(jobs, "procs")
    header = [
        ("Version", "2.2"),
        ("Computer", "Slurm cluster"),
        ("Note", f"converted from sacct by olsctl convert slurm ({source}; processors = "
                 f"{UNITS[units]}; local times read in {tz})"),
        ("UnixStartTime", str(round(t0))),
        ("TimeZone", str(round(offset.total_seconds()))),
        ("TimeZoneString", tz),
        ("MaxJobs", str(len(jobs))),
        ("MaxRecords", str(len(jobs))),
        ("MaxProcs", str(machine)),
    ]
    if units == "nodes":
        header.append(("MaxNodes", str(machine)))
    elif any(j.nodes for j in jobs):
        header.append(("MaxNodes", str(_peak(jobs, "nodes"))))
    header.append(("MaxQueues", str(n_queues)))
    if not procs:
        header.append(("Note", f"MaxProcs is the most {units} busy at once in the log "
                               f"(largest job: {max(j.procs for j in jobs)}); the machine "
                               f"may be larger: set it with --procs"))
    return header


def convert_lines(lines: Iterable[str], source: str, procs: int | None = None,
                  units: str = "cpus", tz: str = "UTC",
                  skip_bad_lines: bool = False, notes: Iterable[str] = ()) -> Conversion:
    """The SWF text and key of a dump given as lines (the header first).

    ``procs`` sets ``MaxProcs``; without it, the most ``units`` busy at once in the log.
    Raises :class:`TraceError` naming file, line and field for bad input (with
    ``skip_bad_lines`` a bad line is skipped and counted instead), or if no job ran.
    ``notes`` (about reading the file) come first in the conversion's notes.
    """
    if procs is not None and procs < 1:
        raise ConfigError(f"command line: --procs: must be >= 1 (got {procs})")
    zone = zone_of(tz)
    conv = Conversion("", "", [], 0, 0, "", notes=list(notes))
    jobs = _jobs(lines, source, units, zone, skip_bad_lines, conv)
    conv.jobs = len(jobs)
    conv.elapsed_mismatches = sum(j.elapsed_mismatch for j in jobs)
    users = _numbering(j.user for j in jobs)
    groups = _numbering(j.group for j in jobs)
    queues = _numbering(j.partition for j in jobs)
    conv.header = _header(jobs, source, procs, units, tz, len(queues))
    conv.machine_procs = int(dict(conv.header)["MaxProcs"])
    conv.machine_from = "--procs" if procs else "the most busy at once in the log"
    t0 = jobs[0].submit_s
    body = [swf_line(i, j, t0, users.get(j.user, -1), groups.get(j.group, -1),
                     queues.get(j.partition, -1)) for i, j in enumerate(jobs, start=1)]
    conv.swf_text = "\n".join([f"; {k}: {v}" for k, v in conv.header] + body) + "\n"
    key = ["kind,number,name"] + [f"job,{i},{j.name}" for i, j in enumerate(jobs, start=1)]
    for kind, ids in (("user", users), ("group", groups), ("queue", queues)):
        key += [f"{kind},{n},{_csv(name)}" for name, n in ids.items()]
    conv.key_text = "\n".join(key) + "\n"
    return conv


def _csv(text: str) -> str:
    return f'"{text.replace(chr(34), chr(34) * 2)}"' if any(c in text for c in ',"\n') else text


def _read_lines(src: Path) -> tuple[list[str], list[str]]:
    """The lines of a dump (plain or gzipped; universal newlines; a UTF-8 byte-order mark
    skipped) and a note if it is not UTF-8: it is then read as Latin-1, one character a
    byte, so that names differing in any byte stay different names."""
    try:
        data = src.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise TraceError(f"{src.name}: cannot read: {getattr(exc, 'strerror', None) or exc}"
                         ) from None
    data = data[3:] if data.startswith(codecs.BOM_UTF8) else data
    notes = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_no = data.count(b"\n", 0, exc.start) + 1
        text = data.decode("latin-1")
        notes.append(f"{src.name}: not UTF-8 (line {line_no} first): read as Latin-1, so "
                     f"names that differ in any byte stay different")
    return io.StringIO(text, newline=None).readlines(), notes


def convert(src: Path, swf_out: Path, key_out: Path | None = None, procs: int | None = None,
            units: str = "cpus", tz: str = "UTC", skip_bad_lines: bool = False) -> Conversion:
    """Write ``swf_out`` (and ``key_out``) from the sacct dump at ``src``. All input is
    checked before anything is written; each file is written whole or not at all."""
    src = Path(src)
    lines, notes = _read_lines(src)
    conv = convert_lines(lines, src.name, procs, units, tz, skip_bad_lines, notes)
    outputs = [("--swf", Path(swf_out), conv.swf_text)]
    if key_out is not None:
        outputs.append(("--key", Path(key_out), conv.key_text))
    written: list[Path] = []
    for option, path, text in outputs:
        try:
            write_atomic(path, text)
        except OSError as exc:
            for done in written:  # both files or neither
                done.unlink(missing_ok=True)
            raise ConfigError(f"command line: {option}: cannot write {path}: "
                              f"{exc.strerror or exc}") from None
        written.append(path)
    return conv


@dataclass
class SacctReader:
    """A sacct dump read as SWF records, like :class:`olsctl.swf.SwfReader` (iterate for
    records; ``header``, ``bad_lines``, ``first_error``): converted in memory by
    :func:`convert_lines` (times read as UTC unless they carry an offset, processors =
    AllocCPUS), then each SWF line parsed by :func:`olsctl.swf.parse_line`. ``dropped``
    counts the jobs that never ran or had not ended, by reason."""

    path: Path
    skip_bad_lines: bool = False
    header: SwfHeader = field(default_factory=SwfHeader)
    bad_lines: int = 0
    first_error: str | None = None
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return self.path.name

    def __iter__(self) -> Iterator[SwfRecord]:
        conv = convert_lines(_read_lines(self.path)[0], self.source,
                             skip_bad_lines=self.skip_bad_lines)
        self.bad_lines, self.first_error = conv.bad_lines, conv.first_error
        self.dropped = dict(conv.dropped)
        for key, value in conv.header:
            known = self.header.entries.get(key)
            self.header.entries[key] = value if known is None else f"{known}; {value}"
        for line_no, text in enumerate(conv.swf_text.splitlines(), start=1):
            if not text.startswith(";"):
                yield parse_line(text, line_no, self.source)
