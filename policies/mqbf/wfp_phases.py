"""MQBF's pass in WFP order as kernels (see :mod:`olsctl.policies.core.jit`), without
sorting the queue: Phase A takes each queue's first waiting job in WFP order from the
root of its tree, Phase B takes subtrees off a heap in WFP order of their first jobs,
passes over those where no job might start and tries the jobs it reaches
(:mod:`olsctl.policies.mqbf.wfp_trees`). The main simulator's pass builds the trees for
its instant; a what-if keeps them from pass to pass.
"""

from __future__ import annotations

import numpy as np

from olsctl.policies.core.jit import kernel, specialize
from olsctl.policies.core.order import WFP, order_key
from olsctl.policies.mqbf.phases import (P_FIRST, P_GOT, P_HEADS, P_MINS, P_NOW_FREE,
                                         P_ROOM, heads_walk, hold_job, may_backfill,
                                         pass_profile, pivots_wait_on, try_backfill)
from olsctl.policies.mqbf.profile import ROOM
from olsctl.policies.mqbf.wfp_trees import (wfp_before, wfp_heap_pop, wfp_heap_push,
                                            wfp_tree_first, wfp_tree_leave, wfp_views)


@kernel(refcounts=False)
def mqbf_wfp_pass(borrow: bool, now: float, idle: int, ordered: np.ndarray,
                  done: np.ndarray, procs: np.ndarray, est: np.ndarray, submit: np.ndarray,
                  queue_of: np.ndarray, owned: np.ndarray, held: np.ndarray,
                  running: np.ndarray, n_run: int, alloc: np.ndarray, times: np.ndarray,
                  free: np.ndarray, pivot_s: np.ndarray, pivot_j: np.ndarray,
                  started: np.ndarray, parts: np.ndarray, least: np.ndarray,
                  trees: np.ndarray, tree_i: np.ndarray, tree_f: np.ndarray) -> tuple:
    """:func:`mqbf_wfp_phases` for :func:`olsctl.policies.mqbf.passes.mqbf_phases`, which makes the arrays: it
    allocates nothing, and is compiled without reference counts (the steps compiled into
    it would count each array they are given up and down at every step; a main
    simulator's pass in WFP order took several times as long)."""
    return mqbf_wfp_phases(borrow, now, idle, ordered, done, procs, est, submit, queue_of,
                           owned, held, running, n_run, alloc, times, free, pivot_s,
                           pivot_j, started, parts, least, trees, tree_i, tree_f)


@kernel(inline=True)
def mqbf_wfp_phases(borrow: bool, now: float, idle: int, ordered: np.ndarray,
                    done: np.ndarray, procs: np.ndarray, est: np.ndarray,
                    submit: np.ndarray, queue_of: np.ndarray, owned: np.ndarray,
                    held: np.ndarray, running: np.ndarray, n_run: int, alloc: np.ndarray,
                    times: np.ndarray, free: np.ndarray, pivot_s: np.ndarray,
                    pivot_j: np.ndarray, started: np.ndarray, parts: np.ndarray,
                    least: np.ndarray, trees: np.ndarray, tree_i: np.ndarray,
                    tree_f: np.ndarray) -> tuple:
    """:func:`mqbf_indexed_phases` in WFP order over the queue by position in arrival
    order (``ordered``; the positions of jobs started in earlier passes ``done``), with
    each queue's tree of its waiting jobs (``trees``, ``tree_i``, ``tree_f``: see
    :mod:`olsctl.policies.mqbf_wfp`; a what-if keeps them from pass to pass, and the
    jobs started leave them). Returns (jobs started, running jobs)."""
    k = len(owned)
    ns, n_run = wfp_phase_a(borrow, now, idle, ordered, done, procs, est, submit, owned,
                            held, running, n_run, alloc, times, free, pivot_s, pivot_j,
                            started, parts, least, trees, tree_i, tree_f)
    win, wid, heap, _, _, sho, key, _ = wfp_views(trees, tree_i, tree_f)
    room = parts[P_ROOM]
    n = 0
    for q in range(k):
        f = trees[q, 0] + 1
        g = win[f]
        if g >= 0:
            j = ordered[g]
            key[f] = order_key(WFP, now, submit[j], procs[j], est[j])
            n = wfp_heap_push(heap, n, f, win, key)
    while n > 0 and room[ROOM] > 0:
        f = heap[0]
        n = wfp_heap_pop(heap, n, win, key)
        if not may_backfill(now, wid[f], sho[f], times, free, least, room):
            continue  # (no job below f might start)
        g = win[f]
        j = ordered[g]
        q = queue_of[j]
        i = f - trees[q, 0]
        if i < trees[q, 1]:  # a subtree: its halves
            for c in range(2 * f - trees[q, 0], 2 * f - trees[q, 0] + 2):
                if win[c] == g:
                    key[c] = key[f]
                    n = wfp_heap_push(heap, n, c, win, key)
                elif win[c] >= 0:
                    h = ordered[win[c]]
                    key[c] = order_key(WFP, now, submit[h], procs[h], est[h])
                    n = wfp_heap_push(heap, n, c, win, key)
        elif not done[g] and try_backfill(borrow, now, j, procs, est, queue_of, times, free,
                                          least, room, parts[P_NOW_FREE, :k],
                                          parts[P_MINS, :k], parts[P_GOT, :k]):
            started[ns] = j
            ns += 1
            done[g] = True
            n_run = hold_job(j, now + est[j], parts[P_GOT, :k], alloc, held, running, n_run)
            wfp_tree_leave(q, g, now, trees, tree_i, tree_f, ordered, submit, procs, est)
    pivots_wait_on(done, parts[P_FIRST, :k], pivot_j)
    return ns, n_run


