"""Watching a run while it goes: the sampler, the feed file and the dashboard.

A :class:`LiveRun` samples a running :class:`olsctl.sim.MainSimulator` every ``sample_s``
of simulated time from an event of its own. That event runs first at its instant, only
reads the state and starts no scheduling pass, so the run is event for event the same as
without it; pacing sleeps inside it, which only adds wall time. Each sample goes to the
feed (``live.jsonl`` in the run's directory: one JSON object per line, flushed as it is
written) and to a view: the rich dashboard on a terminal, a plain line every few
seconds otherwise, or nothing. :func:`monitor` reads a feed back, from this or another
machine, into the same views.

Feed lines: a ``start`` record (title, first submission, span, jobs, processors, sample
interval, pace, the controller's SLA, and ``sla_windows``: the SLA the run's windows are
judged by, with the window length and origin), then ``sample`` records, and after the run
an ``end`` record (``status``: finished, failed or interrupted). Only ``wall_s`` depends on
the machine.

SLA windows as the run goes (:class:`SlaWindows`). The windows are those of summary.json's
``weekly`` rows: ``window_s`` long (a calendar week by default) from the week origin
(:func:`olsctl.metrics.week_origin`), and a job belongs to the window it was submitted in;
the SLA is the run config's (:meth:`olsctl.config.RunConfig.sla_spec`: the controller's, or
mean_bsld <= 200). Each sample carries

- ``window_bsld``: the mean bounded slowdown of the jobs submitted in the current window
  (the one holding the sample's time) that have started so far; null if none has;
- ``windows_judged`` / ``windows_kept``: windows judged so far, and how many kept the SLA
  (its metric of the window's jobs within its bound). A window is judged once its
  verdict can no longer change: when it has ended and every job submitted in it has
  started, on all those jobs, as summary.json's ``weekly`` rows judge it. Under a backlog
  the count so lags behind the windows that have ended, but it never has to be taken
  back, and the last sample's (after the run) is summary.json's ``sla``. (Judging a
  window at its end on the jobs started by then would be timelier but far kinder: the
  jobs still waiting are the ones that break it.) Windows without jobs are not judged.

Each sample only adds the jobs started since the one before (``sim.jobs`` grows in start
order) to running sums per window, and looks at the windows that have ended but are not
judged yet, so the cost per sample does not grow with the run.
"""

from __future__ import annotations

import json
import math
import os
import time
from bisect import bisect_left
from collections import deque
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import simpy
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.live import Live
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from olsctl.errors import ConfigError, OlsctlError
from olsctl.metrics import WEEK_S, SlaSpec, job_bsld, week_origin

FEED_NAME = "live.jsonl"
#: SimPy priority of a sample: before every other event of its instant
SAMPLE = -1
#: samples in an unpaced run (about), and per wall second at most in a paced one
SAMPLES_PER_RUN, SAMPLES_PER_WALL_S = 600, 5
REFRESH_S = 0.25  # shortest wall time between two dashboard redraws
PLAIN_EVERY_S = 5.0  # wall time between two plain progress lines
FSYNC_EVERY_S = 1.0  # the feed is flushed at every line, synced to disk this often
POLL_S = 0.25  # how often monitor looks at the feed
TRIALS_KEPT = 24  # a decision's trials kept in the feed (around the chosen one)
RECENT_KEPT = 5  # earlier decisions kept in the feed
BLOCKS = " ▁▂▃▄▅▆▇█"


class FeedError(OlsctlError):
    """A feed cannot be followed: ``DIR: ...``."""

    kind = "FeedError"


# -- the feed ---------------------------------------------------------------------------
def _num(v: float | None) -> float | None:
    """JSON has no infinity or NaN: write them as null."""
    return None if v is None or not math.isfinite(v) else v


