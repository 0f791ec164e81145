"""What a policy is to the engine: the protocol it follows and the registry entry that
declares what it offers.

The engine and the controller never ask a policy for its type: they look up its entry
(by the policy's ``name``) and use what the entry declares, as scikit-learn's generic
code reads an estimator's tags. A family's compiled what-if path is declared by module
name (:class:`CompiledPath`), so that nothing is imported, numba least of all, until a
what-if asks for it.
"""

from __future__ import annotations

import copy
import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

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
class CompiledPath:
    """A policy family's compiled what-if path, named by module.

    ``template`` names a module that offers:

    - ``template(snap, policy, until_s, stop_above)``: a tick's what-if arrays for the
      snapshot under the policy, or None when the compiled loop cannot run its what-ifs
      (power, a limit, a budget...); the template's ``start(policy, active, wake,
      pass_due)`` gives one what-if (``forward()``, ``go_on(limit)``, ``steps()``,
      ``column(block)``, ``now_s``);
    - ``template_key(policy)``: what besides the snapshot, horizon and bound tells two
      templates apart (None: one template serves every policy of the family);
    - ``steps(policy, state, until_s, stop_above, raise_at)``: the what-if of a live
      state as :func:`olsctl.whatif.steps` runs it, or None when the compiled loop cannot
      run it.

    ``batch`` names a module whose ``batch(task, plan, sla, limit, first_met,
    then_closest)`` runs a tick's candidates (``plan``:
    :func:`olsctl.controller.batches.batch_plan`'s) in one compiled call: (its rows,
    whose ``out`` and ``trial()``, ``go_on()`` and ``closest()`` the controller reads;
    how many ran; how many times one went on), or None when they do not qualify."""

    template: str
    batch: str | None = None

    def template_module(self) -> ModuleType:
        return importlib.import_module(self.template)

    def batch_module(self) -> ModuleType | None:
        return None if self.batch is None else importlib.import_module(self.batch)

    @property
    def package(self) -> str:
        """The family's package (its template module's), as a module-name prefix
        ending in a dot."""
        return self.template.rsplit(".", 1)[0] + "."


@dataclass(frozen=True)
class PolicyEntry:
    """A registered policy: how to build it, its settings, and what it offers and needs.

    ``needs`` is ``"power"`` for policies that meter a power cap (a run needs a power
    section), ``"budget"`` for those that keep their own job model and power budget
    (RMAP, PARM: ``prepare`` draws it, ``run_report`` reports it), else None.
    ``tunable`` names the settings the controller may try as candidates. ``compiled``
    is the family's compiled what-if path (:class:`CompiledPath`), None for a policy
    whose what-ifs run its Python pass. ``compiled_pass`` says that its pass in the main
    simulator is a compiled kernel too (so a run needs the kernels even without what-ifs).
    """

    factory: Callable[..., Policy]
    params: Mapping[str, Param]
    doc: str
    needs: str | None = None
    tunable: tuple[str, ...] = ()
    compiled: CompiledPath | None = None
    compiled_pass: bool = False

    @property
    def orders(self) -> tuple[str, ...]:
        """The queue orders it accepts (``("fcfs",)`` for one without an order)."""
        order = self.params.get("order")
        return ("fcfs",) if order is None else tuple(order.choices)

    def defaults(self) -> dict:
        """Its parameters' defaults, each a fresh copy (never the registry's own list)."""
        return {name: copy.deepcopy(p.default) for name, p in self.params.items()}
