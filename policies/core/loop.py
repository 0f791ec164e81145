"""The what-if loop's pieces over arrays, shared by every compiled policy family: how a
what-if of n jobs is laid out in flat arrays (the blocks and counters below), the heap of
true ends, the starts of a pass noted (their ends pushed, the SLA bound kept), the queue
moving up behind the jobs started, and the next instant (or the SLA bound's cut).

A what-if runs a snapshot forward as :func:`olsctl.whatif.steps` runs it (completions,
then a wake under way, then one pass, at each instant); each family's loop calls these
pieces and its own pass (:mod:`olsctl.policies.easy.forward`,
:mod:`olsctl.policies.mqbf.forward`).
"""

from __future__ import annotations

import numpy as np

from olsctl.policies.core.backfill import INF, insert_running, remove_running
from olsctl.policies.core.bound import bound_open, bound_start, bound_value, missed
from olsctl.policies.core.heap import heap_add, heap_drop
from olsctl.policies.core.jit import kernel, specialize

# A what-if of n jobs lives in two flat arrays, filled from the state's lists and read back
# in a few slice copies: ``ints`` holds n-long blocks PROCS, QUEUE (arrival order),
# HEAP_J, STARTED, then the counters; ``floats`` holds n-long blocks EST, RUNTIME, SUBMIT,
# START, HEAP_T, then the running jobs (n rows of (expected end, job)), the clock and the
# bound's sums.

PROCS, QUEUE, HEAP_J, STARTED = range(4)

EST, RUNTIME, SUBMIT, START, HEAP_T = range(5)

INT_BLOCKS, FLOAT_BLOCKS = 4, 5

#: the counters after the blocks of ``ints`` (from BOUND_COUNTS on: the bound's ``cnt``)
(ACTIVE, BUSY, NQ, NRUN, NHEAP, WAKE_N, DUE, METRIC, AT_BOUND, FINISHES,
 BOUND_COUNTS) = range(11)

N_COUNTS = BOUND_COUNTS + 2

#: the clock after the running jobs in ``floats`` (then the bound's ``acc``)
NOW, WAKE_T, UNTIL, LIMIT, VALUE = range(5)

N_CLOCK = 5

N_TAIL = N_CLOCK + 4


@kernel
def block(a: np.ndarray, k: int, n: int) -> np.ndarray:
    """The ``k``-th n-long block of a what-if's flat array."""
    return a[k * n:(k + 1) * n]


@kernel
def running_block(floats: np.ndarray, n: int) -> np.ndarray:
    """The running jobs' rows of a what-if's ``floats``."""
    at = FLOAT_BLOCKS * n
    return floats[at:at + 2 * n].reshape((n, 2))


@kernel(inline=True)
def ends_before(x: int, y: int, end: np.ndarray, _unused: np.ndarray) -> bool:
    """Whether job ``x`` ends before job ``y`` (``end``: true ends by job), ties by job
    number: the order of the heap of true ends."""
    return end[x] < end[y] or (end[x] == end[y] and x < y)


#: the heap of true ends: job numbers in ``heap_j[:n]``, their ends in ``heap_t`` (by job)
ends_add = specialize(heap_add, "ends_add", inline=True, before=ends_before)
heap_pop = specialize(heap_drop, "heap_pop", inline=True, before=ends_before)


@kernel(inline=True)
def heap_push(heap_t: np.ndarray, heap_j: np.ndarray, n: int, t: float, j: int) -> int:
    """Put job ``j``, ending at ``t``, on the heap of true ends (``heap_j[:n]``, the
    ends by job in ``heap_t``); returns the new size. :func:`heap_pop`
    ``(heap_j, n, heap_t, heap_t)`` takes the first end off, ``heap_t[heap_j[0]]``."""
    heap_t[j] = t
    return ends_add(heap_j, n, j, heap_t, heap_t)


