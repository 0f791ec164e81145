"""Predictors of a waiting job's power per processor (W), pluggable by name.

A predictor holds settings only; what it learns lives in the run's
:class:`olsctl.power.runtime.PowerState` (so snapshots carry it). The scheduler never
sees a waiting job's true profile: only ``oracle`` reads it, for studies.

- ``oracle``: the job's true mean (or max) power.
- ``naive``: the processor's peak power.
- ``history`` (Carastan-Santos et al.): from the same user's last ``window`` finished
  jobs, weighted by ``alpha`` ** age (age 0 = the most recent); the weighted mean of
  their means, maxima or standard deviations. A user with no history gets the peak.
- ``learner`` (Wallace et al.): job and project profiles learned from power readings
  with a two-sample t-test (:mod:`olsctl.power.learn`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from olsctl.state import SimState

STATS = ("mean", "max", "std")


class Predictor(Protocol):
    name: str

    def predict(self, state: "SimState", idx: int, stat: str = "mean") -> float:
        """Predicted ``stat`` (mean, max or std) of job ``idx``'s power per processor."""


@dataclass(frozen=True)
class Oracle:
    name: str = "oracle"

    def predict(self, state: "SimState", idx: int, stat: str = "mean") -> float:
        p = state.power
        return {"mean": p.true_mean_w, "max": p.true_max_w, "std": p.true_std_w}[stat][idx]


@dataclass(frozen=True)
class Naive:
    name: str = "naive"

    def predict(self, state: "SimState", idx: int, stat: str = "mean") -> float:
        return 0.0 if stat == "std" else state.power.peak_w


@dataclass(frozen=True)
class History:
    window: int = 10
    alpha: float = 1.0
    name: str = "history"

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ValueError(f"window: must be >= 1 (got {self.window})")
        if not 0 < self.alpha <= 1:
            raise ValueError(f"alpha: must be in (0, 1] (got {self.alpha})")

    def predict(self, state: "SimState", idx: int, stat: str = "mean") -> float:
        p = state.power
        user = p.user[idx]
        made = p.predicted.get(user)
        key = (stat, self.window, self.alpha)
        if made is not None:
            value = made.get(key)
            if value is not None:
                return value
        else:
            made = p.predicted[user] = {}
        past = p.history.get(user)
        if not past:
            value = 0.0 if stat == "std" else p.peak_w
        else:
            k = STATS.index(stat)
            value = recent_mean([rec[k] for rec in past[-self.window:]],
                                min(len(past), self.window), self.window, self.alpha)
        made[key] = value  # (until the user's history grows: PowerState.on_finish)
        return value


def _learner(**kw):
    from olsctl.power.learn import Learner

    return Learner(**kw)


PREDICTORS = {"oracle": Oracle, "naive": Naive, "history": History, "learner": _learner}


def make_predictor(spec) -> Predictor:
    """From a name or ``{name: history, window: 10, alpha: 0.9}``."""
    if isinstance(spec, str):
        spec = {"name": spec}
    spec = dict(spec)
    name = spec.pop("name", None)
    if name not in PREDICTORS:
        raise ValueError(f"predictor: must be one of {', '.join(PREDICTORS)} (got {name!r})")
    try:
        return PREDICTORS[name](**spec)
    except TypeError:
        raise ValueError(f"predictor: unknown setting for {name}: "
                         f"{', '.join(sorted(spec))}") from None


# (last: the power policies' package, which the rule comes from, imports this module)
from olsctl.policies.power.kernels import recent_mean  # noqa: E402
