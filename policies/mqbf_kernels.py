"""MQBF's decisions as plain Python kernels over arrays (see :mod:`olsctl.policies.jit`).

Here belong one multiple-queue backfilling pass (:func:`mqbf_pass`, the rules of
MQBF.md: queues by estimate boundaries, partitions by largest-remainder shares of the
active processors, a free-processor profile per partition over future time, Phase A in
the order of the queue heads, Phase B over the rest, borrowing lowest index first) and
the what-if loop that runs a snapshot forward with it (:func:`mqbf_forward`, as
:func:`olsctl.whatif.steps` runs one: completions, then a wake under way, then one pass,
at each instant). :mod:`olsctl.mqbf_whatif` fills the arrays and reads them back.

Every pass is a full pass: the profiles are built from the running jobs, and each
pivot's reservation is made when the pivot is made, in pivot order. Phase B walks an
index over the queue's positions (:func:`mqbf_indexed_phases`): in the main simulator
built for the pass, in a what-if once per call of the loop. The functions only
index numpy arrays and call other kernels, so their compiled copies run them as they are.

Data (n jobs, K partitions): job columns ``procs``, ``est``, ``runtime``, ``submit``,
``start`` (NaN while waiting) and ``queue_of`` (the job's queue, 0-based), indexed by
job; ``alloc[j, p]`` the processors running job ``j`` holds from partition ``p`` and
``held[p]`` their sum over the running jobs; ``running[k] = (expected end, job)`` in
(end, job) order. A pass's profile is ``times[:m]`` (segment i starts at ``times[i]``,
the last one is unbounded; ``times[0]`` is now) and ``free[p, i]``, partition p's free
processors on segment i; ``room`` holds its segment count, the active processors not
in use and what a job can get now (:data:`SEGMENTS`, :data:`IDLE`, :data:`ROOM`).
"""

from __future__ import annotations

import numpy as np

from olsctl.policies.forward import (ACTIVE, AT_BOUND, BOUND_COUNTS, BUSY, DUE, FINISHES,
                                     LIMIT, METRIC, N_CLOCK, N_ROW, NHEAP, NOW, NQ, NRUN,
                                     OUT_CUT, OUT_DONE, OUT_WIDE, ROW_BOUND, ROW_MEAN_BSLD,
                                     ROW_NOW, ROW_STATUS, ROW_UNSTARTED, UNTIL, VALUE, WAKE_N,
                                     WAKE_T, closest_pick, cut_or_next, heap_pop, heap_push,
                                     index_drop, index_open, note_starts, rank_queue,
                                     rows_scored, score_columns, still_waiting, went_to)
from olsctl.policies.jit import kernel
from olsctl.policies.kernels import (INF, WFP, bound_open, insert_running, order_into,
                                     remove_running)

#: slots of a pass's ``room`` array: segments in the profile, active processors not in
#: use, the most processors any job can get now (the free count of MQBF.md's TryStart:
#: the positive free counts of the partitions, no more than the idle ones), how many
#: segments' running minima are current (:func:`running_minima`), and the first segment
#: through which no processor stays free (:func:`first_empty`; -1: not known)
SEGMENTS, IDLE, ROOM, MINIMA, EMPTY = 0, 1, 2, 3, 4
N_ROOM = 5


# -- partitions and queues -------------------------------------------------------------


@kernel
def partition_counts(weights: np.ndarray, total: int, owned: np.ndarray) -> None:
    """Split ``total`` processors in proportion to the integer ``weights`` into
    ``owned``: floors, then one more for the largest remainders, ties to the lowest
    index (:func:`olsctl.policies.mqbf.largest_remainder` over exact fractions;
    the weights are the shares scaled to integers by a common denominator)."""
    k = len(weights)
    wsum = 0
    for p in range(k):
        wsum += weights[p]
    rest = np.empty(k, dtype=np.int64)
    left = total
    for p in range(k):
        x = total * weights[p]
        owned[p] = x // wsum
        rest[p] = x % wsum
        left -= owned[p]
    for _ in range(left):
        best = -1
        for p in range(k):
            if rest[p] >= 0 and (best < 0 or rest[p] > rest[best]):
                best = p
        owned[best] += 1
        rest[best] = -1


@kernel
def queue_indices(bounds: np.ndarray, est: np.ndarray, queue_of: np.ndarray) -> None:
    """Each job's queue: the smallest k with estimate < ``bounds[k]``, else the last
    (``bisect_right`` of the estimate in the increasing boundaries, s)."""
    for j in range(len(est)):
        q = 0
        while q < len(bounds) and bounds[q] <= est[j]:
            q += 1
        queue_of[j] = q


# -- the free-processor profiles of one pass -------------------------------------------


@kernel
def profile_build(now: float, now_free: np.ndarray, running: np.ndarray, n_run: int,
                  alloc: np.ndarray, times: np.ndarray, free: np.ndarray) -> int:
    """Fill the profile from the running jobs: now, each partition's ``now_free``; at
    each distinct expected end, what the jobs ending then hold goes back to its owners.
    A job still running at or past its expected end (a power limit stretched it) gives
    its processors back just after now (the next float), never now. Returns the number
    of segments."""
    k = len(now_free)
    times[0] = now
    for p in range(k):
        free[p, 0] = now_free[p]
    m = 1
    soon = np.nextafter(now, INF)
    for r in range(n_run):
        t = running[r, 0]
        if t <= now:
            t = soon
        if m == 1 or t != times[m - 1]:
            times[m] = t
            for p in range(k):
                free[p, m] = free[p, m - 1]
            m += 1
        j = np.int64(running[r, 1])
        for p in range(k):
            free[p, m - 1] += alloc[j, p]
    return m


@kernel
def segment_after(times: np.ndarray, m: int, t: float, lo: int) -> int:
    """The first segment of ``times[lo:m]`` starting at or after ``t`` (``m`` if none):
    how many segments a window ending at ``t`` covers, counted from 0."""
    hi = m
    while lo < hi:
        mid = (lo + hi) // 2
        if times[mid] < t:
            lo = mid + 1
        else:
            hi = mid
    return lo


