"""Machine power and energy from a run's records (records first, metrics after).

Per processor: a busy one draws its job's power (the job's phase at that time), an idle
active one ``idle_w``, one beyond the active count ``sleep_w`` once idle (running jobs are
never stopped, so a processor beyond the count keeps its job's power until the job
ends). Raising the active count wakes sleeping processors: each wake costs
``wake_energy_j``, drawn evenly over ``wake_latency_s`` on top of the processor's state
(at once when the latency is 0). The woken processor counts as active immediately, or,
when the simulator modelled the latency (the controller's raises wait for it), the
raise in the records is when the wake ends and its energy is drawn over the latency
before it.

Machine power is piecewise constant, so energy is integrated exactly. Samples cover
fixed intervals of ``sample_s`` from the first submission: each has the interval's mean
power (energy / length) and its peak. The capping success rate (CSR) is the share of
intervals in which the power never exceeds the cap in force.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from olsctl.power.cap import CapSchedule
from olsctl.power.profiles import PowerProfiles
from olsctl.records import RunRecords


@dataclass(frozen=True)
class MachinePower:
    """Per-processor power states of the machine (watts, seconds, joules)."""

    idle_w: float = 250.0
    peak_w: float = 1150.0
    sleep_w: float = 20.0
    wake_latency_s: float = 60.0
    wake_energy_j: float = 30_000.0
    sample_s: float = 300.0


@dataclass(frozen=True)
class PowerTimeline:
    """Machine power as segments: ``power_w[i]`` holds on ``[times_s[i], times_s[i+1])``;
    the parts of the energy are kept apart for bookkeeping."""

    times_s: np.ndarray
    power_w: np.ndarray
    cap_w: np.ndarray
    energy_j: float
    job_energy_j: float
    idle_energy_j: float
    sleep_energy_j: float
    wake_energy_j: float
    wakes: int

    @property
    def span_s(self) -> float:
        return float(self.times_s[-1] - self.times_s[0])


def timeline(records: RunRecords, profiles: PowerProfiles, index_of: dict[int, int],
             machine: MachinePower, cap: CapSchedule,
             wake_before: bool = False, job_log=None) -> PowerTimeline:
    """Build the machine power over the run; ``index_of`` maps job id -> profile row.

    With ``wake_before`` the simulator made woken processors usable only once awake, so
    a raise of the active count in the records marks the end of the wake: its energy is
    drawn over the ``wake_latency_s`` before it. ``job_log = (times, watts)`` gives the
    jobs' power as the simulator drew it (changes of the jobs' total power, under a power
    limit that throttled them) instead of their profiles over their records."""
    total = records.total_procs
    if not records.jobs:
        raise ValueError("no job ran: there is no power timeline to build")
    if job_log is not None:
        events = _logged_job_events(records.jobs, job_log)
    else:
        events = _profile_job_events(records.jobs, profiles, index_of)
    seg_t, busy_pow, busy, active, released, t0, t_end = _steps(records, cap, *events)
    busy_before = np.concatenate(([0.0], busy[:-1]))
    active_before = np.concatenate(([float(total)], active[:-1]))
    raised = active > active_before
    woken = np.where(raised, np.maximum(0.0, active - np.maximum(active_before,
                                                                 busy_before - released)), 0.0)
    idle = np.maximum(active - busy, 0.0)
    sleeping = total - np.maximum(active, busy)
    length = np.diff(seg_t)  # the last segment ends the run
    base_pow = busy_pow + machine.idle_w * idle + machine.sleep_w * sleeping
    wakes = int(round(woken.sum()))
    wake_j = wakes * machine.wake_energy_j
    power = base_pow[:-1].copy()
    seg_times = seg_t
    if wakes and machine.wake_latency_s > 0:
        begin = seg_t[woken > 0] - (machine.wake_latency_s if wake_before else 0.0)
        bump_w = woken[woken > 0] * machine.wake_energy_j / machine.wake_latency_s
        starts = np.maximum(begin, t0)
        seg_times, power = _add_bumps(seg_t, power, starts, bump_w, machine.wake_latency_s,
                                      t_end)
        # a wake still under way when the run ends draws the rest of its energy too
        late_j = float((bump_w * np.maximum(0.0, starts + machine.wake_latency_s - t_end)).sum())
    else:
        late_j = 0.0
    caps = np.array([cap.cap_at(t) for t in seg_times[:-1]])
    job_j = float((busy_pow[:-1] * length).sum())
    idle_j = float((machine.idle_w * idle[:-1] * length).sum())
    sleep_j = float((machine.sleep_w * sleeping[:-1] * length).sum())
    energy = float((power * np.diff(seg_times)).sum()) + late_j
    if machine.wake_latency_s <= 0:
        energy += wake_j
    return PowerTimeline(seg_times, power, caps, energy, job_j, idle_j, sleep_j, wake_j, wakes)


#: a run's job events: (times, busy power deltas (W), busy processor deltas, processors
#: released), each a list of arrays of the same sizes
JobEvents = tuple[list, list, list, list]


def _logged_job_events(jobs: list, job_log: tuple) -> JobEvents:
    """The jobs' events with their power as the simulator logged it (changes of the
    jobs' total power) instead of their profiles."""
    start = np.array([r.start_s for r in jobs])
    end = np.array([r.end_s for r in jobs])
    procs = np.array([r.procs for r in jobs], dtype=float)
    log_t = np.asarray(job_log[0], dtype=float)
    return ([start, end, log_t],
            [np.zeros(start.size), np.zeros(end.size), np.asarray(job_log[1], dtype=float)],
            [procs, -procs, np.zeros(log_t.size)],
            [np.zeros(start.size), procs, np.zeros(log_t.size)])


