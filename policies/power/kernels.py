"""The window knapsack's pass over arrays, and the power a pass reads: one implementation,
called by the main simulator (plain lists turned into a pass's arrays,
:class:`olsctl.policies.power.knapsack.WindowKnapsack`) and by the compiled what-if loop
(:mod:`olsctl.policies.power.forward`).

A pass reads power as data, as a policy reads the facility's meters: each running job's
power per processor now (``run_w``, by job), and each job's predicted power per
processor as ``gpred[juser[j]]`` (a predictor's value per group of jobs: a user's history,
the job itself for the oracle, one group for the naive predictor). ``kint`` and ``kflt``
hold the pass's settings and counters (the ``K_`` and ``F_`` indexes below).
"""

from __future__ import annotations

import numpy as np

from olsctl.policies.core.jit import kernel
from olsctl.policies.core.order import WFP, order_into, rank_queue
from olsctl.policies.power.choose import knapsack_choose
from olsctl.policies.power.held import (BACKFILL_WINDOW, backfill_queue, counted_w, fits_at,
                                        held_job, start_job)

#: the knapsack's ``force`` modes, by code
FORCE_NOW, FORCE_WHEN_FITS, FORCE_RESERVE = 0, 1, 2

FORCE_CODES = {"now": FORCE_NOW, "when-fits": FORCE_WHEN_FITS, "reserve": FORCE_RESERVE}

#: ``kint``: the window, the force mode, whether running jobs count at their prediction
#: too (headroom predicted), the machine's processors, the forced starts so far, the
#: held job kept between passes (0: not kept, searched at each pass; 1: none; else the
#: job + 2), whether the pass ordered the whole queue (see :func:`knapsack_pass`), the
#: backfill setting (``BACKFILL_CODES``)
K_WINDOW, K_FORCE, K_PREDICTED, K_TOTAL, K_FORCED, K_HELD, K_WHOLE, K_BACKFILL = range(8)

N_KINT = 8

#: ``kflt``: idle and sleeping power per processor, the cap in force
F_IDLE, F_SLEEP, F_CAP = range(3)

N_KFLT = 3


@kernel
def recent_mean(values, m: int, window: int, alpha: float) -> float:
    """The weighted mean of the last ``window`` of ``values[:m]`` (oldest first), the
    most recent weighted 1, the one before ``alpha``, then ``alpha`` squared...: the
    history predictor's rule (:class:`olsctl.power.predict.History`)."""
    total = 0.0
    weights = 0.0
    w = 1.0
    low = m - window if m > window else 0
    for i in range(m - 1, low - 1, -1):
        total += w * values[i]
        weights += w
        w *= alpha
    return total / weights


@kernel
def first_seen(codes: np.ndarray, slot: np.ndarray, found: np.ndarray,
               group: np.ndarray) -> int:
    """Numbers the values of ``codes`` 0, 1, ... by first appearance: ``group[i]`` gets
    the number of ``codes[i]``, ``found[:m]`` the values in that order; returns ``m``.
    ``slot`` (an entry per value, all -1) is left as it was found."""
    m = 0
    for i in range(codes.size):
        c = codes[i]
        g = slot[c]
        if g < 0:
            g = slot[c] = m
            found[m] = c
            m += 1
        group[i] = g
    for k in range(m):
        slot[found[k]] = -1
    return m


@kernel
def pick_phases(off: np.ndarray, starts: np.ndarray, levels: np.ndarray,
                rows: np.ndarray) -> tuple:
    """Flat phases (job ``j``'s at ``off[j]:off[j + 1]`` of ``starts`` and ``levels``)
    of the jobs ``rows``, as flat phases of their own (job ``i`` is ``rows[i]``)."""
    n = rows.size
    out = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        out[i + 1] = out[i] + off[rows[i] + 1] - off[rows[i]]
    got_s = np.empty(out[n])
    got_w = np.empty(out[n])
    for i in range(n):
        a = off[rows[i]]
        for k in range(out[i], out[i + 1]):
            got_s[k] = starts[a + k - out[i]]
            got_w[k] = levels[a + k - out[i]]
    return out, got_s, got_w


