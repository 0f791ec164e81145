"""Command line: ``olsctl run``, ``olsctl trace info``, ``olsctl bench``.

``main(argv) -> int`` turns known input errors into one line on stderr and exit code 2;
commands hand data to the renderers in :mod:`olsctl.reporting`.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from rich.console import Console
from rich.table import Table

from olsctl import __version__
from olsctl.config import RunConfig, build_config, load_config, with_overrides, with_settings
from olsctl.errors import ConfigError, OlsctlError
from olsctl.workload import BUNDLED, resolve_trace

EXIT_OK, EXIT_INPUT, EXIT_INTERRUPTED = 0, 2, 130


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="olsctl", description="Trace-driven HPC scheduling "
                                "simulation with an online-simulation controller.")
    p.add_argument("--version", action="version", version=f"olsctl {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="replay a workload under a policy",
                         description="Replay a workload under a scheduling policy and write "
                                     "jobs.csv, timeseries.csv and summary.json.")
    run.add_argument("config", nargs="?", help="YAML run config (default: built-in defaults)")
    run.add_argument("--trace", help="SWF file (plain or gzipped) or bundled log name "
                                     f"({', '.join(BUNDLED)})")
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

    trace = sub.add_parser("trace", help="inspect workload files")
    tsub = trace.add_subparsers(dest="trace_command", required=True, metavar="SUBCOMMAND")
    info = tsub.add_parser("info", help="summary of an SWF file")
    info.add_argument("file", help="SWF file or bundled log name")
    info.add_argument("--procs", type=int, help="machine size (default: from the header)")
    info.add_argument("--skip-bad-lines", action="store_true",
                      help="count and skip malformed lines instead of failing")
    info.add_argument("--json", action="store_true", help="print the summary as JSON")
    info.add_argument("--power", action="store_true",
                      help="also show the synthetic job power profiles (default model)")
    info.add_argument("--seed", type=int, default=0, help="seed of the power profiles")

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

    conv = sub.add_parser("convert", help="turn other logs into SWF (+ power CSV)")
    csub = conv.add_subparsers(dest="convert_command", required=True, metavar="FORMAT")
    nrel = csub.add_parser("nrel", help="the NREL job power log (ground_truth.csv[.gz])")
    nrel.add_argument("source", help="the NREL CSV (plain or gzipped)")
    nrel.add_argument("--swf", required=True, help="SWF file to write")
    nrel.add_argument("--power", required=True, help="power CSV to write (job_id,mean_w)")

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

    bench = sub.add_parser("bench", help="speed of the simulators against a plain loop")
    bench.add_argument("traces", nargs="*", help=f"logs (default: all bundled: {', '.join(BUNDLED)})")
    bench.add_argument("--repeat", type=int, default=None,
                       help="best of N runs (default 3; with --ols 1)")
    bench.add_argument("--estimates", choices=("exact", "user"), default="exact")
    bench.add_argument("--mqbf", action="store_true",
                       help="also time the main simulator under MQBF(4) against EASY")
    bench.add_argument("--knapsack", action="store_true",
                       help="also time it under the window knapsack (w = 20, 62.5%% cap), "
                            "without and with the power limit (throttle)")
    bench.add_argument("--ols", action="store_true",
                       help="instead, time EASY/OLS (configs/easy-ols.yaml's controller) with "
                            "n_jobs 1 and 2: wall time and the controller's share")
    bench.add_argument("--search", choices=("grid", "bisect", "cheapest-first"), default="grid",
                       help="the controller's search with --ols (default grid)")
    bench.add_argument("--feedback", action="store_true",
                       help="with --ols: compare the controller open loop and with SLA "
                            "feedback (n_jobs 1, in turns) instead of n_jobs 1 and 2")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    out = Console()
    err = Console(stderr=True)
    try:
        if args.command == "run":
            return cmd_run(args, out, err)
        if args.command == "monitor":
            return cmd_monitor(args, out, err)
        if args.command == "trace":
            return cmd_trace_info(args, out)
        if args.command == "bench":
            return cmd_bench(args, out)
        if args.command == "study":
            return cmd_study(args, out, err)
        if args.command == "tune":
            return cmd_tune(args, out, err)
        if args.command == "predict":
            return cmd_predict(args, out)
        if args.command == "report":
            return cmd_report(args, out)
        if args.command == "convert":
            from olsctl.power.nrel import convert

            counts = convert(Path(args.source), Path(args.swf), Path(args.power))
            out.print(f"wrote {args.swf} ({counts['jobs']:,} jobs, {counts['machine_procs']:,} "
                      f"processors) and {args.power} ({counts['measured']:,} measured powers)",
                      highlight=False, markup=False, soft_wrap=True)
            return EXIT_OK
    except OlsctlError as exc:
        err.print(str(exc), markup=False, highlight=False, soft_wrap=True)
        return EXIT_INPUT
    except KeyboardInterrupt:
        err.print("interrupted", markup=False, highlight=False)
        return EXIT_INTERRUPTED
    return EXIT_OK


def entry_point() -> None:
    sys.exit(main())


def _run_config(args: argparse.Namespace) -> RunConfig:
    config = load_config(args.config) if args.config else build_config({})
    overrides = {
        "trace": args.trace, "procs": args.procs, "estimates": args.estimates,
        "out": args.out, "strict": args.strict, "skip_bad_lines": args.skip_bad_lines,
    }
    if args.policy is not None:
        overrides["policy"] = {"name": args.policy}
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if "trace" in overrides:  # a command-line path is relative to the working directory
        config = replace(config, base_dir=Path.cwd(), source="command line")
    config = with_overrides(config, overrides, "command line") if overrides else config
    return with_settings(config, args.set)


def cmd_run(args: argparse.Namespace, out: Console, err: Console) -> int:
    from olsctl.runner import execute

    config = _run_config(args)
    live = None
    if args.live or args.feed or args.pace is not None:
        from olsctl.live import live_run
        live = live_run(config, out, args.live, args.feed, args.pace)
    progress = None
    if not args.quiet and err.is_terminal and not args.live:
        from olsctl.reporting import job_progress
        progress = job_progress(err)
    t0 = time.perf_counter()
    try:
        result = execute(config, progress, live)
    except BaseException as exc:
        if live is not None:
            live.close(exc)  # the feed's end record: failed or interrupted
        raise
    if live is not None:
        live.close()
    wall = time.perf_counter() - t0
    if not args.quiet:
        from olsctl.reporting import run_summary_table
        out.print(run_summary_table(result.summary))
        out.print(f"wrote {', '.join(p.name for p in result.files)} to {result.out_dir} "
                  f"in {wall:.1f} s", highlight=False, markup=False, soft_wrap=True)
        if result.summary["strict_checks"] is not None:
            out.print(_strict_text(result.summary), highlight=False, markup=False,
                      soft_wrap=True)
        if "controller" in result.summary:
            c = result.summary["controller"]
            missed = "limit" if "feedback" in c else "SLA"
            out.print(f"controller: {c['ticks']} ticks, {c['sla_misses']} {missed} misses, "
                      f"{result.controller_wall_s:.1f} s of the wall time "
                      f"({100 * result.controller_wall_s / max(wall, 1e-9):.0f}%)",
                      highlight=False)
            if c.get("failures"):
                ticks = "1 tick" if c["failures"] == 1 else f"{c['failures']} ticks"
                out.print(f"controller: {ticks} failed (a what-if or the worker "
                          f"pool raised; each kept the setting in force): see \"failure\" in "
                          f"{result.out_dir / 'decisions.jsonl'}", style="bold red",
                          markup=False, highlight=False, soft_wrap=True)
    return EXIT_OK


def cmd_monitor(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Exit 0 when the run finished (or on Ctrl-C), 1 when it failed or was interrupted."""
    from olsctl.live import monitor, view_for

    try:
        end = monitor(Path(args.dir), view_for(out), args.replay, args.speed)
    except KeyboardInterrupt:
        return EXIT_OK
    if end["status"] != "finished":
        what = "was interrupted" if end["status"] == "interrupted" else end["status"]
        err.print(f"{args.dir}: the run {what}"
                  + (f": {end['error']}" if end.get("error") else ""),
                  markup=False, highlight=False, soft_wrap=True)
        return 1
    return EXIT_OK


