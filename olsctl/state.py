"""Simulation state as plain data, shared by the main simulator and the what-if engine.

:class:`SimState` is the live, mutable bookkeeping one scheduling pass reads and changes
(clock, processors, waiting queue, running jobs). Policies hold settings only: everything
a run remembers lives here, so :meth:`SimState.snapshot` plus the policy's settings is the
whole future of a simulation. A :class:`Snapshot` is frozen numpy data: picklable, cheap to
copy and to ship to another process.

Job attributes are plain Python lists indexed by a job index (fast in the hot loop). The
true runtime is kept for the drivers (they schedule completions); policies must read only
``estimate_s``.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Sequence

import numpy as np

from olsctl.checker import NULL_CHECKER, Checker

INF = float("inf")


class SimState:
    """Clock, processor counts, queue and running jobs of one simulation.

    Invariants (checked by :class:`olsctl.checker.StrictChecker`): ``busy_procs`` is the sum
    of the processors of running jobs; a job starts at most once, never before its submit
    time, and only if ``busy_procs + procs <= active_procs``. ``active_procs`` may be set
    below ``busy_procs``: running jobs are never killed, new starts wait.
    """

    __slots__ = (
        "now_s", "total_procs", "active_procs", "busy_procs", "job_id", "submit_s",
        "procs", "estimate_s", "runtime_s", "start_s", "queue", "running", "alloc",
        "held", "started", "checker", "power", "cache", "finishes", "wake", "budget", "pass_due",
        "limit", "start_order", "end_order", "_copies",
    )

    def __init__(
        self,
        total_procs: int,
        job_id: Sequence[int],
        submit_s: Sequence[float],
        procs: Sequence[int],
        estimate_s: Sequence[float],
        runtime_s: Sequence[float],
        active_procs: int | None = None,
        checker: Checker = NULL_CHECKER,
    ) -> None:
        self.now_s = 0.0
        self.total_procs = int(total_procs)
        self.active_procs = int(total_procs if active_procs is None else active_procs)
        self.busy_procs = 0
        self.job_id: list[int] = _as_list(job_id, int)
        self.submit_s: list[float] = _as_list(submit_s, float)
        self.procs: list[int] = _as_list(procs, int)
        self.estimate_s: list[float] = _as_list(estimate_s, float)
        self.runtime_s: list[float] = _as_list(runtime_s, float)
        self.start_s: list[float] = [float("nan")] * len(self.job_id)
        #: waiting jobs in arrival order, i.e. (submit time, job id)
        self.queue: list[int] = []
        #: running jobs as (expected end = start + estimate, index), ascending
        self.running: list[tuple[float, int]] = []
        #: per running job, the processors it holds from each partition (policies with
        #: partitions only); ``held`` is their sum over running jobs, per partition
        self.alloc: dict[int, tuple[int, ...]] = {}
        self.held: list[int] = []
        #: jobs started during the current pass, in start order
        self.started: list[int] = []
        self.checker = checker
        #: power data (olsctl.power.runtime.PowerState) when the run has power
        self.power = None
        #: the job model and power budget of RMAP/PARM runs
        #: (olsctl.perfmodel.BudgetRun), else None
        self.budget = None
        #: the hardware power limit (olsctl.power.limit.Limit) under ``power.limit:
        #: throttle``, else None
        self.limit = None
        #: per-job values a policy derives from fixed job attributes, computed once per
        #: state (e.g. MQBF's queue of each job), keyed by the policy's settings
        self.cache: dict = {}
        #: jobs finished so far (lets a policy tell whether anything ended since a pass)
        self.finishes = 0
        #: the jobs started by :meth:`start`, in start order (lets SLA feedback read only
        #: the starts since it last looked)
        self.start_order: list[int] = []
        #: the jobs ended by :meth:`finish`, in end order (lets a policy read only the
        #: ends since its last pass)
        self.end_order: list[int] = []
        #: a change of the active processors still to come, as (time, count): processors
        #: being woken become usable then (None: nothing pending)
        self.wake: tuple[float, int] | None = None
        #: something happened since the last pass that may change what a pass does (a
        #: job arrived or ended, a setting changed): this instant needs its pass
        self.pass_due = False
        # numpy copies of the job columns, for snapshots (see :meth:`_columns`)
        self._copies: tuple[np.ndarray, ...] | None = None

    # -- changes made by drivers -------------------------------------------------------
    def arrive(self, idx: int) -> None:
        """Job ``idx`` joins the end of the waiting queue."""
        self.queue.append(idx)
        self.pass_due = True

    def finish(self, idx: int) -> None:
        """Running job ``idx`` ends now and returns its processors."""
        key = (self.start_s[idx] + self.estimate_s[idx], idx)
        running = self.running
        pos = bisect_left(running, key)
        del running[pos]
        self.busy_procs -= self.procs[idx]
        self.finishes += 1
        self.end_order.append(idx)
        self.pass_due = True
        if self.alloc:  # (a policy with partitions)
            alloc = self.alloc.pop(idx, None)
            if alloc is not None:
                held = self.held
                for p, n in enumerate(alloc):
                    held[p] -= n
        if self.power is not None:
            self.power.on_finish(self, idx)
        if self.budget is not None:
            self.budget.on_finish(self, idx)
        if self.limit is not None:
            self.limit.on_finish(self, idx)
        if self.checker is not NULL_CHECKER:
            self.checker.on_finish(self, idx)

    # -- settings changes still to come (the event model) ---------------------------------
    def next_change_s(self) -> float:
        """The next time after now at which a setting a pass depends on changes: a
        pending wake ends, or the power cap schedule moves to its next cap (inf: none).

        Both engines take these events from here, so a what-if started from a snapshot
        sees every change the main simulator would (docs/internals.md, Semantics)."""
        t = self.wake[0] if self.wake is not None else INF
        if self.power is not None:
            cap_t = self.power.next_change_s(self.now_s)
            if cap_t < t:
                t = cap_t
        if self.limit is not None:
            phase_t = self.limit.next_change_s()
            if phase_t < t:
                t = phase_t
        return t

    def apply_changes(self) -> None:
        """Apply the setting changes due now (after the instant's completions and
        arrivals, before its pass); any makes the instant's pass due."""
        now, wake = self.now_s, self.wake
        if wake is not None and wake[0] <= now:
            self.active_procs = wake[1]
            self.wake = None
            self.pass_due = True
            if self.limit is not None:
                self.limit.dirty = True
        if self.power is not None and now in self.power.cap.times_s:
            self.pass_due = True
            if self.limit is not None:
                self.limit.dirty = True
        if self.limit is not None:  # running jobs' phases: no pass, the limit settles
            self.limit.apply_due(self)

    def settle(self) -> list[int]:
        """End the instant under a power limit: hold the draw to the cap; returns the
        running jobs whose end moved since the last call (drivers reschedule them)."""
        limit = self.limit
        limit.settle(self)
        moved, limit.moved = limit.moved, []
        return moved

    def end_of(self, idx: int) -> float:
        """When running job ``idx`` ends (under a power limit, at its clock now)."""
        if self.limit is not None:
            return self.limit.end[idx]
        return self.start_s[idx] + self.runtime_s[idx]

    def request_active(self, n: int, latency_s: float) -> None:
        """Ask for ``n`` active processors from now: fewer (or no latency) apply at once;
        more once the sleeping ones are awake, ``latency_s`` later. Either way a request
        still pending is dropped: the latest request wins."""
        if n <= self.active_procs or latency_s <= 0:
            self.set_active(n)
        else:
            self.wake = (self.now_s + latency_s, int(n))

    def set_active(self, n: int) -> None:
        """Set the active processors now (a wake still pending is dropped)."""
        self.active_procs = int(n)
        self.wake = None
        self.pass_due = True
        if self.limit is not None:  # idle and sleeping processors draw differently
            self.limit.dirty = True

    @property
    def target_active(self) -> int:
        """The active processors once pending wakes are done."""
        return self.active_procs if self.wake is None else self.wake[1]

    def run_pass(self, policy: Any) -> list[int]:
        """One scheduling pass; returns the jobs started, in start order."""
        self.started = started = []
        self.pass_due = False
        if self.limit is not None:  # the pass meters the draw as the limit holds it
            self.limit.settle(self)
        policy.schedule(self)
        if started:
            queue, k = self.queue, len(started)
            if queue[:k] == started:  # the usual case: the head of the queue started
                self.queue = queue[k:]
            elif k <= 8:  # a few: each found and taken out in place, at C speed
                for j in started:
                    queue.remove(j)
            else:
                gone = set(started)
                self.queue = [j for j in queue if j not in gone]
        return started

    # -- changes made by policies --------------------------------------------------------
    def start(self, idx: int, alloc: tuple[int, ...] | None = None) -> None:
        """Start waiting job ``idx`` now (policies call this during a pass); ``alloc`` is
        the processors it takes from each partition, for policies with partitions."""
        if self.checker is not NULL_CHECKER:
            self.checker.on_start(self, idx)
        now = self.now_s
        self.start_s[idx] = now
        self.start_order.append(idx)
        self.busy_procs += self.procs[idx]
        insort(self.running, (now + self.estimate_s[idx], idx))
        if alloc is not None:
            self._hold(idx, alloc)
        if self.limit is not None:
            self.limit.on_start(self, idx)
        self.started.append(idx)

    def _hold(self, idx: int, alloc: tuple[int, ...]) -> None:
        self.alloc[idx] = alloc
        held = self.held
        if len(held) < len(alloc):
            held.extend([0] * (len(alloc) - len(held)))
        for p, n in enumerate(alloc):
            held[p] += n

    @property
    def free_procs(self) -> int:
        """Active processors not in use (negative after the active count was lowered)."""
        return self.active_procs - self.busy_procs

    # -- snapshots -------------------------------------------------------------------------
    def snapshot(self) -> "Snapshot":
        """Frozen copy of the jobs still in the system (running, then waiting in order)."""
        running = [j for _, j in self.running]
        idx = running + list(self.queue)
        at = np.array(idx, dtype=np.int64)
        job_id, submit_s, procs, estimate_s, runtime_s = self._columns(idx, at)

        # (made without the frozen dataclass's ``__init__``, which sets each of the 16
        # fields through ``object.__setattr__``: every controller tick takes a snapshot)
        snap = object.__new__(Snapshot)
        snap.__dict__.update(
            now_s=self.now_s,
            total_procs=self.total_procs,
            active_procs=self.active_procs,
            n_running=len(self.running),
            job_id=job_id,
            submit_s=submit_s,
            procs=procs,
            estimate_s=estimate_s,
            runtime_s=runtime_s,
            start_s=np.asarray([self.start_s[j] for j in running]
                               + [np.nan] * len(self.queue), dtype=float),
            running_alloc=tuple(self.alloc.get(j) for j in running) if self.alloc else
            (None,) * len(running),
            power=None if self.power is None else self.power.subset(idx, at),
            wake=self.wake,
            pass_due=self.pass_due,
            budget=None if self.budget is None else self.budget.subset(idx),
            limit=None if self.limit is None else self.limit.subset(idx),
        )
        return snap

    def _columns(self, idx: list[int], at: np.ndarray) -> tuple[np.ndarray, ...]:
        """job_id, submit_s, procs, estimate_s and runtime_s of jobs ``idx`` (``at``: the
        same as an array), as arrays.

        Taken from numpy copies of the whole columns, made at the first snapshot: a
        job's entries never change once it is in them (jobs are only appended, and a
        longer column makes new copies), except under a job model that reshapes jobs as
        they start (RMAP/PARM's ``budget``), whose snapshots pick the jobs from the
        lists (the cost then follows the jobs in the system, not the workload)."""
        if self.budget is None:
            copies = self._copies
            if copies is None or copies[0].size != len(self.job_id):
                copies = self._copies = (
                    np.asarray(self.job_id, dtype=np.int64),
                    np.asarray(self.submit_s, dtype=float),
                    np.asarray(self.procs, dtype=np.int64),
                    np.asarray(self.estimate_s, dtype=float),
                    np.asarray(self.runtime_s, dtype=float))
            job_id, submit_s, procs, estimate_s, runtime_s = copies
            return job_id[at], submit_s[at], procs[at], estimate_s[at], runtime_s[at]
        pick = itemgetter(*idx) if len(idx) > 1 else (lambda values: [values[j] for j in idx])
        return (np.asarray(pick(self.job_id), dtype=np.int64),
                np.asarray(pick(self.submit_s), dtype=float),
                np.asarray(pick(self.procs), dtype=np.int64),
                np.asarray(pick(self.estimate_s), dtype=float),
                np.asarray(pick(self.runtime_s), dtype=float))

    @classmethod
    def from_snapshot(cls, snap: "Snapshot", checker: Checker = NULL_CHECKER) -> "SimState":
        """A live state equal to the one the snapshot was taken of (jobs re-indexed 0..n-1)."""
        state = cls(snap.total_procs, snap.job_id, snap.submit_s, snap.procs,
                    snap.estimate_s, snap.runtime_s, snap.active_procs, checker)
        state.now_s = snap.now_s
        state.wake = snap.wake
        state.pass_due = snap.pass_due
        for i in range(snap.n_running):
            start = float(snap.start_s[i])
            state.start_s[i] = start
            state.busy_procs += state.procs[i]
            state.running.append((start + state.estimate_s[i], i))
            if snap.running_alloc[i] is not None:
                state._hold(i, tuple(snap.running_alloc[i]))
        state.running.sort()
        state.queue = list(range(snap.n_running, len(state.job_id)))
        if snap.power is not None:
            state.power = snap.power.subset(list(range(len(state.job_id))))
        if snap.budget is not None:
            state.budget = snap.budget.subset(list(range(len(state.job_id))))
        if snap.limit is not None:
            state.limit = snap.limit.subset(list(range(len(state.job_id))))
        checker.adopt(state)
        return state


