"""EASY's what-if loop over arrays: a snapshot run forward as :func:`olsctl.whatif.steps`
runs it (completions, then a wake under way, then one pass, at each instant), calling
the pass of :mod:`olsctl.policies.kernels`. Its compiled copy
(:func:`olsctl.policies.jit.compiled`) is what makes EASY what-ifs fast; the what-if
engine (:class:`olsctl.whatif._EasyRun`) fills the arrays and reads them back.

In FCFS, SAF and SJF order the loop keeps the queue by position in that order, with an
index over it (:func:`indexed_pass`), so that a pass behind a blocked head does not read
every waiting job: with thousands waiting, that reading was nearly all of a what-if. In
WFP order, whose keys change with time, each pass sorts the queue again from the last
pass's order (:func:`ranked_pass`).
"""

from __future__ import annotations

import numpy as np

from olsctl.policies.jit import kernel
from olsctl.policies.kernels import (INF, MEAN_BSLD, WFP, admit, bound_open, bound_start,
                                     bound_value, easy_pass_over, insert_running, missed,
                                     order_key, ordered_queue, remove_running, shadow_extra)

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
def template_open(n: int, nr: int, procs: np.ndarray, est: np.ndarray, runtime: np.ndarray,
                  submit: np.ndarray, start_s: np.ndarray, active: int, now: float,
                  until: float, metric: int, limit: float, bsld_s: float, ints: np.ndarray,
                  floats: np.ndarray, seen: np.ndarray) -> None:
    """Fill a what-if's arrays from a snapshot's columns (its first ``nr`` jobs running
    since ``start_s``, the others waiting in arrival order) with ``active`` processors,
    no wake under way and no pass due, then :func:`forward_open`: the arrays
    :class:`olsctl.whatif.EasyTemplate` copies for each candidate. ``metric`` (a code of
    ``BOUND_METRICS``, 0: none) and ``limit`` set the SLA bound."""
    block(ints, PROCS, n)[:] = procs
    queue = block(ints, QUEUE, n)
    for i in range(n - nr):
        queue[i] = nr + i
    block(floats, EST, n)[:] = est
    block(floats, RUNTIME, n)[:] = runtime
    block(floats, SUBMIT, n)[:] = submit
    start = block(floats, START, n)
    running = running_block(floats, n)
    busy = 0
    n_run = 0
    for j in range(n):
        if j < nr:
            start[j] = start_s[j]
            busy += procs[j]
            n_run = insert_running(running, n_run, start_s[j] + est[j], j)
        else:
            start[j] = np.nan
    count = ints[INT_BLOCKS * n:]
    count[:] = 0
    count[ACTIVE] = active
    count[BUSY] = busy
    count[NQ] = n - nr
    count[NRUN] = n_run
    count[METRIC] = metric
    tail = floats[FLOAT_BLOCKS * n + 2 * n:]
    tail[NOW] = now
    tail[WAKE_T] = INF
    tail[UNTIL] = until
    tail[LIMIT] = limit if metric else 0.0
    tail[VALUE] = 0.0
    forward_open(n, ints, floats, seen, bsld_s)


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


# -- what-ifs in a fixed order: the queue by position, and an index over it --------------
#
# A what-if gets no arrivals, and in FCFS, SAF or SJF order a job's key (its arrival, its
# size, its estimate) does not change while it waits: the waiting jobs keep the order
# they had when the loop began, those that start simply leave it. So the loop puts the
# queue in its order once, and each waiting job keeps its position there: a job that
# starts leaves a hole (its start time is set) instead of the queue moving up behind it
# (WFP's keys grow with the wait: see :func:`ranked_pass`). Over the
# positions a tree keeps, for each subtree, the narrowest width and the shortest estimate
# of the jobs in it still waiting. A pass behind the blocked head (:func:`backfill_indexed`)
# skips every subtree in which no job could pass :func:`admit`; in a congested queue that
# is nearly all of it (most waiting jobs are wider than the few processors a completion
# frees). It starts the same jobs, in the same order, as :func:`backfill_from` over the
# waiting jobs: :func:`admit` decides each one, and a subtree is skipped only when its
# narrowest width and shortest estimate fail admit's own tests.

