"""EASY's decisions over arrays, compiled with numba: the only implementation of them.

Here belong the rules of an EASY pass (:func:`admit`, :func:`shadow_extra`), the queue
orders (:func:`ordered_queue`), the pass itself (:func:`easy_pass`), the SLA bound that
cuts a what-if short (:func:`bound_open`, :func:`bound_start`, :func:`bound_value`,
:func:`missed`) and EASY's what-if loop (:func:`easy_forward`). The main simulator's EASY
passes (:class:`olsctl.policies.easy.EasyBackfill`), the power-aware EASY's count test
and MQBF's shadow times (:mod:`olsctl.policies.backfill`) and the what-if engine
(:mod:`olsctl.whatif`) all call these functions.

The source is plain Python: with ``NUMBA_DISABLE_JIT=1`` it runs uncompiled, with the
same results. Compiled code is cached next to this file (``cache=True``);
:func:`compile_kernels` compiles (or loads) every kernel and says how long it took.

The rules and the bound also have a *Python form* (:func:`python_form`: the same
function, uncompiled) for callers that hold Python lists (the live state of a pass that
is not compiled): it reads lists as they are, with no conversion and no call into
compiled code with arrays. Those functions only index their sequences and call scalar
kernels.

Data: job columns are indexed by the state's job index (``procs`` int64; ``est``,
``submit``, ``runtime``, ``start`` float64, ``start`` NaN while a job waits). The running
jobs are ``running[k] = (expected end, job)`` in (end, job) order: the state's list of
tuples, or a float array of shape (n, 2). Floating-point expressions are written exactly
as the Python code they replace (``x ** 3.0``, not ``x ** 3``, which numba computes by
repeated multiplication and rounds differently).
"""

from __future__ import annotations

import math
import time

import numpy as np
from numba import njit

INF = math.inf

#: queue orders (see :mod:`olsctl.policies.order`), by the code the kernels take
FCFS, SAF, SJF, WFP = 0, 1, 2, 3
ORDER_CODES = {"fcfs": FCFS, "saf": SAF, "sjf": SJF, "wfp": WFP}

#: SLA metrics that have a lower bound while a what-if runs, by the code the kernels take
#: (0: no bound)
MEAN_BSLD, MEAN_WAIT, MAX_WAIT = 1, 2, 3
BOUND_METRICS = {"mean_bsld": MEAN_BSLD, "mean_wait_s": MEAN_WAIT, "max_wait_s": MAX_WAIT}


def python_form(kernel):
    """The kernel as the plain Python function it is compiled from (itself when the JIT
    is disabled)."""
    return getattr(kernel, "py_func", kernel)


# -- the rules of a pass -------------------------------------------------------------------


@njit(cache=True)
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


@njit(cache=True)
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


@njit(cache=True)
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


@njit(cache=True)
def ordered_queue(code: int, now: float, queue: np.ndarray, procs: np.ndarray,
                  est: np.ndarray, submit: np.ndarray) -> np.ndarray:
    """``queue`` (arrival order: submit time, job id) in order ``code``, sorted stably so
    that equal keys keep arrival order. FCFS returns ``queue`` itself."""
    if code == FCFS:
        return queue
    keys = np.empty(queue.size)
    for i in range(queue.size):
        j = queue[i]
        keys[i] = order_key(code, now, submit[j], procs[j], est[j])
    return queue[np.argsort(keys, kind="mergesort")]


# -- the running jobs, as a float array of (expected end, job) rows ----------------------


@njit(cache=True)
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


@njit(cache=True)
def remove_running(running: np.ndarray, n_run: int, j: int) -> int:
    """Take job ``j`` out of the running jobs; returns the new count."""
    k = 0
    while running[k, 1] != j:
        k += 1
    for m in range(k + 1, n_run):
        running[m - 1, 0] = running[m, 0]
        running[m - 1, 1] = running[m, 1]
    return n_run - 1


# -- one pass ------------------------------------------------------------------------------


