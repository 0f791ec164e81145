"""Wallace et al.'s dynamic power learner: job and project profiles learned online.

A profile (per job key: the same user's same application, see
:meth:`olsctl.workload.Workload.job_keys`; and per project) is the mean of the power
readings of jobs with that key. Readings are what a facility's monitor sees: one per
``sample_s`` of a job's run (its power per processor then). A profile is unknown until
it has ``min_samples`` readings; after that it changes only when the readings gathered
since its last change number ``min_samples`` too and a two-sample (Welch) t-test finds
them different from the readings behind it at significance ``alpha`` (0.01: 99%);
readings that do not differ join the profile's base without moving it.

A job is predicted by its job profile when learned, else its project's, else the peak.
Readings reach the learner when a job ends (its whole run's readings at once), so a
running job teaches nothing before it finishes.

Profiles are kept as count, mean and sum of squared deviations (enough for the test),
as plain lists in ``PowerState.learned``, so snapshots carry them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scipy.stats import ttest_ind_from_stats

if TYPE_CHECKING:
    from olsctl.power.runtime import PowerState
    from olsctl.state import SimState

#: a profile: [value or None, base n, base mean, base M2, new n, new mean, new M2]
EMPTY = (None, 0, 0.0, 0.0, 0, 0.0, 0.0)


def readings(phase_start: list[float], phase_w: list[float], runtime_s: float,
             sample_s: float) -> tuple[int, float, float]:
    """(count, mean, M2) of a job's readings, one every ``sample_s`` from its start."""
    total = max(1, math.ceil(runtime_s / sample_s))
    n_all, mean, m2 = 0, 0.0, 0.0
    bounds = list(phase_start) + [1.0]
    for k, level in enumerate(phase_w):
        lo = math.ceil(bounds[k] * runtime_s / sample_s - 1e-9)
        hi = math.ceil(bounds[k + 1] * runtime_s / sample_s - 1e-9) if k + 1 < len(phase_w) else total
        n = max(0, min(hi, total) - lo)
        if n:
            n_all, mean, m2 = _merge(n_all, mean, m2, n, level, 0.0)
    return n_all, mean, m2


def _merge(na: int, ma: float, m2a: float, nb: int, mb: float, m2b: float):
    n = na + nb
    if n == 0:
        return 0, 0.0, 0.0
    d = mb - ma
    return n, ma + d * nb / n, m2a + m2b + d * d * na * nb / n


def learn(profile: list, n: int, mean: float, m2: float, min_samples: int,
          alpha: float) -> None:
    """Add ``n`` readings (mean, M2) to ``profile`` in place, by the rules above."""
    value, bn, bm, b2, nn, nm, n2 = profile
    if value is None:
        bn, bm, b2 = _merge(bn, bm, b2, n, mean, m2)
        if bn >= min_samples:
            value = bm
        profile[:] = [value, bn, bm, b2, 0, 0.0, 0.0]
        return
    nn, nm, n2 = _merge(nn, nm, n2, n, mean, m2)
    if nn >= min_samples:
        sa = math.sqrt(b2 / (bn - 1)) if bn > 1 else 0.0
        sb = math.sqrt(n2 / (nn - 1)) if nn > 1 else 0.0
        if sa == 0 and sb == 0:
            differs = bm != nm
        else:
            p = ttest_ind_from_stats(bm, sa, bn, nm, sb, nn, equal_var=False).pvalue
            differs = bool(p < alpha)
        if differs:
            profile[:] = [nm, nn, nm, n2, 0, 0.0, 0.0]
        else:
            bn, bm, b2 = _merge(bn, bm, b2, nn, nm, n2)
            profile[:] = [value, bn, bm, b2, 0, 0.0, 0.0]
        return
    profile[:] = [value, bn, bm, b2, nn, nm, n2]


@dataclass(frozen=True)
class Learner:
    """The predictor side: job profile, else project profile, else peak."""

    min_samples: int = 20
    alpha: float = 0.01
    sample_s: float = 300.0
    name: str = "learner"

    def __post_init__(self) -> None:
        if self.min_samples < 2:
            raise ValueError(f"min_samples: must be >= 2 (got {self.min_samples})")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha: must be in (0, 1) (got {self.alpha})")
        if self.sample_s <= 0:
            raise ValueError(f"sample_s: must be > 0 (got {self.sample_s})")

    def source(self, power: "PowerState", idx: int) -> str:
        """Where the prediction of job ``idx`` comes from: job, project or peak."""
        job = power.learned.get(("job", power.job_key[idx]))
        if job is not None and job[0] is not None:
            return "job"
        proj = power.learned.get(("project", power.user[idx]))
        if proj is not None and proj[0] is not None:
            return "project"
        return "peak"

    def predict(self, state: "SimState", idx: int, stat: str = "mean") -> float:
        p = state.power
        where = self.source(p, idx)
        if where == "peak":
            return 0.0 if stat == "std" else p.peak_w
        if stat == "std":
            return 0.0
        return p.learned[(where, p.job_key[idx] if where == "job" else p.user[idx])][0]


def observe_finish(power: "PowerState", idx: int, runtime_s: float,
                   settings: Learner = Learner()) -> None:
    """Feed a finished job's readings to its job and project profiles."""
    n, mean, m2 = readings(power.phase_start[idx], power.phase_w[idx], runtime_s,
                           settings.sample_s)
    for key in (("job", power.job_key[idx]), ("project", power.user[idx])):
        profile = power.learned.get(key)
        if profile is None:
            profile = power.learned[key] = list(EMPTY)
        learn(profile, n, mean, m2, settings.min_samples, settings.alpha)
