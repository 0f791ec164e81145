"""The window knapsack's what-if loop over arrays: the one what-if loop
(:func:`olsctl.policies.core.loop.what_if_loop`) with the knapsack's steps, which keep
the power its pass reads (:mod:`olsctl.policies.power.kernels`): each running job's power
now from its true phases, and the history predictor's value per user, learned from the
jobs that end in the what-if as the main simulator learns it.

:class:`olsctl.policies.power.template.KnapsackTemplate` fills the arrays from a snapshot
and reads the start times back.
"""

from __future__ import annotations

import numpy as np

from olsctl.policies.core.backfill import INF
from olsctl.policies.core.bound import MEAN_BSLD
from olsctl.policies.core.jit import kernel, specialize, warm_up
from olsctl.policies.core.front import (FRONT_ON, FRONT_SIZE, FRONT_SPARE, N_FRONT_FLT,
                                        N_FRONT_INT,
                                        front_open, front_order)
from olsctl.policies.core.loop import (DUE, METRIC, NOW, NQ, N_CLOCK, N_COUNTS, N_TAIL,
                                       order_started, still_waiting, what_if_loop)
from olsctl.policies.core.order import WFP
from olsctl.policies.power.kernels import (F_CAP, F_IDLE, F_SLEEP, FORCE_NOW, FORCE_RESERVE,
                                           K_FORCE, K_HELD, K_PREDICTED, K_TOTAL, K_WHOLE,
                                           K_WINDOW, N_KFLT, N_KINT, phase_power,
                                           recent_mean, window_pass)

#: ``learn``: whether predictions follow a per-user history, and how many jobs it weighs
L_HISTORY, L_WINDOW = range(2)


@kernel
def knapsack_forward(code: int, procs: np.ndarray, est: np.ndarray, runtime: np.ndarray,
                     submit: np.ndarray, start: np.ndarray, queue: np.ndarray,
                     running: np.ndarray, heap_t: np.ndarray, heap_j: np.ndarray,
                     started: np.ndarray, clock: np.ndarray, count: np.ndarray,
                     seen: np.ndarray, bsld_s: float, juser: np.ndarray, gpred: np.ndarray,
                     ring: np.ndarray, ring_n: np.ndarray, jstat: np.ndarray,
                     ph_off: np.ndarray, ph_start: np.ndarray, ph_w: np.ndarray,
                     run_w: np.ndarray, entry: np.ndarray, kint: np.ndarray,
                     kflt: np.ndarray, learn: np.ndarray, alpha: float) -> bool:
    """Run a window-knapsack what-if forward (arrays set up by
    :func:`olsctl.policies.core.loop.running_open`) as
    :func:`olsctl.whatif.steps` does, until every job has started, nothing more can
    happen, or the next instant is past the horizon; returns True when the SLA bound cut
    it short instead (see :func:`olsctl.policies.core.loop.what_if_loop`).

    Power: ``ph_off[j]:ph_off[j + 1]`` are job ``j``'s phases in ``ph_start``, ``ph_w``;
    its prediction is ``gpred[juser[j]]``; with ``learn[L_HISTORY]``, each job that ends
    adds its true ``jstat`` to its user's last jobs (``ring``, ``ring_n``), and the
    user's prediction becomes their weighted mean (:func:`recent_mean`, the last
    ``learn[L_WINDOW]``, weights ``alpha`` ** age).

    In WFP order the loop keeps the order's front (:mod:`olsctl.policies.core.front`)
    and, unless two waiting jobs are marked held, the held job (``kint[K_HELD]``)."""
    nq = count[NQ]
    n = len(procs)
    rank = np.empty(n, dtype=np.int64)
    for i in range(nq):
        rank[queue[i]] = i
    fint = np.zeros(N_FRONT_INT, dtype=np.int64)
    slope = np.empty(n)
    if code == WFP:
        front_open(clock[NOW], queue, nq, procs, est, submit, slope, fint)
    if kint[K_FORCE] != FORCE_NOW and kint[K_HELD] == 0:
        marked = 0
        for i in range(nq):
            if entry[queue[i]] == -np.inf:
                marked += 1
                kint[K_HELD] = queue[i] + 2
        if marked == 0:
            kint[K_HELD] = 1
        elif marked > 1:  # (searched at each pass, in the whole queue's order)
            kint[K_HELD] = 0
            fint[FRONT_ON] = 0
    return knapsack_loop(code, procs, est, runtime, submit, start, queue, running, heap_t,
                         heap_j, started, clock, count, seen, bsld_s,
                         (runtime, juser, gpred, ring, ring_n, jstat, ph_off, ph_start, ph_w,
                          run_w, entry, kint, kflt, learn, alpha, np.empty(nq, np.int64),
                          rank, np.empty(n), np.empty(nq, np.int64), fint,
                          np.zeros(N_FRONT_FLT), slope, np.empty(nq), np.full(n, -1.0),
                          np.empty(kint[K_WINDOW], np.int64), np.empty(kint[K_WINDOW], np.int64)))


