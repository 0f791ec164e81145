"""What the power-budget policies share (RMAP in :mod:`olsctl.policies.budget.rmap`, PARM in
:mod:`olsctl.policies.budget.parm`): settings of an overprovisioned machine and of the job
model, the job power budget, and the resources of EASY backfilling over nodes and power
(:class:`BudgetResources`, for the shared core :mod:`olsctl.policies.core.backfill`).

The machine has ``N`` nodes (the run's processors, one node each) and a power bound of
``bound x N x node_peak_w``; ``share`` of it is the budget jobs may hold. A running job
holds its nodes x the per-node cap it got, and the sum over running jobs never exceeds
the budget: a job starts only in a configuration that fits the nodes and the power free
now. Idle nodes hold nothing (their draw is what the rest of the bound is for). Caps are
chosen among ``cap_levels`` (fractions of ``node_peak_w``); the job performance model
is :mod:`olsctl.perfmodel`, set up for a run by :meth:`BudgetPolicy.prepare`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

from olsctl.perfmodel import (BudgetRun, Config, PerfSettings, budget_csr, budget_run,
                              budget_timeline)
from olsctl.policies.core.backfill import INF, Reservation
from olsctl.policies.core.base import PolicyBase

if TYPE_CHECKING:
    from olsctl.records import RunRecords
    from olsctl.state import SimState
    from olsctl.workload import Workload

#: default per-node cap levels (fractions of node_peak_w; 0.45 is a 115 W socket at 51 W)
CAP_LEVELS = (0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8, 0.9, 1.0)

#: default node counts of a moldable job, as factors of its request
SIZES = (0.5, 0.625, 0.75, 0.875, 1.0, 1.125, 1.25, 1.5, 1.75, 2.0)


def _numbers(key: str, value: Any) -> tuple[float, ...]:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise ValueError(f"{key}: must be a list of numbers (got {value!r})")
    out = tuple(value)
    if not out or any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in out):
        raise ValueError(f"{key}: must be a non-empty list of numbers (got {list(out)!r})")
    return tuple(float(x) for x in out)


@dataclass(frozen=True)
class BudgetPolicy(PolicyBase):
    """Settings every power-budget policy has (docs/policies.md, Overprovisioned machines)."""

    bound: float = 1.0
    share: float = 1.0
    node_peak_w: float = 230.0
    cap_levels: Sequence[float] = CAP_LEVELS
    seed: int = 0
    moldable: float = 1.0
    sizes: Sequence[float] = SIZES
    #: settings a controller may change while a run goes (each a plain parameter)
    _perf: PerfSettings = field(init=False, repr=False, compare=False)
    _levels_mw: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _peak_mw: int = field(init=False, repr=False, compare=False)
    _key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        levels = _numbers("cap_levels", self.cap_levels)
        sizes = _numbers("sizes", self.sizes)
        object.__setattr__(self, "cap_levels", levels)
        object.__setattr__(self, "sizes", sizes)
        perf = PerfSettings(seed=self.seed, moldable=self.moldable, sizes=sizes)
        if not self.bound > 0:
            raise ValueError(f"bound: must be > 0 (got {self.bound}); 1 is all nodes at peak")
        if not 0 < self.share <= 1:
            raise ValueError(f"share: must be in (0, 1] (got {self.share})")
        if not self.node_peak_w > 0:
            raise ValueError(f"node_peak_w: must be > 0 (got {self.node_peak_w})")
        if (any(b <= a for a, b in zip(levels, levels[1:]))
                or levels[0] <= perf.static or levels[-1] > 1):
            raise ValueError(f"cap_levels: must be increasing fractions of node_peak_w, "
                             f"above the static share {perf.static:g} and at most 1 "
                             f"(got {list(levels)})")
        if not 0 <= self.moldable <= 1:
            raise ValueError(f"moldable: must be in [0, 1] (got {self.moldable})")
        if any(s <= 0 for s in sizes):
            raise ValueError(f"sizes: must be factors > 0 of the requested nodes "
                             f"(got {list(sizes)})")
        peak_mw = int(round(self.node_peak_w * 1000))
        object.__setattr__(self, "_perf", perf)
        object.__setattr__(self, "_peak_mw", peak_mw)
        object.__setattr__(self, "_levels_mw", tuple(int(round(f * peak_mw)) for f in levels))
        object.__setattr__(self, "_key", repr(self.settings()))  # caches per settings

    # -- budget ------------------------------------------------------------------------------
    def bound_w(self, state: "SimState") -> float:
        """The machine's power bound (W)."""
        return self.bound * state.total_procs * self.node_peak_w

    def budget_mw(self, state: "SimState") -> int:
        """What jobs may hold in all (mW): ``share`` of the bound."""
        return int(math.floor(self.share * self.bound * self.node_peak_w * 1000.0
                              * state.total_procs))

    def fair_mw(self, nodes: int) -> int:
        """A job's fair share of the budget (mW): its requested nodes' part of it."""
        return int(math.floor(self.share * self.bound * self.node_peak_w * 1000.0 * nodes))

    # -- the run's model ---------------------------------------------------------------------
    def prepare(self, state: "SimState", workload: "Workload") -> str | None:
        """Draw the jobs' model for a run of ``workload`` into ``state.budget``; return why
        the run cannot go (``key: reason``), or None."""
        state.budget = budget_run(workload, self._perf, state.total_procs)
        return self.infeasible(state)

    def run_of(self, state: "SimState") -> BudgetRun:
        run = state.budget
        if run is None:
            raise ValueError(f"policy {self.name} needs its job model on the state: call "
                             f"policy.prepare(state, workload) (olsctl run does)")
        return run

    def configs(self, run: BudgetRun, j: int) -> list[Config]:
        """Every configuration of job ``j`` under this policy's cap levels, fastest first."""
        return run.configs(j, self._levels_mw, self._peak_mw)

    def smallest(self, run: BudgetRun, j: int) -> Config:
        """The configuration needing the least power this policy could give job ``j``."""
        return run.least_power(j, self._levels_mw, self._peak_mw)

    def infeasible(self, state: "SimState") -> str | None:
        """Why some job could never start under the budget on an empty machine, or None."""
        run = self.run_of(state)
        budget = self.budget_mw(state)
        for j in range(len(run.req_nodes)):
            c = self.smallest(run, j)
            if c.power_mw > budget:
                return (f"bound: job {state.job_id[j]} can never start: its smallest "
                        f"configuration needs {c.power_mw / 1000:.0f} W ({c.nodes} nodes at "
                        f"{c.level_mw / 1000:g} W), the jobs' budget is {budget / 1000:.0f} W "
                        f"(bound x share x nodes x node_peak_w)")
        return None

    # -- report ------------------------------------------------------------------------------
    def run_report(self, state: "SimState", records: "RunRecords") -> dict:
        """The budget kept, from the job records and the power each job got."""
        run = self.run_of(state)
        index = {jid: i for i, jid in enumerate(state.job_id)}
        rows = [index[r.job_id] for r in records.jobs]
        power_w = [run.alloc_mw[i] / 1000 for i in rows]
        times, held = budget_timeline([r.start_s for r in records.jobs],
                                      [r.end_s for r in records.jobs], power_w)
        budget_w = self.budget_mw(state) / 1000
        t0 = min((r.submit_s for r in records.jobs), default=0.0)
        ratio = [records.jobs[k].procs / run.req_nodes[i] for k, i in enumerate(rows)]
        out = {
            "bound_w": self.bound_w(state),
            "jobs_budget_w": budget_w,
            "peak_job_power_w": float(held.max()),
            "csr": budget_csr(times, held, budget_w, t0),
            "forced_starts": run.forced_starts,
            "moldable_jobs": int(sum(run.moldable[i] for i in rows)),
            "jobs_resized": int(sum(x != 1 for x in ratio)),
            "mean_nodes_over_request": sum(ratio) / len(ratio) if ratio else 1.0,
            "mean_node_cap_w": (sum(run.level_mw[i] for i in rows) / 1000 / len(rows)
                                if rows else 0.0),
        }
        return out

    def settings(self) -> dict:
        return {"name": self.name, "bound": self.bound, "share": self.share,
                "node_peak_w": self.node_peak_w, "cap_levels": list(self.cap_levels),
                "seed": self.seed, "moldable": self.moldable, "sizes": list(self.sizes)}