#: the width the index gives a position with no job waiting (wider than any machine)
NO_JOB = 1 << 62


@kernel
def index_open(queue: np.ndarray, nq: int, procs: np.ndarray, est: np.ndarray) -> tuple:
    """The index over the waiting jobs ``queue[:nq]``, by position: (``size``, ``wide``,
    ``short``). ``size`` leaves, the least power of two >= nq (and >= 1); the arrays are
    twice as long: node 1 is the root, node i's children are 2i and 2i + 1, leaf
    ``size + pos`` is position ``pos``; ``wide`` holds each node's narrowest width and
    ``short`` its shortest estimate (an empty leaf: NO_JOB and inf)."""
    size = 1
    while size < nq:
        size *= 2
    wide = np.empty(2 * size, dtype=np.int64)
    short = np.empty(2 * size)
    for i in range(size):
        if i < nq:
            j = queue[i]
            wide[size + i] = procs[j]
            short[size + i] = est[j]
        else:
            wide[size + i] = NO_JOB
            short[size + i] = INF
    for i in range(size - 1, 0, -1):
        index_up(wide, short, i)
    return size, wide, short


@kernel(inline=True)
def index_up(wide: np.ndarray, short: np.ndarray, i: int) -> None:
    """Node ``i`` of the index from its two children."""
    a = 2 * i
    b = a + 1
    wide[i] = wide[a] if wide[a] < wide[b] else wide[b]
    short[i] = short[a] if short[a] < short[b] else short[b]


@kernel(inline=True)
def index_drop(wide: np.ndarray, short: np.ndarray, size: int, pos: int) -> None:
    """The job at position ``pos`` no longer waits: its leaf empties, and the nodes
    above it are taken again from their children."""
    i = size + pos
    wide[i] = NO_JOB
    short[i] = INF
    i >>= 1
    while i:
        index_up(wide, short, i)
        i >>= 1


@kernel(inline=True)
def may_admit(p: int, now: float, est: float, free: int, shadow_s: float,
              extra: int) -> bool:
    """Whether a job ``p`` processors wide with estimate ``est`` passes :func:`admit`'s
    tests; over a subtree, with its narrowest width and shortest estimate, whether one
    of its jobs might (if none could, it is false: widths and ``now + est`` only grow)."""
    return p <= free and (not now + est > shadow_s or p <= extra)


@kernel(inline=True)
def backfill_indexed(now: float, free: int, queue: np.ndarray, first: int,
                     shadow_s: float, extra: int, procs: np.ndarray, est: np.ndarray,
                     size: int, wide: np.ndarray, short: np.ndarray, started: np.ndarray,
                     at: np.ndarray) -> tuple:
    """:func:`backfill_from` over a what-if's queue by position, from position
    ``first`` on, with the index (``size``, ``wide``, ``short``) of its waiting jobs: the
    jobs to start go to ``started`` in start order, their positions to ``at``, and leave
    the index at once, so that after each start the root tells whether any other might
    still start; returns (how many, the extra processors left)."""
    ns = 0
    if first >= size or not may_admit(wide[1], now, short[1], free, shadow_s, extra):
        return ns, extra  # (node 1, the root: no waiting job at all might start)
    i = size + first
    while free > 0:
        if may_admit(wide[i], now, short[i], free, shadow_s, extra):
            if i < size:  # a subtree that may hold one: its left half first
                i = 2 * i
                continue
            j = queue[i - size]
            left = admit(procs[j], now, est[j], free, shadow_s, extra)
            if left >= 0:
                extra = left
                started[ns] = j
                at[ns] = i - size
                ns += 1
                free -= procs[j]
                index_drop(wide, short, size, i - size)
                if not may_admit(wide[1], now, short[1], free, shadow_s, extra):
                    break  # (no job left waiting might start now)
        while i & 1:  # on to the next subtree to the right
            i >>= 1
        if i == 0:
            break
        i += 1
    return ns, extra


