"""The what-if loop's pieces over arrays, shared by every compiled policy family: how a
what-if of n jobs is laid out in flat arrays (the blocks and counters below), the heap of
true ends, the starts of a pass noted (their ends pushed, the SLA bound kept), the queue
moving up behind the jobs started, and the next instant (or the SLA bound's cut).

A what-if runs a snapshot forward as :func:`olsctl.whatif.steps` runs it (completions,
then a wake under way, then one pass, at each instant); each family's loop calls these
pieces and its own pass (:mod:`olsctl.policies.easy.forward`,
:mod:`olsctl.policies.mqbf.forward`).
"""

from __future__ import annotations

import numpy as np

from olsctl.policies.core.jit import kernel
from olsctl.policies.core.backfill import INF
from olsctl.policies.core.bound import bound_start, bound_value, missed

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


@kernel(inline=True)
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


@kernel(inline=True)
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


@kernel(inline=True)
def note_starts(ns: int, started: np.ndarray, now: float, start: np.ndarray,
                procs: np.ndarray, runtime: np.ndarray, submit: np.ndarray,
                heap_t: np.ndarray, heap_j: np.ndarray, n_heap: int, metric: int,
                acc: np.ndarray, cnt: np.ndarray, seen: np.ndarray, bsld_s: float) -> tuple:
    """The ``ns`` jobs a what-if's pass started ``now`` (``started[:ns]``, in start
    order): their start times, their true ends on the heap and, with an SLA ``metric``,
    their waits in its bound. Returns (the processors they took, the heap's new size)."""
    took = 0
    for i in range(ns):
        j = started[i]
        start[j] = now
        took += procs[j]
        n_heap = heap_push(heap_t, heap_j, n_heap, now + runtime[j], j)
        if metric:
            bound_start(metric, acc, cnt, seen, j, now, submit, runtime, bsld_s)
    return took, n_heap


@kernel
def still_waiting(queue: np.ndarray, nq: int, start: np.ndarray, ns: int) -> int:
    """Keep the jobs of ``queue[:nq]`` not started yet (start NaN) at its front, in
    their order (the queue keeps its arrival order), ``ns`` of them having started;
    returns how many are left. Once the ``ns`` are found, the rest move up without a
    look at their starts."""
    kept = 0
    i = 0
    while i < nq and kept + ns > i:  # (i - kept: the started ones found so far)
        j = queue[i]
        if start[j] != start[j]:  # NaN: still waiting
            queue[kept] = j
            kept += 1
        i += 1
    while i < nq:
        queue[kept] = queue[i]
        kept += 1
        i += 1
    return kept


@kernel(inline=True)
def cut_or_next(metric: int, acc: np.ndarray, cnt: np.ndarray, seen: np.ndarray,
                now: float, submit: np.ndarray, clock: np.ndarray, heap_t: np.ndarray,
                n_heap: int, wake_t: float, until: float) -> float:
    """What follows an instant's pass in a what-if loop: NaN when, with an SLA
    ``metric``, its bound shows the run surely misses ``clock[LIMIT]`` (the bound goes to
    ``clock[VALUE]``: the run is cut short); else the next instant, the earlier of the
    next true end and a wake under way (INF: none, or past ``until``)."""
    if metric:
        value = bound_value(metric, acc, cnt, seen, now, submit)
        if missed(value, clock[LIMIT]):
            clock[VALUE] = value
            return np.nan
    t = heap_t[0] if n_heap else INF
    if wake_t < t:
        t = wake_t
    return INF if t > until else t
