"""Sampling a run: a :class:`LiveRun` samples a running
:class:`olsctl.sim.MainSimulator` from an event of its own (first at its instant, reading
only), paces it, and hands each sample to its feed and its view.
"""

from __future__ import annotations

import math
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import simpy
from rich.console import Console

from olsctl.errors import ConfigError
from olsctl.live.dashboard import Dashboard
from olsctl.live.feed import FEED_NAME, Feed, NullFeed, _num
from olsctl.live.views import View, view_for
from olsctl.live.windows import SlaWindows, trace_calendar
from olsctl.metrics import SlaSpec, job_bsld, week_origin

#: SimPy priority of a sample: before every other event of its instant
SAMPLE = -1
#: samples in an unpaced run (about), and per wall second at most in a paced one
SAMPLES_PER_RUN, SAMPLES_PER_WALL_S = 600, 5
TRIALS_KEPT = 24  # a decision's trials kept in the feed (around the chosen one)
RECENT_KEPT = 5  # earlier decisions kept in the feed


class _Sample(simpy.Event):
    """A pre-triggered event calling one function (scheduled with :data:`SAMPLE`)."""

    def __init__(self, env: simpy.Environment, callback: Callable) -> None:
        self.env = env
        self.callbacks = [callback]
        self._value = None
        self._ok = True


class LiveRun:
    """Samples a run for a view and a feed, and paces it at ``pace`` simulated seconds
    per wall second (None: as fast as it goes). Use :meth:`attach` around ``sim.run()``
    and :meth:`close` once the outputs are written (or the run failed)."""

    def __init__(self, title: str, view: View | None = None, feed: Feed | None = None,
                 pace: float | None = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, sla: SlaSpec | None = None,
                 calendar: Callable[[], tuple[int | None, int | None]] | None = None) -> None:
        """``sla``: the SLA the windows are judged by (default mean_bsld <= 200 per week);
        ``calendar``: gives the trace's ``UnixStartTime`` and ``TimeZone`` (what places
        calendar weeks), asked once the run is attached; None: weeks start at the first
        submission."""
        if pace is not None and not (math.isfinite(pace) and pace > 0):
            raise ConfigError(f"command line: --pace: must be a number > 0 (got {pace:g})")
        self.title = title
        self.view = view or View()
        self.feed = feed or NullFeed()
        self.pace = pace
        self.clock, self.sleep = clock, sleep
        self.sla = sla or SlaSpec()
        self.calendar = calendar
        self.dashboard: Dashboard | None = None
        self._opened = False

    @property
    def writes_feed(self) -> bool:
        """Whether the run writes a feed file (``--live`` or ``--feed``)."""
        return not isinstance(self.feed, NullFeed)

    @contextmanager
    def attach(self, sim, controller=None) -> Iterator[None]:
        """Sample ``sim`` while the body runs it; a last sample once it has run."""
        st = sim.state
        t0 = float(sim.env.now)
        ends = [s + r for s, r in zip(st.submit_s, st.runtime_s)]
        span = max(ends) - t0 if ends else 0.0
        step = span / SAMPLES_PER_RUN
        if self.pace is not None:
            step = min(step, self.pace / SAMPLES_PER_WALL_S)
        step = step if step > 0 else 1.0
        settings = getattr(controller, "settings", None)
        unix_start, tz = self.calendar() if self.calendar is not None else (None, None)
        origin, origin_date = week_origin(t0, unix_start, tz)
        windows = SlaWindows(self.sla, origin, st.submit_s)
        header = {"kind": "start", "title": self.title, "start_s": t0, "span_s": span,
                  "jobs": len(st.job_id), "total_procs": st.total_procs, "sample_s": step,
                  "pace": self.pace, "power": st.power is not None,
                  "sla": None if settings is None else {"metric": settings.sla_metric,
                                                         "max": settings.sla_max},
                  "sla_windows": {"metric": self.sla.metric, "max": self.sla.max,
                                  "window_s": self.sla.window_s, "origin_s": origin,
                                  "origin_date": origin_date},
                  "pid": os.getpid(), "host": socket.gethostname()}  # (for olsctl monitor)
        self.dashboard = Dashboard(header)
        self.feed.open()
        self._opened = True
        self.feed.write(header)
        sampler = _Sampler(self, sim, controller, t0, step, windows)
        self.view.start(self.dashboard)
        try:
            sampler.schedule(0)
            yield
            end = max((j.end_s for j in sim.jobs), default=t0)
            sampler.take(end, final=True)
        finally:
            self.view.stop()

    def close(self, error: BaseException | None = None) -> None:
        """End the feed: ``finished``, or ``failed``/``interrupted`` with ``error``."""
        if not self._opened:
            return
        if error is None:
            record = {"kind": "end", "status": "finished"}
        elif isinstance(error, KeyboardInterrupt):
            record = {"kind": "end", "status": "interrupted"}
        else:
            record = {"kind": "end", "status": "failed",
                      "error": str(error) or type(error).__name__}
        self.feed.write(record)
        self.feed.close()
        self._opened = False


