"""MQBF's decisions as plain Python kernels over arrays (see :mod:`olsctl.policies.core.jit`).

Here belong one multiple-queue backfilling pass (:func:`mqbf_pass`, the rules of
docs/mqbf.md: queues by estimate boundaries, partitions by largest-remainder shares of the
active processors, a free-processor profile per partition over future time, Phase A in
the order of the queue heads, Phase B over the rest, borrowing lowest index first) and
the what-if loop that runs a snapshot forward with it (:func:`mqbf_forward`, as
:func:`olsctl.whatif.steps` runs one: completions, then a wake under way, then one pass,
at each instant). :mod:`olsctl.policies.mqbf.template` fills the arrays and reads them back.

Every pass is a full pass: the profiles are built from the running jobs, and each
pivot's reservation is made when the pivot is made, in pivot order. Phase B walks an
index over the queue's positions (:func:`mqbf_indexed_phases`): in the main simulator
built for the pass, in a what-if once per call of the loop. The functions only
index numpy arrays and call other kernels, so their compiled copies run them as they are.

Data (n jobs, K partitions): job columns ``procs``, ``est``, ``runtime``, ``submit``,
``start`` (NaN while waiting) and ``queue_of`` (the job's queue, 0-based), indexed by
job; ``alloc[j, p]`` the processors running job ``j`` holds from partition ``p`` and
``held[p]`` their sum over the running jobs; ``running[k] = (expected end, job)`` in
(end, job) order. A pass's profile is ``times[:m]`` (segment i starts at ``times[i]``,
the last one is unbounded; ``times[0]`` is now) and ``free[p, i]``, partition p's free
processors on segment i; ``room`` holds its segment count, the active processors not
in use and what a job can get now (:data:`SEGMENTS`, :data:`IDLE`, :data:`ROOM`).
"""

from __future__ import annotations

import numpy as np

from olsctl.policies.core.backfill import INF
from olsctl.policies.core.index import index_open
from olsctl.policies.core.jit import kernel, specialize, warm_up
from olsctl.policies.core.loop import (ACTIVE, DUE, LIMIT, METRIC, NOW, NQ, UNTIL,
                                       VALUE, WAKE_N, WAKE_T, running_open,
                                       what_if_loop)
from olsctl.policies.core.order import FCFS, WFP, order_into
from olsctl.policies.core.score import (N_ROW, OUT_CUT, OUT_DONE, OUT_WIDE, ROW_BOUND,
                                        ROW_MEAN_BSLD, ROW_NOW, ROW_STATUS, ROW_UNSTARTED,
                                        closest_loop, rows_scored, score_columns)
from olsctl.policies.mqbf.phases import (P_HEAD, link_queues, mqbf_indexed_phases,
                                         narrowest_of, pass_opens, pass_parts)
from olsctl.policies.mqbf.profile import partition_counts
from olsctl.policies.mqbf.wfp_phases import mqbf_wfp_phases
from olsctl.policies.mqbf.wfp_trees import wfp_narrowest, wfp_trees_open


@kernel
def mqbf_open(n_run: int, procs: np.ndarray, est: np.ndarray, runtime: np.ndarray,
              submit: np.ndarray, start: np.ndarray, alloc: np.ndarray, held: np.ndarray,
              running: np.ndarray, heap_t: np.ndarray, heap_j: np.ndarray,
              count: np.ndarray, clock: np.ndarray, seen: np.ndarray,
              bsld_s: float) -> None:
    """Complete a what-if's arrays once the caller has filled the job columns, the
    allocations of the running jobs (jobs 0 .. ``n_run`` - 1, started at ``start``),
    the counters (:data:`olsctl.policies.core.loop.ACTIVE` and after: active processors,
    processors of a wake under way, pass due, the SLA metric) and the clock (now, the
    wake's time, the horizon, the SLA limit): the running jobs in (expected end, job)
    order, what they hold per partition and in all, the heap of their true ends
    (start + runtime) and, with a metric, the SLA bound
    (:func:`olsctl.policies.core.loop.running_open`)."""
    for p in range(len(held)):
        held[p] = 0
    for j in range(n_run):
        for p in range(len(held)):
            held[p] += alloc[j, p]
    running_open(n_run, procs, est, runtime, submit, start, running, heap_t, heap_j, count,
                 clock, seen, bsld_s)


