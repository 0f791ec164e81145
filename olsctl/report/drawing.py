"""What every plot shares: the matplotlib pieces (imported only when there, drawn on
the Agg canvas, no pyplot and no global backend), figure and axis helpers, saving without
date or version stamps, and the SLA and savings figures the plots read from a run's
summary.json.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from olsctl.report.reading import ROW_FIGURES, Source, _is_number, _section
from olsctl.terminal import sla_window_text

RC = {"svg.hashsalt": "olsctl", "font.size": 9, "axes.titlesize": 10, "axes.grid": True,
      "grid.alpha": 0.3, "legend.fontsize": 8}


def _matplotlib() -> SimpleNamespace | None:
    """The matplotlib pieces the plots use, or None when matplotlib is not installed."""
    try:
        import matplotlib
        import matplotlib.dates as mdates
        import matplotlib.ticker as mticker
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D
    except ImportError:
        return None
    return SimpleNamespace(matplotlib=matplotlib, dates=mdates, ticker=mticker,
                           Figure=Figure, Canvas=FigureCanvasAgg, Line2D=Line2D)


def _save(fig: Any, path: Path, fmt: str) -> Path:
    """Save with no date or version stamp, via a temporary file and a rename."""
    metadata = {"Software": None} if fmt == "png" else {"Date": None}
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        fig.savefig(tmp, format=fmt, metadata=metadata)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def _figure(mpl: SimpleNamespace, width_in: float, height_in: float) -> Any:
    fig = mpl.Figure(figsize=(width_in, height_in), dpi=100, layout="constrained")
    mpl.Canvas(fig)
    return fig


def _log_axis(axis: Any, mpl: SimpleNamespace, values: np.ndarray) -> None:
    """A log-scale axis labelled in plain numbers: 1, 2, 5, 10, 20, ... when ``values``
    span at most three decades, else 1, 10, 100, ..."""
    values = values[np.isfinite(values) & (values > 0)]
    wide = values.size > 0 and values.max() > 1000 * values.min()
    subs = (1.0,) if wide else (1.0, 2.0, 5.0)
    axis.set_major_locator(mpl.ticker.LogLocator(base=10, subs=subs))
    axis.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _pos: f"{v:,.10g}"))
    axis.set_minor_formatter(mpl.ticker.NullFormatter())


def _color(source: Source, variant: str) -> str:
    return f"C{source.variants.index(variant) % 10}"


def _name(source: Source) -> str:
    return source.path.resolve().name


def _sla(summary: dict) -> float | None:
    """The bound on the mean bounded slowdown a run is judged by: summary.json's ``sla``
    (in a summary from before it, the controller's), when its metric is mean_bsld."""
    sla = summary.get("sla")
    if not isinstance(sla, dict):
        sla = _section(summary, "controller").get("sla") or {}
    return float(sla["max"]) if sla.get("metric", "mean_bsld") == "mean_bsld" and \
        _is_number(sla.get("max")) else None


def _kept_share(summary: dict) -> float | None:
    """The share of a run's SLA windows (with jobs) that kept its SLA, if known."""
    sla = summary.get("sla")
    return float(sla["kept_share"]) if isinstance(sla, dict) and \
        _is_number(sla.get("kept_share")) else None


def has_sla_windows(summary: dict) -> bool:
    """Whether a run's summary.json has its SLA and window rows with every figure the
    ``sla`` plot draws (summaries from before the SLA windows do not)."""
    rows = summary["weekly"]
    return isinstance(summary.get("sla"), dict) and bool(rows) and all(
        "sla_kept" in w and all(k in w for k in ROW_FIGURES) for w in rows)


def _sla_words(summary: dict) -> str:
    """``mean_bsld <= 200 per calendar week``."""
    sla = summary["sla"]
    dated = any(w.get("week_start") for w in summary["weekly"])
    return (f"{sla['metric']} <= {float(sla['max']):g} "
            f"{sla_window_text(float(sla['window_s']), dated)}")


def _number_text(text: str) -> bool:
    try:
        float(text)
    except (TypeError, ValueError):
        return False
    return True


def _processor_savings(summary: dict) -> float:
    return 100.0 * float(summary["metrics"].get("processor_savings") or 0.0)


def _energy_j(summary: dict) -> float | None:
    power = summary.get("power")
    value = power.get("energy_j") if isinstance(power, dict) else None
    return float(value) if _is_number(value) else None


def _budget_saved(summary: dict) -> float | None:
    """1 - the time-mean cap in force / the machine's peak power (%), for a run whose
    controller chooses the cap; None otherwise."""
    power, config = summary.get("power"), summary.get("config")
    controller = config.get("controller") if isinstance(config, dict) else None
    if not (isinstance(power, dict) and _is_number(power.get("mean_cap_w"))
            and isinstance(controller, dict)
            and "power_cap" in (controller.get("candidates") or {})):
        return None
    peak = float(summary["metrics"]["processors"]) * float(config["power"]["peak_w"])
    return 100.0 * (1.0 - float(power["mean_cap_w"]) / peak) if peak > 0 else None
