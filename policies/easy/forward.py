"""EASY's what-if loop over arrays: a snapshot run forward as :func:`olsctl.whatif.steps`
runs it (completions, then a wake under way, then one pass, at each instant), calling
the pass of :mod:`olsctl.policies.easy.kernels`. Its compiled copy
(:func:`olsctl.policies.core.jit.compiled`) is what makes EASY what-ifs fast; the what-if
engine (:class:`olsctl.whatif._EasyRun`) fills the arrays and reads them back.

In FCFS, SAF and SJF order the loop keeps the queue by position in that order, with an
index over it (:func:`indexed_pass`), so that a pass behind a blocked head does not read
every waiting job: with thousands waiting, that reading was nearly all of a what-if. In
WFP order, whose keys change with time, each pass sorts the queue again from the last
pass's order (:func:`ranked_pass`).
"""

from __future__ import annotations

import numpy as np

from olsctl.policies.core.backfill import INF, insert_running
from olsctl.policies.core.bound import MEAN_BSLD, bound_open
from olsctl.policies.core.index import index_open
from olsctl.policies.core.jit import kernel, specialize, warm_up
from olsctl.policies.core.loop import (ACTIVE, BOUND_COUNTS, BUSY, DUE, EST, FLOAT_BLOCKS,
                                       HEAP_J, HEAP_T, INT_BLOCKS, LIMIT, METRIC, NHEAP,
                                       NOW, NQ, NRUN, N_CLOCK, N_COUNTS, N_TAIL, PROCS,
                                       QUEUE, RUNTIME, START, STARTED, SUBMIT, UNTIL, VALUE,
                                       WAKE_N, WAKE_T, block, heap_push, order_started,
                                       running_block, what_if_loop)
from olsctl.policies.core.order import WFP, ordered_queue
from olsctl.policies.core.score import (N_ROW, OUT_CUT, OUT_DONE, OUT_WIDE, ROW_BOUND,
                                        ROW_MEAN_BSLD, ROW_NOW, ROW_STATUS, ROW_UNSTARTED,
                                        closest_loop, rows_scored, score_columns)
from olsctl.policies.easy.kernels import indexed_pass, ranked_pass

# A what-if of n jobs lives in two flat arrays, filled from the state's lists and read back
# in a few slice copies: ``ints`` holds n-long blocks PROCS, QUEUE (arrival order),
# HEAP_J, STARTED, then the counters; ``floats`` holds n-long blocks EST, RUNTIME, SUBMIT,
# START, HEAP_T, then the running jobs (n rows of (expected end, job)), the clock and the
# bound's sums.


@kernel
def forward_open(n: int, ints: np.ndarray, floats: np.ndarray, seen: np.ndarray,
                 bsld_s: float) -> None:
    """Complete a what-if's arrays once the caller has filled PROCS, QUEUE, EST, RUNTIME,
    SUBMIT, START, the running jobs (the state's, in order), the counters and the clock:
    the heap of the running jobs' true ends (start + runtime) and, if ``METRIC`` is set,
    the bound over all n jobs."""
    count = ints[INT_BLOCKS * n:]
    tail = floats[FLOAT_BLOCKS * n + 2 * n:]
    running = running_block(floats, n)
    start, runtime = block(floats, START, n), block(floats, RUNTIME, n)
    heap_t, heap_j = block(floats, HEAP_T, n), block(ints, HEAP_J, n)
    n_run = count[NRUN]
    run_job = np.empty(n_run, dtype=np.int64)
    for k in range(n_run):
        j = np.int64(running[k, 1])
        run_job[k] = j
        heap_push(heap_t, heap_j, k, start[j] + runtime[j], j)
    count[NHEAP] = n_run
    if count[METRIC]:
        bound_open(count[METRIC], tail[N_CLOCK:], count[BOUND_COUNTS:], seen, tail[NOW],
                   run_job, start, block(floats, SUBMIT, n), runtime, bsld_s)


