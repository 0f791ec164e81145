"""Queue orders, written once: the key of each order and the functions that put a queue in it.

A queue is the waiting jobs in arrival order, (submit time, job id); every ordering is
stable, so equal keys keep that order. The keys are kernels (see
:mod:`olsctl.policies.core.jit`): the main simulator's passes call them as plain Python,
the what-if loops their compiled copies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from olsctl.policies.core.jit import kernel

if TYPE_CHECKING:
    from olsctl.state import SimState

#: queue orders (see :mod:`olsctl.policies.core.order`), by the code the kernels take
FCFS, SAF, SJF, WFP = 0, 1, 2, 3

ORDER_CODES = {"fcfs": FCFS, "saf": SAF, "sjf": SJF, "wfp": WFP}


@kernel
def order_key(code: int, now: float, submit: float, p: int, est: float) -> float:
    """A waiting job's key in queue order ``code`` (smaller first): processors x estimate
    (SAF), the estimate (SJF), minus Cobalt's WFP utility (wait / estimate)^3 x
    processors, which grows with the time waited (WFP); FCFS keeps arrival order."""
    if code == SAF:
        return p * est
    if code == SJF:
        return est
    if code == WFP:
        return -(((now - submit) / est) ** 3.0) * p
    return 0.0


@kernel
def ordered_queue(code: int, now: float, queue, procs, est, submit) -> np.ndarray:
    """``queue`` (arrival order: submit time, job id) in order ``code``, as an int64
    array, sorted stably so that equal keys keep arrival order."""
    ordered = np.empty(len(queue), dtype=np.int64)
    order_into(code, now, queue, procs, est, submit, ordered)
    return ordered


@kernel
def order_into(code: int, now: float, queue, procs, est, submit,
               ordered: np.ndarray) -> None:
    """:func:`ordered_queue` written into ``ordered[:len(queue)]``."""
    n = len(queue)
    if code == FCFS:
        for i in range(n):
            ordered[i] = queue[i]
        return
    keys = np.empty(n)
    for i in range(n):
        j = queue[i]
        keys[i] = order_key(code, now, submit[j], procs[j], est[j])
    by_key = np.argsort(keys, kind="mergesort")
    for i in range(n):
        ordered[i] = queue[by_key[i]]

#: how far apart (relatively) two of :func:`quick_key`'s WFP keys must be for their order
#: to be the order of :func:`olsctl.policies.core.order.order_key`'s: the cube by two
#: products and the cube by ``x ** 3.0`` differ by a few units in the last place (about
#: 1e-16 of the key), so 1e-12 is far beyond rounding
CUBE_TOL = 1e-12

#: an absolute margin besides, for keys so near zero that rounding is not relative
CUBE_TINY = 1e-290


@kernel(inline=True)
def quick_key(now: float, submit: float, p: int, est: float) -> float:
    """WFP's key (:func:`olsctl.policies.core.order.order_key`) with its cube taken by
    multiplication: within ``CUBE_TOL`` of the exact key, relatively."""
    x = (now - submit) / est
    return -(x * x * x) * p


@kernel(inline=True)
def keys_apart(a: float, b: float) -> bool:
    """Whether the finite quick keys ``a`` <= ``b`` surely order the exact keys alike."""
    scale = -a if a < 0.0 else a
    other = -b if b < 0.0 else b
    if other > scale:
        scale = other
    return b - a > CUBE_TOL * scale + CUBE_TINY


@kernel(inline=True)
def ranks_before(ka: float, ra: int, kb: float, rb: int) -> bool:
    """Whether a job with key ``ka`` and arrival rank ``ra`` comes before one with ``kb``
    and ``rb`` in :func:`olsctl.policies.core.order.ordered_queue`'s order: the smaller key
    first, NaN after every number (where numpy's sort puts it), ties in arrival order."""
    if ka != ka:
        return kb != kb and ra < rb
    if kb != kb or ka < kb:
        return True
    return ka == kb and ra < rb


@kernel(inline=True)
def rank_queue(code: int, now: float, order: np.ndarray, nq: int, rank: np.ndarray,
               key: np.ndarray, queue: np.ndarray, procs: np.ndarray, est: np.ndarray,
               submit: np.ndarray) -> None:
    """Put ``order[:nq]``, the waiting jobs in the order of the last pass, in WFP order at
    ``now``, exactly as :func:`olsctl.policies.core.order.ordered_queue` orders
    ``queue[:nq]`` (the same jobs in arrival order; ``rank`` gives each job's arrival
    rank, ``key`` is room for each job's key). Insertion from the last order by quick
    key, then each run of quick keys too close to tell apart (equal ones among them)
    in order by exact key and arrival rank; after more moves than a few per job, a
    stable sort of the quick keys in arrival order instead of the insertion, and with a
    key that is not finite, of the exact keys instead of both."""
    finite = True
    for i in range(nq):
        j = order[i]
        k = quick_key(now, submit[j], procs[j], est[j])
        key[j] = k
        if k - k != 0.0:  # inf or NaN
            finite = False
    if not finite:
        for i in range(nq):
            j = queue[i]
            key[j] = order_key(code, now, submit[j], procs[j], est[j])
        sort_by_key(order, nq, key, queue)
        return
    budget = 4 * nq + 16
    for i in range(1, nq):
        j = order[i]
        kj = key[j]
        s = i
        while s > 0 and key[order[s - 1]] > kj:
            order[s] = order[s - 1]
            s -= 1
        order[s] = j
        budget -= i - s
        if budget < 0:  # far from the last order: sorted afresh
            sort_by_key(order, nq, key, queue)
            break
    a = 0
    while a < nq - 1:  # runs of quick keys too close to tell apart: by the exact keys
        b = a
        while b + 1 < nq and not keys_apart(key[order[b]], key[order[b + 1]]):
            b += 1
        if b > a:
            for r in range(a, b + 1):
                j = order[r]
                key[j] = order_key(code, now, submit[j], procs[j], est[j])
            for r in range(a + 1, b + 1):
                j = order[r]
                s = r
                while s > a and ranks_before(key[j], rank[j], key[order[s - 1]],
                                             rank[order[s - 1]]):
                    order[s] = order[s - 1]
                    s -= 1
                order[s] = j
        a = b + 1


@kernel
def sort_by_key(order: np.ndarray, nq: int, key: np.ndarray, queue: np.ndarray) -> None:
    """``order[:nq]``: ``queue[:nq]`` (arrival order) sorted stably by ``key``."""
    keys = np.empty(nq)
    for i in range(nq):
        keys[i] = key[queue[i]]
    by_key = np.argsort(keys, kind="mergesort")
    for i in range(nq):
        order[i] = queue[by_key[i]]

Order = Callable[["SimState", list], list]


def fcfs(state: "SimState", queue: list[int]) -> list[int]:
    """First come, first served: (submit time, job id), the arrival order itself."""
    return queue


def saf(state: "SimState", queue: list[int]) -> list[int]:
    """Smallest area first: processors x estimate, ascending."""
    return _by_key(state, queue, SAF)


def sjf(state: "SimState", queue: list[int]) -> list[int]:
    """Shortest job first: estimate, ascending."""
    return _by_key(state, queue, SJF)


def wfp(state: "SimState", queue: list[int]) -> list[int]:
    """Mira's Cobalt WFP utility, highest first: (wait / estimate)^3 x processors,
    recomputed at every pass (it grows with the time waited)."""
    return _by_key(state, queue, WFP)


def _by_key(state: "SimState", queue: list[int], code: int) -> list[int]:
    """``queue`` sorted (stably) by :func:`order_key` in order ``code``, at the state's
    time: the one key the kernels' passes take too."""
    now, submit, procs, est = state.now_s, state.submit_s, state.procs, state.estimate_s
    return sorted(queue, key=lambda j: order_key(code, now, submit[j], procs[j], est[j]))


ORDERS: dict[str, Order] = {
    "fcfs": fcfs,
    "saf": saf,
    "sjf": sjf,
    "wfp": wfp,
}