@kernel
def profile_split(times: np.ndarray, free: np.ndarray, m: int, t: float) -> tuple:
    """Make ``t`` (at or after now) a segment start, the new segment a copy of the one
    ``t`` falls in. Returns (the index of the segment starting at ``t``, the new segment
    count); the arrays must have room for one more."""
    i = segment_after(times, m, t, 0)
    if i < m and times[i] == t:
        return i, m
    for s in range(m, i, -1):
        times[s] = times[s - 1]
        for p in range(free.shape[0]):
            free[p, s] = free[p, s - 1]
    times[i] = t
    for p in range(free.shape[0]):
        free[p, i] = free[p, i - 1]
    return i, m + 1


@kernel
def profile_take(times: np.ndarray, free: np.ndarray, m: int, start: float, end: float,
                 procs: np.ndarray) -> int:
    """Take ``procs[p]`` processors of each partition p over [``start``, ``end``), both at
    or after now; returns the new segment count."""
    a, m = profile_split(times, free, m, start)
    b, m = profile_split(times, free, m, end)
    for p in range(free.shape[0]):
        n = procs[p]
        if n:
            for i in range(a, b):
                free[p, i] -= n
    return m


@kernel
def segment_holds(free: np.ndarray, i: int, q: int, w: int, borrow: bool) -> bool:
    """Whether segment ``i`` alone has room for a job of width ``w`` from queue ``q``: its
    own partition has ``w`` free there or, with ``borrow``, all partitions' positive
    free counts together are ``w``."""
    if free[q, i] >= w:
        return True
    if not borrow:
        return False
    gather = 0
    for p in range(free.shape[0]):
        if free[p, i] > 0:
            gather += free[p, i]
    return gather >= w


@kernel
def window_fits(free: np.ndarray, lo: int, hi: int, q: int, w: int, borrow: bool,
                mins: np.ndarray) -> int:
    """Whether a job of width ``w`` from queue ``q`` fits over segments [``lo``, ``hi``):
    its own partition's least free count there is at least ``w`` or, with ``borrow``,
    the positive least free counts of all partitions together are (what
    :func:`partition_allocation` needs). Returns -1 when it fits, ``mins`` then holding
    each partition's least free count over the segments; else the first segment after
    which it cannot fit (the least counts only fall as segments are added), where the
    scan stopped."""
    k = free.shape[0]
    for p in range(k):
        mins[p] = free[p, lo]
    for i in range(lo, hi):
        for p in range(k):
            if free[p, i] < mins[p]:
                mins[p] = free[p, i]
        if mins[q] < w:
            if not borrow:
                return i
            gather = 0
            for p in range(k):
                if mins[p] > 0:
                    gather += mins[p]
            if gather < w:
                return i
    return -1


@kernel
def running_minima(free: np.ndarray, lo: int, hi: int, least: np.ndarray) -> int:
    """Extend the running minima through segments [``lo``, ``hi``), given those before
    ``lo``: ``least[p, i]``, the least of ``free[p, :i + 1]`` (partition p's free count
    over a run from now through segment i), and in the last row ``least[K, i]``, the sum
    of those that are positive (what borrowing can gather over that run). Returns
    ``hi``, the segments now current."""
    k = free.shape[0]
    for i in range(lo, hi):
        total = 0
        for p in range(k):
            low = free[p, i]
            if i > 0 and least[p, i - 1] < low:
                low = least[p, i - 1]
            least[p, i] = low
            if low > 0:
                total += low
        least[k, i] = total
    return hi


@kernel
def first_empty(free: np.ndarray, least: np.ndarray, room: np.ndarray) -> int:
    """The first segment i over which no partition keeps a processor free from now
    through it (``least[K, i]``, the positive running minima's sum, is 0), extending the
    running minima only as far as that; the segment count if there is none. A job whose
    run covers that segment fits nowhere, borrowing or not. Kept in ``room[EMPTY]``
    until the profile changes (a start or a reservation)."""
    if room[EMPTY] >= 0:
        return room[EMPTY]
    m = room[SEGMENTS]
    k = free.shape[0]
    i = 0
    while i < m:
        if i == room[MINIMA]:  # (in chunks growing twice as long)
            room[MINIMA] = running_minima(free, i, min(m, 2 * i + 8), least)
        if least[k, i] <= 0:
            break
        i += 1
    room[EMPTY] = i
    return i


@kernel
def positive_sum(values: np.ndarray) -> int:
    """The sum of the positive values: what borrowing could gather from them."""
    total = 0
    for v in values:
        if v > 0:
            total += v
    return total


@kernel
def room_now(now_free: np.ndarray, idle: int) -> int:
    """The most processors a job can get now: the partitions' positive free counts, no
    more than the active processors not in use (a machine shrunk below its busy count
    starts nothing)."""
    total = positive_sum(now_free)
    return total if total < idle else idle


@kernel
def partition_allocation(q: int, w: int, mins: np.ndarray, borrow: bool,
                         got: np.ndarray) -> bool:
    """Processors per partition (into ``got``) for a job of width ``w`` from queue ``q``
    given each partition's least free count over its run: all from its own partition if
    it has them; else, with ``borrow``, what its own has, then the others', lowest index
    first. False when it does not fit."""
    for p in range(len(mins)):
        got[p] = 0
    own = mins[q]
    if own >= w:
        got[q] = w
        return True
    if not borrow:
        return False
    need = w
    if own > 0:
        got[q] = own
        need -= own
    for p in range(len(mins)):
        m = mins[p]
        if p != q and m > 0:
            take = m if m < need else need
            got[p] = take
            need -= take
            if need == 0:
                return True
    return False


# -- TryStart and TryReserve -------------------------------------------------------------
#
# TryStart of a job of width w, estimate d, queue q is split in two. The test is written
# in the pass itself, as calls passing many arrays cost more than the test: the job's run
# [now, now + d) covers segments 0 .. last; it fits (:func:`fits`) when its own
# partition's running minimum through ``last`` is at least w, or, with borrowing, the
# positive minima of all partitions together are; then :func:`mqbf_start` takes it.


