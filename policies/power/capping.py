"""Power-aware policies: naive capping, Wallace's window knapsack, a greedy knapsack,
and EASY with a power verification method (Carastan-Santos et al.).

All need a run with power (``state.power``). The cap is kept on the machine's measured
power: starting ``n`` processors predicted at ``p`` W each adds ``n x (p - idle_w)``
(an idle processor already drew ``idle_w``), and a pass may add at most the headroom,
cap in force minus measured power. Predictions come from a pluggable predictor
(:mod:`olsctl.power.predict`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from olsctl.policies.core.base import PolicyBase
from olsctl.policies.core.order import ORDERS, Order
from olsctl.power.predict import make_predictor

if TYPE_CHECKING:
    from olsctl.state import SimState

#: what the window knapsack does when its window is full and nothing fits
FORCE = ("now", "when-fits", "reserve")


def force_if_idle(state: "SimState", ordered: list[int]) -> None:
    """[choice] When nothing runs and nothing started in this pass, the first waiting job
    that has the processors starts anyway (a forced start): an idle machine frees no
    power by waiting, so the job would otherwise wait for ever."""
    if state.running or state.started:
        return
    free = state.active_procs - state.busy_procs
    for j in ordered:
        if state.procs[j] <= free:
            state.start(j)
            state.power.forced_starts += 1
            return


def _increase(state: "SimState", predictor, j: int, stat: str = "mean") -> float:
    """Predicted rise of machine power if job ``j`` starts on idle processors."""
    return state.procs[j] * (predictor.predict(state, j, stat) - state.power.idle_w)


@dataclass(frozen=True)
class _PowerPolicy(PolicyBase):
    predictor: Any = "oracle"
    order: str = "fcfs"
    _order: Order = field(init=False, repr=False, compare=False)
    _predictor: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_order", ORDERS[self.order])
        object.__setattr__(self, "_predictor", make_predictor(self.predictor))

    def _check(self, state: "SimState") -> None:
        if state.power is None:
            raise ValueError(f"policy {self.name} needs power: add a power section")


@dataclass(frozen=True)
class NaiveCapping(_PowerPolicy):
    """FCFS, one job at a time, assuming every processor draws its peak; stops at the
    first job that does not fit (Wallace et al.'s baseline)."""

    name: str = field(default="naive-cap", init=False)

    def schedule(self, state: "SimState") -> None:
        self._check(state)
        p = state.power
        free = state.active_procs - state.busy_procs
        room = p.headroom_w(state)
        ordered = self._order(state, state.queue)
        for j in ordered:
            need = state.procs[j] * (p.peak_w - p.idle_w)
            if state.procs[j] > free or need > room:
                break
            state.start(j)
            free -= state.procs[j]
            room -= need
        force_if_idle(state, ordered)

    def settings(self) -> dict:
        return {"name": self.name, "order": self.order}
