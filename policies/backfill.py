"""The backfilling core: start from the head, reserve for the blocked head, backfill.

One routine, parameterised by the queue order, serves every EASY-style policy. The rules
(DESIGN.md): start jobs from the head while the head fits; reserve for the blocked head at
the shadow time, the earliest expected end of a running job at which enough processors are
free for it (every job expected to end exactly then counts as ended), with ``extra`` = the
processors free at the shadow time beyond the head's need; then scan the rest of the queue
in order and start each job that fits now and either ends by the shadow time or uses no
more than ``extra`` (which then shrinks by its size).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from olsctl.state import SimState

INF = float("inf")


class Reservation(NamedTuple):
    """The blocked head's reservation: its job index, shadow time (s) and extra processors."""

    job: int
    shadow_s: float
    extra_procs: int


def shadow(state: "SimState", need: int) -> tuple[float, int]:
    """Shadow time and extra processors for a job of width ``need`` that cannot start now.

    Running jobs release their processors at their expected ends, in order; the shadow
    time is the first end at which ``need`` active processors are free (never before now).
    With fewer active processors than ``need`` the shadow time is infinite.
    """
    procs = state.procs
    avail = state.active_procs - state.busy_procs
    running = state.running
    n = len(running)
    k = 0
    end = INF
    while avail < need:
        if k == n:
            return INF, 0
        end, j = running[k]
        avail += procs[j]
        k += 1
    while k < n and running[k][0] == end:
        avail += procs[running[k][1]]
        k += 1
    now = state.now_s
    return (end if end > now else now), avail - need


def easy_pass(state: "SimState", queue: list[int]) -> Reservation | None:
    """One EASY pass over ``queue`` (already in the policy's order); starts jobs on
    ``state`` and returns the head's reservation, or None when nothing is left blocked."""
    procs = state.procs
    free = state.active_procs - state.busy_procs
    n = len(queue)
    i = 0
    while i < n and procs[queue[i]] <= free:
        state.start(queue[i])
        free -= procs[queue[i]]
        i += 1
    if i == n:
        return None
    head = queue[i]
    shadow_s, extra = shadow(state, procs[head])
    if free <= 0:
        return Reservation(head, shadow_s, extra)
    now = state.now_s
    est = state.estimate_s
    start = state.start
    for pos in range(i + 1, n):
        j = queue[pos]
        p = procs[j]
        if p > free:
            continue
        if now + est[j] <= shadow_s:
            start(j)
        elif p <= extra:
            start(j)
            extra -= p
        else:
            continue
        free -= p
        if free <= 0:
            break
    return Reservation(head, shadow_s, extra)
