"""The main simulator: a SimPy environment replaying a workload under a policy.

SimPy owns the clock and the event heap. Events at one instant run in this order, by
SimPy priority: all completions, then all arrivals, then controller ticks and setting
changes, then ONE scheduling pass if anything happened that may change what it does
(docs/internals.md, Semantics). Jobs share events: one completion event per distinct end time holds
every job ending then (in the order they were scheduled), one arrival event per distinct
submit time. The changes still to come are data of the state (a wake under way,
the cap schedule), so the what-if engine (:mod:`olsctl.whatif`) sees the same events;
the pass, the bookkeeping and the policy are the same code.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from typing import Callable

import numpy as np
import simpy

from olsctl.checker import NULL_CHECKER, Checker
from olsctl.power.cap import CapSchedule
from olsctl.records import JobRecord, RunRecords, TimeSeries
from olsctl.state import SimState
from olsctl.workload import Workload

#: SimPy priorities of the event kinds at one instant (lower runs first). The pass runs
#: inside the last event of an instant (when ``env.peek()`` moves on), so it needs no event.
COMPLETION, ARRIVAL, CONTROL = 0, 1, 2

#: under a power limit, let the running jobs' phase boundaries pass without an event of
#: their own while the limit is calm (:attr:`olsctl.power.limit.Limit.calm`); the same
#: outputs either way (False: an event at each)
SKIP_CALM_BOUNDARIES = True


class _Call(simpy.Event):
    """A pre-triggered event that calls one function (as ``simpy.Timeout`` is built, but
    with the priority chosen by the caller)."""

    def __init__(self, env: simpy.Environment, callback: Callable, value=None) -> None:
        self.env = env
        self.callbacks = [callback]
        self._value = value
        self._ok = True


class Progress:
    """Do-nothing progress sink; the CLI passes one that draws a bar."""

    def update(self, done: int, total: int, now_s: float) -> None:
        pass


NULL_PROGRESS = Progress()


def delay_to(now: float, target: float) -> float:
    """A delay d >= 0 with ``now + d == target`` exactly, so event times are the trace's."""
    d = target - now
    for _ in range(4):
        if now + d == target:
            return d
        d = math.nextafter(d, math.inf if now + d < target else -math.inf)
    return max(target - now, 0.0)


