"""SLA windows as the run goes (:class:`SlaWindows`), and what places them: the
trace's calendar (:func:`trace_calendar`). The windows are those of summary.json's
``weekly`` rows: ``window_s`` long (a calendar week by default) from the week origin
(:func:`olsctl.metrics.week_origin`), and a job belongs to the window it was submitted in;
the SLA is the run config's (:meth:`olsctl.config.RunConfig.sla_spec`: the controller's, or
mean_bsld <= 200). Each sample carries

- ``window_bsld``: the mean bounded slowdown of the jobs submitted in the current window
  (the one holding the sample's time) that have started so far; null if none has;
- ``windows_judged`` / ``windows_kept``: windows judged so far, and how many kept the SLA
  (its metric of the window's jobs within its bound). A window is judged once its
  verdict can no longer change: when it has ended and every job submitted in it has
  started, on all those jobs, as summary.json's ``weekly`` rows judge it. Under a backlog
  the count so lags behind the windows that have ended, but it never has to be taken
  back, and the last sample's (after the run) is summary.json's ``sla``. (Judging a
  window at its end on the jobs started by then would be timelier but far kinder: the
  jobs still waiting are the ones that break it.) Windows without jobs are not judged.

Each sample only adds the jobs started since the one before (``sim.jobs`` grows in start
order) to running sums per window, and looks at the windows that have ended but are not
judged yet, so the cost per sample does not grow with the run.
"""

from __future__ import annotations

import math
from bisect import bisect_left

from olsctl.errors import OlsctlError
from olsctl.metrics import WEEK_S, SlaSpec, job_bsld
from olsctl.slurm import SacctReader, is_sacct
from olsctl.swf import SwfReader
from olsctl.workload import resolve_trace


class SlaWindows:
    """Judges a run's SLA windows as it goes (module docstring: when and how).

    ``submit_s`` are the run's submit times, ascending (:class:`olsctl.state.SimState`'s).
    Feed :meth:`add` every started job, in start order; call :meth:`close_until` with the
    sample's time before reading :attr:`kept` / :attr:`judged`."""

    def __init__(self, sla: SlaSpec, origin_s: float, submit_s: list[float]) -> None:
        self.sla = sla
        self.origin_s = origin_s
        self.submit_s = submit_s
        self.kept = self.judged = 0
        #: per window with a started job: [jobs started, sum of their bounded slowdowns,
        #: sum of waits (s), max wait (s), their bounded slowdowns (p95 only)]
        self._started: dict[int, list] = {}
        #: windows that have ended and are not judged yet: their number of jobs
        self._waiting: dict[int, int] = {}
        self._first_job = 0  # the first job of the windows that have not ended

    def window_of(self, time_s: float) -> int:
        """The window holding ``time_s`` (0: the one of the week origin)."""
        return int((time_s - self.origin_s) // self.sla.window_s)

    def add(self, submit_s: float, start_s: float, runtime_s: float) -> None:
        """A job that has started."""
        w = self.window_of(submit_s)
        acc = self._started.get(w)
        if acc is None:
            acc = self._started[w] = [0, 0.0, 0.0, 0.0,
                                      [] if self.sla.metric == "p95_bsld" else None]
        wait = start_s - submit_s
        bsld = job_bsld(wait, runtime_s)
        acc[0] += 1
        acc[1] += bsld
        acc[2] += wait
        acc[3] = max(acc[3], wait)
        if acc[4] is not None:
            acc[4].append(bsld)

    def mean_bsld(self, time_s: float) -> float | None:
        """Mean bounded slowdown of the started jobs of the window holding ``time_s``."""
        acc = self._started.get(self.window_of(time_s))
        return acc[1] / acc[0] if acc else None

    def close_until(self, time_s: float) -> None:
        """Judge the windows that ended at or before ``time_s`` (``math.inf``: every
        window) and all of whose jobs have started."""
        last = self.window_of(time_s) if math.isfinite(time_s) else math.inf
        submit, n = self.submit_s, len(self.submit_s)
        while self._first_job < n:  # the windows (with jobs) that ended since the last call
            w = self.window_of(submit[self._first_job])
            if w >= last:
                break
            end = self.origin_s + (w + 1) * self.sla.window_s
            stop = max(bisect_left(submit, end, self._first_job), self._first_job + 1)
            self._waiting[w] = stop - self._first_job
            self._first_job = stop
        everything = last == math.inf  # the run is over: every job has started
        for w in [w for w, jobs in self._waiting.items()
                  if w in self._started and (everything or self._started[w][0] >= jobs)]:
            del self._waiting[w]
            self._judge(self._started[w])

    def _judge(self, acc: list) -> None:
        n, bsld_sum, wait_sum, wait_max, bslds = acc
        metric = self.sla.metric
        value = (bsld_sum / n if metric == "mean_bsld"
                 else wait_sum / n if metric == "mean_wait_s"
                 else wait_max if metric == "max_wait_s"
                 else _percentile(bslds, 95.0))
        self.judged += 1
        self.kept += value <= self.sla.max


def _percentile(values: list[float], q: float) -> float:
    """numpy's default (linear) percentile, as summary.json's ``p95_bsld``."""
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=float), q))


def trace_calendar(config) -> tuple[int | None, int | None]:
    """``UnixStartTime`` and ``TimeZone`` from the header of the trace of ``config`` (a
    :class:`olsctl.config.RunConfig`): what places its calendar weeks. (None, None) when the
    trace cannot be read (the run itself then says why)."""
    try:
        path = resolve_trace(config.trace, config.base_dir)
        reader = (SacctReader if is_sacct(path) else SwfReader)(path, skip_bad_lines=True)
        for _record in reader:  # the header is the comment lines before the first job
            break
    except OlsctlError:
        return None, None
    return reader.header.first_int("UnixStartTime"), reader.header.first_int("TimeZone")


def window_unit(window_s: float) -> str:
    """What one SLA window is called on the dashboard: week, day or window."""
    return "week" if window_s == WEEK_S else "day" if window_s == 86400 else "window"
