"""One SWF job per Slurm job: an allocation's lines (several for a heterogeneous job)
checked and combined into a :class:`SlurmJob`, or why the job is left out
(:class:`Dropped`), and its 18-field SWF record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable
from zoneinfo import ZoneInfo

from olsctl.errors import TraceError
from olsctl.slurm.sacct import (ACTIVE, STATUS, UNITS, JobLines, SacctRow, _after,
                                local_epochs, parse_duration_s, parse_time_limit_s, state_of)


@dataclass(frozen=True)
class SlurmJob:
    """A job that ran, times in UTC epoch seconds; ``procs`` in the chosen units;
    ``limit_s`` -1 when unknown or unlimited; names '' when unknown."""

    name: str
    line_no: int
    sort_key: tuple[int, int]
    submit_s: float
    start_s: float
    end_s: float
    procs: int
    nodes: int
    limit_s: float
    status: int
    user: str
    group: str
    partition: str
    elapsed_mismatch: bool = False


@dataclass(frozen=True)
class Dropped:
    """A job left out of the SWF, and why (``pending``, ``cancelled before start``,
    ``never started``, ``still running``); ``tasks``: the jobs it stands for (a pending
    array line ``1234_[5-9]``: each of its 5 tasks)."""

    name: str
    reason: str
    tasks: int = 1


def _field_error(source: str, row: SacctRow, column: str, what: str) -> TraceError:
    return TraceError(f"{source}:{row.line_no}: field {column}: {what}: "
                      f"{row.fields.get(column, '')!r}")


def _count(row: SacctRow, column: str, source: str) -> int:
    text = row.fields.get(column, "").strip()
    if text == "":
        return 0
    if not text.isdigit():
        raise _field_error(source, row, column, "not a whole number >= 0")
    return int(text)


def _time(row: SacctRow, column: str, zone: ZoneInfo, source: str,
          earlier_s: float | None) -> float | None:
    try:
        epochs = local_epochs(row.fields[column], zone)
    except ValueError:
        raise _field_error(source, row, column, "not a time") from None
    return None if epochs is None else _after(epochs, earlier_s)


@dataclass(frozen=True)
class _Component:
    row: SacctRow
    state: str
    submit_s: float
    start_s: float | None
    end_s: float | None
    procs: int
    nodes: int
    limit_s: float
    elapsed_mismatch: bool


def _component(row: SacctRow, zone: ZoneInfo, units: str, source: str) -> _Component:
    """One allocation line's fields, checked; times in UTC epoch seconds."""
    state = state_of(row.fields["State"])
    if state not in STATUS and state not in ACTIVE:
        raise _field_error(source, row, "State", "unknown job state")
    submit = _time(row, "Submit", zone, source, None)
    if submit is None:
        raise _field_error(source, row, "Submit", "not a time")
    start = _time(row, "Start", zone, source, submit)
    end = _time(row, "End", zone, source, start)
    procs = _count(row, UNITS[units], source)
    nodes = _count(row, "AllocNodes", source)
    try:
        limit = parse_time_limit_s(row.fields.get("Timelimit", ""))
    except ValueError:
        raise _field_error(source, row, "Timelimit", "not a time limit") from None
    ran = start is not None and procs > 0 and state != "PENDING"
    if ran and start < submit:
        raise _field_error(source, row, "Start", "before Submit (are the times in "
                           "another zone? see --tz)")
    if ran and end is not None and end < start:
        raise _field_error(source, row, "End", "before Start (are the times in "
                           "another zone? see --tz)")
    mismatch = False
    elapsed = row.fields.get("Elapsed", "").strip()
    if elapsed:
        try:
            elapsed_s = parse_duration_s(elapsed)
        except ValueError:
            raise _field_error(source, row, "Elapsed", "not a duration") from None
        mismatch = ran and end is not None and abs((end - start) - elapsed_s) > 1
    return _Component(row, state, submit, start if ran else None, end, procs, nodes,
                      limit, mismatch)


def job_record(lines: JobLines, zone: ZoneInfo, units: str, source: str) -> SlurmJob | Dropped:
    """One job from its lines: a :class:`SlurmJob` if it ran to an end, else why not."""
    parts = [_component(row, zone, units, source) for row in lines.allocations]
    lead = parts[0]
    name = lead.row.job_id.name
    for p in parts:
        if p.start_s is None:
            reason = ("pending" if p.state in ACTIVE else
                      "cancelled before start" if p.state == "CANCELLED" else "never started")
            return Dropped(name, reason, lead.row.job_id.tasks)
    for p in parts:
        if p.state in ACTIVE or p.end_s is None:
            return Dropped(name, "still running", lead.row.job_id.tasks)
    state = next((p.state for p in parts if p.state != "COMPLETED"), "COMPLETED")
    limits = [p.limit_s for p in parts]
    fields = lead.row.fields
    return SlurmJob(
        name=name,
        line_no=lead.row.line_no,
        sort_key=lead.row.job_id.sort_key(),
        submit_s=min(p.submit_s for p in parts),
        start_s=min(p.start_s for p in parts),  # type: ignore[type-var]
        end_s=max(p.end_s for p in parts),  # type: ignore[type-var]
        procs=sum(p.procs for p in parts),
        nodes=sum(p.nodes for p in parts),
        limit_s=-1.0 if min(limits) < 0 else max(limits),
        status=STATUS[state],
        user=fields.get("User", "").strip(),
        group=(fields.get("Account", "").strip() or fields.get("Group", "").strip()),
        partition=fields.get("Partition", "").strip(),
        elapsed_mismatch=any(p.elapsed_mismatch for p in parts),
    )


def _numbering(names: Iterable[str]) -> dict[str, int]:
    """Names numbered 1..k in order of first appearance ('' stays unknown)."""
    ids: dict[str, int] = {}
    for name in names:
        if name and name not in ids:
            ids[name] = len(ids) + 1
    return ids


def swf_line(number: int, job: SlurmJob, t0_s: float, user_id: int, group_id: int,
             queue_id: int) -> str:
    """The 18-field SWF record of ``job`` (times rounded to whole seconds)."""
    limit = -1 if job.limit_s < 0 else round(job.limit_s)
    fields = (number, round(job.submit_s - t0_s), round(job.start_s - job.submit_s),
              round(job.end_s - job.start_s), job.procs, -1, -1, job.procs, limit, -1,
              job.status, user_id, group_id, -1, queue_id, -1, -1, -1)
    return " ".join(str(f) for f in fields)


def _peak(jobs: list[SlurmJob], size: str) -> int:
    """The most processors (or nodes) busy at once in the log; ends before starts."""
    events = sorted([(j.end_s, -getattr(j, size)) for j in jobs]
                    + [(j.start_s, getattr(j, size)) for j in jobs])
    busy = peak = 0
    for _t, delta in events:
        busy += delta
        peak = max(peak, busy)
    return peak