class Feed:
    """Append-only JSON lines, flushed at every line and synced to disk at most every
    ``FSYNC_EVERY_S`` (so a reader on a shared file system sees them)."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.clock = clock
        self._fh = None
        self._synced = -math.inf

    def open(self) -> None:
        """Start a new feed (a reader of an older one sees the file replaced)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.unlink(missing_ok=True)
        self._fh = open(self.path, "w", encoding="utf-8", newline="\n")

    def write(self, record: dict) -> None:
        if self._fh is None:
            return
        self._fh.write(json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n")
        self._fh.flush()
        if self.clock() - self._synced >= FSYNC_EVERY_S:
            self._sync()

    def close(self) -> None:
        if self._fh is not None:
            self._sync()
            self._fh.close()
            self._fh = None

    def _sync(self) -> None:
        try:
            os.fsync(self._fh.fileno())
        except OSError:  # some file systems cannot sync; the flush is what matters
            pass
        self._synced = self.clock()


class NullFeed(Feed):
    """No feed file (a dashboard or pacing only)."""

    def __init__(self) -> None:
        super().__init__(Path(os.devnull))

    def open(self) -> None:
        pass


class FeedReader:
    """Reads the complete lines added to a feed since the last :meth:`poll`.

    The file is opened anew at every poll (a shared file system then shows what other
    machines appended) and read from where the last poll stopped; a partly written last
    line waits for the next poll. A replaced or shortened file starts over (``reset``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.inode: int | None = None
        self.reset = False

    def poll(self) -> list[dict]:
        self.reset = False
        try:
            with open(self.path, "rb") as fh:
                st = os.fstat(fh.fileno())
                replaced = st.st_ino != self.inode or st.st_size < self.offset
                if self.inode is not None and replaced:
                    self.offset, self.reset = 0, True
                self.inode = st.st_ino
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return []
        end = data.rfind(b"\n") + 1
        self.offset += end
        records = []
        for line in data[:end].splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a damaged line: skip it, keep following
            if isinstance(rec, dict):
                records.append(rec)
        return records


# -- SLA windows as the run goes --------------------------------------------------------
class SlaWindows:
    """Judges a run's SLA windows as it goes (module docstring: when and how).

    ``submit_s`` are the run's submit times, ascending (:class:`olsctl.state.SimState`'s).
    Feed :meth:`add` every started job, in start order; call :meth:`close_until` with the
    sample's time before reading :attr:`kept` / :attr:`judged`."""

    def __init__(self, sla: SlaSpec, origin_s: float, submit_s: list[float]) -> None:
        self.sla = sla
        self.origin_s = origin_s
        self.submit_s = submit_s
        self.kept = self.judged = 0
        #: per window with a started job: [jobs started, sum of their bounded slowdowns,
        #: sum of waits (s), max wait (s), their bounded slowdowns (p95 only)]
        self._started: dict[int, list] = {}
        #: windows that have ended and are not judged yet: their number of jobs
        self._waiting: dict[int, int] = {}
        self._first_job = 0  # the first job of the windows that have not ended

    def window_of(self, time_s: float) -> int:
        """The window holding ``time_s`` (0: the one of the week origin)."""
        return int((time_s - self.origin_s) // self.sla.window_s)

    def add(self, submit_s: float, start_s: float, runtime_s: float) -> None:
        """A job that has started."""
        w = self.window_of(submit_s)
        acc = self._started.get(w)
        if acc is None:
            acc = self._started[w] = [0, 0.0, 0.0, 0.0,
                                      [] if self.sla.metric == "p95_bsld" else None]
        wait = start_s - submit_s
        bsld = job_bsld(wait, runtime_s)
        acc[0] += 1
        acc[1] += bsld
        acc[2] += wait
        acc[3] = max(acc[3], wait)
        if acc[4] is not None:
            acc[4].append(bsld)

    def mean_bsld(self, time_s: float) -> float | None:
        """Mean bounded slowdown of the started jobs of the window holding ``time_s``."""
        acc = self._started.get(self.window_of(time_s))
        return acc[1] / acc[0] if acc else None

    def close_until(self, time_s: float) -> None:
        """Judge the windows that ended at or before ``time_s`` (``math.inf``: every
        window) and all of whose jobs have started."""
        last = self.window_of(time_s) if math.isfinite(time_s) else math.inf
        submit, n = self.submit_s, len(self.submit_s)
        while self._first_job < n:  # the windows (with jobs) that ended since the last call
            w = self.window_of(submit[self._first_job])
            if w >= last:
                break
            end = self.origin_s + (w + 1) * self.sla.window_s
            stop = max(bisect_left(submit, end, self._first_job), self._first_job + 1)
            self._waiting[w] = stop - self._first_job
            self._first_job = stop
        everything = last == math.inf  # the run is over: every job has started
        for w in [w for w, jobs in self._waiting.items()
                  if w in self._started and (everything or self._started[w][0] >= jobs)]:
            del self._waiting[w]
            self._judge(self._started[w])

    def _judge(self, acc: list) -> None:
        n, bsld_sum, wait_sum, wait_max, bslds = acc
        metric = self.sla.metric
        value = (bsld_sum / n if metric == "mean_bsld"
                 else wait_sum / n if metric == "mean_wait_s"
                 else wait_max if metric == "max_wait_s"
                 else _percentile(bslds, 95.0))
        self.judged += 1
        self.kept += value <= self.sla.max


def _percentile(values: list[float], q: float) -> float:
    """numpy's default (linear) percentile, as summary.json's ``p95_bsld``."""
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=float), q))


