"""Multiple-queue backfilling (Lawson & Smirni), as ../shared/MQBF.md specifies it.

Jobs go to one of K queues by runtime estimate; each queue owns a partition of the
active processors. A pass is the shared backfilling core (:mod:`.backfill`) over
:class:`PartitionProfiles`: per partition, the processors free over future time, minus
what running jobs hold from it until their expected ends and what the pivots reserve.
A job takes processors from its own partition first and, with ``borrow``, idle ones
from the others (lowest index first), never where a reservation needs them.

Each running job's allocation, the processors it holds per partition, is kept in
``state.alloc`` (it returns to the owners when the job ends).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

from olsctl.policies.backfill import INF, Reservation, backfill_pass
from olsctl.policies.order import ORDERS, Order

if TYPE_CHECKING:
    from olsctl.state import SimState


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
    ``free[p][i]`` is partition p's free count on it. Built lazily: until the first
    reservation, every profile is non-decreasing (running jobs only release), so
    "free over [now, now + d)" is simply "free now".
    """

    def __init__(self, state: "SimState", owned: tuple[int, ...], queue_of, borrow: bool) -> None:
        self.state = state
        self.owned = owned
        self.k = len(owned)
        self.queue_of = queue_of
        self.borrow = borrow
        held = [0] * self.k
        for _, j in state.running:
            a = state.alloc.get(j)
            if a is not None:
                for p, n in enumerate(a):
                    held[p] += n
        self.now_free = [owned[p] - held[p] for p in range(self.k)]
        self.times: list[float] | None = None
        self.free_at: list[list[int]] = []
        self.free = sum(f for f in self.now_free if f > 0)

    # -- profile -----------------------------------------------------------------------
    def _build(self) -> None:
        st = self.state
        times = [st.now_s]
        cols = [list(self.now_free)]
        for end, j in st.running:
            a = st.alloc.get(j)
            if a is None:
                continue
            if end > times[-1]:
                times.append(end)
                cols.append(list(cols[-1]))
            last = cols[-1]
            for p, n in enumerate(a):
                last[p] += n
        self.times = times
        self.free_at = [[c[p] for c in cols] for p in range(self.k)]

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

    def _mins(self, i: int, end: float) -> list[int]:
        """Per partition, the minimum free count over segments from ``i`` while they start
        before ``end``."""
        times = self.times
        n = len(times)
        stop = i + 1
        while stop < n and times[stop] < end:
            stop += 1
        return [min(col[i:stop]) for col in self.free_at]

    def _take(self, start: float, end: float, alloc: tuple[int, ...]) -> None:
        a = self._split(start)
        b = self._split(end) if end < INF else len(self.times)
        for p, n in enumerate(alloc):
            if n:
                col = self.free_at[p]
                for i in range(a, b):
                    col[i] -= n

    def _allocation(self, q: int, w: int, mins: list[int]) -> tuple[int, ...] | None:
        """Processors per partition for a job of width ``w`` from queue ``q`` given the
        free minimum of each partition over its run, or None if it does not fit."""
        own = max(mins[q], 0)
        if own >= w:
            alloc = [0] * self.k
            alloc[q] = w
            return tuple(alloc)
        if not self.borrow:
            return None
        if own + sum(max(m, 0) for p, m in enumerate(mins) if p != q) < w:
            return None
        alloc = [0] * self.k
        alloc[q] = own
        need = w - own
        for p in range(self.k):
            if p == q or need == 0:
                continue
            take = min(max(mins[p], 0), need)
            alloc[p] = take
            need -= take
        return tuple(alloc)

    # -- the Resources protocol --------------------------------------------------------
    def try_start(self, j: int) -> bool:
        st = self.state
        w = st.procs[j]
        if w > self.free:
            return False
        q = self.queue_of(j)
        end = st.now_s + st.estimate_s[j]
        mins = self.now_free if self.times is None else self._mins(0, end)
        alloc = self._allocation(q, w, mins)
        if alloc is None:
            return False
        st.start(j, alloc)
        for p, n in enumerate(alloc):
            self.now_free[p] -= n
        if self.times is not None:
            self._take(st.now_s, end, alloc)
        self.free = sum(f for f in self.now_free if f > 0)
        return True

    def reserve(self, j: int) -> Reservation | None:
        if self.times is None:
            self._build()
        st = self.state
        w, d, q = st.procs[j], st.estimate_s[j], self.queue_of(j)
        times = self.times
        for i, s in enumerate(times):
            mins = self._mins(i, s + d)
            own = mins[q]
            if own >= w:
                alloc = [0] * self.k
                alloc[q] = w
                return self._reserve_at(j, s, d, tuple(alloc))
            if self.borrow:
                alloc = self._allocation(q, w, mins)
                if alloc is not None:
                    return self._reserve_at(j, s, d, alloc)
        return None

    def _reserve_at(self, j: int, s: float, d: float, alloc: tuple[int, ...]) -> Reservation:
        self._take(s, s + d, alloc)
        return Reservation(j, s, alloc)


