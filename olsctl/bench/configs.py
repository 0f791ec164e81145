"""``olsctl bench --configs A.yaml B.yaml ...``: whole runs of run configs on the same
logs, each ``olsctl run CONFIG --trace LOG`` a process of its own, in turns (A, B, A, B,
...), so that a slow spell of the machine falls on all of them; each config's fastest
time, and its ratio to the first config's. This is how a claim such as "the cap
controller costs at most 3x the processor controller" is measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from olsctl.bench.reference import timed_run


@dataclass
class ConfigTimes:
    """The configs' fastest whole-run times (s) on one log, in the configs' order."""

    log: str
    best_s: list[float]

    def ratios(self) -> list[float]:
        """Each time over the first config's."""
        first = self.best_s[0]
        return [t / first if first > 0 else float("nan") for t in self.best_s]


def bench_configs(configs: list[Path], logs: list[str], repeat: int = 1,
                  run: Callable[[list[str]], tuple[float, float]] = timed_run,
                  warm_up: bool = True) -> list[ConfigTimes]:
    """Each of ``configs`` on each of ``logs``, ``repeat`` times in turns; with
    ``warm_up``, first one untimed run of each config on the first log, so that no timed
    run pays for compiling the kernels or for a cold file cache. ``run`` runs ``olsctl
    run`` with the arguments it is given and returns (wall s, peak MB)."""
    if warm_up and logs:
        for config in configs:
            run([str(config), "--trace", logs[0]])
    rows = []
    for log in logs:
        best = [float("inf")] * len(configs)
        for _ in range(repeat):
            for i, config in enumerate(configs):
                wall, _ = run([str(config), "--trace", log])
                best[i] = min(best[i], wall)
        rows.append(ConfigTimes(log, best))
    return rows
