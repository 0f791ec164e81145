"""The backfilling core: queue order x reservations x fit test, shared by every EASY-style
policy (EASY is one queue over a processor count; MQBF is several queues over partitions).

One pass:

- Phase A: queues are taken in the order of their head jobs; each starts jobs from its
  head while the head fits, and the first head that does not fit gets a reservation
  (it becomes that queue's pivot).
- Phase B: every remaining job that is not a pivot, all queues merged in order, is started
  if it fits without delaying any reservation.

The fit test and the reservations belong to a ``Resources`` object built for the pass:
:class:`CountResources` (EASY's shadow time and extra processors), the partition
profiles of :mod:`olsctl.policies.mqbf`, or the nodes and power of
:class:`olsctl.policies.overprovision.BudgetResources`.

EASY itself (one queue over a processor count) is the kernels' pass
(:mod:`olsctl.policies.kernels`): :func:`easy_pass` runs :func:`~olsctl.policies.kernels.head_run`
and :func:`~olsctl.policies.kernels.backfill_rest` on a live state's lists.
:class:`CountResources` is EASY's fit test and shadow time for policies that add a test
of their own to EASY's (the power-aware EASY) and :func:`shadow` serves MQBF; both call
the same kernels, so EASY's rules exist once.
"""

from __future__ import annotations

from itertools import chain
from typing import TYPE_CHECKING, NamedTuple, Protocol, Sequence

import numpy as np

from olsctl.policies.jit import compiled_if_loaded
from olsctl.policies.kernels import (FCFS, admit, backfill_from, backfill_rest, head_run,
                                     ordered_queue, shadow_extra)

if TYPE_CHECKING:
    from olsctl.state import SimState

INF = float("inf")


class Reservation(NamedTuple):
    """A pivot's reservation: job index, reserved start (its shadow time, s) and the
    processors it holds from each partition."""

    job: int
    shadow_s: float
    procs: tuple[int, ...]


class Resources(Protocol):
    """Fit test and reservations of one pass. ``free`` bounds the processors any job can
    get now, so ``free <= 0`` means no job can start (no processor free, or whatever
    else a start needs exhausted: power, for budget policies); ``reservations`` lists
    the reservations made (``settle()`` completes any deferred)."""

    free: int
    reservations: list[Reservation]

    def try_start(self, job: int) -> bool:
        """Start ``job`` now (``state.start``) if it fits without delaying a reservation."""

    def reserve(self, job: int) -> None:
        """Make the blocked head ``job`` its queue's pivot: reserve its earliest start."""

    def settle(self) -> list[Reservation]:
        """Complete deferred reservations; return all reservations of the pass."""


def backfill_pass(
    state: "SimState",
    queue: Sequence[int],
    resources: Resources,
    by_queue: Sequence[Sequence[int]] | None = None,
    width: Sequence[int] | None = None,
    skip: set[int] | None = None,
) -> None:
    """One pass over ``queue`` (in the policy's order). ``by_queue`` splits it into the
    policy's queues, each in that order, listed by the position of their heads (None: one
    queue). Reservations are left in ``resources``.

    ``width[j]`` is the fewest processors job ``j`` can start on: a job wider than
    ``resources.free`` is passed over without asking ``try_start`` (None: ``state.procs``,
    rigid jobs; a policy whose jobs may start in several sizes passes a lower bound).

    ``skip``: jobs of ``queue`` that Phase B passes over besides Phase A's (pivots kept
    from an earlier pass); the pass adds Phase A's jobs to the set. Only with
    ``by_queue``.

    A pass in which no job can start (``resources.free <= 0``) changes nothing
    (reservations live only for the pass), so it returns at once.
    """
    if resources.free <= 0 or not queue:
        return
    procs = state.procs if width is None else width
    try_start = resources.try_start
    if by_queue is None:  # one queue: Phase B is the rest of it after the pivot
        n = len(queue)
        k = 0
        while k < n and procs[queue[k]] <= resources.free and try_start(queue[k]):
            k += 1
        if k == n:
            return
        resources.reserve(queue[k])
        rest: Sequence[int] = queue
        first = k + 1
    else:
        if skip is None:
            skip = set()
        for jobs in by_queue:  # Phase A
            k, n = 0, len(jobs)
            while k < n and procs[jobs[k]] <= resources.free and try_start(jobs[k]):
                k += 1
            if k < n:
                resources.reserve(jobs[k])
            skip.update(jobs[:k + 1])
        # Phase B over the queue itself, asking about ``skip`` only for the jobs narrow
        # enough: the same calls, in the same order, as over the queue without ``skip``
        free = resources.free
        if free <= 0:
            return
        for j in queue:
            if procs[j] <= free and j not in skip and try_start(j):
                free = resources.free
                if free <= 0:
                    break
        return
    free = resources.free
    for pos in range(first, len(rest)):  # Phase B
        if free <= 0:
            break
        j = rest[pos]
        if procs[j] <= free and try_start(j):
            free = resources.free