@kernel
def mqbf_forward(code: int, borrow: bool, weights: np.ndarray, procs: np.ndarray,
                 est: np.ndarray, runtime: np.ndarray, submit: np.ndarray,
                 start: np.ndarray, queue_of: np.ndarray, queue: np.ndarray,
                 alloc: np.ndarray, held: np.ndarray, owned: np.ndarray,
                 running: np.ndarray, heap_t: np.ndarray, heap_j: np.ndarray,
                 times: np.ndarray, free: np.ndarray, pivot_s: np.ndarray,
                 pivot_j: np.ndarray, started: np.ndarray, count: np.ndarray,
                 clock: np.ndarray,
                 seen: np.ndarray, bsld_s: float) -> bool:
    """Run an MQBF what-if forward (arrays set up by :func:`mqbf_open`) as
    :func:`olsctl.whatif.steps` does: at each instant the completions due (the heap of
    true ends), then a wake under way (``WAKE_T``: ``WAKE_N`` processors active, the
    partitions split again by ``weights``), then one pass (:func:`mqbf_pass`) if
    something happened (``DUE``); until every job has started, nothing more can happen,
    or the next instant is past ``UNTIL``. ``owned`` must hold the split of ``ACTIVE``.
    Returns True when the SLA bound cut the run short instead (``VALUE`` holds the
    bound; called again, it goes on under ``LIMIT``, or with no bound once ``METRIC``
    is 0). ``queue[:NQ]`` waits in arrival order; the arrays hold the whole run between
    calls. ``times`` and ``free`` have room for n + 2 K + 2 segments."""
    nq = count[NQ]
    k = len(owned)
    # one pass's scratch, for every pass: the queue only shrinks
    parts = pass_parts(k)
    least = np.empty((k + 1, free.shape[1]), dtype=np.int64)
    # the queue by position: in FCFS, SAF or SJF order in that order (no key changes
    # while a job waits), each queue's jobs linked (each queue's first position in
    # parts[P_HEAD], then ``after`` each one), with the index of the waiting jobs (see
    # mqbf_indexed_phases); in WFP order in arrival order, with each queue's tree of its
    # jobs, kept from pass to pass (see mqbf_wfp_phases)
    order = np.empty((2, nq), dtype=np.int64)
    done = np.zeros(nq, dtype=np.bool_)
    now = clock[NOW]
    if code == WFP:
        order_into(FCFS, now, queue[:nq], procs, est, submit, order[0])
        trees, tree_i, tree_f = wfp_trees_open(order[0], nq, queue_of, k, now, procs, est,
                                               submit, True)
        size, wide, short = 0, np.empty(0, dtype=np.int64), np.empty(0)
    else:
        order_into(code, now, queue[:nq], procs, est, submit, order[0])
        link_queues(order[0], nq, queue_of, parts[P_HEAD, :k], order[1])
        size, wide, short = index_open(order[0], nq, procs, est)
        # (no trees: empty arrays of their types)
        trees = np.zeros((1, 3), dtype=np.int64)
        tree_i, tree_f = np.empty(0, dtype=np.int64), np.empty(0)
    return mqbf_loop(code, procs, est, runtime, submit, start, queue, running, heap_t,
                     heap_j, started, clock, count, seen, bsld_s,
                     (borrow, weights, queue_of, alloc, held, owned, times, free, pivot_s,
                      pivot_j, parts, least, order, done, size, wide, short, trees, tree_i,
                      tree_f))


@kernel(inline=True)
def mqbf_marks(ps: tuple, queue: np.ndarray, nq: int, procs: np.ndarray) -> int:
    """MQBF's mark at a loop's start: the narrowest waiting job's width (it changes only
    when jobs start)."""
    return narrowest_of(queue[:nq], procs)


