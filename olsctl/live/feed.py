"""The feed: ``live.jsonl`` in a run's directory, one JSON object per line, written
as the run goes (flushed at every line) and read back from any process or machine that
sees the directory; and the checks a record must pass before a view shows it.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Callable

from olsctl.errors import OlsctlError

FEED_NAME = "live.jsonl"
FSYNC_EVERY_S = 1.0  # the feed is flushed at every line, synced to disk this often


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
        self.lines = 0  # complete lines read so far
        self.inode: int | None = None
        self.reset = False

    def poll(self) -> list[dict]:
        return [rec for _line, rec in self.poll_numbered()]

    def poll_numbered(self) -> list[tuple[int, dict]]:
        """:meth:`poll`, each record with its line number in the file (from 1)."""
        self.reset = False
        try:
            with open(self.path, "rb") as fh:
                st = os.fstat(fh.fileno())
                replaced = st.st_ino != self.inode or st.st_size < self.offset
                if self.inode is not None and replaced:
                    self.offset, self.lines, self.reset = 0, 0, True
                self.inode = st.st_ino
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return []
        end = data.rfind(b"\n") + 1
        self.offset += end
        records = []
        for line in data[:end].split(b"\n")[:-1]:
            self.lines += 1
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a damaged line: skip it, keep following
            if isinstance(rec, dict):
                records.append((self.lines, rec))
        return records


# -- what a view reads from a feed's records ---------------------------------------------
def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


_NUMBER = (_is_number, "a number")
_INT = (_is_int, "an integer")
_TEXT = (lambda v: isinstance(v, str), "a string")
_MAPPING = (lambda v: isinstance(v, dict), "a mapping")
_LIST = (lambda v: isinstance(v, list), "a list")
_FLAG = (lambda v: isinstance(v, bool), "true or false")
#: the fields the views read, by record kind: (name, check, required): True, the field
#: must be there; False, it may be missing or null; None, it may be missing, not null
RECORD_FIELDS = {
    "start": (("start_s", _NUMBER, True), ("span_s", _NUMBER, True), ("jobs", _INT, True),
              ("title", _TEXT, None), ("pace", _NUMBER, False), ("sla", _MAPPING, False),
              ("sla_windows", _MAPPING, False), ("pid", _INT, None), ("host", _TEXT, None)),
    "sample": (("time_s", _NUMBER, True), ("wall_s", _NUMBER, True),
               ("busy_procs", _INT, True), ("active_procs", _INT, True),
               ("total_procs", _INT, True), ("queue_len", _INT, True), ("done", _INT, True),
               ("mean_bsld", _NUMBER, False), ("utilization", _NUMBER, False),
               ("power_w", _NUMBER, False), ("cap_w", _NUMBER, False),
               ("window_bsld", _NUMBER, False), ("windows_judged", _INT, False),
               ("windows_kept", _INT, False), ("jobs_throttled", _INT, None),
               ("decision", _MAPPING, False)),
    "end": (("status", _TEXT, True), ("error", _TEXT, False)),
}
_DECISION_FIELDS = (("n", _INT, True), ("time_s", _NUMBER, True), ("chosen", _MAPPING, True),
                    ("reason", _TEXT, True), ("sla_met", _FLAG, False),
                    ("trials", _LIST, False), ("recent", _LIST, False))
_SETTING_FIELDS = (("active_procs", _INT, True), ("cap_w", _NUMBER, False),
                   ("window", _INT, False))
_TRIAL_FIELDS = _SETTING_FIELDS + (("metric", _NUMBER, False), ("cost", _NUMBER, False))


def _fields_problem(rec: dict, fields: tuple, where: str = "") -> str | None:
    for name, (check, what), required in fields:
        value = rec.get(name)
        if value is None:
            if required or (required is None and name in rec):
                return f"{where}{name}: {'null' if name in rec else 'missing'}"
            continue
        if not check(value):
            return f"{where}{name}: must be {what} (got {value!r:.40})"
    return None


def record_problem(rec: dict) -> str | None:
    """What a view would fail on in a feed record (``field: problem``), or None; records
    of kinds the views do not know are skipped, so they have none."""
    fields = RECORD_FIELDS.get(rec.get("kind"))
    if fields is None:
        return None
    problem = _fields_problem(rec, fields)
    d = rec.get("decision") if rec.get("kind") == "sample" else None
    if problem is not None or d is None:
        return problem
    problem = (_fields_problem(d, _DECISION_FIELDS, "decision.")
               or _fields_problem(d["chosen"], _SETTING_FIELDS, "decision.chosen."))
    for i, t in enumerate(d.get("trials") or []):
        problem = problem or (_fields_problem(t, _TRIAL_FIELDS, f"decision.trials[{i}].")
                              if isinstance(t, dict)
                              else f"decision.trials[{i}]: must be a mapping")
    for i, r in enumerate(d.get("recent") or []):
        ok = (isinstance(r, list) and len(r) == 3 and _is_number(r[0])
              and isinstance(r[1], dict) and _fields_problem(r[1], _SETTING_FIELDS) is None
              and (r[2] is None or isinstance(r[2], bool)))
        problem = problem or (None if ok else f"decision.recent[{i}]: must be [time_s, "
                                              f"setting, sla_met]")
    return problem
