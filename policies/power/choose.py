"""The window knapsack's choice (Wallace et al.): of the jobs in the window, those with
the most processors whose predicted power rises fit the headroom, by an exact dynamic
program over processor counts (a kernel, see :mod:`olsctl.policies.core.jit`), called by
every pass of :mod:`olsctl.policies.power.kernels`.
"""

from __future__ import annotations

import numpy as np

from olsctl.policies.core.jit import kernel


@kernel
def knapsack_choose(cand: np.ndarray, nc: int, free: int, room: float, procs: np.ndarray,
                    juser: np.ndarray, gpred: np.ndarray, idle_w: float) -> int:
    """Of the jobs ``cand[:nc]``, those with the most processors whose predicted increases
    sum to at most ``room`` (and processors to at most ``free``), solved exactly by
    dynamic programming over processor counts; ties keep earlier jobs. They are left in
    ``cand`` (in their order); returns how many."""
    m = 0
    for i in range(nc):  # the items: the jobs with the processors
        j = cand[i]
        if procs[j] <= free:
            cand[m] = j
            m += 1
    if m == 0:
        return 0
    rise = np.empty(m)
    over = True
    rising = True  # no job lowers the power
    n_sum = 0
    w_sum = 0.0
    for i in range(m):
        j = cand[i]
        rise[i] = procs[j] * (gpred[juser[j]] - idle_w)
        if not (0 <= rise[i] > room):
            over = False
        if rise[i] < 0:
            rising = False
        n_sum += procs[j]
        w_sum += rise[i]
    if over:
        return 0  # every job alone is over the headroom: only the empty set fits
    if n_sum <= free and w_sum <= room:
        return m  # all of them fit: the most processors
    top = n_sum if n_sum < free else free  # (no more processors can be taken)
    best = np.full(top + 1, np.inf)
    best[0] = 0.0
    took = np.zeros((m, top + 1), dtype=np.bool_)
    # [exact] Only sizes up to ``reach`` + the job's processors can change: ``reach`` is
    # the largest size any set of the jobs so far has (best is inf beyond it), or, when
    # no job lowers the power, the largest whose least power fits ``room`` (a set over it
    # stays over it as jobs join, so it leads to no answer nor to a step back through
    # ``took``), and a job alone over ``room`` joins no set.
    reach = 0
    for i in range(m):
        n = procs[cand[i]]
        w = rise[i]
        if rising and w > room:
            continue
        hi = reach + n if reach + n < top else top
        for s in range(hi, n - 1, -1):
            c = best[s - n] + w
            if c < best[s]:
                best[s] = c
                took[i, s] = True
        if not rising:
            reach = hi
        else:
            for s in range(hi, reach, -1):
                if best[s] <= room:
                    reach = s
                    break
    size = 0
    for s in range(top, -1, -1):
        if best[s] <= room:
            size = s
            break
    k = 0
    picked = np.empty(m, dtype=np.int64)
    for i in range(m - 1, -1, -1):
        if size == 0:
            break
        if took[i, size]:
            picked[k] = cand[i]
            k += 1
            size -= procs[cand[i]]
    for i in range(k):
        cand[i] = picked[k - 1 - i]
    return k