@kernel(inline=True)
def knapsack_by_position(code: int) -> bool:
    """The knapsack's what-ifs keep the queue in arrival order (each pass orders it)."""
    return False


@kernel(inline=True)
def knapsack_marks(ps: tuple, queue: np.ndarray, nq: int, procs: np.ndarray) -> int:
    """No mark between the knapsack's passes."""
    return 0


@kernel(inline=True)
def knapsack_step(code: int, ps: tuple, now: float, idle: int, n_pos: int, nq: int,
                  mark: int, queue: np.ndarray, procs: np.ndarray, est: np.ndarray,
                  submit: np.ndarray, start: np.ndarray, running: np.ndarray, n_run: int,
                  started: np.ndarray) -> tuple:
    """The knapsack's pass in the what-if loop: the running jobs' power now, from their
    phases (looked up only once a job's phase has changed), then :func:`knapsack_pass`."""
    (runtime, juser, gpred, ring, ring_n, jstat, ph_off, ph_start, ph_w, run_w, entry,
     kint, kflt, learn, alpha, order, rank, key, farr, fint, fflt, slope, prio, ph_next,
     win, chosen) = ps
    busy = 0
    for k in range(n_run):
        j = np.int64(running[k, 1])
        busy += procs[j]
        x = (now - start[j]) / runtime[j] if runtime[j] > 0 else 0.0
        if not x < ph_next[j]:  # (the share done only grows: else the same phase)
            run_w[j], ph_next[j] = phase_power(x, ph_start, ph_w, ph_off[j], ph_off[j + 1])
    if busy >= idle + busy or nq == 0:
        return 0, n_run, mark  # nothing can start (the pass would return at once)
    if code == WFP:  # the front of the order of now
        known = front_order(now, order, farr, fint, fflt, nq, rank, key, queue, procs, est,
                            submit, slope, prio, kint[K_WINDOW] + FRONT_SPARE)
        ordered = order
    else:
        known = nq
        ordered = queue
    kint[K_WHOLE] = 0
    ns, n_run = window_pass(now, idle + busy, busy, ordered, nq, procs, est, submit, start,
                            running, n_run, run_w, juser, gpred, entry, kint, kflt, started,
                            known, code, queue, win, chosen)
    if kint[K_WHOLE]:
        fint[FRONT_SIZE] = 0  # (the whole queue ordered: a front taken afresh next)
    held = kint[K_HELD] - 2
    if held >= 0 and start[held] == start[held]:
        kint[K_HELD] = 1  # the held job started
    return ns, n_run, mark


@kernel(inline=True)
def knapsack_started(code: int, ps: tuple, ns: int, nq: int, mark: int, queue: np.ndarray,
                     start: np.ndarray, procs: np.ndarray) -> tuple:
    """``ns`` jobs started: the queue (arrival order) moves up behind them, and in WFP
    order the front too (in the last pass's order and in arrival order)."""
    fint = ps[19]
    if code == WFP and fint[FRONT_SIZE]:
        fint[FRONT_SIZE] = order_started(ps[15], ps[18], fint[FRONT_SIZE], start, ns)
    return still_waiting(queue, nq, start, ns), mark


@kernel(inline=True)
def knapsack_finished(ps: tuple, j: int) -> None:
    """Job ``j`` ended: under the history predictor, its user's history learns it."""
    juser, gpred, ring, ring_n, jstat, learn, alpha = (ps[1], ps[2], ps[3], ps[4], ps[5],
                                                       ps[13], ps[14])
    if learn[L_HISTORY]:
        u = juser[j]
        m = ring_n[u]
        width = ring.shape[1]
        if m < width:
            ring[u, m] = jstat[j]
            ring_n[u] = m + 1
        else:
            for i in range(width - 1):
                ring[u, i] = ring[u, i + 1]
            ring[u, width - 1] = jstat[j]
        gpred[u] = recent_mean(ring[u], ring_n[u], learn[L_WINDOW], alpha)


@kernel(inline=True)
def knapsack_woke(ps: tuple, active: int) -> None:
    """Nothing of the knapsack's own to update when a wake finishes."""


