"""Queue orderings: functions (state, queue) -> the queue in the order a pass considers it.

``queue`` is the waiting list in arrival order, i.e. (submit time, job id); an ordering
must be stable so that equal keys keep that order. FCFS returns the list itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from olsctl.state import SimState

Order = Callable[["SimState", list], list]


def fcfs(state: "SimState", queue: list[int]) -> list[int]:
    """First come, first served: (submit time, job id), the arrival order itself."""
    return queue


ORDERS: dict[str, Order] = {
    "fcfs": fcfs,
}
