"""EASY's pass on a live state, as the main simulator (and a what-if the compiled loop
does not run) takes it: the kernels' pass (:mod:`olsctl.policies.easy.kernels`,
:func:`~olsctl.policies.easy.kernels.head_run` then
:func:`~olsctl.policies.easy.kernels.backfill_rest`) over the state's lists, or over
arrays by the compiled kernels when a run has loaded them; with a shortcut for a pass
where only new jobs arrived behind a blocked head.
"""

from __future__ import annotations

from itertools import chain
from typing import TYPE_CHECKING, Sequence

import numpy as np

from olsctl.policies.core.backfill import Reservation
from olsctl.policies.core.bound import INF
from olsctl.policies.core.jit import compiled_if_loaded
from olsctl.policies.core.order import FCFS, ordered_queue
from olsctl.policies.easy.kernels import backfill_from, backfill_rest, head_run

if TYPE_CHECKING:
    from olsctl.state import SimState

#: under FCFS, an EASY pass at an instant where jobs only arrived since the last pass
#: tries the new jobs alone (see :func:`easy_pass`; off only to check that it changes
#: nothing)
ARRIVALS_SHORTCUT = True

#: under FCFS, a queue at least this long is passed over by the compiled kernels, once a
#: run has compiled them (its what-ifs): the same starts, without a Python loop over a
#: long blocked queue at every pass (an overloaded machine keeps thousands waiting)
LONG_QUEUE = 64

#: where the last EASY pass's outcome lives in ``state.cache`` (for the shortcut)
LAST_PASS_KEY = "easy-last-pass"


def easy_pass(state: "SimState", queue: Sequence[int],
              order: int = FCFS) -> Reservation | None:
    """One EASY pass over ``queue`` (the state's queue, in arrival order, put in queue
    order ``order``, a code of :data:`olsctl.policies.core.order.ORDER_CODES`; FCFS: as
    given): the jobs it starts are started on the state, in start order. Returns the
    head's reservation, or None when nothing is left blocked (or the head can never
    start).

    Under FCFS, a pass at an instant where jobs only arrived since the last pass (no job
    started or ended in between, the active count unchanged, no power limit moving
    expected ends) tries the new jobs alone, from where the last pass ended: the old
    jobs it passed over are passed over again. The same free processors and running jobs
    give the same blocked head and the same first expected end that frees it (its shadow
    time, or now if that end is past); the extra processors are what the last pass left;
    and a job refused at the earlier instant is refused now, the tests being monotone in
    time (now + estimate only grows past the shadow time). New jobs come after every old
    one in arrival order.

    In another order, or under FCFS over a queue of :data:`LONG_QUEUE` jobs or more,
    once the run has compiled the kernels (for its what-ifs), the pass is their compiled
    copy over arrays (:func:`_compiled_pass`): the same starts, without ordering or
    walking the queue in Python."""
    free = state.active_procs - state.busy_procs
    if free <= 0 or not queue:
        return None  # nothing can start: the pass would change nothing
    now, procs, est = state.now_s, state.procs, state.estimate_s
    if order == FCFS:
        last = state.cache.get(LAST_PASS_KEY) if ARRIVALS_SHORTCUT else None
        if last is not None:
            finishes, active, busy, qlen, last_job, head, shadow_s, extra = last
            if (finishes == state.finishes and active == state.active_procs
                    and busy == state.busy_procs and len(queue) > qlen
                    and queue[qlen - 1] == last_job and state.limit is None):
                return _new_jobs_pass(state, queue, qlen, head,
                                      shadow_s if shadow_s > now else now, extra, free)
        kernels = compiled_if_loaded() if len(queue) >= LONG_QUEUE else None
        if kernels is not None:
            res, head, shadow_s, extra = _compiled_pass(kernels, state, queue, order, free)
            if head < 0:
                state.cache.pop(LAST_PASS_KEY, None)
            else:
                _remember(state, head, shadow_s, extra)
            return res
        ordered = queue
    else:
        kernels = compiled_if_loaded()
        if kernels is not None:
            return _compiled_pass(kernels, state, queue, order, free)[0]
        ordered = ordered_queue(order, now, queue, procs, est, state.submit_s).tolist()
    k = head_run(now, free, ordered, procs, est)
    start = state.start
    for j in ordered[:k]:
        start(j)
        free -= procs[j]
    if k == len(ordered):
        state.cache.pop(LAST_PASS_KEY, None)
        return None
    started = [0] * (len(ordered) - k - 1)
    n_started, shadow_s, extra, head = backfill_rest(now, free, ordered, k, procs, est,
                                                     state.running, len(state.running),
                                                     started)
    for j in started[:n_started]:
        start(j)
    if order == FCFS:
        _remember(state, head, shadow_s, extra)
    if shadow_s < INF:
        return Reservation(head, shadow_s, (procs[head],))
    return None

