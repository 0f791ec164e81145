"""MQBF's pass in the main simulator, as kernels (see :mod:`olsctl.policies.core.jit`):
the queue put in its order and indexed for one pass (:mod:`olsctl.policies.mqbf.phases`),
or in WFP order each queue's tree of its jobs made for the pass
(:mod:`olsctl.policies.mqbf.wfp_phases`).
"""

from __future__ import annotations

import numpy as np

from olsctl.policies.core.index import index_open
from olsctl.policies.core.jit import kernel
from olsctl.policies.core.order import FCFS, WFP, order_into
from olsctl.policies.mqbf.phases import (P_HEAD, link_queues, mqbf_indexed_phases,
                                         narrowest_of, pass_opens, pass_parts)
from olsctl.policies.mqbf.wfp_phases import mqbf_wfp_pass
from olsctl.policies.mqbf.wfp_trees import wfp_trees_open


@kernel
def mqbf_pass(code: int, borrow: bool, now: float, active: int, busy: int,
              queue: np.ndarray, procs: np.ndarray, est: np.ndarray, submit: np.ndarray,
              queue_of: np.ndarray, owned: np.ndarray, held: np.ndarray,
              running: np.ndarray, n_run: int, alloc: np.ndarray, times: np.ndarray,
              free: np.ndarray, pivot_s: np.ndarray, pivot_j: np.ndarray,
              started: np.ndarray) -> tuple:
    """One MQBF pass over ``queue`` (the waiting jobs in arrival order) put in order
    ``code``, with ``owned[p]`` processors in partition p of ``active``, ``busy`` in use.

    Phase A takes the queues in the order of their heads: each starts jobs from its
    head while they fit, and its first job that does not becomes the queue's pivot with
    a reservation (the pivot in ``pivot_j[q]``, its start, or inf, in ``pivot_s[q]``;
    -1 and NaN for a queue without a pivot). Phase B tries every other job,
    all queues merged in order. The jobs started go to ``started`` in start order, with
    their allocations in ``alloc`` and ``held``, and join ``running``. Returns (jobs
    started, running jobs). A pass in which no waiting job is narrow enough for the idle
    processors changes nothing (:func:`pass_opens`).

    This is :func:`mqbf_phases` with its scratch made for the one pass (the what-if
    loop makes it once for all its passes)."""
    if not pass_opens(active - busy, narrowest_of(queue, procs), pivot_s, pivot_j):
        return 0, n_run
    k = len(owned)
    nq = len(queue)
    return mqbf_phases(code, borrow, now, active - busy, queue, procs, est, submit,
                       queue_of, owned, held, running, n_run, alloc, times, free, pivot_s,
                       pivot_j, started, np.empty((2, nq), dtype=np.int64),
                       np.empty(nq, dtype=np.bool_), pass_parts(k),
                       np.empty((k + 1, free.shape[1]), dtype=np.int64))


@kernel
def mqbf_phases(code: int, borrow: bool, now: float, idle: int, queue: np.ndarray,
                procs: np.ndarray, est: np.ndarray, submit: np.ndarray,
                queue_of: np.ndarray, owned: np.ndarray, held: np.ndarray,
                running: np.ndarray, n_run: int, alloc: np.ndarray, times: np.ndarray,
                free: np.ndarray, pivot_s: np.ndarray, pivot_j: np.ndarray,
                started: np.ndarray, order: np.ndarray, done: np.ndarray,
                parts: np.ndarray, least: np.ndarray) -> tuple:
    """Phases A and B of :func:`mqbf_pass` once :func:`pass_opens` said the pass can
    change something (``idle`` processors not in use), with scratch for it: ``order``
    (2 rows of at least ``len(queue)``: the jobs in order ``code``, and for each
    position the next position of the same queue, -1 for none), ``done`` (as many),
    ``parts`` (:data:`N_PARTS` rows of K, or of :data:`N_ROOM` if that is more) and
    ``least`` (K + 1 rows as long as ``free``'s, :func:`running_minima`). It orders and
    links the queue and builds the index of its positions for this pass, then runs
    :func:`mqbf_indexed_phases`. In WFP order the queue stays in arrival order, with
    each queue's tree of its jobs made for this pass, and :func:`mqbf_wfp_phases` runs
    the phases."""
    k = len(owned)
    nq = len(queue)
    ordered = order[0]
    after = order[1]
    done[:nq] = False  # Phase A's jobs, by position: started or pivots
    if code == WFP:
        order_into(FCFS, now, queue, procs, est, submit, ordered)
        trees, tree_i, tree_f = wfp_trees_open(ordered, nq, queue_of, k, now, procs, est,
                                               submit, False)
        return mqbf_wfp_pass(borrow, now, idle, ordered, done, procs, est, submit,
                             queue_of, owned, held, running, n_run, alloc, times, free,
                             pivot_s, pivot_j, started, parts, least, trees, tree_i, tree_f)
    order_into(code, now, queue, procs, est, submit, ordered)
    link_queues(ordered, nq, queue_of, parts[P_HEAD, :k], after)
    size, wide, short = index_open(ordered, nq, procs, est)
    return mqbf_indexed_phases(borrow, now, idle, ordered, after, done, procs, est,
                               queue_of, owned, held, running, n_run, alloc, times, free,
                               pivot_s, pivot_j, started, parts, least, size, wide, short)
