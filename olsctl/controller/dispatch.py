"""The dispatcher: where a batch of what-ifs runs, in this process or over a worker pool.

Here belongs :class:`Dispatcher`, which runs the candidates a search asks for and decides,
batch by batch, whether the work pays for a trip to the pool (olsctl's own worker
processes, or any joblib backend) kept for the whole run. It owns the timing that
decision rests on (seconds per what-if, the pool's round trip, the tick after an SLA
miss), the count of what-ifs run, and this tick's what-ifs cut short in this process
(which can go on, :meth:`Dispatcher.go_on`). Where a what-if runs never changes its
trial, only the wall time.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable

from olsctl.controller.trials import Candidate, Trial, WhatIfTask, failed_trial
from olsctl.controller import batches
from olsctl.controller.scoring import WhatIfRun, _timed_batch, run_batch, what_if_batch
from olsctl.workers import processes_for

if TYPE_CHECKING:
    from olsctl.controller.settings import ControllerSettings


@dataclass
class Dispatcher:
    """Runs batches of what-ifs for a controller, in this process or split over
    ``parallel`` (a pool kept open for the run, with ``n_jobs``; None: in process).

    ``batch`` is the function a batch of what-ifs runs (a top-level function, shipped to
    workers). ``whatifs`` counts the what-ifs run (a search may take back those it drops
    from the log). ``per_whatif_s`` is the wall seconds per what-if at the last
    evaluation and ``hop_s`` what a pool call adds (None: not measured yet);
    ``after_miss`` says the last tick missed the SLA (see :meth:`use_pool`); ``cut``
    holds this tick's what-ifs cut short in this process, by candidate."""

    settings: ControllerSettings
    batch: Callable[..., list[Trial]] = what_if_batch
    parallel: Any = None
    whatifs: int = 0
    per_whatif_s: float | None = None
    hop_s: float | None = None
    after_miss: bool = False
    cut: dict[Candidate, WhatIfRun] = field(default_factory=dict)

    def evaluate(self, task: WhatIfTask, cands: list[Candidate], waiting: int,
                 pool: bool | None = None) -> list[Trial]:
        """The candidates' trials, in order: in this process, or split over the pool when
        the tick is worth a process hop (see :meth:`use_pool`; ``pool`` True or False
        settles it instead). Either way the trials are the same; only the wall time
        differs."""
        self.whatifs += len(cands)
        s = self.settings
        n = 1 if self.parallel is None else min(len(cands), _workers(self.parallel))
        if pool is None:
            pool = (n >= 2 and waiting >= s.parallel_min_waiting
                    and self.pool_pays(task, len(cands), n))
        if n < 2 or not pool:
            t0 = time.perf_counter()
            trials = self._here(task, cands)
            self.per_whatif_s = (time.perf_counter() - t0) / max(1, len(cands))
            if self.hop_s is not None:  # an old measurement fades, so one slow trip
                self.hop_s *= 0.99        # does not keep the pool away for good
            return trials
        from joblib import delayed

        chunks = [cands[i::n] for i in range(n)]
        t0 = time.perf_counter()
        if not getattr(self.parallel, "overlaps", False):  # every share to the workers
            parts = self.parallel(delayed(_timed_batch)(self.batch, task, c, s.seed)
                                  for c in chunks)
        else:  # the first share here, while the workers run the others
            pending = self.parallel.submit(delayed(_timed_batch)(self.batch, task, c, s.seed)
                                           for c in chunks[1:])
            parts = [self._local_share(task, chunks[0], pending)]
            parts.extend(pending)
        wall = time.perf_counter() - t0
        busy = [seconds for _, seconds in parts]
        self.per_whatif_s = sum(busy) / len(cands)
        hop = max(0.0, wall - max(busy))
        self.hop_s = hop if self.hop_s is None else 0.5 * (self.hop_s + hop)
        by_cand = {t.candidate: t for part, _ in parts for t in part}
        return [by_cand[c] for c in cands]

    def until_met(self, task: WhatIfTask, order: list[Candidate], metric: str,
                  limit: float, then_closest: bool = False) -> list[Trial]:
        """In this process, the trials of ``order`` up to the first that meets ``metric
        <= limit`` or fails (all of them when none does): what a search trying one
        candidate at a time gets, in one call. With ``then_closest`` (``order`` being
        all the tick's candidates), a compiled EASY batch also finishes the closest when
        none meets (the tick's next step, then left with nothing to do; the what-ifs
        that went on are counted)."""
        t0 = time.perf_counter()
        if self.batch is what_if_batch:
            trials, went_on = run_batch(task, order, self.cut, (metric, limit), then_closest)
            self.whatifs += went_on
        else:
            trials = []
            for c in order:
                trials.extend(self.batch(task, [c], self.settings.seed))
                if trials[-1].error is not None or trials[-1].metric(metric) <= limit:
                    break
        self.whatifs += len(trials)
        self.per_whatif_s = (time.perf_counter() - t0) / max(1, len(trials))
        if self.hop_s is not None:  # as after that many evaluations here
            self.hop_s *= 0.99 ** len(trials)
        return trials

    def workers(self, waiting: int) -> int:
        """The workers a round of what-ifs can spread over with ``waiting`` jobs waiting
        (1: no pool, or too few waiting for it)."""
        if self.parallel is not None and waiting >= self.settings.parallel_min_waiting:
            return _workers(self.parallel)
        return 1

    def go_on(self, task: WhatIfTask, c: Candidate, stop: tuple[str, float] | None,
              waiting: int) -> Trial:
        """``c``'s trial under ``stop`` (the task's metric with a higher limit, or None:
        to the end): from where its what-if stopped when it was cut short in this
        process, else a new what-if from the start. One cut short again is kept, to go
        on once more."""
        run = self.cut.pop(c, None)
        if run is None:
            return self.evaluate(replace(task, stop_above=stop), [c], waiting)[0]
        self.whatifs += 1
        try:
            trial = run.resume(stop)
        except Exception as exc:  # as a what-if that raises
            trial = failed_trial(task, c, f"{type(exc).__name__}: {exc}")
        if not trial.complete:
            self.cut[c] = run
        return trial

    def closest_here(self, trials: list[Trial], metric: str) -> list[Trial] | None:
        """``trials`` with the closest to the SLA finished in one compiled call, when
        the what-ifs cut short among them are of one EASY batch run in this process
        (:func:`olsctl.controller.batches.complete_closest`); else None."""
        got = batches.complete_closest(trials, self.cut, metric)
        if got is None:
            return None
        trials, went_on = got
        self.whatifs += went_on
        return trials

    def _local_share(self, task: WhatIfTask, cands: list[Candidate],
                     pending: Any) -> tuple[list[Trial], float]:
        """This process's share of a split evaluation (the workers' shares are
        ``pending``: dropped, with their workers stopped, if this one cannot finish).

        A joblib backend's threads in this process send the other shares off while
        this one runs; Python lets a waiting thread in only every
        ``sys.getswitchinterval()`` (5 ms by default, about what a tick's what-ifs
        take), so for the share it is 0.2 ms (through loky, sampled SDSC-BLUE ticks
        then took 1.00x of their in-process time instead of 1.27x). olsctl's own
        workers need no thread here: for them it changes nothing."""
        t0 = time.perf_counter()
        switch = sys.getswitchinterval()
        sys.setswitchinterval(min(switch, 2e-4))
        try:
            trials = self._here(task, cands)
        except BaseException:
            pending.close()
            raise
        finally:
            sys.setswitchinterval(switch)
        return trials, time.perf_counter() - t0

    def _here(self, task: WhatIfTask, cands: list[Candidate]) -> list[Trial]:
        """The trials of ``cands`` run in this process; those cut short are kept, to go
        on if needed (:meth:`go_on`)."""
        if self.batch is what_if_batch:
            return what_if_batch(task, cands, self.settings.seed, keep=self.cut)
        return self.batch(task, cands, self.settings.seed)

    def pool_pays(self, task: WhatIfTask | None, count: int, workers: int) -> bool:
        """:meth:`use_pool`, once the round trip is known: in auto mode, the first time
        the pool could be used, two trips with no what-if in them measure it (the first
        also starts the workers, so it does not count)."""
        if (self.settings.pool_min_s is None and self.hop_s is None
                and self.per_whatif_s is not None):
            from joblib import delayed

            for _ in range(2):
                t0 = time.perf_counter()
                ((_, busy),) = self.parallel([delayed(_timed_batch)(self.batch, task, [],
                                                                    self.settings.seed)])
                self.hop_s = max(0.0, time.perf_counter() - t0 - busy)
        return self.use_pool(count, workers)

    def use_pool(self, count: int, workers: int) -> bool:
        """Whether ``count`` what-ifs over ``workers`` workers should go to the pool.
        With ``pool_min_s`` set, when they are expected to take at least that long in
        this process; by default (auto), when splitting them is expected to save more
        than 1.5 times the wall time a pool round trip has been adding (measured on the
        pool's calls, 20 ms until then; a measurement fades by 1% a tick run here). The
        expectation is the last evaluation's time per what-if (ticks an hour apart see
        similar queues); the first evaluation runs
        in this process, unless ``pool_min_s`` is 0. Auto also keeps in this process the
        ticks after one that missed the SLA: such a tick likely misses too, and its
        what-ifs cut short then go on, which only those run here can do."""
        floor = self.settings.pool_min_s
        if self.per_whatif_s is None:
            return floor == 0
        if floor is None and self.after_miss:
            return False
        expected = self.per_whatif_s * count
        if floor is not None:
            return expected >= floor
        hop = 0.02 if self.hop_s is None else self.hop_s
        return expected * (1.0 - 1.0 / workers) > 1.5 * hop


def _workers(parallel: Any) -> int:
    """The processes a pool's ``n_jobs`` stands for (1 without it)."""
    return processes_for(getattr(parallel, "n_jobs", 1) or 1)
