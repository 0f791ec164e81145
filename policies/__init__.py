"""Scheduling policies: one protocol, an explicit registry, and the pieces they share.

A policy holds settings only; the run's state lives in :class:`olsctl.state.SimState`.
Its ``schedule(state)`` performs one scheduling pass by calling ``state.start(idx)`` for
each job it starts now. The main simulator and the what-if engine call the same code.

Add a policy by writing its class and naming it in ``REGISTRY`` with its parameters
(from outside olsctl: :func:`register`).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Mapping

from olsctl.policies.budget.overprovision import CAP_LEVELS, SIZES
from olsctl.policies.budget.parm import Parm
from olsctl.policies.budget.rmap import RmapAdaptive, RmapNaive, RmapTraditional
from olsctl.policies.core import jit
from olsctl.policies.core.base import PolicyBase
from olsctl.policies.core.order import ORDERS
from olsctl.policies.core.registry import CompiledPath, Param, Policy, PolicyEntry
from olsctl.policies.easy import EasyBackfill
from olsctl.policies.mqbf import MultiQueueBackfill
from olsctl.policies.power.capping import FORCE, NaiveCapping
from olsctl.policies.power.easy_power import PowerEasy
from olsctl.policies.power.held import BACKFILL_CODES
from olsctl.policies.power.knapsack import GreedyKnapsack, WindowKnapsack
from olsctl.policies.power.verify import VERIFY


_PREDICTOR_DOC = ("oracle, naive, history, or {name: history, window: 10, alpha: 1.0}")

#: parameters of the power-budget policies on overprovisioned machines (RMAP, PARM)
_BUDGET_PARAMS = {
    "bound": Param(float, 1.0, None, "machine power bound, a fraction of nodes x node_peak_w"),
    "share": Param(float, 1.0, None, "share of the bound the jobs may hold"),
    "node_peak_w": Param(float, 230.0, None, "power of an uncapped node at full load, W"),
    "cap_levels": Param(list, list(CAP_LEVELS), None,
                        "per-node power caps, increasing fractions of node_peak_w"),
    "seed": Param(int, 0, None, "seed of the job performance model"),
    "moldable": Param(float, 1.0, None, "share of the jobs that are moldable"),
    "sizes": Param(list, list(SIZES), None,
                   "node counts of a moldable job, as factors of its request"),
}

REGISTRY: dict[str, PolicyEntry] = {
    "easy": PolicyEntry(
        factory=EasyBackfill,
        params={"order": Param(str, "fcfs", tuple(ORDERS), "queue order")},
        doc="EASY backfilling: reservation for the queue head only",
        compiled=CompiledPath("olsctl.policies.easy.template", "olsctl.policies.easy.batch"),
    ),
    "mqbf": PolicyEntry(
        factory=MultiQueueBackfill,
        params={
            "queues": Param(int, 4, None, "number of queues K (by runtime estimate)"),
            "boundaries_s": Param(list, [100, 1000, 10000], None,
                                  "K - 1 increasing estimate boundaries, seconds (default: "
                                  "evenly spaced on a log scale from 100 to 10,000 s; "
                                  "[100, 1000, 10000] for 4 queues)"),
            "order": Param(str, "fcfs", tuple(ORDERS), "queue order"),
            "shares": Param(list, None, None,
                            "K weights of the partitions' shares of the active processors "
                            "(default: even)"),
            "borrow": Param(bool, True, None, "borrow idle processors of other partitions"),
        },
        doc="multiple-queue backfilling: one queue, partition and reservation per "
            "runtime class",
        compiled=CompiledPath("olsctl.policies.mqbf.template", "olsctl.policies.mqbf.batch"),
        compiled_pass=True,
    ),
    "naive-cap": PolicyEntry(
        factory=NaiveCapping,
        params={"order": Param(str, "fcfs", tuple(ORDERS), "queue order")},
        doc="FCFS one job at a time assuming peak power per processor (needs power)",
        needs="power",
    ),
    "knapsack": PolicyEntry(
        factory=WindowKnapsack,
        params={"window": Param(int, 20, None, "jobs at the head of the queue considered"),
                "order": Param(str, "wfp", ("fcfs", "wfp"), "queue order"),
                "stat": Param(str, "mean", ("mean", "max"), "predicted power used"),
                "headroom": Param(str, "measured", ("measured", "predicted"),
                                  "running jobs at their measured power, or at least at "
                                  "their predicted stat"),
                "force": Param(str, "reserve", FORCE,
                               "full window and nothing fits: the job in it longest starts "
                               "now (Wallace), or holds the machine until it fits, or "
                               "holds it but lets jobs that end before then start"),
                "backfill": Param(str, "window", tuple(BACKFILL_CODES),
                                  "while reserve holds the machine, the jobs that may "
                                  "start: the window's, or the whole queue's (ending "
                                  "before the held job fits; easy: or leaving it room)"),
                "predictor": Param(object, "oracle", None, _PREDICTOR_DOC)},
        doc="Wallace's window 0-1 knapsack under the power cap (needs power)",
        needs="power",
        compiled=CompiledPath("olsctl.policies.power.template"),
        compiled_pass=True,
    ),
    "greedy-knapsack": PolicyEntry(
        factory=GreedyKnapsack,
        params={"profit": Param(str, "wait", ("wait", "stretch"), "profit of a job"),
                "predictor": Param(object, "oracle", None, _PREDICTOR_DOC)},
        doc="jobs by profit / predicted power increase under the cap (needs power)",
        needs="power",
    ),
    "easy-power": PolicyEntry(
        factory=PowerEasy,
        params={"order": Param(str, "fcfs", ("fcfs", "saf"), "queue order"),
                "verify": Param(str, "gaussian", tuple(VERIFY), "power verification method"),
                "sigma": Param(float, 3.0, None, "standard deviations for gaussian"),
                "predictor": Param(object, "history", None, _PREDICTOR_DOC)},
        doc="EASY with a power verification of each start (needs power)",
        needs="power",
    ),
    "rmap-traditional": PolicyEntry(
        factory=RmapTraditional, params=_BUDGET_PARAMS,
        doc="RMAP Traditional: requested nodes at peak power under the power bound",
        needs="budget", tunable=("share",),
    ),
    "rmap-naive": PolicyEntry(
        factory=RmapNaive, params=_BUDGET_PARAMS,
        doc="RMAP Naive: requested nodes capped at the job's fair share of the bound",
        needs="budget", tunable=("share", "cap_levels"),
    ),
    "rmap-adaptive": PolicyEntry(
        factory=RmapAdaptive,
        params={**_BUDGET_PARAMS,
                "threshold": Param(float, 0.0, None, "slowdown accepted to start sooner")},
        doc="RMAP Adaptive: the best (nodes, cap) under the job's fair-share bound",
        needs="budget", tunable=("share", "cap_levels", "threshold"),
    ),
    "parm": PolicyEntry(
        factory=Parm,
        params={**_BUDGET_PARAMS,
                "window": Param(int, 10, None, "jobs per knapsack, from the queue head"),
                "exact_max": Param(int, 8, None, "largest knapsack solved exactly"),
                "fairness": Param(float, 1.0, None, "exponent of the waiting weight")},
        doc="PARM: (nodes, cap) per job maximising summed power-aware speedup",
        needs="budget", tunable=("share", "cap_levels", "window"),
    ),
}


def register(name: str, entry: PolicyEntry) -> None:
    """Add a policy of one's own to ``REGISTRY`` under ``name`` (from outside olsctl);
    a name taken by another entry is refused."""
    if not isinstance(entry, PolicyEntry):
        raise TypeError(f"register({name!r}): expected a PolicyEntry, got "
                        f"{type(entry).__name__}")
    if REGISTRY.get(name, entry) is not entry:
        raise ValueError(f"register({name!r}): a policy of that name is already registered")
    REGISTRY[name] = entry


def make_policy(spec: Mapping[str, Any]) -> Policy:
    """Build a policy from ``{"name": ..., **params}`` (already validated)."""
    spec = dict(spec)
    entry = REGISTRY[spec.pop("name")]
    return entry.factory(**spec)


def compiled_path(policy: Any) -> CompiledPath | None:
    """The compiled what-if path the registry declares for ``policy`` (looked up by its
    name), or None: a policy that is not the registered one of that name, or whose
    family has none, runs its what-ifs through its Python pass."""
    entry = REGISTRY.get(getattr(policy, "name", None))
    if entry is None or entry.compiled is None or type(policy) is not entry.factory:
        return None
    return entry.compiled


def compile_kernels(say: Callable[[str], None] = jit.on_stderr,
                    policies: Iterable[str] | None = None) -> float:
    """Compile (or load from numba's cache) the kernels of every registered family's
    compiled what-if path (or only those of the families of the ``policies`` named), with
    those of any other kernel module imported so far (SLA feedback's, in a controller's
    process), by running their warm-ups; returns the seconds it took, loading those
    modules included
    (:func:`olsctl.policies.core.jit.compile_kernels`: one process of the machine
    compiles at a time, telling ``say`` when it compiles or waits for another's
    compile; :func:`olsctl.policies.core.jit.silent` says nothing)."""
    t0 = time.perf_counter()
    names = None if policies is None else set(policies)
    paths = {name: e.compiled for name, e in REGISTRY.items() if e.compiled is not None}
    wanted = [p for name, p in paths.items() if names is None or name in names]
    for path in wanted:
        path.template_module()
        path.batch_module()
    # (the other families' warm-ups wait for a run that needs them)
    skip = {p.package for p in paths.values()} - {p.package for p in wanted}
    jit.compile_kernels(say, tuple(sorted(skip)))
    return time.perf_counter() - t0


def uses_kernels(spec: Mapping[str, Any], what_ifs: bool) -> bool:
    """Whether a run of the policy ``spec`` (``{"name": ...}``) calls compiled kernels:
    its main pass is one (the registry's ``compiled_pass``), or it has a controller
    (``what_ifs``: the what-ifs and their scoring are compiled)."""
    entry = REGISTRY.get(spec.get("name"))
    return what_ifs or (entry is not None and entry.compiled_pass)


def policy_error(spec: Mapping[str, Any]) -> str | None:
    """Why ``spec`` cannot build a policy (``key: reason``), or None if it can."""
    try:
        make_policy(spec)
    except (ValueError, TypeError) as exc:
        return str(exc)
    return None


__all__ = ["CompiledPath", "Param", "Policy", "PolicyBase", "PolicyEntry", "REGISTRY",
           "compile_kernels", "compiled_path", "make_policy", "policy_error", "register",
           "uses_kernels"]
