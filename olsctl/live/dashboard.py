"""The dashboard: what a view shows of a run (the feed's start record and its recent
samples), as one plain line or as rich panels that fit the console (80 x 24 and up).
"""

from __future__ import annotations

import math
from collections import deque

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from olsctl.live.windows import window_unit
from olsctl.metrics import WEEK_S

BLOCKS = " ▁▂▃▄▅▆▇█"


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
