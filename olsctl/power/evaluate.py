"""How well predictors foresee job power: ``olsctl predict``.

:func:`predictor_errors` replays a log under EASY (exact estimates, every processor
active, no cap), gives its jobs seeded synthetic power profiles, and measures every
predictor of :func:`default_predictors` on them. The report holds the mean absolute error
(W per processor) of each predictor over all jobs, over the jobs the learner predicts from
a learned profile, and per week of job start.

:func:`prediction_errors` replays a run's records in time order: when a job starts,
every predictor predicts its mean power per processor from what it knows then (history
predictors: the jobs that have finished; the learner: the power readings taken so far, of
running and finished jobs); when a job ends, its true profile becomes known. Errors are
absolute, in W per processor, grouped by the week in which jobs start.
"""

from __future__ import annotations

from bisect import insort
from dataclasses import dataclass, field

import numpy as np

from olsctl.metrics import WEEK_S
from olsctl.policies import make_policy
from olsctl.power.accounting import MachinePower
from olsctl.power.cap import CapSchedule
from olsctl.power.predict import make_predictor
from olsctl.power.profiles import ProfileSettings, synthetic_profiles
from olsctl.power.runtime import PowerState
from olsctl.power.setup import power_setup
from olsctl.records import RunRecords
from olsctl.sim import MainSimulator
from olsctl.workload import Workload


@dataclass
class _View:
    """The little of a SimState that predictors and the learner read."""

    power: PowerState
    runtime_s: list = field(default_factory=list)
    job_id: list = field(default_factory=list)
    start_s: list = field(default_factory=list)
    #: running jobs as (end, index), ascending
    running: list = field(default_factory=list)
    now_s: float = 0.0


def prediction_errors(records: RunRecords, power: PowerState, index_of: dict[int, int],
                      predictors: dict[str, object]) -> dict:
    """Per predictor: absolute error of each job's predicted mean power (job order of
    start) and the week of its start."""
    jobs = sorted(records.jobs, key=lambda r: (r.start_s, r.job_id))
    ends = sorted(records.jobs, key=lambda r: (r.end_s, r.job_id))
    learned = PowerState(power.idle_w, power.sleep_w, power.peak_w,
                         CapSchedule.constant(float("inf")), power.phase_start, power.phase_w,
                         power.user, power.true_mean_w, power.true_max_w, power.true_std_w,
                         job_key=power.job_key, learning=True, sample_s=power.sample_s)
    runtime = [0.0] * len(power.user)
    job_id = [0] * len(power.user)
    start = [float("nan")] * len(power.user)
    for r in records.jobs:
        i = index_of[r.job_id]
        runtime[i], job_id[i], start[i] = r.runtime_s, r.job_id, r.start_s
    view = _View(learned, runtime, job_id, start)
    errors = {name: [] for name in predictors}
    sources = []
    starts = []
    learner = next((p for p in predictors.values() if getattr(p, "name", "") == "learner"), None)
    k = 0
    for r in jobs:
        while k < len(ends) and ends[k].end_s <= r.start_s:
            done = index_of[ends[k].job_id]
            view.running.remove((ends[k].end_s, done))
            learned.on_finish(view, done)
            k += 1
        view.now_s = r.start_s
        i = index_of[r.job_id]
        truth = power.true_mean_w[i]
        for name, pred in predictors.items():
            errors[name].append(abs(pred.predict(view, i, "mean") - truth))
        if learner is not None:
            sources.append(learner.source(learned, i))
        starts.append(r.start_s)
        insort(view.running, (r.end_s, i))
    return {"start_s": np.asarray(starts), "errors": {n: np.asarray(e) for n, e in errors.items()},
            "source": np.asarray(sources)}


def weekly_mae(result: dict, origin_s: float) -> list[dict]:
    """Mean absolute error of every predictor per week of job start."""
    week = ((result["start_s"] - origin_s) // WEEK_S).astype(np.int64)
    rows = []
    source = result.get("source")
    for w in np.unique(week).tolist():
        sel = week == w
        row = {"week": int(w), "jobs": int(sel.sum()),
               **{name: float(err[sel].mean()) for name, err in result["errors"].items()}}
        if source is not None and source.size:
            row["learned_share"] = float((source[sel] != "peak").mean())
        rows.append(row)
    return rows


def learned_errors(result: dict) -> dict[str, float]:
    """Mean absolute error of every predictor over the jobs the learner had learned."""
    sel = result["source"] != "peak"
    return {name: float(err[sel].mean()) if sel.any() else float("nan")
            for name, err in result["errors"].items()}


def default_predictors() -> dict[str, object]:
    return {"naive": make_predictor("naive"),
            "history": make_predictor({"name": "history", "window": 10, "alpha": 1.0}),
            "history-aged": make_predictor({"name": "history", "window": 20, "alpha": 0.8}),
            "learner": make_predictor("learner")}


@dataclass(frozen=True)
class PredictorErrors:
    """The errors of the predictors on one log (W per processor)."""

    trace: str
    seed: int
    #: the predictors' names, in the report's order
    predictors: tuple[str, ...]
    overall_mae_w: dict[str, float]
    #: over the jobs the learner predicts from a learned job or project profile
    learned_jobs_mae_w: dict[str, float]
    #: per week of job start: week, jobs, learned_share and each predictor's error
    weekly: list[dict]
    #: jobs replayed, and the share of them the learner predicts from a learned profile
    jobs: int
    learned_share: float

    def report(self) -> dict:
        """The report as ``olsctl predict --json`` prints it and ``predict.json`` holds
        it (:func:`olsctl.report.write_predict`)."""
        return {"trace": self.trace, "seed": self.seed, "overall_mae_w": self.overall_mae_w,
                "learned_jobs_mae_w": self.learned_jobs_mae_w, "weekly": self.weekly}


def predictor_errors(w: Workload, seed: int = 0) -> PredictorErrors:
    """Replay ``w`` under EASY and measure every default predictor on its jobs, whose
    true profiles are synthetic (``seed``)."""
    machine = MachinePower()
    prof = synthetic_profiles(w, machine.idle_w, machine.peak_w, ProfileSettings(seed=seed))
    records = MainSimulator(w, make_policy({"name": "easy"}), w.estimate_s("exact")).run()
    power, _ = power_setup(w, prof, machine, CapSchedule.constant(float("inf")))
    index_of = {j: i for i, j in enumerate(w.job_id.tolist())}
    predictors = default_predictors()
    result = prediction_errors(records, power, index_of, predictors)
    weeks = weekly_mae(result, float(w.submit_s[0]))
    overall = {name: float(err.mean()) for name, err in result["errors"].items()}
    return PredictorErrors(w.name, seed, tuple(predictors), overall, learned_errors(result),
                           weeks, len(result["start_s"]),
                           float((result["source"] != "peak").mean()))
