"""The plots of runs over time: per calendar week (``weekly``), per SLA window
(``sla``), processors and the bounded-slowdown ECDF (``activity``), machine power against
the cap (``power``), and predictors' errors by week (``predictor-error``).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from olsctl.metrics import WEEK_S
from olsctl.report.drawing import (_color, _figure, _kept_share, _log_axis, _name, _sla,
                                   _sla_words)
from olsctl.report.reading import RunEntry, Source, _is_number, _section, log_name
from olsctl.report.reductions import RunSeries, _duration
from olsctl.terminal import _f, _pct, csr_text


def weekly_figure(source: Source, mpl: SimpleNamespace) -> Any:
    """Lawson & Smirni's Fig. 2: mean bounded slowdown (log scale) and utilization per
    calendar week; one column per log, one line per scheme, the SLA dashed."""
    logs = source.logs
    fig = _figure(mpl, min(20.0, max(7.0, 4.8 * len(logs))), 6.0)
    axes = fig.subplots(2, len(logs), squeeze=False, sharex="col")
    lengths = {float(r.summary["sla"]["window_s"]) for r in source.runs
               if isinstance(r.summary.get("sla"), dict)}
    in_weeks = lengths <= {WEEK_S}  # the rows are weeks (or a summary from before)
    bounds = sorted({_sla(r.summary) for r in source.runs} - {None})
    styles = {bound: _sla_style(i) for i, bound in enumerate(bounds)}
    for col, log in enumerate(logs):
        _weekly_column(axes[0][col], axes[1][col], source, log, in_weeks, mpl, styles)
    # one legend for all columns, below them, so no curve is hidden under it
    handles: dict[str, Any] = {}
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    if handles:
        _legend_below(fig, list(handles.values()), list(handles))
    fig.suptitle(f"{_name(source)}: {'weekly' if in_weeks else 'per SLA window'} transient "
                 f"metrics")
    return fig


#: dash patterns and greys of the SLA lines of the weekly plot (15 distinct pairs)
SLA_DASHES = ("--", ":", "-.", (0, (6, 2, 1, 2, 1, 2)), (0, (10, 3)))
SLA_GREYS = ("0.1", "0.45", "0.65")


def _sla_style(i: int) -> dict:
    """The line style of the ``i``-th SLA bound of a weekly plot."""
    return {"linestyle": SLA_DASHES[i % len(SLA_DASHES)], "color": SLA_GREYS[i % len(SLA_GREYS)]}


def _weekly_column(top: Any, bottom: Any, source: Source, log: str, in_weeks: bool,
                   mpl: SimpleNamespace, styles: dict[float, dict]) -> None:
    """One log's column of :func:`weekly_figure`: its runs' mean bounded slowdown per
    week (or SLA window) above, each SLA bound in its ``styles``, their utilization
    below."""
    unit = "week" if in_weeks else "SLA window"
    runs = [r for r in source.runs if r.log == log]
    dated = all(w.get("week_start") for r in runs for w in r.summary["weekly"])
    for run in runs:
        weeks = run.summary["weekly"]
        x = (np.array([w["week_start"] for w in weeks], dtype="datetime64[D]") if dated
             else np.array([w["week"] for w in weeks], dtype=float))
        label = run.variant if source.kind == "study" else None
        for ax, key, scale in ((top, "mean_bsld", 1.0), (bottom, "utilization", 100.0)):
            y = np.array([np.nan if w[key] is None else w[key] * scale for w in weeks])
            ax.plot(x, y, marker="o", markersize=2.5, linewidth=1.0, label=label,
                    color=_color(source, run.variant))
    for sla in sorted({_sla(r.summary) for r in runs} - {None}):
        top.axhline(sla, linewidth=1.2, label=f"SLA: mean_bsld <= {sla:g}", **styles[sla])
    top.set_yscale("log")
    _log_axis(top.yaxis, mpl, np.asarray([w["mean_bsld"] for r in runs
                                          for w in r.summary["weekly"]
                                          if w["mean_bsld"] is not None], dtype=float))
    bottom.set_ylim(0, 102)
    top.set_ylabel("mean bounded slowdown (log scale)")
    top.set_title(f"{log}: mean bounded slowdown of the {unit}'s jobs")
    bottom.set_ylabel("utilization (% of processors)")
    bottom.set_title(f"{log}: utilization per {unit}")
    bottom.set_xlabel((f"calendar {unit}" if in_weeks else unit) + " (start date)" if dated
                      else f"{unit} since the first submission")
    _time_axis(bottom, mpl, dated)


def _time_axis(ax: Any, mpl: SimpleNamespace, dated: bool) -> None:
    """Ticks of an x axis of dates (``dated``), else of whole numbers (weeks, windows)."""
    if dated:
        locator = mpl.dates.AutoDateLocator()
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mpl.dates.ConciseDateFormatter(locator))
    else:
        ax.xaxis.set_major_locator(mpl.ticker.MaxNLocator(integer=True))


def _legend_below(fig: Any, handles: list, labels: list[str], max_cols: int = 7) -> Any:
    """A figure legend below the panels, in as many columns (up to ``max_cols``) as fit
    the figure's width, measured with the figure's own fonts; a legend wider than the
    figure even in one column widens the figure."""
    renderer = fig.canvas.get_renderer()
    room_in = fig.get_figwidth() - 0.2  # the legend's frame and the figure's padding
    ncols = max(1, min(len(labels), max_cols))
    while True:
        legend = fig.legend(handles, labels, loc="outside lower center", ncols=ncols)
        width_in = legend.get_window_extent(renderer).width / fig.dpi
        if width_in <= room_in or ncols == 1:
            break
        legend.remove()
        ncols -= 1
    if width_in > room_in:
        fig.set_figwidth(width_in + 0.2)
    return legend


def sla_figure(entry: RunEntry, mpl: SimpleNamespace) -> Any:
    """One run's SLA windows: the window's mean and 95th-percentile bounded slowdown (log
    scale; mean and max wait for a wait SLA) against the SLA bound, the windows that broke
    it shaded and crossed; below, the mean active and busy processors per window and the
    machine size."""
    summary, rows = entry.summary, entry.summary["weekly"]
    sla = summary["sla"]
    dated = all(w.get("week_start") for w in rows)
    if dated:  # window starts as dates (a whole number of days long), drawn at mid-window
        start = np.array([w["week_start"] for w in rows], dtype="datetime64[D]").astype(
            "datetime64[s]")
        width = np.timedelta64(int(float(sla["window_s"])), "s")
        x, edges = start + width // 2, (start, start + width)
    else:  # windows since the first: the origin is the first window's start
        index = np.array([w["week"] for w in rows], dtype=float)
        x, edges = index + 0.5, (index, index + 1.0)
    broken = [i for i, w in enumerate(rows) if w.get("sla_kept") is False]
    fig = _figure(mpl, 11.0, 6.5)
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=[3, 2])
    _sla_panel(top, mpl, rows, sla, x, edges, broken)
    _window_procs_panel(bottom, rows, summary["metrics"]["processors"], x, edges, broken)
    _time_axis(bottom, mpl, dated)
    bottom.set_xlabel("window (start date)" if dated else "window (number, 0: the first)")
    n, kept = int(sla["windows"]), int(sla["windows_kept"])
    fig.suptitle(f"{entry.log}: SLA {_sla_words(summary)}: {kept:,} of {n:,} windows with "
                 f"jobs kept ({_pct(_kept_share(summary))})")
    return fig


def _window_column(rows: list[dict], key: str, factor: float = 1.0) -> np.ndarray:
    """``key`` of every SLA window row, times ``factor`` (NaN where missing)."""
    return np.array([np.nan if w.get(key) is None else w[key] * factor for w in rows],
                    dtype=float)


def _sla_panel(top: Any, mpl: SimpleNamespace, rows: list[dict], sla: dict, x: np.ndarray,
               edges: tuple, broken: list[int]) -> None:
    """The top of :func:`sla_figure`: the windows' slowdowns (or waits, hours) against
    the SLA bound, the ``broken`` windows shaded and their metric crossed."""
    metric = str(sla["metric"])
    wait = metric.endswith("_s")
    series = ((("mean_wait_s", "mean wait"), ("max_wait_s", "max wait")) if wait
              else (("mean_bsld", "mean bounded slowdown"), ("p95_bsld", "p95 bounded "
                                                                         "slowdown")))
    scale = 1 / 3600 if wait else 1.0
    for (key, label), color in zip(series, ("C0", "C1")):
        top.plot(x, _window_column(rows, key, scale), marker="o", markersize=3, linewidth=1.0,
                 color=color, label=f"{label} of the window's jobs")
    limit = float(sla["max"]) * scale
    top.axhline(limit, color="0.2", linestyle="--", linewidth=1.2,
                label=f"SLA: {metric} <= {float(sla['max']):g}")
    for k, i in enumerate(broken):
        top.axvspan(edges[0][i], edges[1][i], color="C3", alpha=0.12, linewidth=0,
                    label=None if k else "window that broke the SLA")
    if broken:
        values = _window_column(rows, metric, scale)
        top.plot(x[broken], values[broken], linestyle="none", marker="x", markersize=7,
                 color="C3", label=f"{metric} of a window that broke it")
    if wait:
        top.set_ylabel("wait (hours)")
        top.set_ylim(bottom=0)
    else:
        top.set_yscale("log")
        shown = np.concatenate([_window_column(rows, k) for k, _ in series]
                               + [np.array([limit])])
        _log_axis(top.yaxis, mpl, shown)
        top.set_ylabel("bounded slowdown (log scale)")
    top.set_title("the SLA per window: its jobs' " + ("waits" if wait else "slowdown"))
    top.legend(loc="upper left", ncols=3)
    top.margins(y=0.25 if wait else 0.1)
    if not wait:  # room above the curves for the legend, on the log scale
        lo, hi = top.get_ylim()
        top.set_ylim(lo, hi * (hi / lo) ** 0.35)


def _window_procs_panel(bottom: Any, rows: list[dict], procs: int, x: np.ndarray,
                        edges: tuple, broken: list[int]) -> None:
    """The bottom of :func:`sla_figure`: mean active and busy processors per window
    against the machine's ``procs``, the ``broken`` windows shaded."""
    bottom.plot(x, _window_column(rows, "mean_active_procs"), marker="o", markersize=3,
                linewidth=1.0, color="C0", label="mean active processors")
    bottom.plot(x, _window_column(rows, "utilization", procs), marker=".", markersize=3,
                linewidth=0.8, color="0.5",
                label="mean busy processors (utilization x processors)")
    bottom.axhline(procs, color="0.2", linestyle=":", linewidth=1.0,
                   label=f"machine ({procs:,})")
    for i in broken:
        bottom.axvspan(edges[0][i], edges[1][i], color="C3", alpha=0.12, linewidth=0)
    bottom.set_ylim(0, procs * 1.3)
    bottom.set_xlim(edges[0][0], edges[1][-1])  # whole windows, first to last
    bottom.set_ylabel("processors")
    bottom.set_title("processors per window")
    bottom.legend(loc="upper left", ncols=3)


