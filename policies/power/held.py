"""The window knapsack's job held for room (``force``: ``when-fits`` and ``reserve``):
finding it, when it would fit, and what may start while it waits (``backfill``); with
the start of a job that every pass of the knapsack makes. Compiled into the knapsack's
pass (:mod:`olsctl.policies.power.kernels`), whose ``run_w``, ``gpred[juser]`` and
``running`` rows these read as it does.
"""

from __future__ import annotations

import numpy as np

from olsctl.policies.core.backfill import insert_running
from olsctl.policies.core.jit import kernel

#: ``backfill`` settings: while the machine is held for a job (``force: reserve``), the
#: jobs that may start meanwhile are the window's, or the whole queue's, or the whole
#: queue's and, as in EASY, those that leave the held job its processors and headroom
BACKFILL_WINDOW, BACKFILL_QUEUE, BACKFILL_EXTRA = range(3)
BACKFILL_CODES = {"window": BACKFILL_WINDOW, "queue": BACKFILL_QUEUE, "easy": BACKFILL_EXTRA}


@kernel(inline=True)
def start_job(j: int, now: float, procs: np.ndarray, est: np.ndarray, start: np.ndarray,
              running: np.ndarray, n_run: int) -> int:
    """Job ``j`` starts now (as :meth:`olsctl.state.SimState.start`); returns the
    running jobs' count."""
    start[j] = now
    return insert_running(running, n_run, now + est[j], j)


@kernel
def held_job(entry: np.ndarray, ordered: np.ndarray, nq: int) -> int:
    """The waiting job the knapsack holds the machine for (window entry -inf), or -1."""
    for i in range(nq):
        j = ordered[i]
        if entry[j] == -np.inf:
            return j
    return -1


@kernel(inline=True)
def counted_w(j: int, run_w: np.ndarray, juser: np.ndarray, gpred: np.ndarray,
              predicted: bool) -> float:
    """Running job ``j``'s power per processor as the headroom counts it: as measured now,
    or with ``predicted`` the larger of that and its prediction."""
    w = run_w[j]
    if predicted:
        later = gpred[juser[j]]
        w = w if w >= later else later
    return w


@kernel(inline=True)
def fits_at(held: int, rise: float, room: float, free: int, procs: np.ndarray,
            running: np.ndarray, n_run: int, run_w: np.ndarray, juser: np.ndarray,
            gpred: np.ndarray, predicted: bool, idle_w: float) -> float:
    """Expected time (by the running jobs' estimates) at which the held job would fit the
    processors and the headroom, each running job leaving what the headroom counted for
    it; the last expected end if it fits only on an idle machine."""
    for k in range(n_run):
        j = np.int64(running[k, 1])
        free += procs[j]
        room += procs[j] * (counted_w(j, run_w, juser, gpred, predicted) - idle_w)
        if free >= procs[held] and room >= rise:
            return running[k, 0]
    return running[n_run - 1, 0]


@kernel
def backfill_queue(now: float, active: int, busy: int, held: int, until: float,
                   room: float, ordered: np.ndarray, nq: int, procs: np.ndarray,
                   est: np.ndarray, start: np.ndarray, running: np.ndarray, n_run: int,
                   run_w: np.ndarray, juser: np.ndarray, gpred: np.ndarray,
                   predicted: bool, idle_w: float, backfill: int, started: np.ndarray,
                   ns: int) -> tuple:
    """While the machine is held for job ``held`` (expected to fit at ``until``), the
    jobs of the whole queue (``ordered[:nq]``, in its order) that fit the free
    processors and the headroom ``room`` now start if they end, by their estimates, by
    ``until`` or (``BACKFILL_EXTRA``) take no more than the processors and headroom the
    held job leaves over at ``until`` (counted as :func:`fits_at` counts them). Returns
    (jobs started, running jobs)."""
    spare = 0
    spare_w = 0.0
    if backfill == BACKFILL_EXTRA:
        spare = active - busy - procs[held]
        spare_w = room - procs[held] * (gpred[juser[held]] - idle_w)
        for k in range(n_run):
            if running[k, 0] > until:
                break
            j = np.int64(running[k, 1])
            spare += procs[j]
            spare_w += procs[j] * (counted_w(j, run_w, juser, gpred, predicted) - idle_w)
    for i in range(nq):
        j = ordered[i]
        if j == held or start[j] == start[j]:  # (started in this pass: not NaN)
            continue
        rise = procs[j] * (gpred[juser[j]] - idle_w)
        if procs[j] > active - busy or rise > room:
            continue
        if now + est[j] > until:
            if procs[j] > spare or rise > spare_w:
                continue
            spare -= procs[j]
            spare_w -= rise
        n_run = start_job(j, now, procs, est, start, running, n_run)
        started[ns] = j
        ns += 1
        busy += procs[j]
        room -= rise
    return ns, n_run