@kernel
def template_open(n: int, nr: int, procs: np.ndarray, est: np.ndarray, runtime: np.ndarray,
                  submit: np.ndarray, start_s: np.ndarray, active: int, now: float,
                  until: float, metric: int, limit: float, bsld_s: float, ints: np.ndarray,
                  floats: np.ndarray, seen: np.ndarray) -> None:
    """Fill a what-if's arrays from a snapshot's columns (its first ``nr`` jobs running
    since ``start_s``, the others waiting in arrival order) with ``active`` processors,
    no wake under way and no pass due, then :func:`forward_open`: the arrays
    :class:`olsctl.policies.easy.template.EasyTemplate` copies for each candidate.
    ``metric`` (a code of
    ``BOUND_METRICS``, 0: none) and ``limit`` set the SLA bound."""
    block(ints, PROCS, n)[:] = procs
    queue = block(ints, QUEUE, n)
    for i in range(n - nr):
        queue[i] = nr + i
    block(floats, EST, n)[:] = est
    block(floats, RUNTIME, n)[:] = runtime
    block(floats, SUBMIT, n)[:] = submit
    start = block(floats, START, n)
    running = running_block(floats, n)
    busy = 0
    n_run = 0
    for j in range(n):
        if j < nr:
            start[j] = start_s[j]
            busy += procs[j]
            n_run = insert_running(running, n_run, start_s[j] + est[j], j)
        else:
            start[j] = np.nan
    count = ints[INT_BLOCKS * n:]
    count[:] = 0
    count[ACTIVE] = active
    count[BUSY] = busy
    count[NQ] = n - nr
    count[NRUN] = n_run
    count[METRIC] = metric
    tail = floats[FLOAT_BLOCKS * n + 2 * n:]
    tail[NOW] = now
    tail[WAKE_T] = INF
    tail[UNTIL] = until
    tail[LIMIT] = limit if metric else 0.0
    tail[VALUE] = 0.0
    forward_open(n, ints, floats, seen, bsld_s)


@kernel
def easy_forward(code: int, n: int, ints: np.ndarray, floats: np.ndarray, seen: np.ndarray,
                 bsld_s: float) -> bool:
    """Run an EASY what-if of n jobs forward (arrays set up by :func:`forward_open`) as
    :func:`olsctl.whatif.steps` does, until every job has started, nothing more can
    happen, or the next instant is past ``UNTIL``; returns True when the SLA bound cut it
    short instead (``VALUE`` holds the bound; called again, it goes on under ``LIMIT``,
    or with no bound once ``METRIC`` is 0)."""
    return run_forward(code, block(ints, PROCS, n), block(floats, EST, n),
                       block(floats, RUNTIME, n), block(floats, SUBMIT, n),
                       block(floats, START, n), block(ints, QUEUE, n),
                       running_block(floats, n), block(floats, HEAP_T, n),
                       block(ints, HEAP_J, n), block(ints, STARTED, n),
                       floats[FLOAT_BLOCKS * n + 2 * n:], ints[INT_BLOCKS * n:], seen, bsld_s)


@kernel
def run_forward(code: int, procs: np.ndarray, est: np.ndarray, runtime: np.ndarray,
                submit: np.ndarray, start: np.ndarray, queue: np.ndarray,
                running: np.ndarray, heap_t: np.ndarray, heap_j: np.ndarray,
                started: np.ndarray, clock: np.ndarray, count: np.ndarray, seen: np.ndarray,
                bsld_s: float) -> bool:
    """The loop of :func:`easy_forward` (:func:`forward_loop`), with what it needs for
    this call: in a fixed order (all but WFP), the waiting jobs in that order, by
    position, with their index (see :func:`indexed_pass`); in WFP order, the waiting
    jobs in their order now, each job's arrival rank and room for its key (see
    :func:`ranked_pass`)."""
    nq = count[NQ]
    order = ordered_queue(code, clock[NOW], queue[:nq], procs, est, submit)
    if code == WFP:  # the order found last, each job's arrival rank and key
        size, wide, short = 0, np.empty(len(procs), dtype=np.int64), np.empty(len(procs))
        for i in range(nq):
            wide[queue[i]] = i
        at = np.empty(0, dtype=np.int64)
    else:
        size, wide, short = index_open(order, nq, procs, est)
        at = np.empty(nq, dtype=np.int64)
    return forward_loop(code, procs, est, runtime, submit, start, queue, running, heap_t,
                        heap_j, started, clock, count, seen, bsld_s,
                        (order, size, wide, short, at))


