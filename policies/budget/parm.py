"""A PARM-style selector (Sarood et al.): choose (nodes, per-node cap) for waiting jobs
to maximise the sum of their power-aware speedups under the jobs' power budget.

A job's power-aware speedup in a configuration is its runtime in its slowest
configuration (fewest nodes, lowest cap) over its runtime in that one, so any start is
worth at least 1; it is weighted by ``(1 + wait / max(estimate, 10 s)) ^ fairness`` so
that jobs waiting long weigh more. A pass takes the queue (FCFS) in windows of
``window`` jobs; each window is a multiple-choice knapsack over the nodes and the power
free: each job at most one configuration, maximise the sum of weighted speedups. It is
solved exactly (dynamic programming over Pareto-optimal partial choices) when at most
``exact_max`` of its jobs could start; beyond that greedily (the move with the best
gain per share of the free resources it takes, until none fits), and the run counts
the windows solved each way (``summary.json``: ``budget.greedy_windows``).

Jobs are moldable, not malleable: a configuration is kept until the job ends. So that
the first job in the queue cannot starve, once it is left waiting by the first window it
reserves its least-power configuration at the earliest time the nodes and power for it
are expected free (EASY's shadow time), and the later windows take only configurations
that end by then.

The nodes and power free, the starts and that reservation are kept by
:class:`~olsctl.policies.budget.overprovision.BudgetResources`, the resources RMAP's EASY
passes use. The windows are not the shared core's scan
(:func:`~olsctl.policies.core.backfill.backfill_pass`): a knapsack picks jobs jointly, not
each in turn, the first window respects no reservation, and the later ones may not use
the nodes and power left over at the shadow time.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

from olsctl.metrics import job_bsld
from olsctl.perfmodel import BudgetRun, Config
from olsctl.policies.budget.overprovision import INF, BudgetPolicy, BudgetResources

if TYPE_CHECKING:
    from olsctl.state import SimState

#: a job's choices in a window: (value, configuration), Pareto-optimal
Choices = list[tuple[float, Config]]


def pareto_configs(configs: Sequence[Config]) -> list[Config]:
    """The configurations no other one matches or beats in nodes, power and speed at
    once (the others are never worth choosing: whatever one of them fits, its better
    fits too and ends sooner), in increasing power."""
    out: list[Config] = []
    stair_n: list[int] = []    # kept (nodes, factor): factor falls as nodes rise
    stair_f: list[float] = []
    for c in sorted(configs, key=lambda c: (c.power_mw, c.nodes, c.factor)):
        i = bisect_right(stair_n, c.nodes)
        if i and stair_f[i - 1] <= c.factor:
            continue
        out.append(c)
        k = i
        while k < len(stair_n) and stair_f[k] >= c.factor:
            k += 1
        stair_n[i:k] = [c.nodes]
        stair_f[i:k] = [c.factor]
    return out


def solve_exact(jobs: Sequence[Choices], free_n: int, free_mw: int) -> list[int | None]:
    """The best pick per job (index into its choices, or None) maximising the summed
    value with at most ``free_n`` nodes and ``free_mw`` in all. Exact: a dynamic program
    over jobs whose states, (nodes, power, value, picks), keep only the Pareto-optimal
    ones (no other state has no more nodes, no more power and at least the value).
    Ties go to less power, then fewer nodes, then earlier states."""
    tops: list[int | None] = []
    top_n = top_mw = 0
    for choices in jobs:  # each job's most valuable choice (ties: less power, fewer nodes)
        top, key = None, None
        for k, (v, c) in enumerate(choices):
            kk = (v, -c.power_mw, -c.nodes)
            if key is None or kk > key:
                top, key = k, kk
        tops.append(top)
        if top is not None:
            top_n += choices[top][1].nodes
            top_mw += choices[top][1].power_mw
    if top_n <= free_n and top_mw <= free_mw:
        return tops  # they all fit at once
    # states that cannot reach a feasible solution's value are dropped on the way
    # (the greedy solution's, less a rounding margin): they cannot be the best
    greedy = solve_greedy(jobs, free_n, free_mw)
    floor = sum(jobs[i][k][0] for i, k in enumerate(greedy) if k is not None)
    floor -= 1e-9 * (abs(floor) + 1.0)
    rest = [0.0] * (len(jobs) + 1)
    for i in range(len(jobs) - 1, -1, -1):
        rest[i] = rest[i + 1] + max((v for v, _ in jobs[i]), default=0.0)
    states: list[tuple[int, int, float, tuple]] = [(0, 0, 0.0, ())]
    for i, choices in enumerate(jobs):
        after = rest[i + 1]
        grown = [(n, m, v, picks + (None,)) for n, m, v, picks in states
                 if v + after >= floor]
        for n, m, v, picks in states:
            for k, (value, c) in enumerate(choices):
                n1, m1 = n + c.nodes, m + c.power_mw
                if n1 <= free_n and m1 <= free_mw and v + value + after >= floor:
                    grown.append((n1, m1, v + value, picks + (k,)))
        states = _pareto_states(grown)
    best = max(states, key=lambda s: (s[2], -s[1], -s[0]))
    return list(best[3])


def _pareto_states(states: list) -> list:
    """Keep the states no other state dominates (stable among equals)."""
    states = sorted(states, key=lambda s: (s[1], s[0], -s[2]))
    stair_n: list[int] = []   # kept states' (nodes, value) staircase: value rises with nodes
    stair_v: list[float] = []
    out = []
    for s in states:
        n, v = s[0], s[2]
        i = bisect_right(stair_n, n)
        if i and stair_v[i - 1] >= v:
            continue  # one with no more power, no more nodes and no less value was kept
        out.append(s)
        j = i
        while j < len(stair_n) and stair_v[j] <= v:
            j += 1
        stair_n[i:j] = [n]
        stair_v[i:j] = [v]
    return out


def solve_greedy(jobs: Sequence[Choices], free_n: int, free_mw: int) -> list[int | None]:
    """A pick per job by repeated best moves: among the changes of one job's pick to a
    more valuable one that still fits, take the one with the most value gained per share
    of the free nodes and power it adds (a move that adds neither comes first); stop
    when none is left. Ties go to the larger gain, then the earlier job and choice."""
    pick: list[int | None] = [None] * len(jobs)
    used_n = used_mw = 0
    scale_n, scale_mw = 1.0 / max(free_n, 1), 1.0 / max(free_mw, 1)
    while True:
        best, best_key = None, (-1.0, 0.0)
        room_n, room_mw = free_n - used_n, free_mw - used_mw
        for i, choices in enumerate(jobs):
            cur = pick[i]
            if cur is None:
                v0, n0, m0 = 0.0, 0, 0
            else:
                v0, c0 = choices[cur]
                n0, m0 = c0.nodes, c0.power_mw
            for k, (v, c) in enumerate(choices):
                gain = v - v0
                if gain <= 0:
                    continue
                dn, dm = c.nodes - n0, c.power_mw - m0
                if dn > room_n or dm > room_mw:
                    continue
                cost = (dn * scale_n if dn > 0 else 0.0) + (dm * scale_mw if dm > 0 else 0.0)
                key = (gain / cost if cost > 0 else INF, gain)
                if key > best_key:
                    best, best_key = (i, k, dn, dm), key
        if best is None:
            return pick
        i, k, dn, dm = best
        pick[i] = k
        used_n += dn
        used_mw += dm


@dataclass(frozen=True)
class Parm(BudgetPolicy):
    """Windows of the queue solved as knapsacks of power-aware speedups (module doc)."""

    window: int = 10
    exact_max: int = 8
    fairness: float = 1.0
    name: str = field(default="parm", init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.window < 1:
            raise ValueError(f"window: must be >= 1 (got {self.window})")
        if self.exact_max < 0:
            raise ValueError(f"exact_max: must be >= 0 (got {self.exact_max})")
        if not self.fairness >= 0:
            raise ValueError(f"fairness: must be >= 0 (got {self.fairness})")

    def choices(self, state: "SimState", run: BudgetRun, j: int, free_n: int,
                free_mw: int, deadline_s: float) -> Choices:
        """Job ``j``'s Pareto-optimal (weighted speedup, configuration) pairs that fit
        the free nodes and power and end by ``deadline_s``."""
        key = (self._key, state.active_procs)
        mine = run.cache.get(j)
        got = None if mine is None else mine.get(key)
        if got is None:
            configs = [c for c in self.configs(run, j) if c.nodes <= state.active_procs]
            slowest = max(c.factor for c in configs) if configs else 1.0
            got = (slowest, pareto_configs(configs))
            run.cache.setdefault(j, {})[key] = got
        slowest, configs = got
        now, est = state.now_s, state.estimate_s[j]
        wait = now - state.submit_s[j]
        weight = job_bsld(wait, est) ** self.fairness if self.fairness else 1.0
        return [(weight * slowest / c.factor, c) for c in configs
                if c.nodes <= free_n and c.power_mw <= free_mw
                and now + est * c.factor <= deadline_s]

    def schedule(self, state: "SimState") -> None:
        run = self.run_of(state)
        queue = state.queue
        if not queue or state.busy_procs >= state.active_procs:
            return
        active = state.active_procs

        def reserves(j: int) -> list[Config]:  # the head's reservation: least power
            c = self.smallest(run, j)
            return [c] if c.nodes <= active else []

        res = BudgetResources(state, run, self.budget_mw(state), reserves)
        head, reserved = queue[0], False
        started: set[int] = set()
        pos = 0
        while pos < len(queue) and res.free > 0:
            window = queue[pos:pos + self.window]
            pos += len(window)
            free_n, free_mw = res.free_n, res.free_mw
            jobs, cands = [], []
            for j in window:
                ch = self.choices(state, run, j, free_n, free_mw, res.shadow_s)
                if ch:
                    jobs.append(j)
                    cands.append(ch)
            if cands:
                if len(cands) <= self.exact_max:
                    picks = solve_exact(cands, free_n, free_mw)
                    run.exact_windows += 1
                else:
                    picks = solve_greedy(cands, free_n, free_mw)
                    run.greedy_windows += 1
                    run.largest_greedy_window = max(run.largest_greedy_window, len(cands))
                for j, ch, k in zip(jobs, cands, picks):
                    if k is not None:
                        res.start(j, ch[k][1])
                        started.add(j)
            if not reserved:
                reserved = True
                if head not in started:
                    res.reserve(head)

    def run_report(self, state: "SimState", records) -> dict:
        run = self.run_of(state)
        return {**super().run_report(state, records), "exact_windows": run.exact_windows,
                "greedy_windows": run.greedy_windows,
                "largest_greedy_window": run.largest_greedy_window}

    def settings(self) -> dict:
        return {**super().settings(), "window": self.window, "exact_max": self.exact_max,
                "fairness": self.fairness}