#: the window knapsack's what-if loop: the one loop with the knapsack's steps; ``ps`` =
#: (runtimes, each job's prediction group, each group's prediction, the history's last
#: jobs per user and their counts, each job's true stat, the phases (offsets, starts,
#: levels), room for the running jobs' power, window entries, the pass's settings
#: (``kint``, ``kflt``), the history's settings and its weight ``alpha``, then in WFP
#: order the front (:mod:`olsctl.policies.core.front`: in the last pass's order, each
#: job's arrival rank, room for its key, the front in arrival order, ``fint``, ``fflt``,
#: each job's slope, room for the priorities), and for each running job the share of its
#: runtime at which its power next changes (below 0: to be found), and room for a
#: pass's window)
knapsack_loop = specialize(what_if_loop, "knapsack_loop", refcounts=False,
                           pass_by_position=knapsack_by_position, pass_marks=knapsack_marks,
                           pass_step=knapsack_step, pass_started=knapsack_started,
                           pass_finished=knapsack_finished, pass_woke=knapsack_woke)


@warm_up
def knapsack_warm_up(k) -> None:
    """Run the knapsack's kernels ``k`` on a tiny what-if (compiles or loads them)."""
    n = 3
    procs = np.array([2, 2, 4], dtype=np.int64)
    est = np.array([10.0, 5.0, 10.0])
    start = np.array([0.0, np.nan, np.nan])
    running, heap_t = np.zeros((n, 2)), np.zeros(n)
    heap_j, started = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    count = np.zeros(N_COUNTS, dtype=np.int64)
    count[:NQ + 1] = (4, 0, 2)
    count[DUE] = 1
    count[METRIC] = MEAN_BSLD
    clock = np.zeros(N_TAIL)
    clock[:N_CLOCK] = (0.0, INF, INF, 1.0, 0.0)
    seen = np.zeros(n, dtype=np.bool_)
    k.running_open(1, procs, est, est, np.zeros(n), start, running, heap_t, heap_j, count,
                    clock, seen, 10.0)
    kint = np.zeros(N_KINT, dtype=np.int64)
    kint[K_WINDOW], kint[K_FORCE], kint[K_PREDICTED], kint[K_TOTAL] = 2, FORCE_RESERVE, 1, 4
    kflt = np.zeros(N_KFLT)
    kflt[F_IDLE], kflt[F_SLEEP], kflt[F_CAP] = 50.0, 5.0, 800.0
    users = np.zeros(n, dtype=np.int64)
    k.knapsack_forward(WFP, procs, est, est, np.zeros(n), start,
                       np.array([1, 2, 0], dtype=np.int64), running, heap_t, heap_j,
                       started, clock, count, seen, 10.0, users, np.full(1, 200.0),
                       np.zeros((1, 2)), np.zeros(1, dtype=np.int64), np.full(n, 150.0),
                       np.arange(n + 1, dtype=np.int64), np.zeros(n), np.full(n, 150.0),
                       np.zeros(n), np.full(n, np.nan), kint, kflt,
                       np.array([1, 2], dtype=np.int64), 1.0)
    k.first_seen(users, np.full(1, -1, dtype=np.int64), np.empty(n, dtype=np.int64),
                 np.empty(n, dtype=np.int64))  # (a template's users)
    k.pick_phases(np.arange(n + 1, dtype=np.int64), np.zeros(n), np.full(n, 150.0),
                  np.array([2, 0], dtype=np.int64))  # (a snapshot's phases)
    # the main simulator's pass (policies/power/knapsack.py), with its arguments' types
    n_run = 1
    rows = np.zeros((n + n_run, 2))
    rows[0] = (10.0, 0.0)
    for metered in (False, True):
        k.main_pass(0.0, 4, 2, np.array([1, 2], dtype=np.int64), 2, procs, est, est,
                    np.full(n, np.nan), rows, n_run, np.full(n, 150.0), metered, start,
                    est, np.arange(n + 1, dtype=np.int64), np.zeros(n), np.full(n, 150.0),
                    users, np.full(1, 200.0), np.full(n, np.nan), np.full(n, np.nan), kint,
                    kflt, 2, FORCE_RESERVE, 0, True, 4, 50.0, 5.0, 800.0,
                    np.zeros(n, dtype=np.int64), WFP, np.zeros(n, dtype=np.int64), 0,
                    np.zeros(n, dtype=np.bool_), np.zeros(n, dtype=np.int64), np.zeros(n),
                    np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros(n))
