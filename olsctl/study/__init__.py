"""Studies: a grid of runs over one base config, run in parallel and stored run by run.

A study file (YAML) holds ``base`` (a run config, or the path of one), ``grid`` (config
keys, dotted into the ``policy``, ``power`` and ``controller`` sections, each with a list
of values; or named axes whose labels each stand for several settings applied together)
and optionally ``out``, ``n_jobs``, ``backend`` and ``scheduler``. The study is the
cartesian product of the grid, in grid order (the last key varies fastest).

Every grid point is a validated :class:`RunConfig` whose id is a readable prefix and a
hash of the config, so the same run keeps the same id whatever the grid around it. A
study directory holds:

- ``runs/<id>/``: a finished run's files, moved into place whole by one rename, so a run
  directory that exists is a complete run;
- ``results.csv``: one row per finished run of the grid, in grid order, rewritten
  (atomically) after every run;
- ``failed.csv``: the runs that failed in the current invocation, and why;
- ``infeasible.csv`` (``olsctl tune``): the grid's settings under which some job can
  never start, and why; they are not run again;
- ``.partial/``: runs being written; what an interrupted study left there is removed at
  the next start (a lock keeps two studies out of one directory).

Everything in the study file is checked, every grid point built and its trace found,
before anything is written.

The parts: :mod:`~olsctl.study.study_file` (the study file), :mod:`~olsctl.study.grid`
(its runs and their ids), :mod:`~olsctl.study.execution` (running them in workers),
:mod:`~olsctl.study.storage` (the study directory and what a worker hands back) and
:mod:`~olsctl.study.progress` (what the terminal shows). The names other modules use are
importable from ``olsctl.study``.

The package is also callable: ``olsctl.study(...)`` is :func:`olsctl.api.study` (the
Python API's name for running a study, which this package's name would hide otherwise).
"""

from __future__ import annotations

import sys
import types
from typing import Any

from olsctl.study.execution import (PARENT_POLL_S, PR_SET_PDEATHSIG, StudyResult, run_point,
                                    run_study)
from olsctl.study.grid import (BASE_METRICS, CONTROLLER_METRICS, POWER_METRICS, SECTIONS,
                               SLA_METRICS, Axis, GridPoint, Study, canonical, label, run_id)
from olsctl.study.progress import (NULL_STUDY_PROGRESS, PlainStudyProgress, RichStudyProgress,
                                   StudyProgress, study_progress, study_table)
from olsctl.study.storage import (INFEASIBLE_FILE, METRIC_KEYS, METRIC_SECTIONS, RUN_FILES,
                                  Outcome, StudyError, failed_csv, finished_runs,
                                  known_infeasible, metric_values, results_csv, write_tables)
from olsctl.study.study_file import (BACKENDS, STUDY_KEYS, load_study, read_mapping,
                                     study_from_data)

__all__ = [
    "BACKENDS", "BASE_METRICS", "CONTROLLER_METRICS", "INFEASIBLE_FILE", "METRIC_KEYS",
    "METRIC_SECTIONS", "NULL_STUDY_PROGRESS", "PARENT_POLL_S", "POWER_METRICS",
    "PR_SET_PDEATHSIG", "RUN_FILES", "SECTIONS", "SLA_METRICS", "STUDY_KEYS", "Axis",
    "GridPoint", "Outcome", "PlainStudyProgress", "RichStudyProgress", "Study", "StudyError",
    "StudyProgress", "StudyResult", "canonical", "failed_csv", "finished_runs",
    "known_infeasible", "label", "load_study", "metric_values", "read_mapping", "results_csv",
    "run_id", "run_point", "run_study", "study_from_data", "study_progress", "study_table",
    "write_tables",
]


class _CallablePackage(types.ModuleType):
    """This package, which runs a study when called (:func:`olsctl.api.study`)."""

    def __call__(self, study: Any, /, **kwargs: Any) -> Any:
        from olsctl import api_study  # (the API, which uses this package, loaded there)

        return api_study(study, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
