"""Power caps: a constant cap, or a schedule of changes over simulated time.

A cap is given in watts or as a fraction of the machine's peak power. A schedule is a
list of changes at strictly increasing times, in seconds after the trace's first
submission (``at_s``); the first entry holds from the start whatever its time.
``cap_at(t)`` is the cap in force at trace time ``t`` (a change counts from its time on).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Any

from olsctl.errors import ConfigError


@dataclass(frozen=True)
class CapSchedule:
    """Cap changes: ``times_s[i]`` starts ``caps_w[i]`` (``times_s[0]`` is -inf)."""

    times_s: tuple[float, ...]
    caps_w: tuple[float, ...]

    def cap_at(self, t: float) -> float:
        return self.caps_w[bisect_right(self.times_s, t) - 1]

    def next_change_s(self, t: float) -> float:
        """The first change after ``t`` (inf: none left)."""
        i = bisect_right(self.times_s, t)
        return self.times_s[i] if i < len(self.times_s) else float("inf")

    @classmethod
    def constant(cls, cap_w: float) -> "CapSchedule":
        return cls((float("-inf"),), (float(cap_w),))

    @property
    def uncapped(self) -> bool:
        return all(c == float("inf") for c in self.caps_w)


def parse_cap(spec: Any, peak_w: float, where: str, origin_s: float = 0.0) -> CapSchedule:
    """A cap from config: ``null`` (none), a number of watts, ``{fraction: f}``,
    ``{watts: w}``, or ``{schedule: [{at_s: t, fraction|watts: v}, ...]}``."""
    if spec is None:
        return CapSchedule.constant(float("inf"))
    if isinstance(spec, bool):
        raise ConfigError(f"{where}: must be watts, {{fraction: f}} or a schedule (got {spec!r})")
    if isinstance(spec, (int, float)):
        return CapSchedule.constant(_watts({"watts": spec}, peak_w, where))
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: must be watts, {{fraction: f}} or a schedule (got {spec!r})")
    if "schedule" not in spec:
        return CapSchedule.constant(_watts(spec, peak_w, where))
    unknown = set(spec) - {"schedule"}
    if unknown:
        raise ConfigError(f"{where}.{sorted(unknown)[0]}: unknown key beside schedule")
    steps = spec["schedule"]
    if not isinstance(steps, list) or not steps:
        raise ConfigError(f"{where}.schedule: must be a non-empty list of changes")
    times, caps = [float("-inf")], []
    last = None
    for i, step in enumerate(steps):
        here = f"{where}.schedule[{i}]"
        if not isinstance(step, dict) or "at_s" not in step:
            raise ConfigError(f"{here}: must be a mapping with at_s and fraction or watts")
        at = step["at_s"]
        if isinstance(at, bool) or not isinstance(at, (int, float)):
            raise ConfigError(f"{here}.at_s: must be a number of seconds (got {at!r})")
        if last is not None and at <= last:
            raise ConfigError(f"{here}.at_s: changes must be in increasing time order "
                              f"({at:g} after {last:g})")
        rest = {k: v for k, v in step.items() if k != "at_s"}
        caps.append(_watts(rest, peak_w, here))
        if i > 0:
            times.append(origin_s + float(at))
        last = at
    return CapSchedule(tuple(times), tuple(caps))


def _watts(spec: dict, peak_w: float, where: str) -> float:
    keys = set(spec)
    if keys == {"fraction"}:
        f = spec["fraction"]
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 10:
            raise ConfigError(f"{where}.fraction: must be a number in (0, 10] (got {f!r})")
        return float(f) * peak_w
    if keys == {"watts"}:
        v = spec["watts"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise ConfigError(f"{where}.watts: must be a number > 0 (got {v!r})")
        return float(v)
    raise ConfigError(f"{where}: give exactly one of fraction or watts (got "
                      f"{', '.join(sorted(keys)) or 'nothing'})")