@njit(cache=True)
def pass_over(now: float, free: int, ordered: np.ndarray, procs: np.ndarray, est: np.ndarray,
              running: np.ndarray, n_run: int, started: np.ndarray) -> tuple:
    """One EASY pass over ``ordered`` (the waiting jobs in the policy's order) with
    ``free`` processors free at ``now``.

    Jobs start from the head while the head fits; the blocked head gets a reservation at
    its shadow time (:func:`shadow_extra`, counting the jobs just started); then every
    later job that passes :func:`admit` starts, until no processor is free. Started jobs
    go to ``started`` in start order and join ``running``. Returns (jobs started, running
    jobs, shadow time, extra processors, the reserved job or -1); a pass with no free
    processor or no waiting job changes nothing."""
    n = ordered.size
    if free <= 0 or n == 0:
        return 0, n_run, INF, 0, -1
    ns = 0
    k = 0
    while k < n:  # from the head while the head fits
        j = ordered[k]
        if admit(procs[j], now, est[j], free, INF, 0) < 0:
            break
        started[ns] = j
        ns += 1
        free -= procs[j]
        n_run = insert_running(running, n_run, now + est[j], j)
        k += 1
    if k == n:
        return ns, n_run, INF, 0, -1
    head = ordered[k]
    shadow_s, extra = shadow_extra(now, free, procs[head], running, n_run, procs)
    for pos in range(k + 1, n):  # the rest of the queue, in order
        if free <= 0:
            break
        j = ordered[pos]
        left = admit(procs[j], now, est[j], free, shadow_s, extra)
        if left < 0:
            continue
        extra = left
        started[ns] = j
        ns += 1
        free -= procs[j]
        n_run = insert_running(running, n_run, now + est[j], j)
    return ns, n_run, shadow_s, extra, head


@njit(cache=True)
def easy_pass(code: int, now: float, free: int, queue: np.ndarray, procs: np.ndarray,
              est: np.ndarray, submit: np.ndarray, running: np.ndarray, n_run: int,
              started: np.ndarray) -> tuple:
    """:func:`pass_over` of ``queue`` (arrival order) put in order ``code``."""
    if free <= 0 or queue.size == 0:  # nothing can start: not even worth ordering
        return 0, n_run, INF, 0, -1
    ordered = ordered_queue(code, now, queue, procs, est, submit)
    return pass_over(now, free, ordered, procs, est, running, n_run, started)


@njit(cache=True)
def easy_pass_flat(code: int, now: float, free: int, flat: np.ndarray, n_run: int,
                   procs: np.ndarray, est: np.ndarray, submit: np.ndarray,
                   started: np.ndarray) -> tuple:
    """:func:`easy_pass` on a live state's lists, handed over as one float array:
    ``flat`` = the running jobs' (expected end, job) pairs in order, then the waiting
    jobs in arrival order (one conversion from Python instead of several). The jobs
    started go to ``started``; returns (how many, the shadow time, the reserved job or
    -1)."""
    nq = flat.size - 2 * n_run
    running = np.empty((n_run + nq, 2))
    for k in range(n_run):
        running[k, 0] = flat[2 * k]
        running[k, 1] = flat[2 * k + 1]
    queue = np.empty(nq, dtype=np.int64)
    for i in range(nq):
        queue[i] = np.int64(flat[2 * n_run + i])
    ns, _, shadow_s, _, head = easy_pass(code, now, free, queue, procs, est, submit, running,
                                         n_run, started)
    return ns, shadow_s, head


# -- the SLA bound of a what-if (see olsctl.whatif.MissBound) ------------------------------

#: slots of the bound's float sums ``acc`` and counts ``cnt`` (arrays or lists)
KNOWN, SUM_A, SUM_B, T0 = 0, 1, 2, 3
WAITING, FIRST = 0, 1


