"""What the plots draw of a run, computed from its records and reduced: step functions
as their change points or time-weighted bin means, chunk means and maxima, the ECDF at
evenly spaced ranks (at most :data:`MAX_POINTS` points each), so a plot's size and drawing
time do not grow with the log.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from olsctl.report.reading import (ReportError, RunEntry, _is_number, _section, read_columns,
                                   read_rows)

#: most points a reduced series keeps (bins of a time series, quantiles of an ECDF)
MAX_POINTS = 2000
#: most steps of the processor lines (more would be a solid band: bin means instead)
ACTIVITY_POINTS = 500
#: most steps of the cap line (more would be a solid wall at a plot's width: the lowest
#: and highest cap in force per chunk of samples instead)
CAP_STEPS = 250
DAY_S = 86400.0


def step_integral(t: np.ndarray, v: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Integral from t[0] to ``at`` of the step function ``v[k]`` on ``[t[k], t[k+1])``."""
    cum = np.concatenate(([0.0], np.cumsum(v[:-1] * np.diff(t))))
    k = np.clip(np.searchsorted(t, at, side="right") - 1, 0, t.size - 1)
    return np.where(at <= t[0], 0.0, cum[k] + v[k] * (at - t[k]))


def change_points(t: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A step function (value ``v[k]`` from ``t[k]`` on, ending at ``t[-1]``) as the
    points to draw with ``steps-post``: where it changes, and its end."""
    keep = np.concatenate(([True], v[1:] != v[:-1]))
    x, y = t[keep], v[keep]
    return np.append(x, t[-1]), np.append(y, y[-1])


def bin_means(t: np.ndarray, v: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """The same step function's time-weighted means over ``bins`` equal bins of its span
    (which must be positive), as points to draw with ``steps-post``."""
    edges = np.linspace(t[0], t[-1], bins + 1)
    means = np.diff(step_integral(t, v, edges)) / np.diff(edges)
    return edges, np.append(means, means[-1])


def reduce_steps(t: np.ndarray, v: np.ndarray, max_points: int = MAX_POINTS
                 ) -> tuple[np.ndarray, np.ndarray, bool]:
    """Points of :func:`change_points` when at most ``max_points + 1``, else of
    :func:`bin_means` over ``max_points`` bins; the flag says which."""
    x, y = change_points(t, v)
    if x.size <= max_points + 1 or t[-1] <= t[0]:
        return x, y, False
    return (*bin_means(t, v, max_points), True)


def reduce_chunks(values: np.ndarray, max_points: int = MAX_POINTS,
                  how: Callable = np.add) -> tuple[np.ndarray, np.ndarray]:
    """First index and mean (``np.add``) or ``how``-reduction (e.g. ``np.maximum``) of
    consecutive chunks, at most ``max_points`` of them."""
    size = max(1, math.ceil(values.size / max_points))
    starts = np.arange(0, values.size, size)
    reduced = how.reduceat(values, starts)
    if how is np.add:
        reduced = reduced / np.diff(np.append(starts, values.size))
    return starts, reduced


def ecdf_points(values: np.ndarray, max_points: int = MAX_POINTS
                ) -> tuple[np.ndarray, np.ndarray]:
    """The empirical CDF at (at most) ``max_points`` evenly spaced ranks, from (min, 0)
    to (max, 1); exact within 1 / max_points."""
    x = np.sort(values)
    n = x.size
    idx = np.unique(np.linspace(0, n - 1, min(n, max_points)).round().astype(np.int64))
    return np.concatenate(([x[0]], x[idx])), np.concatenate(([0.0], (idx + 1) / n))


@dataclass(frozen=True)
class RunSeries:
    """What the plots draw of one run, reduced (times in days since the first submit)."""

    entry: RunEntry
    active: tuple[np.ndarray, np.ndarray]
    busy: tuple[np.ndarray, np.ndarray]
    bin_h: float | None
    active_varies: bool
    ecdf: tuple[np.ndarray, np.ndarray]
    power: dict | None


def run_series(entry: RunEntry) -> RunSeries:
    """Read a run's timeseries.csv, jobs.csv and power.csv (when present) and reduce them."""
    ts = read_columns(entry.path / "timeseries.csv", ("time", "busy_procs", "active_procs"))
    origin = float(entry.summary["metrics"]["first_submit_s"])
    t = (ts["time"] - origin) / DAY_S
    if np.any(np.diff(t) < 0):
        raise ReportError(f"{entry.path / 'timeseries.csv'}: times go back")
    active = change_points(t, ts["active_procs"])
    busy = change_points(t, ts["busy_procs"])
    bin_h = None
    if max(active[0].size, busy[0].size) > ACTIVITY_POINTS + 1 and t[-1] > t[0]:
        active = bin_means(t, ts["active_procs"], ACTIVITY_POINTS)
        busy = bin_means(t, ts["busy_procs"], ACTIVITY_POINTS)
        bin_h = 24 * float(t[-1] - t[0]) / ACTIVITY_POINTS
    bsld = read_columns(entry.path / "jobs.csv", ("bounded_slowdown",))["bounded_slowdown"]
    power = None
    if (entry.path / "power.csv").is_file():
        power = _power_series(entry.path / "power.csv", origin, entry.summary)
    varies = bool(np.any(ts["active_procs"] != ts["active_procs"][0]))
    return RunSeries(entry, active, busy, bin_h, varies, ecdf_points(bsld), power)


def _power_series(path: Path, origin_s: float, summary: dict) -> dict:
    p = read_columns(path, ("time", "mean_power_w", "peak_power_w", "cap_w", "within_cap"))
    sample_s = _section(summary, "power").get("sample_s")
    if not _is_number(sample_s):
        sample_s = float(np.median(np.diff(p["time"]))) if p["time"].size > 1 else 0.0
    t = (np.append(p["time"], p["time"][-1] + sample_s) - origin_s) / DAY_S
    starts, mean_kw = reduce_chunks(p["mean_power_w"] / 1e3)
    _, peak_kw = reduce_chunks(p["peak_power_w"] / 1e3, how=np.maximum)
    cap_x, cap_y, cap_high, cap_per = _cap_steps(t, p["cap_w"] / 1e3, sample_s)
    chunk_x = np.append(t[starts], t[-1])
    acted, acted_n = None, None
    if "limit_acted" in read_rows(path)[0]:  # a power limit: where it throttled jobs
        every = read_columns(path, ("limit_acted",))["limit_acted"]
        _, acted = reduce_chunks(every, how=np.maximum)
        acted_n = int(np.count_nonzero(every))
    return {"x": chunk_x, "acted": acted, "acted_n": acted_n,
            "mean_kw": np.append(mean_kw, mean_kw[-1]),
            "peak_kw": np.append(peak_kw, peak_kw[-1]), "cap_x": cap_x, "cap_kw": cap_y,
            "cap_high_kw": cap_high, "cap_per": cap_per,
            "over": int(np.count_nonzero(p["within_cap"] == 0)),
            "per": (f"{_duration(sample_s)} interval" if starts.size == p["time"].size
                    else _duration((starts[1] - starts[0]) * sample_s))}


def _cap_steps(t: np.ndarray, cap_kw: np.ndarray, sample_s: float
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, str | None]:
    """The cap in force per sample (from ``t[k]`` to ``t[k + 1]``) as the points of a
    step line: its changes when at most :data:`CAP_STEPS`, else the lowest cap in force
    per chunk of samples (at most :data:`CAP_STEPS` chunks) with the highest as a third
    array, and the chunk's length in words."""
    if np.count_nonzero(cap_kw[1:] != cap_kw[:-1]) <= CAP_STEPS:
        x, y = change_points(t, np.append(cap_kw, cap_kw[-1]))
        return x, y, None, None
    starts, low = reduce_chunks(cap_kw, CAP_STEPS, how=np.minimum)
    _, high = reduce_chunks(cap_kw, CAP_STEPS, how=np.maximum)
    x = np.append(t[starts], t[-1])
    return x, np.append(low, low[-1]), np.append(high, high[-1]), \
        _duration((starts[1] - starts[0]) * sample_s)


def _duration(seconds: float) -> str:
    """``45 s``, ``10 min``, ``4.08 h``."""
    if seconds < 60:
        return f"{seconds:.3g} s"
    return f"{seconds / 60:.3g} min" if seconds < 3600 else f"{seconds / 3600:.3g} h"