@kernel(inline=True)
def phase_power(x: float, ph_start: np.ndarray, ph_w: np.ndarray, a: int, b: int) -> tuple:
    """A running job's power per processor once the share ``x`` of its runtime is done
    (``x`` = (now - start) / runtime, 0 for no runtime): the level of its phase then
    (phases ``a`` to ``b`` - 1 of the flat ``ph_start`` (shares of its runtime) and
    ``ph_w``), and the share at which its next phase begins (inf: none). Until ``x``
    reaches that share, the level stays."""
    lo, hi = a, b
    while lo < hi:  # (bisect right)
        mid = (lo + hi) // 2
        if x < ph_start[mid]:
            hi = mid
        else:
            lo = mid + 1
    k = lo - 1
    return ph_w[k if k > a else a], (ph_start[lo] if lo < b else np.inf)


@kernel
def running_power(now: float, running: np.ndarray, n_run: int, began: np.ndarray,
                  runtime: np.ndarray, ph_off: np.ndarray, ph_start: np.ndarray,
                  ph_w: np.ndarray, run_w: np.ndarray) -> None:
    """Each running job ``j`` of the rows ``running[:n_run]`` ((expected end, job))
    its power per processor at ``now`` in ``run_w`` (by job), from its phases
    (``ph_off[j]:ph_off[j + 1]`` of ``ph_start``, ``ph_w``), ``began[j]`` and
    ``runtime[j]`` being its start and runtime
    (:meth:`olsctl.power.runtime.PowerState.job_power_now` without a power limit)."""
    for i in range(n_run):
        j = np.int64(running[i, 1])
        x = (now - began[j]) / runtime[j] if runtime[j] > 0 else 0.0
        run_w[j] = phase_power(x, ph_start, ph_w, ph_off[j], ph_off[j + 1])[0]


@kernel
def kept_order(code: int, now: float, last: np.ndarray, waiting: np.ndarray,
               listed: np.ndarray, rank: np.ndarray, key: np.ndarray, procs: np.ndarray,
               est: np.ndarray, submit: np.ndarray, order: np.ndarray) -> None:
    """The waiting jobs (``waiting``, in arrival order) in ``order`` in order ``code``
    at ``now``, as :func:`olsctl.policies.core.order.ordered_queue` gives it: put in
    order (:func:`rank_queue`) from the last pass's order ``last``, the jobs come since
    (not ``listed``) behind, in arrival order; the whole queue afresh when a job of
    ``last`` left unseen. Marks the waiting jobs ``listed`` and each one's arrival rank
    in ``rank`` (``key``: room for each job's key)."""
    nq = len(waiting)
    m = len(last)
    fresh = 0
    for i in range(nq):
        if not listed[waiting[i]]:
            fresh += 1
    if m + fresh != nq:  # (a job left unseen)
        listed[:] = False
        m = 0
    for i in range(m):
        order[i] = last[i]
    for i in range(nq):
        j = waiting[i]
        if not listed[j]:
            order[m] = j
            m += 1
            listed[j] = True
        rank[j] = i
    rank_queue(code, now, order, nq, rank, key, waiting, procs, est, submit)


@kernel
def knapsack_pass(now: float, active: int, busy: int, ordered: np.ndarray, nq: int,
                  procs: np.ndarray, est: np.ndarray, submit: np.ndarray, start: np.ndarray,
                  running: np.ndarray, n_run: int, run_w: np.ndarray, juser: np.ndarray,
                  gpred: np.ndarray, entry: np.ndarray, kint: np.ndarray,
                  kflt: np.ndarray, started: np.ndarray, known: int, code: int,
                  queue: np.ndarray) -> tuple:
    """One pass of Wallace's window knapsack
    (:class:`olsctl.policies.power.knapsack.WindowKnapsack` gives the rules) at ``now``
    over the waiting jobs ``ordered[:nq]`` (in the policy's queue order ``code``, their
    ``start`` NaN; left as they are), with ``active`` processors of which ``busy`` are in
    use by the running jobs ``running[:n_run]`` ((expected end, job) rows, ascending).
    Jobs it starts get their start time, join the running rows and are listed in
    ``started``; window entries are marked in ``entry``. Returns (jobs started, running
    jobs).

    Only ``ordered[:known]`` need be in order: should the pass read further, it orders
    the whole queue there from ``queue[:nq]`` (the same jobs in arrival order) and sets
    ``kint[K_WHOLE]``. With ``kint[K_HELD]`` kept (not 0), the held job is taken from
    there, and a job the pass holds is noted there."""
    window = kint[K_WINDOW]
    return window_pass(now, active, busy, ordered, nq, procs, est, submit, start, running,
                       n_run, run_w, juser, gpred, entry, kint, kflt, started, known, code,
                       queue, np.empty(window, dtype=np.int64),
                       np.empty(window, dtype=np.int64))


