"""The SLA bound that cuts a what-if short: a lower bound, kept up to date at each start,
on the metric of the snapshot's jobs (kernels, see :mod:`olsctl.policies.core.jit`).
"""

from __future__ import annotations

import math

from olsctl.policies.core.jit import kernel

INF = math.inf

#: SLA metrics that have a lower bound while a what-if runs, by the code the kernels take
#: (0: no bound)
MEAN_BSLD, MEAN_WAIT, MAX_WAIT = 1, 2, 3

BOUND_METRICS = {"mean_bsld": MEAN_BSLD, "mean_wait_s": MEAN_WAIT, "max_wait_s": MAX_WAIT}

#: slots of the bound's float sums ``acc`` and counts ``cnt`` (arrays or lists)
KNOWN, SUM_A, SUM_B, T0 = 0, 1, 2, 3

WAITING, FIRST = 0, 1


@kernel(inline=True)
def divisor(metric: int, runtime: float, bsld_s: float) -> float:
    """What a job's wait is divided by in ``metric``: olsctl.metrics.job_bsld's
    max(runtime, ``bsld_s``) for the bounded slowdown, else 1."""
    if metric == MEAN_BSLD:
        return runtime if runtime > bsld_s else bsld_s
    return 1.0


@kernel(inline=True)
def with_known(metric: int, known: float, wait: float, m: float) -> float:
    """The bound's known part once a job that waited ``wait`` (divisor ``m``) counts."""
    if metric == MEAN_BSLD:
        return known + (1.0 + wait / m)
    if metric == MEAN_WAIT:
        return known + wait
    return wait if wait > known else known


@kernel
def bound_open(metric: int, acc, cnt, seen, t0: float, run_job, start, submit, runtime,
               bsld_s: float) -> None:
    """Start the bound of ``metric`` over the ``len(seen)`` snapshot jobs at ``t0``:
    ``run_job`` run (since ``start``), listed in the state's running order (the order of
    the sums); the others wait. ``bsld_s`` is the bounded slowdown's runtime bound."""
    n = len(seen)
    for j in range(n):
        seen[j] = False
    known = 0.0
    for k in range(len(run_job)):
        j = run_job[k]
        seen[j] = True
        known = with_known(metric, known, start[j] - submit[j],
                           divisor(metric, runtime[j], bsld_s))
    waiting = 0
    a = b = 0.0  # sums over waiting jobs of 1/m and (submit - t0)/m
    for j in range(n):
        if not seen[j]:
            waiting += 1
            m = divisor(metric, runtime[j], bsld_s)
            a += 1.0 / m
            b += (submit[j] - t0) / m
    acc[KNOWN] = known
    acc[SUM_A] = a
    acc[SUM_B] = b
    acc[T0] = t0
    cnt[WAITING] = waiting
    cnt[FIRST] = 0  # the earliest-submitted snapshot job possibly still waiting


@kernel(inline=True)
def bound_start(metric: int, acc, cnt, seen, j: int, now: float, submit, runtime,
                bsld_s: float) -> None:
    """Snapshot job ``j`` starts at ``now``: its wait becomes known."""
    seen[j] = True
    m = divisor(metric, runtime[j], bsld_s)
    acc[KNOWN] = with_known(metric, acc[KNOWN], now - submit[j], m)
    cnt[WAITING] -= 1
    acc[SUM_A] -= 1.0 / m
    acc[SUM_B] -= (submit[j] - acc[T0]) / m


@kernel(inline=True)
def bound_value(metric: int, acc, cnt, seen, now: float, submit) -> float:
    """The lower bound at ``now``: started jobs with their waits, waiting ones with the
    wait they have so far."""
    n = len(seen)
    if metric == MAX_WAIT:
        first = cnt[FIRST]
        while first < n and seen[first]:
            first += 1
        cnt[FIRST] = first
        if first == n:
            return acc[KNOWN]
        wait = now - submit[first]
        return wait if wait > acc[KNOWN] else acc[KNOWN]
    dt = now - acc[T0]
    extra = dt * acc[SUM_A] - acc[SUM_B]  # waits so far, over their divisors
    if metric == MEAN_BSLD:
        extra += cnt[WAITING]
    return (acc[KNOWN] + extra) / n


@kernel(inline=True)
def missed(value: float, limit: float) -> bool:
    """A bound ``value`` surely above ``limit``: by a margin far above rounding."""
    return value > limit + 1e-6 * (limit if limit > 1.0 else 1.0)
