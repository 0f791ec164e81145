"""The commands that report: ``olsctl predict`` (job power predictors' errors on a log)
and ``olsctl report`` (tables and plots of a run or a study directory).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from olsctl.commands import EXIT_OK
from olsctl.errors import cannot_write
from olsctl.workload import resolve_trace

if TYPE_CHECKING:
    from olsctl.power.evaluate import PredictorErrors


def cmd_predict(args: argparse.Namespace, out: Console, err: Console) -> int:
    """``olsctl predict``: the predictors' errors on a log (:mod:`olsctl.power.evaluate`), as a
    table or JSON, and with ``--out`` as predict.json."""
    import json

    from olsctl.power.evaluate import predictor_errors
    from olsctl.workload import load_workload

    w = load_workload(resolve_trace(args.trace, Path.cwd()))
    errors = predictor_errors(w, args.seed)
    report = errors.report()
    written = None
    if args.out:
        from olsctl.report import write_predict

        written = write_predict(Path(args.out), report)
    if args.json:
        out.print_json(json.dumps(report))
        return EXIT_OK
    out.print(_predict_table(errors))
    if written is not None:
        out.print(f"wrote {written}", highlight=False, markup=False, soft_wrap=True)
    return EXIT_OK


def _predict_table(e: PredictorErrors) -> Table:
    """Per week of job start, then over all jobs and over the learned ones: each
    predictor's mean absolute error (W per processor)."""
    table = Table(title=f"olsctl predict: {e.trace}, mean absolute error of the predicted mean "
                        f"power (W per processor)", title_justify="left",
                  caption=f"true profiles: synthetic, seed {e.seed}; jobs replayed under "
                          f"EASY; history keyed by project; learned: share of jobs the "
                          f"learner predicts from a learned job or project profile; last "
                          f"row: errors on those jobs", caption_justify="left")
    table.add_column("week", justify="right")
    table.add_column("jobs", justify="right")
    table.add_column("learned", justify="right")
    for name in e.predictors:
        table.add_column(name, justify="right")
    for row in e.weekly:
        table.add_row(str(row["week"]), f"{row['jobs']:,}", f"{100 * row['learned_share']:.0f}%",
                      *(f"{row[name]:.1f}" for name in e.predictors))
    table.add_row("all", f"{e.jobs:,}", f"{100 * e.learned_share:.0f}%",
                  *(f"{e.overall_mae_w[name]:.1f}" for name in e.predictors), style="bold")
    table.add_row("learned", "", "",
                  *(f"{e.learned_jobs_mae_w[name]:.1f}" for name in e.predictors), style="bold")
    return table


def cmd_report(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Tables of a run or study directory, then its plots (when matplotlib is there)."""
    from olsctl.report import (PLOT_HINT, check_out_dir, load_source, plot_data,
                               report_tables, write_plots)

    source = load_source(Path(args.dir))
    out_dir = Path(args.out) if args.out else source.path / "report"
    check_out_dir(out_dir)
    data = plot_data(source)  # reads and checks every file the plots need
    for table in report_tables(source):
        out.print(table)
    if data is None:
        out.print(PLOT_HINT, markup=False, highlight=False)
        return EXIT_OK
    try:
        files = write_plots(data, out_dir, args.format)
    except OSError as exc:
        raise cannot_write("command line: --out" if args.out else "command line", out_dir,
                           exc) from None
    plots = f"{len(files)} plot{'' if len(files) == 1 else 's'}"
    out.print(f"wrote {plots} to {out_dir}: {', '.join(p.name for p in files) or '-'}",
              highlight=False, soft_wrap=True)
    return EXIT_OK
