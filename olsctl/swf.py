"""Standard Workload Format (SWF) reading: a pure line parser, a lazy, streaming reader and
a bulk path that reads a whole clean file at array speed.

Nothing here applies scheduling rules (which job to keep, which estimate to use): that is
:mod:`olsctl.workload`. This module only turns text into numbers, with errors that name
the file, the line and the field. The bulk path (:meth:`SwfReader.table`) gives the same
numbers as the line parser, or declines (None) whenever a line might be malformed: the
line parser then gives the error, or the skip, exactly.
"""

from __future__ import annotations

import gzip
import io
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Iterator, NamedTuple

import numpy as np

from olsctl.errors import TraceError

#: The 18 SWF fields, 1-based as the format documents them.
FIELDS: tuple[str, ...] = (
    "job_number",
    "submit_time",
    "wait_time",
    "run_time",
    "allocated_processors",
    "average_cpu_time",
    "used_memory",
    "requested_processors",
    "requested_time",
    "requested_memory",
    "status",
    "user_id",
    "group_id",
    "executable",
    "queue",
    "partition",
    "preceding_job",
    "think_time",
)
N_FIELDS = len(FIELDS)

_FIRST_INT = re.compile(r"[-+]?\d+")
_BOM = b"\xef\xbb\xbf"
#: the only bytes the bulk path reads in job lines (tab, newline, printable ASCII)
_PLAIN_BYTES = b"\t\n" + bytes(range(32, 127))
#: 0-based fields the bulk path reads as floats from the start (often fractional); the
#: others are read as integers, and turn to floats when a value needs it
_FRACTIONAL = frozenset({5, 6, 9})
_NEGATIVE_ZERO = re.compile(rb"(?:^|[ \t\n])-0+(?:[ \t\n]|$)")
_NOT_AN_INT = re.compile(r"to int64 at row \d+, column (\d+)")
# "Key: value", but not a continuation line holding a URL ("http://...")
_HEADER_KEY = re.compile(r"([A-Za-z][A-Za-z0-9_]*):(?!//)(.*)")


class SwfRecord(NamedTuple):
    """One job line: its 1-based line number and its 18 fields as floats (-1 = unknown)."""

    line_no: int
    values: tuple[float, ...]

    def field(self, field_no: int) -> float:
        """Field by its 1-based SWF number."""
        return self.values[field_no - 1]


@dataclass
class SwfHeader:
    """Header comments (``; Key: value``); continuation lines are appended to the last key."""

    entries: dict[str, str] = field(default_factory=dict)

    def get(self, key: str) -> str | None:
        return self.entries.get(key)

    def first_int(self, key: str) -> int | None:
        """The first integer after the colon (``MaxNodes: 338 (batch partition)`` -> 338)."""
        value = self.entries.get(key)
        if value is None:
            return None
        match = _FIRST_INT.search(value)
        return int(match.group()) if match else None


def parse_line(text: str, line_no: int, source: str) -> SwfRecord:
    """Parse one job line into 18 floats; raise :class:`TraceError` naming line and field."""
    parts = text.split()
    if len(parts) != N_FIELDS:
        raise TraceError(
            f"{source}:{line_no}: expected {N_FIELDS} fields, found {len(parts)}"
        )
    values = []
    for i, token in enumerate(parts):
        try:
            values.append(float(token))
        except ValueError:
            raise TraceError(
                f"{source}:{line_no}: field {i + 1} ({FIELDS[i]}) is not a number: {token!r}"
            ) from None
    for i, v in enumerate(values):
        if v != v or v in (float("inf"), float("-inf")):
            raise TraceError(
                f"{source}:{line_no}: field {i + 1} ({FIELDS[i]}) is not finite: {parts[i]!r}"
            )
    return SwfRecord(line_no, tuple(values))


def open_text(path: Path) -> IO[str]:
    """Open a plain or gzipped text file (gzip detected by its magic bytes, not its name);
    a UTF-8 byte-order mark at the start is skipped."""
    try:
        with open(path, "rb") as probe:
            magic = probe.read(2)
    except OSError as exc:
        raise TraceError(f"{path}: cannot open: {exc.strerror or exc}") from None
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8-sig", errors="replace")
    return open(path, "rt", encoding="utf-8-sig", errors="replace")


