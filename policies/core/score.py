"""Scoring a what-if that ran to its end, and the controller's closest choice among what-ifs
that missed the SLA (kernels, see :mod:`olsctl.policies.core.jit`).
"""

from __future__ import annotations

import numpy as np

from olsctl.policies.core.bound import INF
from olsctl.policies.core.jit import kernel

#: a scored what-if's row in :func:`easy_candidates`' ``out``: how it ended (``OUT_*``),
#: the bound that cut it short and the instant it stopped, then its scores
(ROW_STATUS, ROW_BOUND, ROW_NOW, ROW_UNSTARTED, ROW_CENSORED, ROW_MEAN_BSLD, ROW_P95_BSLD,
 ROW_MEAN_WAIT, ROW_MAX_WAIT) = range(9)

N_ROW = 9

#: how a candidate's what-if ended: not run (a waiting job is wider than the machine),
#: run to its end, or cut short by the SLA bound
OUT_WIDE, OUT_DONE, OUT_CUT = 0, 1, 2


@kernel
def exact_sum(x: np.ndarray, parts: np.ndarray) -> float:
    """The sum of ``x`` correctly rounded, as :func:`math.fsum` gives it (Shewchuk's
    partials, then the half-even correction across them); ``parts`` is scratch of at
    least ``len(x)`` floats. For finite values."""
    m = 0
    for k in range(len(x)):
        v = x[k]
        i = 0
        for q in range(m):
            y = parts[q]
            if abs(v) < abs(y):
                v, y = y, v
            hi = v + y
            lo = y - (hi - v)
            if lo != 0.0:
                parts[i] = lo
                i += 1
            v = hi
        m = i
        if v != 0.0:
            parts[m] = v
            m += 1
    hi = 0.0
    if m > 0:
        m -= 1
        hi = parts[m]
        lo = 0.0
        while m > 0:
            v = hi
            m -= 1
            y = parts[m]
            hi = v + y
            lo = y - (hi - v)
            if lo != 0.0:
                break
        if m > 0 and ((lo < 0.0 and parts[m - 1] < 0.0) or (lo > 0.0 and parts[m - 1] > 0.0)):
            y = lo * 2.0
            v = hi + y
            if y == v - hi:
                hi = v
    return hi


@kernel
def percentile_of(x: np.ndarray, q: float) -> float:
    """The q-th percentile of ``x`` with linear interpolation between order statistics
    (numpy's default method): at h = (n - 1) q / 100, from the lower statistic below
    the midpoint between two, from the upper one above it."""
    s = np.sort(x)
    h = (len(s) - 1) * q / 100.0
    lo = int(h)
    t = h - lo
    a = s[lo]
    b = s[lo + 1] if lo + 1 < len(s) else a
    d = b - a
    if t < 0.5:
        return a + d * t
    return b - d * (1.0 - t)


@kernel
def score_columns(start_s: np.ndarray, submit: np.ndarray, runtime: np.ndarray,
                  censor: bool, until: float, bsld_s: float, row: np.ndarray) -> np.ndarray:
    """Score a what-if that ran to its end (its jobs' columns) into ``row``, as
    :meth:`olsctl.controller.scoring.WhatIfRun._score` does: jobs still waiting are
    censored at ``until`` (``censor``: a horizon) or unstarted; then
    :func:`score_waits`. Returns the bounded slowdowns (empty when there are none: no
    job, or one never started)."""
    n = len(start_s)
    start = start_s.copy()
    waiting = 0
    for j in range(n):
        if start[j] != start[j]:
            waiting += 1
            if censor:
                start[j] = until
    row[ROW_UNSTARTED] = 0.0
    row[ROW_CENSORED] = 0.0
    if waiting and censor:
        row[ROW_CENSORED] = waiting
    if n == 0:
        row[ROW_MEAN_BSLD] = 1.0
        row[ROW_P95_BSLD] = 1.0
        row[ROW_MEAN_WAIT] = 0.0
        row[ROW_MAX_WAIT] = 0.0
        return np.empty(0)
    if waiting and not censor:
        row[ROW_UNSTARTED] = waiting
        row[ROW_MEAN_BSLD] = INF
        row[ROW_P95_BSLD] = INF
        row[ROW_MEAN_WAIT] = INF
        row[ROW_MAX_WAIT] = INF
        return np.empty(0)
    return score_waits(start - submit, runtime, bsld_s, row)