def cmd_study(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Exit 0 when every run of the grid is finished, 1 when some failed."""
    from olsctl.study import (NULL_STUDY_PROGRESS, finished_runs, load_study, run_study,
                              study_progress, study_table)

    if args.n_jobs is not None and (args.n_jobs == 0 or args.n_jobs < -1):
        raise ConfigError(f"command line: --n-jobs: must be >= 1 or -1 (got {args.n_jobs})")
    study = load_study(args.study, out=args.out, n_jobs=args.n_jobs)
    if args.list:
        done = finished_runs(study) if study.out_dir.is_dir() else {}
        out.print(study_table(study, done, {}, ids=True))
        out.print(f"{len(study.points)} runs, {len(done)} finished in {study.out_dir}",
                  highlight=False)
        return EXIT_OK
    result = run_study(study, NULL_STUDY_PROGRESS if args.quiet else study_progress(err))
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
    result = run_tune(tune, NULL_STUDY_PROGRESS if args.quiet else study_progress(err))
    if not args.quiet:
        for table in tune_tables(tune, result):
            out.print(table)
    if result.winner is None:
        err.print(f"no setting keeps {tune.metric} <= {tune.limit:g} ({len(result.ranked)} "
                  f"runs, {len(result.infeasible)} infeasible, {len(result.failed)} failed)",
                  highlight=False)
        return 1
    if not args.quiet:
        out.print(f"wrote {result.written}: {tune.metric} = {result.winner.metric:.4f}, "
                  f"{tune.cost} = {result.winner.cost:,.2f} ({len(result.ranked)} settings run, "
                  f"{len(result.infeasible)} infeasible, in {result.wall_s:.1f} s)",
                  highlight=False, markup=False, soft_wrap=True)
    return 1 if result.failed else EXIT_OK


def _bench_feedback(paths: list[Path], args: argparse.Namespace, out: Console) -> int:
    from rich.table import Table

    from olsctl.bench import bench_feedback_turns

    best = "" if args.repeat == 1 else f", best of {args.repeat} in turns"
    table = Table(title=f"EASY/OLS ({args.search}, {args.estimates} estimates) open loop and "
                        f"with SLA feedback: the controller's time{best}")
    for col in ("log", "ticks", "what-ifs open", "what-ifs fb", "open ctl s", "fb ctl s",
                "fb/open"):
        table.add_column(col, justify="right")
    for path in paths:
        open_, fb = bench_feedback_turns(str(path), args.search, args.estimates, args.repeat)
        ratio = fb.controller_s / open_.controller_s if open_.controller_s > 0 else math.nan
        out.print(f"{open_.trace}: open loop controller {open_.controller_s:.2f} s, with "
                  f"feedback {fb.controller_s:.2f} s ({ratio:.2f}x)", highlight=False,
                  soft_wrap=True)
        table.add_row(open_.trace, f"{open_.ticks:,}", f"{open_.whatifs:,}", f"{fb.whatifs:,}",
                      f"{open_.controller_s:.2f}", f"{fb.controller_s:.2f}", f"{ratio:.2f}x")
    out.print(table)
    return EXIT_OK


def _bench_ols(paths: list[Path], args: argparse.Namespace, out: Console) -> int:
    from rich.table import Table

    from olsctl.bench import bench_ols_turns

    best = "" if args.repeat == 1 else f", best of {args.repeat} in turns"
    table = Table(title=f"EASY/OLS ({args.search}, {args.estimates} estimates): wall time "
                        f"with parsing, and the controller's part{best}")
    for col in ("log", "ticks", "what-ifs", "1 job s", "ctl %", "2 jobs s", "ctl %",
                "ctl 2/1"):
        table.add_column(col, justify="right")
    total = 0.0
    for path in paths:
        one, two = bench_ols_turns(str(path), args.search, args.estimates, args.repeat)
        total += one.wall_s
        out.print(f"{one.trace}: n_jobs=1 {one.wall_s:.1f} s (controller {one.controller_s:.1f} s, "
                  f"{one.controller_share:.0%}), n_jobs=2 {two.wall_s:.1f} s (controller "
                  f"{two.controller_s:.1f} s, {two.controller_s / one.controller_s:.2f}x)",
                  highlight=False, soft_wrap=True)
        table.add_row(one.trace, f"{one.ticks:,}", f"{one.whatifs:,}", f"{one.wall_s:.1f}",
                      f"{one.controller_share:.0%}", f"{two.wall_s:.1f}",
                      f"{two.controller_share:.0%}", f"{two.controller_s / one.controller_s:.2f}x")
    out.print(table)
    out.print(f"all logs, n_jobs=1: {total:.1f} s", highlight=False)
    return EXIT_OK


def cmd_trace_info(args: argparse.Namespace, out: Console) -> int:
    import json

    from olsctl.reporting import trace_info_view
    from olsctl.traceinfo import trace_info
    from olsctl.workload import load_workload

    if args.procs is not None and args.procs < 1:
        raise ConfigError(f"command line: --procs: must be >= 1 (got {args.procs})")
    w = load_workload(resolve_trace(args.file, Path.cwd()), args.procs, args.skip_bad_lines)
    info = trace_info(w)
    if args.power:
        from olsctl.traceinfo import power_info

        info["power"] = power_info(w, seed=args.seed)
    if args.json:
        out.print_json(json.dumps(info))
    else:
        out.print(trace_info_view(info))
        if args.power:
            from olsctl.reporting import power_info_view

            out.print(power_info_view(info["power"]))
    return EXIT_OK


def cmd_bench(args: argparse.Namespace, out: Console) -> int:
    from olsctl.bench import bench_workload
    from olsctl.workload import load_workload

    if args.repeat is None:
        args.repeat = 1 if args.ols else 3
    if args.repeat < 1:
        raise ConfigError(f"command line: --repeat: must be >= 1 (got {args.repeat})")
    names = args.traces or list(BUNDLED)
    paths = [resolve_trace(name, Path.cwd()) for name in names]
    if args.ols:
        return (_bench_feedback if args.feedback else _bench_ols)(paths, args, out)
    rows = []
    for path in paths:
        t0 = time.perf_counter()
        w = load_workload(path)
        parse_s = time.perf_counter() - t0
        row = bench_workload(w, parse_s, args.estimates, args.repeat, args.mqbf,
                             args.knapsack)
        rows.append(row)
        line = (f"{row.trace}: {row.jobs} jobs, plain {row.reference_s:.3f} s, "
                f"main {row.main_s:.3f} s ({row.main_ratio:.2f}x), what-if "
                f"{row.whatif_s:.3f} s ({row.whatif_ratio:.2f}x), same starts: "
                f"{row.same_schedule}")
        if row.mqbf_s is not None:
            line += f", MQBF(4) {row.mqbf_s:.3f} s ({row.mqbf_ratio:.2f}x EASY)"
        if row.knapsack_s is not None:
            line += (f", knapsack {row.knapsack_s:.3f} s ({row.knapsack_ratio:.2f}x EASY), "
                     f"with throttle {row.throttle_s:.3f} s ({row.throttle_ratio:.2f}x)")
        out.print(line, highlight=False, soft_wrap=True)
    out.print(_bench_table(rows, args))
    return EXIT_OK


def _strict_text(summary: dict) -> str:
    """What ``--strict`` checked in a run that passed."""
    parts = [f"strict: {summary['strict_checks']:,} starts checked (each job started once, "
             f"waiting and submitted, within the active processors; every finish running)"]
    power = summary.get("power") or {}
    if power.get("limit") == "throttle":
        parts.append("power never above the cap in force (the limit held)")
    pivots = summary.get("pivots") or {}
    if "late_pivots" in pivots:
        parts.append(f"{pivots['late_pivots']:,} of {pivots['pivots']:,} pivots started "
                     f"later than a reservation they had held (worst by "
                     f"{pivots['max_pivot_delay_s']:g} s)")
    return "; ".join(parts)


def _bench_table(rows: list, args: argparse.Namespace) -> Table:
    """One column per log, one row per figure (stays readable in 80 columns)."""
    table = Table(title=f"olsctl bench: EASY-FCFS, {args.estimates} estimates, "
                        f"best of {args.repeat}", title_justify="left",
                  caption="simulation only; trace parsing timed apart", caption_justify="left")
    table.add_column("")
    for row in rows:
        table.add_column(row.trace.split("-19")[0].split("-20")[0], justify="right")
    figures = [
        ("jobs", lambda r: f"{r.jobs:,}"),
        ("parse s", lambda r: f"{r.parse_s:.2f}"),
        ("plain loop s", lambda r: f"{r.reference_s:.2f}"),
        ("plain jobs/s", lambda r: f"{r.jobs / r.reference_s:,.0f}"),
        ("main s", lambda r: f"{r.main_s:.2f}"),
        ("main jobs/s", lambda r: f"{r.jobs / r.main_s:,.0f}"),
        ("main / plain", lambda r: f"{r.main_ratio:.2f}x"),
        ("what-if s", lambda r: f"{r.whatif_s:.2f}"),
        ("what-if jobs/s", lambda r: f"{r.jobs / r.whatif_s:,.0f}"),
        ("what-if / plain", lambda r: f"{r.whatif_ratio:.2f}x"),
        ("same starts", lambda r: "yes" if r.same_schedule else "NO"),
    ]
    if args.mqbf:
        figures += [("MQBF(4) main s", lambda r: f"{r.mqbf_s:.2f}"),
                    ("MQBF(4) / EASY", lambda r: f"{r.mqbf_ratio:.2f}x")]
    if args.knapsack:
        figures += [("knapsack main s", lambda r: f"{r.knapsack_s:.2f}"),
                    ("knapsack / EASY", lambda r: f"{r.knapsack_ratio:.2f}x"),
                    ("+ throttle s", lambda r: f"{r.throttle_s:.2f}"),
                    ("throttle / knapsack", lambda r: f"{r.throttle_ratio:.2f}x")]
    for label, cell in figures:
        table.add_row(label, *(cell(r) for r in rows))
    return table


def cmd_predict(args: argparse.Namespace, out: Console) -> int:
    import json

    from olsctl.policies import make_policy
    from olsctl.power.accounting import MachinePower
    from olsctl.power.cap import CapSchedule
    from olsctl.power.evaluate import (default_predictors, learned_errors, prediction_errors,
                                       weekly_mae)
    from olsctl.power.profiles import ProfileSettings, project_of, synthetic_profiles
    from olsctl.power.runtime import power_state
    from olsctl.sim import MainSimulator
    from olsctl.workload import load_workload

    w = load_workload(resolve_trace(args.trace, Path.cwd()))
    machine = MachinePower()
    prof = synthetic_profiles(w, machine.idle_w, machine.peak_w, ProfileSettings(seed=args.seed))
    records = MainSimulator(w, make_policy({"name": "easy"}), w.estimate_s("exact")).run()
    power = power_state(prof, project_of(w).tolist(), machine.idle_w, machine.sleep_w,
                        machine.peak_w, CapSchedule.constant(float("inf")), w.job_keys(),
                        sample_s=machine.sample_s)
    index_of = {j: i for i, j in enumerate(w.job_id.tolist())}
    predictors = default_predictors()
    result = prediction_errors(records, power, index_of, predictors)
    weeks = weekly_mae(result, float(w.submit_s[0]))
    overall = {name: float(err.mean()) for name, err in result["errors"].items()}
    on_learned = learned_errors(result)
    report = {"trace": w.name, "seed": args.seed, "overall_mae_w": overall,
              "learned_jobs_mae_w": on_learned, "weekly": weeks}
    written = None
    if args.out:
        from olsctl.report import write_predict

        written = write_predict(Path(args.out), report)
    if args.json:
        out.print_json(json.dumps(report))
        return EXIT_OK
    table = Table(title=f"olsctl predict: {w.name}, mean absolute error of the predicted mean "
                        f"power (W per processor)", title_justify="left",
                  caption=f"true profiles: synthetic, seed {args.seed}; jobs replayed under "
                          f"EASY; history keyed by project; learned: share of jobs the "
                          f"learner predicts from a learned job or project profile; last "
                          f"row: errors on those jobs", caption_justify="left")
    table.add_column("week", justify="right")
    table.add_column("jobs", justify="right")
    table.add_column("learned", justify="right")
    for name in predictors:
        table.add_column(name, justify="right")
    for row in weeks:
        table.add_row(str(row["week"]), f"{row['jobs']:,}", f"{100 * row['learned_share']:.0f}%",
                      *(f"{row[name]:.1f}" for name in predictors))
    share = float((result["source"] != "peak").mean())
    table.add_row("all", f"{len(result['start_s']):,}", f"{100 * share:.0f}%",
                  *(f"{overall[name]:.1f}" for name in predictors), style="bold")
    table.add_row("learned", "", "", *(f"{on_learned[name]:.1f}" for name in predictors),
                  style="bold")
    out.print(table)
    if written is not None:
        out.print(f"wrote {written}", highlight=False, markup=False, soft_wrap=True)
    return EXIT_OK


def cmd_report(args: argparse.Namespace, out: Console) -> int:
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
    files = write_plots(data, out_dir, args.format)
    plots = f"{len(files)} plot{'' if len(files) == 1 else 's'}"
    out.print(f"wrote {plots} to {out_dir}: {', '.join(p.name for p in files) or '-'}",
              highlight=False, soft_wrap=True)
    return EXIT_OK