def trace_calendar(config) -> tuple[int | None, int | None]:
    """``UnixStartTime`` and ``TimeZone`` from the header of the trace of ``config`` (a
    :class:`olsctl.config.RunConfig`): what places its calendar weeks. (None, None) when the
    trace cannot be read (the run itself then says why)."""
    from olsctl.swf import SwfReader
    from olsctl.workload import resolve_trace

    try:
        reader = SwfReader(resolve_trace(config.trace, config.base_dir), skip_bad_lines=True)
        for _record in reader:  # the header is the comment lines before the first job
            break
    except OlsctlError:
        return None, None
    return reader.header.first_int("UnixStartTime"), reader.header.first_int("TimeZone")


def window_unit(window_s: float) -> str:
    """What one SLA window is called on the dashboard: week, day or window."""
    return "week" if window_s == WEEK_S else "day" if window_s == 86400 else "window"


# -- formatting -------------------------------------------------------------------------
def fmt_span(seconds: float) -> str:
    """``12d 03:04:05`` (days only when there are any)."""
    s = int(max(seconds, 0.0))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return f"{d}d {h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"


def fmt_si(x: float | None, unit: str = "") -> str:
    """Three significant figures with a k/M/G/T prefix: ``412 kW``, ``1.25 MW``."""
    if x is None or not math.isfinite(x):
        return "-"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")):
        if abs(x) >= scale:
            break
    v = x / scale
    digits = 0 if abs(v) >= 100 else 1 if abs(v) >= 10 else 2
    return f"{v:.{digits}f} {prefix}{unit}".rstrip()


def sparkline(values: list[float | None], top: float) -> str:
    """One block character per value, full height at ``top``."""
    out = []
    for v in values:
        if v is None or top <= 0:
            out.append(" ")
        else:
            k = round(8 * min(max(v / top, 0.0), 1.0))
            out.append(BLOCKS[max(k, 1)])
    return "".join(out)


def _bar(parts: list[tuple[int, str, str]], total: int, width: int) -> Text:
    """A bar of ``width`` cells: each part is (count, character, style), scaled to total."""
    text = Text()
    used = 0
    for i, (n, char, style) in enumerate(parts):
        cells = width - used if i == len(parts) - 1 else round(width * n / total) if total else 0
        cells = max(min(cells, width - used), 0)
        text.append(char * cells, style)
        used += cells
    return text


