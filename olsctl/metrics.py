"""Metrics computed from run records (definitions: docs/internals.md, Semantics).

- bounded slowdown: ``1 + wait / max(10 s, runtime)`` (Lawson & Smirni);
- utilization: sum(procs x runtime) / (processors x (last end - first submit)), and the same
  relative to the integral of active processors;
- processor savings: 1 - time-average of active processors / processors;
- transient metrics: the same per calendar week of simulated time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import numpy as np

from olsctl.records import RunRecords

BSLD_BOUND_S = 10.0
WEEK_S = 7 * 24 * 3600


@dataclass(frozen=True)
class JobColumns:
    """Per-job metric columns in job-id order."""

    job_id: np.ndarray
    submit_s: np.ndarray
    start_s: np.ndarray
    end_s: np.ndarray
    runtime_s: np.ndarray
    procs: np.ndarray
    estimate_s: np.ndarray
    wait_s: np.ndarray
    turnaround_s: np.ndarray
    bsld: np.ndarray


def bounded_slowdown(wait_s: np.ndarray, runtime_s: np.ndarray) -> np.ndarray:
    """``1 + wait / max(10 s, runtime)``, for columns of jobs (the one definition, with
    :func:`job_bsld` for one job; the what-if's hot loops inline the latter with
    :data:`BSLD_BOUND_S`)."""
    return 1.0 + wait_s / np.maximum(BSLD_BOUND_S, runtime_s)


def job_bsld(wait_s: float, runtime_s: float) -> float:
    """One job's bounded slowdown, ``1 + wait / max(10 s, runtime)``."""
    return 1.0 + wait_s / (runtime_s if runtime_s > BSLD_BOUND_S else BSLD_BOUND_S)


def job_columns(records: RunRecords) -> JobColumns:
    job_id, submit, start, end, runtime, procs, est = records.job_table().T
    wait = start - submit
    ids = job_id.astype(np.int64)
    if records.stretch_s:  # throttled jobs: the time beyond their full-clock run is delay
        stretch = np.asarray([records.stretch_s.get(j, 0.0) for j in ids.tolist()])
        bsld = bounded_slowdown(wait + stretch, runtime - stretch)
    else:
        bsld = bounded_slowdown(wait, runtime)
    return JobColumns(ids, submit, start, end, runtime, procs.astype(np.int64), est, wait,
                      end - submit, bsld)


