"""MQBF what-ifs run by the compiled loop :func:`olsctl.policies.mqbf.forward.mqbf_forward`.

:class:`MqbfTemplate` turns a snapshot and an MQBF policy into the loop's arrays, once;
:class:`MqbfRun` is one what-if from copies of them under a machine setting (active
processors, a wake under way); :func:`mqbf_whatif` runs one to its end and returns a
:class:`olsctl.whatif.WhatIfResult`, as :func:`olsctl.whatif.run_whatif` does for a
what-if run by the policy's Python pass. For snapshots with nothing but processors (no
power, limit or budget) and no arrivals.
"""

from __future__ import annotations

import math

import numpy as np

from olsctl.metrics import BSLD_BOUND_S
from olsctl.policies.core.jit import compiled
from olsctl.policies.core.order import ORDER_CODES
from olsctl.policies.core.run import LoopRun, copied_for, loop_arrays
from olsctl.policies.mqbf import MultiQueueBackfill
from olsctl.policies.mqbf import forward  # noqa: F401  (the loop, called compiled)
from olsctl.state import Snapshot
from olsctl.whatif import WhatIfResult

INF = math.inf




def steps(policy: MultiQueueBackfill, state, until_s: float,
          stop_above: "tuple[str, float] | None", raise_at: "tuple[float, int] | None"):
    """None: the what-if of a live state runs MQBF's Python pass (which calls the
    compiled phases); only a tick's template runs the compiled loop."""
    return None


def template_key(policy: MultiQueueBackfill) -> MultiQueueBackfill:
    """A template is made for one MQBF policy (its queues, shares and order)."""
    return policy


def template(snap: Snapshot, policy: MultiQueueBackfill, until_s: float,
             stop_above: "tuple[str, float] | None") -> "MqbfTemplate | None":
    """The tick's template of ``snap`` under ``policy`` (None when it holds more than
    processors and partitions, or the order is not a built-in one)."""
    return MqbfTemplate(snap, policy, until_s, stop_above) \
        if MqbfTemplate.fits(snap, policy) else None


class MqbfTemplate:
    """A snapshot's MQBF what-if arrays, made once (for ``policy``, the horizon
    ``until_s`` and the SLA bound ``stop_above = (metric, limit)``, None: never cut
    short) and copied for each machine setting (:meth:`run`). Jobs are indexed as in
    the snapshot."""

    #: the arrays a run changes (the others are read only, or scratch of one pass)
    OWN = ("start", "queue", "alloc", "held", "running", "heap_t", "heap_j", "count",
           "clock", "seen")

    def __init__(self, snap: Snapshot, policy: MultiQueueBackfill, until_s: float = INF,
                 stop_above: "tuple[str, float] | None" = None) -> None:
        if not self.fits(snap, policy):
            raise ValueError("compiled MQBF what-ifs take snapshots with processors only, "
                             "each running job's processors per partition, and a "
                             "built-in order")
        nr = snap.n_running
        self.snap = snap
        self.kernels = k = compiled()
        self.code = ORDER_CODES[policy.order]
        self.borrow = bool(policy.borrow)
        n = self.n = int(snap.job_id.size)
        parts = policy.queues
        self.weights = policy.weights
        a = self.arrays = loop_arrays(snap, until_s, stop_above)
        a["queue_of"] = np.empty(n, dtype=np.int64)
        k.queue_indices(np.asarray(policy.boundaries_s, dtype=float), a["est"],
                        a["queue_of"])
        alloc = a["alloc"] = np.zeros((n, parts), dtype=np.int64)
        try:  # (every row as wide as the policy's partitions, as usual: at once)
            alloc[:nr] = snap.running_alloc[:nr]
        except ValueError:  # rows of another partition count: each where it fits
            for j, held in enumerate(snap.running_alloc[:nr]):
                alloc[j, :len(held)] = held
        a["held"] = np.zeros(parts, dtype=np.int64)
        segments = n + 2 * parts + 2
        a["times"] = np.zeros(segments)
        a["free"] = np.zeros((parts, segments), dtype=np.int64)
        a["pivot_s"] = np.full(parts, np.nan)
        a["pivot_j"] = np.full(parts, -1, dtype=np.int64)
        count, clock = a["count"], a["clock"]
        k.mqbf_open(nr, a["procs"], a["est"], a["runtime"], a["submit"], a["start"],
                    a["alloc"], a["held"], a["running"], a["heap_t"], a["heap_j"], count,
                    clock, a["seen"], BSLD_BOUND_S)

    @staticmethod
    def fits(snap: Snapshot, policy: MultiQueueBackfill) -> bool:
        """Whether a template can stand for this snapshot's what-ifs under ``policy``."""
        return (snap.power is None and snap.limit is None and snap.budget is None
                and policy.order in ORDER_CODES
                and None not in snap.running_alloc[:snap.n_running])

    def start(self, policy: MultiQueueBackfill, active: int,
              wake: "tuple[float, int] | None", pass_due: bool) -> "MqbfRun":
        """:meth:`run` (the template is made for ``policy``)."""
        return self.run(active, wake, pass_due)

    def run(self, active: int, wake: "tuple[float, int] | None" = None,
            pass_due: bool | None = None) -> "MqbfRun":
        """A what-if from copies of the arrays under ``active`` processors, a ``wake``
        under way ((time, active processors then) or None) and whether the snapshot
        instant's pass is due (None: the snapshot's own flag)."""
        arrays = copied_for(self.arrays, self.OWN, active, wake,
                            self.snap.pass_due if pass_due is None else pass_due)
        owned = arrays["owned"] = np.empty(len(self.weights), dtype=np.int64)
        self.kernels.partition_counts(self.weights, int(active), owned)
        return MqbfRun(self, arrays)