def _profile_job_events(jobs: list, profiles: PowerProfiles,
                        index_of: dict[int, int]) -> JobEvents:
    """The jobs' events from their power profiles: each phase's start changes the
    job's power (the first also takes its processors), its end gives both back."""
    start = np.array([r.start_s for r in jobs])
    end = np.array([r.end_s for r in jobs])
    run = np.array([r.runtime_s for r in jobs])
    procs = np.array([r.procs for r in jobs], dtype=float)
    rows = np.array([index_of[r.job_id] for r in jobs])
    a, b = profiles.offset[rows], profiles.offset[rows + 1]
    counts = b - a
    flat = np.concatenate([np.arange(x, y) for x, y in zip(a.tolist(), b.tolist())])
    owner = np.repeat(np.arange(len(jobs)), counts)
    frac = profiles.fraction[flat]
    level = profiles.power_w[flat]
    # phase k starts at start + runtime x (sum of the fractions before it)
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    # within-job sums of the fractions before each phase (exactly 0 for the first)
    cf = np.cumsum(frac)
    cum = (cf - frac) - np.repeat((cf - frac)[first], counts)
    phase_t = start[owner] + run[owner] * cum
    prev = np.concatenate(([0.0], level[:-1]))
    prev[first] = 0.0
    return ([phase_t, end],
            [procs[owner] * (level - prev), -procs * level[np.cumsum(counts) - 1]],
            [np.where(np.isin(np.arange(flat.size), first), procs[owner], 0.0), -procs],
            [np.zeros(flat.size), procs])


