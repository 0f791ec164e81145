"""How well predictors foresee job power: ``olsctl predict``.

Replays a run's records in time order: when a job starts, every predictor predicts its
mean power per processor from what it knows then (history predictors: the jobs that have
finished); when a job ends, its true profile becomes known. Errors are absolute, in W
per processor, grouped by the week in which jobs start.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from olsctl.metrics import WEEK_S
from olsctl.power.cap import CapSchedule
from olsctl.power.predict import make_predictor
from olsctl.power.runtime import PowerState
from olsctl.records import RunRecords


@dataclass
class _View:
    """The little of a SimState that predictors read."""

    power: PowerState


def prediction_errors(records: RunRecords, power: PowerState, index_of: dict[int, int],
                      predictors: dict[str, object]) -> dict:
    """Per predictor: absolute error of each job's predicted mean power (job order of
    start) and the week of its start."""
    jobs = sorted(records.jobs, key=lambda r: (r.start_s, r.job_id))
    ends = sorted(records.jobs, key=lambda r: (r.end_s, r.job_id))
    learned = PowerState(power.idle_w, power.sleep_w, power.peak_w,
                         CapSchedule.constant(float("inf")), power.phase_start, power.phase_w,
                         power.user, power.true_mean_w, power.true_max_w, power.true_std_w)
    view = _View(learned)
    errors = {name: [] for name in predictors}
    starts = []
    k = 0
    for r in jobs:
        while k < len(ends) and ends[k].end_s <= r.start_s:
            learned.on_finish(None, index_of[ends[k].job_id])
            k += 1
        i = index_of[r.job_id]
        truth = power.true_mean_w[i]
        for name, pred in predictors.items():
            errors[name].append(abs(pred.predict(view, i, "mean") - truth))
        starts.append(r.start_s)
    return {"start_s": np.asarray(starts), "errors": {n: np.asarray(e) for n, e in errors.items()}}


def weekly_mae(result: dict, origin_s: float) -> list[dict]:
    """Mean absolute error of every predictor per week of job start."""
    week = ((result["start_s"] - origin_s) // WEEK_S).astype(np.int64)
    rows = []
    for w in np.unique(week).tolist():
        sel = week == w
        rows.append({"week": int(w), "jobs": int(sel.sum()),
                     **{name: float(err[sel].mean()) for name, err in result["errors"].items()}})
    return rows


def default_predictors() -> dict[str, object]:
    return {"naive": make_predictor("naive"),
            "history": make_predictor({"name": "history", "window": 10, "alpha": 1.0}),
            "history-aged": make_predictor({"name": "history", "window": 20, "alpha": 0.8})}
