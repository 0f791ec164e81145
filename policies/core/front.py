"""The front of a queue in WFP order, kept between a what-if's passes, so that a pass that
reads only the first jobs of the order ranks a few dozen jobs, not the whole queue
(kernels, see :mod:`olsctl.policies.core.jit`).

WFP's key ``-((now - submit) / estimate) ** 3 x processors`` orders the jobs as their
priority ``slope x (now - submit)`` does, ``slope`` being processors ** (1/3) /
estimate: a line in time per job. The front is some of the waiting jobs (those of
highest priority when it was taken). The rest is split in bands by slope; a band's
priorities stay under the line ``top + steepest x (now - then)`` (``then``: when the
front was taken, ``top``: the band's highest priority then, ``steepest``: its steepest
slope). A front job whose priority is above every band's line by far more than
rounding (:data:`FRONT_TOL`) is before every job of the rest in the exact order, so the front in exact order (:func:`rank_queue`), up to
its last such job, is the start of the whole queue's order.

A what-if keeps the front in ``order[:m]`` (the last pass's order) and ``farr[:m]`` (the
same jobs in arrival order), ``m`` in ``fint[FRONT_SIZE]``, and the rest's line in
``fflt``.
"""

from __future__ import annotations

import numpy as np

from olsctl.policies.core.jit import kernel
from olsctl.policies.core.order import WFP, rank_queue

#: ``fint``: the front's size (0: to be taken at the next pass), whether a front may
#: stand for the queue (0: the whole queue is ranked at each pass)
FRONT_SIZE, FRONT_ON = range(2)

N_FRONT_INT = 2

#: ``fflt``: when the front was taken, then for each of the rest's :data:`FRONT_BANDS`
#: bands of slopes (geometric, from its least slope to its steepest) the highest priority
#: then (-inf: an empty band) and the steepest slope
FRONT_THEN, FRONT_BANDS = 0, 8

N_FRONT_FLT = 1 + 2 * FRONT_BANDS

#: how far above the rest's line (relatively) a front job's priority must be to come
#: surely before every job of the rest: priorities, and keys (their cubes), are computed
#: within a few units in the last place, far below this
FRONT_TOL = 1e-9

#: the least priority that counts as above the line (its cube, and the key's, is a
#: normal number for any machine's width: no tie of underflowed keys)
FRONT_TINY = 1e-90

#: how many jobs a front takes, at least and beyond what a pass reads
FRONT_LEAST, FRONT_SPARE = 48, 16


@kernel
def front_open(now: float, queue: np.ndarray, nq: int, procs: np.ndarray,
               est: np.ndarray, submit: np.ndarray, slope: np.ndarray,
               fint: np.ndarray) -> None:
    """Each waiting job's ``slope`` (by job), and whether a front may stand for the
    queue: every slope finite and positive and every job submitted by ``now``
    (``fint[FRONT_ON]``); no front taken yet."""
    on = 1
    for i in range(nq):
        j = queue[i]
        s = procs[j] ** (1.0 / 3.0) / est[j]
        slope[j] = s
        if not (0.0 < s < np.inf) or not submit[j] <= now:
            on = 0
    fint[FRONT_SIZE] = 0
    fint[FRONT_ON] = on


@kernel(inline=True)
def front_order(now: float, order: np.ndarray, farr: np.ndarray, fint: np.ndarray,
                fflt: np.ndarray, nq: int, rank: np.ndarray, key: np.ndarray,
                queue: np.ndarray, procs: np.ndarray, est: np.ndarray,
                submit: np.ndarray, slope: np.ndarray, prio: np.ndarray,
                need: int) -> int:
    """The start of the WFP order of the waiting jobs ``queue[:nq]`` at ``now`` in
    ``order``: ranks the front, taking it afresh (:func:`front_take`) when it is empty
    or when fewer than ``need`` jobs would be known; returns how many of ``order`` are
    known to start the whole order (``nq``: all of it)."""
    m = fint[FRONT_SIZE]
    if m > 0:
        rank_queue(WFP, now, order, m, rank, key, farr, procs, est, submit)
        known = front_known(now, order, m, nq, submit, slope, fflt)
        if known >= need or known == nq:
            return known
    m = front_take(now, order, farr, fint, fflt, nq, queue, submit, slope, prio, need)
    rank_queue(WFP, now, order, m, rank, key, farr, procs, est, submit)
    return front_known(now, order, m, nq, submit, slope, fflt)


