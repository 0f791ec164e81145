"""Following a run's directory (``olsctl monitor``): its feed replayed, then followed
until the run ends, in a view.
"""

from __future__ import annotations

import math
import time
from collections import deque
from pathlib import Path
from typing import Callable

from olsctl.errors import ConfigError
from olsctl.live.dashboard import Dashboard
from olsctl.live.feed import FEED_NAME, FeedError, FeedReader, record_problem
from olsctl.live.views import View

POLL_S = 0.25  # how often monitor looks at the feed


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
            sleep: Callable[[float], None], poll_s: float) -> dict | None:
    """Follow the feed of a run still going until it ends (its end record, returned, or
    a ``summary.json`` newer than the feed: None), showing each new sample."""
    end = None
    finished = False
    while end is None and not finished:
        sleep(poll_s)
        records = _checked(path, reader.poll_numbered())
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
            sleep: Callable[[float], None] = time.sleep, poll_s: float = POLL_S) -> dict:
    """Show the run writing ``run_dir/live.jsonl``: replayed at ``speed`` samples per
    second when it has finished (or with ``replay``), then followed until it ends (its
    end record, or a ``summary.json`` newer than the feed). Returns the end record
    (``status`` finished, failed or interrupted)."""
    if not (math.isfinite(speed) and speed > 0):
        raise ConfigError(f"command line: --speed: must be a number > 0 (got {speed:g})")
    path, reader, pending = _open_feed(run_dir, sleep, poll_s)
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
            end = _follow(run_dir, path, reader, dash, view, sleep, poll_s)
        view.update(dash, True)
    finally:
        view.stop()
    return end or {"kind": "end", "status": "finished"}
