"""Job performance under a per-node power cap and a choice of node count, and the
per-run data of the policies that use it (hardware overprovisioning: RMAP, PARM).

The model (all times relative to the logged runtime, which is the runtime at the
requested node count ``n_req`` with uncapped nodes):

- A node's power is given as a fraction ``p`` of ``node_peak_w``, what a node draws
  uncapped at full load. A share ``static`` of the peak does not scale with the clock;
  the rest grows as clock^``exponent`` (DVFS: power ~ f V^2, V ~ f).
- Each job has a compute-boundness ``kappa`` in [0, 1]: the share of its time that runs
  at the clock (the rest waits on memory). Uncapped, a job draws
  ``d = static + (1 - static) x (memory_draw + (1 - memory_draw) x kappa)`` of the peak,
  so memory-bound jobs draw less.
- Under a cap ``p < d`` the clock drops to ``f = ((p - static) / (d - static)) ^ (1 /
  exponent)`` of its top (``f = 1`` when ``p >= d``), and the job's time grows by
  ``g(p) = 1 + kappa x (1 / f - 1)``: a memory-bound job barely slows, a compute-bound
  one slows nearly as much as its clock.
- Strong scaling follows Amdahl's law with a serial fraction ``serial``: on ``n`` nodes
  the time is ``(serial + (1 - serial) / n)`` of the one-node time, so relative to the
  request ``h(n) = (serial + (1 - serial) / n) / (serial + (1 - serial) / n_req)``.
- The runtime on ``n`` nodes capped at ``p`` is the logged runtime x ``h(n) x g(p)``
  (exactly the logged runtime at ``(n_req, 1)``).

Parameters are drawn per project (SWF group, else user), seeded and independent of which
other jobs the workload holds: the project's ``kappa`` is uniform in ``kappa_range`` and
its serial fraction log-uniform in ``serial_range``; each job's ``kappa`` deviates from
its project's by a normal ``kappa_spread`` (clipped to [0, 1]). A job is moldable with
probability ``moldable`` (drawn per job id), unless it asks for one node (a serial
program stays serial); a moldable job may run on ``round(s x n_req)`` nodes for each
``s`` of ``sizes`` (at least 1, at most the machine), a rigid one on ``n_req`` only.

:class:`BudgetRun` rides on :class:`olsctl.state.SimState` as ``state.budget`` (and so
goes into snapshots and what-ifs): the jobs' model parameters, the power each running
job holds (integer milliwatts, so sums are exact) and counters for the run's report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Sequence

import numpy as np

from olsctl.power.profiles import _uniform, project_of

if TYPE_CHECKING:
    from olsctl.state import SimState
    from olsctl.workload import Workload


@dataclass(frozen=True)
class PerfSettings:
    """Parameters of the performance model and of moldability (module docstring)."""

    seed: int = 0
    moldable: float = 1.0
    sizes: tuple[float, ...] = (0.5, 0.625, 0.75, 0.875, 1.0, 1.125, 1.25, 1.5, 1.75, 2.0)
    static: float = 0.3
    exponent: float = 3.0
    memory_draw: float = 0.5
    kappa_range: tuple[float, float] = (0.05, 0.95)
    kappa_spread: float = 0.05
    serial_range: tuple[float, float] = (0.001, 0.1)


#: hash streams of the draws (the power profiles use 1..5 with the same seed)
_KAPPA, _SERIAL, _JOB_KAPPA, _MOLDABLE = 21, 22, 23, 24


def clock_at(p: float, demand: float, static: float, exponent: float) -> float:
    """The clock model: the clock, relative to the top one, of a job that draws
    ``demand`` uncapped when held to ``p`` (``static`` of it does not scale with the
    clock, the rest as clock^``exponent``); any one unit of power (fractions of a node's
    peak here, watts per processor under :mod:`olsctl.power.limit`)."""
    if p >= demand:
        return 1.0
    return ((p - static) / (demand - static)) ** (1.0 / exponent)


def time_factor(kappa: float, clock: float) -> float:
    """Time at ``clock`` over time at the top clock of a job of compute-boundness
    ``kappa``: ``1 + kappa x (1 / clock - 1)``."""
    return 1.0 + kappa * (1.0 / clock - 1.0)


def clock_ratio(kappa: float, p: float, s: PerfSettings) -> float:
    """Clock of a job capped at ``p`` (fraction of node peak) relative to uncapped."""
    demand = s.static + (1.0 - s.static) * (s.memory_draw + (1.0 - s.memory_draw) * kappa)
    return clock_at(p, demand, s.static, s.exponent)


def power_factor(kappa: float, p: float, s: PerfSettings) -> float:
    """``g(p)``: time under a cap of ``p`` over time uncapped (exactly 1 when uncapped)."""
    return time_factor(kappa, clock_ratio(kappa, p, s))


def scale_factor(serial: float, n_req: int, n: int) -> float:
    """``h(n)``: Amdahl time on ``n`` nodes over time on the ``n_req`` requested."""
    return (serial + (1.0 - serial) / n) / (serial + (1.0 - serial) / n_req)


def node_options(n_req: int, moldable: bool, sizes: Sequence[float],
                 max_nodes: int) -> tuple[int, ...]:
    """Node counts a job may run on, ascending (module docstring)."""
    if not moldable:
        return (n_req,)
    return tuple(sorted({min(max(int(math.floor(f * n_req + 0.5)), 1), max_nodes)
                         for f in sizes}))


class Config(NamedTuple):
    """One way to run a job: ``nodes`` capped at ``level_mw`` each (``power_mw`` in
    all), taking ``factor`` x its logged runtime. Tuples order as the policies prefer:
    faster, then less power, then fewer nodes."""

    factor: float
    power_mw: int
    nodes: int
    level_mw: int


def draw_params(job_id: np.ndarray, project: np.ndarray, procs: np.ndarray,
                s: PerfSettings) -> tuple[list[float], list[float], list[bool]]:
    """(kappa, serial fraction, moldable) per job; every draw hashes (seed, project or
    job id, what is drawn), so a job gets the same values in any workload holding it."""
    from scipy.special import ndtri

    proj = (np.asarray(project, dtype=np.int64) + 1).astype(np.uint64)
    jobs = np.asarray(job_id, dtype=np.int64).astype(np.uint64)
    lo, hi = s.kappa_range
    k_proj = lo + (hi - lo) * _uniform(s.seed, proj, _KAPPA)
    kappa = np.clip(k_proj + s.kappa_spread * ndtri(_uniform(s.seed, jobs, _JOB_KAPPA)), 0.0, 1.0)
    a, b = math.log(s.serial_range[0]), math.log(s.serial_range[1])
    serial = np.exp(a + (b - a) * _uniform(s.seed, proj, _SERIAL))
    moldable = (_uniform(s.seed, jobs, _MOLDABLE) < s.moldable) & (np.asarray(procs) > 1)
    return kappa.tolist(), serial.tolist(), moldable.tolist()


@dataclass
class BudgetRun:
    """Per-run data of the power-budget policies, indexed like the state's jobs.

    ``req_nodes`` is what each job asked for (``state.procs`` becomes the nodes it got
    when it starts); ``held_mw`` the power a running job holds (0 otherwise), ``in_use_mw``
    their sum; ``alloc_mw`` and ``level_mw`` what each job got when it started (0 before).
    """

    settings: PerfSettings
    total_nodes: int
    req_nodes: list[int]
    kappa: list[float]
    serial: list[float]
    moldable: list[bool]
    held_mw: list[int] = field(default_factory=list)
    alloc_mw: list[int] = field(default_factory=list)
    level_mw: list[int] = field(default_factory=list)
    in_use_mw: int = 0
    peak_in_use_mw: int = 0
    forced_starts: int = 0
    exact_windows: int = 0
    greedy_windows: int = 0
    largest_greedy_window: int = 0
    #: per waiting job, what policies derived from its model (its configurations, the
    #: ones a policy allows), by what they were derived for; dropped when it starts
    cache: dict[int, dict] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        n = len(self.req_nodes)
        for name in ("held_mw", "alloc_mw", "level_mw"):
            col = getattr(self, name)
            col.extend([0] * (n - len(col)))

    # -- the model ---------------------------------------------------------------------------
    def configs(self, j: int, levels_mw: tuple[int, ...], node_peak_mw: int) -> list[Config]:
        """Every configuration of job ``j`` over the cap levels, sorted fastest first
        (ties: less power, then fewer nodes)."""
        mine = self.cache.get(j)
        if mine is None:
            mine = self.cache[j] = {}
        key = (levels_mw, node_peak_mw)
        out = mine.get(key)
        if out is None:
            s, n_req, kappa = self.settings, self.req_nodes[j], self.kappa[j]
            g = [(lv, power_factor(kappa, lv / node_peak_mw, s)) for lv in levels_mw]
            out = [Config(h * gv, n * lv, n, lv)
                   for n in node_options(n_req, self.moldable[j], s.sizes, self.total_nodes)
                   for h in (scale_factor(self.serial[j], n_req, n),) for lv, gv in g]
            out.sort()
            mine[key] = out
        return out

    def least_power(self, j: int, levels_mw: tuple[int, ...], node_peak_mw: int) -> Config:
        """Job ``j``'s configuration needing the least power: its fewest nodes at the
        lowest cap (unique: any other has more nodes or a higher cap)."""
        s, n_req = self.settings, self.req_nodes[j]
        n = node_options(n_req, self.moldable[j], s.sizes, self.total_nodes)[0]
        lv = levels_mw[0]
        factor = (scale_factor(self.serial[j], n_req, n)
                  * power_factor(self.kappa[j], lv / node_peak_mw, s))
        return Config(factor, n * lv, n, lv)

    # -- bookkeeping -------------------------------------------------------------------------
    def start(self, state: "SimState", j: int, c: Config) -> None:
        """Start waiting job ``j`` now in configuration ``c``: its nodes, runtime and
        estimate become those of ``c`` (runtime and estimate x ``c.factor``)."""
        state.procs[j] = c.nodes
        if c.factor != 1.0:
            state.runtime_s[j] *= c.factor
            state.estimate_s[j] *= c.factor
        self.held_mw[j] = self.alloc_mw[j] = c.power_mw
        self.level_mw[j] = c.level_mw
        self.in_use_mw += c.power_mw
        if self.in_use_mw > self.peak_in_use_mw:
            self.peak_in_use_mw = self.in_use_mw
        self.cache.pop(j, None)
        state.start(j)

    def on_finish(self, state: "SimState", idx: int) -> None:
        """A job ended: the power it held returns to the pool."""
        self.in_use_mw -= self.held_mw[idx]
        self.held_mw[idx] = 0

    def subset(self, idx: list[int]) -> "BudgetRun":
        """The data of jobs ``idx`` (re-indexed 0..), for a snapshot."""
        return BudgetRun(
            self.settings, self.total_nodes, [self.req_nodes[j] for j in idx],
            [self.kappa[j] for j in idx], [self.serial[j] for j in idx],
            [self.moldable[j] for j in idx], [self.held_mw[j] for j in idx],
            [self.alloc_mw[j] for j in idx], [self.level_mw[j] for j in idx],
            sum(self.held_mw[j] for j in idx), self.peak_in_use_mw, self.forced_starts,
            self.exact_windows, self.greedy_windows, self.largest_greedy_window)

    def extend(self, other: "BudgetRun") -> None:
        """Append ``other``'s jobs (arrivals fed to a what-if)."""
        for name in ("req_nodes", "kappa", "serial", "moldable", "held_mw", "alloc_mw",
                     "level_mw"):
            getattr(self, name).extend(getattr(other, name))