@kernel(inline=True)
def front_known(now: float, order: np.ndarray, m: int, nq: int, submit: np.ndarray,
                slope: np.ndarray, fflt: np.ndarray) -> int:
    """How many of the front ``order[:m]`` (in exact order) surely start the order of
    all ``nq`` waiting jobs: up to its last job above the rest's line."""
    if m == nq:
        return nq
    dt = now - fflt[FRONT_THEN]
    line = 0.0
    for b in range(FRONT_BANDS):
        x = fflt[1 + b] + fflt[1 + FRONT_BANDS + b] * dt
        line = x if x > line else line
    above = line + FRONT_TOL * line
    if above < FRONT_TINY:
        above = FRONT_TINY
    known = 0
    for i in range(m):
        j = order[i]
        if slope[j] * (now - submit[j]) > above:
            known = i + 1
    return known


@kernel
def front_take(now: float, order: np.ndarray, farr: np.ndarray, fint: np.ndarray,
               fflt: np.ndarray, nq: int, queue: np.ndarray, submit: np.ndarray,
               slope: np.ndarray, prio: np.ndarray, need: int) -> int:
    """A new front of the waiting jobs ``queue[:nq]`` (arrival order): those of highest
    priority now, ``need`` + :data:`FRONT_SPARE` of them and at least
    :data:`FRONT_LEAST` (all of them when a front may not stand for the queue), in
    ``farr`` and, in arrival order until ranked, ``order``; the rest's line in
    ``fflt``. Returns the front's size. ``prio`` is room for ``nq`` priorities."""
    size = need + 48
    if size < FRONT_LEAST:
        size = FRONT_LEAST
    if size >= nq or fint[FRONT_ON] == 0:
        for i in range(nq):
            farr[i] = queue[i]
            order[i] = queue[i]
        fint[FRONT_SIZE] = nq
        return nq
    for i in range(nq):
        j = queue[i]
        prio[i] = slope[j] * (now - submit[j])
    cut = np.partition(prio[:nq], nq - size)[nq - size]  # the size-th highest
    ties = size
    for i in range(nq):
        if prio[i] > cut:
            ties -= 1
    m = 0
    least = np.inf
    most = 0.0
    for i in range(nq):
        j = queue[i]
        g = prio[i]
        if g > cut or (g == cut and ties > 0):
            if g == cut:
                ties -= 1
            farr[m] = j
            order[m] = j
            m += 1
            prio[i] = -1.0  # (in the front)
        else:
            least = slope[j] if slope[j] < least else least
            most = slope[j] if slope[j] > most else most
    fflt[FRONT_THEN] = now
    for b in range(FRONT_BANDS):
        fflt[1 + b] = -np.inf
        fflt[1 + FRONT_BANDS + b] = 0.0
    ratio = (most / least) ** (1.0 / FRONT_BANDS) if m < nq else 1.0
    for i in range(nq):
        g = prio[i]
        if g < 0.0:
            continue
        s = slope[queue[i]]
        b = 0
        edge = least * ratio
        while b < FRONT_BANDS - 1 and s > edge:
            b += 1
            edge *= ratio
        if g > fflt[1 + b]:
            fflt[1 + b] = g
        if s > fflt[1 + FRONT_BANDS + b]:
            fflt[1 + FRONT_BANDS + b] = s
    fint[FRONT_SIZE] = m
    return m
