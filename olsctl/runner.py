"""One run from a validated config: load, simulate, measure, write.

All input is read and checked before anything is written, so bad input never leaves a
half-written output directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from olsctl import __version__
from olsctl.checker import NULL_CHECKER, StrictChecker
from olsctl.config import RunConfig
from olsctl.errors import ConfigError, TraceError
from olsctl.metrics import job_columns, summarize, weekly
from olsctl.output import write_run
from olsctl.policies import make_policy
from olsctl.sim import NULL_PROGRESS, MainSimulator, Progress
from olsctl.workload import load_workload, resolve_trace


@dataclass
class RunResult:
    summary: dict
    out_dir: Path
    files: list[Path]


class _RichProgress(Progress):
    def __init__(self, bar) -> None:
        self.bar = bar
        self.task = None

    def update(self, done: int, total: int, now_s: float) -> None:
        if self.task is None:
            self.task = self.bar.add_task("run", total=total)
        self.bar.update(self.task, completed=done)


def execute(config: RunConfig, progress_bar=None) -> RunResult:
    """Run ``config`` and write its outputs; ``progress_bar`` is a rich Progress or None."""
    try:
        path = resolve_trace(config.trace, config.base_dir)
    except TraceError as exc:
        if config.source in ("<defaults>", "command line"):
            raise
        where = config.base_dir or Path.cwd()
        raise TraceError(f"{config.source}: trace: {exc.args[0]} (looked in {where})") from None
    workload = load_workload(path, config.procs, config.skip_bad_lines)
    active = config.active_procs
    if active is not None and active > workload.machine_procs:
        raise ConfigError(f"{config.source}: active_procs: must be <= the machine's "
                          f"{workload.machine_procs} processors (got {active})")
    policy = make_policy(config.policy)
    check = getattr(policy, "check_jobs", None)
    if check is not None:
        problem = check(workload.job_id.tolist(), workload.procs.tolist(),
                        workload.estimate_s(config.estimates).tolist(),
                        workload.machine_procs if active is None else active)
        if problem is not None:
            raise ConfigError(f"{config.source}: policy.{problem}")
    checker = StrictChecker() if config.strict else NULL_CHECKER
    estimates = workload.estimate_s(config.estimates)
    if progress_bar is not None:
        with progress_bar:
            sim = MainSimulator(workload, policy, estimates, active, checker,
                                _RichProgress(progress_bar))
            records = sim.run()
    else:
        records = MainSimulator(workload, policy, estimates, active, checker,
                                NULL_PROGRESS).run()

    header = workload.header
    summary = {
        "olsctl": __version__,
        "trace": workload.name,
        "config": config.as_dict(),
        "load": workload.report.as_dict(),
        "active_procs_at_start": workload.machine_procs if active is None else active,
        "strict_checks": checker.starts_checked if config.strict else None,
        "metrics": summarize(records),
        "weekly": weekly(records, header.first_int("UnixStartTime"),
                         header.first_int("TimeZone")),
    }
    out_dir = Path(config.out)
    files = write_run(out_dir, job_columns(records), records.samples, summary)
    return RunResult(summary, out_dir, files)
