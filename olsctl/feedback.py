"""SLA feedback: the controller's what-ifs see only the jobs already in the system, while
users judge the slowdown their jobs had, window by window (a calendar week by default).
This module closes that loop: from what the main simulator has realized so far it sets
the limit each tick's what-ifs must meet.

The rule (deterministic, and it reads only the past):

- **Realized metric** of a window at time ``t``: the controller's SLA metric over the
  jobs submitted in the window up to ``t``. A job that has started counts with its
  wait; one still waiting counts with the wait it has had so far (a lower bound of
  what it will have). Its bounded slowdown divides by its runtime once it has
  finished, by its runtime estimate before (what a scheduler knows).
- **Pressure** ``p``: the realized metric of the current window and of the previous
  one, blended by how much of the current window has gone by (at its start all the
  previous window's, at its end all its own), over the SLA's limit.
- **Backlog** (with ``backlog`` on): the work waiting (processors x estimates of the
  jobs not started) over what all the processors do in a window. The pressure is then
  the larger of the two: a queue that a smaller machine leaves behind breaks the next
  busy window, although the jobs waiting in it, long ones mostly, have a small slowdown
  so far.
- **Limit** ``SLA x (1 - clip((p - relax_below) / (full_above - relax_below), 0, 1))``,
  and never below the metric's least value (1 for a bounded slowdown, 0 for a wait).
  While the realized slowdown stays below ``relax_below`` x the SLA the what-ifs must
  meet the SLA itself (the open-loop rule); above it the limit falls linearly, to its
  least value from ``full_above`` x the SLA on. Under a low limit few candidates meet
  it, and when none does the controller takes the one whose what-if comes closest (as
  in open loop), so the machine grows until the realized slowdown falls again.

The defaults (0.05, 0.3) aim the realized slowdown well below the SLA: the room left
covers what the what-ifs cannot see (the jobs still to come in the window, and how much
a week's mean moves with small changes in the schedule).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from operator import itemgetter

import numpy as np

from olsctl.metrics import BSLD_BOUND_S
from olsctl.policies.core.jit import compiled, kernel, warm_up
from olsctl.policies.core.bound import MEAN_BSLD, divisor

#: defaults of ``controller.sla.feedback``
RELAX_BELOW = 0.05
FULL_ABOVE = 0.3


#: the SLA metrics a window's realized value is taken in, by the code
#: :func:`window_metric` takes
FB_MEAN_BSLD, FB_P95_BSLD, FB_MEAN_WAIT, FB_MAX_WAIT = 0, 1, 2, 3
FEEDBACK_METRICS = {"mean_bsld": FB_MEAN_BSLD, "p95_bsld": FB_P95_BSLD,
                    "mean_wait_s": FB_MEAN_WAIT, "max_wait_s": FB_MAX_WAIT}


@dataclass(frozen=True)
class FeedbackSettings:
    """``controller.sla.feedback`` as validated: under a pressure (realized metric / SLA
    limit, or with ``backlog`` the waiting work's share of a window of the whole machine
    if larger) of ``relax_below`` the what-ifs must meet the SLA's own limit; from
    ``full_above`` on, the metric's least value."""

    relax_below: float = RELAX_BELOW
    full_above: float = FULL_ABOVE
    backlog: bool = False


