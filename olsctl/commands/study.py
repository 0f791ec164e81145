"""``olsctl study`` (a grid of runs) and ``olsctl tune`` (the cheapest setting of a grid
that meets an SLA).

Both stop on SIGTERM as on Ctrl-C (:func:`sigterm_stops`): their worker pool is shut
down, and one line says so.
"""

from __future__ import annotations

import argparse
import signal
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

from rich.console import Console

from olsctl.commands import EXIT_OK, counted
from olsctl.errors import ConfigError

if TYPE_CHECKING:
    from olsctl.tune import TuneResult

#: the exit code of a study or tune stopped by SIGTERM (128 + its number, as a shell says)
EXIT_TERMINATED = 128 + int(signal.SIGTERM)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the study process is, so that it stops as on Ctrl-C."""


@contextmanager
def sigterm_stops() -> Iterator[None]:
    """Within the block (in the main thread), SIGTERM raises :class:`Terminated` instead
    of ending the process at once. Ended at once, the process leaves its loky pool's
    semaphores and memory-mapping folders to loky's resource tracker, which removes
    them and warns on stderr about each ("There appear to be 8 leaked semlock
    objects"); stopped as on Ctrl-C, the pool is shut down and releases them itself. A
    second SIGTERM ends the process at once."""
    def stop(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise Terminated

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: signals are not ours to handle
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _terminated(err: Console) -> int:
    err.print("terminated", markup=False, highlight=False)
    return EXIT_TERMINATED


def cmd_study(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Exit 0 when every run of the grid is finished, 1 when some failed."""
    from olsctl.api import study_of
    from olsctl.study import (NULL_STUDY_PROGRESS, finished_runs, run_study, study_progress,
                              study_table)

    if args.n_jobs is not None and (args.n_jobs == 0 or args.n_jobs < -1):
        raise ConfigError(f"command line: --n-jobs: must be >= 1 or -1 (got {args.n_jobs})")
    study = study_of(args.study, out=args.out, n_jobs=args.n_jobs)
    if args.list:
        done = finished_runs(study) if study.out_dir.is_dir() else {}
        out.print(study_table(study, done, {}, ids=True))
        out.print(f"{counted(len(study.points), 'run')}, {len(done)} finished in "
                  f"{study.out_dir}", highlight=False)
        return EXIT_OK
    try:
        with sigterm_stops():
            result = run_study(study, NULL_STUDY_PROGRESS if args.quiet else study_progress(err))
    except Terminated:
        return _terminated(err)
    if not args.quiet:
        out.print(study_table(study, result.done, result.failed))
        out.print(f"{len(result.done)} of {len(study.points)} runs finished ({result.computed} "
                  f"computed now, {len(result.failed)} failed) in {result.wall_s:.1f} s; "
                  f"results in {study.out_dir / 'results.csv'}", highlight=False)
    return 1 if result.failed else EXIT_OK


def cmd_tune(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Exit 0 with a winner, 1 when no setting meets the SLA or a run failed."""
    from olsctl.study import NULL_STUDY_PROGRESS, study_progress
    from olsctl.tune import load_tune, run_tune, tune_tables

    if args.n_jobs is not None and (args.n_jobs == 0 or args.n_jobs < -1):
        raise ConfigError(f"command line: --n-jobs: must be >= 1 or -1 (got {args.n_jobs})")
    tune = load_tune(args.tune, out=args.out, n_jobs=args.n_jobs)
    try:
        with sigterm_stops():
            result = run_tune(tune, NULL_STUDY_PROGRESS if args.quiet else study_progress(err))
    except Terminated:
        return _terminated(err)
    if not args.quiet:
        for table in tune_tables(tune, result):
            out.print(table)
    if result.winner is None:
        err.print(f"no setting keeps {tune.metric} <= {tune.limit:g} "
                  f"({counted(len(result.ranked), 'run')}, {len(result.infeasible)} "
                  f"infeasible, {len(result.failed)} failed)",
                  highlight=False)
        return 1
    if not args.quiet:
        out.print(f"wrote {result.written}: {tune.metric} = {result.winner.metric:.4f}, "
                  f"{tune.cost} = {result.winner.cost:,.2f} ({_settings_run(result)}; "
                  f"{len(result.infeasible)} infeasible; in {result.wall_s:.1f} s)",
                  highlight=False, markup=False, soft_wrap=True)
    return 1 if result.failed else EXIT_OK


def _settings_run(result: TuneResult) -> str:
    """How many settings have runs, and of those how many ran now and how many were
    taken from an earlier tune in the same directory."""
    ran = len(result.ranked)
    settings = counted(ran, "setting")
    if not result.reused:
        return f"{settings} run"
    return f"{settings}: {ran - result.reused} run now, {result.reused} taken from the earlier run"
