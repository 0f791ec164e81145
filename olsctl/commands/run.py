"""``olsctl run`` (a run from its config and the command line's options, with a summary
of what it measured and checked) and ``olsctl monitor`` (the dashboard of a run writing
its feed).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console

from olsctl.api import run_config
from olsctl.commands import EXIT_OK, say_on
from olsctl.config import RunConfig
from olsctl.config.building import parse_settings


def _run_config(args: argparse.Namespace) -> RunConfig:
    """The run's config as :func:`olsctl.run` builds it: the file, then the options (a
    ``--trace`` path is relative to the working directory), then ``--policy`` (that is
    ``--set policy.name``) and the ``--set`` settings, checked together whatever their
    order."""
    options = {
        "trace": args.trace, "procs": args.procs, "estimates": args.estimates,
        "out": args.out, "strict": args.strict, "skip_bad_lines": args.skip_bad_lines,
    }
    named = [] if args.policy is None else [("policy.name", args.policy)]
    return run_config(args.config or None, {k: v for k, v in options.items() if v is not None},
                      named + parse_settings(args.set), "command line")


def cmd_run(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run the config (with the command line's options) and print what it measured."""
    from olsctl.policies.core.jit import silent
    from olsctl.runner import execute

    config = _run_config(args)
    live = None
    if args.live or args.feed or args.pace is not None:
        from olsctl.live import live_run
        live = live_run(config, out, args.live, args.feed, args.pace)
    progress = None
    if not args.quiet and err.is_terminal and not args.live:
        from olsctl.terminal import job_progress
        progress = job_progress(err)
    elif not args.quiet and not args.live:  # a pipe or a file: a plain line now and then
        from olsctl.runner import PlainProgress
        progress = PlainProgress(say_on(err))
    t0 = time.perf_counter()
    try:
        result = execute(config, progress, live, silent if args.quiet else say_on(err))
    except BaseException as exc:
        if live is not None:
            live.close(exc)  # the feed's end record: failed or interrupted
        raise
    if live is not None:
        live.close()
    wall = time.perf_counter() - t0
    if not args.quiet:
        from olsctl.terminal import run_summary_table
        out.print(run_summary_table(result.summary))
        names = [p.name for p in result.files]
        if args.live or args.feed:  # the feed, written as the run went
            from olsctl.live import FEED_NAME
            names.append(FEED_NAME)
        out.print(f"wrote {', '.join(names)} to {result.out_dir} in {wall:.1f} s",
                  highlight=False, markup=False, soft_wrap=True)
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


def _strict_text(summary: dict) -> str:
    """What ``--strict`` checked in a run that passed, and what it did not (a cap that
    only a power limit holds, a policy's own power budget)."""
    from olsctl.terminal import _pct, capped

    parts = [f"strict: {summary['strict_checks']:,} starts checked (each job started once, "
             f"waiting and submitted, within the active processors; every finish running)"]
    controller = summary.get("controller") or {}
    if controller:
        parts.append(f"under the settings the controller applied "
                     f"({controller.get('changes', 0):,} changes in "
                     f"{controller.get('ticks', 0):,} ticks)")
    power = summary.get("power") or {}
    if power.get("limit") == "throttle":
        parts.append("power never above the cap in force (the limit held)")
    elif power and capped(power):
        parts.append(f"the power cap not checked: not enforced without power.limit, the "
                     f"scheduler may pass it (capping success rate {_pct(power.get('csr'))})")
    budget = summary.get("budget") or {}
    if budget:
        parts.append(f"the power budget is the policy's own, not checked here (its success "
                     f"rate is {_pct(budget.get('csr'))})")
    pivots = summary.get("pivots") or {}
    if "late_pivots" in pivots:
        parts.append(f"{pivots['late_pivots']:,} of {pivots['pivots']:,} pivots started "
                     f"later than a reservation they had held (worst by "
                     f"{pivots['max_pivot_delay_s']:g} s)")
    return "; ".join(parts)


def cmd_monitor(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Exit 0 when the run finished (or on Ctrl-C), 1 when it failed, was interrupted or
    is gone (killed on this host: no end record, and its process no longer exists)."""
    from olsctl.live import monitor, view_for

    try:
        end = monitor(Path(args.dir), view_for(out), args.replay, args.speed, say=say_on(err))
    except KeyboardInterrupt:
        return EXIT_OK
    if end["status"] != "finished":
        what = {"interrupted": "was interrupted", "gone": "is gone"}.get(end["status"],
                                                                         end["status"])
        err.print(f"{args.dir}: the run {what}"
                  + (f": {end['error']}" if end.get("error") else ""),
                  markup=False, highlight=False, soft_wrap=True)
        return 1
    return EXIT_OK