@kernel
def running_open(n_run: int, procs: np.ndarray, est: np.ndarray, runtime: np.ndarray,
                  submit: np.ndarray, start: np.ndarray, running: np.ndarray,
                  heap_t: np.ndarray, heap_j: np.ndarray, count: np.ndarray,
                  clock: np.ndarray, seen: np.ndarray, bsld_s: float) -> None:
    """Complete a what-if's arrays once the caller has filled the job columns (jobs 0 ..
    ``n_run`` - 1 running since ``start``), the counters (``ACTIVE`` and after: active
    processors, processors of a wake under way, pass due, the SLA metric) and the clock
    (now, the wake's time, the horizon, the SLA limit): the running jobs in (expected
    end, job) order and what they hold, the heap of their true ends (start + runtime)
    and, with a metric, the SLA bound (:func:`bound_open`)."""
    busy = 0
    n = 0
    for j in range(n_run):
        busy += procs[j]
        n = insert_running(running, n, start[j] + est[j], j)
        heap_push(heap_t, heap_j, j, start[j] + runtime[j], j)
    count[BUSY] = busy
    count[NRUN] = n_run
    count[NHEAP] = n_run
    count[AT_BOUND] = 0
    count[FINISHES] = 0
    if count[METRIC]:
        run_job = np.empty(n_run, dtype=np.int64)
        for k in range(n_run):
            run_job[k] = np.int64(running[k, 1])
        bound_open(count[METRIC], clock[N_CLOCK:], count[BOUND_COUNTS:], seen, clock[NOW],
                   run_job, start, submit, runtime, bsld_s)


@kernel(inline=True)
def note_starts(ns: int, started: np.ndarray, now: float, start: np.ndarray,
                procs: np.ndarray, runtime: np.ndarray, submit: np.ndarray,
                heap_t: np.ndarray, heap_j: np.ndarray, n_heap: int, metric: int,
                acc: np.ndarray, cnt: np.ndarray, seen: np.ndarray, bsld_s: float) -> tuple:
    """The ``ns`` jobs a what-if's pass started ``now`` (``started[:ns]``, in start
    order): their start times, their true ends on the heap and, with an SLA ``metric``,
    their waits in its bound. Returns (the processors they took, the heap's new size)."""
    took = 0
    for i in range(ns):
        j = started[i]
        start[j] = now
        took += procs[j]
        n_heap = heap_push(heap_t, heap_j, n_heap, now + runtime[j], j)
        if metric:
            bound_start(metric, acc, cnt, seen, j, now, submit, runtime, bsld_s)
    return took, n_heap


@kernel
def still_waiting(queue: np.ndarray, nq: int, start: np.ndarray, ns: int) -> int:
    """Keep the jobs of ``queue[:nq]`` not started yet (start NaN) at its front, in
    their order (the queue keeps its arrival order), ``ns`` of them having started;
    returns how many are left. Once the ``ns`` are found, the rest move up without a
    look at their starts."""
    kept = 0
    i = 0
    while i < nq and kept + ns > i:  # (i - kept: the started ones found so far)
        j = queue[i]
        if start[j] != start[j]:  # NaN: still waiting
            queue[kept] = j
            kept += 1
        i += 1
    while i < nq:
        queue[kept] = queue[i]
        kept += 1
        i += 1
    return kept


@kernel(inline=True)
def cut_or_next(metric: int, acc: np.ndarray, cnt: np.ndarray, seen: np.ndarray,
                now: float, submit: np.ndarray, clock: np.ndarray, heap_t: np.ndarray,
                heap_j: np.ndarray, n_heap: int, wake_t: float, until: float) -> float:
    """What follows an instant's pass in a what-if loop: NaN when, with an SLA
    ``metric``, its bound shows the run surely misses ``clock[LIMIT]`` (the bound goes to
    ``clock[VALUE]``: the run is cut short); else the next instant, the earlier of the
    next true end and a wake under way (INF: none, or past ``until``)."""
    if metric:
        value = bound_value(metric, acc, cnt, seen, now, submit)
        if missed(value, clock[LIMIT]):
            clock[VALUE] = value
            return np.nan
    t = heap_t[heap_j[0]] if n_heap else INF
    if wake_t < t:
        t = wake_t
    return INF if t > until else t


@kernel(inline=True)
def order_started(order: np.ndarray, queue: np.ndarray, nq: int, start: np.ndarray,
                  ns: int) -> int:
    """A pass in a changing order (WFP) started ``ns`` jobs: they leave both the kept
    order and the queue in arrival order (each moved up behind them); returns how many
    still wait."""
    still_waiting(order, nq, start, ns)
    return still_waiting(queue, nq, start, ns)


