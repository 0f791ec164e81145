"""A policy of one's own, registered from outside olsctl and checked against its policy
contract, as olsctl's test suite checks the built-in policies.

Smallest first: at each pass, start every waiting job that fits, the smallest first
(fewest processors, or with ``size: area`` the smallest processors x estimate; ties in
arrival order). No reservation: a wide job waits while narrower ones keep it from fitting.

``python examples/smallest_first.py`` checks it under both sizes; importing the file
registers it, so that ``make_policy({"name": "smallest-first"})`` and run configs with
``policy: {name: smallest-first}`` find it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from olsctl.contract import check_policy
from olsctl.policies import Param, PolicyBase, PolicyEntry, register


@dataclass(frozen=True)
class SmallestFirst(PolicyBase):
    """Start the waiting jobs that fit, smallest first (settings only: the run's
    state, queue and running jobs, lives in ``state``)."""

    size: str = "procs"
    name: str = field(default="smallest-first", init=False)

    def schedule(self, state) -> None:
        procs, est = state.procs, state.estimate_s
        area = self.size == "area"
        free = state.free_procs
        for j in sorted(state.queue, key=lambda j: procs[j] * est[j] if area else procs[j]):
            if procs[j] <= free:
                state.start(j)
                free -= procs[j]

    def settings(self) -> dict:
        return {"name": self.name, "size": self.size}


register("smallest-first", PolicyEntry(
    factory=SmallestFirst,
    params={"size": Param(str, "procs", ("procs", "area"), "processors, or processors "
                          "x estimate")},
    doc="smallest first, every job that fits, no reservation",
))

if __name__ == "__main__":
    for size in ("procs", "area"):
        print(check_policy("smallest-first", {"size": size}))