# -- the dashboard ----------------------------------------------------------------------
class Dashboard:
    """The state a view shows: the feed's start record and recent samples. A rich
    renderable that fits the console it is drawn on (80 x 24 and up)."""

    def __init__(self, header: dict, history: int = 120) -> None:
        self.header = header
        self.samples: deque[dict] = deque(maxlen=history)

    @property
    def latest(self) -> dict | None:
        return self.samples[-1] if self.samples else None

    def add(self, sample: dict) -> None:
        self.samples.append(sample)

    def rates(self) -> tuple[float | None, float | None]:
        """Simulated seconds and jobs done per wall second over about the last 2 s."""
        if len(self.samples) < 2:
            return None, None
        last = self.samples[-1]
        first = self.samples[-2]
        for s in reversed(self.samples):
            first = s
            if last["wall_s"] - s["wall_s"] >= 2.0:
                break
        dt = last["wall_s"] - first["wall_s"]
        if dt <= 0:
            return None, None
        return (last["time_s"] - first["time_s"]) / dt, (last["done"] - first["done"]) / dt

    # -- plain text -----------------------------------------------------------------------
    def line(self) -> str:
        """One plain progress line (for logs and pipes)."""
        s, h = self.latest, self.header
        if s is None:
            return f"{h.get('title', 'olsctl')}: waiting for the first sample"
        parts = [f"t+{fmt_span(s['time_s'] - h['start_s'])}",
                 f"done {s['done']:,}/{h['jobs']:,}",
                 f"busy {s['busy_procs']}/{s['active_procs']}/{s['total_procs']}",
                 f"queue {s['queue_len']}"]
        if s.get("power_w") is not None:
            parts.append(f"power {fmt_si(s['power_w'], 'W')}/{fmt_si(s.get('cap_w'), 'W')}")
        parts.append(f"mean bsld {_fixed(s.get('mean_bsld'), 2)}")
        if "windows_judged" in s:
            parts.append(f"SLA {s['windows_kept']}/{s['windows_judged']} kept")
            parts.append(f"window bsld {_fixed(s.get('window_bsld'), 2)}")
        parts.append(f"util {_percent(s.get('utilization'))}")
        d = s.get("decision")
        if d is not None:
            parts.append(f"chose {_choice(d['chosen'])}")
        return f"{h.get('title', 'olsctl')}: " + "  ".join(parts)

    # -- rich -----------------------------------------------------------------------------
    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        height = options.height or options.size.height
        yield self.render(width, height)

    def render(self, width: int = 80, height: int = 24) -> Group:
        run = self._run_panel(width)
        panels = [run]
        s = self.latest
        if s is not None and s.get("decision") is not None:
            used = 2 + run.renderable.row_count
            panels.append(self._decision_panel(s["decision"], width, height - 1 - used))
        return Group(*panels)

    def _run_panel(self, width: int) -> Panel:
        h, s = self.header, self.latest
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="bold", width=7, no_wrap=True)
        grid.add_column(no_wrap=True, overflow="ellipsis", max_width=max(width - 12, 10))
        inner = max(width - 12, 10)
        title = f"[bold]{escape(h.get('title', 'olsctl'))}[/]"
        if s is None:
            grid.add_row("", "waiting for the first sample")
            return Panel(grid, title=title, title_align="left", width=width)
        elapsed = s["time_s"] - h["start_s"]
        # the log's span (last submission plus runtime) is where the run ends at the soonest
        span = f" of >={fmt_span(h['span_s'])}" if elapsed < h["span_s"] else ""
        grid.add_row("time", f"t+{fmt_span(elapsed)}{span}   wall {fmt_span(s['wall_s'])}"
                             + ("   finished" if s.get("final") else ""))
        sim_rate, job_rate = self.rates()
        speed = (f"{fmt_si(sim_rate)} sim-s/s   {job_rate:,.0f} jobs/s"
                 if sim_rate is not None else "-")
        if h.get("pace"):
            speed += f"   (pace {h['pace']:g})"
        grid.add_row("speed", speed)
        jobs, done = h["jobs"], s["done"]
        bar_w = min(24, inner // 3)
        text = _bar([(done, "█", "green"), (jobs - done, "░", "dim")], jobs, bar_w)
        text.append(f" {done:,}/{jobs:,} done ({_percent(done / jobs if jobs else None)})")
        grid.add_row("jobs", text)
        busy, active, total = s["busy_procs"], s["active_procs"], s["total_procs"]
        text = _bar([(busy, "█", "cyan"), (max(active - busy, 0), "▒", "blue"),
                     (total, "░", "dim")], total, bar_w)
        text.append(f" busy {busy:,} active {active:,} of {total:,}   queue {s['queue_len']:,}")
        grid.add_row("procs", text)
        if s.get("power_w") is not None:
            grid.add_row("power", self._power_text(s, inner))
        grid.add_row("so far", f"mean bsld {_fixed(s.get('mean_bsld'), 2)}   utilization "
                               f"{_percent(s.get('utilization'))}")
        windows = h.get("sla_windows")
        if isinstance(windows, dict) and "windows_judged" in s:
            grid.add_row("sla", _sla_text(windows, s))
        return Panel(grid, title=title, title_align="left", width=width)

    def _power_text(self, s: dict, inner: int) -> Text:
        power, cap = s["power_w"], s.get("cap_w")
        head = f"{fmt_si(power, 'W')}"
        if cap is not None:
            head += f" / cap {fmt_si(cap, 'W')} ({power / cap:.0%})" if cap > 0 else " / cap 0 W"
        else:
            head += " (no cap)"
        if "jobs_throttled" in s:  # a power limit holds the cap
            head += (" · throttling" if s.get("throttling") else " · limit idle") + \
                f", {s['jobs_throttled']:,} jobs throttled"
        text = Text(head + "  ")
        room = max(inner - len(text), 0)
        values = [x.get("power_w") for x in list(self.samples)[-room:]] if room else []
        top = max([v for v in values if v is not None] + [cap or 0.0, 1e-9])
        for x, char in zip(list(self.samples)[-room:], sparkline(values, top)):
            over = x.get("cap_w") is not None and (x.get("power_w") or 0.0) > x["cap_w"]
            text.append(char, "red" if over else "magenta" if x.get("throttling") else "yellow")
        return text

    def _decision_panel(self, d: dict, width: int, height: int) -> Panel:
        sla = self.header.get("sla") or {}
        metric = sla.get("metric", "mean_bsld")
        title = f"[bold]controller[/] · {d['n']:,} ticks · SLA {metric} <= {sla.get('max', '-')}"
        met = {True: "SLA met", False: "SLA missed", None: "no what-if"}[d.get("sla_met")]
        head = Text(f"t+{fmt_span(d['time_s'] - self.header['start_s'])}: "
                    f"{_choice(d['chosen'])}, {met}: {d['reason']}",
                    no_wrap=True, overflow="ellipsis")
        rows = []
        recent = d.get("recent") or []
        if recent:
            marks = {True: "ok", False: "miss", None: "kept"}
            rows.append(Text("earlier: " + " · ".join(
                f"t+{fmt_span(t - self.header['start_s'])} {_choice(c)} {marks[m]}"
                for t, c, m in reversed(recent)), style="dim", no_wrap=True, overflow="ellipsis"))
        room = max(height - 2 - 1 - len(rows) - 1, 1)  # borders, head line, table header
        table = _trials_table(d, metric, room)
        return Panel(Group(head, table, *rows), title=title, title_align="left", width=width)


def _trials_table(d: dict, metric: str, room: int) -> Table:
    trials = d.get("trials") or []
    has_cap = any("cap_w" in t for t in trials)
    has_window = any("window" in t for t in trials)
    table = Table(box=None, pad_edge=False, padding=(0, 1), show_edge=False)
    table.add_column("", width=1)
    table.add_column("procs", justify="right")
    if has_cap:
        table.add_column("cap", justify="right")
    if has_window:
        table.add_column("window", justify="right")
    table.add_column(f"pred. {metric}", justify="right")
    table.add_column("cost", justify="right")
    table.add_column("", style="dim")
    chosen = next((i for i, t in enumerate(trials) if t.get("chosen")), 0)
    lo = max(min(chosen - room // 2, len(trials) - room), 0)
    for t in trials[lo:lo + room]:
        cells = [">" if t.get("chosen") else "", f"{t['active_procs']:,}"]
        if has_cap:
            cells.append(fmt_si(t.get("cap_w"), "W"))
        if has_window:
            cells.append(str(t.get("window", "-")))
        note = ("never starts" if t.get("unstarted") else "over cap" if t.get("over_cap")
                else "failed" if t.get("error") else "cut short" if t.get("cut") else "")
        cells += [_fixed(t.get("metric"), 2), fmt_si(t.get("cost")), note]
        table.add_row(*cells, style="bold" if t.get("chosen") else None)
    if not trials:
        table.add_row("", "-", *(["-"] * (has_cap + has_window)), "-", "-", "no what-if run")
    return table


_METRIC_WORDS = {"mean_bsld": "mean bsld", "p95_bsld": "p95 bsld", "mean_wait_s": "mean wait",
                 "max_wait_s": "max wait"}


def _sla_text(windows: dict, s: dict) -> str:
    """``mean bsld <= 200: 36/40 weeks kept (90.0%)  this week 53.37``."""
    metric = str(windows.get("metric", "mean_bsld"))
    limit = windows.get("max")
    limit_text = "-" if not isinstance(limit, (int, float)) else (
        f"{limit:g} s" if metric.endswith("_s") else f"{limit:g}")
    unit = window_unit(windows.get("window_s", WEEK_S))
    judged, kept = s.get("windows_judged") or 0, s.get("windows_kept") or 0
    count = (f"{kept:,}/{judged:,} {unit}s kept ({_percent(kept / judged)})" if judged
             else f"no {unit} over yet")
    now = _fixed(s.get("window_bsld"), 2)
    now = f"this {unit} {now}" if metric == "mean_bsld" else f"this {unit} mean bsld {now}"
    return f"{_METRIC_WORDS.get(metric, metric)} <= {limit_text}: {count}  {now}"


def _choice(chosen: dict) -> str:
    out = f"{chosen.get('active_procs', '?'):,} procs"
    if "cap_w" in chosen:
        out += f", cap {fmt_si(chosen['cap_w'], 'W')}"
    if "window" in chosen:
        out += f", window {chosen['window']}"
    return out


def _fixed(x: float | None, digits: int) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _percent(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


# -- views ------------------------------------------------------------------------------
class View:
    """Shows nothing (a feed without a display)."""

    def start(self, dash: Dashboard) -> None:
        pass

    def update(self, dash: Dashboard, final: bool = False) -> None:
        pass

    def stop(self) -> None:
        pass


class LiveView(View):
    """The dashboard, redrawn in place at most every ``REFRESH_S`` of wall time."""

    def __init__(self, console: Console, clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console
        self.clock = clock
        self._live: Live | None = None
        self._drawn = -math.inf

    def start(self, dash: Dashboard) -> None:
        self._live = Live(dash, console=self.console, auto_refresh=False,
                          redirect_stdout=False, redirect_stderr=False,
                          vertical_overflow="crop")
        self._live.start(refresh=True)
        self._drawn = self.clock()

    def update(self, dash: Dashboard, final: bool = False) -> None:
        now = self.clock()
        if self._live is not None and (final or now - self._drawn >= REFRESH_S):
            self._live.refresh()
            self._drawn = now

    def stop(self) -> None:
        if self._live is not None:
            self._live.refresh()
            self._live.stop()
            self._live = None


class PlainView(View):
    """A plain line at the first sample, every ``PLAIN_EVERY_S`` of wall time, and at
    the end."""

    def __init__(self, console: Console, clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console
        self.clock = clock
        self._printed = -math.inf
        self._last: str | None = None

    def update(self, dash: Dashboard, final: bool = False) -> None:
        now = self.clock()
        if dash.latest is not None and (final or now - self._printed >= PLAIN_EVERY_S):
            line = dash.line()
            if line != self._last:
                self.console.print(line, markup=False, highlight=False, soft_wrap=True)
            self._printed, self._last = now, line


def view_for(console: Console) -> View:
    """The dashboard on a terminal, plain lines otherwise."""
    return LiveView(console) if console.is_terminal else PlainView(console)


# -- sampling a run ---------------------------------------------------------------------
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
                                  "origin_date": origin_date}}
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


# -- following a feed -------------------------------------------------------------------
def _summary_is_newer(run_dir: Path, feed: Path) -> bool:
    try:
        return (run_dir / "summary.json").stat().st_mtime >= feed.stat().st_mtime
    except OSError:
        return False


def _first_byte(path: Path) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(1)
    except OSError:
        return b""


def monitor(run_dir: Path, view: View, replay: bool = False, speed: float = 20.0,
            clock: Callable[[], float] = time.monotonic,
            sleep: Callable[[float], None] = time.sleep, poll_s: float = POLL_S) -> dict:
    """Show the run writing ``run_dir/live.jsonl``: replayed at ``speed`` samples per
    second when it has finished (or with ``replay``), then followed until it ends (its
    end record, or a ``summary.json`` newer than the feed). Returns the end record
    (``status`` finished, failed or interrupted)."""
    if not (math.isfinite(speed) and speed > 0):
        raise ConfigError(f"command line: --speed: must be a number > 0 (got {speed:g})")
    if not run_dir.is_dir():
        raise FeedError(f"{run_dir}: no such directory")
    path = run_dir / FEED_NAME
    if not path.is_file():
        raise FeedError(f"{run_dir}: no {FEED_NAME} (olsctl run writes it with --live or --feed)")
    reader = FeedReader(path)
    pending = reader.poll()
    while not pending:  # the run has just created it
        if reader.offset or _first_byte(path) not in (b"", b"{"):
            pending = [{}]
            break
        sleep(poll_s)
        pending = reader.poll()
    if pending[0].get("kind") != "start":
        raise FeedError(f"{path}: not an olsctl feed (its first line is no start record)")
    dash = Dashboard(pending.pop(0))
    end = next((r for r in pending if r.get("kind") == "end"), None)
    finished = end is not None or _summary_is_newer(run_dir, path)
    view.start(dash)
    try:
        samples = [r for r in pending if r.get("kind") == "sample"]
        if finished or replay:
            t0 = clock()
            for i, s in enumerate(samples):
                wait = t0 + i / speed - clock()
                if wait > 0:
                    sleep(wait)
                dash.add(s)
                view.update(dash, i == len(samples) - 1)
        else:
            for s in samples:
                dash.add(s)
            view.update(dash, True)
        while end is None and not finished:
            sleep(poll_s)
            records = reader.poll()
            if reader.reset:  # a new run replaced the feed
                head = records.pop(0) if records and records[0].get("kind") == "start" else None
                if head is not None:
                    dash.header, dash.samples = head, deque(maxlen=dash.samples.maxlen)
            for r in records:
                if r.get("kind") == "sample":
                    dash.add(r)
                elif r.get("kind") == "end":
                    end = r
            if records:
                view.update(dash, end is not None)
            finished = end is not None or _summary_is_newer(run_dir, path)
        view.update(dash, True)
    finally:
        view.stop()
    return end or {"kind": "end", "status": "finished"}