def budget_run(workload: "Workload", settings: PerfSettings,
               total_nodes: int | None = None) -> BudgetRun:
    """A :class:`BudgetRun` for ``workload`` (jobs in workload order)."""
    kappa, serial, moldable = draw_params(workload.job_id, project_of(workload),
                                          workload.procs, settings)
    return BudgetRun(settings, int(total_nodes or workload.machine_procs),
                     workload.procs.astype(int).tolist(), kappa, serial, moldable)


def budget_timeline(start_s: Sequence[float], end_s: Sequence[float],
                    power_w: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Job power held over time from job records: ``power_w[k]`` holds on
    ``[times[k], times[k + 1])`` (every change at an instant applied together)."""
    t = np.concatenate((np.asarray(start_s, float), np.asarray(end_s, float)))
    d = np.concatenate((np.asarray(power_w, float), -np.asarray(power_w, float)))
    if t.size == 0:
        return np.zeros(1), np.zeros(1)
    order = np.argsort(t, kind="stable")
    t, d = t[order], d[order]
    last = np.concatenate((t[1:] != t[:-1], [True]))
    return t[last], np.cumsum(d)[last]


def budget_csr(times: np.ndarray, power_w: np.ndarray, budget_w: float, t0: float,
               sample_s: float = 300.0) -> float:
    """Share of ``sample_s`` intervals from ``t0`` in which the job power held never
    exceeds ``budget_w`` (a capping success rate over the job power budget)."""
    t1 = float(times[-1])
    n = max(1, int(math.ceil((t1 - t0) / sample_s)))
    bad = np.zeros(n, dtype=bool)
    for k in np.flatnonzero(power_w[:-1] > budget_w):
        a = int((times[k] - t0) // sample_s)
        b = int(math.ceil((times[k + 1] - t0) / sample_s))
        bad[max(a, 0):min(max(b, a + 1), n)] = True
    return float(1.0 - bad.mean())
