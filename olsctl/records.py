"""Records a run produces: one immutable record per job and time-series samples.

Metrics, output files and reports are computed from these afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


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
    """Columnar samples taken after every scheduling pass (one per event instant)."""

    time_s: list[float] = field(default_factory=list)
    queue_len: list[int] = field(default_factory=list)
    busy_procs: list[int] = field(default_factory=list)
    active_procs: list[int] = field(default_factory=list)

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
