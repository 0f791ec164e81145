"""A tick's EASY what-ifs in one compiled call.

Here belongs :func:`easy_batch`: for a snapshot with nothing but processors (no power,
limit, budget or partitions), no arrivals and the built-in EASY under every candidate,
the what-ifs of a batch of candidates run one after the other inside
:func:`olsctl.policies.forward.easy_candidates` (each from template arrays made in the
same call, as :class:`olsctl.whatif.EasyTemplate` makes them) and are scored there too, optionally stopping at the
first that meets the SLA (what ``cheapest-first`` asks for). The trials are the ones
:class:`olsctl.controller.scoring.WhatIfRun` gives, bit for bit: the same loop, the same
scores (:func:`olsctl.policies.forward.score_run` sums as :func:`math.fsum` does and
takes the percentile as :func:`olsctl.controller.scoring.percentile` does); only the
Python around each what-if is gone. A what-if cut short keeps its arrays, to go on
(:class:`BatchCut`, as :meth:`WhatIfRun.resume`). MQBF's batches
(:mod:`olsctl.controller.mqbf_batch`) share the plan, the cuts and the closest's
finishing.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from olsctl.controller.scoring import (INF, SLA_METRICS, Candidate, Trial, WhatIfTask,
                                       _policy, cut_trial, known_costs, new_trial,
                                       setting_of, weighted_cost)
from olsctl.metrics import BSLD_BOUND_S
from olsctl.policies import forward as fw
from olsctl.policies.easy import EasyBackfill
from olsctl.policies.jit import compiled
from olsctl.policies.mqbf import MultiQueueBackfill
from olsctl.whatif import EasyTemplate


def easy_batch(task: WhatIfTask, cands: Sequence[Candidate], keep: dict | None = None,
               first_met: tuple[str, float] | None = None,
               then_closest: bool = False) -> tuple[list[Trial], int] | None:
    """The trials of ``cands`` (in order) and how many times a what-if cut short went
    on, or None when the batch does not qualify (see the module's doc). With
    ``first_met`` = (metric, limit), only up to the first trial with ``metric <=
    limit``; when none is, with ``then_closest``, the trials as
    :func:`olsctl.controller.search._complete_closest` leaves them (the step a tick
    takes next). With ``keep``, the what-ifs cut short are kept there by candidate, to
    go on (:class:`BatchCut`)."""
    snap = task.snapshot
    if (task.arrivals is not None and len(task.arrivals)) or not EasyTemplate.fits(snap):
        return None
    plan = batch_plan(task, cands)
    if plan is None or plan.mqbf is not None:
        return None
    until = INF if task.horizon_s is None else snap.now_s + task.horizon_s
    opening = EasyTemplate.open_args(snap, until, task.stop_above)
    n = opening[0]
    count = len(cands)
    metric = task.stop_above[0] if task.stop_above is not None else None
    batch = _Batch(n, plan.codes, task.horizon_s is not None, metric,
                   np.empty((count, fw.INT_BLOCKS * n + fw.N_COUNTS), dtype=np.int64),
                   np.empty((count, (fw.FLOAT_BLOCKS + 2) * n + fw.N_TAIL)),
                   np.empty((count, n if opening[-2] else 0), dtype=np.bool_),
                   np.empty((count, fw.N_ROW)))
    sla, limit = (0, INF) if first_met is None else (SLA_METRICS.index(first_met[0]),
                                                    float(first_met[1]))
    ran, went_on = compiled().easy_candidates(
        *opening, plan.codes, plan.machine, plan.active,
        plan.wake_n, plan.wake_t, plan.due, batch.ints, batch.floats, batch.seen,
        batch.censor, BSLD_BOUND_S, sla, limit, first_met is not None,
        first_met is not None and then_closest, batch.out)
    return batch_trials(batch, cands, plan.costs, ran, keep), went_on


def batch_trials(batch, cands: Sequence[Candidate], costs: list[float], ran: int,
                 keep: dict | None) -> list[Trial]:
    """The trials of the first ``ran`` rows of a batch (``_Batch`` or
    :class:`olsctl.controller.mqbf_batch.MqbfBatch`); with ``keep``, those cut short are
    kept there by candidate, to go on (:class:`BatchCut`)."""
    rows = batch.out[:ran].tolist()
    trials = []
    for i in range(ran):
        c = cands[i]
        trial = batch.trial(c, rows[i], costs[i])
        trials.append(trial)
        if keep is not None and not trial.complete:
            keep[c] = BatchCut(batch, i, c, trial, costs[i])
    return trials


class _Plan:
    """What a batch's candidates mean for its what-ifs, before they run: each one's queue
    order ``codes`` (EASY) or their one MQBF policy ``mqbf`` (else None), its
    ``machine`` (its active processors), and the state it gives the what-if
    (:func:`apply_candidate`): ``active`` processors, a wake under way (``wake_n``
    processors at ``wake_t``; 0: none) and whether the pass is ``due``; and each one's
    ``costs`` (without power, all known before the what-if)."""

    __slots__ = ("cands", "policy", "cost", "key", "codes", "mqbf", "machine", "active",
                 "wake_n", "wake_t", "due", "costs")


#: the last plan made (ticks an hour apart mostly ask for the same one)
_LAST_PLAN: list = [None]


def batch_plan(task: WhatIfTask, cands: Sequence[Candidate]) -> _Plan | None:
    """The plan of ``cands`` under ``task`` (a snapshot without power), or None when
    the candidates' policies are neither all the built-in EASY nor all one MQBF policy
    (the same settings). The last plan serves again for the same
    candidate list, policy and costs, and the same setting in force, active processors,
    wake under way, pass due and wake latency (with a latency, also the same instant);
    with only the latter changed, its codes, machines and costs serve again."""
    snap = task.snapshot
    latency = task.wake_latency_s
    key = (task.current, snap.active_procs, snap.wake, snap.pass_due, latency,
           snap.now_s if latency > 0 else None)
    last = _LAST_PLAN[0]
    same = (last is not None and last.cands is cands and last.cost == task.cost
            and last.policy == task.policy)
    if same and last.key == key:
        return last
    plan = _Plan()
    if same:
        plan.codes, plan.mqbf = last.codes, last.mqbf
        plan.machine, plan.costs = last.machine, last.costs
    else:
        policies: dict = {}
        codes = []
        for c in cands:
            spec = (c.window, c.params)
            policy = policies.get(spec)
            if policy is None:
                policy = policies[spec] = _policy(c.policy_spec(task.policy))
            if type(policy) is EasyBackfill:
                codes.append(policy.order_code)
        kinds = {type(p) for p in policies.values()}
        if kinds == {EasyBackfill}:
            plan.codes, plan.mqbf = np.array(codes, dtype=np.int64), None
        elif kinds == {MultiQueueBackfill} and len(set(policies.values())) == 1:
            plan.codes, plan.mqbf = None, next(iter(policies.values()))
        else:
            return None
        plan.machine = np.array([c.active_procs for c in cands], dtype=np.int64)
        plan.costs = [weighted_cost(task.cost, known_costs(task, c)) for c in cands]
    count = len(cands)
    active = [0] * count
    wake_n = [0] * count
    wake_t = [INF] * count
    due = [0] * count
    for i, c in enumerate(cands):
        active[i], wake, due[i] = setting_of(snap, c, task.current, latency)
        if wake is not None:
            wake_t[i], wake_n[i] = wake
    plan.cands, plan.policy, plan.cost, plan.key = cands, dict(task.policy), task.cost, key
    plan.active = np.array(active, dtype=np.int64)
    plan.wake_n = np.array(wake_n, dtype=np.int64)
    plan.wake_t = np.array(wake_t)
    plan.due = np.array(due, dtype=np.int64)
    _LAST_PLAN[0] = plan
    return plan


def row_trial(c: Candidate, n: int, row: list, metric: str | None, cost: float,
              queues: int = 0) -> Trial:
    """The trial of a row of :func:`olsctl.policies.forward.easy_candidates`' ``out``
    (run to its end, or cut short at the bound of ``metric``), as WhatIfRun scores it;
    with ``queues``, a multi-queue policy's, whose scored rows hold each queue's mean
    bounded slowdown after the scores."""
    status = row[fw.ROW_STATUS]
    if status == fw.OUT_WIDE:  # a waiting job wider than the machine: never starts
        return new_trial(c, n, int(row[fw.ROW_UNSTARTED]), 0, INF, INF, INF, INF, cost)
    if status == fw.OUT_CUT:
        return cut_trial(c, n, metric, row[fw.ROW_BOUND], cost, row[fw.ROW_NOW])
    trial = new_trial(c, n, int(row[fw.ROW_UNSTARTED]), int(row[fw.ROW_CENSORED]),
                      *row[fw.ROW_MEAN_BSLD:fw.ROW_MAX_WAIT + 1], cost)
    if queues and n and not trial.unstarted:
        return new_trial(c, n, 0, int(row[fw.ROW_CENSORED]),
                         *row[fw.ROW_MEAN_BSLD:fw.ROW_MAX_WAIT + 1], cost,
                         queue_mean_bsld=tuple(row[fw.N_ROW:fw.N_ROW + queues]))
    return trial


class _Batch:
    """The arrays of a batch's what-ifs, one row each (see
    :func:`olsctl.policies.forward.easy_candidates`): of ``n`` jobs, their queue order
    ``codes``, whether waits are ``censor``-ed at a horizon, the bound's ``metric``.

    A batch of another policy (:class:`olsctl.controller.mqbf_batch.MqbfBatch`) has the
    same attributes ``n``, ``metric`` and ``out`` and methods."""

    __slots__ = ("n", "codes", "censor", "metric", "ints", "floats", "seen", "out")

    def __init__(self, n: int, codes: np.ndarray, censor: bool, metric: str | None,
                 ints: np.ndarray, floats: np.ndarray, seen: np.ndarray,
                 out: np.ndarray) -> None:
        self.n, self.codes, self.censor, self.metric = n, codes, censor, metric
        self.ints, self.floats, self.seen, self.out = ints, floats, seen, out

    def trial(self, c: Candidate, row: list, cost: float) -> Trial:
        """The trial of candidate ``c``'s row of ``out`` (as a list)."""
        return row_trial(c, self.n, row, self.metric, cost)

    def go_on(self, i: int, limit: float | None) -> None:
        """Row ``i``'s what-if, cut short, goes on under a higher ``limit`` (None: to
        its end): into ``out[i]``."""
        n = self.n
        if limit is None:
            self.ints[i, fw.INT_BLOCKS * n + fw.METRIC] = 0
        else:
            self.floats[i, (fw.FLOAT_BLOCKS + 2) * n + fw.LIMIT] = limit
        compiled().settle_row(self.codes[i], n, self.ints[i], self.floats[i], self.seen[i],
                              self.censor, BSLD_BOUND_S, self.out[i])

    def closest(self, sla: int, done: np.ndarray, value: np.ndarray, active: np.ndarray,
                row: np.ndarray, moved: np.ndarray) -> int:
        """:func:`olsctl.policies.forward.closest` over this batch's rows."""
        return compiled().closest(self.n, self.ints, self.floats, self.seen, self.codes,
                                  self.censor, BSLD_BOUND_S, sla, done, value, active, row,
                                  self.out, moved)