@kernel
def score_waits(wait: np.ndarray, runtime: np.ndarray, bsld_s: float,
                row: np.ndarray) -> np.ndarray:
    """Score the waits (s) of jobs that all started into ``row``: the mean and 95th
    percentile of the bounded slowdowns (1 + wait / max(runtime, ``bsld_s``), as
    :func:`olsctl.metrics.job_bsld`), the mean correctly rounded (:func:`exact_sum`, as
    :func:`math.fsum`), the percentile numpy's (:func:`percentile_of`), and the mean and
    largest wait. Returns the bounded slowdowns. For at least one job."""
    n = len(wait)
    bsld = np.empty(n)
    for j in range(n):
        r = runtime[j]
        bsld[j] = 1.0 + wait[j] / (r if r > bsld_s else bsld_s)
    parts = np.empty(n + 1)
    row[ROW_MEAN_BSLD] = exact_sum(bsld, parts) / n
    row[ROW_P95_BSLD] = percentile_of(bsld, 95.0)
    row[ROW_MEAN_WAIT] = exact_sum(wait, parts) / n
    row[ROW_MAX_WAIT] = wait.max()
    return bsld


@kernel
def rows_scored(out: np.ndarray, sla: int, done: np.ndarray, value: np.ndarray) -> None:
    """The trials of a batch's rows ``out`` as :func:`closest` takes them: whether each
    ran to its end (``done``) and its ``sla`` score, or the bound that cut it short
    (``value``; as the trials score, INF with a waiting job never starting)."""
    for c in range(len(out)):
        row = out[c]
        done[c] = row[ROW_STATUS] != OUT_CUT
        if not done[c]:
            value[c] = row[ROW_BOUND]
        elif row[ROW_STATUS] == OUT_WIDE or row[ROW_UNSTARTED] > 0:
            value[c] = INF
        else:
            value[c] = row[ROW_MEAN_BSLD + sla]


@kernel
def closest_pick(done: np.ndarray, value: np.ndarray, active: np.ndarray) -> tuple:
    """:func:`closest`'s next step: (the trial to go on, -1 when none is left; the best
    complete score, INF when none is complete). The one to go on is cut short with a
    bound at most the best score, the lowest bound (ties: the larger machine, then the
    first)."""
    best = INF
    for i in range(len(done)):
        if done[i] and value[i] < best:
            best = value[i]
    pick = -1
    for i in range(len(done)):
        if not done[i] and value[i] <= best:
            if pick < 0 or value[i] < value[pick] or (value[i] == value[pick]
                                                      and active[i] > active[pick]):
                pick = i
    return pick, best


@kernel
def went_to(row: np.ndarray, sla: int, i: int, done: np.ndarray, value: np.ndarray) -> None:
    """Trial ``i`` went on and ended as ``row`` says: its ``done`` and ``value`` (the
    bound that cut it short again, or its ``sla`` score; INF with a job never started)."""
    if row[ROW_STATUS] == OUT_CUT:
        value[i] = row[ROW_BOUND]
    else:
        done[i] = True
        value[i] = INF if row[ROW_UNSTARTED] else row[ROW_MEAN_BSLD + sla]


def closest_loop(rows: tuple, sla: int, done: np.ndarray, value: np.ndarray,
                 active: np.ndarray, row: np.ndarray, out: np.ndarray,
                 moved: np.ndarray) -> int:
    """No trial meets the SLA: find the closest as
    :func:`olsctl.controller.search._complete_closest` does, the what-ifs cut short
    being rows of one batch (``rows``: the family's batch arrays). Trial ``i`` ran to its
    end (``done``) or holds the bound that cut it short, its ``sla`` score or bound in
    ``value``, its machine in ``active``, its row in ``row`` (-1: not in the batch, then
    complete). Repeatedly: the next step of :func:`closest_pick`, whose what-if goes on,
    cut short again above the best complete score (with none complete, to its end).
    Updates ``done``, ``value`` and the rows' ``out``; sets ``moved`` for the trials that
    went on; returns how many times one went on.

    A template, written once: each family's instance (made with
    :func:`olsctl.policies.core.jit.specialize`) binds ``row_go_on(rows, r, limit,
    out)``, which runs row ``r``'s what-if on under ``limit`` (INF: to its end) and
    scores it into ``out[r]``."""
    went_on = 0
    while True:
        pick, best = closest_pick(done, value, active)
        if pick < 0:
            return went_on
        r = row[pick]
        row_go_on(rows, r, best, out)  # noqa: F821  (bound by specialize)
        went_on += 1
        moved[pick] = True
        went_to(out[r], sla, pick, done, value)
