"""EASY's decisions, written once as plain Python kernels (see :mod:`olsctl.policies.jit`).

Here belong the rules of an EASY pass (:func:`admit`, :func:`shadow_extra`), the queue
orders (:func:`ordered_queue`), the pass itself in two steps (:func:`head_run`: the jobs
that start from the head; :func:`backfill_rest`: the blocked head's reservation and the
jobs started behind it, :func:`backfill_from`) and the SLA bound that cuts a what-if short (:func:`bound_open`,
:func:`bound_start`, :func:`bound_value`, :func:`missed`).

The main simulator calls these functions as they are, over its Python lists
(:func:`olsctl.policies.backfill.easy_pass`, :class:`olsctl.policies.backfill.CountResources`,
MQBF's shadow times); the what-if loops call their compiled copies over arrays
(:mod:`olsctl.policies.forward`, :func:`olsctl.policies.jit.compiled`). So the functions
only index their sequences (lists or arrays alike) and call other kernels.

Data: job columns are indexed by the state's job index (``procs`` int; ``est``,
``submit``, ``runtime``, ``start`` float, ``start`` NaN while a job waits). The running
jobs are ``running[k] = (expected end, job)`` in (end, job) order: the state's list of
tuples, or a float array of shape (n, 2). Floating-point expressions are written exactly
as Python computes them (``x ** 3.0``, not ``x ** 3``, which numba computes by repeated
multiplication and rounds differently).
"""

from __future__ import annotations

import math

import numpy as np

from olsctl.policies.jit import kernel

INF = math.inf

#: queue orders (see :mod:`olsctl.policies.order`), by the code the kernels take
FCFS, SAF, SJF, WFP = 0, 1, 2, 3
ORDER_CODES = {"fcfs": FCFS, "saf": SAF, "sjf": SJF, "wfp": WFP}

#: SLA metrics that have a lower bound while a what-if runs, by the code the kernels take
#: (0: no bound)
MEAN_BSLD, MEAN_WAIT, MAX_WAIT = 1, 2, 3
BOUND_METRICS = {"mean_bsld": MEAN_BSLD, "mean_wait_s": MEAN_WAIT, "max_wait_s": MAX_WAIT}


# -- the rules of a pass -------------------------------------------------------------------


@kernel(inline=True)
def admit(p: int, now: float, est: float, free: int, shadow_s: float, extra: int) -> int:
    """EASY's fit test of a job of ``p`` processors and estimate ``est`` (s) at ``now``:
    the ``extra`` processors left if it may start, else -1.

    It must fit the ``free`` processors, and either end by the shadow time (``now + est
    <= shadow_s``) or use no more than ``extra`` (which then shrinks by ``p``). Before a
    reservation ``shadow_s`` is infinite: fitting is enough."""
    if p > free:
        return -1
    if now + est > shadow_s:
        if p > extra:
            return -1
        return extra - p
    return extra


@kernel(inline=True)
def shadow_extra(now: float, avail: int, need: int, running, n_run: int, procs) -> tuple:
    """(shadow time, extra processors) for a job of width ``need`` with ``avail``
    processors free now and ``running[:n_run]`` running.

    Running jobs release their processors at their expected ends, in order; the shadow
    time is the first end at which ``need`` processors are free, every job ending exactly
    then counting as ended, and never before ``now``; ``extra`` is what is free then
    beyond ``need``. Infinite (and extra 0) when even all of them are not enough; with
    ``need`` free already, infinite too (and extra what is free beyond ``need``)."""
    k = 0
    end = INF
    while avail < need:
        if k == n_run:
            return INF, 0
        end = running[k][0]
        avail += procs[int(running[k][1])]
        k += 1
    while k < n_run and running[k][0] == end:
        avail += procs[int(running[k][1])]
        k += 1
    return (end if end > now else now), avail - need


@kernel
def order_key(code: int, now: float, submit: float, p: int, est: float) -> float:
    """A waiting job's key in queue order ``code`` (smaller first): processors x estimate
    (SAF), the estimate (SJF), minus Cobalt's WFP utility (wait / estimate)^3 x
    processors, which grows with the time waited (WFP); FCFS keeps arrival order."""
    if code == SAF:
        return p * est
    if code == SJF:
        return est
    if code == WFP:
        return -(((now - submit) / est) ** 3.0) * p
    return 0.0


@kernel
def ordered_queue(code: int, now: float, queue, procs, est, submit) -> np.ndarray:
    """``queue`` (arrival order: submit time, job id) in order ``code``, as an int64
    array, sorted stably so that equal keys keep arrival order."""
    ordered = np.empty(len(queue), dtype=np.int64)
    order_into(code, now, queue, procs, est, submit, ordered)
    return ordered


@kernel
def order_into(code: int, now: float, queue, procs, est, submit,
               ordered: np.ndarray) -> None:
    """:func:`ordered_queue` written into ``ordered[:len(queue)]``."""
    n = len(queue)
    if code == FCFS:
        for i in range(n):
            ordered[i] = queue[i]
        return
    keys = np.empty(n)
    for i in range(n):
        j = queue[i]
        keys[i] = order_key(code, now, submit[j], procs[j], est[j])
    by_key = np.argsort(keys, kind="mergesort")
    for i in range(n):
        ordered[i] = queue[by_key[i]]


