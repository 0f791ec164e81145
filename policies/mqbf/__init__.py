"""Multiple-queue backfilling (Lawson & Smirni; the rules: docs/mqbf.md).

Jobs go to one of K queues by runtime estimate; each queue owns a partition of the
active processors. A pass is the compiled kernel
:func:`olsctl.policies.mqbf.passes.mqbf_pass`, the one the controller's what-ifs run
too; this module holds the policy: its settings, the queues and partitions, the arrays
a state's passes share (:class:`PassArrays`), and the run's record of the pivots that
started later than a reservation they had held (:class:`PivotRecord`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import chain
from typing import TYPE_CHECKING, Iterable

import numpy as np

from olsctl.policies.core.base import PolicyBase
from olsctl.policies.core.jit import compiled
from olsctl.policies.core.order import ORDER_CODES
from olsctl.policies.mqbf import passes  # noqa: F401  (the pass, called compiled)
from olsctl.policies.mqbf.profile import partition_counts, queue_of_estimate

if TYPE_CHECKING:
    from olsctl.records import RunRecords
    from olsctl.state import SimState
    from olsctl.workload import Workload

__all__ = ["MultiQueueBackfill", "PassArrays", "PivotRecord", 
           "PIVOTS_KEY", "default_boundaries"]

INF = math.inf

#: the shortest and longest default boundary, s (Lawson & Smirni's 4 queues: 100, 1000,
#: 10000 s)
BOUNDARY_SPAN_S = (100, 10000)


def default_boundaries(queues: int) -> list:
    """The default ``boundaries_s`` of ``queues`` queues: ``queues - 1`` boundaries
    spaced evenly on a log scale from 100 s to 10,000 s, in whole seconds (one queue:
    none; two: the middle, 1,000 s; four: 100, 1,000, 10,000 s). Whole seconds while
    they stay apart (up to a few hundred queues), else exact."""
    n = queues - 1
    lo, hi = BOUNDARY_SPAN_S
    if n <= 0:
        return []
    if n == 1:
        return [round(math.sqrt(lo * hi))]
    exact = [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]
    whole = [round(b) for b in exact]
    return whole if all(a < b for a, b in zip(whole, whole[1:])) else exact

#: where a run's :class:`PivotRecord` lives in ``state.cache`` (one per run, whatever the
#: MQBF settings; put there by ``prepare``, so what-ifs, which report nothing, skip it)
PIVOTS_KEY = ("mqbf-pivots",)


class PivotRecord:
    """A run's pivots: for each waiting job that held a reservation, the earliest one
    (its shadow time, s), and of the jobs that started after holding one, how many
    (``pivots``), how many started later than that earliest reservation (``late``) and
    the worst such delay (``max_delay_s``, 0 when none was late).

    A reservation is held when a pass makes it (a pass in which no job can start, no
    processor being idle or no waiting job narrow enough, makes none). Times are compared
    exactly: a reservation starts now or at an expected end (start + estimate) of a
    running or reserved job, the very float of the event at which a pivot starting on
    time starts. Snapshots do not carry the record: a what-if keeps none."""

    __slots__ = ("reserved_s", "pivots", "late", "max_delay_s")

    def __init__(self) -> None:
        self.reserved_s: dict[int, float] = {}
        self.pivots = 0
        self.late = 0
        self.max_delay_s = 0.0

    def note_pass(self, state: "SimState", reservations: Iterable[tuple[int, float]]) -> None:
        """After a pass that ran: weigh the starts of jobs that held a reservation
        (pivots never start in the pass that makes them), then keep each of this pass's
        ``reservations`` (pivot job, reserved start in s; inf: it never fits, no
        reservation) that is its job's earliest."""
        reserved = self.reserved_s
        if reserved and state.started:
            now = state.now_s
            for j in state.started:
                held = reserved.pop(j, None)
                if held is not None:
                    self.pivots += 1
                    if now > held:
                        self.late += 1
                        if now - held > self.max_delay_s:
                            self.max_delay_s = now - held
        for j, start_s in reservations:
            if start_s < INF:
                held = reserved.get(j)
                if held is None or start_s < held:
                    reserved[j] = start_s

    def report(self) -> dict:
        """The figures ``run_report`` adds to ``summary.json``."""
        return {"pivots": self.pivots, "late_pivots": self.late,
                "max_pivot_delay_s": self.max_delay_s}