@kernel(inline=True)
def indexed_pass(now: float, free: int, queue: np.ndarray, n_pos: int, waiting: int,
                 h: int, procs: np.ndarray, est: np.ndarray, start: np.ndarray,
                 running: np.ndarray, n_run: int, size: int, wide: np.ndarray,
                 short: np.ndarray, started: np.ndarray, at: np.ndarray) -> tuple:
    """:func:`olsctl.policies.kernels.easy_pass` over a what-if's queue by position, in
    its fixed order (``queue[:n_pos]``, ``waiting`` of them waiting, the first at position
    ``h`` or after it): the jobs from the head start while they fit, then the blocked
    head's reservation (:func:`shadow_extra`) and :func:`backfill_indexed` behind it.
    Started jobs go to ``started`` in start order (their positions to ``at``), join
    ``running`` and leave the index. Returns (jobs started, running jobs, a position
    with no waiting job before it: the blocked head's, when it is reached). With fewer processors free than the narrowest waiting job needs
    (the index's root), nothing could start: the pass is skipped."""
    if free < wide[1] or waiting == 0:  # (free <= 0 among them: widths are >= 1)
        return 0, n_run, h
    k = 0
    while h < n_pos:
        j = queue[h]
        if start[j] == start[j]:  # started behind an earlier head: a hole
            h += 1
            continue
        if admit(procs[j], now, est[j], free, INF, 0) < 0:
            break
        started[k] = j
        at[k] = h
        k += 1
        free -= procs[j]
        n_run = insert_running(running, n_run, now + est[j], j)
        index_drop(wide, short, size, h)
        h += 1
    if h == n_pos:
        return k, n_run, h
    shadow_s, extra = shadow_extra(now, free, procs[queue[h]], running, n_run, procs)
    ns, _ = backfill_indexed(now, free, queue, h + 1, shadow_s, extra, procs, est, size,
                             wide, short, started[k:], at[k:])
    for i in range(k, k + ns):
        n_run = insert_running(running, n_run, now + est[started[i]], started[i])
    return k + ns, n_run, h


# -- what-ifs in WFP order: the queue kept in the last pass's order -----------------------
#
# WFP's keys grow with the wait, each at its own pace, so the order changes between
# passes, but little: each pass sorts the waiting jobs again from the order the last one
# found (insertion, a few moves a job), with keys that need no power (:func:`quick_key`),
# and lets the exact keys decide only where two quick keys are too close to tell apart.

#: how far apart (relatively) two of :func:`quick_key`'s WFP keys must be for their order
#: to be the order of :func:`olsctl.policies.kernels.order_key`'s: the cube by two
#: products and the cube by ``x ** 3.0`` differ by a few units in the last place (about
#: 1e-16 of the key), so 1e-12 is far beyond rounding
CUBE_TOL = 1e-12
#: an absolute margin besides, for keys so near zero that rounding is not relative
CUBE_TINY = 1e-290


@kernel(inline=True)
def quick_key(now: float, submit: float, p: int, est: float) -> float:
    """WFP's key (:func:`olsctl.policies.kernels.order_key`) with its cube taken by
    multiplication: within ``CUBE_TOL`` of the exact key, relatively."""
    x = (now - submit) / est
    return -(x * x * x) * p


@kernel(inline=True)
def keys_apart(a: float, b: float) -> bool:
    """Whether the finite quick keys ``a`` <= ``b`` surely order the exact keys alike."""
    scale = -a if a < 0.0 else a
    other = -b if b < 0.0 else b
    if other > scale:
        scale = other
    return b - a > CUBE_TOL * scale + CUBE_TINY


@kernel(inline=True)
def ranks_before(ka: float, ra: int, kb: float, rb: int) -> bool:
    """Whether a job with key ``ka`` and arrival rank ``ra`` comes before one with ``kb``
    and ``rb`` in :func:`olsctl.policies.kernels.ordered_queue`'s order: the smaller key
    first, NaN after every number (where numpy's sort puts it), ties in arrival order."""
    if ka != ka:
        return kb != kb and ra < rb
    if kb != kb or ka < kb:
        return True
    return ka == kb and ra < rb