@kernel
def fits(w: int, own: int, gather: int, borrow: bool) -> bool:
    """TryStart's test for a job of width ``w``: its own partition has ``w`` free over its
    run (``own``, the partition's least free count), or, with ``borrow``, all partitions
    together have (``gather``, the sum of their positive least free counts): exactly
    when :func:`partition_allocation` finds its processors."""
    return own >= w or (borrow and gather >= w)


@kernel
def mqbf_start(now: float, q: int, w: int, d: float, last: int, borrow: bool,
               times: np.ndarray, free: np.ndarray, least: np.ndarray, room: np.ndarray,
               now_free: np.ndarray, mins: np.ndarray, got: np.ndarray) -> None:
    """Start a job of width ``w``, estimate ``d`` (s), queue ``q`` that :func:`fits` over
    segments 0 .. ``last``: its processors per partition (``got``) are taken from the
    profile, ``now_free`` and ``room``; no running minimum stays current."""
    for p in range(len(mins)):
        mins[p] = least[p, last]
    partition_allocation(q, w, mins, borrow, got)
    room[SEGMENTS] = profile_take(times, free, room[SEGMENTS], now, now + d, got)
    room[MINIMA] = 0
    room[EMPTY] = -1
    for p in range(len(now_free)):
        now_free[p] -= got[p]
    room[IDLE] -= w
    room[ROOM] = room_now(now_free, room[IDLE])


@kernel
def mqbf_reserve(q: int, w: int, d: float, borrow: bool, times: np.ndarray,
                 free: np.ndarray, room: np.ndarray, mins: np.ndarray,
                 got: np.ndarray) -> float:
    """TryReserve of a blocked head (width ``w``, estimate ``d``, queue ``q``): the
    earliest segment start s at which it fits over [s, s + d), its own partition first
    at each s, then borrowing; the reservation (``got`` per partition) is taken from the
    profile, after which the running minima are current only before s. Returns s (inf:
    it never fits, and nothing is reserved)."""
    m = room[SEGMENTS]
    k = free.shape[0]
    i = 0
    while i < m:
        if free[q, i] < w:  # (segment_holds, written out: it is asked of most segments)
            if not borrow:
                i += 1
                continue
            gather = 0
            for p in range(k):
                if free[p, i] > 0:
                    gather += free[p, i]
            if gather < w:
                i += 1
                continue
        s = times[i]
        stop = segment_after(times, m, s + d, i + 1)
        short = window_fits(free, i, stop, q, w, borrow, mins)
        if short < 0:
            partition_allocation(q, w, mins, borrow, got)
            room[SEGMENTS] = profile_take(times, free, m, s, s + d, got)
            room[MINIMA] = min(room[MINIMA], i)
            room[EMPTY] = -1
            return s
        # the windows of the later starts up to segment ``short`` cover it too: when it
        # cannot hold the job alone, none of them fits
        i = i + 1 if segment_holds(free, short, q, w, borrow) else short + 1
    return INF


# -- one pass ------------------------------------------------------------------------------


@kernel
def mqbf_pass(code: int, borrow: bool, now: float, active: int, busy: int,
              queue: np.ndarray, procs: np.ndarray, est: np.ndarray, submit: np.ndarray,
              queue_of: np.ndarray, owned: np.ndarray, held: np.ndarray,
              running: np.ndarray, n_run: int, alloc: np.ndarray, times: np.ndarray,
              free: np.ndarray, pivot_s: np.ndarray, pivot_j: np.ndarray,
              started: np.ndarray) -> tuple:
    """One MQBF pass over ``queue`` (the waiting jobs in arrival order) put in order
    ``code``, with ``owned[p]`` processors in partition p of ``active``, ``busy`` in use.

    Phase A takes the queues in the order of their heads: each starts jobs from its
    head while they fit, and its first job that does not becomes the queue's pivot with
    a reservation (the pivot in ``pivot_j[q]``, its start, or inf, in ``pivot_s[q]``;
    -1 and NaN for a queue without a pivot). Phase B tries every other job,
    all queues merged in order. The jobs started go to ``started`` in start order, with
    their allocations in ``alloc`` and ``held``, and join ``running``. Returns (jobs
    started, running jobs). A pass in which no waiting job is narrow enough for the idle
    processors changes nothing (:func:`pass_opens`).

    This is :func:`mqbf_phases` with its scratch made for the one pass (the what-if
    loop makes it once for all its passes)."""
    if not pass_opens(active - busy, narrowest_of(queue, procs), pivot_s, pivot_j):
        return 0, n_run
    k = len(owned)
    nq = len(queue)
    return mqbf_phases(code, borrow, now, active - busy, queue, procs, est, submit,
                       queue_of, owned, held, running, n_run, alloc, times, free, pivot_s,
                       pivot_j, started, np.empty((2, nq), dtype=np.int64),
                       np.empty(nq, dtype=np.bool_), pass_parts(k),
                       np.empty((k + 1, free.shape[1]), dtype=np.int64),
                       np.empty(0, dtype=np.int64), np.empty(0))


@kernel
def pass_parts(k: int) -> np.ndarray:
    """Per-partition scratch for passes with ``k`` partitions (:func:`mqbf_phases`)."""
    return np.empty((N_PARTS, max(k, N_ROOM)), dtype=np.int64)


@kernel
def narrowest_of(queue: np.ndarray, procs: np.ndarray) -> int:
    """The fewest processors a job of ``queue`` asks for (0 for an empty queue)."""
    if len(queue) == 0:
        return 0
    narrowest = procs[queue[0]]
    for i in range(1, len(queue)):
        if procs[queue[i]] < narrowest:
            narrowest = procs[queue[i]]
    return narrowest


@kernel
def pass_opens(idle: int, narrowest: int, pivot_s: np.ndarray,
               pivot_j: np.ndarray) -> bool:
    """Clear the pivots of a pass with ``idle`` processors not in use; whether the pass
    can change anything: something waits (``narrowest`` > 0, the narrowest waiting
    job's width) and it is no wider than the idle processors."""
    for q in range(len(pivot_s)):
        pivot_s[q] = np.nan
        pivot_j[q] = -1
    return idle > 0 and 0 < narrowest <= idle


