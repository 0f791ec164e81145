"""Following a run's directory (``olsctl monitor``): its feed replayed, then followed
until the run ends, in a view; while no new line comes, whether its writer is gone.
"""

from __future__ import annotations

import math
import os
import socket
import time
from collections import deque
from pathlib import Path
from typing import Callable

from olsctl.errors import ConfigError
from olsctl.live.dashboard import Dashboard
from olsctl.live.feed import FEED_NAME, FeedError, FeedReader, record_problem
from olsctl.live.views import View

POLL_S = 0.25  # how often monitor looks at the feed
#: a feed without a new line for this long, or for STALE_GAPS times the longest wall time
#: between two of its samples if that is longer, is said to look stale (once a silence)
STALE_S, STALE_GAPS = 120.0, 5


def _age(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3.5 h``."""
    if seconds < 120:
        return f"{max(seconds, 0):.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


class _Writer:
    """The run writing a feed, as its start record names it (``pid`` and ``host``),
    watched while the feed is silent: known gone when it ran on this host and its
    process no longer exists; else said to look stale once the feed has been silent for
    ``STALE_S`` (or ``STALE_GAPS`` times the longest gap between two samples)."""

    def __init__(self, path: Path, start: dict, say: Callable[[str], None],
                 wall: Callable[[], float]) -> None:
        self.path, self.say, self.wall = path, say, wall
        self.pid, self.host = start.get("pid"), start.get("host")
        self.longest_gap_s = 0.0
        self._wall_s: float | None = None  # the last sample's wall_s
        self._said = False

    def heard(self, records: list[dict]) -> None:
        """New feed lines came: the silence is over."""
        for r in records:
            if r.get("kind") == "start":
                self.pid, self.host, self._wall_s = r.get("pid"), r.get("host"), None
            elif r.get("kind") == "sample":
                if self._wall_s is not None:
                    self.longest_gap_s = max(self.longest_gap_s, r["wall_s"] - self._wall_s)
                self._wall_s = r["wall_s"]
        self._said = self._said and not records

    def age_s(self) -> float:
        """Wall seconds since the feed was last written (its modification time)."""
        try:
            return self.wall() - self.path.stat().st_mtime
        except OSError:
            return 0.0

    def gone(self) -> bool:
        """Whether the run ran on this host and its process no longer exists."""
        if not isinstance(self.pid, int) or self.pid <= 0 or self.host != socket.gethostname():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except OSError:  # (it exists, as another user's process)
            return False
        return False

    def silent(self) -> None:
        """No new line this poll: say once a silence that the feed looks stale."""
        age_s = self.age_s()
        if not self._said and age_s >= max(STALE_S, STALE_GAPS * self.longest_gap_s):
            where = f"process {self.pid} on {self.host}" if self.host else "its writer"
            self.say(f"{self.path}: no new line for {_age(age_s)}: the run looks stale "
                     f"({where} cannot be checked from here); still waiting, Ctrl-C stops")
            self._said = True

    def end_record(self) -> dict:
        """The end the feed lacks: the run is gone."""
        return {"kind": "end", "status": "gone",
                "error": f"process {self.pid} on {self.host} ended without finishing its "
                         f"feed (killed?); its last line is {_age(self.age_s())} old"}


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


def _checked(path: Path, numbered: list[tuple[int, dict]]) -> list[dict]:
    """The records of ``numbered``; a record a view would fail on is a
    :class:`FeedError` naming the file, line and field."""
    for line, rec in numbered:
        problem = record_problem(rec)
        if problem is not None:
            raise FeedError(f"{path}:{line}: {rec['kind']} record: {problem}")
    return [rec for _line, rec in numbered]


def _open_feed(run_dir: Path, sleep: Callable[[float], None],
               poll_s: float) -> tuple[Path, FeedReader, list[dict]]:
    """The feed of ``run_dir`` (its path, its reader and its checked records so far,
    the start record first), waited for while the run has only just created it."""
    if not run_dir.is_dir():
        raise FeedError(f"{run_dir}: no such directory")
    path = run_dir / FEED_NAME
    if not path.is_file():
        raise FeedError(f"{run_dir}: no {FEED_NAME} (olsctl run writes it with --live or --feed)")
    reader = FeedReader(path)
    numbered = reader.poll_numbered()
    while not numbered:  # the run has just created it
        if reader.offset or _first_byte(path) not in (b"", b"{"):
            numbered = [(1, {})]
            break
        sleep(poll_s)
        numbered = reader.poll_numbered()
    if numbered[0][1].get("kind") != "start":
        raise FeedError(f"{path}: not an olsctl feed (its first line is no start record)")
    return path, reader, _checked(path, numbered)


def _follow(run_dir: Path, path: Path, reader: FeedReader, dash: Dashboard, view: View,
            sleep: Callable[[float], None], poll_s: float, writer: _Writer) -> dict | None:
    """Follow the feed of a run still going until it ends (its end record, returned, or
    a ``summary.json`` newer than the feed: None), showing each new sample; or until its
    writer is known to be gone (an end record of status ``gone``)."""
    end = None
    finished = False
    while end is None and not finished:
        sleep(poll_s)
        records = _checked(path, reader.poll_numbered())
        if not records and writer.gone():  # (read again: it may have ended just now)
            records = _checked(path, reader.poll_numbered())
            if not records and not _summary_is_newer(run_dir, path):
                return writer.end_record()
        if not records:
            writer.silent()
        writer.heard(records)
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
    return end


def monitor(run_dir: Path, view: View, replay: bool = False, speed: float = 20.0,
            clock: Callable[[], float] = time.monotonic,
            sleep: Callable[[float], None] = time.sleep, poll_s: float = POLL_S,
            say: Callable[[str], None] = lambda text: None,
            wall: Callable[[], float] = time.time) -> dict:
    """Show the run writing ``run_dir/live.jsonl``: replayed at ``speed`` samples per
    second when it has finished (or with ``replay``), then followed until it ends (its
    end record, or a ``summary.json`` newer than the feed). Returns the end record
    (``status`` finished, failed or interrupted; ``gone`` when the run ran on this host
    and its process ended without an end record). ``say`` is told, once a silence, that
    a feed silent for long looks stale; ``wall`` is the clock of file times."""
    if not (math.isfinite(speed) and speed > 0):
        raise ConfigError(f"command line: --speed: must be a number > 0 (got {speed:g})")
    path, reader, pending = _open_feed(run_dir, sleep, poll_s)
    writer = _Writer(path, pending[0], say, wall)
    writer.heard(pending)
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
        if end is None and not finished:
            end = _follow(run_dir, path, reader, dash, view, sleep, poll_s, writer)
        view.update(dash, True)
    finally:
        view.stop()
    return end or {"kind": "end", "status": "finished"}
