"""Command line: the parser, the table of commands and ``main``.

``main(argv) -> int`` parses the arguments and calls the command's handler, found by name
in :data:`COMMANDS` (the handlers: :mod:`olsctl.commands`); it turns known input errors
into one line on stderr and exit code 2, and Ctrl-C into exit code 130. A handler's module
is imported when its command runs, so a command loads only what it needs.
"""

from __future__ import annotations

import argparse
import gc
import sys
from importlib import import_module
from pathlib import Path
from typing import Callable, Sequence

from rich.console import Console

from olsctl import __version__
from olsctl.commands import EXIT_INPUT, EXIT_INTERRUPTED, EXIT_OK
from olsctl.errors import OlsctlError
from olsctl.workload import BUNDLED

__all__ = ["COMMANDS", "EXIT_INPUT", "EXIT_INTERRUPTED", "EXIT_OK", "HANDLERS", "Handler",
           "command_name", "entry_point", "main"]

#: a command's handler: (parsed arguments, output console, error console) -> exit code
Handler = Callable[[argparse.Namespace, Console, Console], int]

#: every command by its name (with its subcommand: ``convert nrel``) -> its handler's
#: module in :mod:`olsctl.commands` and name there
HANDLERS: dict[str, tuple[str, str]] = {
    "run": ("run", "cmd_run"),
    "monitor": ("run", "cmd_monitor"),
    "trace info": ("logs", "cmd_trace_info"),
    "trace congested": ("logs", "cmd_trace_congested"),
    "predict": ("results", "cmd_predict"),
    "report": ("results", "cmd_report"),
    "convert nrel": ("logs", "cmd_convert_nrel"),
    "convert slurm": ("logs", "cmd_convert_slurm"),
    "study": ("study", "cmd_study"),
    "tune": ("study", "cmd_tune"),
    "bench": ("bench", "cmd_bench"),
}