def _busy_integral(t: np.ndarray, level: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Integral of a step function (``level[k]`` on ``[t[k], t[k+1])``) from t[0] to ``at``."""
    if t.size == 0:
        return np.zeros_like(at)
    cum = np.concatenate(([0.0], np.cumsum(level[:-1] * np.diff(t))))
    k = np.clip(np.searchsorted(t, at, side="right") - 1, 0, t.size - 1)
    return np.where(at <= t[0], 0.0, cum[k] + level[k] * (at - t[k]))


def summarize(records: RunRecords) -> dict:
    """Whole-run metrics as plain data (seconds, fractions)."""
    c = job_columns(records)
    total = records.total_procs
    first = float(c.submit_s.min())
    last = float(c.end_s.max())
    span = last - first
    area = float((c.procs * c.runtime_s).sum())
    s = records.samples
    t = np.asarray(s.time_s, dtype=float)
    active_int = float(_busy_integral(t, np.asarray(s.active_procs, dtype=float),
                                      np.asarray([last]))[0])
    return {
        "jobs": int(c.job_id.size),
        "processors": total,
        "first_submit_s": first,
        "last_end_s": last,
        "makespan_s": span,
        "mean_bsld": float(c.bsld.mean()),
        "p50_bsld": float(np.percentile(c.bsld, 50)),
        "p95_bsld": float(np.percentile(c.bsld, 95)),
        "max_bsld": float(c.bsld.max()),
        "mean_wait_s": float(c.wait_s.mean()),
        "p95_wait_s": float(np.percentile(c.wait_s, 95)),
        "max_wait_s": float(c.wait_s.max()),
        "mean_turnaround_s": float(c.turnaround_s.mean()),
        "utilization": area / (total * span) if span > 0 else 0.0,
        "utilization_active": area / active_int if active_int > 0 else 0.0,
        "mean_active_procs": active_int / span if span > 0 else float(total),
        "processor_savings": 1.0 - (active_int / span) / total if span > 0 else 0.0,
    }


def week_origin(first_submit_s: float, unix_start: int | None, tz_offset_s: int | None) -> tuple[float, str | None]:
    """Trace time of the Monday 00:00 (trace's local standard time) on or before the first
    submit, and that date; without ``UnixStartTime`` weeks start at the first submit."""
    if unix_start is None:
        return first_submit_s, None
    tz = timezone(timedelta(seconds=tz_offset_s or 0))
    local = datetime.fromtimestamp(unix_start + first_submit_s, tz)
    monday = (local - timedelta(days=local.weekday())).replace(hour=0, minute=0, second=0,
                                                                microsecond=0)
    return monday.timestamp() - unix_start, monday.date().isoformat()


def weekly(records: RunRecords, unix_start: int | None = None,
           tz_offset_s: int | None = None, window_s: float = WEEK_S,
           sla: "SlaSpec | None" = None) -> list[dict]:
    """Per SLA window (a calendar week by default, ``window_s`` long from the week
    origin): jobs submitted in it, their mean and 95th-percentile bounded slowdown and
    mean wait, the window's utilization (busy processor-seconds in it / processors x its
    length, clipped to the run's span) and mean active processors, and with ``sla``
    whether its jobs kept it (``sla_kept``; None when no job was submitted in it)."""
    c = job_columns(records)
    first, last = float(c.submit_s.min()), float(c.end_s.max())
    origin, origin_date = week_origin(first, unix_start, tz_offset_s)
    n_weeks = int((last - origin) // window_s) + 1
    starts = origin + window_s * np.arange(n_weeks, dtype=float)
    lo = np.maximum(starts, first)
    hi = np.minimum(starts + window_s, last)
    s = records.samples
    t = np.asarray(s.time_s, dtype=float)
    busy = np.asarray(s.busy_procs, dtype=float)
    active = np.asarray(s.active_procs, dtype=float)
    busy_area = _busy_integral(t, busy, hi) - _busy_integral(t, busy, lo)
    active_area = _busy_integral(t, active, hi) - _busy_integral(t, active, lo)
    week_of_job = ((c.submit_s - origin) // window_s).astype(np.int64)
    order = np.argsort(week_of_job, kind="stable")
    bounds = np.searchsorted(week_of_job[order], np.arange(n_weeks + 1))
    dated = origin_date is not None and window_s % 86400 == 0
    rows = []
    for w in range(n_weeks):
        sel = order[bounds[w]:bounds[w + 1]]
        n = int(sel.size)
        length = hi[w] - lo[w]
        row = {
            "week": w,
            "week_start": (_add_days(origin_date, int(w * window_s // 86400)) if dated else None),
            "start_s": float(starts[w]),
            "jobs": n,
            "mean_bsld": float(c.bsld[sel].mean()) if n else None,
            "p95_bsld": float(np.percentile(c.bsld[sel], 95)) if n else None,
            "mean_wait_s": float(c.wait_s[sel].mean()) if n else None,
            "max_wait_s": float(c.wait_s[sel].max()) if n else None,
            "utilization": float(busy_area[w] / (records.total_procs * length)) if length > 0 else None,
            "mean_active_procs": float(active_area[w] / length) if length > 0 else None,
        }
        if sla is not None:
            row["sla_kept"] = None if not n else bool(row[sla.metric] <= sla.max)
        rows.append(row)
    return rows


@dataclass(frozen=True)
class SlaSpec:
    """The slowdown SLA runs are measured against: ``metric`` of the jobs submitted in
    each window of ``window_s`` seconds (from the week origin) must be <= ``max``."""

    metric: str = "mean_bsld"
    max: float = 200.0
    window_s: float = float(WEEK_S)


def sla_summary(rows: list[dict], sla: SlaSpec) -> dict:
    """The SLA and the share of windows (those in which jobs were submitted) that kept it."""
    judged = [r["sla_kept"] for r in rows if r.get("sla_kept") is not None]
    kept = sum(judged)
    return {"metric": sla.metric, "max": sla.max, "window_s": sla.window_s,
            "windows": len(judged), "windows_kept": kept,
            "kept_share": kept / len(judged) if judged else None}


def _add_days(iso_date: str, days: int) -> str:
    return (datetime.fromisoformat(iso_date) + timedelta(days=days)).date().isoformat()
