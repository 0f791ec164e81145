"""True job power profiles: per processor, piecewise constant over each job's run.

Policies never read these (they see predictions); the power accounting and the oracle
predictor do. A profile is a list of phases per job: the fraction of the run each phase
lasts and its power per processor (W). Mean, max and standard deviation over time follow
exactly from the phases.

Two sources:

- **synthetic** (:func:`synthetic_profiles`): every project (SWF group, else user) gets a
  base power per node drawn from the measured NREL distribution (``olsctl/data``); each
  job's mean varies around its project's base (log-normal, ``job_sigma``); each job runs
  in 1 to ``max_phases`` phases of random lengths whose levels vary around the job's mean
  (``phase_sigma``). Levels are kept within [idle, peak]. Seeded and deterministic.
- **a CSV file** (:func:`load_power_csv`): ``job_id,mean_w[,max_w,std_w]`` per processor.
  With max and std the job gets two phases that have exactly that mean, max and std;
  with the mean only, one phase. Jobs missing from the file get synthetic profiles
  (counted in ``PowerProfiles.synthetic_jobs``).
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

import numpy as np

from olsctl.errors import TraceError
from olsctl.workload import Workload


@dataclass(frozen=True)
class PowerProfiles:
    """Phases of every job, in workload order, in a flat layout: job i's phases are
    ``offset[i]:offset[i + 1]`` of ``fraction`` (of its runtime, summing to 1) and
    ``power_w`` (per processor)."""

    offset: np.ndarray
    fraction: np.ndarray
    power_w: np.ndarray
    synthetic_jobs: int

    def __len__(self) -> int:
        return int(self.offset.size - 1)

    @property
    def mean_w(self) -> np.ndarray:
        return np.add.reduceat(self.fraction * self.power_w, self.offset[:-1])

    @property
    def max_w(self) -> np.ndarray:
        return np.maximum.reduceat(self.power_w, self.offset[:-1])

    @property
    def std_w(self) -> np.ndarray:
        mean = np.repeat(self.mean_w, np.diff(self.offset))
        var = np.add.reduceat(self.fraction * (self.power_w - mean) ** 2, self.offset[:-1])
        return np.sqrt(np.maximum(var, 0.0))

    def phases(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(fractions, power per processor) of job ``i``."""
        a, b = self.offset[i], self.offset[i + 1]
        return self.fraction[a:b], self.power_w[a:b]


@dataclass(frozen=True)
class ProfileSettings:
    """Synthetic model parameters (see the module docstring)."""

    seed: int = 0
    procs_per_node: int = 1
    job_sigma: float = 0.10
    phase_sigma: float = 0.15
    max_phases: int = 4


def nrel_quantiles() -> tuple[np.ndarray, np.ndarray]:
    """(levels, per-node power quantiles in W) of the measured NREL distribution."""
    data = json.loads(files("olsctl.data").joinpath("nrel_power.json").read_text())
    return np.asarray(data["levels"], dtype=float), np.asarray(data["quantiles_w"], dtype=float)


def project_of(w: Workload) -> np.ndarray:
    """Project id per job: the SWF group, else the user, else -1."""
    return np.where(w.group_id >= 0, w.group_id, np.where(w.user_id >= 0, w.user_id, -1))


