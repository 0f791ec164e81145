"""Tables of runs that fit the console's width whatever it is (a terminal, a pipe, a file).

The columns that tell rows apart (a run's number, log, scheme, settings, id, status) are
always shown whole; of the figure columns, the first ones by rank that fit, with a note
naming those left out and the width that shows them all. When no figure column fits
beside the identifying ones, each row is one block of ``heading value`` items instead.
No cell is ever cut.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

#: a width no table of runs reaches: measures a table at its natural width
_UNBOUNDED = 100_000


@dataclass(frozen=True)
class Column:
    """A column: ``key`` columns identify a row and are never left out; figure columns
    are taken by ``rank`` (then in order) while they fit; ``note`` (what the column
    means) joins the caption when the column is shown."""

    heading: str
    key: bool = False
    justify: str = "left"
    rank: int = 0
    note: str = ""


@dataclass
class FittedTable:
    """A rich renderable: ``rows`` hold one cell per column and whether the row ends a
    section; the first ``grouped`` columns show a value only where it changes within a
    section (in blocks, every row shows it). Blocks when the identifying columns leave
    room for no figure column."""

    title: str
    caption: str
    columns: tuple[Column, ...]
    rows: list[tuple[tuple[str, ...], bool]] = field(default_factory=list)
    grouped: int = 0

    def add_row(self, *cells: str, end_section: bool = False) -> None:
        self.rows.append((tuple(cells), end_section))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator:
        width = options.max_width
        keys = [i for i, c in enumerate(self.columns) if c.key]
        every = list(range(len(self.columns)))
        shown = set(keys)
        figures = sorted(set(every) - shown, key=lambda i: (self.columns[i].rank, i))
        for i in figures:  # by rank while they fit
            if self._width(console, options, sorted(shown | {i})) > width:
                break
            shown.add(i)
        no_figure = len(shown) == len(keys) < len(every)
        if no_figure or self._width(console, options, keys) > width:
            yield from self._blocks(width, self._width(console, options, every))
            return
        left_out = [self.columns[i].heading for i in every if i not in shown]
        note = ""
        if left_out:
            full = self._width(console, options, every)
            note = (f"not shown for want of width: {', '.join(left_out)} (a terminal "
                    f"{full} columns wide, e.g. COLUMNS={full}, shows every column)")
        yield self._table(sorted(shown), self._caption(sorted(shown), note))

    def _caption(self, shown: list[int], note: str) -> str:
        """The caption, the notes of the columns ``shown``, then ``note``."""
        parts = [self.caption, *(self.columns[i].note for i in shown), note]
        return "; ".join(part for part in parts if part)

    def _width(self, console: Console, options: ConsoleOptions, shown: list[int]) -> int:
        """The table's natural width with the columns ``shown`` (no cell wrapped)."""
        table = self._table(shown, None)
        return Measurement.get(console, options.update_width(_UNBOUNDED), table).maximum

    def _table(self, shown: list[int], caption: str | None) -> Table:
        table = Table(title=self.title if caption is not None else None, title_justify="left",
                      caption=caption or None, caption_justify="left", box=box.SIMPLE_HEAD,
                      pad_edge=False)
        for i in shown:
            col = self.columns[i]
            table.add_column(col.heading, justify=col.justify, no_wrap=True)
        for cells, end in self._grouped_rows():
            table.add_row(*(cells[i] for i in shown), end_section=end)
        return table

    def _grouped_rows(self) -> Iterator[tuple[tuple[str, ...], bool]]:
        """The rows as the table shows them: grouped values blank where they repeat."""
        previous: tuple[str, ...] | None = None
        for cells, end in self.rows:
            same = previous is not None and cells[:self.grouped] == previous[:self.grouped]
            shown = tuple("" if same and i < self.grouped else c for i, c in enumerate(cells))
            yield shown, end
            previous = None if end else cells

    def _blocks(self, width: int, full: int) -> Iterator[Text]:
        """One block per row, blocks a blank line apart: its identifying items, then its
        figures, each line after the first indented."""
        yield Text(self.title, style="italic")
        for cells, _end in self.rows:
            yield Text("")
            pairs = [(c, text) for c, text in zip(self.columns, cells) if text]
            keys = [f"{c.heading} {text}" for c, text in pairs if c.key]
            figures = [f"{c.heading} {text}" for c, text in pairs if not c.key]
            lines = _packed(keys, width, "", "  ") + _packed(figures, width, "  ", "  ")
            yield from (Text(line) for line in lines)
        yield Text("")
        note = (f"one block per row: the table needs {full} columns (a terminal that wide, "
                f"e.g. COLUMNS={full}, shows it)")
        yield Text(self._caption(list(range(len(self.columns))), note))


def _packed(items: list[str], width: int, first: str, indent: str) -> list[str]:
    """``items`` three spaces apart on as few lines of at most ``width`` characters as
    they fit (an item wider than a line gets a line of its own), the first line starting
    with ``first``, the others with ``indent``."""
    lines: list[str] = []
    line = ""
    for item in items:
        candidate = f"{line}   {item}" if line else f"{indent if lines else first}{item}"
        if line and cell_len(candidate) > width:
            lines.append(line)
            candidate = f"{indent}{item}"
        line = candidate
    return lines + ([line] if line else [])