@kernel
def main_pass(now: float, active: int, busy: int, waiting: np.ndarray, nq: int,
              procs: np.ndarray, est: np.ndarray, submit: np.ndarray, start: np.ndarray,
              running: np.ndarray, n_run: int, run_w: np.ndarray, metered: bool,
              began: np.ndarray, runtime: np.ndarray, ph_off: np.ndarray,
              ph_start: np.ndarray, ph_w: np.ndarray, juser: np.ndarray,
              gpred: np.ndarray, entry: np.ndarray, seen: np.ndarray, kint: np.ndarray,
              kflt: np.ndarray, window: int, force: int, backfill: int, predicted: bool,
              total: int, idle_w: float, sleep_w: float, cap_w: float, started: np.ndarray,
              code: int, kept: np.ndarray, n_kept: int, listed: np.ndarray,
              rank: np.ndarray, key: np.ndarray, order: np.ndarray, marked: np.ndarray,
              marked_at: np.ndarray) -> tuple:
    """The main simulator's pass (:class:`olsctl.policies.power.knapsack.WindowKnapsack`)
    in one call, its settings (``window`` ... ``cap_w``) put in ``kint`` and ``kflt``:
    the running jobs' power (unless ``metered``: a power limit put it in ``run_w``), the
    waiting jobs (``waiting[:nq]``, arrival order) in order ``code`` (WFP: in ``kept``
    from the last pass's ``kept[:n_kept]``, the jobs started leaving it after; others:
    in ``order``), then :func:`knapsack_pass`. The window entries it changed go to
    ``marked`` and ``marked_at`` (``seen``: each job's entry as the caller has it, kept
    so); the started jobs leave ``waiting`` (the rest keep their order) and their
    ``start`` is NaN again. Returns (jobs started, entries changed, the kept order's
    length, the jobs left waiting)."""
    kint[:] = 0
    kint[K_WINDOW], kint[K_FORCE], kint[K_TOTAL] = window, force, total
    kint[K_BACKFILL] = backfill
    kint[K_PREDICTED] = predicted
    kflt[F_IDLE], kflt[F_SLEEP], kflt[F_CAP] = idle_w, sleep_w, cap_w
    if not metered:
        running_power(now, running, n_run, began, runtime, ph_off, ph_start, ph_w, run_w)
    queue = waiting[:nq]
    if code == WFP:
        kept_order(code, now, kept[:n_kept], queue, listed, rank, key, procs, est,
                   submit, kept)
        ordered = kept
    else:
        order_into(code, now, queue, procs, est, submit, order)
        ordered = order
    ns = knapsack_pass(now, active, busy, ordered, nq, procs, est, submit, start, running,
                       n_run, run_w, juser, gpred, entry, kint, kflt, started, nq, code,
                       ordered)[0]
    nm = 0
    for i in range(min(window + ns, nq)):
        j = ordered[i]
        if entry[j] != seen[j] and not (np.isnan(entry[j]) and np.isnan(seen[j])):
            seen[j] = marked_at[nm] = entry[j]
            marked[nm] = j
            nm += 1
    left = unstarted(waiting, nq, start) if ns else nq
    if code == WFP:
        n_kept = unstarted(kept, nq, start) if ns else nq
        for i in range(ns):
            listed[started[i]] = False
    for i in range(ns):
        start[started[i]] = np.nan
    return ns, nm, n_kept, left


@kernel(inline=True)
def unstarted(jobs: np.ndarray, n: int, start: np.ndarray) -> int:
    """Keeps in ``jobs`` (in order) those of ``jobs[:n]`` whose ``start`` is NaN;
    returns how many."""
    m = 0
    for i in range(n):
        if np.isnan(start[jobs[i]]):
            jobs[m] = jobs[i]
            m += 1
    return m