@kernel(inline=True)
def wfp_phase_a(borrow: bool, now: float, idle: int, ordered: np.ndarray,
                done: np.ndarray, procs: np.ndarray, est: np.ndarray, submit: np.ndarray,
                owned: np.ndarray, held: np.ndarray, running: np.ndarray, n_run: int,
                alloc: np.ndarray, times: np.ndarray, free: np.ndarray,
                pivot_s: np.ndarray, pivot_j: np.ndarray, started: np.ndarray,
                parts: np.ndarray, least: np.ndarray, trees: np.ndarray,
                tree_i: np.ndarray, tree_f: np.ndarray) -> tuple:
    """:func:`phase_a` in WFP order (see :func:`mqbf_wfp_phases`): the queues in the
    order of their first waiting jobs in WFP order, each starting jobs from its first
    while they fit, its first job that does not becoming its pivot (its position in
    ``parts[P_FIRST]``). Every queue's tree is current at ``now`` after it. Returns
    (jobs started, running jobs)."""
    k = len(owned)
    first = parts[P_FIRST, :k]
    heads = parts[P_HEADS]
    n_heads = 0
    for q in range(k):
        g = wfp_tree_first(q, now, trees, tree_i, tree_f, ordered, submit, procs, est)
        first[q] = g
        if g >= 0:
            h = n_heads
            while h > 0 and wfp_before(g, first[heads[h - 1]], now, ordered, submit, procs,
                                       est):
                heads[h] = heads[h - 1]
                h -= 1
            heads[h] = q
            n_heads += 1
    pass_profile(now, idle, owned, held, running, n_run, alloc, times, free, parts)
    return wfp_heads(borrow, now, ordered, done, procs, est, held, running, n_run, alloc,
                     times, free, pivot_s, pivot_j, started, parts, least, heads, n_heads,
                     first, (trees, tree_i, tree_f, submit))


@kernel(inline=True)
def wfp_next(way: tuple, q: int, g: int, now: float, ordered: np.ndarray,
             done: np.ndarray, procs: np.ndarray, est: np.ndarray) -> int:
    """The job at position ``g``, queue ``q``'s first in WFP order, started: it leaves
    the queue's tree (``way`` = (the trees, their ints and floats, the submit times));
    returns the tree's new first (-1: none)."""
    trees, tree_i, tree_f, submit = way
    wfp_tree_leave(q, g, now, trees, tree_i, tree_f, ordered, submit, procs, est)
    return tree_i[trees[q, 0] + 1]  # (the root's first: win comes first in tree_i)


#: Phase A in WFP order, each queue's jobs taken from its tree
wfp_heads = specialize(heads_walk, "wfp_heads", inline=True, head_next=wfp_next)
