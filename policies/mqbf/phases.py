"""MQBF's pass as kernels (see :mod:`olsctl.policies.core.jit`): Phase A (each queue's head
runs or becomes its pivot) and Phase B (backfill without delaying a pivot), over a
queue put in order at the pass or kept by position with its index.
"""

from __future__ import annotations


import numpy as np

from olsctl.policies.core.backfill import insert_running
from olsctl.policies.core.bound import INF
from olsctl.policies.core.index import index_drop
from olsctl.policies.core.jit import kernel, specialize
from olsctl.policies.mqbf.profile import (EMPTY, IDLE, MINIMA, N_ROOM, ROOM, SEGMENTS,
                                          first_empty, fits, partition_allocation,
                                          profile_build, profile_take, room_now,
                                          running_minima, segment_after, segment_holds,
                                          window_fits)


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


@kernel
def pass_parts(k: int) -> np.ndarray:
    """Per-partition scratch for passes with ``k`` partitions
    (:func:`olsctl.policies.mqbf.passes.mqbf_phases`)."""
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

#: rows of a pass's per-partition scratch
#: (:func:`olsctl.policies.mqbf.passes.mqbf_phases`' ``parts``): each queue's
#: first position in the ordered queue (-1: none), the queues in the order of their
#: heads, each partition's free processors now, each one's least free count over a
#: window, a job's processors per partition, the ``room`` slots (:data:`SEGMENTS`
#: ...), and in WFP order each queue's first waiting position in that order, then its
#: pivot's (-1: none)
P_HEAD, P_HEADS, P_NOW_FREE, P_MINS, P_GOT, P_ROOM, P_FIRST = 0, 1, 2, 3, 4, 5, 6

