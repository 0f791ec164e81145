"""The controller's validated settings and what they stand for.

Here belong :class:`ControllerSettings` (the ``controller:`` section once
:mod:`olsctl.config` has checked it) with the candidates it spans, what the checked
``candidates.active_procs`` and ``cost`` keys mean (:func:`active_counts`,
:func:`cost_weights`), and the arrival models ``controller.arrivals`` accepts
(:data:`ARRIVAL_MODELS`). The search names it accepts are the search registry's
(:data:`olsctl.controller.search.STRATEGIES`).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from typing import Any

from olsctl.controller.trials import Candidate

#: what a what-if knows of jobs to come: none (Lawson & Smirni), the last interval's
#: arrivals replayed, or the real ones (an oracle)
ARRIVAL_MODELS = ("none", "recent", "oracle")


def cost_weights(cost: Any) -> dict[str, float]:
    """A controller ``cost`` (a name, or ``{weights: {name: w}}``) as weights by name."""
    if isinstance(cost, str):
        return {cost: 1.0}
    return {k: float(v) for k, v in cost["weights"].items()}


def active_counts(spec: dict, total_procs: int) -> list[int]:
    """The active-processor counts of ``candidates.active_procs``, ascending: the listed
    counts (within 1 .. the machine), or the fractions of the machine rounded (at least 1)."""
    if "procs" in spec:
        return sorted({min(max(1, int(p)), total_procs) for p in spec["procs"]})
    return sorted({max(1, int(round(f * total_procs))) for f in spec.get("fraction", ())})


@dataclass(frozen=True)
class ControllerSettings:
    """Validated ``controller:`` settings (caps already in watts)."""

    interval_s: float = 3600.0
    fractions: tuple[float, ...] = (0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0)
    procs: tuple[int, ...] | None = None
    caps_w: tuple[float, ...] | None = None
    windows: tuple[int, ...] | None = None
    #: other tunable policy settings: (name, values) pairs
    params: tuple = ()
    sla_metric: str = "mean_bsld"
    sla_max: float = 200.0
    #: the SLA's window (the week its metric is judged over)
    sla_window_s: float = 604800.0
    cost: tuple[tuple[str, float], ...] = (("active_procs", 1.0),)
    search: str = "grid"
    arrivals: str = "none"
    horizon_s: float | None = None
    min_dwell_s: float = 0.0
    max_step: int | None = None
    n_jobs: int = 1
    backend: str = "processes"
    parallel_min_waiting: int = 100
    #: expected in-process seconds from which a tick's what-ifs go to the pool (None:
    #: auto, when splitting them saves more than the pool's measured round trip)
    pool_min_s: float | None = None
    seed: int = 0

    def active_counts(self, total_procs: int) -> list[int]:
        """Active-processor counts to try, ascending: the listed counts, or the fractions
        of the machine rounded (at least 1)."""
        spec = {"procs": self.procs} if self.procs is not None else {"fraction": self.fractions}
        return active_counts(spec, total_procs)

    def candidates(self, total_procs: int) -> list[Candidate]:
        """The candidates a tick tries: every combination of caps, windows and tuned
        settings (each ascending) with the active counts, the active count varying
        fastest."""
        caps = sorted(set(self.caps_w)) if self.caps_w else [None]
        windows = sorted(set(self.windows)) if self.windows else [None]
        names = [name for name, _ in self.params]
        combos = list(product(*(values for _, values in self.params)))
        return [Candidate(a, c, w, tuple(zip(names, combo))) for c, w, combo, a in
                product(caps, windows, combos, self.active_counts(total_procs))]
