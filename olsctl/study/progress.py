"""What the terminal shows of a study: its progress (a bar on a terminal, a line per
run otherwise, nothing when quiet) and the table of its runs, followed, when the grid
holds runs with and without a controller, by the best fixed setting in hindsight beside
each adaptive run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterator

from rich.console import Console, ConsoleOptions

from olsctl.fitted_table import Column, FittedTable
from olsctl.study.grid import CONTROLLER_METRICS, POWER_METRICS, Study
from olsctl.study.storage import Outcome, metric_values
from olsctl.terminal import CSR_NOTE, NARROW_FIRST, csr_text, over_cap_text


class StudyProgress:
    """Told about a study's progress; this one shows nothing."""

    def start(self, study: Study, todo: int, done: int, infeasible: int = 0) -> None:
        """``todo`` runs to compute now, ``done`` already finished, ``infeasible`` known
        to be infeasible (not run again)."""

    def advance(self, outcome: Outcome) -> None:
        """One run finished or failed."""

    def close(self) -> None:
        """The study stopped (finished or not)."""

    def say(self, text: str) -> None:
        """One line about a step before the runs (compiling the policy kernels)."""


NULL_STUDY_PROGRESS = StudyProgress()


class PlainStudyProgress(StudyProgress):
    """One line per finished or failed run (for logs and pipes)."""

    def __init__(self, console) -> None:
        self.console = console
        self.todo = self.count = self.failed = 0
        self.t0 = 0.0

    def start(self, study: Study, todo: int, done: int, infeasible: int = 0) -> None:
        self.todo, self.t0 = todo, time.perf_counter()
        known = f"{infeasible} infeasible (not run again), " if infeasible else ""
        runs = f"{len(study.points)} run{'' if len(study.points) == 1 else 's'}"
        self.console.print(f"study {study.source}: {runs}, {done} already "
                           f"finished, {known}{todo} to compute in {study.out_dir}",
                           markup=False, highlight=False, soft_wrap=True)

    def say(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def advance(self, outcome: Outcome) -> None:
        self.count += 1
        self.failed += outcome.error is not None and outcome.infeasible is None
        elapsed = time.perf_counter() - self.t0
        left = elapsed / self.count * (self.todo - self.count)
        what = (f"infeasible: {outcome.infeasible}" if outcome.infeasible is not None
                else f"failed: {outcome.error}" if outcome.error else "done")
        self.console.print(f"[{self.count}/{self.todo}] {outcome.run_id} {what} "
                           f"({outcome.wall_s:.1f} s; {self.failed} failed; about {left:.0f} s "
                           f"left)", markup=False, highlight=False, soft_wrap=True)


class RichStudyProgress(StudyProgress):
    """A progress bar: runs done of those to compute, failures, time left."""

    def __init__(self, console) -> None:
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)

        self.bar = Progress(TextColumn("[bold]study"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("runs, {task.fields[failed]} failed,"
                                       "{task.fields[infeasible]}"),
                            TimeRemainingColumn(), TextColumn("left,"), TimeElapsedColumn(),
                            TextColumn("elapsed"), console=console)
        self.task = None
        self.failed = self.infeasible = 0

    def start(self, study: Study, todo: int, done: int, infeasible: int = 0) -> None:
        self.bar.start()
        self.task = self.bar.add_task("study", total=todo, failed=0, infeasible="")

    def say(self, text: str) -> None:
        self.bar.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def advance(self, outcome: Outcome) -> None:
        self.failed += outcome.error is not None and outcome.infeasible is None
        self.infeasible += outcome.infeasible is not None
        self.bar.update(self.task, advance=1, failed=self.failed,
                        infeasible=f" {self.infeasible} infeasible," if self.infeasible else "")

    def close(self) -> None:
        self.bar.stop()


def study_progress(console) -> StudyProgress:
    """A bar on a terminal, plain lines otherwise."""
    return RichStudyProgress(console) if console.is_terminal else PlainStudyProgress(console)


@dataclass
class StudyTable(FittedTable):
    """The table of a study's runs, followed by its hindsight table when it has one."""

    hindsight: FittedTable | None = None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator:
        yield from super().__rich_console__(console, options)
        if self.hindsight is not None:
            yield ""
            yield self.hindsight


def study_table(study: Study, done: dict[str, dict], failed: dict[str, str],
                ids: bool = False) -> StudyTable:
    """Every grid point in grid order with its status and main metrics (numbered as the
    rows of results.csv), or with ``ids`` its run id instead; the number, grid labels, id
    and status always shown whole, as many metrics as fit the width. Without ``ids``, the
    finished runs' hindsight table follows (:mod:`olsctl.report.hindsight`)."""
    caption = f"runs in {study.out_dir / 'runs'}" + ("" if ids else ", ids in results.csv")
    shown = [] if ids else _shown_metrics(study)
    notes = {"csr": CSR_NOTE, "sla_windows_kept_share": "SLA %: share of the SLA windows kept"}
    columns = ([] if ids else [Column("#", key=True, justify="right")]) \
        + [Column(col, key=True) for col in study.columns] \
        + ([Column("id", key=True)] if ids else []) \
        + [Column(head, justify="right", rank=NARROW_FIRST.index(key), note=notes.get(key, ""))
           for key, (head, _scale), _digits in shown] \
        + [Column("status", key=True)]
    table = StudyTable(f"olsctl study: {study.source}", caption, tuple(columns),
                       hindsight=None if ids else _hindsight(study, done))
    for p in study.points:
        status = "done" if p.run_id in done else "failed" if p.run_id in failed else "missing"
        if ids:
            cells = [p.run_id]
        elif p.run_id in done:
            values = metric_values(done[p.run_id], tuple(k for k, _h, _d in shown))
            cells = [_csr_cell(study, p.run_id, done[p.run_id], v) if k == "csr"
                     else _fmt(v, scale, d) for v, (k, (_h, scale), d) in zip(values, shown)]
        else:
            cells = ["-"] * len(shown)
        number = [] if ids else [str(p.index + 1)]
        table.add_row(*number, *(text or "-" for text in p.labels), *cells, status)
    return table


def _hindsight(study: Study, done: dict[str, dict]) -> FittedTable | None:
    """The hindsight table of the study's finished runs, or None."""
    from olsctl.report.hindsight import runs_of, hindsight_table
    from olsctl.workload import log_name

    at = study.columns.index("trace") if "trace" in study.columns else None
    rows = [(tuple(text or "-" for text in p.labels),
             log_name(done[p.run_id]["trace"] if at is None else p.labels[at]), done[p.run_id])
            for p in study.points if p.run_id in done]
    columns, runs = runs_of(study.columns, rows)
    return hindsight_table(columns, runs)


def _csr_cell(study: Study, run_id: str, summary: dict, csr: float | None) -> str:
    """A run's CSR (never 100% unless every sampling interval kept the cap) and how many
    intervals went over the cap."""
    from olsctl.report.reading import intervals_over_cap

    if csr is None:
        return "-"
    return csr_text(csr) + over_cap_text(intervals_over_cap(study.out_dir / "runs" / run_id,
                                                            summary))


def _shown_metrics(study: Study) -> list[tuple[str, tuple[str, float], int | None]]:
    """(summary key, (heading, scale), digits) of the metrics the table shows; digits
    None: a percentage, as ``olsctl report`` shows it."""
    shown: list[tuple[str, tuple[str, float], int | None]] = [
        ("mean_bsld", ("bsld", 1.0), 2), ("mean_wait_s", ("wait h", 1 / 3600), 1),
        ("utilization", ("util", 1.0), 3)]
    if CONTROLLER_METRICS[0] in study.metric_columns:
        shown.append(("processor_savings", ("saved", 1.0), None))
    if POWER_METRICS[0] in study.metric_columns:
        shown += [("energy_j", ("MWh", 1 / 3.6e9), 2), ("csr", ("CSR", 1.0), None)]
    shown.append(("sla_windows_kept_share", ("SLA %", 100.0), 1))
    return shown


def _fmt(value: Any, scale: float, digits: int | None) -> str:
    from olsctl.terminal import _pct

    if value is None:
        return "-"
    return _pct(value * scale) if digits is None else f"{value * scale:,.{digits}f}"