#: rows of a pass's per-partition scratch (:func:`mqbf_phases`' ``parts``): each queue's
#: first position in the ordered queue (-1: none), the queues in the order of their
#: heads, each partition's free processors now, each one's least free count over a
#: window, a job's processors per partition, and the ``room`` slots (:data:`SEGMENTS`
#: ...)
P_HEAD, P_HEADS, P_NOW_FREE, P_MINS, P_GOT, P_ROOM = 0, 1, 2, 3, 4, 5
N_PARTS = 6


@kernel
def mqbf_phases(code: int, borrow: bool, now: float, idle: int, queue: np.ndarray,
                procs: np.ndarray, est: np.ndarray, submit: np.ndarray,
                queue_of: np.ndarray, owned: np.ndarray, held: np.ndarray,
                running: np.ndarray, n_run: int, alloc: np.ndarray, times: np.ndarray,
                free: np.ndarray, pivot_s: np.ndarray, pivot_j: np.ndarray,
                started: np.ndarray, order: np.ndarray, done: np.ndarray,
                parts: np.ndarray, least: np.ndarray, rank: np.ndarray,
                key: np.ndarray) -> tuple:
    """Phases A and B of :func:`mqbf_pass` once :func:`pass_opens` said the pass can
    change something (``idle`` processors not in use), with scratch for it: ``order``
    (2 rows of at least ``len(queue)``: the jobs in order ``code``, and for each
    position the next position of the same queue, -1 for none), ``done`` (as many),
    ``parts`` (:data:`N_PARTS` rows of K, or of :data:`N_ROOM` if that is more) and
    ``least`` (K + 1 rows as long as ``free``'s, :func:`running_minima`). It orders and
    links the queue and builds the index of its positions for this pass, then runs
    :func:`mqbf_indexed_phases`. A what-if in WFP order passes each job's arrival
    ``rank`` and room for its ``key``: ``order[0]`` then holds the waiting jobs in the
    last pass's order, and is sorted again from it
    (:func:`olsctl.policies.forward.rank_queue`); else both are empty and the queue is
    put in order afresh."""
    k = len(owned)
    nq = len(queue)
    ordered = order[0]
    after = order[1]
    if rank.size:
        rank_queue(code, now, ordered, nq, rank, key, queue, procs, est, submit)
    else:
        order_into(code, now, queue, procs, est, submit, ordered)
    link_queues(ordered, nq, queue_of, parts[P_HEAD, :k], after)
    done[:nq] = False  # Phase A's jobs, by position: started or pivots
    size, wide, short = index_open(ordered, nq, procs, est)
    return mqbf_indexed_phases(borrow, now, idle, ordered, after, done, procs, est,
                               queue_of, owned, held, running, n_run, alloc, times, free,
                               pivot_s, pivot_j, started, parts, least, size, wide, short)


@kernel
def link_queues(ordered: np.ndarray, n: int, queue_of: np.ndarray, head: np.ndarray,
                after: np.ndarray) -> None:
    """Each queue's jobs among ``ordered[:n]``, in that order: its first position in
    ``head`` (-1: none), then the next position of the same queue ``after`` each one
    (-1: the last)."""
    for q in range(len(head)):
        head[q] = -1
    for i in range(n - 1, -1, -1):
        q = queue_of[ordered[i]]
        after[i] = head[q]
        head[q] = i


@kernel(inline=True)
def phase_a(borrow: bool, now: float, idle: int, ordered: np.ndarray, after: np.ndarray,
            done: np.ndarray, procs: np.ndarray, est: np.ndarray, owned: np.ndarray,
            held: np.ndarray, running: np.ndarray, n_run: int, alloc: np.ndarray,
            times: np.ndarray, free: np.ndarray, pivot_s: np.ndarray, pivot_j: np.ndarray,
            started: np.ndarray, parts: np.ndarray, least: np.ndarray, size: int,
            wide: np.ndarray, short: np.ndarray) -> tuple:
    """A pass's profile (in ``parts``' rows and ``least``), then Phase A over the jobs
    by position (``ordered``; each queue's first waiting position in ``parts[P_HEAD]``,
    then ``after`` each one, passing over positions ``done``: jobs Phase B started in an
    earlier pass): the queues in the order of their heads, each starting jobs from its
    head while they fit, its first job that does not becoming its pivot, reserved, and
    its head. The jobs started and the pivots are marked ``done``, and the jobs
    started leave the index (``size``, ``wide``, ``short``: see
    :func:`olsctl.policies.forward.index_open`). Returns (jobs started, running
    jobs)."""
    k = len(owned)
    head = parts[P_HEAD, :k]
    # the queues in the order of their heads
    heads = parts[P_HEADS]
    n_heads = 0
    for q in range(k):
        if head[q] >= 0:
            h = n_heads
            while h > 0 and head[heads[h - 1]] > head[q]:
                heads[h] = heads[h - 1]
                h -= 1
            heads[h] = q
            n_heads += 1
    # the profile
    now_free = parts[P_NOW_FREE, :k]
    for p in range(k):
        now_free[p] = owned[p] - held[p]
    room = parts[P_ROOM]
    room[IDLE] = idle
    room[ROOM] = room_now(now_free, idle)
    room[SEGMENTS] = profile_build(now, now_free, running, n_run, alloc, times, free)
    room[MINIMA] = 0
    room[EMPTY] = -1
    mins = parts[P_MINS, :k]
    got = parts[P_GOT, :k]
    ns = 0
    for h in range(n_heads):
        q = heads[h]
        g = head[q]
        while g >= 0:
            j = ordered[g]
            if procs[j] > room[ROOM]:
                break
            last = segment_after(times, room[SEGMENTS], now + est[j], 1) - 1
            if last >= room[MINIMA]:
                room[MINIMA] = running_minima(free, room[MINIMA], last + 1, least)
            if not fits(procs[j], least[q, last], least[k, last], borrow):
                break
            mqbf_start(now, q, procs[j], est[j], last, borrow, times, free, least, room,
                       now_free, mins, got)
            started[ns] = j
            ns += 1
            done[g] = True
            index_drop(wide, short, size, g)
            n_run = hold_job(j, now + est[j], got, alloc, held, running, n_run)
            g = after[g]
            while g >= 0 and done[g]:
                g = after[g]
        head[q] = g
        if g >= 0:
            done[g] = True
            j = ordered[g]
            pivot_j[q] = j
            pivot_s[q] = mqbf_reserve(q, procs[j], est[j], borrow, times, free, room, mins,
                                      got)
    return ns, n_run


