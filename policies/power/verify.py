"""Power verification methods (Carastan-Santos et al.), registered by name.

A method predicts what job ``j`` draws on all its processors: (power W, the standard
deviation of that prediction W, or None when the method counts no uncertainty; then
``sigma`` is unused). EASY-power starts a job only if the running jobs' and its
predictions summed, plus ``sigma`` standard deviations of the sum (jobs independent),
plus what idle and sleeping processors draw, stay within the cap in force.

A new method is one function here and one entry in :data:`VERIFY`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from olsctl.state import SimState

Prediction = tuple[float, float | None]


def verify_naive(state: "SimState", predictor: Any, j: int) -> Prediction:
    """Every processor at its peak."""
    return state.procs[j] * state.power.peak_w, None


def verify_mean(state: "SimState", predictor: Any, j: int) -> Prediction:
    """The predicted mean power."""
    return state.procs[j] * predictor.predict(state, j, "mean"), None


def verify_max(state: "SimState", predictor: Any, j: int) -> Prediction:
    """The predicted maximum power."""
    return state.procs[j] * predictor.predict(state, j, "max"), None


def verify_gaussian(state: "SimState", predictor: Any, j: int) -> Prediction:
    """The predicted mean power and its standard deviation."""
    n = state.procs[j]
    return n * predictor.predict(state, j, "mean"), n * predictor.predict(state, j, "std")

VERIFY: dict[str, Callable[["SimState", Any, int], Prediction]] = {
    "naive": verify_naive,
    "mean": verify_mean,
    "max": verify_max,
    "gaussian": verify_gaussian,
}