def what_if_loop(code: int, procs: np.ndarray, est: np.ndarray, runtime: np.ndarray,
                 submit: np.ndarray, start: np.ndarray, queue: np.ndarray,
                 running: np.ndarray, heap_t: np.ndarray, heap_j: np.ndarray,
                 started: np.ndarray, clock: np.ndarray, count: np.ndarray,
                 seen: np.ndarray, bsld_s: float, ps: tuple) -> bool:
    """The event order of one instant, written once for every compiled what-if: the
    completions due (the heap of true ends), then a wake under way (``WAKE_T``:
    ``WAKE_N`` processors active), then one pass if something happened (``DUE``); until
    every job has started, nothing more can happen, the next instant is past ``UNTIL``,
    or the SLA bound cuts the run short (returns True; ``VALUE`` holds the bound, and a
    call again goes on under ``LIMIT``, or with no bound once ``METRIC`` is 0).

    A template, not a kernel: each family makes its loop of it with
    :func:`olsctl.policies.core.jit.specialize`, binding the steps it calls to its own
    kernels, as a SimPy resource supplies only its put and get to the queue loop its base
    class writes once. ``ps`` holds the family's own arrays, which only its steps read:

    - ``pass_by_position(code)``: whether the family keeps the queue by position in
      order ``code`` (jobs that start leave holes; the queue in arrival order moves up
      behind them when the loop stops) rather than in a kept order;
    - ``pass_marks(ps, queue, nq, procs)``: the pass's mark at the start (an int the
      steps keep between passes: EASY's head position, MQBF's narrowest waiting job);
    - ``pass_step(code, ps, now, idle, n_pos, nq, mark, queue, procs, est, submit, start,
      running, n_run, started)``: one pass with ``idle`` processors free; returns (jobs
      started, listed in ``started``; running jobs; mark);
    - ``pass_started(code, ps, ns, nq, mark, queue, start, procs)``: ``ns`` jobs started;
      returns (jobs still waiting, mark);
    - ``pass_finished(ps, j)``: job ``j`` ended; ``pass_woke(ps, active)``: a wake
      finished with ``active`` processors.

    ``queue[:NQ]`` waits in arrival order (a family that keeps the queue by position
    keeps it in ``ps``, and ``n_pos`` counts the positions); ``start`` gets each start.
    The arrays hold the whole run between calls; the loop allocates nothing (its
    instances are compiled without reference counts)."""
    acc = clock[N_CLOCK:]
    cnt = count[BOUND_COUNTS:]
    now = clock[NOW]
    wake_t = clock[WAKE_T]
    until = clock[UNTIL]
    active = count[ACTIVE]
    busy = count[BUSY]
    nq = count[NQ]
    n_run = count[NRUN]
    n_heap = count[NHEAP]
    due = count[DUE]
    metric = count[METRIC]
    finishes = count[FINISHES]
    at_bound = count[AT_BOUND] != 0
    cut = False
    # a queue kept by position: nq counts the jobs still waiting, n_pos the positions
    fixed = pass_by_position(code)  # noqa: F821  (bound by specialize)
    n_pos = nq if fixed else 0
    mark = pass_marks(ps, queue, nq, procs)  # noqa: F821  (bound by specialize)
    while True:
        if not at_bound:
            if due:
                due = 0
                ns, n_run, mark = pass_step(  # noqa: F821
                    code, ps, now, active - busy, n_pos, nq, mark, queue, procs, est,
                    submit, start, running, n_run, started)
                if ns:
                    took, n_heap = note_starts(ns, started, now, start, procs, runtime,
                                               submit, heap_t, heap_j, n_heap, metric, acc,
                                               cnt, seen, bsld_s)
                    busy += took
                    nq, mark = pass_started(code, ps, ns, nq, mark, queue,  # noqa: F821
                                            start, procs)
            if nq == 0:
                break
        at_bound = False
        t = cut_or_next(metric, acc, cnt, seen, now, submit, clock, heap_t, heap_j, n_heap,
                        wake_t, until)
        if t != t:  # NaN: the SLA bound cut the run short
            at_bound = cut = True
            break
        if t == INF:
            break
        now = t
        while n_heap and heap_t[heap_j[0]] == now:
            j = heap_j[0]
            n_heap = heap_pop(heap_j, n_heap, heap_t, heap_t)
            n_run = remove_running(running, n_run, j)
            busy -= procs[j]
            pass_finished(ps, j)  # noqa: F821
            finishes += 1
            due = 1
        if now == wake_t:
            active = count[WAKE_N]
            pass_woke(ps, active)  # noqa: F821
            wake_t = INF
            due = 1
    if fixed:  # the queue (arrival order) moves up behind the jobs started, as between
        still_waiting(queue, n_pos, start, n_pos - nq)  # calls it must
    clock[NOW] = now
    clock[WAKE_T] = wake_t
    count[ACTIVE] = active
    count[BUSY] = busy
    count[NQ] = nq
    count[NRUN] = n_run
    count[NHEAP] = n_heap
    count[DUE] = due
    count[FINISHES] = finishes
    count[AT_BOUND] = 1 if at_bound else 0
    return cut