@kernel(inline=True)
def try_backfill(borrow: bool, now: float, j: int, procs: np.ndarray, est: np.ndarray,
                 queue_of: np.ndarray, times: np.ndarray, free: np.ndarray,
                 least: np.ndarray, room: np.ndarray, now_free: np.ndarray,
                 mins: np.ndarray, got: np.ndarray) -> bool:
    """Phase B's try of job ``j``, neither started nor a pivot and no wider than what a
    job can get now, in the pass whose profile and scratch are ``times`` to ``got`` (the
    rows of :func:`mqbf_phases`' ``parts``): it starts (:func:`mqbf_start`, its
    processors per partition in ``got``) unless its run would need a processor where
    none is left (:func:`first_empty`) or it does not fit (:func:`fits`)."""
    k = free.shape[0]
    empty = room[EMPTY]
    if empty < 0:  # (a call passes arrays: only when not known)
        empty = first_empty(free, least, room)
    if empty < room[SEGMENTS] and now + est[j] > times[empty]:
        return False  # its run would need a processor where none is left
    q = queue_of[j]
    last = segment_after(times, room[SEGMENTS], now + est[j], 1) - 1
    if last >= room[MINIMA]:
        room[MINIMA] = running_minima(free, room[MINIMA], last + 1, least)
    if not fits(procs[j], least[q, last], least[k, last], borrow):
        return False
    mqbf_start(now, q, procs[j], est[j], last, borrow, times, free, least, room,
               now_free, mins, got)
    return True


@kernel(inline=True)
def mqbf_indexed_phases(borrow: bool, now: float, idle: int, ordered: np.ndarray,
                        after: np.ndarray, done: np.ndarray, procs: np.ndarray,
                        est: np.ndarray, queue_of: np.ndarray, owned: np.ndarray,
                        held: np.ndarray, running: np.ndarray, n_run: int,
                        alloc: np.ndarray, times: np.ndarray, free: np.ndarray,
                        pivot_s: np.ndarray, pivot_j: np.ndarray, started: np.ndarray,
                        parts: np.ndarray, least: np.ndarray, size: int,
                        wide: np.ndarray, short: np.ndarray) -> tuple:
    """Phases A and B (:func:`phase_a`, then Phase B) over the queue by position in
    its order (``ordered``, the jobs started in earlier passes ``done``; each queue's
    first position in ``parts[P_HEAD]``, and ``after`` each one), with the index of its
    waiting jobs (``size``, ``wide``, ``short``): :func:`mqbf_phases` makes these for
    its one pass, a what-if's loop once per call for all its passes. Phase B walks the
    index and goes down only into subtrees whose narrowest width and shortest estimate
    might pass: no wider than what a job can get now, a run ending no later than the
    first segment with no processor left (:func:`first_empty`, a test without a search),
    and no wider than what all partitions together keep free over the run
    (``least[K, last]``, the most :func:`fits` can find, borrowing or not). Widths and
    ``now + est`` only grow, and that sum only falls as a run grows longer, so a subtree
    failing any of them holds no job Phase B would start. Started jobs leave the index;
    pivots are marked ``done`` for the pass only."""
    k = len(owned)
    ns, n_run = phase_a(borrow, now, idle, ordered, after, done, procs, est, owned, held,
                        running, n_run, alloc, times, free, pivot_s, pivot_j, started,
                        parts, least, size, wide, short)
    room = parts[P_ROOM]
    now_free, mins, got = parts[P_NOW_FREE, :k], parts[P_MINS, :k], parts[P_GOT, :k]
    i = 1  # from the root, left to right
    while True:
        if room[ROOM] <= 0:
            break
        go = wide[i] <= room[ROOM]
        if go:
            end = now + short[i]
            empty = room[EMPTY]
            if empty < 0:
                empty = first_empty(free, least, room)
            go = not (empty < room[SEGMENTS] and end > times[empty])
            if go:
                last = segment_after(times, room[SEGMENTS], end, 1) - 1
                if last >= room[MINIMA]:
                    room[MINIMA] = running_minima(free, room[MINIMA], last + 1, least)
                go = wide[i] <= least[k, last]
        if go:
            if i < size:  # a subtree that may hold one: its left half first
                i = 2 * i
                continue
            g = i - size
            j = ordered[g]
            if not done[g] and try_backfill(borrow, now, j, procs, est, queue_of, times,
                                            free, least, room, now_free, mins, got):
                started[ns] = j
                ns += 1
                done[g] = True
                index_drop(wide, short, size, g)
                n_run = hold_job(j, now + est[j], got, alloc, held, running, n_run)
        while i & 1:  # on to the next subtree to the right
            i >>= 1
        if i == 0:
            break
        i += 1
    head = parts[P_HEAD, :k]
    for q in range(k):  # the pivots wait on
        if pivot_j[q] >= 0:
            done[head[q]] = False
    return ns, n_run


@kernel
def hold_job(j: int, end: float, got: np.ndarray, alloc: np.ndarray, held: np.ndarray,
          running: np.ndarray, n_run: int) -> int:
    """Job ``j`` starts, expected to end at ``end``, holding ``got`` per partition;
    returns the new count of running jobs."""
    for p in range(len(got)):
        alloc[j, p] = got[p]
        held[p] += got[p]
    return insert_running(running, n_run, end, j)


# -- the what-if loop ----------------------------------------------------------------------


