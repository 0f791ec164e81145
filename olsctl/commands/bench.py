"""``olsctl bench``: the speed of the simulators against a plain loop on the bundled (or
named, or a built large) logs, and with ``--ols`` the online-simulation controller's share
of a run (:mod:`olsctl.bench` measures; this module prints).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from olsctl.commands import EXIT_OK
from olsctl.errors import ConfigError
from olsctl.workload import BUNDLED, resolve_trace


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
    from olsctl.bench.controller_cost import MQBF_POLICY

    best = "" if args.repeat == 1 else f", best of {args.repeat} in turns"
    policy, name = (MQBF_POLICY, "MQBF(4)/OLS") if args.mqbf else (None, "EASY/OLS")
    table = Table(title=f"{name} ({args.search}, {args.estimates} estimates): wall time "
                        f"with parsing, and the controller's part{best}")
    for col in ("log", "ticks", "what-ifs", "1 job s", "ctl %", "2 jobs s", "ctl %",
                "ctl 2/1"):
        table.add_column(col, justify="right")
    total = 0.0
    for path in paths:
        one, two = bench_ols_turns(str(path), args.search, args.estimates, args.repeat,
                                   policy)
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


def _bench_configs(args: argparse.Namespace, out: Console) -> int:
    """``--configs``: whole runs of the configs on each log, in turns, against the first."""
    from olsctl.bench.configs import bench_configs
    from olsctl.config import load_config

    others = [flag for flag, on in (("--ols", args.ols), ("--mqbf", args.mqbf),
                                    ("--knapsack", args.knapsack), ("--big", args.big),
                                    ("--feedback", args.feedback),
                                    ("--congested", args.congested)) if on]
    if others:
        raise ConfigError(f"command line: --configs: not with {', '.join(others)}")
    if args.estimates != "exact" or args.search != "grid":
        raise ConfigError("command line: --configs: the configs set estimates and the "
                          "search themselves (no --estimates or --search)")
    for config in args.configs:  # (a bad one stops the bench before any run)
        if str(config) in BUNDLED or config.suffix in (".swf", ".gz"):
            raise ConfigError(f"command line: --configs: {config} is a log, not a run "
                              f"config: name the logs before --configs")
        load_config(config)
    logs = [str(resolve_trace(name, Path.cwd())) for name in (args.traces or BUNDLED)]
    names = [str(c) for c in args.configs]
    runs = "" if args.repeat == 1 else f", best of {args.repeat}"
    table = Table(title=f"whole olsctl runs in turns{runs}: seconds, and against "
                        f"{names[0]}", title_justify="left")
    table.add_column("log")
    for name in names:
        table.add_column(name, justify="right")
    for row in bench_configs(args.configs, logs, args.repeat):
        log = _short(Path(row.log).name)
        cells = [f"{t:.2f} s ({r:.2f}x)" for t, r in zip(row.best_s, row.ratios())]
        out.print(f"{log}: " + ", ".join(f"{n} {c}" for n, c in zip(names, cells)),
                  highlight=False, soft_wrap=True)
        table.add_row(log, *cells)
    out.print(table)
    return EXIT_OK


def _short(log: str) -> str:
    """A log's name without its archive version and suffix (``KTH-SP2``)."""
    return log.split("-19")[0].split("-20")[0].removesuffix(".swf").removesuffix(".gz")