@kernel(inline=True)
def mqbf_step(code: int, ps: tuple, now: float, idle: int, n_pos: int, nq: int,
              narrowest: int, queue: np.ndarray, procs: np.ndarray, est: np.ndarray,
              submit: np.ndarray, start: np.ndarray, running: np.ndarray, n_run: int,
              started: np.ndarray) -> tuple:
    """MQBF's pass in the what-if loop (:func:`olsctl.policies.core.loop.what_if_loop`):
    none when nothing waiting is narrow enough for the ``idle`` processors; in a fixed
    order, the indexed phases over the queue kept by position; in WFP order, the phases
    over the queue sorted again from the last pass's order."""
    (borrow, weights, queue_of, alloc, held, owned, times, free, pivot_s, pivot_j, parts,
     least, order, done, size, wide, short, trees, tree_i, tree_f) = ps
    if not pass_opens(idle, narrowest, pivot_s, pivot_j):
        return 0, n_run, narrowest
    if code != WFP:
        ns, n_run = mqbf_indexed_phases(borrow, now, idle, order[0], order[1], done, procs,
                                        est, queue_of, owned, held, running, n_run, alloc,
                                        times, free, pivot_s, pivot_j, started, parts, least,
                                        size, wide, short)
    else:
        ns, n_run = mqbf_wfp_phases(borrow, now, idle, order[0], done, procs, est, submit,
                                    queue_of, owned, held, running, n_run, alloc, times,
                                    free, pivot_s, pivot_j, started, parts, least, trees,
                                    tree_i, tree_f)
    return ns, n_run, narrowest


@kernel(inline=True)
def mqbf_started(code: int, ps: tuple, ns: int, nq: int, narrowest: int,
                 queue: np.ndarray, start: np.ndarray, procs: np.ndarray) -> tuple:
    """``ns`` jobs started: they leave holes in the queue by position, and the narrowest
    waiting job is found again (the root of the index, or in WFP order of the trees)."""
    nq -= ns
    if nq == 0:
        return nq, 0
    if code == WFP:
        return nq, wfp_narrowest(ps[17], ps[18])
    return nq, ps[15][1]


@kernel(inline=True)
def mqbf_by_position(code: int) -> bool:
    """MQBF's what-ifs keep the queue by position in every order (WFP's by its trees)."""
    return True


@kernel(inline=True)
def mqbf_finished(ps: tuple, j: int) -> None:
    """Job ``j`` ended: its partitions get back what it held."""
    alloc, held = ps[3], ps[4]
    for p in range(len(held)):
        held[p] -= alloc[j, p]


@kernel(inline=True)
def mqbf_woke(ps: tuple, active: int) -> None:
    """A wake finished: the partitions split the ``active`` processors again."""
    partition_counts(ps[1], active, ps[5])


#: MQBF's what-if loop: the one loop with MQBF's steps; ``ps`` = (borrow, the partitions'
#: weights, each job's queue, each job's processors per partition, what the running jobs
#: hold, each partition's share, the profile's times and free processors, the pivots'
#: reservations and jobs, a pass's scratch (parts, least), the queue in its order and
#: each queue's jobs linked (or in WFP order, the last pass's order), done, and the
#: index's size, widths and estimates (in WFP order: empty), then in WFP order each
#: queue's tree and room for Phase B's candidates (see mqbf_wfp_phases))
mqbf_loop = specialize(what_if_loop, "mqbf_loop", refcounts=False,
                       pass_by_position=mqbf_by_position, pass_marks=mqbf_marks,
                       pass_step=mqbf_step,
                       pass_started=mqbf_started, pass_finished=mqbf_finished,
                       pass_woke=mqbf_woke)


@kernel
def settle_at(c: int, code: int, borrow: bool, weights: np.ndarray, procs: np.ndarray,
              est: np.ndarray, runtime: np.ndarray, submit: np.ndarray,
              queue_of: np.ndarray, times: np.ndarray, free: np.ndarray,
              pivot_s: np.ndarray, pivot_j: np.ndarray, started: np.ndarray,
              start: np.ndarray, queue: np.ndarray, alloc: np.ndarray, held: np.ndarray,
              owned: np.ndarray, running: np.ndarray, heap_t: np.ndarray,
              heap_j: np.ndarray, count: np.ndarray, clock: np.ndarray, seen: np.ndarray,
              censor: bool, bsld_s: float, out: np.ndarray) -> None:
    """Run row ``c``'s MQBF what-if on (:func:`mqbf_forward`) and write how it ended into
    ``out[c]`` (the slots of :mod:`olsctl.policies.easy.forward`'s ``ROW_*``); one run to its
    end is scored (:func:`score_columns`) and ``out[c, N_ROW + q]`` gets queue q's mean
    bounded slowdown (its jobs' sum in job order, as numpy's ``bincount`` adds; 1 for a
    queue without jobs)."""
    row = out[c]
    clock_c = clock[c]
    if mqbf_forward(code, borrow, weights, procs, est, runtime, submit, start[c], queue_of,
                    queue[c], alloc[c], held[c], owned[c], running[c], heap_t[c],
                    heap_j[c], times, free, pivot_s, pivot_j, started, count[c], clock_c,
                    seen[c], bsld_s):
        row[ROW_STATUS] = OUT_CUT
        row[ROW_BOUND] = clock_c[VALUE]
        row[ROW_NOW] = clock_c[NOW]
        return
    row[ROW_STATUS] = OUT_DONE
    row[ROW_NOW] = clock_c[NOW]
    bsld = score_columns(start[c], submit, runtime, censor, clock_c[UNTIL], bsld_s, row)
    k = len(weights)
    sums = np.zeros(k)
    jobs = np.zeros(k, dtype=np.int64)
    for j in range(len(bsld)):
        sums[queue_of[j]] += bsld[j]
        jobs[queue_of[j]] += 1
    for q in range(k):
        row[N_ROW + q] = sums[q] / jobs[q] if jobs[q] else 1.0


