"""WFP order for MQBF's passes without sorting the queue (kernels, see
:mod:`olsctl.policies.core.jit`).

Here belong the trees that tell an MQBF pass in WFP order which waiting job comes first
(:func:`olsctl.policies.mqbf_kernels.mqbf_wfp_phases` runs the phases with them): one
tree per queue over its waiting jobs, each node holding the job below it that comes
first (:func:`wfp_tree_first`) and the narrowest width and shortest estimate below it,
and the heap of subtrees through which Phase B takes, first in WFP order first, only
the jobs that might start (:func:`wfp_heap_push`, :func:`wfp_heap_pop`).

Every decision is :func:`olsctl.policies.core.order.ordered_queue`'s: a job comes before
another when its exact WFP key (:func:`olsctl.policies.core.order.order_key`) is smaller,
NaN after every number, equal keys in arrival order (:func:`wfp_before`). Jobs are named
by their position in the queue in arrival order, so a position is an arrival rank.

A main simulator's pass builds the trees for its one instant: a node's first is found
by quick keys (:func:`olsctl.policies.core.order.quick_key`), the exact keys deciding
where two are too close to tell apart (:func:`olsctl.policies.core.order.keys_apart`). A
what-if keeps them from pass to pass (kinetic trees): WFP's key is minus (wait /
estimate)^3 x processors, and its cube root, ``slope x wait`` with ``slope`` =
processors^(1/3) / estimate, grows along a straight line as the wait grows. When one
child's first leads the other's by more than :data:`LEAD_APART` in that root, the lead
holds until the two lines come within :data:`LEAD_HOLD` of each other, which is far
beyond rounding (exact keys that far apart, a factor of at least 1 + 3 x LEAD_HOLD, are
ordered by their floats as by their real values); closer than that, the exact keys
decide and the node is taken again at any later instant (unless the two jobs have the
same submit time, processors and estimate: then their keys are the same float at every
instant, and arrival order decides for good).
"""

from __future__ import annotations

import numpy as np

from olsctl.policies.core.backfill import INF
from olsctl.policies.core.index import NO_JOB
from olsctl.policies.core.heap import heap_add, heap_drop
from olsctl.policies.core.jit import kernel, specialize
from olsctl.policies.core.order import WFP, keys_apart, order_key, quick_key, ranks_before

#: how far (relatively) one job's cube root of the WFP utility must lead another's for
#: the lead to decide without the exact keys
LEAD_APART = 4e-9
#: the lead a node's first is sure to keep until its certificate ends
LEAD_HOLD = 2e-9
#: cube roots outside [CUBE_LOW, CUBE_HIGH] (their cubes might be subnormal or overflow)
#: are left to the exact keys
CUBE_LOW, CUBE_HIGH = 1e-90, 1e100


@kernel
def wfp_before(ga: int, gb: int, now: float, ordered: np.ndarray, submit: np.ndarray,
               procs: np.ndarray, est: np.ndarray) -> bool:
    """Whether the job at position ``ga`` of ``ordered`` (arrival order) comes before the
    one at ``gb`` in WFP order at ``now``, as :func:`olsctl.policies.core.order.ordered_queue`
    puts them."""
    a = ordered[ga]
    b = ordered[gb]
    return ranks_before(order_key(WFP, now, submit[a], procs[a], est[a]), ga,
                        order_key(WFP, now, submit[b], procs[b], est[b]), gb)