def _steps(records: RunRecords, cap: CapSchedule, t_ev: list, p_ev: list, b_ev: list,
           end_ev: list) -> tuple:
    """The instants at which the machine changes (job events, active-count changes, cap
    changes) from the first to the last, with the busy power (W), busy and active
    processors from each, the processors released at each, and the first and last
    instants (t0, t_end)."""
    total = records.total_procs
    s = records.samples
    st = np.asarray(s.time_s, dtype=float)
    act = np.asarray(s.active_procs, dtype=float)
    change = np.concatenate(([True], act[1:] != act[:-1])) if st.size else np.zeros(0, bool)
    act_t, act_v = st[change], act[change]
    act_d = np.diff(np.concatenate(([float(total)], act_v)))
    t0 = float(min(st[0] if st.size else np.inf, *(x.min() for x in t_ev if x.size)))
    t_end = float(max(x.max() for x in t_ev if x.size))
    keep = act_t < t_end  # the run ends with its last job; later changes do not count
    act_t, act_d = act_t[keep], act_d[keep]
    cap_t = np.array([t for t in cap.times_s if t0 < t < t_end])

    times = np.concatenate(t_ev + [act_t, cap_t, [t0, t_end]])
    d_pow = np.concatenate(p_ev + [np.zeros(act_t.size + cap_t.size + 2)])
    d_busy = np.concatenate(b_ev + [np.zeros(act_t.size + cap_t.size + 2)])
    d_act = np.concatenate([np.zeros(sum(x.size for x in t_ev)), act_d,
                            np.zeros(cap_t.size + 2)])
    d_end = np.concatenate(end_ev + [np.zeros(act_t.size + cap_t.size + 2)])
    order = np.argsort(times, kind="stable")
    times, d_pow, d_busy, d_act, d_end = (x[order] for x in (times, d_pow, d_busy, d_act, d_end))
    last = np.concatenate((times[1:] != times[:-1], [True]))
    busy_pow = np.cumsum(d_pow)[last]
    busy = np.round(np.cumsum(d_busy)[last])
    active = float(total) + np.cumsum(d_act)[last]
    # processors released at each instant, to know how many sleepers a raise wakes
    released = np.add.reduceat(d_end, np.flatnonzero(np.concatenate(([True], last[:-1]))))
    return times[last], busy_pow, busy, active, released, t0, t_end


def _add_bumps(seg_t, power, starts, bump_w, latency, t_end):
    """Add ``bump_w[i]`` over ``[starts[i], starts[i] + latency)`` (cut at ``t_end``)."""
    ends = np.minimum(starts + latency, t_end)
    cut = np.unique(np.concatenate((seg_t, ends)))
    idx = np.searchsorted(seg_t, cut[:-1], side="right") - 1
    new_power = power[idx].copy()
    for a, b, w in zip(starts.tolist(), ends.tolist(), bump_w.tolist()):
        on = (cut[:-1] >= a) & (cut[:-1] < b)
        new_power[on] += w
    return cut, new_power


@dataclass(frozen=True)
class PowerSamples:
    time_s: np.ndarray
    mean_w: np.ndarray
    peak_w: np.ndarray
    cap_w: np.ndarray
    within_cap: np.ndarray


def samples(tl: PowerTimeline, sample_s: float) -> PowerSamples:
    """Fixed intervals of ``sample_s`` from the start: mean and peak power, the lowest
    cap in force, and whether power stayed within the cap throughout."""
    t0, t1 = float(tl.times_s[0]), float(tl.times_s[-1])
    n = max(1, int(np.ceil((t1 - t0) / sample_s)))
    bounds = t0 + sample_s * np.arange(n + 1)
    bounds[-1] = max(bounds[-1], t1)
    energy = np.concatenate(([0.0], np.cumsum(tl.power_w * np.diff(tl.times_s))))

    def energy_at(t: np.ndarray) -> np.ndarray:
        k = np.clip(np.searchsorted(tl.times_s, t, side="right") - 1, 0, tl.power_w.size - 1)
        return energy[k] + tl.power_w[k] * (t - tl.times_s[k])

    e = energy_at(np.minimum(bounds, t1))
    length = np.minimum(bounds[1:], t1) - bounds[:-1]
    mean = np.divide(np.diff(e), length, out=np.zeros(n), where=length > 0)
    last_seg = tl.power_w.size - 1
    first = np.clip(np.searchsorted(tl.times_s, bounds[:-1], side="right") - 1, 0, last_seg)
    # reduceat covers segments first[i] .. first[i+1]-1; the segment holding the next
    # boundary also overlaps interval i when it starts before that boundary
    nxt = np.concatenate((first[1:], [last_seg]))
    spill = tl.times_s[nxt] < bounds[1:]

    def per_interval(values: np.ndarray, op) -> np.ndarray:
        out = op.reduceat(values, first)
        return np.where(spill, op(out, values[nxt]), out)

    peak = per_interval(tl.power_w, np.maximum)
    over = per_interval(tl.power_w - tl.cap_w, np.maximum)
    caps = per_interval(tl.cap_w, np.minimum)
    # within the cap up to the rounding of summed power changes (a limit holds it exactly)
    return PowerSamples(bounds[:-1], mean, peak, caps, over <= 1e-9 * np.abs(caps))