@kernel(inline=True)
def easy_by_position(code: int) -> bool:
    """EASY's what-ifs keep the queue by position in a fixed order (all but WFP)."""
    return code != WFP


@kernel(inline=True)
def easy_marks(ps: tuple, queue: np.ndarray, nq: int, procs: np.ndarray) -> int:
    """EASY's mark at a loop's start: the head's position (0)."""
    return 0


@kernel(inline=True)
def easy_step(code: int, ps: tuple, now: float, idle: int, n_pos: int, nq: int, h: int,
              queue: np.ndarray, procs: np.ndarray, est: np.ndarray, submit: np.ndarray,
              start: np.ndarray, running: np.ndarray, n_run: int,
              started: np.ndarray) -> tuple:
    """EASY's pass in the what-if loop (:func:`olsctl.policies.core.loop.what_if_loop`):
    in a fixed order, over the queue kept by position with its index from the head's
    position ``h`` (:func:`indexed_pass`); in WFP order, over the queue sorted again from
    the last pass's order (:func:`ranked_pass`)."""
    order, size, wide, short, at = ps
    if code != WFP:
        return indexed_pass(now, idle, order, n_pos, nq, h, procs, est, start, running,
                            n_run, size, wide, short, started, at)
    ns, n_run = ranked_pass(code, now, idle, order, nq, wide, short, queue, procs, est,
                            submit, running, n_run, started)
    return ns, n_run, h


@kernel(inline=True)
def easy_started(code: int, ps: tuple, ns: int, nq: int, h: int, queue: np.ndarray,
                 start: np.ndarray, procs: np.ndarray) -> tuple:
    """``ns`` jobs started: by position, they leave holes; in WFP order, they leave the
    kept order and the queue."""
    if code != WFP:
        return nq - ns, h
    return order_started(ps[0], queue, nq, start, ns), h


@kernel(inline=True)
def easy_finished(ps: tuple, j: int) -> None:
    """Nothing of EASY's own to update when a job ends."""


@kernel(inline=True)
def easy_woke(ps: tuple, active: int) -> None:
    """Nothing of EASY's own to update when a wake finishes."""


#: EASY's what-if loop: the one loop with EASY's steps. In a fixed order, ``ps`` = (the
#: waiting jobs by position, the index's size, widths and estimates, room for a pass's
#: positions); in WFP order, (the waiting jobs in the last pass's order, 0, each job's
#: arrival rank, room for each job's key, unused)
forward_loop = specialize(what_if_loop, "forward_loop", refcounts=False,
                          pass_by_position=easy_by_position, pass_marks=easy_marks,
                          pass_step=easy_step, pass_started=easy_started,
                          pass_finished=easy_finished, pass_woke=easy_woke)


@kernel
def score_run(n: int, floats: np.ndarray, censor: bool, until: float, bsld_s: float,
              row: np.ndarray) -> None:
    """Score a what-if of n jobs that ran to its end (its ``floats``) into ``row``
    (:func:`score_columns`)."""
    score_columns(block(floats, START, n), block(floats, SUBMIT, n),
                  block(floats, RUNTIME, n), censor, until, bsld_s, row)


@kernel
def settle_row(code: int, n: int, ints: np.ndarray, floats: np.ndarray, seen: np.ndarray,
               censor: bool, bsld_s: float, row: np.ndarray) -> None:
    """Run a what-if on (:func:`easy_forward`) and write how it ended into ``row``."""
    tail = floats[FLOAT_BLOCKS * n + 2 * n:]
    if easy_forward(code, n, ints, floats, seen, bsld_s):
        row[ROW_STATUS] = OUT_CUT
        row[ROW_BOUND] = tail[VALUE]
        row[ROW_NOW] = tail[NOW]
    else:
        row[ROW_STATUS] = OUT_DONE
        row[ROW_NOW] = tail[NOW]
        score_run(n, floats, censor, tail[UNTIL], bsld_s, row)