# -- each queue's tree of its waiting jobs -------------------------------------------------
#
# A pass in WFP order over n positions (``ordered[:n]``, arrival order) has three arrays:
# ``trees`` (K + 1 rows: each queue's base and leaf count; then the node count T, n, and
# 1 for kinetic trees), ``tree_i`` (3 T + n ints) and ``tree_f`` (3 T + n floats), which
# :func:`wfp_views` cuts into ``win``, ``wid``, ``heap`` and ``leaf``, and ``expiry``,
# ``sho``, ``key`` and ``quick``. Queue q's tree is at ``trees[q, 0]`` (its base): node
# i (1 the root, 2i and 2i + 1 its children, ``trees[q, 1]`` leaves from node
# ``trees[q, 1]`` on, in arrival order) is at base + i. ``win`` holds the position that
# comes first below the node (-1: none waiting), ``wid`` and ``sho`` the narrowest width
# and shortest estimate below it (none: NO_JOB and inf), ``expiry`` the earliest instant
# at which its first, or a first below it, must be found again (inf: never); ``key``
# is the exact key of a node's first at the pass's instant once Phase B has asked for
# it, and ``heap`` is room for Phase B's subtrees. ``leaf[g]`` is position g's leaf
# (base + i), and ``quick[g]`` its job's quick number: in kinetic trees its slope, in
# trees of one instant its quick key then.


@kernel(inline=True)
def wfp_views(trees: np.ndarray, tree_i: np.ndarray, tree_f: np.ndarray) -> tuple:
    """(``win``, ``wid``, ``heap``, ``leaf``, ``expiry``, ``sho``, ``key``, ``quick``),
    see above."""
    t = trees[trees.shape[0] - 1, 0]
    return (tree_i[:t], tree_i[t:2 * t], tree_i[2 * t:3 * t], tree_i[3 * t:],
            tree_f[:t], tree_f[t:2 * t], tree_f[2 * t:3 * t], tree_f[3 * t:])


@kernel(inline=True)
def wfp_duel(ga: int, gb: int, now: float, ordered: np.ndarray, quick: np.ndarray,
             kinetic: bool, submit: np.ndarray, procs: np.ndarray, est: np.ndarray) -> tuple:
    """(the position of the two that comes first at ``now``, the instant until which it
    surely stays first: inf for good, else after ``now``; not ``kinetic``, for the one
    instant ``now``: inf). ``quick`` holds each position's number (see above)."""
    a = ordered[ga]
    b = ordered[gb]
    if not kinetic:
        ka = quick[ga]
        kb = quick[gb]
        if ka - ka == 0.0 and kb - kb == 0.0:  # (finite)
            if ka < kb and keys_apart(ka, kb):
                return ga, INF
            if kb < ka and keys_apart(kb, ka):
                return gb, INF
        return (ga if wfp_before(ga, gb, now, ordered, submit, procs, est) else gb), INF
    ra = quick[ga] * (now - submit[a])
    rb = quick[gb] * (now - submit[b])
    if ra >= rb:
        hi, lo, r_hi, r_lo = ga, gb, ra, rb
    else:
        hi, lo, r_hi, r_lo = gb, ga, rb, ra
    if (CUBE_LOW < r_hi < CUBE_HIGH and (r_lo == 0.0 or r_lo > CUBE_LOW)
            and r_hi > r_lo * (1.0 + LEAD_APART)):
        pace = quick[hi] - (1.0 + LEAD_HOLD) * quick[lo]  # the lead's, per s
        if pace >= 0.0:
            return hi, INF
        t = now + (r_hi - (1.0 + LEAD_HOLD) * r_lo) / -pace
        return hi, t if t > now else np.nextafter(now, INF)
    w = ga if wfp_before(ga, gb, now, ordered, submit, procs, est) else gb
    if submit[a] == submit[b] and procs[a] == procs[b] and est[a] == est[b]:
        return w, INF  # (the same key at every instant: arrival order)
    return w, np.nextafter(now, INF)


