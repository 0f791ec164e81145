"""The front of a queue in WFP order (:mod:`olsctl.policies.core.front`): what it says is
known of the order is the start of the whole queue's exact order
(:func:`olsctl.policies.core.order.ordered_queue`), pass after pass while time goes on and
jobs from the front start, on queues with near ties and exact ties across its edge.
"""

from __future__ import annotations

import numpy as np

from olsctl.policies.core.front import FRONT_ON, FRONT_SIZE, N_FRONT_FLT, N_FRONT_INT
from olsctl.policies.core import loop  # noqa: F401  (its kernels, compiled)
from olsctl.policies.core.jit import compiled
from olsctl.policies.core.order import WFP

I64 = np.int64


def _queue(rng, n: int, now: float) -> tuple:
    """``n`` waiting jobs (procs, est, submit) at ``now``: most ordinary, some whose WFP
    keys nearly tie with another's (an estimate three times as long and 27 times the
    processors: the same real key, not the same float), some twins (exact ties), some
    submitted just now (priority 0)."""
    procs = rng.integers(1, 64, size=n).astype(I64)
    est = rng.uniform(60.0, 86400.0, size=n)
    submit = now - rng.uniform(0.0, 2e5, size=n)
    for i in np.flatnonzero(rng.random(n) < 0.15):
        j = int(rng.integers(0, n))
        if procs[j] * 27 < 10_000:
            procs[i], est[i], submit[i] = procs[j] * 27, est[j] * 3.0, submit[j]
    for i in np.flatnonzero(rng.random(n) < 0.1)[1:]:
        procs[i], est[i], submit[i] = procs[i - 1], est[i - 1], submit[i - 1]
    submit[rng.random(n) < 0.05] = now
    return procs, est, submit


def test_the_known_part_of_the_front_starts_the_exact_order():
    """Over many passes of random queues, with the front far smaller than the queue:
    ``order[:known]`` is the exact order's start (also with near and exact ties at the
    front's edge), the front is taken afresh when too little is known, and most passes
    know at least what they need."""
    k = compiled()
    rng = np.random.default_rng(5)
    tally = {"passes": 0, "enough": 0, "taken": 0, "whole": 0}
    for case in range(40):
        n = int(rng.integers(150, 400))
        now = 1e6
        procs, est, submit = _queue(rng, n, now)
        queue = np.arange(n, dtype=I64)
        start = np.full(n, np.nan)
        rank, key, slope = np.arange(n, dtype=I64), np.empty(n), np.empty(n)
        order, farr, prio = (np.empty(n, dtype=I64), np.empty(n, dtype=I64), np.empty(n))
        fint, fflt = np.zeros(N_FRONT_INT, dtype=I64), np.zeros(N_FRONT_FLT)
        k.front_open(now, queue, n, procs, est, submit, slope, fint)
        assert fint[FRONT_ON] == 1
        nq = n
        need = int(rng.integers(1, 25))
        while nq:
            now += float(rng.choice([0.0, 1.0, rng.uniform(0.0, 5e4)]))
            m_before = fint[FRONT_SIZE]
            known = k.front_order(now, order, farr, fint, fflt, nq, rank, key, queue,
                                  procs, est, submit, slope, prio, need)
            want = k.ordered_queue(WFP, now, queue[:nq], procs, est, submit)
            assert order[:known].tolist() == want[:known].tolist(), (case, nq)
            tally["passes"] += 1
            tally["enough"] += known >= min(need, nq)
            tally["taken"] += fint[FRONT_SIZE] != m_before
            tally["whole"] += known == nq
            # some of the known jobs start; the rest wait on
            ns = int(rng.integers(0, min(known, 6) + 1))
            picked = rng.choice(known, size=ns, replace=False) if ns else []
            for i in picked:
                start[order[i]] = now
            m = fint[FRONT_SIZE]
            fint[FRONT_SIZE] = k.order_started(order, farr, m, start, ns)
            nq = k.still_waiting(queue, nq, start, ns)
    assert tally["enough"] >= 0.95 * tally["passes"], tally
    assert tally["taken"] >= 100 and tally["whole"] >= 100, tally
    assert tally["passes"] - tally["whole"] >= 2000, tally


def test_a_queue_a_front_cannot_stand_for_is_ranked_whole():
    """A job submitted after the front's time (its priority would fall) or with an
    estimate so small that its slope is not finite: no front; the whole queue is ranked
    each pass."""
    k = compiled()
    n = 100
    procs = np.full(n, 4, dtype=I64)
    est = np.linspace(100.0, 1e4, n)
    submit = np.linspace(0.0, 5e3, n)
    queue = np.arange(n, dtype=I64)
    for late in (False, True):
        fint = np.zeros(N_FRONT_INT, dtype=I64)
        slope = np.empty(n)
        e = est.copy()
        if late:
            now = 4e3  # the last jobs come after now
        else:
            now = 1e4
            e[7] = 1e-310
        k.front_open(now, queue, n, procs, e, submit, slope, fint)
        assert fint[FRONT_ON] == 0
        order, farr, prio = np.empty(n, dtype=I64), np.empty(n, dtype=I64), np.empty(n)
        known = k.front_order(now + 10.0, order, farr, fint, np.zeros(N_FRONT_FLT), n,
                              np.arange(n, dtype=I64), np.empty(n), queue, procs, e,
                              submit, slope, prio, 5)
        assert known == n and fint[FRONT_SIZE] == n
