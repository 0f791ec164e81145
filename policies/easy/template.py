"""EASY's compiled what-if path: a snapshot's what-if as the flat arrays of
:mod:`olsctl.policies.easy.forward`, run by its compiled loop, and a tick's template.
"""

from __future__ import annotations

from itertools import chain
from typing import TYPE_CHECKING

import numpy as np

from olsctl.checker import NULL_CHECKER
from olsctl.metrics import BSLD_BOUND_S
from olsctl.policies.core import loop
from olsctl.policies.core.bound import BOUND_METRICS, INF
from olsctl.policies.core.jit import compiled
from olsctl.policies.easy import forward  # noqa: F401  (the loop, called compiled)

if TYPE_CHECKING:
    from olsctl.policies.easy import EasyBackfill
    from olsctl.state import SimState, Snapshot


def steps(policy: "EasyBackfill", state: "SimState", until_s: float,
          stop_above: "tuple[str, float] | None", raise_at: "tuple[float, int] | None"):
    """The what-if of a live ``state`` run by EASY's compiled loop, as
    :func:`olsctl.whatif.steps` runs it (the same generator protocol), or None when the
    state holds more than processors (power, a limit, a budget, partitions, a strict
    checker): then the Python pass runs it."""
    if (state.power is not None or state.limit is not None or state.budget is not None
            or state.checker is not NULL_CHECKER or state.alloc):
        return None
    return _easy_steps(state, policy.order_code, until_s, stop_above, raise_at)


def template_key(policy: "EasyBackfill") -> None:
    """One template serves every EASY policy of a tick: each what-if takes its order."""
    return None


def template(snap: "Snapshot", policy: "EasyBackfill", until_s: float,
             stop_above: "tuple[str, float] | None") -> "EasyTemplate | None":
    """The tick's template of ``snap`` (None when it holds more than processors)."""
    return EasyTemplate(snap, until_s, stop_above) if EasyTemplate.fits(snap) else None


def _easy_steps(state: "SimState", order: int, until_s: float,
                stop_above: "tuple[str, float] | None", raise_at: "tuple[float, int] | None"):
    """:func:`steps` for EASY, compiled: the same generator protocol (yield the bound
    when cut short, ``send`` a higher limit or None), with ``state`` brought up to date
    each time the loop stops."""
    if raise_at is not None:
        state.wake = (float(raise_at[0]), int(raise_at[1]))
    run = _EasyRun(state, order, until_s, stop_above)
    while run.forward():
        limit = yield run.bound
        run.go_on(limit)
    return None


class _EasyRun:
    """An EASY what-if as the flat arrays :func:`olsctl.policies.easy.forward.easy_forward`
    runs (jobs indexed as in the state), and what it did written back to the state
    (``state`` None: to nobody; :class:`EasyTemplate` runs read the arrays)."""

    def __init__(self, state: "SimState | None", order: int, until_s: float = INF,
                 stop_above: "tuple[str, float] | None" = None, arrays=None) -> None:
        self.state, self.order = state, order
        self.kernels = compiled()
        if arrays is None:
            wake = state.wake
            arrays = _easy_arrays(
                len(state.job_id), state.procs, state.queue, state.estimate_s,
                state.runtime_s, state.submit_s, state.start_s,
                np.fromiter(chain.from_iterable(state.running), float,
                            2 * len(state.running)),
                (state.active_procs, state.busy_procs, 0 if wake is None else wake[1],
                 state.pass_due),
                (state.now_s, INF if wake is None else wake[0]), until_s, stop_above,
                self.kernels)
        self.n, self.ints, self.floats, self.seen = arrays
        self.tail_at = (loop.FLOAT_BLOCKS + 2) * self.n
        self.bound = INF

    def forward(self) -> bool:
        """Run on; True when the bound cut the run short (:attr:`bound` holds it)."""
        cut = self.kernels.easy_forward(self.order, self.n, self.ints, self.floats, self.seen,
                                        BSLD_BOUND_S)
        self.bound = float(self.floats[self.tail_at + loop.VALUE])
        if self.state is not None:
            self._write_back()
        return bool(cut)

    def go_on(self, limit: float | None) -> None:
        """Go on under a higher ``limit`` (None: no more cuts)."""
        if limit is None:
            self.ints[loop.INT_BLOCKS * self.n + loop.METRIC] = 0
        else:
            self.floats[self.tail_at + loop.LIMIT] = limit

    def steps(self, pause_s: float = INF):
        """:func:`steps`' generator protocol over these arrays alone (EASY meters no
        power: it never pauses at ``pause_s``)."""
        while self.forward():
            self.go_on((yield self.bound))

    def column(self, block: int) -> np.ndarray:
        """A float column of the jobs (``loop.START``, ``loop.SUBMIT``, ...), as it stands."""
        n = self.n
        return self.floats[block * n:(block + 1) * n]

    @property
    def now_s(self) -> float:
        return float(self.floats[self.tail_at + loop.NOW])

    def _write_back(self) -> None:
        k, st, n = loop, self.state, self.n
        at = k.INT_BLOCKS * n
        count = self.ints[at:at + k.FINISHES + 1].tolist()
        clock = self.floats[self.tail_at:self.tail_at + k.N_CLOCK].tolist()
        st.now_s = clock[k.NOW]
        st.active_procs = count[k.ACTIVE]
        st.busy_procs = count[k.BUSY]
        st.wake = None if clock[k.WAKE_T] == k.INF else (clock[k.WAKE_T], count[k.WAKE_N])
        st.pass_due = bool(count[k.DUE])
        st.finishes += count[k.FINISHES]
        self.ints[at + k.FINISHES] = 0
        st.start_s[:] = self.floats[k.START * n:k.START * n + n].tolist()
        st.queue = self.ints[k.QUEUE * n:k.QUEUE * n + count[k.NQ]].tolist()
        at = loop.FLOAT_BLOCKS * n
        rows = self.floats[at:at + 2 * count[k.NRUN]]
        st.running = list(zip(rows[0::2].tolist(), rows[1::2].astype(np.int64).tolist()))
        st.started = []


