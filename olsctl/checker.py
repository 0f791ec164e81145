"""Decision checkers: a do-nothing default and a strict one that verifies every decision.

The strict checker keeps its own bookkeeping, independent of :class:`olsctl.state.SimState`,
and raises :class:`olsctl.errors.SimulationError` at the first decision that breaks an
invariant: a job started twice, before its submission or while not waiting; more busy
processors than active ones after a start, or than the machine has; a job finishing that
is not running; the state's busy count disagreeing with the checker's own.
"""

from __future__ import annotations

from typing import Protocol

from olsctl.errors import SimulationError


class CheckedState(Protocol):
    """What a checker reads of the simulation state it watches
    (:class:`olsctl.state.SimState` is one)."""

    now_s: float
    total_procs: int
    active_procs: int
    busy_procs: int
    job_id: list[int]
    submit_s: list[float]
    procs: list[int]
    #: waiting jobs, by index
    queue: list[int]
    #: running jobs as (expected end, index)
    running: list[tuple[float, int]]


class Checker(Protocol):
    def on_start(self, state: CheckedState, idx: int) -> None: ...

    def on_finish(self, state: CheckedState, idx: int) -> None: ...

    def adopt(self, state: CheckedState) -> None: ...


class NullChecker:
    """Checks nothing (the default outside ``--strict``)."""

    def on_start(self, state: CheckedState, idx: int) -> None:
        pass

    def on_finish(self, state: CheckedState, idx: int) -> None:
        pass

    def adopt(self, state: CheckedState) -> None:
        pass


NULL_CHECKER = NullChecker()


class StrictChecker:
    """Verifies every start and finish against its own record of running jobs."""

    def __init__(self) -> None:
        self.running: dict[int, int] = {}
        self.ever_started: set[int] = set()
        self.busy = 0
        self.starts_checked = 0

    def adopt(self, state: CheckedState) -> None:
        """Take over the running jobs of a state built from a snapshot."""
        for _, idx in state.running:
            self.running[idx] = state.procs[idx]
            self.ever_started.add(idx)
        self.busy = sum(self.running.values())
        self._agree(state, "adopting a snapshot")

    def on_start(self, state: CheckedState, idx: int) -> None:
        job = state.job_id[idx]
        now = state.now_s
        if idx in self.ever_started:
            self._fail(state, f"job {job} started a second time")
        if now < state.submit_s[idx]:
            self._fail(state, f"job {job} started at {now:g} before its submission "
                              f"at {state.submit_s[idx]:g}")
        if idx not in state.queue:
            self._fail(state, f"job {job} started but is not waiting in the queue")
        self._agree(state, f"starting job {job}")
        procs = state.procs[idx]
        if self.busy + procs > state.active_procs:
            self._fail(state, f"job {job} ({procs} procs) would make {self.busy + procs} "
                              f"busy processors with {state.active_procs} active")
        if self.busy + procs > state.total_procs:
            self._fail(state, f"job {job} would use more than the machine's "
                              f"{state.total_procs} processors")
        self.running[idx] = procs
        self.ever_started.add(idx)
        self.busy += procs
        self.starts_checked += 1

    def on_finish(self, state: CheckedState, idx: int) -> None:
        procs = self.running.pop(idx, None)
        if procs is None:
            self._fail(state, f"job {state.job_id[idx]} finished but was not running")
        self.busy -= procs
        self._agree(state, f"finishing job {state.job_id[idx]}")

    def _agree(self, state: CheckedState, when: str) -> None:
        if state.busy_procs != self.busy:
            self._fail(state, f"busy processors disagree when {when}: state says "
                              f"{state.busy_procs}, running jobs hold {self.busy}")

    @staticmethod
    def _fail(state: CheckedState, message: str) -> None:
        raise SimulationError(f"t={state.now_s:g}: {message}")