def _uniform(seed: int, keys: np.ndarray, stream: int) -> np.ndarray:
    """Uniforms in (0, 1) that depend only on (seed, key, stream): a splitmix64 hash, so a
    job's power does not depend on which other jobs the workload holds."""
    with np.errstate(over="ignore"):
        z = (keys.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
             + np.uint64((seed * 0x632BE59BD9B4E019 + stream * 0xD1B54A32D192ED03)
                         & 0xFFFFFFFFFFFFFFFF))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return ((z >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53


def synthetic_profiles(w: Workload, idle_w: float, peak_w: float,
                       settings: ProfileSettings = ProfileSettings()) -> PowerProfiles:
    """Seeded synthetic profiles calibrated on the NREL measurements (per processor).

    Every draw is a hash of (seed, project or job id, what is drawn), so a job gets the
    same profile in any workload that contains it (a cut log, a what-if, a study)."""
    from scipy.special import ndtri

    seed = settings.seed
    levels, quantiles = nrel_quantiles()
    project = project_of(w).astype(np.int64) + 1  # >= 0
    base = np.interp(_uniform(seed, project.astype(np.uint64), 1), levels, quantiles)
    base = base / settings.procs_per_node
    job = w.job_id.astype(np.uint64)
    s = settings.job_sigma
    job_mean = base * np.exp(s * ndtri(_uniform(seed, job, 2)) - s * s / 2)
    k = 1 + np.minimum((_uniform(seed, job, 3) * settings.max_phases).astype(np.int64),
                       settings.max_phases - 1)
    offset = np.concatenate(([0], np.cumsum(k)))
    owner = np.repeat(np.arange(len(w)), k)
    phase = np.arange(int(offset[-1])) - np.repeat(offset[:-1], k)
    key = job[owner] * np.uint64(64) + phase.astype(np.uint64)
    g = -np.log(_uniform(seed, key, 4))  # exponential: the phase lengths are Dirichlet(1)
    fraction = g / np.repeat(np.add.reduceat(g, offset[:-1]), k)
    power = np.repeat(job_mean, k) * (1.0 + settings.phase_sigma * ndtri(_uniform(seed, key, 5)))
    power = np.clip(power, idle_w, peak_w)
    return PowerProfiles(offset, fraction, power, synthetic_jobs=len(w))


def load_power_csv(path: Path, w: Workload, idle_w: float, peak_w: float,
                   settings: ProfileSettings = ProfileSettings()) -> PowerProfiles:
    """Profiles from ``job_id,mean_w[,max_w,std_w]`` (W per processor); jobs missing from
    the file get synthetic profiles. Raises :class:`TraceError` naming line and field."""
    path = Path(path)
    given: dict[int, tuple[float, float | None, float | None]] = {}
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = [h.strip() for h in next(reader, [])]
            if "job_id" not in header or "mean_w" not in header:
                raise TraceError(f"{path.name}:1: header needs job_id and mean_w "
                                 f"(got {','.join(header) or 'nothing'})")
            col = {name: header.index(name) for name in header}
            for line_no, row in enumerate(reader, start=2):
                if not row or not "".join(row).strip():
                    continue
                job = _number(path, line_no, row, col, "job_id")
                mean = _number(path, line_no, row, col, "mean_w")
                mx = _number(path, line_no, row, col, "max_w") if "max_w" in col else None
                sd = _number(path, line_no, row, col, "std_w") if "std_w" in col else None
                if mx is not None and mx < mean:
                    raise TraceError(f"{path.name}:{line_no}: field max_w ({mx:g}) is below "
                                     f"mean_w ({mean:g})")
                if int(job) in given:
                    raise TraceError(f"{path.name}:{line_no}: job {int(job)} appears twice")
                given[int(job)] = (mean, mx, sd)
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {exc.strerror or exc}") from None
    synthetic = synthetic_profiles(w, idle_w, peak_w, settings)
    offsets, fractions, powers = [0], [], []
    missing = 0
    for i, job in enumerate(w.job_id.tolist()):
        if job in given:
            f, p = _phases_from_stats(*given[job])
        else:
            f, p = synthetic.phases(i)
            missing += 1
        fractions.extend(np.asarray(f).tolist())
        powers.extend(np.asarray(p).tolist())
        offsets.append(len(powers))
    return PowerProfiles(np.asarray(offsets), np.asarray(fractions), np.asarray(powers),
                         synthetic_jobs=missing)


def _number(path: Path, line_no: int, row: list[str], col: dict, name: str) -> float:
    i = col[name]
    text = row[i].strip() if i < len(row) else ""
    try:
        value = float(text)
    except ValueError:
        raise TraceError(f"{path.name}:{line_no}: field {name} is not a number: "
                         f"{text!r}") from None
    if not math.isfinite(value):
        raise TraceError(f"{path.name}:{line_no}: field {name} is not finite: {text!r}")
    if value < 0:
        raise TraceError(f"{path.name}:{line_no}: field {name} is negative: {text!r}")
    return value


def _phases_from_stats(mean: float, mx: float | None, sd: float | None):
    """One phase at the mean, or two phases (max for a share f, L for the rest) with
    exactly the given mean, max and std: f = sd^2 / (sd^2 + (max - mean)^2)."""
    if mx is None or sd is None or sd == 0 or mx == mean:
        return [1.0], [mean]
    f = sd * sd / (sd * sd + (mx - mean) ** 2)
    low = (mean - f * mx) / (1 - f)
    return [f, 1 - f], [mx, max(low, 0.0)]
