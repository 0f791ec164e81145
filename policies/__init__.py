"""Scheduling policies: one protocol, an explicit registry, and the pieces they share.

A policy holds settings only; the run's state lives in :class:`olsctl.state.SimState`.
Its ``schedule(state)`` performs one scheduling pass by calling ``state.start(idx)`` for
each job it starts now. The main simulator and the what-if engine call the same code.

Add a policy by writing its class and naming it in ``REGISTRY`` with its parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

from olsctl.policies.easy import EasyBackfill
from olsctl.policies.order import ORDERS

if TYPE_CHECKING:
    from olsctl.state import SimState


class Policy(Protocol):
    name: str

    def schedule(self, state: "SimState") -> None:
        """One scheduling pass at ``state.now_s``."""

    def settings(self) -> dict:
        """The policy's settings as plain data (enough to rebuild it with ``make_policy``)."""


@dataclass(frozen=True)
class Param:
    """One policy parameter: its type, default and allowed values (for config checks)."""

    kind: type
    default: Any
    choices: tuple | None = None
    doc: str = ""


@dataclass(frozen=True)
class PolicyEntry:
    factory: Callable[..., Policy]
    params: Mapping[str, Param]
    doc: str


REGISTRY: dict[str, PolicyEntry] = {
    "easy": PolicyEntry(
        factory=EasyBackfill,
        params={"order": Param(str, "fcfs", tuple(ORDERS), "queue order")},
        doc="EASY backfilling: reservation for the queue head only",
    ),
}


def make_policy(spec: Mapping[str, Any]) -> Policy:
    """Build a policy from ``{"name": ..., **params}`` (already validated)."""
    spec = dict(spec)
    entry = REGISTRY[spec.pop("name")]
    return entry.factory(**spec)


__all__ = ["Policy", "Param", "PolicyEntry", "REGISTRY", "make_policy"]