@kernel(inline=True)
def window_pass(now: float, active: int, busy: int, ordered: np.ndarray, nq: int,
                procs: np.ndarray, est: np.ndarray, submit: np.ndarray, start: np.ndarray,
                running: np.ndarray, n_run: int, run_w: np.ndarray, juser: np.ndarray,
                gpred: np.ndarray, entry: np.ndarray, kint: np.ndarray, kflt: np.ndarray,
                started: np.ndarray, known: int, code: int, queue: np.ndarray,
                win: np.ndarray, chosen: np.ndarray) -> tuple:
    """:func:`knapsack_pass` with room for the window (``win``, ``chosen``: at least the
    window's length each), compiled into its callers: it allocates nothing itself, so a
    what-if loop that counts no references can take it."""
    ns = 0
    if busy >= active or nq == 0:
        return ns, n_run
    window = kint[K_WINDOW]
    force = kint[K_FORCE]
    predicted = kint[K_PREDICTED] != 0
    idle_w = kflt[F_IDLE]
    room = kflt[F_CAP] - measured_w(active, busy, kint[K_TOTAL], procs, running, n_run,
                                    run_w, juser, gpred, predicted, idle_w, kflt[F_SLEEP])
    holding = False
    held = -1
    until = 0.0
    if force != FORCE_NOW:
        held = held_job(entry, ordered, nq) if kint[K_HELD] == 0 else kint[K_HELD] - 2
        if held >= 0:
            rise = procs[held] * (gpred[juser[held]] - idle_w)
            if procs[held] > active - busy or rise > room:
                if force == FORCE_WHEN_FITS or n_run == 0:
                    # nothing else starts before the held job (the idle rule aside)
                    whole_order(known, code, now, queue, nq, procs, est, submit, ordered,
                                kint)
                    return held_first(now, active, busy, held, ordered, nq, procs, est,
                                      start, running, n_run, kint, started)
                holding = True
                until = fits_at(held, rise, room, active - busy, procs, running, n_run,
                                run_w, juser, gpred, predicted, idle_w)
            else:
                n_run = start_job(held, now, procs, est, start, running, n_run)
                started[ns] = held
                ns += 1
                busy += procs[held]
                room -= rise
    while True:
        free = active - busy
        if free <= 0:
            return ns, n_run
        nw = 0
        for i in range(nq):
            if i == known:
                known = whole_order(known, code, now, queue, nq, procs, est, submit,
                                    ordered, kint)
            j = ordered[i]
            if start[j] != start[j]:  # NaN: not started in this pass
                win[nw] = j
                nw += 1
                if nw == window:
                    break
        if nw == 0:
            return ns, n_run
        for i in range(nw):
            j = win[i]
            if entry[j] != entry[j]:  # NaN: entering now
                entry[j] = now
        nc = 0
        if not holding:
            for i in range(nw):
                chosen[nc] = win[i]
                nc += 1
        else:
            for i in range(nw):
                j = win[i]
                if j != held and now + est[j] <= until:
                    chosen[nc] = win[i]
                    nc += 1
        nc = knapsack_choose(chosen, nc, free, room, procs, juser, gpred, idle_w)
        if nc == 0:
            if holding and kint[K_BACKFILL] != BACKFILL_WINDOW:
                whole_order(known, code, now, queue, nq, procs, est, submit, ordered, kint)
                return backfill_queue(now, active, busy, held, until, room, ordered, nq,
                                      procs, est, start, running, n_run, run_w, juser,
                                      gpred, predicted, idle_w, kint[K_BACKFILL], started,
                                      ns)
            if holding or (nw < window and n_run > 0):
                return ns, n_run
            by_entry(win, nw, entry, chosen)
            first = chosen[0]
            if nw == window and force != FORCE_NOW:
                entry[first] = -np.inf  # held: waits for room, then starts
                if kint[K_HELD] != 0:
                    kint[K_HELD] = first + 2
            elif nw == window and procs[first] <= free:
                n_run = start_job(first, now, procs, est, start, running, n_run)
                started[ns] = first
                ns += 1
                kint[K_FORCED] += 1  # at most one forced start a pass
                return ns, n_run
            if n_run == 0 and ns == 0:
                ns, n_run = start_if_idle(now, active, busy, chosen, nw, procs, est, start,
                                          running, n_run, kint, started, ns)
            return ns, n_run
        for i in range(nc):
            j = chosen[i]
            n_run = start_job(j, now, procs, est, start, running, n_run)
            started[ns] = j
            ns += 1
            busy += procs[j]
            room -= procs[j] * (gpred[juser[j]] - idle_w)