@dataclass
class SwfReader:
    """Lazy reader: iterate to get job records; ``header`` fills in as header lines pass.

    With ``skip_bad_lines`` a malformed line is counted in ``bad_lines`` (with the first
    error kept in ``first_error``) instead of raising. :meth:`table` reads a clean file
    in bulk instead.
    """

    path: Path
    skip_bad_lines: bool = False
    header: SwfHeader = field(default_factory=SwfHeader)
    bad_lines: int = 0
    first_error: str | None = None

    @property
    def source(self) -> str:
        return self.path.name

    def __iter__(self) -> Iterator[SwfRecord]:
        last_key: str | None = None
        handle = open_text(self.path)
        try:
            with handle:
                for line_no, raw in enumerate(handle, start=1):
                    text = raw.strip()
                    if not text:
                        continue
                    if text.startswith(";"):
                        last_key = self._header_line(text[1:].strip(), last_key)
                        continue
                    try:
                        yield parse_line(text, line_no, self.source)
                    except TraceError as exc:
                        if not self.skip_bad_lines:
                            raise
                        self.bad_lines += 1
                        self.first_error = self.first_error or exc.args[0]
        except (OSError, EOFError, UnicodeError) as exc:
            raise TraceError(f"{self.source}: cannot read: {exc}") from None

    def table(self) -> np.ndarray | None:
        """Every job record at once, as an (n, 18) float array in file order, and the
        header filled in; the same numbers iterating would give. None (header untouched)
        when the file is not plainly clean: a job line that may be malformed, bytes other
        than printable ASCII in job lines, a file that cannot be read. Iterate then: that
        reports (or skips) each bad line as usual."""
        try:
            with open(self.path, "rb") as fh:
                data = fh.read()
            if data[:2] == b"\x1f\x8b":
                data = gzip.decompress(data)
        except Exception:  # (the line reader says what is wrong)
            return None
        split = _split_comments(data)
        if split is None:
            return None
        jobs, comments = split
        del data
        values = _parse_jobs(jobs)
        if values is None:
            return None
        header, last_key = SwfHeader(), None
        for text in comments:
            last_key = _header_line(header, text[1:].strip(), last_key)
        self.header = header
        return values

    def _header_line(self, body: str, last_key: str | None) -> str | None:
        return _header_line(self.header, body, last_key)


def _header_line(header: SwfHeader, body: str, last_key: str | None) -> str | None:
    """Add one header comment (its text after the ';') to ``header``; returns the key
    that continuation lines extend."""
    match = _HEADER_KEY.match(body)
    if match:
        key, value = match.group(1), match.group(2).strip()
        known = header.entries.get(key)
        header.entries[key] = value if known is None else f"{known}; {value}"
        return key
    if last_key is not None and body:
        header.entries[last_key] += " " + body
    return last_key


def _split_comments(data: bytes) -> tuple[bytes, list[str]] | None:
    """The job lines of a file's bytes (comment lines taken out, newlines as ``\\n``) and
    its comment lines (decoded and stripped, as the line reader sees them); None when a
    ';' sits inside a job line or a job line holds anything but printable ASCII."""
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    if b"\r" in data:  # universal newlines, as text files are read
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    comments: list[str] = []
    pieces: list[bytes] = []
    taken = 0
    at = data.find(b";")
    while at >= 0:
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        end = len(data) if end < 0 else end
        lead = data[start:at]
        if lead and not lead.decode("utf-8", "replace").isspace():
            return None  # not a comment line: a job line with a ';' is malformed
        comments.append(data[start:end].decode("utf-8", "replace").strip())
        pieces.append(data[taken:start])
        taken = end
        at = data.find(b";", end)
    jobs = b"".join((*pieces, data[taken:])) if pieces else data
    if jobs.translate(None, _PLAIN_BYTES):
        return None
    return jobs, comments


def _parse_jobs(jobs: bytes) -> np.ndarray | None:
    """Job lines (printable ASCII, no comments) as an (n, 18) float array: integers are
    read as such (fast, exact), other fields as floats; None if a line does not hold 18
    finite numbers (blank lines are skipped, as the line reader skips them)."""
    if not jobs or jobs.isspace():
        return np.empty((0, N_FIELDS))
    fractional = set(_FRACTIONAL)
    if b"-0" in jobs and _NEGATIVE_ZERO.search(jobs):  # "-0" is -0.0 to float(): all as floats
        fractional = set(range(N_FIELDS))
    while True:
        dtype = np.dtype([(f"f{k}", np.float64 if k in fractional else np.int64)
                          for k in range(N_FIELDS)])
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rows = np.loadtxt(io.BytesIO(jobs), dtype=dtype, comments=None, ndmin=1)
        except ValueError as exc:
            match = _NOT_AN_INT.search(str(exc))
            column = int(match.group(1)) - 1 if match else -1
            if not 0 <= column < N_FIELDS or column in fractional:
                return None  # (not a number, or not 18 fields: the line reader says which)
            fractional.add(column)
            continue
        break
    values = np.empty((N_FIELDS, rows.size))  # a column a row: (n, 18) column-major
    for k in range(N_FIELDS):
        values[k] = rows[f"f{k}"]
    del rows
    for k in fractional:
        if not np.isfinite(values[k]).all():
            return None
    return values.T