def activity_figure(source: Source, series: list[RunSeries], mpl: SimpleNamespace) -> Any:
    """Lawson & Smirni's Fig. 3 for one log: active and busy processors over time (one
    panel per run whose active count changes; every run of a single-run report) and the
    bounded-slowdown ECDF of every run."""
    shown = series if source.kind == "run" else [s for s in series if s.active_varies]
    rows = max(1, len(shown))
    fig = _figure(mpl, 12.0 if shown else 6.0, max(4.0, 2.2 * rows))
    grid = fig.add_gridspec(rows, 2 if shown else 1, width_ratios=[1.6, 1] if shown else None)
    first = None
    for i, s in enumerate(shown):
        ax = fig.add_subplot(grid[i, 0], sharex=first)
        first = first or ax
        _activity_panel(ax, s, source.kind == "run")
        if i == rows - 1:
            ax.set_xlabel("time (days since the first submission)")
    ecdf = fig.add_subplot(grid[:, 1] if shown else grid[0, 0])
    for s in series:
        x, y = s.ecdf
        mean = s.entry.summary["metrics"]["mean_bsld"]
        label = f"{s.entry.variant} (mean {mean:,.1f})"
        ecdf.plot(x, y, drawstyle="steps-post", linewidth=1.2, label=label,
                  color=_color(source, s.entry.variant))
    ecdf.set_xscale("log")
    _log_axis(ecdf.xaxis, mpl, np.concatenate([s.ecdf[0] for s in series]))
    ecdf.set_ylim(0, 1.02)
    ecdf.set_xlabel("bounded slowdown (log scale)")
    ecdf.set_ylabel("share of jobs at or below")
    ecdf.set_title("bounded slowdown ECDF")
    ecdf.legend(loc="lower right")
    log = series[0].entry.log
    fig.suptitle(f"{log}: processors over time and bounded slowdown"
                 if shown else f"{log}: bounded slowdown (active processors never change)")
    return fig


