"""MQBF's partitions and free-processor profiles as kernels (see
:mod:`olsctl.policies.core.jit`): the split of the active processors, each job's queue,
and the profile of free processors per partition over time that reservations are
made in.
"""

from __future__ import annotations

import numpy as np

from olsctl.policies.core.bound import INF
from olsctl.policies.core.jit import kernel

#: slots of a pass's ``room`` array: segments in the profile, active processors not in
#: use, the most processors any job can get now (the free count of docs/mqbf.md's TryStart:
#: the positive free counts of the partitions, no more than the idle ones), how many
#: segments' running minima are current (:func:`running_minima`), and the first segment
#: through which no processor stays free (:func:`first_empty`; -1: not known)
SEGMENTS, IDLE, ROOM, MINIMA, EMPTY = 0, 1, 2, 3, 4

N_ROOM = 5


@kernel
def partition_counts(weights: np.ndarray, total: int, owned: np.ndarray) -> None:
    """Split ``total`` processors in proportion to the integer ``weights`` into
    ``owned``: floors, then one more for the largest remainders, ties to the lowest
    index: the policy's split (:meth:`olsctl.policies.mqbf.MultiQueueBackfill.owned`;
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
    """Each job's queue (:func:`queue_of_estimate`)."""
    for j in range(len(est)):
        queue_of[j] = queue_of_estimate(bounds, est[j])


@kernel(inline=True)
def queue_of_estimate(bounds, est: float) -> int:
    """A job's queue: the smallest k with its estimate < ``bounds[k]``, else the last
    (``bisect_right`` of the estimate in the increasing boundaries, s; a sequence or an
    array)."""
    q = 0
    while q < len(bounds) and bounds[q] <= est:
        q += 1
    return q


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


@kernel
def fits(w: int, own: int, gather: int, borrow: bool) -> bool:
    """TryStart's test for a job of width ``w``: its own partition has ``w`` free over its
    run (``own``, the partition's least free count), or, with ``borrow``, all partitions
    together have (``gather``, the sum of their positive least free counts): exactly
    when :func:`partition_allocation` finds its processors."""
    return own >= w or (borrow and gather >= w)