def summary(tl: PowerTimeline, smp: PowerSamples) -> dict:
    return {
        "energy_j": tl.energy_j,
        "job_energy_j": tl.job_energy_j,
        "idle_energy_j": tl.idle_energy_j,
        "sleep_energy_j": tl.sleep_energy_j,
        "wake_energy_j": tl.wake_energy_j,
        "wakes": tl.wakes,
        "mean_power_w": tl.energy_j / tl.span_s if tl.span_s > 0 else 0.0,
        "peak_power_w": float(tl.power_w.max()) if tl.power_w.size else 0.0,
        "csr": float(smp.within_cap.mean()) if smp.within_cap.size else 1.0,
        **_mean_cap(tl),
    }


def _mean_cap(tl: PowerTimeline) -> dict:
    """``mean_cap_w``: the time-mean of the cap in force (what a controller that moves
    the cap leaves the machine), when every cap is finite."""
    if tl.span_s <= 0 or not tl.cap_w.size or not np.isfinite(tl.cap_w).all():
        return {}
    return {"mean_cap_w": float(np.sum(tl.cap_w * np.diff(tl.times_s)) / tl.span_s)}


def untouched(smp: PowerSamples, sample_s: float, intervals) -> np.ndarray:
    """Per sample interval: True when none of ``intervals`` (disjoint, in time order,
    as ``(from, to)``: when a power limit acted) overlaps it."""
    if not len(intervals):
        return np.ones(smp.time_s.size, dtype=bool)
    a = np.asarray([iv[0] for iv in intervals], dtype=float)
    c = np.asarray([iv[1] for iv in intervals], dtype=float)
    begin = smp.time_s
    end = np.concatenate((begin[1:], [begin[-1] + sample_s])) if begin.size else begin
    k = np.searchsorted(c, begin, side="right")  # the first interval ending after begin
    hit = k < a.size
    hit[hit] = a[k[hit]] < end[hit]
    return ~hit


def limit_summary(tl: PowerTimeline, smp: PowerSamples, sample_s: float, limit,
                  records: RunRecords) -> dict:
    """The power limit's figures (olsctl.power.limit): the scheduler's own CSR (share of
    samples in which the limit never acted), whether the cap held at every instant, the
    share of time it acted, jobs throttled and the processor-hours they lost."""
    span = tl.span_s
    over = tl.power_w - tl.cap_w
    tol = 1e-9 * np.abs(tl.cap_w)
    return {
        "scheduler_csr": float(untouched(smp, sample_s, limit.intervals).mean())
        if smp.time_s.size else 1.0,
        "limit_held": bool((over <= tol).all()),
        "max_over_cap_w": float(max(over.max(), 0.0)) if over.size else 0.0,
        "throttled_time_share": limit.acting_s / span if span > 0 else 0.0,
        "jobs_throttled": len(limit.hit),
        "work_lost_proc_h": float(sum(r.procs * records.stretch_s.get(r.job_id, 0.0)
                                      for r in records.jobs)) / 3600.0,
    }
