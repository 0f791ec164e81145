"""Running a candidate's what-if and scoring it.

Here belong the pure top-level what-if (:func:`what_if`, :class:`WhatIfRun`,
:func:`what_if_batch`) and how a trial is scored: SLA metrics of the snapshot's jobs,
the power forecast over the coming interval, and the cost. A what-if runs by its
policy family's compiled path where the registry declares one and the snapshot allows
it (:func:`olsctl.controller.batches.tick_template`, :func:`olsctl.controller.batches.fast_batch`,
called through their module, so that a template withheld there sends every what-if to
the Python pass), else by the policy's Python pass (:func:`olsctl.whatif.steps`); the
trials are the same.
The candidate, the task and the trial are :mod:`olsctl.controller.trials`'. Nothing
here knows about ticks, searches or worker pools.

:func:`what_if` is a pure top-level function of (task, candidate, seed), so results do
not depend on the number of workers or the backend.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any, Callable, Sequence

import numpy as np

from olsctl.controller import batches
from olsctl.controller.forecast import (forecast_of, power_forecast, profile_columns,
                                       with_wakes)
from olsctl.controller.trials import (INF, Candidate, Trial, WhatIfTask, apply_candidate,
                                      candidate_policy, cut_trial, failed_trial, known_costs,
                                      power_setting_of, setting_of, weighted_cost)
from olsctl.metrics import BSLD_BOUND_S
from olsctl.policies.core.jit import compiled
from olsctl.policies.core.loop import RUNTIME, START, SUBMIT
from olsctl.policies.core.run import PAUSED
from olsctl.policies.core.score import (N_ROW, ROW_CENSORED, ROW_MAX_WAIT, ROW_MEAN_BSLD,
                                        ROW_UNSTARTED)
from olsctl.state import SimState, Snapshot
from olsctl.whatif import steps


#: a what-if under a cap pauses once the power forecast's span has run, and stops there
#: when the forecast passes the cap (False: it always runs whole; the same trials)
PAUSE_AT_SPAN = True


def what_if(task: WhatIfTask, candidate: Candidate, seed: int = 0) -> Trial:
    """Run the task's snapshot with ``candidate`` applied; score the snapshot's jobs.
    Pure: the same inputs give the same trial (``seed`` is reserved for randomised
    arrival models; the bundled ones are deterministic)."""
    return WhatIfRun(task, candidate).trial


class WhatIfRun:
    """One what-if (see :func:`what_if`; ``trial`` is its result). One cut short can go
    on under a higher limit (:meth:`resume`), with the trial a new what-if under that
    limit would give, without running its start again."""

    def __init__(self, task: WhatIfTask, candidate: Candidate) -> None:
        self.task, self.candidate = task, candidate
        self.steps = self.arrays = self.state = None
        #: the power forecast, once the what-if has run through its span (at a pause)
        self.span_figures: tuple | None = None
        snap = task.snapshot
        n = self.n = int(snap.job_id.size)
        active = self.active = int(candidate.active_procs)
        self.cost_parts = known_costs(task, candidate)
        self.metered = snap.power is not None  # a policy meters power
        too_wide = 0 if active >= _widest_waiting(snap) else \
            int((snap.procs[snap.n_running:] > active).sum())
        if too_wide:  # they can never start on this machine: no need to simulate
            self.trial = Trial(candidate, n, too_wide, 0, INF, INF, INF, INF, self._cost())
            return
        self.policy = candidate_policy(task.policy, candidate)
        self.until = until = INF if task.horizon_s is None else snap.now_s + task.horizon_s
        # a cap passed is known once the forecast's span has run: the what-if pauses there
        pause = snap.now_s + task.power_s if (
            PAUSE_AT_SPAN and self.metered and candidate.cap_w is not None and n
            and snap.limit is None) \
            else INF
        template = batches.tick_template(snap, self.policy, until, task)
        if template is not None:
            # the policy's compiled loop, from the tick's arrays (no live state)
            setting = (power_setting_of if self.metered else setting_of)(
                snap, candidate, task.current, task.wake_latency_s)
            self.arrays = template.start(self.policy, *setting)
            self.state = None
            self.steps = self.arrays.steps(pause)
        else:
            state = self.state = SimState.from_snapshot(snap)
            apply_candidate(state, candidate, task.current, task.wake_latency_s)
            self.steps = steps(state, self.policy, task.arrivals, task.arrivals_power,
                               watch_snapshot=True, until_s=until,
                               stop_above=task.stop_above,
                               arrivals_budget=task.arrivals_budget, pause_s=pause)
        self.trial = self._run_on(next(self.steps, None))

    def _run_on(self, got: float | str | None) -> Trial:
        """The trial, from what the steps yielded: at a pause, over the cap (the rest not
        run) or on to the next stop; a bound (cut short); None (the end)."""
        while got is PAUSED:
            snap, task = self.task.snapshot, self.task
            # (starts after the span do not change its forecast: it is the final one)
            self.span_figures = figures = power_forecast(
                snap, self.state, task, self.active) if self.arrays is None else \
                forecast_of(snap, task, self.active, snap.power, snap.procs,
                            self.arrays.column(START), self.arrays.column(RUNTIME))
            if figures[2] > self.candidate.cap_w:
                return self._over_cap(*figures)
            got = next(self.steps, None)
        return self._score(got)

    def _over_cap(self, energy: float, mean_w: float, peak_w: float,
                  idle_energy: float) -> Trial:
        """The trial of a candidate whose cap the forecast passes: out whatever its SLA
        metrics, which are left unknown (NaN; its what-if may have stopped at the
        forecast's span)."""
        self.cost_parts.update(energy=energy, peak_power=peak_w, idle_energy=idle_energy)
        nan = math.nan  # (one object, as cut_trial's: trials with it compare equal)
        return Trial(self.candidate, self.n, 0, 0, nan, nan, nan, nan, self._cost(), None,
                     energy, mean_w, peak_w, over_cap=True)

    def resume(self, stop_above: tuple[str, float] | None) -> Trial:
        """The trial under ``stop_above``: the task's metric with a higher limit, or None
        to run to the end. Only for a what-if cut short."""
        if self.trial.complete:
            raise ValueError("only a what-if cut short can go on")
        if stop_above is not None and stop_above[0] != self.task.stop_above[0]:
            raise ValueError("a what-if goes on under the same metric")
        try:
            stopped = self.steps.send(None if stop_above is None else stop_above[1])
        except StopIteration:
            stopped = None
        self.task = replace(self.task, stop_above=stop_above)
        self.trial = self._run_on(stopped)
        return self.trial

    def _cost(self) -> float:
        return weighted_cost(self.task.cost, self.cost_parts)

    def _score(self, stopped: float | None) -> Trial:
        task, candidate, n, state, arrays = (self.task, self.candidate, self.n, self.state,
                                             self.arrays)
        snap = task.snapshot
        if stopped is not None:
            return cut_trial(candidate, n, task.stop_above[0], stopped, self._cost(),
                             (state or arrays).now_s)
        if arrays is not None and self.metered:
            return self._score_metered(arrays)
        if arrays is not None:
            start = arrays.column(START).copy()
            submit, runtime = arrays.column(SUBMIT), arrays.column(RUNTIME)
        else:
            start = np.array(state.start_s[:n], dtype=float)
            submit = np.array(state.submit_s[:n], dtype=float)
            runtime = np.array(state.runtime_s[:n], dtype=float)
        censored = unstarted = 0
        waiting = np.isnan(start)
        if waiting.any():
            if task.horizon_s is not None:
                # still waiting at the horizon: it has waited at least until then
                start[waiting] = self.until
                censored = int(waiting.sum())
            else:
                unstarted = int(waiting.sum())
        energy = mean_w = peak_w = None
        over_cap = False
        if self.metered:
            energy, mean_w, peak_w, idle_energy = self.span_figures or power_forecast(
                snap, state, task, self.active)
            self.cost_parts.update(energy=energy, peak_power=peak_w, idle_energy=idle_energy)
            # (under a power limit the cap holds: what it costs is the jobs' stretch)
            over_cap = (candidate.cap_w is not None and peak_w > candidate.cap_w
                        and (state is None or state.limit is None))
        cost = self._cost()
        if n == 0:
            return Trial(candidate, 0, 0, 0, 1.0, 1.0, 0.0, 0.0, cost, None, energy,
                         mean_w, peak_w, over_cap=over_cap)
        if over_cap:
            return self._over_cap(energy, mean_w, peak_w, self.cost_parts["idle_energy"])
        if unstarted:
            return Trial(candidate, n, unstarted, censored, INF, INF, INF, INF, cost, None,
                         energy, mean_w, peak_w, over_cap=over_cap)
        wait = start - submit
        if state is not None and state.limit is not None:
            # throttled jobs' stretch counts as delay
            stretch_of = state.limit.stretch_of
            wait += np.array([stretch_of(state, k) for k in range(n)], dtype=float)
        row = np.empty(N_ROW)  # (the compiled batches' scores, by the same kernel)
        bsld_array = compiled().score_waits(wait, runtime, BSLD_BOUND_S, row)
        bsld = bsld_array.tolist()
        queue_bsld = None
        if arrays is not None and self.policy.n_queues:  # the compiled MQBF loop's
            # queues: each queue's bsld summed in job order, as below
            queue_of = arrays.queue_of
            sums = np.bincount(queue_of, weights=bsld_array, minlength=self.policy.n_queues)
            counts = np.bincount(queue_of, minlength=self.policy.n_queues).tolist()
            queue_bsld = tuple(total / count if count else 1.0
                               for total, count in zip(sums.tolist(), counts))
        elif self.policy.n_queues:  # a multi-queue policy: its queues scored apart too
            queue_index = self.policy.queue_index
            sums = [[0.0, 0] for _ in range(self.policy.n_queues)]
            for e, b in zip(state.estimate_s, bsld):
                q = sums[queue_index(e)]
                q[0] += b
                q[1] += 1
            queue_bsld = tuple(total / count if count else 1.0 for total, count in sums)
        mean_bsld, p95_bsld, mean_wait, max_wait = row[ROW_MEAN_BSLD:ROW_MAX_WAIT + 1].tolist()
        return Trial(candidate, n, 0, censored, mean_bsld, p95_bsld, mean_wait, max_wait,
                     cost, queue_bsld, energy, mean_w, peak_w, over_cap=over_cap)


    def _score_metered(self, arrays: Any) -> Trial:
        """:meth:`_score` of a what-if with power run to its end by a compiled loop (the
        window knapsack's, which has one queue: the compiled loops with queues of their
        own take no power): its scores and its power forecast in one compiled call
        (:func:`olsctl.controller.forecast.scored_forecast`)."""
        task, candidate, n = self.task, self.candidate, self.n
        if self.policy.n_queues:
            raise ValueError("a compiled what-if with power and queues of its own "
                             "cannot be scored")
        snap = task.snapshot
        p = snap.power
        row = np.empty(N_ROW)
        if self.span_figures is not None:  # (forecast at the pause)
            compiled().score_columns(arrays.column(START), arrays.column(SUBMIT),
                                     arrays.column(RUNTIME), task.horizon_s is not None,
                                     self.until, BSLD_BOUND_S, row)
            energy, mean_w, peak_w, idle_energy = self.span_figures
        else:
            mean_w, max_w = profile_columns(p)
            sums = compiled().scored_forecast(
                arrays.column(START), arrays.column(SUBMIT), arrays.column(RUNTIME),
                task.horizon_s is not None, self.until, BSLD_BOUND_S, row, snap.now_s,
                snap.now_s + task.power_s, snap.procs, mean_w, max_w, snap.total_procs,
                self.active, p.idle_w, p.sleep_w)
            energy, mean_w, peak_w, idle_energy = with_wakes(snap, task, self.active, *sums)
        self.cost_parts.update(energy=energy, peak_power=peak_w, idle_energy=idle_energy)
        over_cap = candidate.cap_w is not None and peak_w > candidate.cap_w
        cost = self._cost()
        if n == 0:
            return Trial(candidate, 0, 0, 0, 1.0, 1.0, 0.0, 0.0, cost, None, energy,
                         mean_w, peak_w, over_cap=over_cap)
        if over_cap:
            return self._over_cap(energy, mean_w, peak_w, idle_energy)
        scores = row.tolist()
        unstarted, censored = int(scores[ROW_UNSTARTED]), int(scores[ROW_CENSORED])
        if unstarted:
            return Trial(candidate, n, unstarted, censored, INF, INF, INF, INF, cost, None,
                         energy, mean_w, peak_w, over_cap=over_cap)
        return Trial(candidate, n, 0, censored, *scores[ROW_MEAN_BSLD:ROW_MAX_WAIT + 1],
                     cost, None, energy, mean_w, peak_w, over_cap=over_cap)


#: the last snapshot seen by :func:`_widest_waiting`, and its widest waiting job
_WIDEST: list = [None, 0]


def _widest_waiting(snap: Snapshot) -> int:
    """The most processors a waiting job of ``snap`` asks for (0: none waits), found once
    for all the candidates of a tick."""
    if _WIDEST[0] is not snap:
        waiting = snap.procs[snap.n_running:]
        _WIDEST[:] = [snap, int(waiting.max()) if waiting.size else 0]
    return _WIDEST[1]


def what_if_batch(task: WhatIfTask, candidates: Sequence[Candidate], seed: int = 0,
                  keep: dict[Candidate, Any] | None = None,
                  first_met: tuple[str, float] | None = None) -> list[Trial]:
    """:func:`what_if` for several candidates (one shipment of the task); a candidate
    whose what-if raises gives a trial carrying the error instead. With ``keep`` (in
    this process only), the what-ifs cut short are kept there by candidate, to go on
    later (:meth:`WhatIfRun.resume`). With ``first_met`` = (metric, limit), only the
    trials up to the first with ``metric <= limit`` or an error. Batches that qualify
    run in one compiled call (:func:`olsctl.controller.batches.fast_batch`), with the
    same trials."""
    return run_batch(task, candidates, keep, first_met)[0]


def run_batch(task: WhatIfTask, candidates: Sequence[Candidate],
              keep: dict[Candidate, Any] | None = None,
              first_met: tuple[str, float] | None = None,
              then_closest: bool = False) -> tuple[list[Trial], int]:
    """:func:`what_if_batch`'s trials, and how many times a what-if cut short went on:
    with ``then_closest`` (and ``first_met``), a compiled batch in which no
    candidate meets the SLA also finishes the closest (see
    :func:`olsctl.controller.batches.fast_batch`)."""
    try:
        fast = batches.fast_batch(task, candidates, keep, first_met, then_closest)
    except Exception as exc:  # as when each what-if raises (the first, if it stops there)
        error = f"{type(exc).__name__}: {exc}"
        return [failed_trial(task, c, error) for c in candidates[:1 if first_met else None]], 0
    if fast is not None:
        return fast
    out: list[Trial] = []
    for c in candidates:
        try:
            run = WhatIfRun(task, c)
            out.append(run.trial)
            if keep is not None and not run.trial.complete:
                keep[c] = run
        except Exception as exc:  # reported in the decision log; the run goes on
            out.append(failed_trial(task, c, f"{type(exc).__name__}: {exc}"))
        if first_met is not None and (out[-1].error is not None
                                      or out[-1].metric(first_met[0]) <= first_met[1]):
            break
    return out, 0


def _timed_batch(batch: Callable[..., list[Trial]], task: WhatIfTask,
                 candidates: Sequence[Candidate], seed: int = 0) -> tuple[list[Trial], float]:
    """``batch(task, candidates, seed)`` and the wall seconds it took (in a worker)."""
    t0 = time.perf_counter()
    trials = batch(task, candidates, seed)
    return trials, time.perf_counter() - t0