@kernel(inline=True)
def wfp_node(win: np.ndarray, wid: np.ndarray, expiry: np.ndarray, sho: np.ndarray,
             quick: np.ndarray, kinetic: bool, base: int, i: int, now: float,
             ordered: np.ndarray, submit: np.ndarray, procs: np.ndarray,
             est: np.ndarray) -> None:
    """Node ``i`` of the tree at ``base`` from its children, both current at ``now``."""
    f = base + i
    left = base + 2 * i
    wid[f] = wid[left] if wid[left] < wid[left + 1] else wid[left + 1]
    sho[f] = sho[left] if sho[left] < sho[left + 1] else sho[left + 1]
    x = win[left]
    y = win[left + 1]
    lim = expiry[left] if expiry[left] < expiry[left + 1] else expiry[left + 1]
    if x < 0 or y < 0:
        win[f] = y if x < 0 else x
        expiry[f] = lim
        return
    w, t = wfp_duel(x, y, now, ordered, quick, kinetic, submit, procs, est)
    win[f] = w
    expiry[f] = t if t < lim else lim


@kernel
def wfp_trees_open(ordered: np.ndarray, n: int, queue_of: np.ndarray, k: int, now: float,
                   procs: np.ndarray, est: np.ndarray, submit: np.ndarray,
                   kinetic: bool) -> tuple:
    """Each of the ``k`` queues' tree over its jobs among ``ordered[:n]`` (arrival
    order), current at ``now``, kinetic or for the one instant: (``trees``, ``tree_i``,
    ``tree_f``), see above."""
    trees = np.empty((k + 1, 3), dtype=np.int64)
    count = np.zeros(k, dtype=np.int64)
    for g in range(n):
        count[queue_of[ordered[g]]] += 1
    total = 0
    for q in range(k):
        size = 1
        while size < count[q]:
            size *= 2
        trees[q, 0] = total
        trees[q, 1] = size
        total += 2 * size
    trees[k, 0] = total
    trees[k, 1] = n
    trees[k, 2] = 1 if kinetic else 0
    tree_i = np.empty(3 * total + n, dtype=np.int64)
    tree_f = np.empty(3 * total + n)
    widest = 0
    for g in range(n if kinetic else 0):
        if procs[ordered[g]] > widest:
            widest = procs[ordered[g]]
    wfp_trees_fill(trees, tree_i, tree_f, ordered, queue_of, now, submit, procs, est,
                   np.full(widest + 1, np.nan))
    return trees, tree_i, tree_f


@kernel(refcounts=False)
def wfp_trees_fill(trees: np.ndarray, tree_i: np.ndarray, tree_f: np.ndarray,
                   ordered: np.ndarray, queue_of: np.ndarray, now: float,
                   submit: np.ndarray, procs: np.ndarray, est: np.ndarray,
                   roots: np.ndarray) -> None:
    """:func:`wfp_trees_open`'s trees filled, once ``trees`` holds their layout; kinetic
    trees take each width's cube root once, into ``roots`` (NaN: not yet). It allocates
    nothing (compiled without reference counts: the steps compiled into it would count
    each array they are given at every node)."""
    k = trees.shape[0] - 1
    n = trees[k, 1]
    kinetic = trees[k, 2] != 0
    win, wid, heap, leaf, expiry, sho, _, quick = wfp_views(trees, tree_i, tree_f)
    win[:] = -1
    wid[:] = NO_JOB
    expiry[:] = INF
    sho[:] = INF
    cursor = heap[:k]  # (each queue's next leaf; the heap is not in use)
    for q in range(k):
        cursor[q] = trees[q, 0] + trees[q, 1]
    for g in range(n):  # (the leaves of each queue's tree in arrival order)
        j = ordered[g]
        q = queue_of[j]
        f = cursor[q]
        cursor[q] += 1
        win[f] = g
        wid[f] = procs[j]
        sho[f] = est[j]
        leaf[g] = f
        if not kinetic:
            quick[g] = quick_key(now, submit[j], procs[j], est[j])
        else:
            root = roots[procs[j]]
            if root != root:  # (NaN: not taken yet)
                root = roots[procs[j]] = procs[j] ** (1.0 / 3.0)
            quick[g] = root / est[j]
    for q in range(k):
        for i in range(trees[q, 1] - 1, 0, -1):
            wfp_node(win, wid, expiry, sho, quick, kinetic, trees[q, 0], i, now, ordered,
                     submit, procs, est)