N_PARTS = 7


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
    :func:`olsctl.policies.core.index.index_open`). Returns (jobs started, running
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
    pass_profile(now, idle, owned, held, running, n_run, alloc, times, free, parts)
    return indexed_heads(borrow, now, ordered, done, procs, est, held, running, n_run,
                         alloc, times, free, pivot_s, pivot_j, started, parts, least, heads,
                         n_heads, head, (after, size, wide, short))


@kernel(inline=True)
def indexed_next(way: tuple, q: int, g: int, now: float, ordered: np.ndarray,
                 done: np.ndarray, procs: np.ndarray, est: np.ndarray) -> int:
    """The job at position ``g``, queue ``q``'s head, started: it leaves the index
    (``way`` = (each position's next in its queue, the index's size, widths and
    estimates)); returns the queue's next position not done (-1: none)."""
    after, size, wide, short = way
    index_drop(wide, short, size, g)
    g = after[g]
    while g >= 0 and done[g]:
        g = after[g]
    return g


def heads_walk(borrow: bool, now: float, ordered: np.ndarray, done: np.ndarray,
               procs: np.ndarray, est: np.ndarray, held: np.ndarray, running: np.ndarray,
               n_run: int, alloc: np.ndarray, times: np.ndarray, free: np.ndarray,
               pivot_s: np.ndarray, pivot_j: np.ndarray, started: np.ndarray,
               parts: np.ndarray, least: np.ndarray, heads: np.ndarray, n_heads: int,
               head: np.ndarray, way: tuple) -> tuple:
    """Phase A once the pass's profile is made: the queues ``heads[:n_heads]`` in the
    order of their heads (``head[q]``: queue q's head, by position in ``ordered``), each
    starting jobs from its head while they fit (:func:`head_starts`), its first job that
    does not becoming its pivot (its position left in ``head[q]``, reserved). Returns
    (jobs started, running jobs).

    A template, written once: the queue's next job after a start is the order's own
    (``head_next(way, q, g, now, ordered, done, procs, est)``, bound by
    :func:`olsctl.policies.core.jit.specialize`): :func:`indexed_heads` follows each
    queue's positions, :func:`olsctl.policies.mqbf.wfp_phases.wfp_heads` its tree."""
    k = len(held)
    ns = 0
    for h in range(n_heads):
        q = heads[h]
        g = head[q]
        while g >= 0:
            j = ordered[g]
            if not head_starts(borrow, now, q, j, procs, est, times, free, least, parts):
                break
            started[ns] = j
            ns += 1
            done[g] = True
            n_run = hold_job(j, now + est[j], parts[P_GOT, :k], alloc, held, running,
                             n_run)
            g = head_next(way, q, g, now, ordered, done, procs, est)  # noqa: F821
        head[q] = g
        if g >= 0:
            done[g] = True
            pivot_reserve(borrow, q, ordered[g], procs, est, times, free, pivot_s, pivot_j,
                          parts)
    return ns, n_run


@kernel(inline=True)
def pass_profile(now: float, idle: int, owned: np.ndarray, held: np.ndarray,
                 running: np.ndarray, n_run: int, alloc: np.ndarray, times: np.ndarray,
                 free: np.ndarray, parts: np.ndarray) -> None:
    """A pass's profile from the running jobs, ``idle`` processors not in use: each
    partition's free processors now and the ``room`` slots in ``parts``, the segments
    in ``times`` and ``free``."""
    k = len(owned)
    now_free = parts[P_NOW_FREE, :k]
    for p in range(k):
        now_free[p] = owned[p] - held[p]
    room = parts[P_ROOM]
    room[IDLE] = idle
    room[ROOM] = room_now(now_free, idle)
    room[SEGMENTS] = profile_build(now, now_free, running, n_run, alloc, times, free)
    room[MINIMA] = 0
    room[EMPTY] = -1


@kernel(inline=True)
def head_starts(borrow: bool, now: float, q: int, j: int, procs: np.ndarray,
                est: np.ndarray, times: np.ndarray, free: np.ndarray, least: np.ndarray,
                parts: np.ndarray) -> bool:
    """Phase A's TryStart of job ``j``, queue ``q``'s head, in the pass whose profile and
    scratch are ``times`` to ``parts``: it starts (:func:`mqbf_start`, its processors per
    partition in ``parts[P_GOT]``) when it is no wider than what a job can get now and
    :func:`fits`."""
    k = free.shape[0]
    if procs[j] > parts[P_ROOM, ROOM]:
        return False
    return start_if_fits(borrow, now, q, j, procs, est, times, free, least, parts[P_ROOM],
                         parts[P_NOW_FREE, :k], parts[P_MINS, :k], parts[P_GOT, :k])


@kernel(inline=True)
def pivot_reserve(borrow: bool, q: int, j: int, procs: np.ndarray, est: np.ndarray,
                  times: np.ndarray, free: np.ndarray, pivot_s: np.ndarray,
                  pivot_j: np.ndarray, parts: np.ndarray) -> None:
    """Job ``j``, queue ``q``'s head that did not start, becomes its pivot, reserved
    (:func:`mqbf_reserve`)."""
    k = free.shape[0]
    pivot_j[q] = j
    pivot_s[q] = mqbf_reserve(q, procs[j], est[j], borrow, times, free, parts[P_ROOM],
                              parts[P_MINS, :k], parts[P_GOT, :k])


@kernel(inline=True)
def try_backfill(borrow: bool, now: float, j: int, procs: np.ndarray, est: np.ndarray,
                 queue_of: np.ndarray, times: np.ndarray, free: np.ndarray,
                 least: np.ndarray, room: np.ndarray, now_free: np.ndarray,
                 mins: np.ndarray, got: np.ndarray) -> bool:
    """Phase B's try of job ``j``, neither started nor a pivot and no wider than what a
    job can get now, in the pass whose profile and scratch are ``times`` to ``got`` (the
    rows of :func:`olsctl.policies.mqbf.passes.mqbf_phases`' ``parts``): it starts
    (:func:`mqbf_start`, its
    processors per partition in ``got``) unless its run would need a processor where
    none is left (:func:`first_empty`) or it does not fit (:func:`fits`)."""
    k = free.shape[0]
    empty = room[EMPTY]
    if empty < 0:  # (a call passes arrays: only when not known)
        empty = first_empty(free, least, room)
    if empty < room[SEGMENTS] and now + est[j] > times[empty]:
        return False  # its run would need a processor where none is left
    return start_if_fits(borrow, now, queue_of[j], j, procs, est, times, free, least, room,
                         now_free, mins, got)


@kernel(inline=True)
def start_if_fits(borrow: bool, now: float, q: int, j: int, procs: np.ndarray,
                  est: np.ndarray, times: np.ndarray, free: np.ndarray, least: np.ndarray,
                  room: np.ndarray, now_free: np.ndarray, mins: np.ndarray,
                  got: np.ndarray) -> bool:
    """TryStart of job ``j`` of queue ``q`` over its run, as Phase A and Phase B take
    it once their own tests passed: it starts (:func:`mqbf_start`, its processors per
    partition in ``got``) when it :func:`fits` the least free processors over its run,
    its own partition's and all partitions' (:func:`running_minima`)."""
    k = free.shape[0]
    last = segment_after(times, room[SEGMENTS], now + est[j], 1) - 1
    if last >= room[MINIMA]:
        room[MINIMA] = running_minima(free, room[MINIMA], last + 1, least)
    if not fits(procs[j], least[q, last], least[k, last], borrow):
        return False
    mqbf_start(now, q, procs[j], est[j], last, borrow, times, free, least, room, now_free,
               mins, got)
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
    waiting jobs (``size``, ``wide``, ``short``):
    :func:`olsctl.policies.mqbf.passes.mqbf_phases` makes these for
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
        if may_backfill(now, wide[i], short[i], times, free, least, room):
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
    pivots_wait_on(done, parts[P_HEAD, :k], pivot_j)
    return ns, n_run


@kernel(inline=True)
def pivots_wait_on(done: np.ndarray, pivot_at: np.ndarray, pivot_j: np.ndarray) -> None:
    """After Phase B: each queue's pivot (at position ``pivot_at[q]``) waits on, no
    longer marked done."""
    for q in range(len(pivot_j)):
        if pivot_j[q] >= 0:
            done[pivot_at[q]] = False


@kernel(inline=True)
def may_backfill(now: float, w: int, d: float, times: np.ndarray, free: np.ndarray,
                 least: np.ndarray, room: np.ndarray) -> bool:
    """Whether a job of width ``w`` and estimate ``d`` (s) might pass Phase B's try in
    the pass whose profile is ``times`` to ``room``: no wider than what a job can get
    now, a run ending no later than the first segment with no processor left
    (:func:`first_empty`), no wider than what all partitions together keep free over
    the run (``least[K, last]``). For a subtree of the index, with its narrowest width
    and shortest estimate: whether one of its jobs might (widths and ``now + d`` only
    grow, and that sum only falls as a run grows longer)."""
    if w > room[ROOM]:
        return False
    end = now + d
    empty = room[EMPTY]
    if empty < 0:
        empty = first_empty(free, least, room)
    if empty < room[SEGMENTS] and end > times[empty]:
        return False
    last = segment_after(times, room[SEGMENTS], end, 1) - 1
    if last >= room[MINIMA]:
        room[MINIMA] = running_minima(free, room[MINIMA], last + 1, least)
    return w <= least[free.shape[0], last]


@kernel
def hold_job(j: int, end: float, got: np.ndarray, alloc: np.ndarray, held: np.ndarray,
          running: np.ndarray, n_run: int) -> int:
    """Job ``j`` starts, expected to end at ``end``, holding ``got`` per partition;
    returns the new count of running jobs."""
    for p in range(len(got)):
        alloc[j, p] = got[p]
        held[p] += got[p]
    return insert_running(running, n_run, end, j)


#: Phase A over a queue by position, each queue's jobs linked (made last: its plain copy
#: sees the module as it is then)
indexed_heads = specialize(heads_walk, "indexed_heads", inline=True,
                           head_next=indexed_next)