@kernel
def held_first(now: float, active: int, busy: int, held: int, ordered: np.ndarray, nq: int,
               procs: np.ndarray, est: np.ndarray, start: np.ndarray, running: np.ndarray,
               n_run: int, kint: np.ndarray, started: np.ndarray) -> tuple:
    """Nothing starts before the held job but by the idle rule (:func:`start_if_idle`),
    the held job first, then ``ordered[:nq]``. Returns (jobs started, running jobs)."""
    first = np.empty(nq, dtype=np.int64)
    first[0] = held
    k = 1
    for i in range(nq):
        if ordered[i] != held:
            first[k] = ordered[i]
            k += 1
    return start_if_idle(now, active, busy, first, nq, procs, est, start, running, n_run,
                         kint, started, 0)


@kernel
def by_entry(win: np.ndarray, nw: int, entry: np.ndarray, chosen: np.ndarray) -> None:
    """The window ``win[:nw]`` by window entry (stable: ties in its order) in ``chosen``."""
    order = np.argsort(entry[win[:nw]], kind="mergesort")
    for i in range(nw):
        chosen[i] = win[order[i]]


@kernel
def whole_order(known: int, code: int, now: float, queue: np.ndarray, nq: int,
                procs: np.ndarray, est: np.ndarray, submit: np.ndarray,
                ordered: np.ndarray, kint: np.ndarray) -> int:
    """The whole queue in ``ordered[:nq]``, in order ``code`` from ``queue[:nq]``, unless
    ``known`` says it is already (its first ``known`` jobs are the same whichever way
    they were ordered); returns ``nq``."""
    if known < nq:
        order_into(code, now, queue[:nq], procs, est, submit, ordered)
        kint[K_WHOLE] = 1
    return nq


@kernel(inline=True)
def measured_w(active: int, busy: int, total: int, procs: np.ndarray, running: np.ndarray,
               n_run: int, run_w: np.ndarray, juser: np.ndarray, gpred: np.ndarray,
               predicted: bool, idle_w: float, sleep_w: float) -> float:
    """Machine power now: the running jobs at their power now (with ``predicted``, at
    the larger of that and their prediction), idle active processors at ``idle_w``,
    the rest at ``sleep_w`` (:meth:`olsctl.power.runtime.PowerState.measured_w`)."""
    busy_w = 0.0
    for k in range(n_run):
        j = np.int64(running[k, 1])
        busy_w += procs[j] * counted_w(j, run_w, juser, gpred, predicted)
    idle = active - busy if active > busy else 0
    sleeping = total - (active if active > busy else busy)
    return busy_w + idle_w * idle + sleep_w * sleeping


@kernel
def start_if_idle(now: float, active: int, busy: int, ordered: np.ndarray, m: int,
                  procs: np.ndarray, est: np.ndarray, start: np.ndarray,
                  running: np.ndarray, n_run: int, kint: np.ndarray, started: np.ndarray,
                  ns: int) -> tuple:
    """[choice] When nothing runs and nothing started in this pass, the first of
    ``ordered[:m]`` that has the processors starts anyway (a forced start): an idle
    machine frees no power by waiting (:func:`olsctl.policies.power.capping.force_if_idle`).
    Returns (jobs started, running jobs)."""
    if n_run > 0 or ns > 0:
        return ns, n_run
    free = active - busy
    for i in range(m):
        j = ordered[i]
        if procs[j] <= free:
            n_run = start_job(j, now, procs, est, start, running, n_run)
            started[ns] = j
            kint[K_FORCED] += 1
            return ns + 1, n_run
    return ns, n_run
