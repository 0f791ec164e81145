"""The handlers of ``olsctl``'s commands, found by name in :data:`olsctl.cli.COMMANDS`.

A handler takes the parsed arguments and the consoles of output and errors, ``(args,
out, err)``, and returns the exit code: it calls the modules that do the work and hands
their results to renderers (:mod:`olsctl.terminal`, rich tables of its own). Known input
errors (:class:`olsctl.errors.OlsctlError`) go up to :func:`olsctl.cli.main`, which
turns them into one line and :data:`EXIT_INPUT`. The modules that do the work are
imported inside the handlers, so a command loads only what it needs.

- :mod:`~olsctl.commands.run`: ``run`` and ``monitor``;
- :mod:`~olsctl.commands.study`: ``study`` and ``tune``;
- :mod:`~olsctl.commands.logs`: ``trace info`` and ``convert``;
- :mod:`~olsctl.commands.results`: ``predict`` and ``report``;
- :mod:`~olsctl.commands.bench`: ``bench``.
"""

from __future__ import annotations

from typing import Any, Callable

EXIT_OK, EXIT_INPUT, EXIT_INTERRUPTED = 0, 2, 130


def say_on(console: Any) -> Callable[[str], None]:
    """A function that prints a line of text on ``console`` as it is (no markup, no
    highlighting, not wrapped): what a long step says it does."""
    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)
    return say


def counted(n: int, word: str) -> str:
    """``n`` (with thousands separators) and ``word``, plural unless ``n`` is 1:
    ``1 job``, ``2,000 jobs``."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"