@kernel
def mqbf_open(n_run: int, procs: np.ndarray, est: np.ndarray, runtime: np.ndarray,
              submit: np.ndarray, start: np.ndarray, alloc: np.ndarray, held: np.ndarray,
              running: np.ndarray, heap_t: np.ndarray, heap_j: np.ndarray,
              count: np.ndarray, clock: np.ndarray, seen: np.ndarray,
              bsld_s: float) -> None:
    """Complete a what-if's arrays once the caller has filled the job columns, the
    allocations of the running jobs (jobs 0 .. ``n_run`` - 1, started at ``start``),
    the counters (:data:`olsctl.policies.forward.ACTIVE` and after: active processors,
    processors of a wake under way, pass due, the SLA metric) and the clock (now, the
    wake's time, the horizon, the SLA limit): the running jobs in (expected end, job)
    order, what they hold per partition and in all, the heap of their true ends
    (start + runtime) and, with a metric, the SLA bound (:func:`bound_open`)."""
    busy = 0
    for p in range(len(held)):
        held[p] = 0
    n = 0
    for j in range(n_run):
        busy += procs[j]
        for p in range(len(held)):
            held[p] += alloc[j, p]
        n = insert_running(running, n, start[j] + est[j], j)
        heap_push(heap_t, heap_j, j, start[j] + runtime[j], j)
    count[BUSY] = busy
    count[NRUN] = n_run
    count[NHEAP] = n_run
    count[AT_BOUND] = 0
    count[FINISHES] = 0
    if count[METRIC]:
        run_job = np.empty(n_run, dtype=np.int64)
        for k in range(n_run):
            run_job[k] = np.int64(running[k, 1])
        bound_open(count[METRIC], clock[N_CLOCK:], count[BOUND_COUNTS:], seen, clock[NOW],
                   run_job, start, submit, runtime, bsld_s)


@kernel
def mqbf_forward(code: int, borrow: bool, weights: np.ndarray, procs: np.ndarray,
                 est: np.ndarray, runtime: np.ndarray, submit: np.ndarray,
                 start: np.ndarray, queue_of: np.ndarray, queue: np.ndarray,
                 alloc: np.ndarray, held: np.ndarray, owned: np.ndarray,
                 running: np.ndarray, heap_t: np.ndarray, heap_j: np.ndarray,
                 times: np.ndarray, free: np.ndarray, pivot_s: np.ndarray,
                 pivot_j: np.ndarray, started: np.ndarray, count: np.ndarray,
                 clock: np.ndarray,
                 seen: np.ndarray, bsld_s: float) -> bool:
    """Run an MQBF what-if forward (arrays set up by :func:`mqbf_open`) as
    :func:`olsctl.whatif.steps` does: at each instant the completions due (the heap of
    true ends), then a wake under way (``WAKE_T``: ``WAKE_N`` processors active, the
    partitions split again by ``weights``), then one pass (:func:`mqbf_pass`) if
    something happened (``DUE``); until every job has started, nothing more can happen,
    or the next instant is past ``UNTIL``. ``owned`` must hold the split of ``ACTIVE``.
    Returns True when the SLA bound cut the run short instead (``VALUE`` holds the
    bound; called again, it goes on under ``LIMIT``, or with no bound once ``METRIC``
    is 0). ``queue[:NQ]`` waits in arrival order; the arrays hold the whole run between
    calls. ``times`` and ``free`` have room for n + 2 K + 2 segments."""
    nq = count[NQ]
    k = len(owned)
    # one pass's scratch, for every pass: the queue only shrinks
    parts = pass_parts(k)
    least = np.empty((k + 1, free.shape[1]), dtype=np.int64)
    # in a fixed order (all but WFP): the queue in it, by position, each queue's jobs
    # linked (each queue's first position in parts[P_HEAD], then ``after`` each one),
    # with the index of the waiting jobs (see mqbf_indexed_phases). In WFP order, the
    # queue in its order now, then mqbf_phases sorts it again at each pass from the
    # last pass's order, with each job's arrival rank (``wide``) and key (``short``).
    n_pos = nq if code != WFP else 0
    order = np.empty((2, nq), dtype=np.int64)
    done = np.zeros(nq, dtype=np.bool_)
    order_into(code, clock[NOW], queue[:nq], procs, est, submit, order[0])
    link_queues(order[0], n_pos, queue_of, parts[P_HEAD, :k], order[1])
    if code == WFP:
        size, wide, short = 0, np.empty(len(procs), dtype=np.int64), np.empty(len(procs))
        for i in range(nq):
            wide[queue[i]] = i
    else:
        size, wide, short = index_open(order[0], n_pos, procs, est)
    return mqbf_loop(code, borrow, weights, procs, est, runtime, submit, start, queue_of,
                     queue, alloc, held, owned, running, heap_t, heap_j, times, free,
                     pivot_s, pivot_j, started, count, clock, seen, bsld_s, parts, least,
                     order, done, size, wide, short)


@kernel(refcounts=False)
def mqbf_loop(code: int, borrow: bool, weights: np.ndarray, procs: np.ndarray,
              est: np.ndarray, runtime: np.ndarray, submit: np.ndarray,
              start: np.ndarray, queue_of: np.ndarray, queue: np.ndarray,
              alloc: np.ndarray, held: np.ndarray, owned: np.ndarray,
              running: np.ndarray, heap_t: np.ndarray, heap_j: np.ndarray,
              times: np.ndarray, free: np.ndarray, pivot_s: np.ndarray,
              pivot_j: np.ndarray, started: np.ndarray, count: np.ndarray,
              clock: np.ndarray, seen: np.ndarray, bsld_s: float, parts: np.ndarray,
              least: np.ndarray, order: np.ndarray, done: np.ndarray, size: int,
              wide: np.ndarray, short: np.ndarray) -> bool:
    """:func:`mqbf_forward`'s loop, with the scratch of a pass (``parts``, ``least``,
    ``done``) and, in a fixed order, the queue in it (``order[0]``), each queue's jobs
    linked (``order[1]``) and the index (``size``, ``wide``, ``short``); in WFP order,
    the queue in the last pass's order (``order[0]``), each job's arrival rank
    (``wide``) and room for its key (``short``). It allocates nothing (compiled without
    reference counts)."""
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
    k = len(owned)
    cut = False
    # nq counts the jobs still waiting, n_pos the positions
    fixed = code != WFP
    n_pos = nq if fixed else 0
    ordered = order[0]
    after = order[1]
    narrowest = narrowest_of(queue[:nq], procs)  # (changes only when jobs start)
    while True:
        if not at_bound:
            if due:
                due = 0
                ns = 0
                if not pass_opens(active - busy, narrowest, pivot_s, pivot_j):
                    pass  # (nothing waiting is narrow enough)
                elif fixed:
                    ns, n_run = mqbf_indexed_phases(borrow, now, active - busy, ordered,
                                                    after, done, procs, est, queue_of,
                                                    owned, held, running, n_run, alloc,
                                                    times, free, pivot_s, pivot_j, started,
                                                    parts, least, size, wide, short)
                else:
                    ns, n_run = mqbf_phases(code, borrow, now, active - busy, queue[:nq],
                                            procs, est, submit, queue_of, owned, held,
                                            running, n_run, alloc, times, free, pivot_s,
                                            pivot_j, started, order, done, parts, least,
                                            wide, short)
                if ns:
                    took, n_heap = note_starts(ns, started, now, start, procs, runtime,
                                               submit, heap_t, heap_j, n_heap, metric, acc,
                                               cnt, seen, bsld_s)
                    busy += took
                    if fixed:
                        nq -= ns
                        narrowest = wide[1] if nq else 0
                    else:
                        still_waiting(ordered, nq, start, ns)
                        nq = still_waiting(queue, nq, start, ns)
                        narrowest = narrowest_of(queue[:nq], procs)
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
            for p in range(k):
                held[p] -= alloc[j, p]
            finishes += 1
            due = 1
        if now == wake_t:
            active = count[WAKE_N]
            partition_counts(weights, active, owned)
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


