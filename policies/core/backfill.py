"""The backfilling core: queue order x reservation x fit test, shared by the EASY-style
policies written in Python (EASY with power checks, RMAP).

One pass (:func:`backfill_pass`): jobs start from the head of the queue, in the policy's
order, while the head fits; the first that does not gets a reservation; then every later
job that fits without delaying it starts. The fit test and the reservation belong to a
``Resources`` object built for the pass: :class:`CountResources` (EASY's shadow time and
extra processors) or the nodes and power of
:class:`olsctl.policies.budget.overprovision.BudgetResources`. MQBF's pass over several
queues and partitions is its kernels' (:mod:`olsctl.policies.mqbf.phases`).

EASY's rules are the kernels here (:func:`admit`: the fit test; :func:`shadow_extra`:
the blocked head's shadow time and extra processors) with the list of running jobs
(:func:`insert_running`, :func:`remove_running`); EASY's pass
(:mod:`olsctl.policies.easy.kernels`), :class:`CountResources` (EASY's fit test for
policies that add a test of their own, the power-aware EASY) and :func:`shadow`
(MQBF's) all call them, so EASY's rules exist once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Protocol, Sequence

import numpy as np

from olsctl.policies.core.jit import kernel


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
    width: Sequence[int] | None = None,
) -> None:
    """One pass over ``queue`` (in the policy's order): jobs start from the head while
    the head fits; the blocked head gets a reservation; then each later job that fits
    without delaying it starts (Phase B). Reservations are left in ``resources``.

    ``width[j]`` is the fewest processors job ``j`` can start on: a job wider than
    ``resources.free`` is passed over without asking ``try_start`` (None: ``state.procs``,
    rigid jobs; a policy whose jobs may start in several sizes passes a lower bound).

    A pass in which no job can start (``resources.free <= 0``) changes nothing
    (reservations live only for the pass), so it returns at once.
    """
    if resources.free <= 0 or not queue:
        return
    procs = state.procs if width is None else width
    try_start = resources.try_start
    n = len(queue)
    k = 0
    while k < n and procs[queue[k]] <= resources.free and try_start(queue[k]):
        k += 1
    if k == n:
        return
    resources.reserve(queue[k])
    free = resources.free
    for pos in range(k + 1, n):  # Phase B
        if free <= 0:
            break
        j = queue[pos]
        if procs[j] <= free and try_start(j):
            free = resources.free


class CountResources:
    """EASY over one pool of active processors: fit = processors free now, and after the
    head's reservation, ending by the shadow time or using only the extra processors
    (the rules: :func:`olsctl.policies.core.backfill.admit` and :func:`shadow`)."""

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
    (:func:`olsctl.policies.core.backfill.shadow_extra` over the state's lists).

    Running jobs release their processors at their expected ends, in order; the shadow
    time is the first end at which ``need`` active processors are free (every job ending
    exactly then counts as ended; never before now). With fewer active processors than
    ``need`` it is infinite, and so every job that fits now may start.
    """
    return shadow_extra(state.now_s, state.active_procs - state.busy_procs, need,
                         state.running, len(state.running), state.procs)


@kernel(inline=True)
def admit(p: int, now: float, est: float, free: int, shadow_s: float, extra: int) -> int:
    """EASY's fit test of a job of ``p`` processors and estimate ``est`` (s) at ``now``:
    the ``extra`` processors left if it may start, else -1.

    It must fit the ``free`` processors, and either end by the shadow time (``now + est
    <= shadow_s``) or use no more than ``extra`` (which then shrinks by ``p``). Before a
    reservation ``shadow_s`` is infinite: fitting is enough."""
    if p > free:
        return -1
    if now + est > shadow_s:
        if p > extra:
            return -1
        return extra - p
    return extra


@kernel(inline=True)
def shadow_extra(now: float, avail: int, need: int, running, n_run: int, procs) -> tuple:
    """(shadow time, extra processors) for a job of width ``need`` with ``avail``
    processors free now and ``running[:n_run]`` running.

    Running jobs release their processors at their expected ends, in order; the shadow
    time is the first end at which ``need`` processors are free, every job ending exactly
    then counting as ended, and never before ``now``; ``extra`` is what is free then
    beyond ``need``. Infinite (and extra 0) when even all of them are not enough; with
    ``need`` free already, infinite too (and extra what is free beyond ``need``)."""
    k = 0
    end = INF
    while avail < need:
        if k == n_run:
            return INF, 0
        end = running[k][0]
        avail += procs[int(running[k][1])]
        k += 1
    while k < n_run and running[k][0] == end:
        avail += procs[int(running[k][1])]
        k += 1
    return (end if end > now else now), avail - need


@kernel(inline=True)
def insert_running(running: np.ndarray, n_run: int, end: float, j: int) -> int:
    """Add job ``j`` expected to end at ``end`` in (end, job) order; returns the new
    count (the array must have room)."""
    k = n_run
    while k > 0 and (running[k - 1, 0] > end
                     or (running[k - 1, 0] == end and running[k - 1, 1] > j)):
        running[k, 0] = running[k - 1, 0]
        running[k, 1] = running[k - 1, 1]
        k -= 1
    running[k, 0] = end
    running[k, 1] = j
    return n_run + 1


@kernel(inline=True)
def remove_running(running: np.ndarray, n_run: int, j: int) -> int:
    """Take job ``j`` out of the running jobs; returns the new count."""
    k = 0
    while running[k, 1] != j:
        k += 1
    for m in range(k + 1, n_run):
        running[m - 1, 0] = running[m, 0]
        running[m - 1, 1] = running[m, 1]
    return n_run - 1
