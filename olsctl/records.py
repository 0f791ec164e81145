"""Records a run produces: one immutable record per job and time-series samples.

Metrics, output files and reports are computed from these afterwards. Samples are kept
in typed arrays as they are taken (numpy reads them without a conversion), and the job
records turn into columns in one go (:meth:`RunRecords.job_table`).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np


class JobRecord(NamedTuple):
    """One job as it ran; times in seconds of trace time."""

    job_id: int
    submit_s: float
    start_s: float
    end_s: float
    runtime_s: float
    procs: int
    estimate_s: float

    @property
    def wait_s(self) -> float:
        return self.start_s - self.submit_s


@dataclass
class TimeSeries:
    """Columnar samples taken after every scheduling pass (one per event instant), as
    typed arrays (``array('d')`` times, ``array('q')`` counts): lists to append to and
    read, buffers to numpy."""

    time_s: array = field(default_factory=lambda: array("d"))
    queue_len: array = field(default_factory=lambda: array("q"))
    busy_procs: array = field(default_factory=lambda: array("q"))
    active_procs: array = field(default_factory=lambda: array("q"))

    def __len__(self) -> int:
        return len(self.time_s)


@dataclass
class RunRecords:
    """Everything a main-simulator run recorded."""

    total_procs: int
    jobs: list[JobRecord]
    samples: TimeSeries
    #: ids of jobs still waiting when nothing was left to happen (they could never start)
    unstarted: list[int] = field(default_factory=list)
    #: job id -> seconds it ran beyond its full-clock runtime (throttled by a power
    #: limit; jobs not listed ran at full clock)
    stretch_s: dict[int, float] = field(default_factory=dict)
    _table: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def job_table(self) -> np.ndarray:
        """The job records as a float array, one row per job in job-id order and one
        column per :class:`JobRecord` field; made once (the records are final by then)."""
        key = (id(self.jobs), len(self.jobs))
        if self._table is None or self._table[0] != key:
            n = len(self.jobs)
            flat = np.fromiter((v for rec in self.jobs for v in rec), dtype=float,
                               count=n * len(JobRecord._fields))
            table = flat.reshape(n, len(JobRecord._fields))
            order = np.argsort(table[:, 0], kind="stable")
            if (np.diff(table[order, 0]) == 0).any():  # (ids repeat: as tuples sort)
                order = np.lexsort(table.T[::-1])
            self._table = (key, table[order])
        return self._table[1]
