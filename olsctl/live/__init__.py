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
judged by, with the window length and origin, and the writer's ``pid`` and ``host``), then
``sample`` records, and after the run an ``end`` record (``status``: finished, failed or
interrupted). Only ``wall_s``, ``pid`` and ``host`` depend on the machine. A run killed
outright writes no end: :func:`monitor` then stops when the writer ran on this host and
its process is gone, and says when the feed looks stale otherwise.

How SLA windows are judged as the run goes: :mod:`olsctl.live.windows`. The parts:
:mod:`~olsctl.live.feed` (the feed file and its record checks),
:mod:`~olsctl.live.windows`, :mod:`~olsctl.live.sampler` (sampling and pacing a run),
:mod:`~olsctl.live.dashboard` (what is shown), :mod:`~olsctl.live.views` (how) and
:mod:`~olsctl.live.follow` (``olsctl monitor``). The names other modules use are
importable from ``olsctl.live``.
"""

from __future__ import annotations

from olsctl.live.dashboard import BLOCKS, Dashboard, fmt_si, fmt_span, sparkline
from olsctl.live.feed import (FEED_NAME, FSYNC_EVERY_S, RECORD_FIELDS, Feed, FeedError,
                              FeedReader, NullFeed, record_problem)
from olsctl.live.follow import POLL_S, monitor
from olsctl.live.sampler import (RECENT_KEPT, SAMPLE, SAMPLES_PER_RUN, SAMPLES_PER_WALL_S,
                                 TRIALS_KEPT, LiveRun, decision_summary, live_run)
from olsctl.live.views import PLAIN_EVERY_S, REFRESH_S, LiveView, PlainView, View, view_for
from olsctl.live.windows import SlaWindows, trace_calendar, window_unit

__all__ = [
    "BLOCKS", "FEED_NAME", "FSYNC_EVERY_S", "PLAIN_EVERY_S", "POLL_S", "RECENT_KEPT",
    "RECORD_FIELDS", "REFRESH_S", "SAMPLE", "SAMPLES_PER_RUN", "SAMPLES_PER_WALL_S",
    "TRIALS_KEPT", "Dashboard", "Feed", "FeedError", "FeedReader", "LiveRun", "LiveView",
    "NullFeed", "PlainView", "SlaWindows", "View", "decision_summary", "fmt_si", "fmt_span",
    "live_run", "monitor", "record_problem", "sparkline", "trace_calendar", "view_for",
    "window_unit",
]
