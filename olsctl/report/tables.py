"""The tables ``olsctl report`` prints (rich): a study's whole-run figures per log and
scheme, a run's controller figures, and a predictor report's errors by week.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.table import Table

from olsctl.report.reading import ReportError, Source, _is_number, log_name
from olsctl.terminal import _f, _pct, run_summary_table

#: study table: results.csv column, heading, scale, digits (None: a percentage)
STUDY_FIGURES = (("mean_bsld", "mean bsld", 1.0, 2), ("mean_wait_s", "wait h", 1 / 3600, 2),
                 ("utilization", "util", 1.0, 3), ("processor_savings", "savings", 1.0, None),
                 ("energy_j", "energy MWh", 1 / 3.6e9, 2), ("csr", "CSR", 1.0, None),
                 ("sla_windows_kept_share", "SLA kept", 1.0, None))


def report_tables(source: Source) -> list[Table]:
    """The tables ``olsctl report`` prints for ``source``."""
    tables = []
    if source.kind == "study":
        tables.append(study_table(source))
    elif source.kind == "run":
        summary = source.runs[0].summary
        try:
            tables.append(run_summary_table(summary))
            extra = run_extra_table(summary)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ReportError(f"{source.path / 'summary.json'}: not an olsctl summary "
                              f"(missing or bad {exc})") from None
        if extra is not None:
            tables.append(extra)
    if source.predict is not None:
        tables.append(predict_table(source.predict))
    return tables


def study_table(source: Source) -> Table:
    """Per log and scheme: the main whole-run figures of results.csv."""
    others = [c for c in source.grid if c != "trace"]
    shown = [f for f in STUDY_FIGURES if f[0] in source.metric_columns]
    caption = f"{len(source.runs)} runs from {source.path / 'results.csv'}"
    if source.failed:
        caption += f"; {source.failed} failed (failed.csv)"
    table = Table(title=f"olsctl report: {source.path}", title_justify="left",
                  caption=caption, caption_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False)
    table.add_column("log", no_wrap=True)
    for col in others:
        table.add_column(col, overflow="fold")
    for _key, head, _scale, _digits in shown:
        table.add_column(head, justify="right", no_wrap=True)
    for i, log in enumerate(source.logs):
        group = [r for r in source.runs if r.log == log]
        for k, run in enumerate(group):
            cells = [_study_cell(run.results.get(key), scale, digits)
                     for key, _head, scale, digits in shown]
            table.add_row(log if k == 0 else "", *run.labels, *cells,
                          end_section=k == len(group) - 1 and i < len(source.logs) - 1)
    return table


def _study_cell(value: float | None, scale: float, digits: int | None) -> str:
    if value is None:
        return "-"
    return _pct(value) if digits is None else f"{value * scale:,.{digits}f}"


def run_extra_table(summary: dict) -> Table | None:
    """A run's controller figures, or None without a controller (its power figures are
    rows of the summary table)."""
    c = summary.get("controller")
    if not isinstance(c, dict):
        return None
    table = Table(title="controller", show_header=False, title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("value", justify="right")
    fb = c.get("feedback")
    missed = "limit misses" if isinstance(fb, dict) else "SLA misses"
    table.add_row(f"controller ticks / {missed}", f"{c.get('ticks', 0):,} / "
                                                  f"{c.get('sla_misses', 0):,}")
    if isinstance(fb, dict):
        table.add_row("SLA feedback: ticks tightened / mean limit",
                      f"{fb.get('tightened_ticks', 0):,} / {_f(_num(fb.get('mean_limit')), 1)}")
    table.add_row("setting changes", f"{c.get('changes', 0):,}")
    table.add_row("mean active processors",
                  _f(summary["metrics"].get("mean_active_procs"), 1))
    return table


def _num(x: Any) -> float:
    return float(x) if _is_number(x) else float("nan")


def predict_table(report: dict) -> Table:
    """Mean absolute error of each predictor per week (W per processor)."""
    names = list(report["overall_mae_w"])
    shares = all(_is_number(w.get("learned_share")) for w in report["weekly"])
    table = Table(title=f"job power predictors on {log_name(str(report.get('trace', '?')))}: "
                        f"mean absolute error (W per processor) by week", title_justify="left",
                  caption="learned: share of the week's jobs the learner predicts from a "
                          "learned profile" if shares else None, caption_justify="left")
    table.add_column("week", justify="right")
    table.add_column("jobs", justify="right")
    if shares:
        table.add_column("learned", justify="right")
    for name in names:
        table.add_column(name, justify="right")
    for row in report["weekly"]:
        learned = [_pct(row["learned_share"])] if shares else []
        table.add_row(str(int(row["week"])), f"{int(row['jobs']):,}", *learned,
                      *(f"{row[n]:.1f}" for n in names))
    table.add_row("all", "", *([""] if shares else []),
                  *(_f(report["overall_mae_w"][n], 1) for n in names), style="bold")
    return table