@kernel
def easy_candidates(n: int, nr: int, procs: np.ndarray, est: np.ndarray,
                    runtime: np.ndarray, submit: np.ndarray, start_s: np.ndarray,
                    snap_active: int, now: float, until: float, metric: int,
                    bound_limit: float, codes: np.ndarray, machine: np.ndarray,
                    active: np.ndarray,
                    wake_n: np.ndarray, wake_t: np.ndarray, due: np.ndarray,
                    ints: np.ndarray, floats: np.ndarray, seen: np.ndarray, censor: bool,
                    bsld_s: float, sla: int, limit: float, first_met: bool,
                    then_closest: bool, out: np.ndarray) -> tuple:
    """A tick's EASY what-ifs, candidate by candidate: each starts from the template
    arrays :func:`template_open` makes of the snapshot's columns (the arguments up to
    ``bound_limit``, as :class:`olsctl.policies.easy.template.EasyTemplate` passes them) under its
    queue order ``codes[c]``, ``active[c]`` processors, a wake under way (``wake_n[c]``
    processors at ``wake_t[c]``; 0: none) and whether the snapshot instant's pass is due;
    one whose machine (``machine[c]`` processors) is narrower than a waiting job (of the
    ``n - nr`` after the running ones) is not run: those jobs can never start, and the
    row counts them as unstarted. Each runs in
    its row of ``ints``, ``floats``, ``seen`` (kept, to go on if cut short) and is scored
    into its row of ``out`` (:func:`settle_row`). With ``first_met``, stops after the
    first whose ``sla``-th score (``ROW_MEAN_BSLD`` + ``sla``) is at most ``limit``;
    when none is, with ``then_closest`` the closest is finished (:func:`closest`).
    Returns (how many ran or were skipped as too wide, how many times one went on)."""
    t_ints = np.empty(ints.shape[1], dtype=np.int64)
    t_floats = np.empty(floats.shape[1])
    t_seen = np.zeros(seen.shape[1], dtype=np.bool_)
    template_open(n, nr, procs, est, runtime, submit, start_s, snap_active, now, until,
                  metric, bound_limit, bsld_s, t_ints, t_floats, t_seen)
    at = INT_BLOCKS * n
    tail = FLOAT_BLOCKS * n + 2 * n
    widest = 0
    for j in range(nr, n):
        if procs[j] > widest:
            widest = procs[j]
    for c in range(len(codes)):
        row = out[c]
        if widest > machine[c]:
            row[ROW_STATUS] = OUT_WIDE
            too_wide = 0
            for j in range(nr, n):
                if procs[j] > machine[c]:
                    too_wide += 1
            row[ROW_UNSTARTED] = too_wide
            continue
        ci, cf = ints[c], floats[c]
        ci[:] = t_ints
        cf[:] = t_floats
        seen[c, :] = t_seen
        ci[at + ACTIVE] = active[c]
        ci[at + WAKE_N] = wake_n[c]
        ci[at + DUE] = due[c]
        cf[tail + WAKE_T] = wake_t[c]
        settle_row(codes[c], n, ci, cf, seen[c], censor, bsld_s, row)
        if (first_met and row[ROW_STATUS] == OUT_DONE and row[ROW_UNSTARTED] == 0
                and row[ROW_MEAN_BSLD + sla] <= limit):
            return c + 1, 0
    count = len(codes)
    if not then_closest:
        return count, 0
    done = np.empty(count, dtype=np.bool_)
    value = np.empty(count)
    rows_scored(out, sla, done, value)
    return count, closest((n, ints, floats, seen, codes, censor, bsld_s), sla, done, value,
                          machine, np.arange(count), out, np.zeros(count, dtype=np.bool_))


