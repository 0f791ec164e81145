"""An independent Python MQBF pass, the oracle the tests hold the compiled pass
(:func:`olsctl.policies.mqbf.phases.mqbf_pass`) to: Phase A and Phase B by the
specification (:func:`multi_queue_pass`) over :class:`PartitionProfiles`, each
partition's free processors over future time, the fit test and the reservations.

A job takes processors from its own partition first and, with ``borrow``, idle ones
from the others (lowest index first), never where a reservation needs them. Each running
job's allocation, the processors it holds per partition, is kept in ``state.alloc`` (it
returns to the owners when the job ends). The rules are docs/mqbf.md's, summarised in
docs/policies.md. Every pass is a full pass; reservations are computed when a later start could
depend on them, in pivot order (``settle()`` computes the rest).

:class:`OracleMqbf` runs it as a policy with an MQBF policy's settings.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import accumulate
from operator import itemgetter, sub
from fractions import Fraction
from typing import TYPE_CHECKING

from olsctl.policies.core.backfill import INF, Reservation, shadow
from olsctl.policies.core.order import ORDERS

if TYPE_CHECKING:
    from olsctl.policies.mqbf import MultiQueueBackfill
    from olsctl.state import SimState


def oracle_pass(policy: "MultiQueueBackfill", state: "SimState") -> "PartitionProfiles | None":
    """One MQBF pass under ``policy``'s settings: the jobs it starts are started on the
    state. Returns its resources (``.settle()``: every reservation, in pivot order), or
    None when it was skipped: no processor idle, or no waiting job narrow enough."""
    queue = state.queue
    if state.busy_procs >= state.active_procs or not queue:
        return None
    if min(state.procs[j] for j in queue) > state.active_procs - state.busy_procs:
        return None
    queue_of = [policy.queue_index(e) for e in state.estimate_s]
    ordered = ORDERS[policy.order](state, queue)
    groups: list[list[int]] = [[] for _ in range(policy.queues)]
    for j in ordered:
        groups[queue_of[j]].append(j)
    by_head = [group for group in groups if group]  # the queues in the order of their heads
    by_head.sort(key=lambda group: ordered.index(group[0]))
    resources = PartitionProfiles(state, policy.owned(state.active_procs), queue_of,
                                  policy.borrow)
    multi_queue_pass(state, ordered, resources, by_head)
    return resources


class OracleMqbf:
    """A policy whose pass is :func:`oracle_pass` under ``policy``'s settings; keeps the
    reservations of its last pass (``last``: None when the pass was skipped)."""

    name = "mqbf-oracle"

    def __init__(self, policy: "MultiQueueBackfill") -> None:
        self.policy = policy
        self.last: PartitionProfiles | None = None

    def schedule(self, state: "SimState") -> None:
        self.last = oracle_pass(self.policy, state)


class PartitionProfiles:
    """Free processors per partition over future time, for one pass.

    ``times[i]`` starts segment i (``times[0]`` = now, the last segment is unbounded) and
    ``free_at[p][i]`` is partition p's free count on it. Built lazily, at the first
    reservation: until then every profile is non-decreasing (running jobs only release),
    so "free over [now, now + d)" is simply "free now". ``free`` also never exceeds the
    active processors not in use, so a machine shrunk below its busy count starts nothing.
    """

    def __init__(self, state: "SimState", owned: tuple[int, ...], queue_of: list[int],
                 borrow: bool) -> None:
        self.state = state
        self.k = k = len(owned)
        self.queue_of = queue_of
        self.borrow = borrow
        self.owned = owned
        held = state.held
        if len(held) < k:
            held.extend([0] * (k - len(held)))
        self.now_free = list(map(sub, owned, held))  # (held has k counts or more)
        self.idle = state.active_procs - state.busy_procs
        self.times: list[float] | None = None
        self.free_at: list[list[int]] = []
        # per number of leading segments n: each partition's minimum free count over
        # them, and what all partitions could give together (cleared when the profile
        # changes)
        self._window_cache: dict[int, tuple[list[int], int]] = {}
        # the profile as built (later changes in the pass only lower it): non-decreasing,
        # so bisect finds where a reservation search may begin
        self.base_times: list[float] = []
        self.base_own: list[list[int]] = []
        self.base_total: list[int] = []
        #: pivots whose reservation is not computed yet, in pivot order, with a lower
        #: bound on its start each
        self.pending: list[tuple[int, float]] = []
        self.reservations: list[Reservation] = []
        #: every pivot, in the order it was made one
        self.pivots: list[int] = []
        # No reservation starts before ``horizon``: the earliest start of a settled one,
        # or for a pending pivot the first time the machine as a whole has room for it.
        # Before it every profile is non-decreasing, so a job ending by then only needs
        # the free counts of now. (With an oversubscribed partition the total says
        # nothing about the partitions, so no bound is used.) ``settled_horizon`` is
        # the earliest start of a settled one alone.
        self.horizon = INF
        self.settled_horizon = INF
        self._bounded = min(self.now_free) >= 0
        self._update_free()

    def _update_free(self) -> None:
        if self._bounded:  # no partition is oversubscribed: nothing is negative
            positive = sum(self.now_free)
        else:
            positive = 0
            for f in self.now_free:
                if f > 0:
                    positive += f
        self.free = positive if positive < self.idle else self.idle

    # -- profile -----------------------------------------------------------------------
    def _build(self) -> None:
        st = self.state
        now = st.now_s
        alloc = st.alloc
        running = [(e, j) for e, j in st.running if j in alloc]
        now_free = self.now_free
        total = sum(now_free) if self._bounded else sum(f for f in now_free if f > 0)
        if not running:
            times, cols, totals = [now], [[f] for f in now_free], [total]
        else:
            ends = [e for e, _ in running]
            last = len(ends) - 1
            # one breakpoint per distinct expected end: keep the last job of each group
            keep = [i for i in range(last) if ends[i] != ends[i + 1]]
            keep.append(last)
            pick = itemgetter(*[i + 1 for i in keep]) if len(keep) > 1 else None
            times = [now] + [ends[i] for i in keep]
            cols = []
            for p, column in enumerate(zip(*[alloc[j] for _, j in running])):
                cum = list(accumulate(column, initial=now_free[p]))
                cols.append([cum[0], *pick(cum)] if pick else [cum[0], cum[-1]])
            if min(now_free) >= 0:  # then the positives just add up the releases
                procs = st.procs
                cum = list(accumulate([procs[j] for _, j in running], initial=total))
                totals = [cum[0], *pick(cum)] if pick else [cum[0], cum[-1]]
            else:
                totals = [sum(f for f in seg if f > 0) for seg in zip(*cols)]
        self.times = times
        self.free_at = cols
        self.base_times = list(times)
        self.base_own = [list(col) for col in cols]
        self.base_total = totals
        self._window_cache = {}

    def _split(self, t: float) -> int:
        """Index of the segment starting at ``t`` (inserting a breakpoint if needed)."""
        times = self.times
        i = bisect_right(times, t) - 1
        if times[i] == t:
            return i
        times.insert(i + 1, t)
        for col in self.free_at:
            col.insert(i + 1, col[i])
        return i + 1

    def _take(self, start: float, end: float, alloc: tuple[int, ...]) -> None:
        a = self._split(start)
        b = self._split(end) if end < INF else len(self.times)
        if b - a == 1:
            for p, n in enumerate(alloc):
                if n:
                    self.free_at[p][a] -= n
        else:
            for p, n in enumerate(alloc):
                if n:
                    col = self.free_at[p]
                    col[a:b] = [f - n for f in col[a:b]]
        self._window_cache = {}

    def _allocation(self, q: int, w: int, mins: list[int]) -> tuple[int, ...] | None:
        """Processors per partition for a job of width ``w`` from queue ``q`` given each
        partition's free minimum over the job's run, or None if it does not fit: its own
        partition first, then (with ``borrow``) the others, lowest index first."""
        alloc = [0] * self.k
        own = mins[q]
        if own >= w:
            alloc[q] = w
            return tuple(alloc)
        if not self.borrow:
            return None
        need = w
        if own > 0:
            alloc[q] = own
            need -= own
        for p in range(self.k):
            m = mins[p]
            if p != q and m > 0:
                take = m if m < need else need
                alloc[p] = take
                need -= take
                if need == 0:
                    return tuple(alloc)
        return None

    # -- the Resources protocol --------------------------------------------------------
    def try_start(self, j: int) -> bool:
        st = self.state
        w = st.procs[j]
        if w > self.free:
            return False
        now = st.now_s
        end = now + st.estimate_s[j]
        q = self.queue_of[j]
        if end <= self.horizon:
            mins = self.now_free
        else:
            # settle the pending reservations in order, only until the window is decided:
            # each one only lowers the profile, so a window without room stays so; and one
            # that cannot start before ``end`` cannot affect the window
            while True:
                if self.times is not None:
                    mins, room = self._window(end)
                    if (room if self.borrow else mins[q]) < w:
                        return False
                if not self.pending or end <= self.horizon:
                    break
                self._settle_next()
            if end <= self.horizon:
                mins = self.now_free
        alloc = self._allocation(q, w, mins)
        if alloc is None:
            return False
        st.start(j, alloc)
        now_free = self.now_free
        for p, n in enumerate(alloc):
            now_free[p] -= n
        self.idle -= w
        if self.times is not None:
            self._take(st.now_s, end, alloc)
        self._update_free()
        return True

    def _window(self, end: float) -> tuple[list[int], int]:
        """For a run from now to ``end``: each partition's minimum free count, and their
        positive sum (what borrowing could gather)."""
        n = bisect_left(self.times, end)
        got = self._window_cache.get(n)
        if got is None:
            if n == 1:
                mins = [col[0] for col in self.free_at]
            else:
                mins = [min(col[:n]) for col in self.free_at]
            if self._bounded:  # no partition is oversubscribed: nothing is negative
                room = sum(mins)
            else:
                room = sum(m for m in mins if m > 0)
            got = self._window_cache[n] = (mins, room)
        return got

    def reserve(self, j: int) -> None:
        """Make ``j`` a pivot. The reservation is computed when a later start could be
        affected by it (in pivot order), so a pass that cannot start anything more skips
        the work; the result is the same."""
        self.pivots.append(j)
        if self._bounded:
            st = self.state
            if st.procs[j] > self.idle:
                bound = shadow(st, st.procs[j])[0]
            else:  # room in total but not in the partitions: after the next release
                bound = st.running[0][0] if st.running else INF
            if bound < self.horizon:
                self.horizon = bound
        else:
            bound = self.horizon = self.state.now_s
        self.pending.append((j, bound))

    def _settle_next(self) -> None:
        """Compute the first pending reservation."""
        j, _ = self.pending.pop(0)
        res = self._reserve_now(j)
        if res is not None:
            self.reservations.append(res)
            if res.shadow_s < self.settled_horizon:
                self.settled_horizon = res.shadow_s
        if self._bounded:
            pending = self.pending
            self.horizon = (min(self.settled_horizon, *[b for _, b in pending]) if pending
                            else self.settled_horizon)

    def settle(self, count: int | None = None) -> list[Reservation]:
        """Compute the pending reservations, in order (only the first ``count`` of them,
        if given); returns all made so far."""
        n = len(self.pending) if count is None else min(count, len(self.pending))
        for _ in range(n):
            self._settle_next()
        return self.reservations

    def _reserve_now(self, j: int) -> Reservation | None:
        if self.times is None:
            self._build()
        st = self.state
        w, d, q = st.procs[j], st.estimate_s[j], self.queue_of[j]
        times, cols = self.times, self.free_at
        own_col = cols[q]
        borrow = self.borrow
        # no start can be feasible before the built profile first has room for it
        first = bisect_left(self.base_own[q], w)
        if borrow:
            first = min(first, bisect_left(self.base_total, w))
        if first == len(self.base_times):
            return None
        n = len(times)
        for i in range(bisect_left(times, self.base_times[first]), n):
            # quick filters on the first segment before looking at the whole window
            own_ok = own_col[i] >= w
            if not own_ok:
                if not borrow:
                    continue
                total = 0
                for col in cols:
                    if col[i] > 0:
                        total += col[i]
                if total < w:
                    continue
            s = times[i]
            stop = bisect_left(times, s + d, i + 1)
            if own_ok and min(own_col[i:stop]) >= w:
                alloc = [0] * self.k
                alloc[q] = w
                return self._reserve_at(j, s, d, tuple(alloc))
            if borrow:
                alloc = self._allocation(q, w, [min(col[i:stop]) for col in cols])
                if alloc is not None:
                    return self._reserve_at(j, s, d, alloc)
        return None

    def _reserve_at(self, j: int, s: float, d: float, alloc: tuple[int, ...]) -> Reservation:
        self._take(s, s + d, alloc)
        return Reservation(j, s, alloc)


def largest_remainder(weights: tuple[Fraction, ...], total: int) -> tuple[int, ...]:
    """Split ``total`` in proportion to ``weights`` over exact fractions: floors, then one
    more for the largest remainders (ties to the lowest index); the reference
    :func:`olsctl.policies.mqbf.profile.partition_counts` is checked against."""
    wsum = sum(weights)
    quotas = [total * w / wsum for w in weights]
    counts = [int(q) for q in quotas]  # quotas are >= 0: int() floors
    left = total - sum(counts)
    order = sorted(range(len(weights)), key=lambda p: (-(quotas[p] - counts[p]), p))
    for p in order[:left]:
        counts[p] += 1
    return tuple(counts)


def multi_queue_pass(state: "SimState", queue, resources, by_queue, skip=None) -> None:
    """One MQBF pass by the specification, over the profiles ``resources``: Phase A takes
    the queues (``by_queue``, each in the policy's order, listed by the position of their
    heads), each starting jobs from its head while the head fits and reserving for the
    first that does not (its pivot); Phase B then starts each other job of ``queue`` (all
    queues merged in order) that fits without delaying a reservation. ``skip``: jobs
    Phase B passes over besides Phase A's (pivots kept from an earlier pass)."""
    if resources.free <= 0 or not queue:
        return
    procs, try_start = state.procs, resources.try_start
    skip = set() if skip is None else skip
    for jobs in by_queue:  # Phase A
        k, n = 0, len(jobs)
        while k < n and procs[jobs[k]] <= resources.free and try_start(jobs[k]):
            k += 1
        if k < n:
            resources.reserve(jobs[k])
        skip.update(jobs[:k + 1])
    free = resources.free  # Phase B
    if free <= 0:
        return
    for j in queue:
        if procs[j] <= free and j not in skip and try_start(j):
            free = resources.free
            if free <= 0:
                break
