"""The commands on input logs: ``olsctl trace info`` (a log's summary), ``olsctl trace
congested`` (a congested synthetic log) and ``olsctl convert`` (other logs as SWF).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from olsctl.commands import EXIT_OK, counted
from olsctl.errors import ConfigError
from olsctl.workload import resolve_trace


def cmd_trace_info(args: argparse.Namespace, out: Console, err: Console) -> int:
    """``olsctl trace info``: a log's summary, as tables or JSON."""
    import json

    from olsctl.terminal import trace_info_view
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
            from olsctl.terminal import power_info_view

            out.print(power_info_view(info["power"]))
    return EXIT_OK


def cmd_trace_congested(args: argparse.Namespace, out: Console, err: Console) -> int:
    """``olsctl trace congested``: the congested synthetic log (:mod:`olsctl.synth`) as
    SWF, written whole or not at all."""
    from olsctl.synth import CongestedSpec, congested_swf

    spec = CongestedSpec(jobs=args.jobs, procs=args.procs, load=args.load)
    try:
        spec.check()
    except ValueError as exc:  # "jobs: must be >= 1 (got 0)"
        raise ConfigError(f"command line: --{exc}") from None
    path = Path(args.file)
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory, not a file to write")
    if path.exists() and not args.force:
        raise ConfigError(f"{path}: already exists (--force overwrites it)")
    if not path.parent.is_dir():
        raise ConfigError(f"{path}: directory {path.parent} does not exist")
    try:
        congested_swf(path, spec, args.seed)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write: {exc.strerror or exc}") from None
    out.print(f"wrote {path} ({spec.jobs:,} jobs on {spec.procs:,} processors, offered load "
              f"{spec.load:g}, seed {args.seed})", highlight=False, markup=False,
              soft_wrap=True)
    return EXIT_OK


def cmd_convert_nrel(args: argparse.Namespace, out: Console, err: Console) -> int:
    """``olsctl convert nrel``: the NREL job power log as SWF and a power CSV."""
    from olsctl.power.nrel import convert

    counts = convert(Path(args.source), Path(args.swf), Path(args.power))
    out.print(f"wrote {args.swf} ({counted(counts['jobs'], 'job')}, "
              f"{counted(counts['machine_procs'], 'processor')}) and {args.power} "
              f"({counted(counts['measured'], 'measured power')})",
              highlight=False, markup=False, soft_wrap=True)
    return EXIT_OK


def cmd_convert_slurm(args: argparse.Namespace, out: Console, err: Console) -> int:
    """``olsctl convert slurm``: a Slurm accounting dump as SWF (and a key of names)."""
    from olsctl.slurm import convert

    key = Path(args.key) if args.key else None
    conv = convert(Path(args.source), Path(args.swf), key, args.procs, args.units, args.tz,
                   args.skip_bad_lines)
    for note in conv.notes:  # (a dump not in UTF-8, optional columns missing)
        err.print(note, highlight=False, markup=False, soft_wrap=True)
    also = f" and {args.key}" if args.key else ""
    out.print(f"wrote {args.swf}{also} (MaxProcs {conv.machine_procs:,}, from "
              f"{conv.machine_from}): {conv.summary()}",
              highlight=False, markup=False, soft_wrap=True)
    return EXIT_OK