# -- a tick's candidates in one call ---------------------------------------------------
#
# A batch's what-ifs live in rows: row c of ``start``, ``queue``, ``alloc``, ``held``,
# ``owned``, ``running``, ``heap_t``, ``heap_j``, ``count``, ``clock`` and ``seen`` is
# candidate c's what-if (the arrays :class:`olsctl.mqbf_whatif.MqbfRun` owns), the last
# row the template they start from. The job columns and the pass's scratch (``times``,
# ``free``, ``pivot_s``, ``pivot_j``, ``started``) are shared.


@kernel
def settle_at(c: int, code: int, borrow: bool, weights: np.ndarray, procs: np.ndarray,
              est: np.ndarray, runtime: np.ndarray, submit: np.ndarray,
              queue_of: np.ndarray, times: np.ndarray, free: np.ndarray,
              pivot_s: np.ndarray, pivot_j: np.ndarray, started: np.ndarray,
              start: np.ndarray, queue: np.ndarray, alloc: np.ndarray, held: np.ndarray,
              owned: np.ndarray, running: np.ndarray, heap_t: np.ndarray,
              heap_j: np.ndarray, count: np.ndarray, clock: np.ndarray, seen: np.ndarray,
              censor: bool, bsld_s: float, out: np.ndarray) -> None:
    """Run row ``c``'s MQBF what-if on (:func:`mqbf_forward`) and write how it ended into
    ``out[c]`` (the slots of :mod:`olsctl.policies.forward`'s ``ROW_*``); one run to its
    end is scored (:func:`score_columns`) and ``out[c, N_ROW + q]`` gets queue q's mean
    bounded slowdown (its jobs' sum in job order, as numpy's ``bincount`` adds; 1 for a
    queue without jobs)."""
    row = out[c]
    clock_c = clock[c]
    if mqbf_forward(code, borrow, weights, procs, est, runtime, submit, start[c], queue_of,
                    queue[c], alloc[c], held[c], owned[c], running[c], heap_t[c],
                    heap_j[c], times, free, pivot_s, pivot_j, started, count[c], clock_c,
                    seen[c], bsld_s):
        row[ROW_STATUS] = OUT_CUT
        row[ROW_BOUND] = clock_c[VALUE]
        row[ROW_NOW] = clock_c[NOW]
        return
    row[ROW_STATUS] = OUT_DONE
    row[ROW_NOW] = clock_c[NOW]
    bsld = score_columns(start[c], submit, runtime, censor, clock_c[UNTIL], bsld_s, row)
    k = len(weights)
    sums = np.zeros(k)
    jobs = np.zeros(k, dtype=np.int64)
    for j in range(len(bsld)):
        sums[queue_of[j]] += bsld[j]
        jobs[queue_of[j]] += 1
    for q in range(k):
        row[N_ROW + q] = sums[q] / jobs[q] if jobs[q] else 1.0


@kernel
def mqbf_candidates(code: int, borrow: bool, weights: np.ndarray, procs: np.ndarray,
                    est: np.ndarray, runtime: np.ndarray, submit: np.ndarray,
                    queue_of: np.ndarray, n_run: int, times: np.ndarray, free: np.ndarray,
                    pivot_s: np.ndarray, pivot_j: np.ndarray, started: np.ndarray,
                    start: np.ndarray, queue: np.ndarray, alloc: np.ndarray,
                    held: np.ndarray, owned: np.ndarray, running: np.ndarray,
                    heap_t: np.ndarray, heap_j: np.ndarray, count: np.ndarray,
                    clock: np.ndarray, seen: np.ndarray, setting: np.ndarray,
                    wake_t: np.ndarray, censor: bool, bsld_s: float, sla: int,
                    limit: float, first_met: bool, then_closest: bool,
                    out: np.ndarray) -> tuple:
    """A tick's MQBF what-ifs, candidate by candidate, as
    :func:`olsctl.policies.forward.easy_candidates` runs EASY's: candidate c's row is
    copied from the template row (the last), given its machine setting ``setting[c]`` =
    (its machine, active processors, processors of a wake under way, pass due) and the
    wake's time ``wake_t[c]``, run and scored into ``out[c]`` (:func:`settle_at`).
    One whose machine is narrower than a waiting job (of those after the ``n_run``
    running) is not run: the row counts those jobs as unstarted. With ``first_met``,
    stops after the first whose ``sla`` score is at most ``limit``; when none is, with
    ``then_closest``, the closest is finished (:func:`mqbf_closest`). Returns (how many
    ran or were skipped as too wide, how many times one went on)."""
    t = len(out)
    n = len(procs)
    widest = 0
    for j in range(n_run, n):
        if procs[j] > widest:
            widest = procs[j]
    for c in range(t):
        row = out[c]
        machine = setting[c, 0]
        if widest > machine:
            row[ROW_STATUS] = OUT_WIDE
            too_wide = 0
            for j in range(n_run, n):
                if procs[j] > machine:
                    too_wide += 1
            row[ROW_UNSTARTED] = too_wide
            continue
        start[c, :] = start[t]
        queue[c, :] = queue[t]
        alloc[c, :, :] = alloc[t]
        held[c, :] = held[t]
        running[c, :, :] = running[t]
        heap_t[c, :] = heap_t[t]
        heap_j[c, :] = heap_j[t]
        count[c, :] = count[t]
        clock[c, :] = clock[t]
        seen[c, :] = seen[t]
        count[c, ACTIVE] = setting[c, 1]
        count[c, WAKE_N] = setting[c, 2]
        count[c, DUE] = setting[c, 3]
        clock[c, WAKE_T] = wake_t[c]
        partition_counts(weights, setting[c, 1], owned[c])
        settle_at(c, code, borrow, weights, procs, est, runtime, submit, queue_of, times,
                  free, pivot_s, pivot_j, started, start, queue, alloc, held, owned, running,
                  heap_t, heap_j, count, clock, seen, censor, bsld_s, out)
        if (first_met and row[ROW_STATUS] == OUT_DONE and row[ROW_UNSTARTED] == 0
                and row[ROW_MEAN_BSLD + sla] <= limit):
            return c + 1, 0
    if not then_closest:
        return t, 0
    done = np.empty(t, dtype=np.bool_)
    value = np.empty(t)
    rows_scored(out, sla, done, value)
    return t, mqbf_closest(code, borrow, weights, procs, est, runtime, submit, queue_of,
                           times, free, pivot_s, pivot_j, started, start, queue, alloc,
                           held, owned, running, heap_t, heap_j, count, clock, seen,
                           censor, bsld_s, sla, done, value, setting[:t, 0], np.arange(t),
                           out, np.zeros(t, dtype=np.bool_))


