"""A what-if run by a family's compiled loop, as the engine and the controller hold it:
:func:`olsctl.whatif.steps`' generator protocol over the loop's arrays. Each family's
run (:class:`olsctl.policies.mqbf.template.MqbfRun`,
:class:`olsctl.policies.power.template.KnapsackRun`) says how its loop is called.
"""

from __future__ import annotations

import numpy as np

from olsctl.policies.core import loop as fw

INF = float("inf")


class LoopRun:
    """A what-if as the arrays of a compiled loop (``arrays``, by name: ``start``,
    ``submit``, ``runtime``, ``count``, ``clock`` among them); a family's run gives
    :meth:`call`, one call of its loop (True: the SLA bound cut the run short)."""

    #: the arrays of :meth:`column`'s blocks
    COLUMNS = {fw.START: "start", fw.SUBMIT: "submit", fw.RUNTIME: "runtime"}

    def __init__(self, arrays: dict) -> None:
        self.arrays = arrays
        self.clock = arrays["clock"]
        self.count = arrays["count"]
        self.bound = INF

    def call(self) -> bool:
        raise NotImplementedError

    def forward(self) -> bool:
        """Run on; True when the bound cut the run short (:attr:`bound` holds it)."""
        cut = self.call()
        self.bound = float(self.clock[fw.VALUE])
        return bool(cut)

    def go_on(self, limit: float | None) -> None:
        """Go on under a higher ``limit`` (None: no more cuts)."""
        if limit is None:
            self.count[fw.METRIC] = 0
        else:
            self.clock[fw.LIMIT] = limit

    def steps(self):
        """:func:`olsctl.whatif.steps`' generator protocol: yields the bound each time it
        cuts the run short; ``send`` a higher limit, or None to run to the end."""
        while self.forward():
            self.go_on((yield self.bound))

    def column(self, block: int) -> np.ndarray:
        """A float column of the jobs (``START``, ``SUBMIT`` or ``RUNTIME`` of
        :mod:`olsctl.policies.core.loop`), as it stands."""
        return self.arrays[self.COLUMNS[block]]

    @property
    def now_s(self) -> float:
        return float(self.clock[fw.NOW])