def _activity_panel(ax: Any, s: RunSeries, single: bool) -> None:
    m = s.entry.summary["metrics"]
    per = "" if s.bin_h is None else f" (mean per {_duration(3600 * s.bin_h)})"
    ax.plot(*s.busy, drawstyle="steps-post", color="0.55", linewidth=0.7, label="busy" + per)
    ax.plot(*s.active, drawstyle="steps-post", color="C0", linewidth=1.2, label="active" + per)
    ax.axhline(m["processors"], color="0.2", linestyle=":", linewidth=1.0,
               label=f"machine ({m['processors']:,})")
    ax.set_ylim(0, m["processors"] * 1.3)
    ax.set_ylabel("processors")
    what = "active and busy processors" if single else s.entry.variant
    ax.set_title(f"{what}: mean active {m.get('mean_active_procs', m['processors']):,.1f}, "
                 f"savings {100 * m['processor_savings']:.1f}%")
    ax.legend(loc="upper left", ncols=3)


def power_figure(source: Source, s: RunSeries, mpl: SimpleNamespace) -> Any:
    """Wallace et al.'s Fig. 6/7: the machine's power over time against the cap."""
    p = s.power
    power = s.entry.summary.get("power") or {}
    fig = _figure(mpl, 11.0, 4.2)
    ax = fig.subplots()
    per = p["per"]
    ax.plot(p["x"], p["peak_kw"], drawstyle="steps-post", color="C1", linewidth=0.5,
            alpha=0.6, label=f"peak power (max per {per})")
    ax.plot(p["x"], p["mean_kw"], drawstyle="steps-post", color="C0", linewidth=0.9,
            label=f"mean power (mean per {per})")
    finite = np.isfinite(p["cap_kw"])
    if finite.any():
        _cap_line(ax, p, finite)
    if p.get("acted") is not None and p["acted"].any():  # the limit's throttled intervals
        ax.fill_between(p["x"][:-1], 0, 1, where=p["acted"] > 0, step="post", color="C3",
                        alpha=0.12, linewidth=0, transform=ax.get_xaxis_transform(),
                        label="limit throttled jobs")
    cfg = _section(s.entry.summary, "power")
    if _is_number(cfg.get("peak_w")):
        peak = s.entry.summary["metrics"]["processors"] * cfg["peak_w"] / 1e3
        ax.axhline(peak, color="0.2", linestyle=":", linewidth=1.0,
                   label=f"machine peak ({peak:,.0f} kW)")
        ax.set_ylim(0, peak * 1.25)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("time (days since the first submission)")
    ax.set_ylabel("machine power (kW)")
    csr = power.get("csr")
    what = s.entry.log + ("" if source.kind == "run" else f", {s.entry.variant}")
    cap = "no cap"
    if _is_number(csr) and finite.any():
        n = p["over"]
        cap = (f"capping success rate {csr_text(csr)}, {n:,} sampling "
               f"interval{'' if n == 1 else 's'} over the cap")
    title = f"{what}: machine power against the cap ({cap})"
    if power.get("limit") == "throttle" and _is_number(power.get("scheduler_csr")):
        n = p.get("acted_n")
        acted = "" if n is None else f" ({n:,} sampling interval{'' if n == 1 else 's'} " \
                                     f"throttled)"
        title += (f"\nthe power limit held it: scheduler's own CSR "
                  f"{csr_text(power['scheduler_csr'])}{acted}, jobs throttled "
                  f"{100 * power['throttled_time_share']:.1f}% of the time, "
                  f"{power['work_lost_proc_h']:,.0f} processor-h lost")
    ax.set_title(title)
    ax.legend(loc="upper left", ncols=4)
    return fig