class _Sampler:
    """The periodic event of one attached run: the k-th sample at t0 + k x step."""

    def __init__(self, live: LiveRun, sim, controller, t0: float, step: float,
                 windows: SlaWindows) -> None:
        self.live, self.sim, self.controller = live, sim, controller
        self.windows = windows
        self.t0, self.step = t0, step
        self.k = 0
        self.wall0 = live.clock()
        self._seen = 0  # job records already summed
        self._bsld_sum = 0.0
        self._area = 0.0  # processor-seconds of the jobs started so far, whole runs
        self._decisions = 0
        self._decision: dict | None = None

    def schedule(self, k: int) -> None:
        env = self.sim.env
        self.k = k
        delay = max(self.t0 + k * self.step - env.now, 0.0)
        env.schedule(_Sample(env, self._on_sample), SAMPLE, delay)

    def _on_sample(self, _event) -> None:
        now = float(self.sim.env.now)
        if self.sim.finished:
            return  # the last sample is taken after the run, at its last end
        self.sim.catch_up()  # (the power now, under a limit)
        self.take(now)
        if self.sim.env.peek() != math.inf:  # stop when nothing else is left to happen
            self.schedule(self.k + 1)

    def take(self, now: float, final: bool = False) -> None:
        live = self.live
        if live.pace is not None:
            wait = self.wall0 + (now - self.t0) / live.pace - live.clock()
            if wait > 0:
                live.sleep(wait)
        sample = self._sample(now, final)
        if final:
            sample["final"] = True
        live.feed.write(sample)
        live.dashboard.add(sample)
        live.view.update(live.dashboard, final)

    def _sample(self, now: float, final: bool = False) -> dict:
        sim, st = self.sim, self.sim.state
        jobs = sim.jobs
        windows = self.windows
        for k in range(self._seen, len(jobs)):
            r = jobs[k]
            self._bsld_sum += job_bsld(r.start_s - r.submit_s, r.runtime_s)
            self._area += r.procs * r.runtime_s
            windows.add(r.submit_s, r.start_s, r.runtime_s)
        self._seen = started = len(jobs)
        windows.close_until(math.inf if final else now)
        procs, start, runtime = st.procs, st.start_s, st.runtime_s
        left = sum(procs[j] * max(start[j] + runtime[j] - now, 0.0) for _, j in st.running)
        elapsed = now - self.t0
        power_w = cap_w = None
        if st.power is not None:
            saved = st.now_s
            st.now_s = now  # measured at the sample's time; the state is left as it was
            try:
                power_w, cap_w = st.power.measured_w(st), st.power.cap_now(st)
            finally:
                st.now_s = saved
        limit = {} if st.limit is None else {"throttling": st.limit.acting,
                                             "jobs_throttled": len(st.limit.hit)}
        wall_s = round(self.live.clock() - self.wall0, 3)
        return {"kind": "sample", "time_s": now, "wall_s": wall_s,
                "busy_procs": st.busy_procs, "active_procs": st.active_procs,
                "total_procs": st.total_procs, "queue_len": len(st.queue),
                "running": len(st.running), "done": started - len(st.running),
                "mean_bsld": _num(self._bsld_sum / started) if started else None,
                "utilization": (_num((self._area - left) / (st.total_procs * elapsed))
                                if elapsed > 0 and st.total_procs else None),
                "power_w": _num(power_w), "cap_w": _num(cap_w),
                "decision": self._last_decision(),
                "window_bsld": _num(windows.mean_bsld(now)),
                "windows_kept": windows.kept, "windows_judged": windows.judged, **limit}

    def _last_decision(self) -> dict | None:
        decisions = getattr(self.controller, "decisions", None)
        if not decisions:
            return None
        if len(decisions) != self._decisions:
            self._decisions = len(decisions)
            self._decision = decision_summary(decisions, self.controller.settings.sla_metric)
        return self._decision


def decision_summary(decisions: list[dict], metric: str) -> dict:
    """The last decision as the feed keeps it: its trials sorted by setting (at most
    ``TRIALS_KEPT``, around the chosen one) with the SLA metric and cost, and the
    settings chosen at the ``RECENT_KEPT`` ticks before."""
    d = decisions[-1]
    chosen = d["chosen"]
    trials = []
    for t in d.get("trials") or []:
        row = {k: t[k] for k in ("active_procs", "cap_w", "window") if k in t}
        row.update(metric=t.get(metric), cost=t.get("cost"))
        if t.get("unstarted"):
            row["unstarted"] = t["unstarted"]
        for flag, key in (("over_cap", "over_cap"), ("error", "error"), ("cut", "stopped_at_s")):
            if t.get(key) is not None and t.get(key) is not False:
                row[flag] = True
        if all(row.get(k) == v for k, v in chosen.items()):
            row["chosen"] = True
        trials.append(row)
    trials.sort(key=lambda r: (r["active_procs"], r.get("cap_w") or 0.0, r.get("window") or 0))
    at = next((i for i, r in enumerate(trials) if r.get("chosen")), 0)
    lo = max(min(at - TRIALS_KEPT // 2, len(trials) - TRIALS_KEPT), 0)
    recent = [[e["time_s"], e["chosen"], e.get("sla_met")]
              for e in decisions[-1 - RECENT_KEPT:-1]]
    return {"n": len(decisions), "time_s": d["time_s"], "chosen": chosen,
            "reason": d.get("reason", ""), "sla_met": d.get("sla_met"),
            "trials": trials[lo:lo + TRIALS_KEPT], "recent": recent}


def live_run(config, console: Console, show: bool, feed: bool, pace: float | None) -> LiveRun:
    """What ``olsctl run --live/--feed/--pace`` attaches to the run of ``config`` (a
    :class:`olsctl.config.RunConfig`): with ``show`` the dashboard (plain lines off a
    terminal) and the feed, with ``feed`` the feed alone, with ``pace`` pacing."""
    title = f"{Path(str(config.trace)).name} · {config.policy['name']}"
    if config.controller is not None:
        title += "/OLS"
    if config.power is not None and config.power.get("cap") is not None:
        title += " · capped"
    return LiveRun(title, view_for(console) if show else View(),
                   Feed(Path(config.out) / FEED_NAME) if show or feed else NullFeed(), pace,
                   sla=config.sla_spec(), calendar=lambda: trace_calendar(config))
