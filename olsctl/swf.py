"""Standard Workload Format (SWF) reading: a pure line parser and a lazy, streaming reader.

Nothing here applies scheduling rules (which job to keep, which estimate to use): that is
:mod:`olsctl.workload`. This module only turns text into numbers, with errors that name
the file, the line and the field.
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Iterator, NamedTuple

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
    """Open a plain or gzipped text file (gzip detected by its magic bytes, not its name)."""
    try:
        with open(path, "rb") as probe:
            magic = probe.read(2)
    except OSError as exc:
        raise TraceError(f"{path}: cannot open: {exc.strerror or exc}") from None
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, "rt", encoding="utf-8", errors="replace")


@dataclass
class SwfReader:
    """Lazy reader: iterate to get job records; ``header`` fills in as header lines pass.

    With ``skip_bad_lines`` a malformed line is counted in ``bad_lines`` (with the first
    error kept in ``first_error``) instead of raising.
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

    def _header_line(self, body: str, last_key: str | None) -> str | None:
        match = _HEADER_KEY.match(body)
        if match:
            key, value = match.group(1), match.group(2).strip()
            known = self.header.entries.get(key)
            self.header.entries[key] = value if known is None else f"{known}; {value}"
            return key
        if last_key is not None and body:
            self.header.entries[last_key] += " " + body
        return last_key
