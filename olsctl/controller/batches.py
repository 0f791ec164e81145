"""A tick's candidates in one compiled call, whatever the policy family: the plan of a
batch (each candidate's policy and machine setting, and the compiled path they share),
the tick's template, the trials read from a batch's rows, what-ifs cut short kept to go
on, and the closest finished when none meets the SLA. Each family's own batch (declared
by its registry entry, :class:`olsctl.policies.CompiledPath`) runs the what-ifs.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from olsctl.controller.trials import (INF, SLA_METRICS, Candidate, Trial, WhatIfTask,
                                      candidate_policy, cut_trial, known_costs, new_trial,
                                      setting_of, weighted_cost)
from olsctl.policies import compiled_path
from olsctl.policies.core.score import (N_ROW, OUT_CUT, OUT_WIDE, ROW_BOUND, ROW_CENSORED,
                                        ROW_MAX_WAIT, ROW_MEAN_BSLD, ROW_NOW, ROW_STATUS,
                                        ROW_UNSTARTED)
from olsctl.state import Snapshot


def fast_batch(task: WhatIfTask, cands: Sequence[Candidate], keep: dict | None = None,
               first_met: tuple[str, float] | None = None,
               then_closest: bool = False) -> tuple[list[Trial], int] | None:
    """The trials of ``cands`` (in order) and how many times a what-if cut short went
    on, run by the compiled batch their policies' family declares, or None when the
    batch does not qualify (arrivals, policies of different families or none, or a
    snapshot the family's compiled loop cannot run). With ``first_met`` = (metric,
    limit), only up to the first trial with ``metric <= limit``; when none is, with
    ``then_closest``, the trials as :func:`olsctl.controller.search._complete_closest`
    leaves them. With ``keep``, the what-ifs cut short are kept there by candidate, to
    go on (:class:`BatchCut`)."""
    if task.arrivals is not None and len(task.arrivals):
        return None
    if cands:
        # (the first candidate's family has no batch: neither has the plan, whose
        # candidates share its compiled path or have none)
        first = compiled_path(candidate_policy(task.policy, cands[0]))
        if first is None or first.batch is None:
            return None
    plan = batch_plan(task, cands)
    if plan is None or plan.path.batch is None:
        return None
    sla, limit = (0, INF) if first_met is None else (SLA_METRICS.index(first_met[0]),
                                                    float(first_met[1]))
    got = plan.path.batch_module().batch(task, plan, sla, limit, first_met is not None,
                                         first_met is not None and then_closest)
    if got is None:
        return None
    rows, ran, went_on = got
    return batch_trials(rows, cands, plan.costs, ran, keep), went_on


def batch_trials(batch, cands: Sequence[Candidate], costs: list[float], ran: int,
                 keep: dict | None) -> list[Trial]:
    """The trials of the first ``ran`` rows of a family's batch (its ``out`` rows and
    ``trial(candidate, row, cost)``); with ``keep``, those cut short are
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
    """What a batch's candidates mean for its what-ifs, before they run: each one's
    policy (``policies``, in candidate order) and the compiled path they share
    (``path``), with what the family's batch derives from them once (``extra``, set by
    it), each one's ``machine`` (its active processors), and the state it gives the
    what-if (:func:`apply_candidate`): ``active`` processors, a wake under way
    (``wake_n`` processors at ``wake_t``; 0: none) and whether the pass is ``due``; and
    each one's ``costs`` (without power, all known before the what-if)."""

    __slots__ = ("cands", "policy", "cost", "key", "policies", "path", "extra", "machine",
                 "active", "wake_n", "wake_t", "due", "costs")

#: the last plan made (ticks an hour apart mostly ask for the same one)
_LAST_PLAN: list = [None]


def batch_plan(task: WhatIfTask, cands: Sequence[Candidate]) -> _Plan | None:
    """The plan of ``cands`` under ``task`` (a snapshot without power), or None when
    the candidates' policies do not share one compiled path (their registry entries',
    :class:`olsctl.policies.CompiledPath`). The last plan serves again for the same
    candidate list, policy and costs, and the same setting in force, active processors,
    wake under way, pass due and wake latency (with a latency, also the same instant);
    with only the latter changed, its policies, machines and costs serve again."""
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
        plan.policies, plan.path, plan.extra = last.policies, last.path, last.extra
        plan.machine, plan.costs = last.machine, last.costs
    else:
        made: dict = {}
        policies = []
        for c in cands:
            spec = (c.window, c.params)
            policy = made.get(spec)
            if policy is None:
                policy = made[spec] = candidate_policy(task.policy, c)
            policies.append(policy)
        paths = {compiled_path(p) for p in made.values()}
        if len(paths) != 1 or None in paths:
            return None
        plan.policies, plan.path, plan.extra = policies, paths.pop(), None
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
    """The trial of a row of :func:`olsctl.policies.easy.forward.easy_candidates`' ``out``
    (run to its end, or cut short at the bound of ``metric``), as WhatIfRun scores it;
    with ``queues``, a multi-queue policy's, whose scored rows hold each queue's mean
    bounded slowdown after the scores."""
    status = row[ROW_STATUS]
    if status == OUT_WIDE:  # a waiting job wider than the machine: never starts
        return new_trial(c, n, int(row[ROW_UNSTARTED]), 0, INF, INF, INF, INF, cost)
    if status == OUT_CUT:
        return cut_trial(c, n, metric, row[ROW_BOUND], cost, row[ROW_NOW])
    trial = new_trial(c, n, int(row[ROW_UNSTARTED]), int(row[ROW_CENSORED]),
                      *row[ROW_MEAN_BSLD:ROW_MAX_WAIT + 1], cost)
    if queues and n and not trial.unstarted:
        return new_trial(c, n, 0, int(row[ROW_CENSORED]),
                         *row[ROW_MEAN_BSLD:ROW_MAX_WAIT + 1], cost,
                         queue_mean_bsld=tuple(row[N_ROW:N_ROW + queues]))
    return trial


class BatchCut:
    """A what-if of a compiled batch cut short: row ``row`` of the ``batch``'s arrays,
    able to go on under a higher limit (:meth:`resume`, as :meth:`WhatIfRun.resume`)."""

    __slots__ = ("batch", "row", "candidate", "trial", "cost")

    def __init__(self, batch: Any, row: int, candidate: Candidate, trial: Trial,
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
    (the family batch's ``closest``) when every trial cut short is a what-if of
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

#: the tick's what-if arrays (the template of the policy family's compiled path, or None
#: when its snapshot does not fit one), one at a time, by (snapshot, horizon, SLA bound,
#: path, the family's template key)
_TEMPLATE: list = [None, None]


def tick_template(snap: Snapshot, policy: Any, until_s: float, task: WhatIfTask) -> Any:
    """The template of this snapshot's what-ifs under ``policy``, made once for all the
    candidates of a tick (or of a batch, in a worker) by its family's compiled path
    (:class:`olsctl.policies.CompiledPath`); None when there is none or it cannot run
    them (power, a limit, a budget, arrivals): the policy's Python pass runs them
    instead."""
    if task.arrivals is not None and len(task.arrivals):
        return None
    path = compiled_path(policy)
    if path is None:
        return None
    family = path.template_module()
    key = (snap, until_s, task.stop_above, path, family.template_key(policy))
    old, got = _TEMPLATE
    if old is not None and old[0] is snap and old[1:] == key[1:]:
        return got  # (a template, or None when the snapshot does not fit one)
    got = family.template(snap, policy, until_s, task.stop_above)
    _TEMPLATE[:] = [key, got]
    return got
