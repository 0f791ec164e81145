"""``olsctl predict``: how well job power predictors foresee the power of a log's jobs.

The log is replayed under EASY (exact estimates, every processor active, no cap); its jobs
get seeded synthetic power profiles; then every predictor of
:func:`olsctl.power.evaluate.default_predictors` predicts each job's mean power per
processor when it starts, from what it could know then (:mod:`olsctl.power.evaluate`).
The report holds the mean absolute error (W per processor) of each predictor over all
jobs, over the jobs the learner predicts from a learned profile, and per week of job
start.
"""

from __future__ import annotations

from dataclasses import dataclass

from olsctl.policies import make_policy
from olsctl.power.accounting import MachinePower
from olsctl.power.cap import CapSchedule
from olsctl.power.evaluate import (default_predictors, learned_errors, prediction_errors,
                                   weekly_mae)
from olsctl.power.profiles import ProfileSettings, synthetic_profiles
from olsctl.power.setup import power_setup
from olsctl.sim import MainSimulator
from olsctl.workload import Workload


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
