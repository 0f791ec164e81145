"""Convert a Slurm accounting dump (``sacct --parsable2``) into an SWF workload.

What belongs here: reading sacct's pipe-separated text (a header line naming the fields,
then one line per job allocation or job step), grouping each allocation with its steps,
and mapping each job to one SWF record; plus the converter behind ``olsctl convert
slurm`` and :class:`SacctReader`, through which ``olsctl run --trace jobs.sacct`` reads
the same records in memory. Scheduling rules (which SWF records to keep) stay in
:mod:`olsctl.workload`; SWF text is parsed by :mod:`olsctl.swf` only.

Choices, so that each line of the log has one meaning:

- One SWF job per job allocation. Steps (``1234.batch``, ``1234.extern``, ``1234.0``)
  are folded into the allocation they belong to (the nearest allocation line above
  them with the same id), never jobs of their own. Each array task (``1234_7``) is a
  job. A heterogeneous job's components (``1234+0``, ``1234+1``, ...) become ONE job:
  processors = the sum of the components', submit and start = the earliest, end = the
  latest, time limit = the largest (-1 if any is unknown or unlimited), user, group and
  partition of component ``+0``, and the state of the first component that did not
  complete (COMPLETED when all did). Slurm starts a heterogeneous job's components
  together, so the sum is what the job held.
- Jobs that never ran (no Start, or nothing allocated: a pending job, a pending array
  line ``1234_[1-10]``, a job cancelled while pending) and jobs without an end (still
  running when sacct ran) are dropped and counted by reason; an array line counts each
  task it lists (``1234_[1,3,5-7%2]``: 5 jobs). A requeued job listed with
  ``--duplicates`` gives one job per attempt that ran (the earlier ones in state
  REQUEUED, status 0).
- Times are converted to UTC epoch seconds first: sacct prints the cluster's local time
  without a zone, read in the zone given (an IANA name, default UTC); a time carrying
  an offset (``2024-03-10T01:59:59-05:00``) is read as such. A local time that occurs
  twice (the hour repeated when clocks go back) is taken as its first occurrence unless
  that would put it before the job's previous time (submit, then start).
- SWF fields: job numbers 1..n in submit order (ties by the Slurm id), submit times in
  seconds from the first submission (the header's ``UnixStartTime``), wait = start -
  submit, runtime = end - start, processors allocated = requested = AllocCPUS (or
  AllocNodes with units ``nodes``), requested time = Timelimit in seconds (-1 for
  UNLIMITED, Partition_Limit or none), status 1 completed, 5 cancelled, 0 any other end
  (failed, timeout, node failure, out of memory, preempted, requeued, ...), user,
  group (the Account, else the Group column) and queue (the partition) numbered 1..k in
  order of first appearance; every other field -1.

A dump that is not UTF-8 is read as Latin-1 (one character a byte, so names that differ
in any byte stay apart), and the converter says so; it also names the optional columns a
dump lacks, with what follows (no Timelimit: no requested times, so user estimates are the
runtimes). A header naming JobID without a '|' is refused with a hint: dump with
``sacct --parsable2``.

The parts: :mod:`~olsctl.slurm.sacct` (sacct's text: lines, fields, grouping),
:mod:`~olsctl.slurm.jobs` (one SWF job per Slurm job) and :mod:`~olsctl.slurm.converter`
(the converter and :class:`SacctReader`). The names other modules use are importable
from ``olsctl.slurm``, each part imported at the first use of one of its names: reading
an SWF log asks :func:`is_sacct` only, and loads no more than its part.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # at run time, imported on use by __getattr__
    from olsctl.slurm.converter import Conversion, SacctReader, convert, convert_lines
    from olsctl.slurm.jobs import Dropped, SlurmJob, job_record, swf_line
    from olsctl.slurm.sacct import (ACTIVE, NO_LIMIT, NO_TIME, OPTIONAL, REQUIRED, STATUS,
                                    UNITS, JobId, JobLines, SacctRow, group_lines, is_sacct,
                                    local_epochs, parse_duration_s, parse_header, parse_job_id,
                                    parse_row, parse_time_limit_s, state_of, zone_of)

__all__ = [
    "ACTIVE", "NO_LIMIT", "NO_TIME", "OPTIONAL", "REQUIRED", "STATUS", "UNITS", "Conversion",
    "Dropped", "JobId", "JobLines", "SacctReader", "SacctRow", "SlurmJob", "convert",
    "convert_lines", "group_lines", "is_sacct", "job_record", "local_epochs",
    "parse_duration_s", "parse_header", "parse_job_id", "parse_row", "parse_time_limit_s",
    "state_of", "swf_line", "zone_of",
]

#: the part (module) of each name in :data:`__all__`
_PART_OF = {
    **dict.fromkeys(["Conversion", "SacctReader", "convert", "convert_lines"], "converter"),
    **dict.fromkeys(["Dropped", "SlurmJob", "job_record", "swf_line"], "jobs"),
    **dict.fromkeys(["ACTIVE", "NO_LIMIT", "NO_TIME", "OPTIONAL", "REQUIRED", "STATUS", "UNITS",
                     "JobId", "JobLines", "SacctRow", "group_lines", "is_sacct", "local_epochs",
                     "parse_duration_s", "parse_header", "parse_job_id", "parse_row",
                     "parse_time_limit_s", "state_of", "zone_of"], "sacct"),
}


def __getattr__(name: str) -> Any:
    """A name of :data:`__all__`, from its part (imported now if not yet)."""
    if name not in _PART_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"olsctl.slurm.{_PART_OF[name]}"), name)