@kernel
def mqbf_closest(code: int, borrow: bool, weights: np.ndarray, procs: np.ndarray,
                 est: np.ndarray, runtime: np.ndarray, submit: np.ndarray,
                 queue_of: np.ndarray, times: np.ndarray, free: np.ndarray,
                 pivot_s: np.ndarray, pivot_j: np.ndarray, started: np.ndarray,
                 start: np.ndarray, queue: np.ndarray, alloc: np.ndarray, held: np.ndarray,
                 owned: np.ndarray, running: np.ndarray, heap_t: np.ndarray,
                 heap_j: np.ndarray, count: np.ndarray, clock: np.ndarray,
                 seen: np.ndarray, censor: bool, bsld_s: float, sla: int,
                 done: np.ndarray, value: np.ndarray, active: np.ndarray, row: np.ndarray,
                 out: np.ndarray, moved: np.ndarray) -> int:
    """:func:`olsctl.policies.forward.closest` for a batch of MQBF what-ifs (the rows
    of :func:`mqbf_candidates`): the same steps, each what-if going on in its row."""
    went_on = 0
    while True:
        pick, best = closest_pick(done, value, active)
        if pick < 0:
            return went_on
        r = row[pick]
        if best == INF:
            count[r, METRIC] = 0
        else:
            clock[r, LIMIT] = best
        settle_at(r, code, borrow, weights, procs, est, runtime, submit, queue_of, times,
                  free, pivot_s, pivot_j, started, start, queue, alloc, held, owned, running,
                  heap_t, heap_j, count, clock, seen, censor, bsld_s, out)
        went_on += 1
        moved[pick] = True
        went_to(out[r], sla, pick, done, value)


def mqbf_warm_up(k) -> None:
    """Run the kernels ``k`` (:func:`olsctl.policies.jit.compiled`) on a tiny MQBF
    what-if (two partitions, a job that borrows, a wake): compiles or loads every kernel
    the loop calls."""
    from olsctl.policies.forward import N_COUNTS, N_TAIL
    from olsctl.policies.kernels import MEAN_BSLD

    n, parts = 3, 2
    procs = np.array([2, 3, 1], dtype=np.int64)
    est = np.array([10.0, 5.0, 20.0])
    submit = np.zeros(n)
    start = np.array([0.0, np.nan, np.nan])
    alloc = np.zeros((n, parts), dtype=np.int64)
    alloc[0, 0] = 2
    weights = np.array([1, 1], dtype=np.int64)
    owned = np.empty(parts, dtype=np.int64)
    k.partition_counts(weights, 4, owned)
    queue_of = np.empty(n, dtype=np.int64)
    k.queue_indices(np.array([8.0]), est, queue_of)
    held = np.zeros(parts, dtype=np.int64)
    running = np.zeros((n, 2))
    heap_t, heap_j = np.zeros(n), np.zeros(n, dtype=np.int64)
    count = np.zeros(N_COUNTS, dtype=np.int64)
    count[ACTIVE], count[NQ], count[WAKE_N], count[DUE], count[METRIC] = 4, 2, 6, 1, MEAN_BSLD
    clock = np.zeros(N_TAIL)
    clock[NOW], clock[WAKE_T], clock[UNTIL], clock[LIMIT] = 0.0, 7.0, INF, 1e9
    seen = np.zeros(n, dtype=np.bool_)
    k.mqbf_open(1, procs, est, est, submit, start, alloc, held, running, heap_t, heap_j,
                count, clock, seen, 10.0)
    segments = n + 2 * parts + 2
    k.mqbf_forward(0, True, weights, procs, est, est, submit, start, queue_of,
                   np.array([1, 2, 0], dtype=np.int64), alloc, held, owned, running, heap_t,
                   heap_j, np.zeros(segments), np.zeros((parts, segments), dtype=np.int64),
                   np.zeros(parts), np.zeros(parts, dtype=np.int64), np.zeros(n, dtype=np.int64),
                   count, clock, seen, 10.0)
    # one pass called alone, as the main simulator calls it (MultiQueueBackfill.backfill)
    k.mqbf_pass(0, True, 0.0, 4, 2, np.array([1, 2], dtype=np.int64), procs, est, submit,
                queue_of, owned, held, running, 1, alloc, np.zeros(segments),
                np.zeros((parts, segments), dtype=np.int64), np.zeros(parts),
                np.zeros(parts, dtype=np.int64), np.zeros(n, dtype=np.int64))
