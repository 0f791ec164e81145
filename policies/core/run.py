"""A what-if run by a family's compiled loop, as the engine and the controller hold it:
:func:`olsctl.whatif.steps`' generator protocol over the loop's arrays. Each family's
run (:class:`olsctl.policies.mqbf.template.MqbfRun`,
:class:`olsctl.policies.power.template.KnapsackRun`) says how its loop is called.
"""

from __future__ import annotations

import numpy as np

from olsctl.policies.core import loop as fw
from olsctl.policies.core.bound import BOUND_METRICS

INF = float("inf")

#: what a what-if's steps yield when they pause at the time asked (``pause_s``): every
#: instant up to it has run (the run may also have ended); the next call goes on as if
#: there had been no pause
PAUSED = "paused"


def loop_arrays(snap, until_s: float, stop_above: "tuple[str, float] | None") -> dict:
    """The arrays every compiled what-if loop runs on, filled from a snapshot (its jobs
    indexed as there, the first ``n_running`` running, the others waiting in arrival
    order): the job columns, the queue, room for the running jobs, the heap of ends and
    a pass's starts, the counters and the clock (the snapshot's processors and time, no
    wake, the horizon ``until_s``, the SLA bound ``stop_above`` or none), and the bound's
    marks. A family adds its own, then opens the running jobs (``running_open``)."""
    nr, n = snap.n_running, int(snap.job_id.size)
    a: dict = {"procs": snap.procs.astype(np.int64), "est": snap.estimate_s.astype(float),
               "runtime": snap.runtime_s.astype(float),
               "submit": snap.submit_s.astype(float), "start": snap.start_s.astype(float),
               "queue": np.arange(nr, n, dtype=np.int64), "running": np.zeros((n, 2)),
               "heap_t": np.zeros(n), "heap_j": np.zeros(n, dtype=np.int64),
               "started": np.zeros(n, dtype=np.int64)}
    metric = 0 if stop_above is None or n == 0 else BOUND_METRICS.get(stop_above[0], 0)
    count = a["count"] = np.zeros(fw.N_COUNTS, dtype=np.int64)
    count[fw.ACTIVE] = snap.active_procs
    count[fw.NQ] = n - nr
    count[fw.METRIC] = metric
    clock = a["clock"] = np.zeros(fw.N_TAIL)
    clock[fw.NOW] = snap.now_s
    clock[fw.WAKE_T] = INF
    clock[fw.UNTIL] = until_s
    clock[fw.LIMIT] = stop_above[1] if metric else 0.0
    a["seen"] = np.zeros(n if metric else 0, dtype=np.bool_)
    return a


def copied_for(arrays: dict, own: tuple[str, ...], active: int,
               wake: "tuple[float, int] | None", pass_due: bool) -> dict:
    """A template's ``arrays`` for one what-if: those a run changes (``own``) copied,
    the others shared, under ``active`` processors, a wake under way ((time, active
    processors then) or None) and whether the snapshot instant's pass is due."""
    arrays = dict(arrays)
    for name in own:
        arrays[name] = arrays[name].copy()
    count, clock = arrays["count"], arrays["clock"]
    count[fw.ACTIVE] = active
    count[fw.WAKE_N] = 0 if wake is None else wake[1]
    count[fw.DUE] = pass_due
    clock[fw.WAKE_T] = INF if wake is None else wake[0]
    return arrays


class LoopRun:
    """A what-if as the arrays of a compiled loop (``arrays``, by name: ``start``,
    ``submit``, ``runtime``, ``count``, ``clock`` among them), run by calling the
    family's compiled ``loop`` with ``args`` (it returns True when the SLA bound cut the
    run short)."""

    #: the arrays of :meth:`column`'s blocks
    COLUMNS = {fw.START: "start", fw.SUBMIT: "submit", fw.RUNTIME: "runtime"}

    def __init__(self, arrays: dict, loop, args: tuple) -> None:
        self.arrays = arrays
        self.clock = arrays["clock"]
        self.count = arrays["count"]
        self.bound = INF
        self._loop, self._args = loop, args

    def forward(self) -> bool:
        """Run on; True when the bound cut the run short (:attr:`bound` holds it)."""
        cut = self._loop(*self._args)
        self.bound = float(self.clock[fw.VALUE])
        return bool(cut)

    def go_on(self, limit: float | None) -> None:
        """Go on under a higher ``limit`` (None: no more cuts)."""
        if limit is None:
            self.count[fw.METRIC] = 0
        else:
            self.clock[fw.LIMIT] = limit

    def steps(self, pause_s: float = INF):
        """:func:`olsctl.whatif.steps`' generator protocol: yields the bound each time it
        cuts the run short (``send`` a higher limit, or None to run to the end), and
        may yield :data:`PAUSED`, at most once, when every instant up to ``pause_s``
        has run."""
        until = self.clock[fw.UNTIL]
        paused = not pause_s < until
        while True:
            if not paused:
                self.clock[fw.UNTIL] = pause_s
            cut = self.forward()
            self.clock[fw.UNTIL] = until
            if cut:
                self.go_on((yield self.bound))
            elif paused:
                return
            else:
                paused = True
                yield PAUSED

    def column(self, block: int) -> np.ndarray:
        """A float column of the jobs (``START``, ``SUBMIT`` or ``RUNTIME`` of
        :mod:`olsctl.policies.core.loop`), as it stands."""
        return self.arrays[self.COLUMNS[block]]

    @property
    def now_s(self) -> float:
        return float(self.clock[fw.NOW])