class BudgetResources:
    """EASY's fit test over nodes and power, the :class:`Resources` of
    :func:`~olsctl.policies.core.backfill.backfill_pass` for the budget policies (power in
    integer mW).

    A job may start in any configuration of ``options(j)``, preferred first: it starts
    in the first one that fits the nodes and the power free now and, once the blocked
    head has its reservation, either ends by the shadow time (now + estimate x factor)
    or uses only the nodes and power free then beyond the head's need (which shrink by
    it). The head reserves its first configuration at :meth:`shadow`; one with none
    (wider than the active nodes) never starts and reserves nothing, so the rest may
    start as if no reservation were made. ``free`` is the nodes free now, or 0 once no
    power is: either way no job can start. A job's nodes depend on the configuration it
    gets, so a pass takes ``width=NO_WIDTH`` and leaves the fit test to
    :meth:`try_start`.
    """

    __slots__ = ("state", "run", "options", "free", "free_n", "free_mw", "shadow_s",
                 "extra_n", "extra_mw", "now", "est", "reservations")

    def __init__(self, state: "SimState", run: BudgetRun, budget_mw: int,
                 options: Callable[[int], Sequence[Config]]) -> None:
        self.state = state
        self.run = run
        self.options = options
        self.free_n = state.active_procs - state.busy_procs
        self.free_mw = budget_mw - run.in_use_mw
        self.free = self.free_n if self.free_mw > 0 else 0
        self.shadow_s = INF
        self.extra_n = self.extra_mw = 0
        self.now = state.now_s
        self.est = state.estimate_s
        self.reservations: list[Reservation] = []

    def try_start(self, j: int) -> bool:
        free_n, free_mw = self.free_n, self.free_mw
        for c in self.options(j):
            if c.nodes > free_n or c.power_mw > free_mw:
                continue
            if self.now + self.est[j] * c.factor > self.shadow_s:
                if c.nodes > self.extra_n or c.power_mw > self.extra_mw:
                    continue
                self.extra_n -= c.nodes
                self.extra_mw -= c.power_mw
            self.start(j, c)
            return True
        return False

    def start(self, j: int, c: Config) -> None:
        """Start job ``j`` now in ``c`` (it fits the nodes and power free)."""
        self.run.start(self.state, j, c)
        self.free_n -= c.nodes
        self.free_mw -= c.power_mw
        self.free = self.free_n if self.free_mw > 0 else 0

    def reserve(self, j: int) -> None:
        configs = self.options(j)
        if not configs:
            return
        c = configs[0]
        self.shadow_s, self.extra_n, self.extra_mw = self.shadow(c.nodes, c.power_mw)
        if self.shadow_s < INF:
            self.reservations.append(Reservation(j, self.shadow_s, (c.nodes,)))

    def settle(self) -> list[Reservation]:
        return self.reservations

    def shadow(self, need_n: int, need_mw: int) -> tuple[float, int, int]:
        """EASY's shadow time over nodes and power: the first expected end of a running
        job at which ``need_n`` nodes and ``need_mw`` of the budget are free (every job
        ending then counts as ended; never before now), with the nodes and power free
        then beyond the need. Infinite (and no extra) when even an empty machine is too
        small."""
        avail_n, avail_mw = self.free_n, self.free_mw
        state = self.state
        running, procs, held = state.running, state.procs, self.run.held_mw
        n, k, end = len(running), 0, INF
        while avail_n < need_n or avail_mw < need_mw:
            if k == n:
                return INF, 0, 0
            end, j = running[k]
            avail_n += procs[j]
            avail_mw += held[j]
            k += 1
        while k < n and running[k][0] == end:
            j = running[k][1]
            avail_n += procs[j]
            avail_mw += held[j]
            k += 1
        return (end if end > self.now else self.now), avail_n - need_n, avail_mw - need_mw


class _NoWidth:
    """Job widths for :func:`~olsctl.policies.core.backfill.backfill_pass` that rule no job
    out before :meth:`BudgetResources.try_start` is asked."""

    __slots__ = ()

    def __getitem__(self, j: int) -> int:
        return 0

NO_WIDTH: Sequence[int] = _NoWidth()  # type: ignore[assignment]
