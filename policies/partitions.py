"""MQBF's resources: the partitions of the active processors and, for one pass, each
partition's free processors over future time (:class:`PartitionProfiles`), the fit test
and the reservations the shared backfilling core (:mod:`.backfill`) drives.

A job takes processors from its own partition first and, with ``borrow``, idle ones
from the others (lowest index first), never where a reservation needs them. Each running
job's allocation, the processors it holds per partition, is kept in ``state.alloc`` (it
returns to the owners when the job ends). The rules are ../MQBF.md's, summarised in the
README.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from fractions import Fraction
from itertools import accumulate
from operator import itemgetter, sub
from typing import TYPE_CHECKING

from olsctl.policies.backfill import INF, Reservation, shadow

if TYPE_CHECKING:
    from olsctl.state import SimState


#: within one instant, refuse at once a job at least as wide as one refused whose window
#: it covers (see PartitionProfiles._refuse; off only to check that it changes nothing)
REFUSED_SHORTCUT = True

#: when carrying profiles to a later instant, drop a pending pivot whose reservation
#: would start now without making it (see PartitionProfiles.advance; off only to check
#: that it changes nothing)
DROP_SHORTCUT = True


def largest_remainder(weights: tuple[Fraction, ...], total: int) -> tuple[int, ...]:
    """Split ``total`` in proportion to ``weights``: floors, then one more for the largest
    remainders (ties to the lowest index)."""
    wsum = sum(weights)
    quotas = [total * w / wsum for w in weights]
    counts = [int(q) for q in quotas]  # quotas are >= 0: int() floors
    left = total - sum(counts)
    order = sorted(range(len(weights)), key=lambda p: (-(quotas[p] - counts[p]), p))
    for p in order[:left]:
        counts[p] += 1
    return tuple(counts)


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
        # the jobs refused at instant ``_refused_at``, per lane (see :meth:`_refuse`)
        self._refused_at: float | None = None
        self._refused: dict[int, tuple[list[int], list[float]]] = {}
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

    def carry(self) -> bool:
        """Carry this pass's profiles to now, when only jobs arrived since (nothing ended,
        the active count the same): every profile is flat from the last pass's instant
        to now, so only the first segment moves. False, changing nothing, while a
        partition holds more than it owns (after the active count was lowered): the
        idle processors, not the partitions, may then have kept a pivot from starting
        at its reservation, which a new pass would move later (as :meth:`advance`)."""
        if not self._bounded:
            return False
        if self.times is not None:
            self.times[0] = self.base_times[0] = self.state.now_s
        return True

    def advance(self, running: list[tuple[float, int]], finished: int) -> list[int] | None:
        """Carry this pass's profiles to now, if the ``finished`` jobs that ended since
        were exactly those of ``running`` (the running jobs after this pass) expected to
        end by now, all at their expected end; else None, and nothing is changed.

        Then no expected end lay between the two instants and the profiles from now on
        are what a new pass would build: only the segments before now are dropped. A
        reservation from the last pass's instant that starts after now is also the
        earliest from now, so its pivot cannot start now and keeps it. From the first
        pivot whose reservation starts now (pending ones that might are computed to
        see), the pivots and their reservations are dropped, to be made again in queue
        order: returns them (empty when every pivot keeps its reservation)."""
        st = self.state
        now = st.now_s
        n = bisect_right(running, (now, INF))
        if (n != finished or not self._bounded or running[0][0] != now
                or running[n - 1][0] != now or running[n:] != st.running):
            return None
        self._refused_at = None  # jobs ended: the profile gave processors back
        times = self.times
        if times is not None:
            i = bisect_right(times, now) - 1
            if i > 0:
                del times[:i]
                for col in self.free_at:
                    del col[:i]
            times[0] = now
            base = self.base_times
            i = bisect_right(base, now) - 1
            if i > 0:
                del base[:i]
                del self.base_total[:i]
                for col in self.base_own:
                    del col[:i]
            base[0] = now
            self._window_cache = {}
        owned, held = self.owned, st.held
        self.now_free = list(map(sub, owned, held))
        self.idle = st.active_procs - st.busy_procs
        self._update_free()
        # a pending pivot that might start now: compute the reservations up to it. One
        # whose reservation would start now is the first pivot the rewind drops (the
        # reservations before it start later): it is dropped without being made
        while self.pending and self.horizon <= now and self.settled_horizon > now:
            if DROP_SHORTCUT and self._room_now(self.pending[0][0]):
                return self._rewind(now, len(self.pivots) - len(self.pending))
            self._settle_next()
        if self.settled_horizon > now:
            return []
        return self._rewind(now)

    def _room_now(self, j: int) -> bool:
        """Whether pivot ``j``'s reservation, computed now (:meth:`_reserve_now`), would
        start now: the first start that computation tries, now's segment, fits. (Making
        it and dropping it again would only leave a breakpoint where the profile does
        not change, which decides nothing: windows take the same minima, and a start
        there is never the first that fits, since the segment before it fits too.)"""
        if self.times is None:
            self._build()
        st = self.state
        w, d, q = st.procs[j], st.estimate_s[j], self.queue_of[j]
        borrow = self.borrow
        # _reserve_now's search begins at now only if the built profile has room now
        if self.base_own[q][0] < w and not (borrow and self.base_total[0] >= w):
            return False
        times, cols = self.times, self.free_at
        own_col = cols[q]
        own_ok = own_col[0] >= w
        if not own_ok:
            if not borrow:
                return False
            total = 0
            for col in cols:
                if col[0] > 0:
                    total += col[0]
            if total < w:
                return False
        stop = bisect_left(times, times[0] + d, 1)
        if own_ok and min(own_col[:stop]) >= w:
            return True
        return borrow and self._allocation(q, w, [min(col[:stop]) for col in cols]) is not None

    def _rewind(self, now: float, first: int | None = None) -> list[int]:
        """Drop the first pivot whose reservation starts by ``now`` (or pivot ``first``,
        a pending one whose would) and every pivot after it, with their reservations
        (pending ones all come after it); return them."""
        at = {r.job: r.shadow_s for r in self.reservations}
        pivots = self.pivots
        if first is None:
            first = next(i for i, j in enumerate(pivots) if at.get(j, INF) <= now)
        dropped = pivots[first:]
        gone = set(dropped)
        est = self.state.estimate_s
        kept = []
        for r in self.reservations:
            if r.job in gone:
                s = r.shadow_s
                self._take(s, s + est[r.job], tuple([-n for n in r.procs]))
            else:
                kept.append(r)
        self.reservations = kept
        self.pivots = pivots[:first]
        self.pending = []
        self.horizon = self.settled_horizon = min([r.shadow_s for r in kept], default=INF)
        return dropped

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
        if now != self._refused_at:
            self._refused_at = now
            self._refused = {}
        lane = 0 if self.borrow else q
        front = self._refused.get(lane) if REFUSED_SHORTCUT else None
        if front is not None:
            ws, ts = front
            i = bisect_right(ws, w)
            if i and ts[i - 1] < end:
                return False  # a job no wider had no room up to then (see _refuse)
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
                        times = self.times
                        self._refuse(lane, w, times[bisect_left(times, end) - 1])
                        return False
                if not self.pending or end <= self.horizon:
                    break
                self._settle_next()
            if end <= self.horizon:
                mins = self.now_free
        alloc = self._allocation(q, w, mins)
        if alloc is None:
            # (without ``borrow``, also with ``mins`` = ``now_free``: then no later job
            # of the queue at least as wide can start either, whatever its window)
            times = self.times
            t = st.now_s if mins is self.now_free else times[bisect_left(times, end) - 1]
            self._refuse(lane, w, t)
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

    def _refuse(self, lane: int, w: int, t: float) -> None:
        """Note that a job of width ``w`` found no room now over the profile's segments
        up to the one starting at ``t`` (its window's last), so that :meth:`try_start`
        refuses at once any later job of this instant at least as wide whose window
        reaches past ``t`` (with ``borrow`` whatever its queue, ``lane`` 0; without, of
        the same queue, ``lane`` = the queue).

        The same decision: past the ``free`` test, a job fits iff its window [now, end)
        has room for it over the profile with every reservation made (pending ones
        settled): with ``borrow``, iff the positive sum of the partitions' minimum free
        counts over the window is >= w (:meth:`_allocation` fails exactly when that sum
        is short, whatever the queue); without, iff its own partition's minimum is >= w.
        Settling lazily decides the same (see the loop in :meth:`try_start`). A window
        that ends after ``t`` covers every segment up to ``t`` (later breakpoints only
        split them), so its minima are no larger; a wider job needs more; and within
        one instant the profile only goes down (starts, reservations and settling take;
        only :meth:`advance`, at a later instant, gives back). So the refusal stands.
        Settling that the skipped call would have done is done by a later call that
        needs it, with the same result, as for any call that decides before settling
        everything.

        Kept per lane as a Pareto front: widths ascending, times strictly descending; a
        job is refused when the widest noted width <= w has its time < its end."""
        front = self._refused.get(lane)
        if front is None:
            self._refused[lane] = ([w], [t])
            return
        ws, ts = front
        # (w, t) is not dominated (try_start checked, and t < end): drop the points it
        # dominates, those with width >= w and time >= t, a run starting where w goes
        i = k = bisect_left(ws, w)
        n = len(ws)
        while k < n and ts[k] >= t:
            k += 1
        ws[i:k] = [w]
        ts[i:k] = [t]

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