class SlaFeedback:
    """The realized SLA metric of a run so far, and the limit it sets (see the module).

    ``submit_s``, ``runtime_s`` and ``estimate_s`` are the workload's jobs in the main
    state's job order; windows are ``window_s`` long from ``origin_s`` (the week origin
    the run's report uses)."""

    def __init__(self, settings: FeedbackSettings, metric: str, limit: float,
                 window_s: float, origin_s: float, submit_s, runtime_s, estimate_s) -> None:
        self.settings = settings
        self.metric = metric
        self._code = FEEDBACK_METRICS[metric]
        self.limit = float(limit)
        self.window_s = float(window_s)
        self.origin_s = float(origin_s)
        self._submit_list = [float(x) for x in submit_s]
        self._submit = np.asarray(submit_s, dtype=float)
        self._runtime = np.asarray(runtime_s, dtype=float)
        self._estimate = np.asarray(estimate_s, dtype=float)
        #: a window's realized metric once every job of it has finished, by window index
        self._final: dict[int, float] = {}
        #: the start times read so far from the list ``_read_from`` (NaN: not started
        #: when last read; a start, once set, never changes, so only those still NaN are
        #: read again)
        self._start = np.full(self._submit.size, np.nan)
        self._read_from: list[float] | None = None
        #: the state's start order, if followed (see :meth:`follow`), and how much of it
        #: has been read
        self._order: list[int] | None = None
        self._order_at = 0

    def window_at(self, now_s: float) -> tuple[int, float]:
        """The index of the window holding ``now_s`` and its start (seconds)."""
        k = math.floor((now_s - self.origin_s) / self.window_s)
        return k, self.origin_s + k * self.window_s

    def realized(self, start_s: list[float], now_s: float, lo_s: float,
                 hi_s: float) -> float | None:
        """The SLA metric, as realized by ``now_s``, of the jobs submitted in
        [``lo_s``, ``hi_s``) by then (None: no such job). ``start_s`` is the main state's
        start times (NaN: not started)."""
        lo, hi = self._range(now_s, lo_s, hi_s)
        return None if hi <= lo else self._metric(start_s, now_s, lo, hi, False)[0]

    def _range(self, now_s: float, lo_s: float, hi_s: float) -> tuple[int, int]:
        """The jobs submitted in [lo_s, hi_s) by ``now_s``, as an index range."""
        submits = self._submit_list
        lo = bisect_left(submits, lo_s)
        return lo, min(bisect_left(submits, hi_s, lo), bisect_right(submits, now_s, lo))

    def _metric(self, start_s: list[float], now_s: float, lo: int, hi: int,
                final: bool = True) -> tuple[float, bool]:
        """The SLA metric of jobs ``lo:hi`` as realized by ``now_s``, and whether it is
        final (every one of them has finished; with ``final`` False, not asked: False)."""
        start = self._starts(start_s, lo, hi)
        values = np.empty(hi - lo)
        value, done = compiled().window_metric(
            self._code, start, self._submit[lo:hi], self._runtime[lo:hi],
            self._estimate[lo:hi], float(now_s), BSLD_BOUND_S, values)
        if self._code == FB_P95_BSLD:
            value = float(np.percentile(values, 95))
        return value, final and done

    def _starts(self, start_s: list[float], lo: int, hi: int) -> np.ndarray:
        """``start_s[lo:hi]`` as an array (a view of the known starts: read only),
        reading only the entries not yet known: with the state's start order
        (:meth:`follow`), those started since the last call."""
        known = self._start
        if start_s is not self._read_from:  # another run's list: start afresh
            if len(start_s) != known.size:
                return np.asarray(start_s[lo:hi], dtype=float)
            known[:] = np.nan
            self._read_from = start_s
            self._order_at = 0
        order = self._order
        if order is not None:
            new = order[self._order_at:]
            if new:
                known[new] = itemgetter(*new)(start_s)
                self._order_at += len(new)
            return known[lo:hi]
        part = known[lo:hi]
        unread = np.flatnonzero(part != part)
        if unread.size:
            part[unread] = itemgetter(*(unread + lo).tolist())(start_s)
        return part

    def follow(self, start_order: list[int]) -> None:
        """Read starts through ``start_order``, the jobs of the start times passed to
        :meth:`pressure` in the order they started (``SimState.start_order``; it only
        grows), instead of looking again at every job not started yet."""
        if start_order is not self._order:
            self._order = start_order
            self._read_from = None  # read every start again, through it

    def pressure(self, start_s: list[float], now_s: float) -> float:
        """The blended realized metric of the current and previous windows over the
        SLA's limit (0 before any job)."""
        k, w0 = self.window_at(now_s)
        cur = self.realized(start_s, now_s, w0, w0 + self.window_s)
        prev = self._final.get(k - 1)
        if prev is None:
            lo, hi = self._range(now_s, w0 - self.window_s, w0)
            if hi > lo:
                prev, final = self._metric(start_s, now_s, lo, hi)
                if final:  # every job of it has finished: it no longer changes
                    self._final = {k - 1: prev}
        if cur is None and prev is None:
            return 0.0
        if cur is None:
            cur = prev
        if prev is None:
            prev = cur
        gone = min(1.0, max(0.0, (now_s - w0) / self.window_s))
        return (gone * cur + (1.0 - gone) * prev) / self.limit

    def limit_at(self, pressure: float) -> float:
        """The limit a tick's what-ifs must meet under ``pressure``: the SLA's up to
        ``relax_below``, falling linearly to the metric's least value (1 for a bounded
        slowdown, 0 for a wait) at ``full_above``."""
        s = self.settings
        tight = min(1.0, max(0.0, (pressure - s.relax_below) / (s.full_above - s.relax_below)))
        least = 1.0 if self.metric.endswith("bsld") else 0.0
        return max(least, self.limit * (1.0 - tight))


# -- the realized metric of a window's jobs, compiled (see olsctl.policies.core.jit) ------------


