"""EASY's pass as kernels (see :mod:`olsctl.policies.core.jit`): the jobs started from the
head, the blocked head's reservation and the jobs backfilled behind it; over a queue
put in order at the pass, over a queue kept by position with its index, or over a queue
sorted again from the last pass's order (WFP).
"""

from __future__ import annotations

import numpy as np

from olsctl.policies.core.backfill import admit, insert_running, shadow_extra
from olsctl.policies.core.bound import INF
from olsctl.policies.core.index import index_drop
from olsctl.policies.core.jit import kernel
from olsctl.policies.core.order import FCFS, ordered_queue, rank_queue


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


@kernel(inline=True)
def backfill_indexed(now: float, free: int, queue: np.ndarray, first: int,
                     shadow_s: float, extra: int, procs: np.ndarray, est: np.ndarray,
                     size: int, wide: np.ndarray, short: np.ndarray, started: np.ndarray,
                     at: np.ndarray) -> tuple:
    """:func:`backfill_from` over a what-if's queue by position, from position
    ``first`` on, with the index (``size``, ``wide``, ``short``) of its waiting jobs: the
    jobs to start go to ``started`` in start order, their positions to ``at``, and leave
    the index at once, so that after each start the root tells whether any other might
    still start; returns (how many, the extra processors left). A subtree of the index
    passes :func:`admit` with its narrowest width and shortest estimate when one of its
    jobs might (if none could, it does not: widths and ``now + est`` only grow), so
    every run of jobs none of which could start is passed over."""
    ns = 0
    if first >= size or admit(wide[1], now, short[1], free, shadow_s, extra) < 0:
        return ns, extra  # (node 1, the root: no waiting job at all might start)
    i = size + first
    while free > 0:
        if admit(wide[i], now, short[i], free, shadow_s, extra) >= 0:
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
                if admit(wide[1], now, short[1], free, shadow_s, extra) < 0:
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
    """:func:`olsctl.policies.easy.kernels.easy_pass` over a what-if's queue by position, in
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


@kernel
def ranked_pass(code: int, now: float, free: int, order: np.ndarray, nq: int,
                rank: np.ndarray, key: np.ndarray, queue: np.ndarray, procs: np.ndarray,
                est: np.ndarray, submit: np.ndarray, running: np.ndarray, n_run: int,
                started: np.ndarray) -> tuple:
    """:func:`olsctl.policies.easy.kernels.easy_pass` in WFP order over ``order[:nq]``, the
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
