"""The power forecast of a what-if: the machine's energy, mean and peak power over the
coming interval, from the start times the what-if gave (used by trial scoring for power
costs and to tell a cap that could not be kept).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from olsctl.state import SimState, Snapshot


class ForecastSpan(Protocol):
    """What a forecast needs of a what-if's task
    (:class:`olsctl.controller.scoring.WhatIfTask` is one)."""

    #: how far ahead the forecast looks, s
    power_s: float
    #: energy to wake one sleeping processor, J
    wake_energy_j: float


def power_forecast(snap: Snapshot, state: SimState, task: ForecastSpan,
                   active: int) -> tuple[float, float, float]:
    """Energy (J), mean and peak power (W) of the machine over [now, now + power_s] in
    the what-if: for energy and mean power every job at its profile's mean power, for
    the peak at its profile's maximum (what a cap must allow for); idle active
    processors at idle power, the rest asleep, plus the wakes the candidate needs."""
    p = state.power
    now = snap.now_s
    end = now + task.power_s
    procs, start, runtime = state.procs, state.start_s, state.runtime_s
    mean_w, max_w = p.true_mean_w, p.true_max_w
    n_power = len(mean_w)
    events: dict[float, list[float]] = {}  # time -> [d busy procs, d watts, d max watts]
    for j, s in enumerate(start):
        if s != s or s >= end or j >= n_power:
            continue
        e = s + runtime[j]
        if e <= now:
            continue
        w, top = procs[j] * mean_w[j], procs[j] * max_w[j]
        a = events.setdefault(max(s, now), [0.0, 0.0, 0.0])
        a[0] += procs[j]
        a[1] += w
        a[2] += top
        if e < end:
            b = events.setdefault(e, [0.0, 0.0, 0.0])
            b[0] -= procs[j]
            b[1] -= w
            b[2] -= top
    total = snap.total_procs
    busy = busy_w = busy_top = 0.0
    energy = 0.0
    peak = 0.0
    times = sorted(events)
    times.append(end)
    t_prev = now
    for t in times:
        if t > t_prev:
            idle = active - busy if active > busy else 0.0
            asleep = total - (active if active > busy else busy)
            rest = p.idle_w * idle + p.sleep_w * asleep
            energy += (busy_w + rest) * (t - t_prev)
            top = busy_top + rest
            peak = top if top > peak else peak
            t_prev = t
        d = events.get(t)
        if d is not None:
            busy += d[0]
            busy_w += d[1]
            busy_top += d[2]
    energy += task.wake_energy_j * max(0, active - snap.active_procs)
    return energy, energy / task.power_s, peak