#: where an EASY pass in an order other than FCFS keeps the state's job columns as arrays
#: for the compiled pass: (jobs, procs, est, submit)
COLUMNS_KEY = "easy-columns"


def _compiled_pass(kernels, state: "SimState", queue: Sequence[int], order: int,
                   free: int) -> tuple[Reservation | None, int, float, int]:
    """:func:`easy_pass` in order ``order`` by the compiled copy of the same kernels
    (:func:`olsctl.policies.easy.kernels.easy_pass`) over arrays: the state's job
    columns, copied once per state (a waiting or running job's entries do not change),
    the queue and the running jobs copied at each pass. In a run whose what-ifs have
    compiled the kernels, this spares ordering a queue, or walking a long one, in Python
    at every pass; the jobs started and the reservation are the plain pass's. Returns
    (the reservation, the blocked head or -1 when every job started, its shadow time,
    the extra processors left)."""
    cols = state.cache.get(COLUMNS_KEY)
    if cols is None or cols[0] != len(state.job_id):
        cols = state.cache[COLUMNS_KEY] = (
            len(state.job_id), np.array(state.procs, dtype=np.int64),
            np.array(state.estimate_s, dtype=float), np.array(state.submit_s, dtype=float))
    _, procs, est, submit = cols
    n_run, n_queue = len(state.running), len(queue)
    running = np.empty((n_run + n_queue, 2))
    if n_run:
        running.reshape(-1)[:2 * n_run] = np.fromiter(chain.from_iterable(state.running),
                                                      float, 2 * n_run)
    started = np.empty(n_queue, dtype=np.int64)
    ns, _, shadow_s, extra, head = kernels.easy_pass(
        order, state.now_s, free, np.fromiter(queue, np.int64, n_queue), procs, est, submit,
        running, n_run, started)
    start = state.start
    for j in started[:ns].tolist():
        start(j)
    res = Reservation(head, shadow_s, (state.procs[head],)) if shadow_s < INF else None
    return res, int(head), float(shadow_s), int(extra)


def _new_jobs_pass(state: "SimState", queue: Sequence[int], qlen: int, head: int,
                   shadow_s: float, extra: int, free: int) -> Reservation | None:
    """The arrivals-only pass of :func:`easy_pass`: ``queue[qlen:]`` tried behind the
    blocked ``head`` (reserved at ``shadow_s``, ``extra`` processors to spare)."""
    new = queue[qlen:]
    started = [0] * len(new)
    n_started, extra = backfill_from(state.now_s, free, new, 0, shadow_s, extra,
                                     state.procs, state.estimate_s, started)
    start = state.start
    for j in started[:n_started]:
        start(j)
    _remember(state, head, shadow_s, extra)
    if shadow_s < INF:
        return Reservation(head, shadow_s, (state.procs[head],))
    return None


def _remember(state: "SimState", head: int, shadow_s: float, extra: int) -> None:
    """Keep what an FCFS pass that left ``head`` blocked ended with, for the next: the
    counts that show whether anything but arrivals happened since, and the waiting
    queue's length and last job once the pass's starts leave it (``state.run_pass``
    takes them out after the pass)."""
    queue, started = state.queue, state.started
    last_job = queue[-1]
    if started and last_job in started:
        gone = set(started)
        for last_job in reversed(queue):  # (one is left: the blocked head)
            if last_job not in gone:
                break
    state.cache[LAST_PASS_KEY] = (state.finishes, state.active_procs, state.busy_procs,
                                  len(queue) - len(started), last_job, head, shadow_s,
                                  extra)
