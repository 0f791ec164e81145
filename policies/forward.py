"""EASY's what-if loop over arrays: a snapshot run forward as :func:`olsctl.whatif.steps`
runs it (completions, then a wake under way, then one pass, at each instant), calling
the pass of :mod:`olsctl.policies.kernels`. Its compiled copy
(:func:`olsctl.policies.jit.compiled`) is what makes EASY what-ifs fast; the what-if
engine (:class:`olsctl.whatif._EasyRun`) fills the arrays and reads them back.
"""

from __future__ import annotations

import numpy as np

from olsctl.policies.jit import kernel
from olsctl.policies.kernels import (INF, MEAN_BSLD, WFP, bound_open, bound_start,
                                     bound_value, easy_pass, missed, remove_running)

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


@kernel
def block(a: np.ndarray, k: int, n: int) -> np.ndarray:
    """The ``k``-th n-long block of a what-if's flat array."""
    return a[k * n:(k + 1) * n]


@kernel
def running_block(floats: np.ndarray, n: int) -> np.ndarray:
    """The running jobs' rows of a what-if's ``floats``."""
    at = FLOAT_BLOCKS * n
    return floats[at:at + 2 * n].reshape((n, 2))


@kernel
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


@kernel
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


@kernel
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


@kernel
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


@kernel
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


# -- warming up ---------------------------------------------------------------------------


def warm_up(k) -> None:
    """Run the kernels ``k`` (:func:`olsctl.policies.jit.compiled`) on a tiny what-if:
    compiles (or loads) every kernel the what-if loops call."""
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
    k.forward_open(n, ints, floats, seen, 10.0)
    k.easy_forward(WFP, n, ints, floats, seen, 10.0)