def _easy_arrays(n: int, procs, queue, est, runtime, submit, start, running_flat,
                 counts: tuple, clock: tuple, until_s: float,
                 stop_above: "tuple[str, float] | None", jit_kernels) -> tuple:
    """The arrays of an EASY what-if of ``n`` jobs (:mod:`olsctl.policies.easy.forward`):
    ``queue`` waits in arrival order, ``running_flat`` holds the running jobs' (expected
    end, job) pairs in order, ``counts`` = (active, busy, processors of a wake under way,
    pass due), ``clock`` = (now, the wake's time); ``jit_kernels``: the compiled kernels.
    Returns (n, ints, floats, seen)."""
    k = loop
    nq, n_run = len(queue), running_flat.size // 2
    metric = 0 if stop_above is None or n == 0 else \
        BOUND_METRICS.get(stop_above[0], 0)
    ints = np.empty(k.INT_BLOCKS * n + k.N_COUNTS, dtype=np.int64)
    ints[k.PROCS * n:k.PROCS * n + n] = procs
    ints[k.QUEUE * n:k.QUEUE * n + nq] = queue
    active, busy, wake_n, due = counts
    ints[k.INT_BLOCKS * n:] = (active, busy, nq, n_run, 0, wake_n, due, metric, 0, 0, 0, 0)
    floats = np.empty((k.FLOAT_BLOCKS + 2) * n + k.N_TAIL)
    floats[k.EST * n:k.EST * n + n] = est
    floats[k.RUNTIME * n:k.RUNTIME * n + n] = runtime
    floats[k.SUBMIT * n:k.SUBMIT * n + n] = submit
    floats[k.START * n:k.START * n + n] = start
    at = k.FLOAT_BLOCKS * n
    floats[at:at + 2 * n_run] = running_flat
    at += 2 * n
    floats[at:at + k.N_CLOCK] = (clock[0], clock[1], until_s,
                                 stop_above[1] if metric else 0.0, 0.0)
    seen = np.zeros(n if metric else 0, dtype=np.bool_)
    jit_kernels.forward_open(n, ints, floats, seen, BSLD_BOUND_S)
    return n, ints, floats, seen


class EasyTemplate:
    """A snapshot's EASY what-if arrays, made once from its columns and copied for each
    candidate (:meth:`run`): for snapshots with nothing but processors (no power, limit,
    budget or partitions) and no arrivals. The same arrays as a what-if started from
    ``SimState.from_snapshot(snap)`` makes."""

    def __init__(self, snap: "Snapshot", until_s: float,
                 stop_above: "tuple[str, float] | None") -> None:
        self.snap = snap
        args = self.open_args(snap, until_s, stop_above)
        n = args[0]
        ints = np.empty(loop.INT_BLOCKS * n + loop.N_COUNTS, dtype=np.int64)
        floats = np.empty((loop.FLOAT_BLOCKS + 2) * n + loop.N_TAIL)
        seen = np.zeros(n if args[-2] else 0, dtype=np.bool_)
        compiled().template_open(*args, BSLD_BOUND_S, ints, floats, seen)
        self.arrays = n, ints, floats, seen

    @staticmethod
    def open_args(snap: "Snapshot", until_s: float,
                  stop_above: "tuple[str, float] | None") -> tuple:
        """The arguments of :func:`olsctl.policies.easy.forward.template_open` before the
        bounded slowdown's runtime bound: the snapshot's columns, its machine and clock,
        the horizon, and the SLA bound's metric code (0: none) and limit."""
        n = int(snap.job_id.size)
        metric = 0 if stop_above is None or n == 0 else \
            BOUND_METRICS.get(stop_above[0], 0)
        return (n, snap.n_running, snap.procs, snap.estimate_s, snap.runtime_s,
                snap.submit_s, snap.start_s, snap.active_procs, snap.now_s, until_s,
                metric, stop_above[1] if metric else 0.0)

    @staticmethod
    def fits(snap: "Snapshot") -> bool:
        """Whether a template can stand for this snapshot's what-ifs."""
        return (snap.power is None and snap.limit is None and snap.budget is None
                and snap.running_alloc.count(None) == len(snap.running_alloc))

    def start(self, policy: "EasyBackfill", active: int,
              wake: "tuple[float, int] | None", pass_due: bool) -> "_EasyRun":
        """:meth:`run` in ``policy``'s queue order."""
        return self.run(policy.order_code, active, wake, pass_due)

    def run(self, order: int, active: int, wake: "tuple[float, int] | None",
            pass_due: bool) -> _EasyRun:
        """A what-if from the template's arrays (copied) under ``active`` processors, a
        wake under way and whether the snapshot instant's pass is due."""
        n, ints, floats, seen = self.arrays
        ints, floats = ints.copy(), floats.copy()
        at = loop.INT_BLOCKS * n
        ints[at + loop.ACTIVE] = active
        ints[at + loop.WAKE_N] = 0 if wake is None else wake[1]
        ints[at + loop.DUE] = pass_due
        floats[(loop.FLOAT_BLOCKS + 2) * n + loop.WAKE_T] = INF if wake is None else wake[0]
        return _EasyRun(None, order, arrays=(n, ints, floats, seen.copy()))