@kernel(inline=True)
def wfp_tree_first(q: int, now: float, trees: np.ndarray, tree_i: np.ndarray,
                   tree_f: np.ndarray, ordered: np.ndarray, submit: np.ndarray,
                   procs: np.ndarray, est: np.ndarray) -> int:
    """Queue ``q``'s first waiting position in WFP order at ``now`` (-1: none): the nodes
    whose certificates have ended are taken again, children first, so that the whole
    tree is current at ``now``."""
    win, wid, _, _, expiry, sho, _, quick = wfp_views(trees, tree_i, tree_f)
    base = trees[q, 0]
    size = trees[q, 1]
    if expiry[base + 1] > now:
        return win[base + 1]
    kinetic = trees[trees.shape[0] - 1, 2] != 0
    i = 1
    while True:
        if i < size:
            left = base + 2 * i
            if expiry[left] <= now:
                i = 2 * i
                continue
            if expiry[left + 1] <= now:
                i = 2 * i + 1
                continue
        wfp_node(win, wid, expiry, sho, quick, kinetic, base, i, now, ordered, submit,
                 procs, est)
        if i == 1:
            return win[base + 1]
        i >>= 1


@kernel(inline=True)
def wfp_tree_leave(q: int, g: int, now: float, trees: np.ndarray, tree_i: np.ndarray,
                   tree_f: np.ndarray, ordered: np.ndarray, submit: np.ndarray,
                   procs: np.ndarray, est: np.ndarray) -> None:
    """Position ``g`` of queue ``q`` no longer waits: its leaf empties and the nodes
    above it are taken again at ``now`` (the tree must be current at ``now``)."""
    win, wid, _, leaf, expiry, sho, _, quick = wfp_views(trees, tree_i, tree_f)
    kinetic = trees[trees.shape[0] - 1, 2] != 0
    base = trees[q, 0]
    f = leaf[g]
    win[f] = -1
    wid[f] = NO_JOB
    sho[f] = INF
    i = (f - base) >> 1
    while i:
        wfp_node(win, wid, expiry, sho, quick, kinetic, base, i, now, ordered, submit,
                 procs, est)
        i >>= 1


@kernel(inline=True)
def wfp_narrowest(trees: np.ndarray, tree_i: np.ndarray) -> int:
    """The fewest processors a waiting job asks for (0: none waits)."""
    k = trees.shape[0] - 1
    wid = tree_i[trees[k, 0]:2 * trees[k, 0]]
    narrowest = 0
    for q in range(k):
        w = wid[trees[q, 0] + 1]
        if w != NO_JOB and (narrowest == 0 or w < narrowest):
            narrowest = w
    return narrowest


# -- Phase B's subtrees, first in WFP order first ----------------------------------------
#
# Phase B keeps a heap of disjoint subtrees of the queues' trees, the one whose first
# comes first on top (``key[f]``: the exact key of node f's first at the pass's
# instant, its position the arrival rank). A subtree taken off the top in which no job
# might start is dropped; another is replaced by its two halves; a leaf is the next job
# to try. So the jobs are tried first in WFP order first, and those passed over could not
# have started at their turn.


@kernel(inline=True)
def wfp_ranks_before(x: int, y: int, win: np.ndarray, key: np.ndarray) -> bool:
    """Whether node ``x``'s first comes before node ``y``'s in WFP order (their keys in
    ``key``, their positions in ``win``): the order of the heap of subtrees."""
    return ranks_before(key[x], win[x], key[y], win[y])


#: the heap of subtrees (nodes in ``heap[:n]``) by their firsts in WFP order:
#: ``wfp_heap_push(heap, n, node, win, key)`` and ``wfp_heap_pop(heap, n, win, key)``
wfp_heap_push = specialize(heap_add, "wfp_heap_push", inline=True, before=wfp_ranks_before)
wfp_heap_pop = specialize(heap_drop, "wfp_heap_pop", inline=True, before=wfp_ranks_before)