class CountResources:
    """EASY over one pool of active processors: fit = processors free now, and after the
    head's reservation, ending by the shadow time or using only the extra processors
    (the rules: :func:`olsctl.policies.kernels.admit` and :func:`shadow`)."""

    __slots__ = ("state", "free", "shadow_s", "extra", "procs", "est", "now", "reservations")

    def __init__(self, state: "SimState") -> None:
        self.state = state
        self.reservations: list[Reservation] = []
        self.free = state.active_procs - state.busy_procs
        self.shadow_s = INF
        self.extra = 0
        self.procs = state.procs
        self.est = state.estimate_s
        self.now = state.now_s

    def try_start(self, j: int) -> bool:
        p = self.procs[j]
        extra = admit(p, self.now, self.est[j], self.free, self.shadow_s, self.extra)
        if extra < 0:
            return False
        self.extra = extra
        self.state.start(j)
        self.free -= p
        return True

    def reserve(self, j: int) -> None:
        need = self.procs[j]
        self.shadow_s, self.extra = shadow(self.state, need)
        if self.shadow_s < INF:
            self.reservations.append(Reservation(j, self.shadow_s, (need,)))

    def settle(self) -> list[Reservation]:
        return self.reservations


def shadow(state: "SimState", need: int) -> tuple[float, int]:
    """Shadow time and extra processors for a job of width ``need`` that cannot start now
    (:func:`olsctl.policies.kernels.shadow_extra` over the state's lists).

    Running jobs release their processors at their expected ends, in order; the shadow
    time is the first end at which ``need`` active processors are free (every job ending
    exactly then counts as ended; never before now). With fewer active processors than
    ``need`` it is infinite, and so every job that fits now may start.
    """
    return shadow_extra(state.now_s, state.active_procs - state.busy_procs, need,
                         state.running, len(state.running), state.procs)


#: under FCFS, an EASY pass at an instant where jobs only arrived since the last pass
#: tries the new jobs alone (see :func:`easy_pass`; off only to check that it changes
#: nothing)
ARRIVALS_SHORTCUT = True

#: where the last EASY pass's outcome lives in ``state.cache`` (for the shortcut)
LAST_PASS_KEY = "easy-last-pass"


def easy_pass(state: "SimState", queue: Sequence[int],
              order: int = FCFS) -> Reservation | None:
    """One EASY pass over ``queue`` (the state's queue, in arrival order, put in queue
    order ``order``, a code of :data:`olsctl.policies.kernels.ORDER_CODES`; FCFS: as
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

    In another order, once the run has compiled the kernels (for its what-ifs), the pass
    is their compiled copy over arrays (:func:`_ordered_pass_compiled`): the same
    starts, without ordering the queue in Python."""
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
        ordered = queue
    else:
        kernels = compiled_if_loaded()
        if kernels is not None:
            return _ordered_pass_compiled(kernels, state, queue, order, free)
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


def _ordered_pass_compiled(kernels, state: "SimState", queue: Sequence[int], order: int,
                           free: int) -> Reservation | None:
    """:func:`easy_pass` in order ``order`` (not FCFS) by the compiled copy of the same
    kernels (:func:`olsctl.policies.kernels.easy_pass`) over arrays: the state's job
    columns, copied once per state (a waiting or running job's entries do not change),
    the queue and the running jobs copied at each pass. In a run whose what-ifs have
    compiled the kernels, this spares ordering a long queue in Python at every pass;
    the jobs started and the reservation are the plain pass's."""
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
    ns, _, shadow_s, _, head = kernels.easy_pass(
        order, state.now_s, free, np.fromiter(queue, np.int64, n_queue), procs, est, submit,
        running, n_run, started)
    start = state.start
    for j in started[:ns].tolist():
        start(j)
    if shadow_s < INF:
        return Reservation(head, shadow_s, (state.procs[head],))
    return None


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
