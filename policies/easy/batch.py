"""A tick's EASY what-ifs in one compiled call (EASY's compiled batch, declared by its
registry entry).

Here belongs :func:`batch`: for a snapshot with nothing but processors (no power, limit,
budget or partitions) and no arrivals, the what-ifs of a batch of candidates run one
after the other inside :func:`olsctl.policies.easy.forward.easy_candidates` (each from
template arrays made in the same call, as :class:`olsctl.policies.easy.template.EasyTemplate`
makes them) and are scored there too, optionally stopping at the first that meets the
SLA (what ``cheapest-first`` asks for). The trials are the ones
:class:`olsctl.controller.scoring.WhatIfRun` gives, bit for bit: the same loop, the same
scores; only the Python around each what-if is gone. The plan, the cuts and the
closest's finishing are the controller's (:mod:`olsctl.controller.batches`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from olsctl.controller.batches import row_trial
from olsctl.controller.trials import INF, Candidate, Trial, WhatIfTask
from olsctl.metrics import BSLD_BOUND_S
from olsctl.policies.core.jit import compiled
from olsctl.policies.core.loop import FLOAT_BLOCKS, INT_BLOCKS, N_COUNTS, N_TAIL
from olsctl.policies.core.score import N_ROW
from olsctl.policies.easy import forward  # noqa: F401  (the batch kernels, called compiled)
from olsctl.policies.easy.template import EasyTemplate

if TYPE_CHECKING:
    from olsctl.controller.batches import _Plan


def batch(task: WhatIfTask, plan: "_Plan", sla: int, limit: float, first_met: bool,
          then_closest: bool) -> tuple | None:
    """Run the candidates of ``plan`` (their policies EASY's) as
    :func:`olsctl.controller.batches.fast_batch` asks (stopping at the first whose
    ``sla``-th score is at most ``limit`` with ``first_met``, then finishing the closest
    with ``then_closest``): (the rows, how many ran, how many times one went on), or
    None when the snapshot holds more than processors."""
    snap = task.snapshot
    if not EasyTemplate.fits(snap):
        return None
    if plan.extra is None:  # each candidate's queue order, once per plan
        plan.extra = np.array([p.order_code for p in plan.policies], dtype=np.int64)
    codes = plan.extra
    until = INF if task.horizon_s is None else snap.now_s + task.horizon_s
    opening = EasyTemplate.open_args(snap, until, task.stop_above)
    n = opening[0]
    count = len(codes)
    metric = task.stop_above[0] if task.stop_above is not None else None
    rows = _Batch(n, codes, task.horizon_s is not None, metric,
                  np.empty((count, INT_BLOCKS * n + N_COUNTS), dtype=np.int64),
                  np.empty((count, (FLOAT_BLOCKS + 2) * n + N_TAIL)),
                  np.empty((count, n if opening[-2] else 0), dtype=np.bool_),
                  np.empty((count, N_ROW)))
    ran, went_on = compiled().easy_candidates(
        *opening, codes, plan.machine, plan.active, plan.wake_n, plan.wake_t, plan.due,
        rows.ints, rows.floats, rows.seen, rows.censor, BSLD_BOUND_S, sla, limit,
        first_met, then_closest, rows.out)
    return rows, ran, went_on


class _Batch:
    """The arrays of a batch's what-ifs, one row each (see
    :func:`olsctl.policies.easy.forward.easy_candidates`): of ``n`` jobs, their queue order
    ``codes``, whether waits are ``censor``-ed at a horizon, the bound's ``metric``.

    A batch of another policy (:class:`olsctl.policies.mqbf.batch.MqbfBatch`) has the
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
        compiled().easy_go_on(self.rows(), i, INF if limit is None else limit, self.out)

    def rows(self) -> tuple:
        """The batch's rows as :func:`olsctl.policies.easy.forward.easy_go_on` takes them."""
        return (self.n, self.ints, self.floats, self.seen, self.codes, self.censor,
                BSLD_BOUND_S)

    def closest(self, sla: int, done: np.ndarray, value: np.ndarray, active: np.ndarray,
                row: np.ndarray, moved: np.ndarray) -> int:
        """:func:`olsctl.policies.easy.forward.closest` over this batch's rows."""
        return compiled().closest(self.rows(), sla, done, value, active, row, self.out,
                                  moved)


