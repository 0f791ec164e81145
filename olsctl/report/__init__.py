"""``olsctl report``: tables and plots from a run or a study directory.

A run directory holds ``summary.json``, ``jobs.csv``, ``timeseries.csv`` and, with power,
``power.csv``; a study directory holds ``results.csv`` and ``runs/<id>/``; either, or a
directory of its own, may hold ``predict.json`` (``olsctl predict --out``). Everything a
report needs is read and checked before anything is printed or drawn; bad input is one
:class:`ReportError` line naming the file.

The tables need only rich. The plots need matplotlib (the ``plot`` extra); they are drawn
on matplotlib's Agg canvas (no pyplot, no global backend), one figure at a time, and only
where the data supports them:

- ``aggregate``: mean bounded slowdown, utilization and processor savings per log and
  scheme (Lawson & Smirni, Fig. 1), for a study;
- ``tradeoff``: per run, the share of SLA windows kept against processor savings (and
  energy, with power), for a study whose runs have summary.json ``sla``;
- ``weekly``: mean bounded slowdown and utilization per calendar week (Fig. 2), with the
  SLA bounds on the mean bounded slowdown dashed, each its own dashes, in the legend;
- ``sla``: a run's mean and 95th-percentile bounded slowdown (or waits, for a wait SLA)
  per SLA window against the SLA, the windows that broke it marked, and the mean active
  processors per window, for a run whose summary.json has ``sla`` and its window rows;
- ``activity``: active and busy processors over time, and the bounded-slowdown ECDF
  (Fig. 3), per log;
- ``power``: machine power against the cap over time (Wallace et al., Fig. 6/7), per run
  with ``power.csv``;
- ``predictor-error``: job power predictors' error by week, from ``predict.json``.

Long series are reduced before drawing (time-weighted means over at most
:data:`MAX_POINTS` bins, the ECDF at as many quantiles), so a plot's size and drawing time
do not grow with the log. The same data and matplotlib version give the same bytes.

The parts: :mod:`~olsctl.report.reading` (the directories and their files, checked),
:mod:`~olsctl.report.tables` (what is printed), :mod:`~olsctl.report.reductions` (the
series the plots draw, reduced), :mod:`~olsctl.report.figures` (which plots, drawn and
written) with :mod:`~olsctl.report.drawing` (what the plots share),
:mod:`~olsctl.report.study_figures` and :mod:`~olsctl.report.run_figures`. The names
other modules use are importable from ``olsctl.report`` itself.
"""

from __future__ import annotations

from olsctl.report.drawing import RC, has_sla_windows
from olsctl.report.figures import (FORMATS, PLOT_HINT, PlotData, check_out_dir, plot_data,
                                   write_plots)
from olsctl.report.reading import (PREDICT_FILE, ROW_FIGURES, SUMMARY_METRICS, ReportError,
                                   RunEntry, Source, load_source, log_name, read_columns,
                                   read_predict, read_rows, read_summary, write_predict)
from olsctl.report.reductions import (ACTIVITY_POINTS, DAY_S, MAX_POINTS, RunSeries, bin_means,
                                      change_points, ecdf_points, reduce_chunks, reduce_steps,
                                      run_series, step_integral)
from olsctl.report.run_figures import (activity_figure, power_figure, predict_figure,
                                       sla_figure, weekly_figure)
from olsctl.report.study_figures import AGGREGATE, MARKERS, aggregate_figure, tradeoff_figure
from olsctl.report.tables import (STUDY_FIGURES, predict_table, report_tables, run_extra_table,
                                  study_table)

__all__ = [
    "ACTIVITY_POINTS", "AGGREGATE", "DAY_S", "FORMATS", "MARKERS", "MAX_POINTS", "PLOT_HINT",
    "PREDICT_FILE", "RC", "ROW_FIGURES", "STUDY_FIGURES", "SUMMARY_METRICS", "PlotData",
    "ReportError", "RunEntry", "RunSeries", "Source", "activity_figure", "aggregate_figure",
    "bin_means", "change_points", "check_out_dir", "ecdf_points", "has_sla_windows",
    "load_source", "log_name", "plot_data", "power_figure", "predict_figure", "predict_table",
    "read_columns", "read_predict", "read_rows", "read_summary", "reduce_chunks",
    "reduce_steps", "report_tables", "run_extra_table", "run_series", "sla_figure",
    "step_integral", "study_table", "tradeoff_figure", "weekly_figure", "write_plots",
    "write_predict",
]