def _handler(module: str, name: str) -> Handler:
    """The handler ``name`` of ``olsctl.commands.<module>``, its module imported at its
    first call."""
    def handler(args: argparse.Namespace, out: Console, err: Console) -> int:
        return getattr(import_module(f"olsctl.commands.{module}"), name)(args, out, err)

    handler.__name__ = handler.__qualname__ = name
    return handler


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="olsctl", description="Trace-driven HPC scheduling "
                                "simulation with an online-simulation controller.")
    p.add_argument("--version", action="version", version=f"olsctl {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_run_commands(sub)
    _add_trace_commands(sub)
    _add_result_commands(sub)
    _add_convert_commands(sub)
    _add_study_commands(sub)
    _add_bench_command(sub)
    _know_own_parser(p)
    return p


def _know_own_parser(parser: argparse.ArgumentParser) -> None:
    """Each command's parsed arguments keep its parser (``own_parser``), so that an
    unknown option shows the usage of the command it was given to."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.set_defaults(own_parser=sub)
                _know_own_parser(sub)


def _add_run_commands(sub: argparse._SubParsersAction) -> None:
    """The parsers of ``run`` and ``monitor`` (:mod:`olsctl.commands.run`)."""
    run = sub.add_parser("run", help="replay a workload under a policy",
                         description="Replay a workload under a scheduling policy and write "
                                     "jobs.csv, timeseries.csv and summary.json.")
    run.add_argument("config", nargs="?", help="YAML run config (default: built-in defaults)")
    run.add_argument("--trace", help="SWF file (plain or gzipped), Slurm sacct dump, "
                                     f"or bundled log name ({', '.join(BUNDLED)})")
    run.add_argument("--procs", type=int, help="machine size (default: from the trace header)")
    run.add_argument("--policy", help="policy name (e.g. easy)")
    run.add_argument("--estimates", choices=("exact", "user"), help="runtime estimates")
    run.add_argument("--out", help="output directory (default: olsctl-out)")
    run.add_argument("--strict", action="store_true", default=None,
                     help="check every scheduling decision")
    run.add_argument("--skip-bad-lines", action="store_true", default=None,
                     help="count and skip malformed SWF lines instead of failing")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="set any config key by its dotted path, value in YAML (repeatable), "
                          "e.g. --set controller.search=bisect")
    run.add_argument("--quiet", action="store_true", help="print no table or progress")
    run.add_argument("--live", action="store_true",
                     help="show a live dashboard (plain lines when stdout is not a terminal) "
                          "and write OUT/live.jsonl")
    run.add_argument("--feed", action="store_true",
                     help="write OUT/live.jsonl for olsctl monitor, without the dashboard")
    run.add_argument("--pace", type=float, metavar="N",
                     help="run at most N simulated seconds per wall second")

    mon = sub.add_parser("monitor", help="watch a run writing into a directory",
                         description="Show the live dashboard of the run writing DIR/live.jsonl "
                                     "(olsctl run --live or --feed), from any process or machine "
                                     "that sees DIR; a finished run is replayed.")
    mon.add_argument("dir", help="the run's output directory")
    mon.add_argument("--replay", action="store_true",
                     help="replay the feed from its start, even while the run goes on")
    mon.add_argument("--speed", type=float, default=20.0, metavar="X",
                     help="replay at X samples per second (default 20)")


def _add_trace_commands(sub: argparse._SubParsersAction) -> None:
    """The parsers of ``trace info`` and ``trace congested`` (:mod:`olsctl.commands.logs`)."""
    trace = sub.add_parser("trace", help="inspect workload files, or write a synthetic one")
    tsub = trace.add_subparsers(dest="trace_command", required=True, metavar="SUBCOMMAND")
    info = tsub.add_parser("info", help="summary of a workload log (SWF or Slurm sacct dump)",
                           description="Summarize a workload log as olsctl loads it: an SWF "
                                       "file, a Slurm accounting dump (read as olsctl run "
                                       "reads it) or a bundled log.")
    info.add_argument("file", help="SWF file (plain or gzipped), Slurm sacct dump "
                                   f"(sacct --parsable2), or bundled log name "
                                   f"({', '.join(BUNDLED)})")
    info.add_argument("--procs", type=int, help="machine size (default: from the header)")
    info.add_argument("--skip-bad-lines", action="store_true",
                      help="count and skip malformed lines instead of failing")
    info.add_argument("--json", action="store_true", help="print the summary as JSON")
    info.add_argument("--power", action="store_true",
                      help="also show the synthetic job power profiles (default model)")
    info.add_argument("--seed", type=int, default=0, help="seed of the power profiles")
    cong = tsub.add_parser(
        "congested", help="write a congested synthetic SWF log (the one bench --congested uses)",
        description="Write the congested synthetic log of `olsctl bench --ols --congested`: "
                    "more work offered than the machine can do, half of it wide and long, "
                    "so that the queue grows for weeks. The same options and seed give the "
                    "same bytes.")
    cong.add_argument("file", help="SWF file to write (refused if it exists, unless --force)")
    cong.add_argument("--jobs", type=int, default=4000,
                      help="jobs in the log (default 4000, as the bench; 12000 keeps a "
                           "thousand and more waiting)")
    cong.add_argument("--procs", type=int, default=128, help="machine size (default 128)")
    cong.add_argument("--load", type=float, default=1.8,
                      help="offered load: work over what the machine can do (default 1.8)")
    cong.add_argument("--seed", type=int, default=0, help="seed of the draws (default 0)")
    cong.add_argument("--force", action="store_true", help="overwrite FILE if it exists")


def _add_result_commands(sub: argparse._SubParsersAction) -> None:
    """The parsers of ``predict`` and ``report`` (:mod:`olsctl.commands.results`)."""
    pred = sub.add_parser("predict", help="how well job power predictors do on a log",
                          description="Replay a log under EASY and report the mean absolute "
                                      "error of each job power predictor by week.")
    pred.add_argument("trace", nargs="?", default="KTH-SP2",
                      help="SWF file or bundled log name (default KTH-SP2)")
    pred.add_argument("--seed", type=int, default=0, help="seed of the synthetic profiles")
    pred.add_argument("--json", action="store_true", help="print the report as JSON")
    pred.add_argument("--out", help="also write the report as predict.json into this "
                                    "directory (olsctl report plots it)")

    rep = sub.add_parser("report", help="tables and plots of a run or a study directory",
                         description="Print the tables of a run or a study directory and "
                                     "draw its plots (matplotlib: pip install 'olsctl[plot]').")
    rep.add_argument("dir", help="a run directory (summary.json) or a study directory "
                                 "(results.csv and runs/)")
    rep.add_argument("--out", help="directory for the plots (default: DIR/report)")
    rep.add_argument("--format", choices=("png", "svg"), default="png",
                     help="image format of the plots (default png)")


def _add_convert_commands(sub: argparse._SubParsersAction) -> None:
    """The parsers of ``convert nrel`` and ``convert slurm`` (:mod:`olsctl.commands.logs`)."""
    conv = sub.add_parser("convert", help="turn other logs into SWF (+ power CSV)")
    csub = conv.add_subparsers(dest="convert_command", required=True, metavar="FORMAT")
    nrel = csub.add_parser("nrel", help="the NREL job power log (ground_truth.csv[.gz])")
    nrel.add_argument("source", help="the NREL CSV (plain or gzipped)")
    nrel.add_argument("--swf", required=True, help="SWF file to write")
    nrel.add_argument("--power", required=True, help="power CSV to write (job_id,mean_w)")
    slurm = csub.add_parser("slurm", help="a Slurm accounting dump (sacct --parsable2)")
    slurm.add_argument("source", help="sacct --parsable2 output with its header line")
    slurm.add_argument("--swf", required=True, help="SWF file to write")
    slurm.add_argument("--key", help="CSV to write: SWF job, user, group and queue numbers "
                                     "-> Slurm names")
    slurm.add_argument("--procs", type=int,
                       help="machine size (default: the most busy at once in the log)")
    slurm.add_argument("--units", choices=("cpus", "nodes"), default="cpus",
                       help="processors are AllocCPUS (default) or AllocNodes")
    slurm.add_argument("--tz", default="UTC",
                       help="IANA time zone of sacct's times, e.g. Europe/Paris (default UTC)")
    slurm.add_argument("--skip-bad-lines", action="store_true",
                       help="count and skip malformed lines instead of failing")


def _add_study_commands(sub: argparse._SubParsersAction) -> None:
    """The parsers of ``study`` and ``tune`` (:mod:`olsctl.commands.study`)."""
    study = sub.add_parser("study", help="a grid of runs, in parallel, resumable",
                           description="Run every point of a study's grid that is not "
                                       "finished yet; results.csv lists the finished runs.")
    study.add_argument("study", help="YAML study file (base config, grid, out, n_jobs, backend)")
    study.add_argument("--out", help="study directory (overrides the file's out)")
    study.add_argument("--n-jobs", type=int, help="runs in parallel (overrides the file's n_jobs)")
    study.add_argument("--list", action="store_true",
                       help="list the runs and which are finished; compute and write nothing")
    study.add_argument("--quiet", action="store_true", help="print no table or progress")

    tune = sub.add_parser("tune", help="the cheapest static setting that meets a whole-run SLA",
                          description="Run a grid of settings (as a study), rank them by cost "
                                      "among those meeting the SLA, print the runners-up and "
                                      "the trade-off curve, and write the winner as a config.")
    tune.add_argument("tune", help="YAML tune file (a study file plus sla, cost, write)")
    tune.add_argument("--out", help="tune directory (overrides the file's out)")
    tune.add_argument("--n-jobs", type=int, help="runs in parallel (overrides the file's n_jobs)")
    tune.add_argument("--quiet", action="store_true", help="print no table or progress")


def _add_bench_command(sub: argparse._SubParsersAction) -> None:
    """The parser of ``bench`` (:mod:`olsctl.commands.bench`)."""
    bench = sub.add_parser("bench", help="speed of the simulators against a plain loop")
    bench.add_argument("traces", nargs="*",
                       help=f"logs (default: all bundled: {', '.join(BUNDLED)})")
    bench.add_argument("--repeat", type=int, default=None,
                       help="best of N runs (default 3; with --ols or --configs 1)")
    bench.add_argument("--estimates", choices=("exact", "user"), default="exact",
                       help="runtime estimates the policies see: exact (the runtimes, the "
                            "default) or user (the log's requested times, at least the "
                            "runtimes)")
    bench.add_argument("--mqbf", action="store_true",
                       help="also time the main simulator under MQBF(4) against EASY; "
                            "with --ols, time MQBF(4)/OLS (configs/mqbf-ols.yaml's policy) "
                            "instead of EASY/OLS")
    bench.add_argument("--knapsack", action="store_true",
                       help="also time it under the window knapsack (w = 20, 62.5%% cap), "
                            "without and with the power limit (throttle)")
    bench.add_argument("--big", action="store_true",
                       help="bench a 300,000-job log on 93,312 processors built from "
                            "SDSC-BLUE (81 replicas side by side, written to a temporary "
                            "folder) instead of the bundled logs (beside any named)")
    bench.add_argument("--ols", action="store_true",
                       help="instead, time EASY/OLS (configs/easy-ols.yaml's controller) with "
                            "n_jobs 1 and 2: wall time and the controller's share")
    bench.add_argument("--search", choices=("grid", "bisect", "cheapest-first", "bound-first"),
                       default="grid",
                       help="the controller's search with --ols (default grid)")
    bench.add_argument("--feedback", action="store_true",
                       help="with --ols: compare the controller open loop and with SLA "
                            "feedback (n_jobs 1, in turns) instead of n_jobs 1 and 2")
    bench.add_argument("--congested", action="store_true",
                       help="with --ols: the controller's cost per tick on a congested "
                            "synthetic log (load 1.8, hundreds of jobs waiting for weeks) "
                            "beside a quiet log (the first named, default KTH-SP2), in turns")
    bench.add_argument("--configs", nargs="+", type=Path, default=None, metavar="CONFIG",
                       help="instead, time whole olsctl runs of these run configs on each "
                            "log, in turns, each against the first (e.g. configs/easy-ols.yaml "
                            "configs/cap-ols.yaml)")
    bench.add_argument("--congested-jobs", type=int, default=None, metavar="N",
                       help="with --ols --congested: the congested log's jobs (default "
                            "4000; 12000 keeps a thousand and more waiting at most ticks)")


#: every command by its name -> its handler (see :data:`HANDLERS`)
COMMANDS: dict[str, Handler] = {command: _handler(module, name)
                                for command, (module, name) in HANDLERS.items()}


def command_name(args: argparse.Namespace) -> str:
    """The parsed command's name in :data:`COMMANDS`: ``run``, or with its subcommand
    (the parser's ``<command>_command``), ``trace info``."""
    sub = getattr(args, f"{args.command}_command", None)
    return args.command if sub is None else f"{args.command} {sub}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` names (default: the command line's); its exit code."""
    args, unknown = _parser().parse_known_args(argv)
    if unknown:  # in the usage of the command they were given to, not olsctl's
        args.own_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    out = Console()
    err = Console(stderr=True)
    try:
        return COMMANDS[command_name(args)](args, out, err)
    except OlsctlError as exc:
        err.print(str(exc), markup=False, highlight=False, soft_wrap=True)
        return EXIT_INPUT
    except KeyboardInterrupt:
        err.print("interrupted", markup=False, highlight=False)
        return EXIT_INTERRUPTED


def entry_point() -> None:
    code = main()
    # The process ends here. Its last cycle collection would look again at every object
    # the run leaves (millions after a controller run); frozen, they are only freed.
    gc.freeze()
    sys.exit(code)
