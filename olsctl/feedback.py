"""SLA feedback: the controller's what-ifs see only the jobs already in the system, while
users judge the slowdown their jobs had, window by window (a calendar week by default).
This module closes that loop: from what the main simulator has realized so far it
derives a capacity floor under the controller's candidates.

The rule (deterministic, and it reads only the past):

- **Realized metric** of a window at time ``t``: the controller's SLA metric over the
  jobs submitted in the window up to ``t``. A job that has started counts with its
  wait; one still waiting counts with the wait it has had so far (a lower bound of
  what it will have). Its bounded slowdown divides by its runtime once it has
  finished, by its runtime estimate before (what a scheduler knows).
- **Pressure** ``p``: the realized metric of the current window and of the previous
  one, blended by how much of the current window has gone by (at its start all the
  previous window's, at its end all its own), over the SLA's limit.
- **Floor** ``f = clip((p - relax_below) / (full_above - relax_below), 0, 1)``: the
  candidates the controller may choose are those whose active processors (and power
  cap, when it tries caps) are at least ``f`` of the way from the smallest candidate
  value to the largest. While the realized slowdown is low the controller chooses as
  without feedback; as it nears the SLA the machine may shrink less; from
  ``full_above`` x the limit on it keeps its largest setting until the slowdown falls
  again.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

import numpy as np

#: defaults of ``controller.sla.feedback``
RELAX_BELOW = 0.1
FULL_ABOVE = 0.5


@dataclass(frozen=True)
class FeedbackSettings:
    """``controller.sla.feedback`` as validated: pressures (realized metric / SLA limit)
    below ``relax_below`` set no floor; from ``full_above`` on, the floor is the largest
    setting."""

    relax_below: float = RELAX_BELOW
    full_above: float = FULL_ABOVE


class SlaFeedback:
    """The realized SLA metric of a run so far, and the floor it sets (see the module).

    ``submit_s``, ``runtime_s`` and ``estimate_s`` are the workload's jobs in the main
    state's job order; windows are ``window_s`` long from ``origin_s`` (the week origin
    the run's report uses)."""

    def __init__(self, settings: FeedbackSettings, metric: str, limit: float,
                 window_s: float, origin_s: float, submit_s, runtime_s, estimate_s) -> None:
        self.settings = settings
        self.metric = metric
        self.limit = float(limit)
        self.window_s = float(window_s)
        self.origin_s = float(origin_s)
        self._submit_list = [float(x) for x in submit_s]
        self._submit = np.asarray(submit_s, dtype=float)
        self._runtime = np.asarray(runtime_s, dtype=float)
        self._estimate = np.asarray(estimate_s, dtype=float)

    def window_at(self, now_s: float) -> tuple[int, float]:
        """The index of the window holding ``now_s`` and its start (seconds)."""
        k = math.floor((now_s - self.origin_s) / self.window_s)
        return k, self.origin_s + k * self.window_s

    def realized(self, start_s: list[float], now_s: float, lo_s: float,
                 hi_s: float) -> float | None:
        """The SLA metric, as realized by ``now_s``, of the jobs submitted in
        [``lo_s``, ``hi_s``) by then (None: no such job). ``start_s`` is the main state's
        start times (NaN: not started)."""
        submits = self._submit_list
        lo = bisect_left(submits, lo_s)
        hi = min(bisect_left(submits, hi_s, lo), bisect_right(submits, now_s, lo))
        if hi <= lo:
            return None
        submit = self._submit[lo:hi]
        start = np.asarray(start_s[lo:hi], dtype=float)
        started = start == start
        wait = np.where(started, start - submit, now_s - submit)
        if self.metric == "mean_wait_s":
            return float(wait.mean())
        if self.metric == "max_wait_s":
            return float(wait.max())
        runtime = self._runtime[lo:hi]
        done = started & (start + runtime <= now_s)
        bsld = 1.0 + wait / np.maximum(10.0, np.where(done, runtime, self._estimate[lo:hi]))
        if self.metric == "p95_bsld":
            return float(np.percentile(bsld, 95))
        return float(bsld.mean())

    def pressure(self, start_s: list[float], now_s: float) -> float:
        """The blended realized metric of the current and previous windows over the
        SLA's limit (0 before any job)."""
        _, w0 = self.window_at(now_s)
        cur = self.realized(start_s, now_s, w0, w0 + self.window_s)
        prev = self.realized(start_s, now_s, w0 - self.window_s, w0)
        if cur is None and prev is None:
            return 0.0
        if cur is None:
            cur = prev
        if prev is None:
            prev = cur
        gone = min(1.0, max(0.0, (now_s - w0) / self.window_s))
        return (gone * cur + (1.0 - gone) * prev) / self.limit

    def floor(self, pressure: float) -> float:
        """The floor (0: none, 1: the largest setting only) a pressure sets."""
        s = self.settings
        return min(1.0, max(0.0, (pressure - s.relax_below) / (s.full_above - s.relax_below)))


def allowed(values: list[float], floor: float) -> float:
    """The smallest value a candidate may have under ``floor``: ``floor`` of the way
    from the smallest of ``values`` to the largest."""
    lo, hi = min(values), max(values)
    return lo + floor * (hi - lo)