@kernel
def rank_queue(code: int, now: float, order: np.ndarray, nq: int, rank: np.ndarray,
               key: np.ndarray, queue: np.ndarray, procs: np.ndarray, est: np.ndarray,
               submit: np.ndarray) -> None:
    """Put ``order[:nq]``, the waiting jobs in the order of the last pass, in WFP order at
    ``now``, exactly as :func:`olsctl.policies.kernels.ordered_queue` orders
    ``queue[:nq]`` (the same jobs in arrival order; ``rank`` gives each job's arrival
    rank, ``key`` is room for each job's key). Insertion from the last order by quick
    key, then each run of quick keys too close to tell apart (equal ones among them)
    in order by exact key and arrival rank; after more moves than a few per job, a
    stable sort of the quick keys in arrival order instead of the insertion, and with a
    key that is not finite, of the exact keys instead of both."""
    finite = True
    for i in range(nq):
        j = order[i]
        k = quick_key(now, submit[j], procs[j], est[j])
        key[j] = k
        if k - k != 0.0:  # inf or NaN
            finite = False
    if not finite:
        for i in range(nq):
            j = queue[i]
            key[j] = order_key(code, now, submit[j], procs[j], est[j])
        sort_by_key(order, nq, key, queue)
        return
    budget = 4 * nq + 16
    for i in range(1, nq):
        j = order[i]
        kj = key[j]
        s = i
        while s > 0 and key[order[s - 1]] > kj:
            order[s] = order[s - 1]
            s -= 1
        order[s] = j
        budget -= i - s
        if budget < 0:  # far from the last order: sorted afresh
            sort_by_key(order, nq, key, queue)
            break
    a = 0
    while a < nq - 1:  # runs of quick keys too close to tell apart: by the exact keys
        b = a
        while b + 1 < nq and not keys_apart(key[order[b]], key[order[b + 1]]):
            b += 1
        if b > a:
            for r in range(a, b + 1):
                j = order[r]
                key[j] = order_key(code, now, submit[j], procs[j], est[j])
            for r in range(a + 1, b + 1):
                j = order[r]
                s = r
                while s > a and ranks_before(key[j], rank[j], key[order[s - 1]],
                                             rank[order[s - 1]]):
                    order[s] = order[s - 1]
                    s -= 1
                order[s] = j
        a = b + 1


@kernel
def sort_by_key(order: np.ndarray, nq: int, key: np.ndarray, queue: np.ndarray) -> None:
    """``order[:nq]``: ``queue[:nq]`` (arrival order) sorted stably by ``key``."""
    keys = np.empty(nq)
    for i in range(nq):
        keys[i] = key[queue[i]]
    by_key = np.argsort(keys, kind="mergesort")
    for i in range(nq):
        order[i] = queue[by_key[i]]


@kernel
def ranked_pass(code: int, now: float, free: int, order: np.ndarray, nq: int,
                rank: np.ndarray, key: np.ndarray, queue: np.ndarray, procs: np.ndarray,
                est: np.ndarray, submit: np.ndarray, running: np.ndarray, n_run: int,
                started: np.ndarray) -> tuple:
    """:func:`olsctl.policies.kernels.easy_pass` in WFP order over ``order[:nq]``, the
    waiting jobs in the last pass's order (see :func:`rank_queue`; ``queue[:nq]`` holds
    them in arrival order). With no processor free, or no waiting job as narrow as
    the free ones, nothing could start: the queue is not ordered. Returns (jobs
    started, running jobs)."""
    if free <= 0 or nq == 0:
        return 0, n_run
    i = 0
    while i < nq and procs[order[i]] > free:
        i += 1
    if i == nq:
        return 0, n_run
    rank_queue(code, now, order, nq, rank, key, queue, procs, est, submit)
    ns, n_run, _, _, _ = easy_pass_over(now, free, order[:nq], procs, est, running, n_run,
                                        started)
    return ns, n_run


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