@kernel
def window_metric(code: int, start, submit, runtime, estimate, now: float, bound: float,
                  values) -> tuple:
    """The realized metric ``code`` (:data:`FEEDBACK_METRICS`) by ``now`` of the jobs of
    the columns ``start`` (NaN: not started), ``submit``, ``runtime`` and ``estimate``
    (at least one job), and whether every one of them has finished.

    A job not started has waited until now; one started did so by now. Its bounded
    slowdown (``1 + wait / max(bound, r)``) takes its runtime ``r`` once it has finished,
    its estimate before. Each job's wait (wait metrics) or bounded slowdown goes to
    ``values``; a mean is their sum as numpy's ``add.reduce`` makes it
    (:func:`pairwise_sum`) over the count, so it has the bits numpy's mean of them has;
    for the 95th percentile (``FB_P95_BSLD``) the value returned is 0 and the caller takes
    it from ``values``."""
    n = len(start)
    final = True
    for i in range(n):
        s = start[i]
        wait = (s if s <= now else now) - submit[i]  # (NaN: not started, so now)
        r = runtime[i]
        if not s + r <= now:  # not finished (or not started): its estimate
            final = False
            r = estimate[i]
        if code == FB_MEAN_WAIT or code == FB_MAX_WAIT:
            values[i] = wait
        else:
            values[i] = 1.0 + wait / divisor(MEAN_BSLD, r, bound)
    if code == FB_MAX_WAIT:
        top = values[0]
        for i in range(1, n):
            if values[i] > top:
                top = values[i]
        return top, final
    if code == FB_P95_BSLD:
        return 0.0, final
    return pairwise_sum(values, 0, n) / n, final


@kernel
def pairwise_sum(values, lo: int, n: int) -> float:
    """The sum of ``values[lo:lo + n]`` in numpy's order (``np.add.reduce`` of floats): a
    run of more than 128 values is split in two halves (the first a multiple of 8 long),
    each summed so in turn, and the two sums added; up to 128 are summed as
    :func:`block_sum` does. Written with a stack of the halves still open instead of
    recursion, which numba's cache does not load back."""
    if n <= 128:
        return block_sum(values, lo, n)
    # open halves, innermost last: where each starts, how long it is, and (once its
    # first half is summed) that sum
    starts = np.empty(64, dtype=np.int64)
    lengths = np.empty(64, dtype=np.int64)
    firsts = np.empty(64)
    second = np.zeros(64, dtype=np.bool_)  # its first half is summed: on the second
    top = 0
    starts[0], lengths[0] = lo, n
    while True:
        m = lengths[top]
        if m > 128:  # open it: its first half next
            half = m // 2
            half -= half % 8
            second[top] = False
            top += 1
            starts[top], lengths[top] = starts[top - 1], half
            continue
        total = block_sum(values, starts[top], m)
        top -= 1
        while top >= 0 and second[top]:  # both halves summed: close it
            total = firsts[top] + total
            top -= 1
        if top < 0:
            return total
        firsts[top] = total  # its first half: the second next
        second[top] = True
        half = lengths[top] // 2
        half -= half % 8
        top += 1
        starts[top], lengths[top] = starts[top - 1] + half, lengths[top - 1] - half


@kernel
def block_sum(values, lo: int, n: int) -> float:
    """The sum of ``values[lo:lo + n]`` (n at most 128) as numpy adds such a run: fewer
    than 8 one by one; else in eight interleaved partial sums combined in a fixed tree,
    then the values past the last multiple of 8 one by one."""
    if n < 8:
        total = 0.0
        for i in range(lo, lo + n):
            total += values[i]
        return total
    r0, r1, r2, r3 = values[lo], values[lo + 1], values[lo + 2], values[lo + 3]
    r4, r5, r6, r7 = values[lo + 4], values[lo + 5], values[lo + 6], values[lo + 7]
    i = lo + 8
    end8 = lo + n - n % 8
    while i < end8:
        r0 += values[i]
        r1 += values[i + 1]
        r2 += values[i + 2]
        r3 += values[i + 3]
        r4 += values[i + 4]
        r5 += values[i + 5]
        r6 += values[i + 6]
        r7 += values[i + 7]
        i += 8
    total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < lo + n:
        total += values[i]
        i += 1
    return total


@warm_up
def feedback_warm_up(k) -> None:
    """Run :func:`window_metric` (compiled: ``k``) on a tiny window, as a controller takes
    it each tick (code 0: the mean bounded slowdown)."""
    x = np.array([10.0, 5.0, 10.0])
    k.window_metric(0, np.zeros(3), np.zeros(3), x, x, 1.0, 10.0, np.empty(3))
