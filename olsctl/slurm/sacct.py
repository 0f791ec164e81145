"""Reading sacct's pipe-separated text: the header line naming the fields, one line per
job allocation or job step, each line's fields (job ids, times, time limits, durations,
states), and the grouping of each allocation with its steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Iterable, NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from olsctl.errors import ConfigError, TraceError
from olsctl.swf import open_text

UNITS = {"cpus": "AllocCPUS", "nodes": "AllocNodes"}
#: Columns every dump needs (besides the one of the units).
REQUIRED = ("JobID", "Submit", "Start", "End", "State")
#: Columns read when present.
OPTIONAL = ("Elapsed", "AllocCPUS", "AllocNodes", "Timelimit", "User", "Account", "Group",
            "Partition")
#: SWF status (field 11) of each state a job can end in.
STATUS = {
    "COMPLETED": 1, "CANCELLED": 5, "FAILED": 0, "TIMEOUT": 0, "NODE_FAIL": 0,
    "OUT_OF_MEMORY": 0, "PREEMPTED": 0, "BOOT_FAIL": 0, "DEADLINE": 0, "REQUEUED": 0,
    "SPECIAL_EXIT": 0, "REVOKED": 0,
}
#: States of a job that has not ended yet.
ACTIVE = frozenset({
    "PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "STOPPED", "SIGNALING",
    "STAGE_OUT", "RESIZING", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD",
})
#: What follows when an optional column is missing (Account and Group stand in for each
#: other; AllocCPUS is not read with units nodes)
MISSING = {
    "Timelimit": "requested times are unknown (-1), so --estimates user runs on the exact "
                 "runtimes",
    "Elapsed": "End - Start is not checked against Elapsed (a wrong --tz goes unnoticed)",
    "AllocNodes": "no node counts (no MaxNodes in the SWF header)",
    "User": "users are unknown (-1)",
    "Account": "groups are unknown (-1): there is no Group column either",
    "Partition": "queues are unknown (-1)",
}
NO_LIMIT = frozenset({"UNLIMITED", "Partition_Limit", ""})
NO_TIME = frozenset({"Unknown", "None", ""})

# base id, then an array task (7, or [1-10%2] for a pending array), then a
# heterogeneous component (+1), then a step (.batch, .extern, .0)
_JOB_ID = re.compile(r"(\d+)(?:_(\d+|\[[^\]]*\]))?(?:\+(\d+))?(?:\.(\S+))?")
# one part of an array's task list: 5, 5-9 or 1-7:2 (a step)
_TASKS = re.compile(r"(\d+)(?:-(\d+)(?::(\d+))?)?")


class JobId(NamedTuple):
    """A parsed sacct ``JobID``; ``task`` is the array task (digits or ``[...]``)."""

    base: int
    task: str | None
    het: int | None
    step: str | None

    @property
    def allocation(self) -> tuple[int, str | None, int | None]:
        """The allocation this id belongs to (a step's job, or the job itself)."""
        return self.base, self.task, self.het

    @property
    def name(self) -> str:
        """The job's name in the key file: ``1234``, ``1234_7`` (a het job: its base)."""
        return f"{self.base}" if self.task is None else f"{self.base}_{self.task}"

    @property
    def tasks(self) -> int:
        """How many jobs the id stands for: the tasks of a pending array line
        (``1234_[5-9]``: 5), else 1."""
        if self.task is None or not self.task.startswith("["):
            return 1
        return sum(len(r) for r in array_tasks(self.task))

    def sort_key(self) -> tuple[int, int]:
        return self.base, int(self.task) if self.task and self.task.isdigit() else -1


class SacctRow(NamedTuple):
    """One line of the dump: its 1-based line number, parsed id and raw fields."""

    line_no: int
    job_id: JobId
    fields: dict[str, str]


@dataclass
class JobLines:
    """One job's lines: its allocation line(s) (several for a heterogeneous job) and
    the steps folded into them."""

    allocations: list[SacctRow]
    steps: int = 0


# -- single fields ----------------------------------------------------------------------


def parse_job_id(text: str) -> JobId:
    """``1234``, ``1234_7``, ``1234_[1-10]``, ``1234+1``, ``1234.batch``, ``1234_7.0``...;
    raises ValueError for anything else."""
    match = _JOB_ID.fullmatch(text.strip())
    if match is None:
        raise ValueError(text)
    base, task, het, step = match.groups()
    if task is not None and task.startswith("["):
        array_tasks(task)  # (checked here: the line is named if it is malformed)
    return JobId(int(base), task, None if het is None else int(het), step)


def array_tasks(text: str) -> list[range]:
    """The task numbers of a pending array line's task list, as sacct prints it:
    ``[5-9]``, ``[1,3,5-7]``, ``[1-7:2]`` (a step), with a ``%4`` throttle (the most
    tasks run at once) at the end; ValueError for anything else."""
    inner = text[1:-1] if text.startswith("[") and text.endswith("]") else None
    if not inner:
        raise ValueError(text)
    inner, _pct, limit = inner.partition("%")
    if _pct and not limit.isdigit():
        raise ValueError(text)
    ranges = []
    for part in inner.split(","):
        match = _TASKS.fullmatch(part)
        if match is None:
            raise ValueError(text)
        first, last, step = (None if g is None else int(g) for g in match.groups())
        last = first if last is None else last
        if last < first or step == 0:
            raise ValueError(text)
        ranges.append(range(first, last + 1, step or 1))
    return ranges


def zone_of(name: str) -> ZoneInfo:
    """The IANA time zone ``name``; :class:`ConfigError` if unknown."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"command line: --tz: unknown time zone {name!r} (an IANA name "
                          f"such as UTC or Europe/Paris)") from None


def local_epochs(text: str, zone: ZoneInfo) -> tuple[float, float] | None:
    """UTC epoch seconds of a sacct time, as (first, second) occurrence of that local
    time in ``zone`` (equal unless the clock went back over it); an explicit offset wins.
    None for ``Unknown``/``None``/empty; ValueError for anything else."""
    text = text.strip()
    if text in NO_TIME:
        return None
    if "T" not in text and " " not in text:
        raise ValueError(text)
    stamp = datetime.fromisoformat(text)
    if stamp.tzinfo is not None:
        epoch = stamp.timestamp()
        return epoch, epoch
    return (stamp.replace(tzinfo=zone, fold=0).timestamp(),
            stamp.replace(tzinfo=zone, fold=1).timestamp())


def _after(epochs: tuple[float, float], earlier_s: float | None) -> float:
    """The first occurrence, or the second if only that one is not before ``earlier_s``."""
    first, second = epochs
    if earlier_s is not None and first < earlier_s <= second:
        return second
    return first


def _clock_s(text: str, single_unit_s: int | None) -> float:
    """``[D-]H:M:S``, ``M:S``, ``D-H``, ``D-H:M`` (and a bare number times
    ``single_unit_s`` when given) in seconds; ValueError otherwise."""
    days, dash, rest = text.rpartition("-")
    parts = rest.split(":")
    if not all(re.fullmatch(r"\d+(\.\d+)?", p) for p in parts) or len(parts) > 3:
        raise ValueError(text)
    if dash and not days.isdigit():
        raise ValueError(text)
    values = [float(p) for p in parts]
    if days:  # D-H, D-H:M, D-H:M:S
        scale = (3600, 60, 1)
    elif len(parts) == 1:
        if single_unit_s is None:
            raise ValueError(text)
        scale = (single_unit_s,)
    else:  # M:S or H:M:S
        scale = (60, 1) if len(parts) == 2 else (3600, 60, 1)
    return int(days or 0) * 86400 + sum(v * s for v, s in zip(values, scale))


def parse_time_limit_s(text: str) -> float:
    """Timelimit in seconds: ``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``,
    ``D-HH:MM:SS``; -1 for ``UNLIMITED``, ``Partition_Limit`` or empty."""
    text = text.strip()
    return -1.0 if text in NO_LIMIT else _clock_s(text, 60)


def parse_duration_s(text: str) -> float:
    """Elapsed ``[D-]HH:MM:SS[.frac]`` (or ``MM:SS``) in seconds."""
    return _clock_s(text.strip(), None)


def state_of(text: str) -> str:
    """The state's first word (``CANCELLED by 123`` -> ``CANCELLED``)."""
    words = text.split()
    return words[0] if words else ""


# -- lines ------------------------------------------------------------------------------


# a header line of sacct's output without --parsable2 (fixed width, or another
# delimiter): it names JobID but holds no '|'
_NO_PIPES = re.compile(r"[^|]*\bjobid\b[^|]*", re.IGNORECASE)


def is_sacct(path: Path) -> bool:
    """A sacct dump: a ``.sacct`` name, or a first line that is a pipe-separated header
    with a ``JobID`` column (or starts with ``JobID`` and has no '|': a dump made
    without --parsable2, which :func:`parse_header` then refuses with a hint)."""
    path = Path(path)
    if path.suffix == ".sacct" or path.name.endswith(".sacct.gz"):
        return True
    try:
        with open_text(path) as fh:
            first = fh.readline(4096)
    except (TraceError, OSError, EOFError, UnicodeError):
        return False
    if _NO_PIPES.fullmatch(first) and re.match(r"\s*jobid\b", first, re.IGNORECASE):
        return True
    return "|" in first and "jobid" in {c.strip().lower() for c in first.split("|")}


def parse_header(text: str, source: str, units: str = "cpus") -> list[str]:
    """Column names of the header line, in sacct's spelling; :class:`TraceError` naming
    the missing required columns, or asking for --parsable2 when the line names JobID
    but holds no '|'."""
    if units not in UNITS:
        raise ConfigError(f"command line: --units: must be cpus or nodes (got {units!r})")
    raw = [c.strip() for c in text.rstrip("\n").split("|")]
    if raw and raw[-1] == "" and len(raw) > 1:  # --parsable ends every line with '|'
        raw.pop()
    canonical = {c.lower(): c for c in REQUIRED + OPTIONAL}
    columns = [canonical.get(c.lower(), c) for c in raw]
    if "JobID" not in columns and _NO_PIPES.fullmatch(text):
        raise TraceError(f"{source}:1: a header with JobID but no '|' (sacct's fixed-width "
                         f"output, or another delimiter): dump with sacct --parsable2")
    if "JobID" not in columns:
        raise TraceError(f"{source}:1: not a sacct --parsable2 header (no JobID column; "
                         f"run sacct without --noheader): {text.strip()[:80]!r}")
    need = REQUIRED + (UNITS[units],)
    missing = [c for c in need if c not in columns]
    if missing:
        raise TraceError(f"{source}:1: header lacks column(s) {', '.join(missing)} "
                         f"(add them to sacct --format)")
    return columns


def missing_columns(columns: list[str], units: str = "cpus") -> list[str]:
    """One line per optional column the header lacks that the conversion would read:
    the column, and what follows without it (:data:`MISSING`)."""
    have = set(columns)
    if "Group" in have:
        have.add("Account")
    if units == "nodes":
        have.add("AllocNodes")  # (required then)
    return [f"no {column} column: {what}" for column, what in MISSING.items()
            if column not in have]


def parse_row(text: str, columns: list[str], line_no: int, source: str) -> SacctRow:
    """One data line split into named fields, its JobID parsed."""
    values = text.rstrip("\n").split("|")
    if len(values) == len(columns) + 1 and values[-1] == "":
        values.pop()
    if len(values) != len(columns):
        raise TraceError(f"{source}:{line_no}: expected {len(columns)} fields (as the "
                         f"header), found {len(values)}")
    fields = dict(zip(columns, values))
    try:
        job_id = parse_job_id(fields["JobID"])
    except ValueError:
        raise TraceError(f"{source}:{line_no}: field JobID: not a Slurm job id: "
                         f"{fields['JobID']!r}") from None
    return SacctRow(line_no, job_id, fields)


def group_lines(rows: Iterable[SacctRow]) -> tuple[list[JobLines], int]:
    """Jobs in the order their first line appears, and the number of steps whose
    allocation line is not in the dump. A step joins the nearest allocation above it
    with the same id; a heterogeneous component joins the open job of its base id
    unless that job has this component already (then it starts the next attempt)."""
    jobs: list[JobLines] = []
    last_alloc: dict[tuple, JobLines] = {}
    het_open: dict[int, JobLines] = {}
    orphans = 0
    for row in rows:
        jid = row.job_id
        if jid.step is not None:
            owner = last_alloc.get(jid.allocation)
            if owner is None:
                orphans += 1
            else:
                owner.steps += 1
            continue
        job = None
        if jid.het is not None:
            job = het_open.get(jid.base)
            if job is not None and any(a.job_id.het == jid.het for a in job.allocations):
                job = None
        if job is None:
            job = JobLines([])
            jobs.append(job)
            if jid.het is not None:
                het_open[jid.base] = job
        job.allocations.append(row)
        last_alloc[jid.allocation] = job
    return jobs, orphans
