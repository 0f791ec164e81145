"""Statistics of a workload for ``olsctl trace info``: sizes, runtimes, load, estimates."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np

from olsctl.power.profiles import ProfileSettings, project_of, synthetic_profiles
from olsctl.workload import Workload

#: Bucket upper bounds (inclusive) for job sizes, and runtime bounds in seconds (the
#: MQBF default queue boundaries).
SIZE_BUCKETS = (1, 4, 16, 64, 256, 1024)
RUNTIME_BOUNDS_S = (100.0, 1_000.0, 10_000.0)


def _quantiles(x: np.ndarray) -> dict:
    q = np.percentile(x, [0, 25, 50, 75, 95, 100])
    return {"mean": float(x.mean()), **{k: float(v) for k, v in
                                        zip(("min", "p25", "median", "p75", "p95", "max"), q)}}


def _size_buckets(procs: np.ndarray) -> list[dict]:
    rows, lo = [], 1
    for hi in SIZE_BUCKETS:
        n = int(((procs >= lo) & (procs <= hi)).sum())
        rows.append({"range": f"{lo}" if lo == hi else f"{lo}-{hi}", "jobs": n})
        lo = hi + 1
    n = int((procs >= lo).sum())
    if n:
        rows.append({"range": f">={lo}", "jobs": n})
    return rows


def _runtime_buckets(runtime: np.ndarray) -> list[dict]:
    edges = (0.0, *RUNTIME_BOUNDS_S, np.inf)
    labels = ("< 100 s", "100 s - 1,000 s", "1,000 s - 10,000 s", ">= 10,000 s")
    return [{"range": label, "jobs": int(((runtime >= lo) & (runtime < hi)).sum())}
            for label, lo, hi in zip(labels, edges[:-1], edges[1:])]


def _date(w: Workload, t: float) -> str | None:
    start = w.header.first_int("UnixStartTime")
    if start is None:
        return None
    tz = timezone(timedelta(seconds=w.header.first_int("TimeZone") or 0))
    return datetime.fromtimestamp(start + t, tz).strftime("%Y-%m-%d %H:%M")


def trace_info(w: Workload) -> dict:
    """A summary of ``w`` as plain data (seconds; fractions in [0, 1])."""
    runtime, procs, req = w.runtime_s, w.procs.astype(float), w.requested_time_s
    first, last_submit = float(w.submit_s[0]), float(w.submit_s[-1])
    span = last_submit - first
    has_req = req > 0
    ratio = runtime[has_req] / req[has_req]
    info = {
        "file": w.name,
        "installation": w.header.get("Installation") or w.header.get("Computer"),
        "machine_procs": w.machine_procs,
        "load": w.report.as_dict(),
        "first_submit": _date(w, first),
        "last_submit": _date(w, last_submit),
        "span_days": span / 86400.0,
        "offered_load": float((procs * runtime).sum() / (w.machine_procs * span)) if span > 0 else None,
        "users": int(np.unique(w.user_id[w.user_id >= 0]).size),
        "size": {**_quantiles(procs), "power_of_two": float(np.mean((w.procs & (w.procs - 1)) == 0)),
                 "serial": float(np.mean(w.procs == 1)), "buckets": _size_buckets(w.procs)},
        "runtime_s": {**_quantiles(runtime), "buckets": _runtime_buckets(runtime)},
        "estimates": {
            "with_estimate": float(has_req.mean()),
            "mean_accuracy": float(ratio.mean()) if ratio.size else None,
            "median_accuracy": float(np.median(ratio)) if ratio.size else None,
            "under_estimated": float((ratio > 1).mean()) if ratio.size else None,
            "within_2x": float(((ratio >= 0.5) & (ratio <= 1)).mean()) if ratio.size else None,
        },
    }
    return info


def power_info(w: Workload, idle_w: float = 250.0, peak_w: float = 1150.0,
               seed: int = 0, procs_per_node: int = 1) -> dict:
    """Distributions of the synthetic job power profiles olsctl gives ``w`` (per processor)."""
    prof = synthetic_profiles(w, idle_w, peak_w, ProfileSettings(seed=seed,
                                                                  procs_per_node=procs_per_node))
    mean, mx, sd = prof.mean_w, prof.max_w, prof.std_w
    energy = mean * w.procs * w.runtime_s
    return {
        "projects": int(np.unique(project_of(w)).size),
        "idle_w": idle_w,
        "peak_w": peak_w,
        "seed": seed,
        "mean_w": _quantiles(mean),
        "max_w": _quantiles(mx),
        "std_w": _quantiles(sd),
        "phases": _quantiles(np.diff(prof.offset).astype(float)),
        "energy_j": float(energy.sum()),
    }
