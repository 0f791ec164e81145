"""Multiple-queue backfilling (Lawson & Smirni; the rules are summarised in the README).

Jobs go to one of K queues by runtime estimate; each queue owns a partition of the
active processors. A pass is the shared backfilling core (:mod:`.backfill`) over
:class:`olsctl.policies.partitions.PartitionProfiles` (the fit test and reservations per
partition); this module holds the policy: its settings, the queues, the shortcut
that reuses a pass's profiles at instants where jobs only arrived, and the run's record
of the pivots that started later than a reservation they had held (:class:`PivotRecord`).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, field
from fractions import Fraction
from functools import partial
from typing import TYPE_CHECKING

from olsctl.policies.backfill import backfill_pass
from olsctl.policies.base import PolicyBase
from olsctl.policies.order import ORDERS, Order
from olsctl.policies.partitions import PartitionProfiles, largest_remainder

if TYPE_CHECKING:
    from olsctl.records import RunRecords
    from olsctl.state import SimState
    from olsctl.workload import Workload

__all__ = ["MultiQueueBackfill", "PartitionProfiles", "PivotRecord", "largest_remainder",
           "ARRIVALS_SHORTCUT", "PIVOTS_KEY", "default_boundaries"]

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


#: under FCFS, reuse the last pass's profiles at instants where jobs only arrived or the
#: jobs that ended did so at their expected ends (see MultiQueueBackfill.backfill; off
#: only to check that it changes nothing)
ARRIVALS_SHORTCUT = True

#: where a run's :class:`PivotRecord` lives in ``state.cache`` (one per run, whatever the
#: MQBF settings; put there by ``prepare``, so what-ifs, which report nothing, skip it)
PIVOTS_KEY = ("mqbf-pivots",)


class PivotRecord:
    """A run's pivots: for each waiting job that held a reservation, the earliest one
    (its shadow time, s), and of the jobs that started after holding one, how many
    (``pivots``), how many started later than that earliest reservation (``late``) and
    the worst such delay (``max_delay_s``, 0 when none was late).

    A reservation is held when a pass makes it (a pass in which no job can start makes
    none, as in :func:`olsctl.policies.backfill.backfill_pass`). Times are compared
    exactly: a reservation starts now or at an expected end (start + estimate) of a
    running or reserved job, the very float of the event at which a pivot starting on
    time starts. Snapshots do not carry the record: a what-if keeps none."""

    __slots__ = ("reserved_s", "pivots", "late", "max_delay_s")

    def __init__(self) -> None:
        self.reserved_s: dict[int, float] = {}
        self.pivots = 0
        self.late = 0
        self.max_delay_s = 0.0

    def note_pass(self, state: "SimState", resources: PartitionProfiles) -> None:
        """After a pass that ran: weigh the starts of jobs that held a reservation
        (pivots never start in the pass that makes them), then keep each of this pass's
        reservations that is its job's earliest (computing any the pass left pending)."""
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
        if resources.pivots:
            # a pending reservation starts no earlier than its bound: compute them (in
            # order) up to the last that may be its pivot's earliest
            upto = 0
            for i, (j, bound) in enumerate(resources.pending, 1):
                held = reserved.get(j)
                if held is None or bound < held:
                    upto = i
            for res in resources.settle(upto):
                held = reserved.get(res.job)
                if held is None or res.shadow_s < held:
                    reserved[res.job] = res.shadow_s

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
    _order: Order = field(init=False, repr=False, compare=False)
    _weights: tuple = field(init=False, repr=False, compare=False)
    _owned: dict = field(init=False, repr=False, compare=False, default_factory=dict)
    _pass_key: tuple = field(init=False, repr=False, compare=False)
    _queue_key: tuple = field(init=False, repr=False, compare=False)

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
        weights = (tuple(Fraction(str(s)) for s in self.shares) if self.shares is not None
                   else (Fraction(1),) * self.queues)
        object.__setattr__(self, "_order", ORDERS[self.order])
        object.__setattr__(self, "_weights", weights)
        # keys of what this policy keeps in ``state.cache``
        object.__setattr__(self, "_pass_key",
                           ("mqbf-pass", self.boundaries_s, self.shares, self.borrow))
        object.__setattr__(self, "_queue_key", ("mqbf-queue", self.boundaries_s))

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
        """The smallest k with estimate < boundaries_s[k], else the last queue (0-based)."""
        return bisect_right(self.boundaries_s, estimate_s)

    def owned(self, active_procs: int) -> tuple[int, ...]:
        """Processors each partition owns when ``active_procs`` are active."""
        got = self._owned.get(active_procs)
        if got is None:
            got = self._owned[active_procs] = largest_remainder(self._weights, active_procs)
        return got

    def schedule(self, state: "SimState") -> None:
        resources = self.backfill(state)
        if resources is not None:  # (a skipped pass started nothing and reserved nothing)
            record = state.cache.get(PIVOTS_KEY)
            if record is not None:
                record.note_pass(state, resources)

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

    def backfill(self, state: "SimState") -> PartitionProfiles | None:
        """One pass; returns its resources (reservations: ``.settle()``), or None when
        the pass was skipped because nothing could start.

        Under FCFS, a pass at an instant where jobs only arrived (nothing ended and the
        active count did not change since the last pass) can start only the new jobs,
        and the old pivots keep their reservations: no expected end lies between the two
        passes, so every partition's free count is flat in between, a waiting job's
        window [now, now + estimate) only moves later, and the jobs started since then
        respected those reservations. Such a pass reuses the last pass's profiles and
        tries the new jobs alone, in the order the full pass would reach them. So does a
        pass after jobs ended exactly at their expected ends, which also tries the old
        jobs again (see :meth:`_ends_pass`)."""
        key = self._pass_key
        queue = state.queue
        if state.busy_procs >= state.active_procs or not queue:
            # nothing can start: the pass would change nothing (the next one may still
            # reuse the last profiles: it checks what happened since)
            return None
        queue_of = self._queues(state)
        cached = state.cache.get(key) if self.order == "fcfs" and ARRIVALS_SHORTCUT else None
        if cached is not None:
            finishes, active, qlen, last, busy_queues, running, resources = cached
            if (active == state.active_procs and len(queue) >= qlen
                    and (qlen == 0 or queue[qlen - 1] == last)):
                if finishes == state.finishes:
                    if resources.carry():
                        return self._arrivals_pass(state, key, queue_of, qlen,
                                                   busy_queues, resources)
                else:
                    redo = resources.advance(running, state.finishes - finishes)
                    if redo is not None:
                        return self._ends_pass(state, key, queue_of, qlen, busy_queues,
                                               resources, redo)
        procs = state.procs
        if min(map(procs.__getitem__, queue)) > state.active_procs - state.busy_procs:
            state.cache.pop(key, None)
            return None  # no waiting job is narrow enough to start: nothing would change
        groups: list[list[int]] = [[] for _ in range(self.queues)]
        ordered = self._order(state, queue)
        add = [group.append for group in groups]
        for j in ordered:
            add[queue_of[j]](j)
        # the queues in the order of their heads
        by_head = [group for group in groups if group]
        if len(by_head) > 1:
            by_head.sort(key=lambda group: ordered.index(group[0]))
        resources = PartitionProfiles(state, self.owned(state.active_procs), queue_of,
                                      self.borrow)
        backfill_pass(state, ordered, resources, by_head)
        if self.order == "fcfs":
            waiting = [len(group) for group in groups]
            for j in state.started:
                waiting[queue_of[j]] -= 1
            busy = {q for q, n in enumerate(waiting) if n}
            self._remember(state, key, busy, resources)
        return resources

    def _arrivals_pass(self, state: "SimState", key: tuple, queue_of: list[int], qlen: int,
                       busy_queues: set, resources: PartitionProfiles) -> PartitionProfiles:
        """The pass of an arrivals-only instant (see :meth:`backfill`)."""
        new = state.queue[qlen:]
        groups: dict[int, list[int]] = {}
        by_head: list[list[int]] = []  # queues that were empty: their heads are new
        for j in new:
            q = queue_of[j]
            if q in busy_queues:
                continue  # behind an old pivot: Phase B only
            group = groups.get(q)
            if group is None:
                group = groups[q] = []
                by_head.append(group)
            group.append(j)
        backfill_pass(state, new, resources, by_head)
        started = state.started
        if started:
            gone = set(started)
            busy = busy_queues.union([queue_of[j] for j in new if j not in gone])
        else:
            busy = busy_queues.union([queue_of[j] for j in new])
        self._remember(state, key, busy, resources)
        return resources

    def _ends_pass(self, state: "SimState", key: tuple, queue_of: list[int], qlen: int,
                   busy_queues: set, resources: PartitionProfiles,
                   redo: list[int]) -> PartitionProfiles:
        """The pass of an instant where the jobs that ended did so at their expected
        ends (see :meth:`backfill` and :meth:`PartitionProfiles.advance`): the pivots
        that keep their reservations cannot start; the queues of the ``redo`` pivots
        (in their order), then the queues that were empty go through Phase A; then every
        other job that is not a pivot is tried, the old ones too (what ended may have
        made room for them)."""
        queue = state.queue
        new = queue[qlen:]
        groups: dict[int, list[int]] = {}
        by_head: list[list[int]] = []
        if redo:  # their queues in the order of their heads, every job of each
            for j in redo:
                group = groups[queue_of[j]] = []
                by_head.append(group)
            for j in queue:
                group = groups.get(queue_of[j])
                if group is not None:
                    group.append(j)
        for j in new:  # queues that were empty: their heads are new
            q = queue_of[j]
            if q in busy_queues:
                continue
            group = groups.get(q)
            if group is None:
                group = groups[q] = []
                by_head.append(group)
            group.append(j)
        # Phase B passes over the kept pivots too (if every waiting job is one, there
        # are no new jobs and no redo pivots either: the pass has nothing to try)
        backfill_pass(state, queue, resources, by_head, skip=set(resources.pivots))
        started = state.started
        if redo:
            gone = set(started)
            busy = {queue_of[j] for j in queue if j not in gone}
        elif started:
            gone = set(started)
            busy = busy_queues.union([queue_of[j] for j in new if j not in gone])
        else:
            busy = busy_queues.union([queue_of[j] for j in new])
        self._remember(state, key, busy, resources)
        return resources

    def _remember(self, state: "SimState", key: tuple, busy_queues: set,
                  resources: PartitionProfiles) -> None:
        """Keep this pass's profiles for an arrivals-only pass, unless the next full pass
        would make the reservations in another order: when a queue's head started, its
        next job became the pivot where the old head stood in Phase A, but a full pass
        takes the queues in the order of their current heads. ``busy_queues``: the
        queues with a job still waiting."""
        queue = state.queue
        started = state.started
        last = None
        if started:
            gone = set(started)
            for j in reversed(queue):
                if j not in gone:
                    last = j
                    break
            pivots = resources.pivots
            if len(pivots) > 1:  # pivots never start in their pass: all still wait
                # each pivot must stand after the one before it (each appears once)
                at = -1
                for j in pivots:
                    try:
                        at = queue.index(j, at + 1)
                    except ValueError:
                        state.cache.pop(key, None)
                        return
        elif queue:
            last = queue[-1]
        state.cache[key] = (state.finishes, state.active_procs, len(queue) - len(started),
                            last, busy_queues, list(state.running), resources)

    def _queues(self, state: "SimState") -> list[int]:
        """Every job's queue (0-based), computed once per state from its estimate."""
        est = state.estimate_s
        key = self._queue_key
        got = state.cache.get(key)
        if got is None or len(got) < len(est):
            bounds = self.boundaries_s
            got = state.cache[key] = list(map(partial(bisect_right, bounds), est))
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