@dataclass(frozen=True)
class Snapshot:
    """The jobs in the system at ``now_s`` and the machine settings, as numpy data.

    Rows ``[0, n_running)`` are running jobs (``start_s`` set), the rest wait in queue
    order (``start_s`` NaN). Picklable; nothing refers back to the live simulation.
    """

    now_s: float
    total_procs: int
    active_procs: int
    n_running: int
    job_id: np.ndarray
    submit_s: np.ndarray
    procs: np.ndarray
    estimate_s: np.ndarray
    runtime_s: np.ndarray
    start_s: np.ndarray
    running_alloc: tuple = field(default=())
    #: power data of these jobs, the cap and what predictors learned (or None)
    power: Any = None
    #: a wake still under way: (time, active processors then), or None
    wake: tuple[float, int] | None = None
    #: RMAP/PARM's job model and power budget of these jobs (or None)
    budget: Any = None
    #: the pass of the snapshot's instant is still due (something happened at it)
    pass_due: bool = True
    #: the hardware power limit's clocks and work of the running jobs (or None)
    limit: Any = None

    @property
    def n_waiting(self) -> int:
        return int(self.job_id.size) - self.n_running


def _as_list(values: Sequence, kind: type) -> list:
    if isinstance(values, np.ndarray):
        return values.astype(kind).tolist()
    return [kind(v) for v in values]