# -- one pass, in two steps (the caller starts the head's jobs in between) -----------------


@kernel
def head_run(now: float, free: int, ordered, procs, est) -> int:
    """How many jobs of ``ordered`` (the waiting jobs in the policy's order) start from
    its head with ``free`` processors free at ``now``: they start while the head fits."""
    k = 0
    n = len(ordered)
    while k < n:
        j = ordered[k]
        if admit(procs[j], now, est[j], free, INF, 0) < 0:
            break
        free -= procs[j]
        k += 1
    return k


@kernel
def backfill_rest(now: float, free: int, ordered, k: int, procs, est, running, n_run: int,
                  started) -> tuple:
    """The rest of a pass once the first ``k`` jobs of ``ordered`` have started (they are
    in ``running[:n_run]``, and ``free`` is what is left): job ``ordered[k]`` is the
    blocked head and gets a reservation at its shadow time (:func:`shadow_extra`); then
    :func:`backfill_from` the job after it. Returns (jobs started, the shadow time, the
    extra processors left, the reserved job)."""
    head = ordered[k]
    shadow_s, extra = shadow_extra(now, free, procs[head], running, n_run, procs)
    ns, extra = backfill_from(now, free, ordered, k + 1, shadow_s, extra, procs, est,
                              started)
    return ns, shadow_s, extra, head


@kernel
def backfill_from(now: float, free: int, ordered, first: int, shadow_s: float, extra: int,
                  procs, est, started) -> tuple:
    """Behind a blocked head reserved at ``shadow_s`` with ``extra`` processors to spare:
    every job of ``ordered`` from position ``first`` on that passes :func:`admit` starts,
    in order, until no processor is free. The jobs to start go to ``started`` in start
    order; returns (how many, the extra processors left)."""
    ns = 0
    for pos in range(first, len(ordered)):
        if free <= 0:
            break
        j = ordered[pos]
        p = procs[j]
        if p > free:  # admit's first test, without the call: behind a blocked head
            continue  # most jobs fail it
        left = admit(p, now, est[j], free, shadow_s, extra)
        if left < 0:
            continue
        extra = left
        started[ns] = j
        ns += 1
        free -= p
    return ns, extra


# -- the running jobs, as a float array of (expected end, job) rows ----------------------


@kernel(inline=True)
def insert_running(running: np.ndarray, n_run: int, end: float, j: int) -> int:
    """Add job ``j`` expected to end at ``end`` in (end, job) order; returns the new
    count (the array must have room)."""
    k = n_run
    while k > 0 and (running[k - 1, 0] > end
                     or (running[k - 1, 0] == end and running[k - 1, 1] > j)):
        running[k, 0] = running[k - 1, 0]
        running[k, 1] = running[k - 1, 1]
        k -= 1
    running[k, 0] = end
    running[k, 1] = j
    return n_run + 1


@kernel(inline=True)
def remove_running(running: np.ndarray, n_run: int, j: int) -> int:
    """Take job ``j`` out of the running jobs; returns the new count."""
    k = 0
    while running[k, 1] != j:
        k += 1
    for m in range(k + 1, n_run):
        running[m - 1, 0] = running[m, 0]
        running[m - 1, 1] = running[m, 1]
    return n_run - 1



# -- one pass, on arrays ----------------------------------------------------------------


@kernel
def easy_pass(code: int, now: float, free: int, queue: np.ndarray, procs: np.ndarray,
              est: np.ndarray, submit: np.ndarray, running: np.ndarray, n_run: int,
              started: np.ndarray) -> tuple:
    """One EASY pass over ``queue`` (arrival order) put in order ``code``, on arrays:
    :func:`head_run`, then :func:`backfill_rest`. Started jobs go to ``started`` in start
    order and join ``running``. Returns (jobs started, running jobs, shadow time, extra
    processors, the reserved job or -1); a pass with no free processor or no waiting
    job changes nothing."""
    if free <= 0 or queue.size == 0:  # nothing can start: not even worth ordering
        return 0, n_run, INF, 0, -1
    if code == FCFS:  # (arrival order: the queue as it is)
        return easy_pass_over(now, free, queue, procs, est, running, n_run, started)
    return easy_pass_over(now, free, ordered_queue(code, now, queue, procs, est, submit),
                          procs, est, running, n_run, started)


@kernel
def easy_pass_over(now: float, free: int, ordered: np.ndarray, procs: np.ndarray,
                   est: np.ndarray, running: np.ndarray, n_run: int,
                   started: np.ndarray) -> tuple:
    """:func:`easy_pass` over the waiting jobs already in the policy's order."""
    k = head_run(now, free, ordered, procs, est)
    for i in range(k):
        j = ordered[i]
        started[i] = j
        free -= procs[j]
        n_run = insert_running(running, n_run, now + est[j], j)
    if k == ordered.size:
        return k, n_run, INF, 0, -1
    ns, shadow_s, extra, head = backfill_rest(now, free, ordered, k, procs, est, running,
                                              n_run, started[k:])
    for i in range(k, k + ns):
        j = started[i]
        n_run = insert_running(running, n_run, now + est[j], j)
    return k + ns, n_run, shadow_s, extra, head


# -- the SLA bound of a what-if (see olsctl.whatif.MissBound) ------------------------------

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
