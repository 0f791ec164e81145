"""A tick's MQBF what-ifs in one compiled call (MQBF's compiled batch, declared by its
registry entry).

Here belongs :func:`batch`, MQBF's counterpart of :func:`olsctl.policies.easy.batch.batch`:
for a snapshot with nothing but processors, no arrivals and one MQBF policy (a built-in
order) under every candidate, the what-ifs of a batch of candidates run one after the
other inside :func:`olsctl.policies.mqbf.forward.mqbf_candidates`, each in its row of
arrays copied from the tick's :class:`olsctl.policies.mqbf.template.MqbfTemplate`, and are
scored there, each queue's mean bounded slowdown included. The trials are the ones
:class:`olsctl.controller.scoring.WhatIfRun` gives, bit for bit; only the Python around
each what-if is gone. The plan, the cuts and the closest's finishing are the
controller's (:mod:`olsctl.controller.batches`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from olsctl.controller import batches
from olsctl.controller.batches import row_trial
from olsctl.controller.trials import INF, Candidate, Trial, WhatIfTask
from olsctl.metrics import BSLD_BOUND_S
from olsctl.policies.core.jit import compiled, warm_up
from olsctl.policies.core.score import N_ROW
from olsctl.policies.mqbf import forward  # noqa: F401  (the batch kernels, called compiled)
from olsctl.policies.mqbf.template import MqbfTemplate

if TYPE_CHECKING:
    from olsctl.controller.batches import _Plan


def batch(task: WhatIfTask, plan: "_Plan", sla: int, limit: float, first_met: bool,
          then_closest: bool) -> tuple | None:
    """Run the candidates of ``plan`` (their policies MQBF's) as
    :func:`olsctl.controller.batches.fast_batch` asks: (the rows, how many ran, how many
    times one went on), or None when their policies differ or the snapshot has no
    template (power, a limit, a budget...)."""
    snap = task.snapshot
    policy = plan.policies[0]
    if any(p != policy for p in plan.policies):
        return None
    until = INF if task.horizon_s is None else snap.now_s + task.horizon_s
    # (the tick's template, shared with the what-ifs run one by one; through the module,
    # so that a template withheld there sends every what-if to the Python pass)
    template = batches.tick_template(snap, policy, until, task)
    if template is None:
        return None
    metric = task.stop_above[0] if task.stop_above is not None else None
    rows = MqbfBatch(template, len(plan.policies), metric, task.horizon_s is not None)
    setting = np.column_stack((plan.machine, plan.active, plan.wake_n, plan.due))
    shared = rows.shared
    ran, went_on = compiled().mqbf_candidates(
        *shared[:8], snap.n_running, *shared[8:], *rows.rows, setting, plan.wake_t,
        rows.censor, BSLD_BOUND_S, sla, limit, first_met, then_closest, rows.out)
    return rows, ran, went_on


class MqbfBatch:
    """The arrays of a batch of ``count`` MQBF what-ifs from ``template``: the job
    columns and a pass's scratch, ``shared``; one row per what-if in each of ``rows``
    (the arrays an :class:`olsctl.policies.mqbf.template.MqbfRun` owns, and the partitions' active
    processors), the last row the template's; ``out``, each what-if's scores (see
    :func:`olsctl.policies.mqbf.forward.mqbf_candidates`). ``censor``: waits are
    censored at a horizon; ``metric``: the SLA bound's."""

    #: the template's arrays that get a row per what-if, in the kernels' order
    ROWS = ("start", "queue", "alloc", "held", "owned", "running", "heap_t", "heap_j",
            "count", "clock", "seen")

    def __init__(self, template: MqbfTemplate, count: int, metric: str | None,
                 censor: bool) -> None:
        a = template.arrays
        self.n, self.metric, self.censor = template.n, metric, censor
        self.queues = len(template.weights)
        self.shared = (template.code, template.borrow, template.weights, a["procs"],
                       a["est"], a["runtime"], a["submit"], a["queue_of"], a["times"],
                       a["free"], a["pivot_s"], a["pivot_j"], a["started"])
        rows = []
        for name in self.ROWS:
            if name == "owned":  # (set for each what-if from its active processors)
                rows.append(np.zeros((count + 1, self.queues), dtype=np.int64))
                continue
            like = a[name]
            row = np.empty((count + 1,) + like.shape, dtype=like.dtype)
            row[count] = like
            rows.append(row)
        self.rows = tuple(rows)
        self.out = np.empty((count, N_ROW + self.queues))

    def trial(self, c: Candidate, row: list, cost: float) -> Trial:
        """The trial of candidate ``c``'s row of ``out`` (as a list)."""
        return row_trial(c, self.n, row, self.metric, cost, self.queues)

    def go_on(self, i: int, limit: float | None) -> None:
        """Row ``i``'s what-if, cut short, goes on under a higher ``limit`` (None: to
        its end): into ``out[i]``."""
        compiled().mqbf_go_on(self.all_rows(), i, INF if limit is None else limit,
                              self.out)

    def all_rows(self) -> tuple:
        """The batch's arrays as :func:`olsctl.policies.mqbf.forward.mqbf_go_on` takes
        them."""
        return (*self.shared, *self.rows, self.censor, BSLD_BOUND_S)

    def closest(self, sla: int, done: np.ndarray, value: np.ndarray, active: np.ndarray,
                row: np.ndarray, moved: np.ndarray) -> int:
        """:func:`olsctl.policies.mqbf.forward.mqbf_closest` over this batch's rows."""
        return compiled().mqbf_closest(self.all_rows(), sla, done, value, active, row,
                                       self.out, moved)



@warm_up
def mqbf_batch_warm_up(k) -> None:
    """Run a tiny tick's candidates through this batch as a controller does (cut short
    and kept, the closest finished, one gone on; then a what-if alone), so that
    :func:`olsctl.policies.core.jit.compile_kernels` compiles or loads these kernels with
    the argument types a run gives them (``k`` is unused: the batch takes the compiled
    kernels itself). 4 processors at t=10, job 1 (2 processors, MQBF's first queue)
    running until 100, job 2 (3 processors, the second queue) waiting since 5: no
    candidate keeps the bounded slowdown at 1, so each what-if is cut short."""
    from olsctl.controller.batches import complete_closest
    from olsctl.controller.scoring import run_batch, what_if
    from olsctl.controller.trials import Candidate, WhatIfTask
    from olsctl.state import Snapshot

    one = np.asarray
    snap = Snapshot(10.0, 4, 4, 1, one([1, 2]), one([0.0, 5.0]), one([2, 3]),
                    one([100.0, 10.0]), one([100.0, 10.0]), one([0.0, np.nan]),
                    running_alloc=((2, 0),), pass_due=True)
    policy = {"name": "mqbf", "queues": 2, "boundaries_s": [50.0], "order": "fcfs",
              "shares": None, "borrow": True}
    task = WhatIfTask(snap, policy, stop_above=("mean_bsld", 1.0))
    cands = [Candidate(2), Candidate(4)]
    for closest in (True, False):
        cut: dict = {}
        trials = run_batch(task, cands, cut)[0]
        if closest:
            complete_closest(trials, cut, "mean_bsld")  # (MqbfBatch.closest)
        else:
            for kept in cut.values():
                kept.resume(None)  # (MqbfBatch.go_on)
    what_if(task, Candidate(4))