@kernel
def run_forward(code: int, procs: np.ndarray, est: np.ndarray, runtime: np.ndarray,
                submit: np.ndarray, start: np.ndarray, queue: np.ndarray,
                running: np.ndarray, heap_t: np.ndarray, heap_j: np.ndarray,
                started: np.ndarray, clock: np.ndarray, count: np.ndarray, seen: np.ndarray,
                bsld_s: float) -> bool:
    """The loop of :func:`easy_forward` (:func:`forward_loop`), with what it needs for
    this call: in a fixed order (all but WFP), the waiting jobs in that order, by
    position, with their index (see :func:`indexed_pass`); in WFP order, the waiting
    jobs in their order now, each job's arrival rank and room for its key (see
    :func:`ranked_pass`)."""
    nq = count[NQ]
    order = ordered_queue(code, clock[NOW], queue[:nq], procs, est, submit)
    if code == WFP:  # the order found last, each job's arrival rank and key
        size, wide, short = 0, np.empty(len(procs), dtype=np.int64), np.empty(len(procs))
        for i in range(nq):
            wide[queue[i]] = i
        at = np.empty(0, dtype=np.int64)
    else:
        size, wide, short = index_open(order, nq, procs, est)
        at = np.empty(nq, dtype=np.int64)
    return forward_loop(code, procs, est, runtime, submit, start, queue, running, heap_t,
                        heap_j, started, clock, count, seen, bsld_s, order, size, wide,
                        short, at)


@kernel(refcounts=False)
def forward_loop(code: int, procs: np.ndarray, est: np.ndarray, runtime: np.ndarray,
                 submit: np.ndarray, start: np.ndarray, queue: np.ndarray,
                 running: np.ndarray, heap_t: np.ndarray, heap_j: np.ndarray,
                 started: np.ndarray, clock: np.ndarray, count: np.ndarray,
                 seen: np.ndarray, bsld_s: float, order: np.ndarray, size: int,
                 wide: np.ndarray, short: np.ndarray, at: np.ndarray) -> bool:
    """:func:`run_forward`'s loop. At each instant: the completions due (the heap of
    true ends), then a wake under way (``WAKE_T``: ``WAKE_N`` processors active), then
    one pass if something happened (``DUE``). ``queue[:NQ]`` waits in arrival order;
    ``start`` gets each start. The arrays hold the whole run between calls. In a fixed
    order, ``order`` holds the waiting jobs by position, with their index (``size``,
    ``wide``, ``short``) and room for a pass's positions (``at``); in WFP order,
    ``order[:NQ]`` holds the waiting jobs in the last pass's order, ``wide`` each job's
    arrival rank and ``short`` room for each job's key. It allocates nothing (compiled
    without reference counts)."""
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
    # in a fixed order: nq counts the jobs still waiting, n_pos the positions, h the
    # head's
    fixed = code != WFP
    n_pos = nq if fixed else 0
    h = 0
    while True:
        if not at_bound:
            if due:
                due = 0
                if fixed:
                    ns, n_run, h = indexed_pass(now, active - busy, order, n_pos, nq, h,
                                                procs, est, start, running, n_run, size, wide,
                                                short, started, at)
                else:
                    ns, n_run = ranked_pass(code, now, active - busy, order, nq, wide, short,
                                            queue, procs, est, submit, running, n_run,
                                            started)
                if ns:
                    took, n_heap = note_starts(ns, started, now, start, procs, runtime,
                                               submit, heap_t, heap_j, n_heap, metric, acc,
                                               cnt, seen, bsld_s)
                    busy += took
                    if fixed:
                        nq -= ns
                    else:
                        still_waiting(order, nq, start, ns)
                        nq = still_waiting(queue, nq, start, ns)
            if nq == 0:
                break
        at_bound = False
        t = cut_or_next(metric, acc, cnt, seen, now, submit, clock, heap_t, n_heap, wake_t,
                        until)
        if t != t:  # NaN: the SLA bound cut the run short
            at_bound = cut = True
            break
        if t == INF:
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
    if fixed:  # the queue (arrival order) moves up behind the jobs started, as between
        still_waiting(queue, n_pos, start, n_pos - nq)  # calls it must
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


# -- scoring a what-if, and a tick's candidates in one call ------------------------------

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
def score_run(n: int, floats: np.ndarray, censor: bool, until: float, bsld_s: float,
              row: np.ndarray) -> None:
    """Score a what-if of n jobs that ran to its end (its ``floats``) into ``row``
    (:func:`score_columns`)."""
    score_columns(block(floats, START, n), block(floats, SUBMIT, n),
                  block(floats, RUNTIME, n), censor, until, bsld_s, row)