@njit(cache=True)
def divisor(metric: int, runtime: float, bsld_s: float) -> float:
    """What a job's wait is divided by in ``metric``: olsctl.metrics.job_bsld's
    max(runtime, ``bsld_s``) for the bounded slowdown, else 1."""
    if metric == MEAN_BSLD:
        return runtime if runtime > bsld_s else bsld_s
    return 1.0


@njit(cache=True)
def with_known(metric: int, known: float, wait: float, m: float) -> float:
    """The bound's known part once a job that waited ``wait`` (divisor ``m``) counts."""
    if metric == MEAN_BSLD:
        return known + (1.0 + wait / m)
    if metric == MEAN_WAIT:
        return known + wait
    return wait if wait > known else known


@njit(cache=True)
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


@njit(cache=True)
def bound_start(metric: int, acc, cnt, seen, j: int, now: float, submit, runtime,
                bsld_s: float) -> None:
    """Snapshot job ``j`` starts at ``now``: its wait becomes known."""
    seen[j] = True
    m = divisor(metric, runtime[j], bsld_s)
    acc[KNOWN] = with_known(metric, acc[KNOWN], now - submit[j], m)
    cnt[WAITING] -= 1
    acc[SUM_A] -= 1.0 / m
    acc[SUM_B] -= (submit[j] - acc[T0]) / m


@njit(cache=True)
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


@njit(cache=True)
def missed(value: float, limit: float) -> bool:
    """A bound ``value`` surely above ``limit``: by a margin far above rounding."""
    return value > limit + 1e-6 * (limit if limit > 1.0 else 1.0)


# -- EASY's what-if loop -------------------------------------------------------------------
#
# A what-if of n jobs lives in two flat arrays, filled from the state's lists and read back
# in a few slice copies: ``ints`` holds n-long blocks PROCS, QUEUE (arrival order),
# HEAP_J, STARTED, then the counters; ``floats`` holds n-long blocks EST, RUNTIME, SUBMIT,
# START, HEAP_T, then the running jobs (n rows of (expected end, job)), the clock and the
# bound's sums.

PROCS, QUEUE, HEAP_J, STARTED = range(4)
EST, RUNTIME, SUBMIT, START, HEAP_T = range(5)
INT_BLOCKS, FLOAT_BLOCKS = 4, 5
#: the counters after the blocks of ``ints`` (from BOUND_COUNTS on: the bound's ``cnt``)
(ACTIVE, BUSY, NQ, NRUN, NHEAP, WAKE_N, DUE, METRIC, AT_BOUND, FINISHES,
 BOUND_COUNTS) = range(11)
N_COUNTS = BOUND_COUNTS + 2
#: the clock after the running jobs in ``floats`` (then the bound's ``acc``)
NOW, WAKE_T, UNTIL, LIMIT, VALUE = range(5)
N_CLOCK = 5
N_TAIL = N_CLOCK + 4


@njit(cache=True)
def block(a: np.ndarray, k: int, n: int) -> np.ndarray:
    """The ``k``-th n-long block of a what-if's flat array."""
    return a[k * n:(k + 1) * n]


@njit(cache=True)
def running_block(floats: np.ndarray, n: int) -> np.ndarray:
    """The running jobs' rows of a what-if's ``floats``."""
    at = FLOAT_BLOCKS * n
    return floats[at:at + 2 * n].reshape((n, 2))


@njit(cache=True)
def heap_push(heap_t: np.ndarray, heap_j: np.ndarray, n: int, t: float, j: int) -> int:
    """Push (t, j) on the min-heap ``heap_t[:n]``, ``heap_j[:n]``; returns the new size."""
    i = n
    while i > 0:
        up = (i - 1) >> 1
        if heap_t[up] < t or (heap_t[up] == t and heap_j[up] < j):
            break
        heap_t[i] = heap_t[up]
        heap_j[i] = heap_j[up]
        i = up
    heap_t[i] = t
    heap_j[i] = j
    return n + 1


