"""EASY backfilling: one reservation, for the job at the head of the queue.

A pass is the kernels' pass (:mod:`olsctl.policies.easy.kernels`, through
:func:`olsctl.policies.easy.passes.easy_pass`), in the main simulator and in what-ifs alike;
what-ifs without power, limit, budget, arrivals or checker run EASY's whole loop compiled
(:func:`olsctl.policies.easy.forward.easy_forward`, chosen by :func:`olsctl.whatif.steps`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from olsctl.policies.core.backfill import Reservation
from olsctl.policies.core.base import PolicyBase
from olsctl.policies.core.order import ORDER_CODES
from olsctl.policies.easy.passes import easy_pass

if TYPE_CHECKING:
    from olsctl.state import SimState


@dataclass(frozen=True)
class EasyBackfill(PolicyBase):
    """EASY backfilling over a queue order (``fcfs`` by default)."""

    order: str = "fcfs"
    name: str = field(default="easy", init=False)
    #: the order's code for the kernels (:data:`olsctl.policies.core.order.ORDER_CODES`)
    order_code: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "order_code", ORDER_CODES[self.order])

    def schedule(self, state: "SimState") -> None:
        self.backfill(state)

    def backfill(self, state: "SimState") -> Reservation | None:
        """One pass; returns the blocked head's reservation, or None when nothing is left
        blocked, the head can never start, or nothing could start (the pass is skipped:
        no processor free, or no job waiting)."""
        return easy_pass(state, state.queue, self.order_code)

    def settings(self) -> dict:
        return {"name": self.name, "order": self.order}