@kernel
def score_columns(start_s: np.ndarray, submit: np.ndarray, runtime: np.ndarray,
                  censor: bool, until: float, bsld_s: float, row: np.ndarray) -> np.ndarray:
    """Score a what-if that ran to its end (its jobs' columns) into ``row`` as
    :meth:`olsctl.controller.scoring.WhatIfRun._score` scores one without power: jobs
    still waiting are censored at ``until`` (``censor``: a horizon) or unstarted; then
    the mean and 95th percentile of the bounded slowdowns (1 + wait / max(runtime,
    ``bsld_s``)) and the mean and largest wait. Returns the bounded slowdowns (empty
    when there are none: no job, or one never started)."""
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
    wait = start - submit
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
def settle_row(code: int, n: int, ints: np.ndarray, floats: np.ndarray, seen: np.ndarray,
               censor: bool, bsld_s: float, row: np.ndarray) -> None:
    """Run a what-if on (:func:`easy_forward`) and write how it ended into ``row``."""
    tail = floats[FLOAT_BLOCKS * n + 2 * n:]
    if easy_forward(code, n, ints, floats, seen, bsld_s):
        row[ROW_STATUS] = OUT_CUT
        row[ROW_BOUND] = tail[VALUE]
        row[ROW_NOW] = tail[NOW]
    else:
        row[ROW_STATUS] = OUT_DONE
        row[ROW_NOW] = tail[NOW]
        score_run(n, floats, censor, tail[UNTIL], bsld_s, row)


