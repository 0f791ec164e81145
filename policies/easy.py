"""EASY backfilling: one reservation, for the job at the head of the queue."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from olsctl.policies.base import PolicyBase
from olsctl.policies.backfill import CountResources, backfill_pass
from olsctl.policies.order import ORDERS, Order

if TYPE_CHECKING:
    from olsctl.state import SimState


@dataclass(frozen=True)
class EasyBackfill(PolicyBase):
    """EASY backfilling over a queue order (``fcfs`` by default)."""

    order: str = "fcfs"
    name: str = field(default="easy", init=False)
    _order: Order = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_order", ORDERS[self.order])

    def schedule(self, state: "SimState") -> None:
        self.backfill(state)

    def backfill(self, state: "SimState") -> CountResources | None:
        """One pass; returns its resources (``.reservations``), or None when the pass was
        skipped because nothing could start."""
        if state.busy_procs >= state.active_procs or not state.queue:
            return None  # nothing can start: the pass would change nothing
        resources = CountResources(state)
        backfill_pass(state, self._order(state, state.queue), resources)
        return resources

    def settings(self) -> dict:
        return {"name": self.name, "order": self.order}
