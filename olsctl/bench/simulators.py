"""``olsctl bench``'s in-process figures: the main simulator and the what-if engine
against the plain reference on the same jobs, in turns (simulation only; parsing timed
apart), and the same under MQBF and the window knapsack (with and without the power
limit).
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from olsctl.bench.reference import bench_whole, reference_easy
from olsctl.policies import make_policy
from olsctl.power.accounting import MachinePower
from olsctl.power.cap import CapSchedule
from olsctl.power.profiles import synthetic_profiles
from olsctl.power.setup import power_setup
from olsctl.sim import MainSimulator
from olsctl.whatif import JobTable, empty_snapshot, run_whatif
from olsctl.workload import Workload


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
    #: ``olsctl run`` as a process of its own (start, parse, simulate, write), best time
    whole_s: float | None = None
    #: the plain reference reading the file itself, best time (taken in turns with it)
    plain_whole_s: float | None = None
    #: the peak resident memory of that process (MB)
    peak_mb: float | None = None

    @property
    def whole_ratio(self) -> float | None:
        """A whole ``olsctl run`` over the plain reference reading the file itself."""
        return None if self.whole_s is None else self.whole_s / self.plain_whole_s

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
                   repeat: int = 3, mqbf: bool = False, knapsack: bool = False,
                   path: Path | None = None) -> BenchRow:
    """Time the three engines on ``w`` (best of ``repeat``) and compare their schedules;
    with ``mqbf`` also the main simulator under MQBF with 4 queues, with ``knapsack``
    under the window knapsack (w = 20, history predictor, synthetic power, cap 62.5% of
    peak; power set-up not timed), without and with the power limit (throttle). With
    ``path`` (``w``'s file) also a whole ``olsctl run`` of it against the plain
    reference reading it (:func:`bench_whole`)."""
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
    del records, wi
    whole: tuple = (None, None, None)
    if path is not None:  # the plain reference read the file itself: same starts too
        *whole, plain_starts = bench_whole(path, estimates, repeat)
        same = same and plain_starts == ref
    return BenchRow(w.name, len(w), parse_s, ref_s, main_s, wi_s, same, mqbf_s, knapsack_s,
                    throttle_s, *whole)


def _knapsack_sim(w: Workload, est, throttle: bool = False) -> MainSimulator:
    m = MachinePower()
    policy = make_policy({"name": "knapsack", "window": 20, "order": "fcfs", "force": "now",
                          "predictor": "history"})  # (Wallace's rule, as measured before)
    sim = MainSimulator(w, policy, est)
    sim.state.power, sim.state.limit = power_setup(
        w, synthetic_profiles(w, m.idle_w, m.peak_w), m,
        CapSchedule.constant(0.625 * w.machine_procs * m.peak_w), job_keys=False,
        throttle=throttle)
    return sim


def compile_times() -> tuple[float, float]:
    """Seconds to make the compiled kernels an EASY/OLS run needs (EASY's and SLA
    feedback's) ready in a fresh process (:func:`olsctl.policies.compile_kernels`): with an empty
    numba cache (what the first run after ``pip install`` pays), then again from the cache
    that run filled (what every later run pays)."""
    import os
    import subprocess
    import sys
    import tempfile

    code = ("import olsctl.feedback; from olsctl.policies import compile_kernels; "
            "print(compile_kernels(policies=['easy']))")
    times = []
    with tempfile.TemporaryDirectory(prefix="olsctl-numba-") as tmp:
        env = {**os.environ, "NUMBA_CACHE_DIR": tmp}
        env.pop("NUMBA_DISABLE_JIT", None)
        for _ in range(2):
            done = subprocess.run([sys.executable, "-c", code], capture_output=True,
                                  text=True, env=env)
            if done.returncode != 0:
                raise RuntimeError(f"compiling the kernels failed: {done.stderr.strip()}")
            times.append(float(done.stdout.split()[-1]))
    return times[0], times[1]