@kernel
def easy_candidates(n: int, nr: int, procs: np.ndarray, est: np.ndarray,
                    runtime: np.ndarray, submit: np.ndarray, start_s: np.ndarray,
                    snap_active: int, now: float, until: float, metric: int,
                    bound_limit: float, codes: np.ndarray, machine: np.ndarray,
                    active: np.ndarray,
                    wake_n: np.ndarray, wake_t: np.ndarray, due: np.ndarray,
                    ints: np.ndarray, floats: np.ndarray, seen: np.ndarray, censor: bool,
                    bsld_s: float, sla: int, limit: float, first_met: bool,
                    then_closest: bool, out: np.ndarray) -> tuple:
    """A tick's EASY what-ifs, candidate by candidate: each starts from the template
    arrays :func:`template_open` makes of the snapshot's columns (the arguments up to
    ``bound_limit``, as :class:`olsctl.whatif.EasyTemplate` passes them) under its
    queue order ``codes[c]``, ``active[c]`` processors, a wake under way (``wake_n[c]``
    processors at ``wake_t[c]``; 0: none) and whether the snapshot instant's pass is due;
    one whose machine (``machine[c]`` processors) is narrower than a waiting job (of the
    ``n - nr`` after the running ones) is not run: those jobs can never start, and the
    row counts them as unstarted. Each runs in
    its row of ``ints``, ``floats``, ``seen`` (kept, to go on if cut short) and is scored
    into its row of ``out`` (:func:`settle_row`). With ``first_met``, stops after the
    first whose ``sla``-th score (``ROW_MEAN_BSLD`` + ``sla``) is at most ``limit``;
    when none is, with ``then_closest`` the closest is finished (:func:`closest`).
    Returns (how many ran or were skipped as too wide, how many times one went on)."""
    t_ints = np.empty(ints.shape[1], dtype=np.int64)
    t_floats = np.empty(floats.shape[1])
    t_seen = np.zeros(seen.shape[1], dtype=np.bool_)
    template_open(n, nr, procs, est, runtime, submit, start_s, snap_active, now, until,
                  metric, bound_limit, bsld_s, t_ints, t_floats, t_seen)
    at = INT_BLOCKS * n
    tail = FLOAT_BLOCKS * n + 2 * n
    widest = 0
    for j in range(nr, n):
        if procs[j] > widest:
            widest = procs[j]
    for c in range(len(codes)):
        row = out[c]
        if widest > machine[c]:
            row[ROW_STATUS] = OUT_WIDE
            too_wide = 0
            for j in range(nr, n):
                if procs[j] > machine[c]:
                    too_wide += 1
            row[ROW_UNSTARTED] = too_wide
            continue
        ci, cf = ints[c], floats[c]
        ci[:] = t_ints
        cf[:] = t_floats
        seen[c, :] = t_seen
        ci[at + ACTIVE] = active[c]
        ci[at + WAKE_N] = wake_n[c]
        ci[at + DUE] = due[c]
        cf[tail + WAKE_T] = wake_t[c]
        settle_row(codes[c], n, ci, cf, seen[c], censor, bsld_s, row)
        if (first_met and row[ROW_STATUS] == OUT_DONE and row[ROW_UNSTARTED] == 0
                and row[ROW_MEAN_BSLD + sla] <= limit):
            return c + 1, 0
    count = len(codes)
    if not then_closest:
        return count, 0
    done = np.empty(count, dtype=np.bool_)
    value = np.empty(count)
    rows_scored(out, sla, done, value)
    return count, closest(n, ints, floats, seen, codes, censor, bsld_s, sla, done, value,
                          machine, np.arange(count), out, np.zeros(count, dtype=np.bool_))


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
def closest(n: int, ints: np.ndarray, floats: np.ndarray, seen: np.ndarray,
            codes: np.ndarray, censor: bool, bsld_s: float, sla: int, done: np.ndarray,
            value: np.ndarray, active: np.ndarray, row: np.ndarray, out: np.ndarray,
            moved: np.ndarray) -> int:
    """No trial meets the SLA: find the closest as
    :func:`olsctl.controller.search._complete_closest` does, the what-ifs cut short
    being rows of one batch (:func:`easy_candidates`). Trial ``i`` ran to its end
    (``done``) or holds the bound that cut it short, its ``sla`` score or bound in
    ``value``, its machine in ``active``, its row in ``row`` (-1: not in the batch, then
    complete). Repeatedly: the best complete score; among the trials cut short with a
    bound at most that, the lowest bound (ties: the larger machine, then the first) goes
    on, cut short again above the best (with none complete, to its end). Updates
    ``done``, ``value`` and the rows' ``out``; sets ``moved`` for the trials that went on;
    returns how many times one went on."""
    at = INT_BLOCKS * n
    tail = FLOAT_BLOCKS * n + 2 * n
    went_on = 0
    while True:
        pick, best = closest_pick(done, value, active)
        if pick < 0:
            return went_on
        r = row[pick]
        if best == INF:
            ints[r, at + METRIC] = 0
        else:
            floats[r, tail + LIMIT] = best
        settle_row(codes[r], n, ints[r], floats[r], seen[r], censor, bsld_s, out[r])
        went_on += 1
        moved[pick] = True
        went_to(out[r], sla, pick, done, value)


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
    # a tick's candidates from a template, as olsctl.controller.easy_batch runs them
    procs = np.array([2, 2, 4], dtype=np.int64)
    est = np.array([10.0, 5.0, 10.0])
    k.template_open(n, 1, procs, est, est, np.zeros(n), np.zeros(n), 4, 0.0, INF,
                    MEAN_BSLD, 1.0, 10.0, ints, floats, seen)
    two = np.ones(2, dtype=np.int64)
    out = np.zeros((2, N_ROW))
    k.easy_candidates(n, 1, procs, est, est, np.zeros(n), np.zeros(n), 4, 0.0, INF,
                      MEAN_BSLD, 1.0, two, np.array([1, 4], np.int64),
                      4 * two, 0 * two, np.full(2, INF), two, np.empty((2, ints.size), np.int64),
                      np.empty((2, floats.size)), np.empty((2, n), np.bool_), False, 10.0,
                      0, 1.0, True, True, out)
    k.settle_row(WFP, n, ints, floats, seen, True, 10.0, out[0])
    k.closest(n, np.empty((2, ints.size), np.int64), np.empty((2, floats.size)),
              np.empty((2, n), np.bool_), two, False, 10.0, 0, np.ones(2, np.bool_),
              np.ones(2), two, two, out, np.zeros(2, np.bool_))
    # SLA feedback's realized metric (olsctl.feedback), which a controller takes each tick
    # (code 0: the mean bounded slowdown; the code is a value, not a type)
    k.window_metric(0, np.zeros(n), np.zeros(n), est, est, 1.0, 10.0, np.empty(n))