class BatchCut:
    """A what-if of a compiled batch cut short: row ``row`` of the ``batch``'s arrays,
    able to go on under a higher limit (:meth:`resume`, as :meth:`WhatIfRun.resume`)."""

    __slots__ = ("batch", "row", "candidate", "trial", "cost")

    def __init__(self, batch: _Batch, row: int, candidate: Candidate, trial: Trial,
                 cost: float) -> None:
        self.batch, self.row, self.candidate = batch, row, candidate
        self.trial, self.cost = trial, cost

    def resume(self, stop_above: tuple[str, float] | None) -> Trial:
        """The trial under ``stop_above``: the same metric with a higher limit, or None
        to run to the end."""
        b, i = self.batch, self.row
        if self.trial.complete:
            raise ValueError("only a what-if cut short can go on")
        if stop_above is not None and stop_above[0] != b.metric:
            raise ValueError("a what-if goes on under the same metric")
        b.go_on(i, None if stop_above is None else stop_above[1])
        self.trial = b.trial(self.candidate, b.out[i].tolist(), self.cost)
        return self.trial


def complete_closest(trials: list[Trial], cut: dict, metric: str) -> tuple | None:
    """:func:`olsctl.controller.search._complete_closest` in one compiled call
    (:func:`olsctl.policies.forward.closest`) when every trial cut short is a what-if of
    one batch kept in ``cut``: (the trials, how many times a what-if went on), or None.
    Those cut short again stay in ``cut``, those that ran to the end leave it."""
    runs = [cut.get(t.candidate) if not t.complete else None for t in trials]
    open_ = [r for r in runs if r is not None]
    if not open_ or len(open_) != sum(not t.complete for t in trials):
        return None
    if any(type(r) is not BatchCut for r in open_):
        return None
    batch = open_[0].batch
    if any(r.batch is not batch for r in open_):
        return None
    count = len(trials)
    done = np.array([t.complete for t in trials], dtype=np.bool_)
    value = np.array([t.metric(metric) for t in trials])
    active = np.array([t.active_procs for t in trials], dtype=np.int64)
    row = np.array([-1 if r is None else r.row for r in runs], dtype=np.int64)
    moved = np.zeros(count, dtype=np.bool_)
    went_on = batch.closest(SLA_METRICS.index(metric), done, value, active, row, moved)
    out = list(trials)
    for i in np.flatnonzero(moved).tolist():
        r = runs[i]
        r.trial = out[i] = batch.trial(r.candidate, batch.out[r.row].tolist(), r.cost)
        if r.trial.complete:
            del cut[r.candidate]
    return out, went_on
