"""Drawing a report's plots: the data they need (read and checked first), the plan of
the plots the data supports, and writing them, one figure at a time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from olsctl.report.drawing import RC, _kept_share, _matplotlib, _save, has_sla_windows
from olsctl.report.reading import ReportError, Source
from olsctl.report.reductions import RunSeries, run_series
from olsctl.report.run_figures import (activity_figure, power_figure, predict_figure,
                                       sla_figure, weekly_figure)
from olsctl.report.study_figures import AGGREGATE, aggregate_figure, tradeoff_figure

PLOT_HINT = "no plots: they need matplotlib, which pip install 'olsctl[plot]' adds"
FORMATS = ("png", "svg")


@dataclass(frozen=True)
class PlotData:
    """Everything the plots of a report draw, read and checked."""

    source: Source
    series: tuple[RunSeries, ...]
    mpl: Any


def plot_data(source: Source) -> PlotData | None:
    """The plots' data, read from the runs' files; None without matplotlib."""
    mpl = _matplotlib()
    if mpl is None:
        return None
    return PlotData(source, tuple(run_series(r) for r in source.runs), mpl)


def check_out_dir(out_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise ReportError(f"{out_dir}: exists and is not a directory")


def write_plots(data: PlotData, out_dir: Path, fmt: str = "png") -> list[Path]:
    """Draw every plot the data supports into ``out_dir``; returns the files written."""
    if fmt not in FORMATS:
        raise ReportError(f"--format: must be one of {', '.join(FORMATS)} (got {fmt!r})")
    check_out_dir(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with data.mpl.matplotlib.rc_context(RC):
        return [_save(draw(), out_dir / f"{name}.{fmt}", fmt)
                for name, draw in _plan(data)]


def _plan(data: PlotData) -> list[tuple[str, Callable[[], Any]]]:
    """The plots the data supports, by file name (without the extension), each drawn
    only when its turn comes."""
    src, mpl = data.source, data.mpl
    plan: list[tuple[str, Callable[[], Any]]] = []
    if src.kind == "study" and any(k in src.metric_columns for k, *_ in AGGREGATE):
        plan.append(("aggregate", lambda: aggregate_figure(src, mpl)))
    if src.kind == "study" and any(_kept_share(r.summary) is not None for r in src.runs):
        plan.append(("tradeoff", lambda: tradeoff_figure(src, mpl)))
    if data.series:
        plan.append(("weekly", lambda: weekly_figure(src, mpl)))
    if src.kind == "run" and has_sla_windows(src.runs[0].summary):
        plan.append(("sla", lambda: sla_figure(src.runs[0], mpl)))
    for log in src.logs:
        series = [s for s in data.series if s.entry.log == log]
        name = "activity" if src.kind == "run" else f"activity-{_safe(log)}"
        plan.append((name, lambda series=series: activity_figure(src, series, mpl)))
    for s in data.series:
        if s.power is not None:
            name = "power" if src.kind == "run" else f"power-{_safe(s.entry.run_id)}"
            plan.append((name, lambda s=s: power_figure(src, s, mpl)))
    if src.predict is not None and src.predict["weekly"]:
        plan.append(("predictor-error", lambda: predict_figure(src.predict, mpl)))
    return plan


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", text).strip("_") or "run"