@kernel(inline=True)
def easy_go_on(rows: tuple, r: int, limit: float, out: np.ndarray) -> None:
    """Row ``r``'s what-if of an EASY batch (``rows`` = (n, ints, floats, seen, codes,
    censor, bsld_s), as :func:`easy_candidates` runs them), cut short, goes on under
    ``limit`` (INF: to its end) and is scored into ``out[r]`` (:func:`settle_row`)."""
    n, ints, floats, seen, codes, censor, bsld_s = rows
    if limit == INF:
        ints[r, INT_BLOCKS * n + METRIC] = 0
    else:
        floats[r, (FLOAT_BLOCKS + 2) * n + LIMIT] = limit
    settle_row(codes[r], n, ints[r], floats[r], seen[r], censor, bsld_s, out[r])


#: the closest of an EASY batch: the one closest loop with EASY's rows
closest = specialize(closest_loop, "closest", row_go_on=easy_go_on)


@warm_up
def easy_warm_up(k) -> None:
    """Run the kernels ``k`` (:func:`olsctl.policies.core.jit.compiled`) on a tiny what-if:
    compiles (or loads) every kernel the what-if loops call."""
    n = 3
    ints = np.zeros(INT_BLOCKS * n + N_COUNTS, dtype=np.int64)
    floats = np.zeros(FLOAT_BLOCKS * n + 2 * n + N_TAIL)
    block(ints, PROCS, n)[:] = (2, 2, 4)
    block(ints, QUEUE, n)[:2] = (1, 2)
    block(floats, EST, n)[:] = (10.0, 5.0, 10.0)
    block(floats, RUNTIME, n)[:] = (10.0, 5.0, 10.0)
    block(floats, START, n)[:] = (0.0, np.nan, np.nan)
    running_block(floats, n)[0] = (10.0, 0.0)
    ints[INT_BLOCKS * n:INT_BLOCKS * n + METRIC + 1] = (4, 2, 2, 1, 0, 0, 1, MEAN_BSLD)
    at = FLOAT_BLOCKS * n + 2 * n
    floats[at:at + N_CLOCK] = (0.0, INF, INF, 1.0, 0.0)
    seen = np.zeros(n, dtype=np.bool_)
    k.forward_open(n, ints, floats, seen, 10.0)
    k.easy_forward(WFP, n, ints, floats, seen, 10.0)
    # a tick's candidates from a template, as olsctl.policies.easy.batch runs them
    procs = np.array([2, 2, 4], dtype=np.int64)
    est = np.array([10.0, 5.0, 10.0])
    k.template_open(n, 1, procs, est, est, np.zeros(n), np.zeros(n), 4, 0.0, INF,
                    MEAN_BSLD, 1.0, 10.0, ints, floats, seen)
    two = np.ones(2, dtype=np.int64)
    out = np.zeros((2, N_ROW))
    k.easy_candidates(n, 1, procs, est, est, np.zeros(n), np.zeros(n), 4, 0.0, INF,
                      MEAN_BSLD, 1.0, two, np.array([1, 4], np.int64),
                      4 * two, 0 * two, np.full(2, INF), two, np.empty((2, ints.size), np.int64),
                      np.empty((2, floats.size)), np.empty((2, n), np.bool_), False, 10.0,
                      0, 1.0, True, True, out)
    k.settle_row(WFP, n, ints, floats, seen, True, 10.0, out[0])
    rows = (n, np.stack((ints, ints)), np.stack((floats, floats)), np.stack((seen, seen)),
            two, True, 10.0)
    k.easy_go_on(rows, 0, INF, out)  # (a batch's what-if going on, called alone)
    k.score_waits(np.zeros(n), est, 10.0, out[1])  # (a what-if scored one at a time)
    k.closest((n, np.empty((2, ints.size), np.int64), np.empty((2, floats.size)),
               np.empty((2, n), np.bool_), two, False, 10.0), 0, np.ones(2, np.bool_),
              np.ones(2), two, two, out, np.zeros(2, np.bool_))