@kernel
def mqbf_candidates(code: int, borrow: bool, weights: np.ndarray, procs: np.ndarray,
                    est: np.ndarray, runtime: np.ndarray, submit: np.ndarray,
                    queue_of: np.ndarray, n_run: int, times: np.ndarray, free: np.ndarray,
                    pivot_s: np.ndarray, pivot_j: np.ndarray, started: np.ndarray,
                    start: np.ndarray, queue: np.ndarray, alloc: np.ndarray,
                    held: np.ndarray, owned: np.ndarray, running: np.ndarray,
                    heap_t: np.ndarray, heap_j: np.ndarray, count: np.ndarray,
                    clock: np.ndarray, seen: np.ndarray, setting: np.ndarray,
                    wake_t: np.ndarray, censor: bool, bsld_s: float, sla: int,
                    limit: float, first_met: bool, then_closest: bool,
                    out: np.ndarray) -> tuple:
    """A tick's MQBF what-ifs, candidate by candidate, as
    :func:`olsctl.policies.easy.forward.easy_candidates` runs EASY's: candidate c's row is
    copied from the template row (the last), given its machine setting ``setting[c]`` =
    (its machine, active processors, processors of a wake under way, pass due) and the
    wake's time ``wake_t[c]``, run and scored into ``out[c]`` (:func:`settle_at`).
    One whose machine is narrower than a waiting job (of those after the ``n_run``
    running) is not run: the row counts those jobs as unstarted. With ``first_met``,
    stops after the first whose ``sla`` score is at most ``limit``; when none is, with
    ``then_closest``, the closest is finished (:func:`mqbf_closest`). Returns (how many
    ran or were skipped as too wide, how many times one went on)."""
    t = len(out)
    n = len(procs)
    widest = 0
    for j in range(n_run, n):
        if procs[j] > widest:
            widest = procs[j]
    for c in range(t):
        row = out[c]
        machine = setting[c, 0]
        if widest > machine:
            row[ROW_STATUS] = OUT_WIDE
            too_wide = 0
            for j in range(n_run, n):
                if procs[j] > machine:
                    too_wide += 1
            row[ROW_UNSTARTED] = too_wide
            continue
        start[c, :] = start[t]
        queue[c, :] = queue[t]
        alloc[c, :, :] = alloc[t]
        held[c, :] = held[t]
        running[c, :, :] = running[t]
        heap_t[c, :] = heap_t[t]
        heap_j[c, :] = heap_j[t]
        count[c, :] = count[t]
        clock[c, :] = clock[t]
        seen[c, :] = seen[t]
        count[c, ACTIVE] = setting[c, 1]
        count[c, WAKE_N] = setting[c, 2]
        count[c, DUE] = setting[c, 3]
        clock[c, WAKE_T] = wake_t[c]
        partition_counts(weights, setting[c, 1], owned[c])
        settle_at(c, code, borrow, weights, procs, est, runtime, submit, queue_of, times,
                  free, pivot_s, pivot_j, started, start, queue, alloc, held, owned, running,
                  heap_t, heap_j, count, clock, seen, censor, bsld_s, out)
        if (first_met and row[ROW_STATUS] == OUT_DONE and row[ROW_UNSTARTED] == 0
                and row[ROW_MEAN_BSLD + sla] <= limit):
            return c + 1, 0
    if not then_closest:
        return t, 0
    done = np.empty(t, dtype=np.bool_)
    value = np.empty(t)
    rows_scored(out, sla, done, value)
    return t, mqbf_closest((code, borrow, weights, procs, est, runtime, submit, queue_of,
                            times, free, pivot_s, pivot_j, started, start, queue, alloc,
                            held, owned, running, heap_t, heap_j, count, clock, seen,
                            censor, bsld_s), sla, done, value, setting[:t, 0],
                           np.arange(t), out, np.zeros(t, dtype=np.bool_))