def _bench_congested(args: argparse.Namespace, out: Console) -> int:
    """EASY/OLS's (with ``--mqbf``, MQBF/OLS's) cost per tick on the congested synthetic
    log beside a quiet one."""
    from olsctl.bench import bench_congested
    from olsctl.bench.controller_cost import MQBF_POLICY
    from olsctl.synth import CongestedSpec

    quiet = args.traces[0] if args.traces else "KTH-SP2"
    spec = CongestedSpec() if args.congested_jobs is None else \
        CongestedSpec(jobs=args.congested_jobs)
    rows = bench_congested(quiet, spec, repeat=args.repeat, estimates=args.estimates,
                           policy=MQBF_POLICY if args.mqbf else None)
    what = "MQBF/OLS (configs/mqbf-ols.yaml's policy, " if args.mqbf else "EASY/OLS ("
    table = Table(title=f"{what}configs/easy-ols.yaml's controller, {args.estimates} "
                        f"estimates): the controller's cost per tick, best of {args.repeat} "
                        f"in turns", title_justify="left")
    for col in ("log", "ticks", "waiting", "missed SLA", "what-ifs/tick", "controller s",
                "ms/tick"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(_short(r.log), f"{r.ticks:,}", f"{r.mean_waiting:,.1f}", f"{r.misses:,}",
                      f"{r.whatifs_per_tick:.2f}", f"{r.controller_s:.2f}",
                      f"{r.per_tick_ms:.2f}")
    out.print(table)
    out.print("waiting: jobs waiting at a tick, on average", highlight=False)
    congested, calm = rows
    if calm.per_tick_ms > 0:
        out.print(f"congested / {_short(calm.log)}: {congested.per_tick_ms / calm.per_tick_ms:.1f}x "
                  f"per tick", highlight=False)
    return EXIT_OK


def cmd_bench(args: argparse.Namespace, out: Console, err: Console) -> int:
    """``olsctl bench`` (it prints to ``out`` only)."""
    if args.repeat is None:
        args.repeat = 1 if args.ols or args.configs else 3
    if args.repeat < 1:
        raise ConfigError(f"command line: --repeat: must be >= 1 (got {args.repeat})")
    if args.configs:
        return _bench_configs(args, out)
    names = args.traces or ([] if args.big else list(BUNDLED))
    paths = [resolve_trace(name, Path.cwd()) for name in names]
    big_dir = None
    if args.big:
        import tempfile

        from olsctl.bench import make_big_log

        big_dir = tempfile.TemporaryDirectory(prefix="olsctl-big-")
        paths.append(make_big_log(Path(big_dir.name)))
    if args.congested and not args.ols:
        raise ConfigError("command line: --congested: only with --ols")
    if args.congested_jobs is not None:
        if not args.congested:
            raise ConfigError("command line: --congested-jobs: only with --ols --congested")
        if args.congested_jobs < 1:
            raise ConfigError(f"command line: --congested-jobs: must be >= 1 "
                              f"(got {args.congested_jobs})")
    if args.ols and args.mqbf and args.feedback:
        raise ConfigError("command line: --mqbf: with --ols, not with --feedback "
                          "(it times EASY/OLS)")
    try:
        if args.ols and args.congested:
            return _bench_congested(args, out)
        if args.ols:
            return (_bench_feedback if args.feedback else _bench_ols)(paths, args, out)
        rows = [_bench_log(path, args, out) for path in paths]
    finally:
        if big_dir is not None:
            big_dir.cleanup()
    out.print(_bench_table(rows, args))
    from olsctl.bench.simulators import compile_times

    first_s, cached_s = compile_times()
    out.print(f"EASY's compiled kernels: {first_s:.2f} s to compile on a first run (empty "
              f"cache), {cached_s:.2f} s to load once cached", highlight=False)
    return EXIT_OK


def _bench_log(path: Path, args: argparse.Namespace, out: Console):
    """Bench one log (:func:`olsctl.bench.bench_workload`) and print its line."""
    from olsctl.bench import bench_workload
    from olsctl.workload import load_workload

    t0 = time.perf_counter()
    w = load_workload(path)
    parse_s = time.perf_counter() - t0
    row = bench_workload(w, parse_s, args.estimates, args.repeat, args.mqbf, args.knapsack,
                         path)
    line = (f"{row.trace}: {row.jobs} jobs, plain {row.reference_s:.3f} s, "
            f"main {row.main_s:.3f} s ({row.main_ratio:.2f}x, {row.jobs / row.main_s:,.0f} "
            f"jobs/s), what-if {row.whatif_s:.3f} s ({row.whatif_ratio:.2f}x), whole run "
            f"{row.whole_s:.2f} s against plain reading the file {row.plain_whole_s:.2f} s "
            f"({row.whole_ratio:.2f}x), peak {row.peak_mb:.0f} MB, same starts: "
            f"{row.same_schedule}")
    if row.mqbf_s is not None:
        line += f", MQBF(4) {row.mqbf_s:.3f} s ({row.mqbf_ratio:.2f}x EASY)"
    if row.knapsack_s is not None:
        line += (f", knapsack {row.knapsack_s:.3f} s ({row.knapsack_ratio:.2f}x EASY), "
                 f"with throttle {row.throttle_s:.3f} s ({row.throttle_ratio:.2f}x)")
    out.print(line, highlight=False, soft_wrap=True)
    return row


def _bench_table(rows: list, args: argparse.Namespace) -> Table:
    """One column per log, one row per figure (stays readable in 80 columns)."""
    table = Table(title=f"olsctl bench: EASY-FCFS, {args.estimates} estimates, "
                        f"best of {args.repeat}", title_justify="left",
                  caption="whole run: olsctl run as a process of its own (start, parse, "
                          "simulate, write; peak: its resident memory), against the plain "
                          "loop reading the file itself, in turns; below: simulation only",
                  caption_justify="left")
    table.add_column("")
    for row in rows:
        table.add_column(_short(row.trace), justify="right")
    figures = [
        ("jobs", lambda r: f"{r.jobs:,}"),
        ("whole run s", lambda r: f"{r.whole_s:.2f}"),
        ("plain + read s", lambda r: f"{r.plain_whole_s:.2f}"),
        ("whole / plain", lambda r: f"{r.whole_ratio:.2f}x"),
        ("peak MB", lambda r: f"{r.peak_mb:,.0f}"),
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
