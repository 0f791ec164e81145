"""Synthetic job logs: seeded, deterministic SWF files for studies and benchmarks.

Here belongs :func:`congested_swf`, a log whose machine is offered more work than it can
do (load 1.3 to 2), half of its jobs wide (up to half the machine, a minute to a day and
a half long) among short narrow ones: its queue grows for weeks (with the defaults and
EASY/OLS, to some 750 jobs waiting, and takes weeks more to drain), which is where an
online-simulation controller finds that no candidate meets the SLA, tick after tick.
Nothing here simulates.

The draws come from :class:`random.Random`'s ``random()`` alone (its stream for an
integer seed does not change between Python versions) and every number is written as an
integer, so the same arguments give the same bytes.
"""

from __future__ import annotations

import math
import os
import random
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CongestedSpec:
    """What :func:`congested_swf` draws: ``jobs`` jobs on ``procs`` processors at an
    offered ``load`` (total work over the machine's capacity over the submission span).

    A job is wide with probability ``wide_share``: ``procs`` / 8 to ``procs`` / 2
    processors, runtime log-uniform in ``wide_runtime_s``; else narrow: 1 to ``procs`` /
    16 processors (log-uniform), runtime log-uniform in ``narrow_runtime_s``. Gaps
    between submissions are exponential, scaled so the load is exactly ``load``. The
    user estimate is the runtime times a factor log-uniform in [1, ``overestimate``]."""

    jobs: int = 4000
    procs: int = 128
    load: float = 1.8
    wide_share: float = 0.5
    wide_runtime_s: tuple[float, float] = (60.0, 36.0 * 3600.0)
    narrow_runtime_s: tuple[float, float] = (60.0, 4.0 * 3600.0)
    overestimate: float = 4.0

    def check(self) -> None:
        """Raise ValueError on settings that cannot give such a log."""
        if self.jobs < 1:
            raise ValueError(f"jobs: must be >= 1 (got {self.jobs})")
        if self.procs < 16:
            raise ValueError(f"procs: must be >= 16 (got {self.procs})")
        if not 0 < self.load < math.inf:
            raise ValueError(f"load: must be a number > 0 (got {self.load})")
        if not 0.0 <= self.wide_share <= 1.0:
            raise ValueError(f"wide_share: must be in [0, 1] (got {self.wide_share})")
        for name in ("wide_runtime_s", "narrow_runtime_s"):
            lo, hi = getattr(self, name)
            if not 1.0 <= lo <= hi:
                raise ValueError(f"{name}: must be 1 <= low <= high (got {lo}, {hi})")
        if self.overestimate < 1.0:
            raise ValueError(f"overestimate: must be >= 1 (got {self.overestimate})")


def _log_uniform(rng: random.Random, lo: float, hi: float) -> float:
    return lo * math.exp(rng.random() * math.log(hi / lo))


def congested_jobs(spec: CongestedSpec, seed: int = 0) -> list[tuple[int, int, int, int]]:
    """The jobs of :func:`congested_swf`: (submit s, runtime s, processors, estimate s),
    in submission order, the first submitted at 0."""
    spec.check()
    rng = random.Random(seed)
    drawn = []
    for _ in range(spec.jobs):
        gap = -math.log(1.0 - rng.random())  # exponential, mean 1 (scaled below)
        if rng.random() < spec.wide_share:
            procs = int(_log_uniform(rng, spec.procs / 8, spec.procs / 2 + 1))
            runtime = _log_uniform(rng, *spec.wide_runtime_s)
        else:
            procs = int(_log_uniform(rng, 1, spec.procs / 16 + 1))
            runtime = _log_uniform(rng, *spec.narrow_runtime_s)
        runtime_s = max(1, round(runtime))
        estimate_s = max(runtime_s, round(runtime_s * _log_uniform(rng, 1.0, spec.overestimate)))
        drawn.append((gap, runtime_s, min(procs, spec.procs), estimate_s))
    work = sum(r * p for _, r, p, _ in drawn)
    # the span over which this work is offered at the given load
    span_s = work / (spec.procs * spec.load)
    gaps = [g for g, _, _, _ in drawn[1:]]
    scale = span_s / sum(gaps) if gaps and sum(gaps) > 0 else 0.0
    out, t = [], 0.0
    for k, (_, runtime_s, procs, estimate_s) in enumerate(drawn):
        if k:
            t += gaps[k - 1] * scale
        out.append((round(t), runtime_s, procs, estimate_s))
    return out


def congested_swf(path: str | Path, spec: CongestedSpec | None = None, seed: int = 0) -> Path:
    """Write a congested synthetic log (see :class:`CongestedSpec`) to ``path`` as SWF;
    the same ``spec`` and ``seed`` give the same bytes. Returns the path."""
    spec = spec or CongestedSpec()
    jobs = congested_jobs(spec, seed)
    users = 24
    lines = [
        "; Version: 2.2",
        f"; Note: olsctl synthetic congested log: seed {seed}, {spec.jobs} jobs, "
        f"offered load {spec.load:g}, wide share {spec.wide_share:g}",
        f"; MaxJobs: {spec.jobs}",
        f"; MaxRecords: {spec.jobs}",
        f"; MaxProcs: {spec.procs}",
        f"; MaxNodes: {spec.procs}",
    ]
    rng = random.Random(seed + 1)  # users only: the jobs' draws do not depend on it
    for k, (submit_s, runtime_s, procs, estimate_s) in enumerate(jobs, start=1):
        user = 1 + int(rng.random() * users)
        lines.append(f"{k} {submit_s} -1 {runtime_s} {procs} -1 -1 {procs} {estimate_s} "
                     f"-1 1 {user} 1 -1 1 -1 -1 -1")
    path = Path(path)
    part = path.with_name(path.name + ".part")  # written whole, then renamed: never half
    try:
        part.write_text("\n".join(lines) + "\n", encoding="ascii")
        os.replace(part, path)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return path
