"""EASY with power checks: EASY's fit test and reservation, and a power verification of
each start against the cap in force.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from olsctl.policies.core.backfill import CountResources, backfill_pass
from olsctl.policies.power.capping import _PowerPolicy, force_if_idle
from olsctl.policies.power.verify import VERIFY

if TYPE_CHECKING:
    from olsctl.state import SimState


class PowerCountResources(CountResources):
    """EASY's fit test plus the policy's power verification (:data:`VERIFY`) of the
    running jobs and the candidate against the cap in force."""

    __slots__ = ("predict", "predictor", "sigma", "sum_w", "sum_var", "base_w", "cap_w")

    def __init__(self, state: "SimState", policy: "PowerEasy") -> None:
        super().__init__(state)
        self.predict = VERIFY[policy.verify]
        self.predictor = policy._predictor
        self.sigma = policy.sigma
        p = state.power
        self.sum_w = self.sum_var = 0.0
        for _, j in state.running:
            m, sd = self.predict(state, self.predictor, j)
            self.sum_w += m
            if sd is not None:
                self.sum_var += sd * sd
        busy, active = state.busy_procs, state.active_procs
        sleeping = state.total_procs - (active if active > busy else busy)
        self.base_w = p.sleep_w * sleeping
        self.cap_w = p.cap_now(state)

    def try_start(self, j: int) -> bool:
        st = self.state
        m, sd = self.predict(st, self.predictor, j)
        var = self.sum_var if sd is None else self.sum_var + sd * sd
        idle = st.active_procs - st.busy_procs - st.procs[j]
        margin = 0.0 if sd is None else self.sigma * math.sqrt(var)
        total = (self.sum_w + m + margin
                 + st.power.idle_w * (idle if idle > 0 else 0) + self.base_w)
        if total > self.cap_w:
            return False
        if not super().try_start(j):
            return False
        self.sum_w += m
        self.sum_var = var
        return True


@dataclass(frozen=True)
class PowerEasy(_PowerPolicy):
    """EASY backfilling (FCFS or SAF) where a job also has to pass a power verification
    of the predicted power of it and the running jobs against the cap."""

    predictor: Any = "history"
    verify: str = "gaussian"
    sigma: float = 3.0
    name: str = field(default="easy-power", init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.verify not in VERIFY:
            raise ValueError(f"verify: must be one of {', '.join(VERIFY)} (got {self.verify!r})")
        if self.sigma < 0:
            raise ValueError(f"sigma: must be >= 0 (got {self.sigma})")

    def schedule(self, state: "SimState") -> None:
        self._check(state)
        if state.busy_procs >= state.active_procs or not state.queue:
            return
        ordered = self._order(state, state.queue)
        backfill_pass(state, ordered, PowerCountResources(state, self))
        force_if_idle(state, ordered)

    def settings(self) -> dict:
        return {"name": self.name, "order": self.order, "verify": self.verify,
                "sigma": self.sigma, "predictor": self.predictor}
