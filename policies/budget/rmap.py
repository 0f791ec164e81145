"""Patki et al.'s RMAP policies on an overprovisioned machine under a power bound.

Every job has a job-level power bound, its fair share of the jobs' budget: the budget x
its requested nodes / the machine's nodes. All three are EASY backfilling (FCFS) over
nodes and power (the shared core :func:`olsctl.policies.core.backfill.backfill_pass` over
:class:`olsctl.policies.budget.overprovision.BudgetResources`); they differ in the
configurations (nodes, per-node cap) a job may run in, :meth:`_Rmap.options`:

- **Traditional** (worst-case provisioning): the requested nodes, uncapped, holding
  ``node_peak_w`` each; the bound only limits how many nodes can run at once.
- **Naive** (overprovisioning without the model): the requested nodes, each capped at
  the highest cap level within the job's fair share per node (the lowest level when
  even that is above it).
- **Adaptive**: the fastest configuration under the job's bound (nodes among the job's
  sizes, when it is moldable, and cap levels; the model of :mod:`olsctl.perfmodel`),
  so a job may run on more nodes at a lower cap, or on fewer. With a slowdown
  ``threshold`` t, a job that cannot start in it may start now in any configuration
  under its bound at most (1 + t) x as slow, the fastest that fits (power-aware
  backfilling with less power than the job's share); t = 0 allows only configurations
  as fast as the best. The blocked head reserves its best configuration.

A job whose bound cannot feed its smallest configuration gets that configuration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from olsctl.perfmodel import BudgetRun, Config, power_factor
from olsctl.policies.budget.overprovision import NO_WIDTH, BudgetPolicy, BudgetResources
from olsctl.policies.core.backfill import backfill_pass

if TYPE_CHECKING:
    from olsctl.state import SimState


@dataclass(frozen=True)
class _Rmap(BudgetPolicy):
    def schedule(self, state: "SimState") -> None:
        run = self.run_of(state)
        if not state.queue or state.busy_procs >= state.active_procs:
            return
        key, cache = (self._key, state.active_procs), run.cache

        def options(j: int) -> list[Config]:
            mine = cache.get(j)
            got = None if mine is None else mine.get(key)
            if got is None:
                got = self.options(run, j, key[1])
                cache.setdefault(j, {})[key] = got
            return got

        resources = BudgetResources(state, run, self.budget_mw(state), options)
        backfill_pass(state, state.queue, resources, width=NO_WIDTH)

    def options(self, run: BudgetRun, j: int, active: int) -> list[Config]:
        """Configurations job ``j`` may start in, preferred first (the first is what it
        reserves when blocked); empty when it needs more than ``active`` nodes."""
        raise NotImplementedError


@dataclass(frozen=True)
class RmapTraditional(_Rmap):
    """The requested nodes at peak power each (``cap_levels`` and the model unused)."""

    name: str = field(default="rmap-traditional", init=False)

    def options(self, run: BudgetRun, j: int, active: int) -> list[Config]:
        n = run.req_nodes[j]
        return [Config(1.0, n * self._peak_mw, n, self._peak_mw)] if n <= active else []

    def smallest(self, run: BudgetRun, j: int) -> Config:
        n = run.req_nodes[j]
        return Config(1.0, n * self._peak_mw, n, self._peak_mw)


@dataclass(frozen=True)
class RmapNaive(_Rmap):
    """The requested nodes, each capped within the job's fair share per node."""

    name: str = field(default="rmap-naive", init=False)

    def naive_config(self, run: BudgetRun, j: int) -> Config:
        n = run.req_nodes[j]
        per_node = self.fair_mw(1)
        fit = [lv for lv in self._levels_mw if lv <= per_node]
        lv = fit[-1] if fit else self._levels_mw[0]
        return Config(power_factor(run.kappa[j], lv / self._peak_mw, run.settings),
                      n * lv, n, lv)

    def options(self, run: BudgetRun, j: int, active: int) -> list[Config]:
        return [self.naive_config(run, j)] if run.req_nodes[j] <= active else []

    def smallest(self, run: BudgetRun, j: int) -> Config:
        return self.naive_config(run, j)


@dataclass(frozen=True)
class RmapAdaptive(_Rmap):
    """The best configuration under the job's fair-share bound; with ``threshold`` t,
    any configuration under the bound at most (1 + t) x as slow when the best cannot
    start now."""

    threshold: float = 0.0
    name: str = field(default="rmap-adaptive", init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.threshold >= 0:
            raise ValueError(f"threshold: must be >= 0 (got {self.threshold}); 0.2 allows "
                             f"configurations up to 20% slower")

    def best(self, run: BudgetRun, j: int, active: int) -> Config | None:
        """The fastest configuration within the job's bound on at most ``active`` nodes
        (ties: less power, then fewer nodes), else the one needing the least power."""
        bound = self.fair_mw(run.req_nodes[j])
        fits = [c for c in self.configs(run, j) if c.nodes <= active]
        for c in fits:
            if c.power_mw <= bound:
                return c
        return self.smallest(run, j) if fits else None

    def options(self, run: BudgetRun, j: int, active: int) -> list[Config]:
        best = self.best(run, j, active)
        if best is None:
            return []
        limit = best.factor * (1.0 + self.threshold)
        most = max(self.fair_mw(run.req_nodes[j]), best.power_mw)
        return [c for c in self.configs(run, j)
                if c.nodes <= active and c.power_mw <= most and c.factor <= limit]

    def settings(self) -> dict:
        return {**super().settings(), "threshold": self.threshold}