@dataclass(frozen=True)
class MultiQueueBackfill(PolicyBase):
    """MQBF: ``queues`` queues split at ``boundaries_s`` (runtime estimate, s; default
    :func:`default_boundaries`); partition shares in proportion to ``shares`` (default
    even); ``borrow`` idle processors."""

    queues: int = 4
    boundaries_s: tuple | None = None
    order: str = "fcfs"
    shares: tuple | None = None
    borrow: bool = True
    name: str = field(default="mqbf", init=False)
    _code: int = field(init=False, repr=False, compare=False)
    _weights: np.ndarray = field(init=False, repr=False, compare=False)
    _owned: dict = field(init=False, repr=False, compare=False, default_factory=dict)
    _owned_arrays: dict = field(init=False, repr=False, compare=False, default_factory=dict)
    _arrays_key: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.queues < 1:
            raise ValueError(f"queues: must be >= 1 (got {self.queues})")
        bounds = default_boundaries(self.queues) if self.boundaries_s is None else self.boundaries_s
        object.__setattr__(self, "boundaries_s", tuple(float(b) for b in bounds))
        if self.shares is not None:
            object.__setattr__(self, "shares", tuple(self.shares))
        if len(self.boundaries_s) != self.queues - 1:
            raise ValueError(f"boundaries_s: needs {self.queues - 1} values for "
                             f"{self.queues} queues (got {len(self.boundaries_s)})")
        if any(b >= c for b, c in zip(self.boundaries_s, self.boundaries_s[1:])):
            raise ValueError(f"boundaries_s: must increase (got {list(self.boundaries_s)})")
        if self.shares is not None:
            if len(self.shares) != self.queues:
                raise ValueError(f"shares: needs {self.queues} values (got {len(self.shares)})")
            if any(s < 0 for s in self.shares) or sum(self.shares) <= 0:
                raise ValueError(f"shares: must be >= 0 with a positive sum (got {list(self.shares)})")
        # the shares as integers in the same proportions (the exact fractions over their
        # common denominator), as partition_counts splits by
        shares = self.shares if self.shares is not None else (1,) * self.queues
        fractions = [Fraction(str(s)) for s in shares]
        common = math.lcm(*[f.denominator for f in fractions])
        weights = np.array([f.numerator * (common // f.denominator) for f in fractions],
                           dtype=np.int64)
        object.__setattr__(self, "_code", ORDER_CODES[self.order])
        object.__setattr__(self, "_weights", weights)
        # the key of what this policy keeps in ``state.cache``
        object.__setattr__(self, "_arrays_key", ("mqbf-arrays", self.boundaries_s))

    @property
    def n_queues(self) -> int:  # type: ignore[override]
        return self.queues

    @classmethod
    def derived_defaults(cls, settings: dict, given: set) -> dict:
        """Defaults that depend on other settings, for a config to fill in: the
        boundaries of ``settings["queues"]`` queues, unless ``given`` names them."""
        if "boundaries_s" in given:
            return {}
        return {"boundaries_s": default_boundaries(settings["queues"])}

    report_key = "pivots"  # (a class attribute, not a setting)

    def queue_index(self, estimate_s: float) -> int:
        """The smallest k with estimate < boundaries_s[k], else the last queue (0-based):
        :func:`olsctl.policies.mqbf.profile.queue_of_estimate`, as the kernels take it."""
        return queue_of_estimate(self.boundaries_s, estimate_s)

    @property
    def weights(self) -> np.ndarray:
        """The partitions' shares as integers in the same proportions (shared: not to be
        written)."""
        return self._weights

    def owned(self, active_procs: int) -> tuple[int, ...]:
        """Processors each partition owns when ``active_procs`` are active."""
        got = self._owned.get(active_procs)
        if got is None:
            owned = np.empty(self.queues, dtype=np.int64)
            partition_counts(self._weights, active_procs, owned)
            got = self._owned[active_procs] = tuple(owned.tolist())
        return got

    def schedule(self, state: "SimState") -> None:
        reservations = self.backfill(state)
        if reservations is not None:  # (a skipped pass started nothing and reserved nothing)
            record = state.cache.get(PIVOTS_KEY)
            if record is not None:
                record.note_pass(state, reservations)

    def prepare(self, state: "SimState", workload: "Workload") -> str | None:
        """Keep a :class:`PivotRecord` on ``state`` for the run (see :meth:`run_report`)."""
        if PIVOTS_KEY not in state.cache:
            state.cache[PIVOTS_KEY] = PivotRecord()
        return None

    def run_report(self, state: "SimState", records: "RunRecords") -> dict | None:
        """The base's report with the run's pivots: ``pivots`` (jobs that started after
        holding a reservation), ``late_pivots`` (those that started later than the
        earliest reservation they held) and ``max_pivot_delay_s`` (the worst delay, s);
        nothing to add when the state has no record (``prepare`` was not called)."""
        base = super().run_report(state, records)
        record = state.cache.get(PIVOTS_KEY)
        if record is None:
            return base
        return {**(base or {}), **record.report()}

    def backfill(self, state: "SimState") -> list[tuple[int, float]] | None:
        """One pass (:func:`olsctl.policies.mqbf.passes.mqbf_pass` over the state's
        arrays): the jobs it starts are started on the state, in start order, each with
        its processors per partition. Returns the pass's reservations, one per queue with
        a pivot, as (pivot job, reserved start in s; inf: it never fits), in queue order;
        None when the pass was skipped because no processor is idle or nothing waits
        (the pass itself returns at once when no waiting job is narrow enough for the
        idle processors: looking for the narrowest here first costs more than it saves
        under a controller, whose main simulator keeps long queues)."""
        queue = state.queue
        if state.busy_procs >= state.active_procs or not queue:
            return None  # nothing can start: the pass would change nothing
        a = self._arrays(state)
        running = state.running
        n_run = len(running)
        a.make_room(n_run, len(queue))
        if a.finishes != state.finishes or a.n_run != n_run:
            # a job ended (or started elsewhere) since the last pass left the arrays as
            # the state: read the running jobs' (end, job) pairs again (flat: twice as
            # fast as row by row) and what they hold
            if n_run:
                a.running.reshape(-1)[:2 * n_run] = np.fromiter(
                    chain.from_iterable(running), float, 2 * n_run)
            a.held[:] = 0
            a.held[:len(state.held)] = state.held
        ns, a.n_run = compiled().mqbf_pass(
            self._code, self.borrow, state.now_s, state.active_procs, state.busy_procs,
            np.fromiter(queue, np.int64, len(queue)), a.procs, a.est, a.submit,
            a.queue_of, self._owned_array(state.active_procs), a.held, a.running, n_run,
            a.alloc, a.times, a.free, a.pivot_s, a.pivot_j, a.started)
        a.finishes = state.finishes  # (the pass added its starts to running and held)
        if ns:
            alloc, start = a.alloc, state.start
            for j in a.started[:ns].tolist():
                start(j, tuple(alloc[j].tolist()))
        return [(j, s) for j, s in zip(a.pivot_j.tolist(), a.pivot_s.tolist()) if j >= 0]

    def _arrays(self, state: "SimState") -> "PassArrays":
        """The state's :class:`PassArrays` for these boundaries, made once per state and
        extended when jobs were appended."""
        key = self._arrays_key
        got = state.cache.get(key)
        if got is None or got.n != len(state.job_id):
            got = state.cache[key] = PassArrays(state, self.boundaries_s, got)
        return got

    def _owned_array(self, active_procs: int) -> np.ndarray:
        """:meth:`owned` as an int64 array (read only)."""
        got = self._owned_arrays.get(active_procs)
        if got is None:
            got = self._owned_arrays[active_procs] = np.array(self.owned(active_procs),
                                                              dtype=np.int64)
        return got

    def check_jobs(self, job_id, procs, estimate_s, active_procs: int) -> str | None:
        """Without ``borrow``, a job wider than its own partition could never run: say
        which (``key: reason``), or None when every job can run."""
        if self.borrow:
            return None
        owned = self.owned(active_procs)
        for job, p, e in zip(job_id, procs, estimate_s):
            q = self.queue_index(e)
            if p > owned[q]:
                return (f"borrow: false, but job {job} ({p} processors, queue {q + 1}) is "
                        f"wider than its partition ({owned[q]} processors)")
        return None

    def settings(self) -> dict:
        return {"name": self.name, "queues": self.queues,
                "boundaries_s": list(self.boundaries_s), "order": self.order,
                "shares": None if self.shares is None else list(self.shares),
                "borrow": self.borrow}


class PassArrays:
    """What a state's MQBF passes share (boundaries ``boundaries_s``, K queues), as the
    arrays of :func:`olsctl.policies.mqbf.passes.mqbf_pass`: the job columns
    ``procs``, ``est``, ``submit`` and ``queue_of`` (each job's queue, 0-based), copies
    of the state's lists (a job's entries never change once it is in them: jobs are
    only appended); ``alloc[j, p]``, the processors job ``j`` took from partition ``p``
    when it started (the pass writes the rows of the jobs it starts; a running job's
    row is read while it runs); the running jobs' (end, job) rows and what they hold
    per partition, as the last pass left them (read from the state again once a job
    has ended); and scratch for one pass, grown as needed (profile segments, started
    jobs, pivots)."""

    __slots__ = ("n", "procs", "est", "submit", "queue_of", "alloc", "held", "running",
                 "times", "free", "started", "pivot_s", "pivot_j", "n_run", "finishes")

    def __init__(self, state: "SimState", boundaries_s: tuple,
                 old: "PassArrays | None" = None) -> None:
        """Arrays for the state's jobs; the rows of ``alloc`` from ``old`` (the arrays
        before jobs were appended), else from ``state.alloc`` (the running jobs)."""
        n = self.n = len(state.job_id)
        k = len(boundaries_s) + 1
        self.procs = np.array(state.procs, dtype=np.int64)
        self.est = np.array(state.estimate_s, dtype=float)
        self.submit = np.array(state.submit_s, dtype=float)
        self.queue_of = np.empty(n, dtype=np.int64)
        compiled().queue_indices(np.array(boundaries_s, dtype=float), self.est,
                                 self.queue_of)
        self.alloc = np.zeros((n, k), dtype=np.int64)
        if old is not None:
            rows = min(old.n, n)
            self.alloc[:rows] = old.alloc[:rows]
        else:
            for j, held in state.alloc.items():
                self.alloc[j, :len(held)] = held
        self.held = np.zeros(k, dtype=np.int64)
        self.pivot_s = np.empty(k)
        self.pivot_j = np.empty(k, dtype=np.int64)
        self.running = np.empty((0, 2))
        self.started = np.empty(0, dtype=np.int64)
        self.times = np.empty(0)
        self.free = np.empty((k, 0), dtype=np.int64)
        #: the running jobs in ``running`` and ``held`` as the last pass left them, and
        #: the state's count of ended jobs then (-1: not read from the state yet)
        self.n_run = 0
        self.finishes = -1

    def make_room(self, n_run: int, n_waiting: int) -> None:
        """Scratch for a pass over ``n_waiting`` jobs with ``n_run`` running: every one
        may start, and the profile has at most a segment per expected end, two per
        start and per reservation, and now."""
        if self.running.shape[0] < n_run + n_waiting:
            self.running = np.empty((2 * (n_run + n_waiting), 2))
            self.finishes = -1  # (to be read again)
        if self.started.size < n_waiting:
            self.started = np.empty(2 * n_waiting, dtype=np.int64)
        segments = n_run + n_waiting + 2 * len(self.held) + 2
        if self.times.size < segments:
            self.times = np.empty(2 * segments)
            self.free = np.empty((len(self.held), 2 * segments), dtype=np.int64)
