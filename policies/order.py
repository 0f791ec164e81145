"""Queue orderings: functions (state, queue) -> the queue in the order a pass considers it.

``queue`` is the waiting list in arrival order, i.e. (submit time, job id); orderings sort
it stably, so equal keys keep that order. FCFS returns the list itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from olsctl.state import SimState

Order = Callable[["SimState", list], list]


def fcfs(state: "SimState", queue: list[int]) -> list[int]:
    """First come, first served: (submit time, job id), the arrival order itself."""
    return queue


def saf(state: "SimState", queue: list[int]) -> list[int]:
    """Smallest area first: processors x estimate, ascending."""
    procs, est = state.procs, state.estimate_s
    return sorted(queue, key=lambda j: procs[j] * est[j])


def sjf(state: "SimState", queue: list[int]) -> list[int]:
    """Shortest job first: estimate, ascending."""
    return sorted(queue, key=state.estimate_s.__getitem__)


def wfp(state: "SimState", queue: list[int]) -> list[int]:
    """Mira's Cobalt WFP utility, highest first: (wait / estimate)^3 x processors,
    recomputed at every pass (it grows with the time waited)."""
    now, submit, procs, est = state.now_s, state.submit_s, state.procs, state.estimate_s
    return sorted(queue, key=lambda j: -(((now - submit[j]) / est[j]) ** 3) * procs[j])


ORDERS: dict[str, Order] = {
    "fcfs": fcfs,
    "saf": saf,
    "sjf": sjf,
    "wfp": wfp,
}