class MainSimulator:
    """Replays ``workload`` under ``policy``; the active-processor count may change mid-run.

    ``estimate_s`` are the estimates the policy sees (one per job, in workload order).
    Use :meth:`at` to run a function at given simulated times (in the controller slot of
    the event order), e.g. to take snapshots or change ``active_procs``.
    """

    def __init__(
        self,
        workload: Workload,
        policy,
        estimate_s: np.ndarray,
        active_procs: int | None = None,
        checker: Checker = NULL_CHECKER,
        progress: Progress = NULL_PROGRESS,
    ) -> None:
        self.env = simpy.Environment(initial_time=float(workload.submit_s[0]))
        self._policy = policy
        self.state = SimState(workload.machine_procs, workload.job_id, workload.submit_s,
                              workload.procs, estimate_s, workload.runtime_s,
                              active_procs, checker)
        self.state.now_s = self.env.now
        self.jobs: list[JobRecord] = []
        self.samples = TimeSeries()
        self.progress = progress
        self._n_jobs = len(workload)
        times = workload.submit_s
        cut = np.flatnonzero(np.diff(times)) + 1
        #: where the jobs of each distinct submit time begin, then the number of jobs
        self._group_bound = array("q", np.concatenate(([0], cut, [times.size]))
                                  .astype(np.int64).tobytes())
        self._next_group = 0
        #: seconds a sleeping processor takes to wake (request_active_procs waits for it)
        self.wake_latency_s = 0.0
        self._change_at: set[float] = set()  # phase boundaries with an event (limit)
        #: under a power limit: whether phase boundaries may pass without an event while
        #: the limit is calm (not once a function runs at set times, :meth:`at`: it could
        #: fall at a boundary's instant), and whether they do now
        self._may_skip = SKIP_CALM_BOUNDARIES
        self._skipping = False
        #: end time -> the jobs whose completion is due then (one event per end time)
        self._ends: dict[float, list[int]] = {}
        self._record_at: dict[int, int] = {}  # running job -> its record (limit)
        self._schedule(0.0, ARRIVAL, self._on_arrivals)

    @property
    def policy(self):
        """The policy of the passes; setting another one makes this instant's pass due."""
        return self._policy

    @policy.setter
    def policy(self, policy) -> None:
        self._policy = policy
        self.state.pass_due = True

    # -- public controls ------------------------------------------------------------------
    def at(self, time_s: float, fn: Callable[["MainSimulator"], None]) -> None:
        """Call ``fn(self)`` at simulated time ``time_s`` (after completions and arrivals
        due then, before that instant's pass). The instant has a pass if anything
        happened at it: a job arrived or ended, or ``fn`` changed a setting (active
        processors, the cap, the policy); a function that only looks (a snapshot, a
        tick that keeps its setting) adds none."""
        self._may_skip = False
        self._schedule(delay_to(self.env.now, max(time_s, self.env.now)), CONTROL,
                       lambda _ev: self._on_control(fn))

    def set_active_procs(self, n: int) -> None:
        """Change the active-processor count (from an :meth:`at` function: the change
        counts from that instant's pass). Running jobs are never stopped; a count below
        the busy processors only holds back new starts."""
        if not 0 <= n <= self.state.total_procs:
            raise ValueError(f"active_procs must be in [0, {self.state.total_procs}], got {n}")
        self.state.set_active(n)  # a wake still pending is superseded

    def request_active_procs(self, n: int) -> None:
        """Ask for ``n`` active processors from now (from an :meth:`at` function): fewer
        apply at once; more once the sleeping ones are awake, ``wake_latency_s`` later.
        The latest request wins: one still pending is dropped (the state's ``wake``)."""
        if not 0 <= n <= self.state.total_procs:
            raise ValueError(f"active_procs must be in [0, {self.state.total_procs}], got {n}")
        st = self.state
        st.request_active(n, self.wake_latency_s)
        if st.wake is not None:
            self._schedule(delay_to(self.env.now, st.wake[0]), CONTROL, self._on_change,
                           st.wake[0])

    def set_cap(self, cap_w: float) -> None:
        """Change the power cap from now on (from an :meth:`at` function); the cap
        schedule keeps the history, so accounting measures CSR against the cap in force."""
        power = self.state.power
        if power is None:
            raise ValueError("set_cap needs a run with power")
        now = self.env.now
        keep = bisect_right(power.cap.times_s, now)
        times, caps = power.cap.times_s[:keep], power.cap.caps_w[:keep]
        if times[-1] == now:
            times, caps = times[:-1], caps[:-1]
        power.cap = CapSchedule(times + (now,), caps + (float(cap_w),))
        self.state.pass_due = True
        if self.state.limit is not None:
            self.state.limit.dirty = True

    def run(self) -> RunRecords:
        """Run to the end of the workload (every job started and finished)."""
        power = self.state.power
        if power is not None:  # a pass at each change of the cap schedule
            now = self.env.now
            for t in power.cap.times_s[1:]:
                self._schedule(delay_to(now, max(t, now)), CONTROL, self._on_change, t)
        self.env.run()
        self.progress.update(len(self.jobs), self._n_jobs, self.env.now)
        st = self.state
        stretch = {}
        if st.limit is not None:
            st.limit.close(self.env.now)
            stretch = {st.job_id[j]: s for j, s in st.limit.stretch.items() if s}
        return RunRecords(st.total_procs, self.jobs, self.samples,
                          [st.job_id[j] for j in st.queue], stretch)

    @property
    def finished(self) -> bool:
        st = self.state
        return (self._next_group >= len(self._group_bound) - 1 and not st.queue
                and not st.running)

    @property
    def stalled(self) -> bool:
        """Nothing can happen by itself any more: no job left to arrive, none running,
        no change pending and no pass due (jobs still waiting wait for good unless a
        setting changes)."""
        st = self.state
        return (self._next_group >= len(self._group_bound) - 1 and not st.running
                and not st.pass_due and st.next_change_s() == math.inf)

    # -- event callbacks ---------------------------------------------------------------------
    def _schedule(self, delay: float, priority: int, callback: Callable, value=None) -> None:
        self.env.schedule(_Call(self.env, callback, value), priority, delay)

    def _request_pass(self) -> None:
        """Run the instant's one pass once its last event is done (nothing else due now),
        if anything happened that may change what it does (``state.pass_due``); under a
        power limit, then hold the draw to the cap."""
        if self.env.peek() != self.env.now:
            if self._skipping:  # (the boundaries let pass, up to this instant's)
                heap = self.state.limit.heap
                if heap and heap[0][0] <= self.env.now:
                    self.state.now_s = self.env.now
                    self.state.limit.apply_due(self.state)
            if self.state.pass_due:
                self._on_pass()
            limit = self.state.limit
            # (nothing to settle unless the limit's data changed since its last settle:
            # every change of its draws or phase boundaries marks it dirty or moves a job)
            if limit is not None and (limit.dirty or limit.moved):
                self._settle()

    def _settle(self) -> None:
        """The limit's end of an instant: completions of jobs whose clock changed move
        (the events already scheduled for them lapse), and the next phase boundary of a
        running job gets an event."""
        st = self.state
        now = st.now_s = self.env.now
        ends = st.limit.end
        for j in st.settle():  # (their events due earlier lapse: see _on_completions)
            self._complete_at(now, ends[j], j)
        self._skipping = self._may_skip and st.limit.calm
        if self._skipping:
            return  # (the boundaries until the next event are applied at it)
        t = st.limit.next_change_s()
        if t != math.inf and t not in self._change_at:
            self._change_at.add(t)
            self._schedule(delay_to(now, t), CONTROL, self._on_change, t)

    def catch_up(self) -> None:
        """Apply the phase boundaries let pass before now (for a reader of the state
        between events, such as the live sampler)."""
        if self._skipping:
            self._pass_boundaries()

    def _pass_boundaries(self) -> None:
        """The phase boundaries let pass before this event's instant, applied (each at
        its own time: see :attr:`olsctl.power.limit.Limit.calm`)."""
        heap = self.state.limit.heap
        if heap and heap[0][0] < self.env.now:
            self.state.limit.apply_due(self.state, before=self.env.now)

    def _on_arrivals(self, _event) -> None:
        if self._skipping:
            self._pass_boundaries()
        g = self._next_group
        st = self.state
        bound = self._group_bound
        st.queue.extend(range(bound[g], bound[g + 1]))
        st.pass_due = True
        self._next_group = g + 1
        if g + 2 < len(bound):
            self._schedule(delay_to(self.env.now, st.submit_s[bound[g + 1]]), ARRIVAL,
                           self._on_arrivals)
        self._request_pass()

    def _complete_at(self, now: float, end: float, j: int) -> None:
        """Job ``j`` is due to end at ``end``: with the other jobs ending then, or in a
        new completion event."""
        jobs = self._ends.get(end)
        if jobs is None:
            self._ends[end] = [j]
            self._schedule(delay_to(now, end), COMPLETION, self._on_completions, end)
        else:
            jobs.append(j)

    def _on_completions(self, event) -> None:
        if self._skipping:
            self._pass_boundaries()
        now = self.env.now
        st = self.state
        jobs = self._ends.pop(event._value)
        if st.limit is None:
            finish = st.finish
            for j in jobs:
                finish(j)
        else:
            for j in jobs:
                if st.limit.end.get(j) != now:  # its end has moved since (or it ended)
                    continue
                st.now_s = now
                st.finish(j)
                pos = self._record_at.pop(j)
                rec = self.jobs[pos]
                self.jobs[pos] = rec._replace(end_s=now, runtime_s=now - rec.start_s)
        self._request_pass()

    def _on_change(self, event) -> None:
        """A change the state holds as data (a wake ending, the cap schedule moving on)
        falls due: apply it and ask for a pass, unless a later decision has dropped it
        since (a newer wake request, a cap the controller set)."""
        if self._skipping:
            self._pass_boundaries()
        self.state.now_s = self.env.now
        self._change_at.discard(self.env.now)
        self.state.apply_changes()
        self._request_pass()

    def _on_control(self, fn: Callable[["MainSimulator"], None]) -> None:
        self.state.now_s = self.env.now
        fn(self)
        self._request_pass()

    def _on_pass(self) -> None:
        st = self.state
        now = st.now_s = self.env.now
        started = st.run_pass(self._policy)
        if started:
            runtime = st.runtime_s
            jobs = self.jobs
            if st.limit is not None:  # records of what the jobs got, at their ends
                for k, j in enumerate(started):
                    self._record_at[j] = len(jobs) + k
            ends, env, call = self._ends, self.env, self._on_completions
            # (a JobRecord made as the tuple it is: a third of the time of its __new__,
            # once per job)
            record = tuple.__new__
            for j in started:
                run = runtime[j]
                end = now + run
                due = ends.get(end)
                if due is None:  # (as _complete_at: the delay is the runtime itself)
                    ends[end] = [j]
                    env.schedule(_Call(env, call, end), COMPLETION, run)
                else:
                    due.append(j)
                jobs.append(record(JobRecord, (st.job_id[j], st.submit_s[j], now, end, run,
                                               st.procs[j], st.estimate_s[j])))
            if len(jobs) % 2048 < len(started):
                self.progress.update(len(jobs), self._n_jobs, now)
        s = self.samples
        s.time_s.append(now)
        s.queue_len.append(len(st.queue))
        s.busy_procs.append(st.busy_procs)
        s.active_procs.append(st.active_procs)