class MqbfRun(LoopRun):
    """An MQBF what-if as the arrays of the compiled loop (:meth:`MqbfTemplate.run`)."""

    def __init__(self, template: MqbfTemplate, arrays: dict) -> None:
        self.template = template
        self.start = arrays["start"]
        self.queue_of = arrays["queue_of"]
        self.alloc = arrays["alloc"]
        t, a = template, arrays
        args = (t.code, t.borrow, t.weights, a["procs"], a["est"], a["runtime"], a["submit"],
                a["start"], a["queue_of"], a["queue"], a["alloc"], a["held"], a["owned"],
                a["running"], a["heap_t"], a["heap_j"], a["times"], a["free"], a["pivot_s"],
                a["pivot_j"], a["started"], a["count"], a["clock"], a["seen"], BSLD_BOUND_S)
        super().__init__(arrays, t.kernels.mqbf_forward, args)

    @classmethod
    def of(cls, snap: Snapshot, policy: MultiQueueBackfill, active: int,
           wake: "tuple[float, int] | None" = None, pass_due: bool | None = None,
           until_s: float = INF,
           stop_above: "tuple[str, float] | None" = None) -> "MqbfRun":
        """One what-if of ``snap`` (see :class:`MqbfTemplate`)."""
        return MqbfTemplate(snap, policy, until_s, stop_above).run(active, wake, pass_due)


def mqbf_whatif(snap: Snapshot, policy: MultiQueueBackfill, active: int | None = None,
                wake: "tuple[float, int] | None" = None, pass_due: bool | None = None,
                until_s: float = INF,
                stop_above: "tuple[str, float] | None" = None) -> WhatIfResult:
    """Run an MQBF what-if of ``snap`` (see :class:`MqbfRun`; ``active`` None: the
    snapshot's) until every job has started, nothing more can happen, the horizon, or
    the first time the SLA bound cuts it short (``stopped_bound``)."""
    run = MqbfRun.of(snap, policy, snap.active_procs if active is None else active, wake,
                     pass_due, until_s, stop_above)
    cut = run.forward()
    return WhatIfResult(
        job_id=snap.job_id.astype(np.int64), submit_s=snap.submit_s.astype(float),
        procs=snap.procs.astype(np.int64), runtime_s=snap.runtime_s.astype(float),
        start_s=run.start, n_running_at_start=snap.n_running,
        end_time_s=run.now_s, stopped_bound=run.bound if cut else None)