@njit(cache=True)
def heap_pop(heap_t: np.ndarray, heap_j: np.ndarray, n: int) -> int:
    """Drop the smallest (t, j) of the heap; returns the new size."""
    n -= 1
    t = heap_t[n]
    j = heap_j[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and (heap_t[c + 1] < heap_t[c]
                          or (heap_t[c + 1] == heap_t[c] and heap_j[c + 1] < heap_j[c])):
            c += 1
        if heap_t[c] < t or (heap_t[c] == t and heap_j[c] < j):
            heap_t[i] = heap_t[c]
            heap_j[i] = heap_j[c]
            i = c
        else:
            break
    heap_t[i] = t
    heap_j[i] = j
    return n


@njit(cache=True)
def forward_open(n: int, ints: np.ndarray, floats: np.ndarray, seen: np.ndarray,
                 bsld_s: float) -> None:
    """Complete a what-if's arrays once the caller has filled PROCS, QUEUE, EST, RUNTIME,
    SUBMIT, START, the running jobs (the state's, in order), the counters and the clock:
    the heap of the running jobs' true ends (start + runtime) and, if ``METRIC`` is set,
    the bound over all n jobs."""
    count = ints[INT_BLOCKS * n:]
    tail = floats[FLOAT_BLOCKS * n + 2 * n:]
    running = running_block(floats, n)
    start, runtime = block(floats, START, n), block(floats, RUNTIME, n)
    heap_t, heap_j = block(floats, HEAP_T, n), block(ints, HEAP_J, n)
    n_run = count[NRUN]
    run_job = np.empty(n_run, dtype=np.int64)
    for k in range(n_run):
        j = np.int64(running[k, 1])
        run_job[k] = j
        heap_push(heap_t, heap_j, k, start[j] + runtime[j], j)
    count[NHEAP] = n_run
    if count[METRIC]:
        bound_open(count[METRIC], tail[N_CLOCK:], count[BOUND_COUNTS:], seen, tail[NOW],
                   run_job, start, block(floats, SUBMIT, n), runtime, bsld_s)


@njit(cache=True)
def easy_forward(code: int, n: int, ints: np.ndarray, floats: np.ndarray, seen: np.ndarray,
                 bsld_s: float) -> bool:
    """Run an EASY what-if of n jobs forward (arrays set up by :func:`forward_open`) as
    :func:`olsctl.whatif.steps` does, until every job has started, nothing more can
    happen, or the next instant is past ``UNTIL``; returns True when the SLA bound cut it
    short instead (``VALUE`` holds the bound; called again, it goes on under ``LIMIT``,
    or with no bound once ``METRIC`` is 0)."""
    return run_forward(code, block(ints, PROCS, n), block(floats, EST, n),
                       block(floats, RUNTIME, n), block(floats, SUBMIT, n),
                       block(floats, START, n), block(ints, QUEUE, n),
                       running_block(floats, n), block(floats, HEAP_T, n),
                       block(ints, HEAP_J, n), block(ints, STARTED, n),
                       floats[FLOAT_BLOCKS * n + 2 * n:], ints[INT_BLOCKS * n:], seen, bsld_s)


@njit(cache=True)
def run_forward(code: int, procs: np.ndarray, est: np.ndarray, runtime: np.ndarray,
                submit: np.ndarray, start: np.ndarray, queue: np.ndarray,
                running: np.ndarray, heap_t: np.ndarray, heap_j: np.ndarray,
                started: np.ndarray, clock: np.ndarray, count: np.ndarray, seen: np.ndarray,
                bsld_s: float) -> bool:
    """The loop of :func:`easy_forward`. At each instant: the completions due (the heap
    of true ends), then a wake under way (``WAKE_T``: ``WAKE_N`` processors active),
    then one pass if something happened (``DUE``). ``queue[:NQ]`` waits in arrival
    order; ``start`` gets each start. The arrays hold the whole run between calls."""
    acc = clock[N_CLOCK:]
    cnt = count[BOUND_COUNTS:]
    now = clock[NOW]
    wake_t = clock[WAKE_T]
    until = clock[UNTIL]
    active = count[ACTIVE]
    busy = count[BUSY]
    nq = count[NQ]
    n_run = count[NRUN]
    n_heap = count[NHEAP]
    due = count[DUE]
    metric = count[METRIC]
    finishes = count[FINISHES]
    at_bound = count[AT_BOUND] != 0
    cut = False
    while True:
        if not at_bound:
            if due:
                due = 0
                ns, n_run, _, _, _ = easy_pass(code, now, active - busy, queue[:nq], procs,
                                               est, submit, running, n_run, started)
                if ns:
                    for i in range(ns):
                        j = started[i]
                        start[j] = now
                        busy += procs[j]
                        n_heap = heap_push(heap_t, heap_j, n_heap, now + runtime[j], j)
                        if metric:
                            bound_start(metric, acc, cnt, seen, j, now, submit, runtime,
                                        bsld_s)
                    kept = 0
                    for i in range(nq):  # the queue keeps its arrival order
                        j = queue[i]
                        if start[j] != start[j]:  # NaN: still waiting
                            queue[kept] = j
                            kept += 1
                    nq = kept
            if nq == 0:
                break
        at_bound = False
        if metric:
            value = bound_value(metric, acc, cnt, seen, now, submit)
            if missed(value, clock[LIMIT]):
                clock[VALUE] = value
                at_bound = cut = True
                break
        t = heap_t[0] if n_heap else INF
        if wake_t < t:
            t = wake_t
        if t == INF or t > until:
            break
        now = t
        while n_heap and heap_t[0] == now:
            j = heap_j[0]
            n_heap = heap_pop(heap_t, heap_j, n_heap)
            n_run = remove_running(running, n_run, j)
            busy -= procs[j]
            finishes += 1
            due = 1
        if now == wake_t:
            active = count[WAKE_N]
            wake_t = INF
            due = 1
    clock[NOW] = now
    clock[WAKE_T] = wake_t
    count[ACTIVE] = active
    count[BUSY] = busy
    count[NQ] = nq
    count[NRUN] = n_run
    count[NHEAP] = n_heap
    count[DUE] = due
    count[FINISHES] = finishes
    count[AT_BOUND] = 1 if at_bound else 0
    return cut


# -- compilation ---------------------------------------------------------------------------


def compile_kernels() -> float:
    """Compile every kernel (or load it from the cache) by running each on a tiny case;
    returns the seconds it took (the first run's compile time when the cache is empty)."""
    t0 = time.perf_counter()
    n = 3
    ints = np.zeros(INT_BLOCKS * n + N_COUNTS, dtype=np.int64)
    floats = np.zeros(FLOAT_BLOCKS * n + 2 * n + N_TAIL)
    block(ints, PROCS, n)[:] = (2, 2, 4)
    block(ints, QUEUE, n)[:2] = (1, 2)
    block(floats, EST, n)[:] = (10.0, 5.0, 10.0)
    block(floats, RUNTIME, n)[:] = (10.0, 5.0, 10.0)
    block(floats, START, n)[:] = (0.0, np.nan, np.nan)
    running_block(floats, n)[0] = (10.0, 0.0)
    ints[INT_BLOCKS * n:INT_BLOCKS * n + METRIC + 1] = (4, 2, 2, 1, 0, 0, 1, MEAN_BSLD)
    at = FLOAT_BLOCKS * n + 2 * n
    floats[at:at + N_CLOCK] = (0.0, INF, INF, 1.0, 0.0)
    seen = np.zeros(n, dtype=np.bool_)
    forward_open(n, ints, floats, seen, 10.0)
    easy_forward(WFP, n, ints, floats, seen, 10.0)
    procs = block(ints, PROCS, n).copy()
    est = block(floats, EST, n).copy()
    easy_pass_flat(WFP, 0.0, 2, np.array([10.0, 0.0, 1.0, 2.0]), 1, procs, est, est,
                   np.zeros(n, dtype=np.int64))
    return time.perf_counter() - t0
