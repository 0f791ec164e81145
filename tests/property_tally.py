"""Counting what a hypothesis property actually checked.

A property whose examples mostly return early, or take a branch that checks nothing,
passes while testing little. The properties that use this count each example with
:func:`checked` (and whether it checked something), and their test runs them through
:func:`run_counted`, which fails when too few examples checked something.
"""

from __future__ import annotations

from typing import Callable

#: examples run, examples that checked something, and named tallies, of the property
#: running now (one at a time: a test runs its property to the end before the next)
_tally: dict = {"runs": 0, "checked": 0, "named": {}}


def checked(something: bool, **named: bool) -> None:
    """Count one example, whether it checked something, and other facts about it (each
    counted under its name when true)."""
    _tally["runs"] += 1
    _tally["checked"] += bool(something)
    for name, value in named.items():
        _tally["named"][name] = _tally["named"].get(name, 0) + bool(value)


def run_counted(prop: Callable[[], None], min_examples: int = 30, min_share: float = 1.0,
                **min_named: float) -> dict:
    """Run the hypothesis property ``prop`` (a ``@given`` function of no other argument);
    fail unless it ran at least ``min_examples`` examples, at least ``min_share`` of them
    checked something, and each named tally reached its share. Returns the tally."""
    _tally.update(runs=0, checked=0, named={})
    prop()
    runs, done = _tally["runs"], _tally["checked"]
    assert runs >= min_examples, f"only {runs} examples ran"
    assert done >= min_share * runs, f"only {done} of {runs} examples checked something"
    for name, share in min_named.items():
        got = _tally["named"].get(name, 0)
        assert got >= share * runs, f"only {got} of {runs} examples: {name}"
    return dict(_tally)