@kernel(inline=True)
def mqbf_go_on(rows: tuple, r: int, limit: float, out: np.ndarray) -> None:
    """Row ``r``'s what-if of an MQBF batch (``rows``: the arguments of :func:`settle_at`
    before ``out``, as :func:`mqbf_candidates` runs them), cut short, goes on under
    ``limit`` (INF: to its end) and is scored into ``out[r]``."""
    (code, borrow, weights, procs, est, runtime, submit, queue_of, times, free, pivot_s,
     pivot_j, started, start, queue, alloc, held, owned, running, heap_t, heap_j, count,
     clock, seen, censor, bsld_s) = rows
    if limit == INF:
        count[r, METRIC] = 0
    else:
        clock[r, LIMIT] = limit
    settle_at(r, code, borrow, weights, procs, est, runtime, submit, queue_of, times, free,
              pivot_s, pivot_j, started, start, queue, alloc, held, owned, running, heap_t,
              heap_j, count, clock, seen, censor, bsld_s, out)


#: the closest of an MQBF batch: the one closest loop with MQBF's rows
mqbf_closest = specialize(closest_loop, "mqbf_closest", row_go_on=mqbf_go_on)


@warm_up
def mqbf_warm_up(k) -> None:
    """Run the kernels ``k`` (:func:`olsctl.policies.core.jit.compiled`) on a tiny MQBF
    what-if (two partitions, a job that borrows, a wake): compiles or loads every kernel
    the loop calls."""
    from olsctl.policies.core.loop import N_COUNTS, N_TAIL
    from olsctl.policies.core.bound import MEAN_BSLD

    n, parts = 3, 2
    procs = np.array([2, 3, 1], dtype=np.int64)
    est = np.array([10.0, 5.0, 20.0])
    submit = np.zeros(n)
    start = np.array([0.0, np.nan, np.nan])
    alloc = np.zeros((n, parts), dtype=np.int64)
    alloc[0, 0] = 2
    weights = np.array([1, 1], dtype=np.int64)
    owned = np.empty(parts, dtype=np.int64)
    k.partition_counts(weights, 4, owned)
    queue_of = np.empty(n, dtype=np.int64)
    k.queue_indices(np.array([8.0]), est, queue_of)
    held = np.zeros(parts, dtype=np.int64)
    running = np.zeros((n, 2))
    heap_t, heap_j = np.zeros(n), np.zeros(n, dtype=np.int64)
    count = np.zeros(N_COUNTS, dtype=np.int64)
    count[ACTIVE], count[NQ], count[WAKE_N], count[DUE], count[METRIC] = 4, 2, 6, 1, MEAN_BSLD
    clock = np.zeros(N_TAIL)
    clock[NOW], clock[WAKE_T], clock[UNTIL], clock[LIMIT] = 0.0, 7.0, INF, 1e9
    seen = np.zeros(n, dtype=np.bool_)
    k.mqbf_open(1, procs, est, est, submit, start, alloc, held, running, heap_t, heap_j,
                count, clock, seen, 10.0)
    segments = n + 2 * parts + 2
    k.mqbf_forward(0, True, weights, procs, est, est, submit, start, queue_of,
                   np.array([1, 2, 0], dtype=np.int64), alloc, held, owned, running, heap_t,
                   heap_j, np.zeros(segments), np.zeros((parts, segments), dtype=np.int64),
                   np.zeros(parts), np.zeros(parts, dtype=np.int64), np.zeros(n, dtype=np.int64),
                   count, clock, seen, 10.0)
    # one pass called alone, as the main simulator calls it (MultiQueueBackfill.backfill)
    k.mqbf_pass(0, True, 0.0, 4, 2, np.array([1, 2], dtype=np.int64), procs, est, submit,
                queue_of, owned, held, running, 1, alloc, np.zeros(segments),
                np.zeros((parts, segments), dtype=np.int64), np.zeros(parts),
                np.zeros(parts, dtype=np.int64), np.zeros(n, dtype=np.int64))