def _cap_line(ax: Any, p: dict, finite: np.ndarray) -> None:
    """The cap in force as a step line: its changes, or (``cap_high_kw``) the lowest cap
    per chunk of samples with the range up to the highest shaded."""
    caps = np.unique(p["cap_kw"][finite])
    low = np.where(finite, p["cap_kw"], np.nan)
    if p.get("cap_high_kw") is None:
        label = f"cap ({caps[0]:,.1f} kW)" if caps.size == 1 else "cap in force"
        ax.plot(p["cap_x"], low, drawstyle="steps-post", color="C3", linestyle="--",
                linewidth=1.4, label=label)
        return
    high = np.where(np.isfinite(p["cap_high_kw"]), p["cap_high_kw"], np.nan)
    ax.fill_between(p["cap_x"], low, high, step="post", color="C3", alpha=0.15, linewidth=0,
                    label=f"cap in force: range per {p['cap_per']}")
    ax.plot(p["cap_x"], low, drawstyle="steps-post", color="C3", linewidth=1.0,
            label=f"cap in force: lowest per {p['cap_per']}")


def predict_figure(report: dict, mpl: SimpleNamespace) -> Any:
    """Each predictor's mean absolute error per week of job start, and the share of jobs
    the learner predicts from a learned profile."""
    weeks = report["weekly"]
    names = list(report["overall_mae_w"])
    shares = all(_is_number(w.get("learned_share")) for w in weeks)
    fig = _figure(mpl, 10.0, 6.0 if shares else 4.0)
    axes = fig.subplots(2 if shares else 1, 1, squeeze=False, sharex=True)[:, 0]
    x = np.array([w["week"] for w in weeks], dtype=float)
    for i, name in enumerate(names):
        axes[0].plot(x, [w[name] for w in weeks], marker="o", markersize=2.5, linewidth=1.0,
                     label=f"{name} (all weeks {_f(report['overall_mae_w'][name], 1)} W)",
                     color=f"C{i % 10}")
    axes[0].set_ylabel("mean absolute error (W per processor)")
    axes[0].set_title(f"{log_name(str(report.get('trace', '?')))}: error of the predicted "
                      f"mean job power, "
                      f"by week of job start")
    axes[0].set_ylim(bottom=0)
    axes[0].legend(loc="best")
    if shares:
        axes[1].plot(x, [100 * w["learned_share"] for w in weeks], marker="o",
                     markersize=2.5, linewidth=1.0, color="C4")
        axes[1].set_ylabel("jobs (%)")
        axes[1].set_ylim(0, 102)
        axes[1].set_title("jobs the learner predicts from a learned profile")
    axes[-1].set_xlabel("week since the first submission")
    axes[-1].xaxis.set_major_locator(mpl.ticker.MaxNLocator(integer=True))
    return fig
