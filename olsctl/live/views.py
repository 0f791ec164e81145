"""Views: how a dashboard is shown. Redrawn in place on a terminal, a plain line every
few seconds otherwise, or nothing (a feed without a display).
"""

from __future__ import annotations

import math
import time
from typing import Callable

from rich.console import Console
from rich.live import Live

from olsctl.live.dashboard import Dashboard

REFRESH_S = 0.25  # shortest wall time between two dashboard redraws
PLAIN_EVERY_S = 5.0  # wall time between two plain progress lines


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
