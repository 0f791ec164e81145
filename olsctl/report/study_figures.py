"""The plots that compare the runs of a study: whole-run metrics per log and scheme
(``aggregate``) and the savings against the SLA windows kept (``tradeoff``, with the fixed
settings that runs with a controller are compared with in hindsight drawn as curves).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

import numpy as np

from olsctl.report.drawing import (_budget_saved, _color, _energy_j, _figure, _kept_share,
                                   _name, _number_text, _processor_savings, _sla_words)
from olsctl.report.hindsight import (BUDGET, PROCESSORS, Fixed, HindsightRun, compare,
                                     setting_axes)
from olsctl.report.reading import RunEntry, Source

#: bar panels: results.csv column, axis label, scale, bar label format
AGGREGATE = (("mean_bsld", "mean bounded slowdown (ratio, 1 = no wait)", 1.0, "{:.1f}"),
             ("utilization", "utilization (% of processors)", 100.0, "{:.1f}"),
             ("processor_savings", "processor savings (% of processors)", 100.0, "{:.1f}"))


def aggregate_figure(source: Source, mpl: SimpleNamespace) -> Any:
    """Lawson & Smirni's Fig. 1: one panel per figure, bars per log, one bar per scheme."""
    panels = [p for p in AGGREGATE if p[0] in source.metric_columns]
    logs, variants = source.logs, source.variants
    fig = _figure(mpl, min(20.0, 2.0 + len(panels) * max(3.2, 0.3 * len(logs) * len(variants))),
                  4.5)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    width = 0.8 / len(variants)
    x = np.arange(len(logs))
    for ax, (key, label, scale, fmt) in zip(axes, panels):
        for j, variant in enumerate(variants):
            values = [_value(source, log, variant, key) for log in logs]
            heights = [np.nan if v is None else v * scale for v in values]
            bars = ax.bar(x - 0.4 + width * (j + 0.5), heights, width, label=variant,
                          color=_color(source, variant))
            ax.bar_label(bars, labels=["" if np.isnan(h) else fmt.format(h) for h in heights],
                         fontsize=7, padding=2, rotation=90 if len(variants) > 3 else 0)
        ax.set_xticks(x, logs)
        ax.set_xlabel("log")
        ax.set_ylabel(label)
        ax.set_title(label.split(" (")[0])
        ax.margins(y=0.2)
        ax.grid(axis="x", visible=False)
    others = [c for c in source.grid if c != "trace"] or ["scheme"]
    axes[-1].legend(title=", ".join(others), loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(f"{_name(source)}: whole-run metrics per log and scheme")
    return fig


def _value(source: Source, log: str, variant: str, key: str) -> float | None:
    for run in source.runs:
        if run.log == log and run.variant == variant:
            return (run.results or {}).get(key)
    return None


#: one marker per scheme in the trade-off plot
MARKERS = "osD^vP*X<>hp"


def tradeoff_figure(source: Source, mpl: SimpleNamespace) -> Any:
    """What keeping the SLA costs, per log of a study (one column each): for every run
    with summary.json ``sla``, the share of its SLA windows that kept the SLA (x) against
    what it saved (y): processors, the power budget (1 - time-mean cap in force / machine
    peak) for runs whose cap moves, and with power the energy relative to the log's run
    that saved least. One colour per scheme; when a grid key holds numbers (an SLA
    level, say), each scheme's runs are joined in its order and labelled with it. The
    fixed runs that runs with a controller are compared with in hindsight
    (:mod:`olsctl.report.hindsight`) are not schemes: each group of them is one black
    dashed curve (its fixed machines in the processors row, its fixed caps in the budget
    row), each point labelled with its setting."""
    fixed = _hindsight_fixed(source)
    runs = [r for r in source.runs if _kept_share(r.summary) is not None
            and r.run_id not in fixed]
    others = [c for c in source.grid if c != "trace"]
    level = next((i for i in range(len(others))
                  if all(len(r.labels) > i and _number_text(r.labels[i]) for r in runs)), None)

    def scheme(r: RunEntry) -> str:
        rest = [lab for i, lab in enumerate(r.labels) if i != level]
        return ", ".join(rest) if rest else r.variant

    schemes = list(dict.fromkeys(scheme(r) for r in runs))
    rows = [("processor savings (% of processors)", _processor_savings)]
    if any(_budget_saved(r.summary) is not None for r in runs):
        rows.append(("power budget saved (% of peak)", _budget_saved))
    energy_rows = any(_energy_j(r.summary) is not None for r in runs)
    logs = [log for log in source.logs if any(r.log == log for r in runs)
            or any(f[1].run.log == log for f in fixed.values())]
    n_rows = len(rows) + (1 if energy_rows else 0)
    fig = _figure(mpl, 1.0 + 3.6 * len(logs) + 2.6, 0.6 + 2.9 * n_rows)
    axes = fig.subplots(n_rows, len(logs), squeeze=False, sharex="col")
    for col, log in enumerate(logs):
        here = [r for r in runs if r.log == log]
        series = rows + ([_energy_row(here)] if energy_rows else [])
        for row, (label, value) in enumerate(series):
            ax = axes[row][col]
            family = (PROCESSORS if row == 0 else BUDGET if row < len(rows) else None)
            _fixed_curves(ax, [f for f in fixed.values() if f[1].run.log == log], family,
                          value)
            for k, name in enumerate(schemes):
                pts = [r for r in here if scheme(r) == name]
                _tradeoff_line(ax, pts, value, level, f"C{k % 10}", name, len(schemes))
            ax.grid(True, alpha=0.3)
            if col == 0:
                ax.set_ylabel(label, fontsize=8)
            if row == 0:
                ax.set_title(log)
            if row == n_rows - 1:
                ax.set_xlabel("SLA windows kept (%)")
    handles = [mpl.Line2D([], [], marker="o", color=f"C{k % 10}", label=name)
               for k, name in enumerate(schemes)]
    if fixed:
        handles.append(mpl.Line2D([], [], marker="s", color=FIXED_COLOR, linestyle="--",
                                  label="fixed settings (hindsight)"))
    rest = [c for i, c in enumerate(others) if i != level] or ["scheme"]
    title = ", ".join(rest) + (f" (points: {others[level]})" if level is not None else "")
    fig.legend(handles=handles, loc="outside right center", title=title, fontsize=8)
    slas = sorted({_sla_words(r.summary) for r in runs})
    what = slas[0] if len(slas) == 1 else "each run judged by its own SLA"
    fig.suptitle(f"{_name(source)}: savings against the SLA windows kept ({what})",
                 fontsize=10)
    return fig


def _energy_row(here: list[RunEntry]) -> tuple[str, Callable[[dict], float | None]]:
    """The trade-off plot's energy row for one log's runs ``here``: each run's energy
    relative to the log's run that saved least (first on ties)."""
    ref = None
    powered = [r for r in here if _energy_j(r.summary) is not None]
    if powered:
        ref = min(powered, key=lambda r: (_processor_savings(r.summary),
                                          _budget_saved(r.summary) or 0.0))

    def relative(sm: dict) -> float | None:
        if ref is not None and _energy_j(sm) is not None:
            return 100.0 * _energy_j(sm) / _energy_j(ref.summary)
        return None

    return "energy (% of the log's run that saves least)", relative


def _tradeoff_line(ax: Any, pts: list[RunEntry], value: Callable[[dict], float | None],
                   level: int | None, color: str, name: str, n_schemes: int) -> None:
    """One scheme's runs ``pts`` in a trade-off panel: the share of SLA windows kept (x,
    %) against ``value`` of its summary (runs without one left out), joined in the order
    of grid key ``level`` and each point labelled with it (unless the panel would hold
    over 40 labels, counted as ``n_schemes`` x this scheme's points)."""
    if level is not None:
        pts = sorted(pts, key=lambda r: float(r.labels[level]))
    xy = [(100 * _kept_share(r.summary), value(r.summary), r) for r in pts]
    xy = [(x, y, r) for x, y, r in xy if y is not None]
    if not xy:
        return
    ax.plot([x for x, _, _ in xy], [y for _, y, _ in xy], marker="o",
            markersize=5, linewidth=1.0, color=color, label=name)
    if level is not None and n_schemes * len(xy) <= 40:
        for x, y, r in xy:
            ax.annotate(r.labels[level], (x, y), textcoords="offset points",
                        xytext=(3, 3), fontsize=7, color=color)


#: the colour of the fixed settings' curves in the trade-off plot
FIXED_COLOR = "black"


def _hindsight_fixed(source: Source) -> dict[str, tuple[tuple[str, ...], Fixed]]:
    """The fixed runs some run with a controller is compared with, by run id: the labels
    of their group (the grid entries that are not setting axes) and the comparison's
    view of them (savings against the log's largest machine)."""
    runs = [HindsightRun(i, r.labels, r.log, r.summary) for i, r in enumerate(source.runs)]
    ids = {i: r.run_id for i, r in enumerate(source.runs)}
    axes = setting_axes(runs)
    out: dict[str, tuple[tuple[str, ...], Fixed]] = {}
    for comparison in compare(runs):
        for f in comparison.candidates:
            group = tuple(lab for i, lab in enumerate(f.run.labels) if i not in axes)
            out[ids[f.run.index]] = (group, f)
    return out


def _fixed_curves(ax: Any, fixed: list[tuple[tuple[str, ...], Fixed]], family: str | None,
                  value: Callable[[dict], float | None]) -> None:
    """Each group's fixed runs in one panel as a black dashed curve through (share of
    windows kept, savings) in the order of their savings, each point labelled with its
    setting: fixed machines (not capped) on the processors row, fixed caps on all
    processors on the budget row, every fixed run on the energy row (``family`` None,
    ``value`` of its summary)."""
    groups: dict[tuple[str, ...], list[tuple[float, float, str]]] = {}
    for group, f in fixed:
        if family == PROCESSORS and f.budget_saved is not None \
                and f.budget_saved > f.procs_saved + 1e-12:
            continue
        if family == BUDGET and (f.budget_saved is None or f.procs_saved > 1e-12):
            continue
        y = (100 * f.procs_saved if family == PROCESSORS else
             100 * f.budget_saved if family == BUDGET else value(f.run.summary))
        if y is not None:
            groups.setdefault(group, []).append((100 * f.kept, y, f.setting))
    for points in groups.values():
        points.sort(key=lambda p: (p[1], p[0]))
        ax.plot([x for x, _, _ in points], [y for _, y, _ in points], marker="s",
                markersize=4, linewidth=1.0, linestyle="--", color=FIXED_COLOR,
                label="fixed settings")
        if len(points) <= 12:
            for x, y, text in points:
                ax.annotate(text.split(" (")[-1].rstrip(")") if "procs (" in text else text,
                            (x, y), textcoords="offset points", xytext=(3, -9), fontsize=6,
                            color=FIXED_COLOR)