@dataclass(frozen=True)
class MultiQueueBackfill:
    """MQBF: ``queues`` queues split at ``boundaries_s`` (runtime estimate, s); partition
    shares in proportion to ``shares`` (default even); ``borrow`` idle processors."""

    queues: int = 4
    boundaries_s: tuple = (100.0, 1000.0, 10000.0)
    order: str = "fcfs"
    shares: tuple | None = None
    borrow: bool = True
    name: str = field(default="mqbf", init=False)
    _order: Order = field(init=False, repr=False, compare=False)
    _weights: tuple = field(init=False, repr=False, compare=False)
    _owned: dict = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        if self.queues < 1:
            raise ValueError(f"queues: must be >= 1 (got {self.queues})")
        object.__setattr__(self, "boundaries_s", tuple(float(b) for b in self.boundaries_s))
        if self.shares is not None:
            object.__setattr__(self, "shares", tuple(self.shares))
        if len(self.boundaries_s) != self.queues - 1:
            raise ValueError(f"boundaries_s: needs {self.queues - 1} values for "
                             f"{self.queues} queues (got {len(self.boundaries_s)})")
        if any(b >= c for b, c in zip(self.boundaries_s, self.boundaries_s[1:])):
            raise ValueError(f"boundaries_s: must increase (got {list(self.boundaries_s)})")
        if self.shares is not None:
            if len(self.shares) != self.queues:
                raise ValueError(f"shares: needs {self.queues} values (got {len(self.shares)})")
            if any(s < 0 for s in self.shares) or sum(self.shares) <= 0:
                raise ValueError(f"shares: must be >= 0 with a positive sum (got {list(self.shares)})")
        weights = (tuple(Fraction(str(s)) for s in self.shares) if self.shares is not None
                   else (Fraction(1),) * self.queues)
        object.__setattr__(self, "_order", ORDERS[self.order])
        object.__setattr__(self, "_weights", weights)

    def queue_index(self, estimate_s: float) -> int:
        """The smallest k with estimate < boundaries_s[k], else the last queue (0-based)."""
        return bisect_right(self.boundaries_s, estimate_s)

    def owned(self, active_procs: int) -> tuple[int, ...]:
        """Processors each partition owns when ``active_procs`` are active."""
        got = self._owned.get(active_procs)
        if got is None:
            got = self._owned[active_procs] = largest_remainder(self._weights, active_procs)
        return got

    def schedule(self, state: "SimState") -> None:
        if not state.queue:
            return
        est = state.estimate_s
        bounds = self.boundaries_s

        def queue_of(j: int) -> int:
            return bisect_right(bounds, est[j])

        resources = PartitionProfiles(state, self.owned(state.active_procs), queue_of,
                                      self.borrow)
        backfill_pass(state, self._order(state, state.queue), resources, queue_of)

    def settings(self) -> dict:
        return {"name": self.name, "queues": self.queues,
                "boundaries_s": list(self.boundaries_s), "order": self.order,
                "shares": None if self.shares is None else list(self.shares),
                "borrow": self.borrow}
