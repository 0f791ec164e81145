"""Speed benchmark: the main simulator and the what-if engine against a plain heapq EASY
loop, run in the same process on the same jobs (simulation only; parsing timed apart).

The reference loop below is deliberately independent of olsctl's state and policy code:
one heap of arrivals and completions, a list queue, and the EASY rules written inline.
It also serves as a cross-check: the benchmark verifies all three give the same starts.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from heapq import heapify, heappop, heappush
from typing import Any

import numpy as np

from olsctl.policies import make_policy
from olsctl.sim import MainSimulator
from olsctl.whatif import JobTable, empty_snapshot, run_whatif
from olsctl.workload import Workload


def reference_easy(submit: list[float], runtime: list[float], procs: list[int],
                   estimate: list[float], machine: int) -> list[float]:
    """Start times of an FCFS EASY schedule, by a straightforward event loop."""
    n = len(submit)
    events = [(submit[i], 1, i) for i in range(n)]  # kind 0 = completion, 1 = arrival
    heapify(events)
    start = [float("nan")] * n
    queue: list[int] = []
    expected_end: dict[int, float] = {}
    free = machine
    while events:
        t = events[0][0]
        while events and events[0][0] == t:
            _, kind, i = heappop(events)
            if kind == 0:
                free += procs[i]
                del expected_end[i]
            else:
                queue.append(i)
        while queue and procs[queue[0]] <= free:
            i = queue.pop(0)
            start[i] = t
            free -= procs[i]
            expected_end[i] = t + estimate[i]
            heappush(events, (t + runtime[i], 0, i))
        if not queue or free <= 0:
            continue
        need = procs[queue[0]]
        avail, shadow = free, float("inf")
        for end, i in sorted((e, i) for i, e in expected_end.items()):
            if avail >= need and end > shadow:
                break
            avail += procs[i]
            shadow = end
        if avail < need:
            shadow = float("inf")
        extra = avail - need
        waiting = []
        for i in queue[1:]:
            p = procs[i]
            if p <= free and (t + estimate[i] <= shadow or p <= extra):
                if t + estimate[i] > shadow:
                    extra -= p
                start[i] = t
                free -= p
                expected_end[i] = t + estimate[i]
                heappush(events, (t + runtime[i], 0, i))
            else:
                waiting.append(i)
        queue = queue[:1] + waiting
    return start


@dataclass
class BenchRow:
    trace: str
    jobs: int
    parse_s: float
    reference_s: float
    main_s: float
    whatif_s: float
    same_schedule: bool
    mqbf_s: float | None = None
    knapsack_s: float | None = None
    #: the same knapsack run with the hardware power limit (power.limit: throttle)
    throttle_s: float | None = None

    @property
    def main_ratio(self) -> float:
        return self.main_s / self.reference_s

    @property
    def whatif_ratio(self) -> float:
        return self.whatif_s / self.reference_s

    @property
    def knapsack_ratio(self) -> float | None:
        """Window knapsack (w = 20) main-simulator time over EASY's."""
        return None if self.knapsack_s is None else self.knapsack_s / self.main_s

    @property
    def throttle_ratio(self) -> float | None:
        """The knapsack run with the power limit over the same run without it."""
        return None if self.throttle_s is None else self.throttle_s / self.knapsack_s

    @property
    def mqbf_ratio(self) -> float | None:
        """MQBF(4) main-simulator time over EASY's."""
        return None if self.mqbf_s is None else self.mqbf_s / self.main_s


def _best_of(repeat: int, fn):
    best, result = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def _interleaved(repeat: int, reference, others) -> tuple[float, Any, list[float]]:
    """Best of ``repeat`` for ``reference`` and for each of ``others``, run in turns
    (reference, others..., reference, others...); returns the reference's best time
    and last result, and the others' best times."""
    best = [float("inf")] * (1 + len(others))
    result = None
    for _ in range(repeat):
        for k, fn in enumerate([reference, *others]):
            gc.collect()
            t0 = time.perf_counter()
            got = fn()
            best[k] = min(best[k], time.perf_counter() - t0)
            if k == 0:
                result = got
            del got
    return best[0], result, best[1:]


def bench_workload(w: Workload, parse_s: float, estimates: str = "exact",
                   repeat: int = 3, mqbf: bool = False, knapsack: bool = False) -> BenchRow:
    """Time the three engines on ``w`` (best of ``repeat``) and compare their schedules;
    with ``mqbf`` also the main simulator under MQBF with 4 queues, with ``knapsack``
    under the window knapsack (w = 20, history predictor, synthetic power, cap 62.5% of
    peak; power set-up not timed), without and with the power limit (throttle)."""
    est = w.estimate_s(estimates)
    cols = (w.submit_s.tolist(), w.runtime_s.tolist(), w.procs.tolist(), est.tolist())
    policy = make_policy({"name": "easy", "order": "fcfs"})
    table = JobTable(w.job_id, w.submit_s, w.procs, est, w.runtime_s)
    snap = empty_snapshot(float(w.submit_s[0]), w.machine_procs)

    ref_s, ref = _best_of(repeat, lambda: reference_easy(*cols, w.machine_procs))
    # EASY's main simulator is the reference of the MQBF and knapsack ratios: their runs
    # take turns with its runs, so a machine that slows down for a while slows all alike
    others = []
    if mqbf:
        mq = make_policy({"name": "mqbf", "queues": 4})
        others.append(lambda: MainSimulator(w, mq, est).run())
    if knapsack:
        others.append(lambda: _knapsack_sim(w, est).run())
        others.append(lambda: _knapsack_sim(w, est, throttle=True).run())
    main_s, records, other_s = _interleaved(
        repeat, lambda: MainSimulator(w, policy, est).run(), others)
    wi_s, wi = _best_of(repeat, lambda: run_whatif(snap, policy, arrivals=table))

    by_id = {r.job_id: r.start_s for r in records.jobs}
    main_starts = np.asarray([by_id[j] for j in w.job_id.tolist()])
    same = bool(np.array_equal(main_starts, np.asarray(ref))
                and np.array_equal(wi.start_s, np.asarray(ref)))
    mqbf_s = other_s.pop(0) if mqbf else None
    knapsack_s = other_s.pop(0) if knapsack else None
    throttle_s = other_s.pop(0) if knapsack else None
    return BenchRow(w.name, len(w), parse_s, ref_s, main_s, wi_s, same, mqbf_s, knapsack_s,
                    throttle_s)


