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
from olsctl.policies.core.loop import (DUE, METRIC, NQ, N_CLOCK, N_COUNTS, N_TAIL,
                                       order_started, still_waiting, what_if_loop)
from olsctl.policies.core.order import WFP, rank_queue
from olsctl.policies.power.kernels import (F_CAP, F_IDLE, F_SLEEP, K_FORCE, K_PREDICTED,
                                           K_TOTAL, K_WINDOW, N_KFLT, N_KINT, FORCE_RESERVE,
                                           knapsack_pass, phase_power, recent_mean)

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
    ``learn[L_WINDOW]``, weights ``alpha`` ** age)."""
    nq = count[NQ]
    order = np.empty(nq, dtype=np.int64)  # (in WFP order: the last pass's order)
    rank = np.empty(len(procs), dtype=np.int64)
    for i in range(nq):
        order[i] = queue[i]
        rank[queue[i]] = i
    return knapsack_loop(code, procs, est, runtime, submit, start, queue, running, heap_t,
                         heap_j, started, clock, count, seen, bsld_s,
                         (runtime, juser, gpred, ring, ring_n, jstat, ph_off, ph_start, ph_w,
                          run_w, entry, kint, kflt, learn, alpha, order, rank,
                          np.empty(len(procs))))


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
    phases, then :func:`knapsack_pass`."""
    (runtime, juser, gpred, ring, ring_n, jstat, ph_off, ph_start, ph_w, run_w, entry,
     kint, kflt, learn, alpha, order, rank, key) = ps
    busy = 0
    for k in range(n_run):
        j = np.int64(running[k, 1])
        busy += procs[j]
        run_w[j] = phase_power(now, start[j], runtime[j], ph_start, ph_w, ph_off[j],
                               ph_off[j + 1])
    if busy >= idle + busy or nq == 0:
        return 0, n_run, mark  # nothing can start (the pass would return at once)
    if code == WFP:  # the last pass's order, put in the order of now
        rank_queue(code, now, order, nq, rank, key, queue, procs, est, submit)
        ordered = order
    else:
        ordered = queue
    ns, n_run = knapsack_pass(now, idle + busy, busy, ordered, nq, procs, est, start,
                              running, n_run, run_w, juser, gpred, entry, kint, kflt,
                              started)
    return ns, n_run, mark


@kernel(inline=True)
def knapsack_started(code: int, ps: tuple, ns: int, nq: int, mark: int, queue: np.ndarray,
                     start: np.ndarray, procs: np.ndarray) -> tuple:
    """``ns`` jobs started: the queue (arrival order) moves up behind them, and in WFP
    order the last pass's order too."""
    if code == WFP:
        return order_started(ps[15], queue, nq, start, ns), mark
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
#: order the last pass's order, each job's arrival rank and room for its key)
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
