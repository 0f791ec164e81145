"""The controller's validated settings, and the names its config keys accept.

Here belong :class:`ControllerSettings` (the ``controller:`` section once
:mod:`olsctl.config` has checked it) with the candidates it spans, and the tuples of
accepted names: :data:`ARRIVAL_MODELS`, and :data:`SEARCHES`, which are the names of the
search registry (:data:`olsctl.controller.search.STRATEGIES`).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

from olsctl.controller.trials import Candidate
from olsctl.controller.search import STRATEGIES

#: what a what-if knows of jobs to come: none (Lawson & Smirni), the last interval's
#: arrivals replayed, or the real ones (an oracle)
ARRIVAL_MODELS = ("none", "recent", "oracle")
#: the search strategies ``controller.search`` accepts (the registry's names, in order)
SEARCHES = tuple(STRATEGIES)


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
        from olsctl.config import active_counts

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