def _knapsack_sim(w: Workload, est, throttle: bool = False) -> MainSimulator:
    from olsctl.power.accounting import MachinePower
    from olsctl.power.cap import CapSchedule
    from olsctl.power.profiles import project_of, synthetic_profiles
    from olsctl.power.runtime import power_state

    m = MachinePower()
    policy = make_policy({"name": "knapsack", "window": 20, "predictor": "history"})
    sim = MainSimulator(w, policy, est)
    sim.state.power = power_state(synthetic_profiles(w, m.idle_w, m.peak_w),
                                  project_of(w).tolist(), m.idle_w, m.sleep_w, m.peak_w,
                                  CapSchedule.constant(0.625 * w.machine_procs * m.peak_w))
    if throttle:
        from olsctl.perfmodel import PerfSettings, draw_params
        from olsctl.power.limit import Limit, LimitSettings

        perf = PerfSettings()
        sim.state.power.kappa = draw_params(w.job_id, project_of(w), w.procs, perf)[0]
        sim.state.limit = Limit(LimitSettings(static_w=perf.static * m.peak_w), logging=True)
    return sim


@dataclass
class OlsRow:
    """One EASY/OLS run (Lawson & Smirni's setting) of a log at a given ``n_jobs``."""

    trace: str
    n_jobs: int
    ticks: int
    whatifs: int
    wall_s: float
    controller_s: float

    @property
    def controller_share(self) -> float:
        return self.controller_s / self.wall_s if self.wall_s > 0 else 0.0


#: Lawson & Smirni's controller (configs/easy-ols.yaml's, open loop)
LAWSON_CONTROLLER = {"interval_s": 3600,
                     "candidates": {"active_procs": {"fraction": [0.25, 0.375, 0.5, 0.625,
                                                                  0.75, 0.875, 1.0]}},
                     "sla": {"metric": "mean_bsld", "max": 200}, "cost": "active_procs"}


def bench_ols(trace: str, n_jobs: int, search: str = "grid", estimates: str = "exact",
              feedback: bool = False) -> OlsRow:
    """Run EASY/OLS on ``trace`` (outputs to a temporary directory), open loop or with SLA
    feedback (its defaults); wall time of the whole run (parsing included) and the
    controller's part of it."""
    import tempfile

    from olsctl.config import build_config
    from olsctl.runner import execute

    with tempfile.TemporaryDirectory(prefix="olsctl-bench-") as tmp:
        config = build_config({"trace": trace, "estimates": estimates, "policy": {"name": "easy"},
                               "out": tmp, "controller": {
                                   **LAWSON_CONTROLLER, "n_jobs": n_jobs, "search": search,
                                   "sla": {**LAWSON_CONTROLLER["sla"], "feedback": feedback}}},
                              source="bench")
        gc.collect()
        t0 = time.perf_counter()
        result = execute(config)
        wall = time.perf_counter() - t0
    c = result.summary["controller"]
    return OlsRow(result.summary["trace"], n_jobs, c["ticks"], c["whatifs"], wall,
                  result.controller_wall_s)


def bench_ols_turns(trace: str, search: str = "grid", estimates: str = "exact",
                    repeat: int = 1) -> tuple[OlsRow, OlsRow]:
    """:func:`bench_ols` with ``n_jobs`` 1 and 2, ``repeat`` times in turns (1, 2, 1, 2,
    ...), so that a slow spell of the machine falls on both; for each, the run whose
    controller took least."""
    best: dict[int, OlsRow] = {}
    for _ in range(repeat):
        for n_jobs in (1, 2):
            row = bench_ols(trace, n_jobs, search, estimates)
            if n_jobs not in best or row.controller_s < best[n_jobs].controller_s:
                best[n_jobs] = row
    return best[1], best[2]


def bench_feedback_turns(trace: str, search: str = "grid", estimates: str = "exact",
                         repeat: int = 1) -> tuple[OlsRow, OlsRow]:
    """:func:`bench_ols` open loop and with feedback (``n_jobs`` 1), ``repeat`` times in
    turns; for each, the run whose controller took least."""
    best: dict[bool, OlsRow] = {}
    for _ in range(repeat):
        for feedback in (False, True):
            row = bench_ols(trace, 1, search, estimates, feedback)
            if feedback not in best or row.controller_s < best[feedback].controller_s:
                best[feedback] = row
    return best[False], best[True]
