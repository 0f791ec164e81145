"""The tables ``olsctl report`` prints (rich): a study's whole-run figures per log and
scheme (and, when it holds runs with and without a controller, the best fixed setting in
hindsight beside each adaptive run), a run's controller figures, and a predictor report's
errors by week.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from olsctl.fitted_table import Column, FittedTable
from olsctl.report.hindsight import HindsightRun, hindsight_table
from olsctl.report.reading import (ReportError, RunEntry, Source, _is_number, intervals_over_cap,
                                   log_name)
from olsctl.terminal import (CSR_NOTE, NARROW_FIRST, _f, _pct, csr_text, over_cap_text,
                             run_summary_table)

#: study table: results.csv column, heading, scale, digits (None: a percentage)
STUDY_FIGURES = (("mean_bsld", "mean bsld", 1.0, 2), ("mean_wait_s", "wait h", 1 / 3600, 2),
                 ("utilization", "util", 1.0, 3), ("processor_savings", "savings", 1.0, None),
                 ("energy_j", "energy MWh", 1 / 3.6e9, 2), ("csr", "CSR", 1.0, None),
                 ("sla_windows_kept_share", "SLA kept", 1.0, None))


def report_tables(source: Source) -> list[Table | FittedTable]:
    """The tables ``olsctl report`` prints for ``source``."""
    tables = []
    if source.kind == "study":
        tables.append(study_table(source))
        hindsight = source_hindsight_table(source)
        if hindsight is not None:
            tables.append(hindsight)
    elif source.kind == "run":
        run = source.runs[0]
        summary = run.summary
        over = intervals_over_cap(run.path, summary)
        try:
            tables.append(run_summary_table(summary, over))
            extra = run_extra_table(summary)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ReportError(f"{source.path / 'summary.json'}: not an olsctl summary "
                              f"(missing or bad {exc})") from None
        if extra is not None:
            tables.append(extra)
    if source.predict is not None:
        tables.append(predict_table(source.predict))
    return tables


def study_table(source: Source) -> FittedTable:
    """Per log and scheme: the main whole-run figures of results.csv (the log, the grid
    labels and the CSR's intervals over the cap always shown whole)."""
    others = [c for c in source.grid if c != "trace"]
    shown = [f for f in STUDY_FIGURES if f[0] in source.metric_columns]
    caption = f"{len(source.runs)} runs from {source.path / 'results.csv'}"
    if source.failed:
        caption += f"; {source.failed} failed (failed.csv)"
    columns = (Column("log", key=True), *(Column(col, key=True) for col in others),
               *(Column(head, justify="right", rank=NARROW_FIRST.index(key),
                        note=CSR_NOTE if key == "csr" else "")
                 for key, head, _s, _d in shown))
    table = FittedTable(f"olsctl report: {source.path}", caption, columns, grouped=1)
    for i, log in enumerate(source.logs):
        group = [r for r in source.runs if r.log == log]
        for k, run in enumerate(group):
            cells = [_study_cell(run, key, scale, digits) for key, _head, scale, digits in shown]
            table.add_row(log, *run.labels, *cells,
                          end_section=k == len(group) - 1 and i < len(source.logs) - 1)
    return table


def source_hindsight_table(source: Source) -> FittedTable | None:
    """The hindsight table of a study's runs (:mod:`olsctl.report.hindsight`), or None."""
    columns = [c for c in source.grid if c != "trace"]
    runs = [HindsightRun(i, r.labels, r.log, r.summary) for i, r in enumerate(source.runs)]
    return hindsight_table(columns, runs)


def _study_cell(run: RunEntry, key: str, scale: float, digits: int | None) -> str:
    """A figure of ``run``'s results.csv row; the CSR with its intervals over the cap."""
    value = run.results.get(key)
    if value is None:
        return "-"
    if key == "csr":
        return csr_text(value) + over_cap_text(intervals_over_cap(run.path, run.summary))
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


def predict_table(report: dict) -> FittedTable:
    """Mean absolute error of each predictor per week (W per processor)."""
    names = list(report["overall_mae_w"])
    shares = all(_is_number(w.get("learned_share")) for w in report["weekly"])
    columns = (Column("week", key=True, justify="right"), Column("jobs", justify="right"),
               *([Column("learned", justify="right")] if shares else []),
               *(Column(name, justify="right") for name in names))
    table = FittedTable(f"job power predictors on {log_name(str(report.get('trace', '?')))}: "
                        f"mean absolute error (W per processor) by week",
                        "learned: share of the week's jobs the learner predicts from a "
                        "learned profile" if shares else "", columns)
    weeks = report["weekly"]
    for i, row in enumerate(weeks):
        learned = [_pct(row["learned_share"])] if shares else []
        table.add_row(str(int(row["week"])), f"{int(row['jobs']):,}", *learned,
                      *(f"{row[n]:.1f}" for n in names), end_section=i == len(weeks) - 1)
    table.add_row("all", "", *([""] if shares else []),
                  *(_f(report["overall_mae_w"][n], 1) for n in names))
    return table
