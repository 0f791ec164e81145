"""Speed benchmark: the main simulator and the what-if engine against a plain heapq EASY
loop, run in the same process on the same jobs (simulation only; parsing timed apart),
and a whole ``olsctl run`` (a process of its own: start, parse, simulate, write) against
the plain loop reading the file itself.

The reference loop below is deliberately independent of olsctl's state and policy code:
one heap of arrivals and completions, a list queue, and the EASY rules written inline.
It also serves as a cross-check: the benchmark verifies all three give the same starts.
"""

from __future__ import annotations

import gc
import gzip
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from heapq import heapify, heappop, heappush
from pathlib import Path
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


def plain_load(path: Path, estimates: str = "exact") -> tuple[list, list, list, list, int]:
    """The loading rules read plainly, line by line, apart from olsctl's reader: submit
    times, runtimes, processors and estimates of the kept jobs in (submit, id) order,
    and the machine size (header MaxProcs, else MaxNodes)."""
    with open(path, "rb") as probe:
        packed = probe.read(2) == b"\x1f\x8b"
    size = {}
    rows = []
    with (gzip.open if packed else open)(path, "rt", encoding="utf-8-sig",
                                         errors="replace") as fh:
        for line in fh:
            text = line.strip()
            if not text:
                continue
            if text[0] == ";":
                key = re.match(r";\s*(MaxProcs|MaxNodes):\D*(\d+)", text)
                if key:
                    size.setdefault(key.group(1), int(key.group(2)))
                continue
            f = text.split()
            runtime, procs = float(f[3]), float(f[7])
            procs = procs if procs > 0 else float(f[4])
            if runtime > 0 and procs > 0:
                req = float(f[8])
                est = runtime if estimates == "exact" or req <= 0 else max(req, runtime)
                rows.append((float(f[1]), float(f[0]), runtime, int(procs), est))
    machine = size.get("MaxProcs") or size.get("MaxNodes") or 0
    rows = sorted(r for r in rows if r[3] <= machine)
    return ([r[0] for r in rows], [r[2] for r in rows], [r[3] for r in rows],
            [r[4] for r in rows], machine)


def plain_run(path: Path, estimates: str = "exact") -> list[float]:
    """The plain reference of a whole run: read the file (:func:`plain_load`) and
    schedule it (:func:`reference_easy`); the start times."""
    return reference_easy(*plain_load(path, estimates))


#: run by a small Python of its own, which starts ``olsctl run`` and reports its wall time,
#: peak memory and exit code: a child's peak memory (``ru_maxrss``) counts what it shared
#: with its parent at the fork, so the parent must be small, not this process
_TIMER = """import os, subprocess, sys, time
t0 = time.perf_counter()
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
print(time.perf_counter() - t0, usage.ru_maxrss, os.waitstatus_to_exitcode(status))
"""


def whole_run(path: Path, estimates: str = "exact") -> tuple[float, float]:
    """``olsctl run --trace PATH --quiet`` in a process of its own (outputs to a temporary
    directory): its wall time (s) and its peak resident memory (MB, the kernel's
    ``ru_maxrss`` of that process)."""
    code = "from olsctl.cli import entry_point; entry_point()"
    with tempfile.TemporaryDirectory(prefix="olsctl-bench-") as tmp:
        cmd = [sys.executable, "-S", "-c", _TIMER, sys.executable, "-c", code, "run",
               "--trace", str(path), "--estimates", estimates, "--out",
               str(Path(tmp) / "out"), "--quiet"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        figures = done.stdout.split()
        if done.returncode != 0 or len(figures) != 3 or figures[2] != "0":
            raise RuntimeError(f"olsctl run --trace {path} failed: {done.stderr.strip()}")
    return float(figures[0]), int(figures[1]) / 1024.0  # (ru_maxrss: kB on Linux)


def bench_whole(path: Path, estimates: str = "exact",
                repeat: int = 3) -> tuple[float, float, float, list[float]]:
    """A whole ``olsctl run`` of ``path`` (:func:`whole_run`) and the plain reference
    reading the file itself (:func:`plain_run`, in this process), ``repeat`` times in
    turns: the best time of each (s), the run's largest peak memory (MB) and the plain
    reference's start times."""
    best_run = best_plain = float("inf")
    peak_mb = 0.0
    starts: list[float] = []
    for _ in range(repeat):
        del starts
        gc.collect()
        t0 = time.perf_counter()
        starts = plain_run(path, estimates)
        best_plain = min(best_plain, time.perf_counter() - t0)
        gc.collect()
        wall, rss = whole_run(path, estimates)
        best_run, peak_mb = min(best_run, wall), max(peak_mb, rss)
    return best_run, best_plain, peak_mb, starts


#: the large log of ``olsctl bench --big``: jobs, and copies of SDSC-BLUE side by side
BIG_JOBS, BIG_COPIES = 300_000, 81


def make_big_log(folder: Path, n_jobs: int = BIG_JOBS, copies: int = BIG_COPIES,
                 source: str = "SDSC-BLUE") -> Path:
    """Write ``big.swf`` into ``folder``: a log of ``n_jobs`` jobs on a machine ``copies``
    times as wide as ``source``'s (SDSC-BLUE: 81 x 1,152 = 93,312 processors), made of
    ``copies`` replicas of ``source``'s first jobs side by side: each replica submits
    the same jobs at the same times, as if ``copies`` such machines shared one queue.
    Job ``k`` of replica ``c`` gets id ``k x copies + c + 1``. Deterministic: the same
    file every time."""
    from olsctl.output import table_chunks
    from olsctl.workload import load_workload, resolve_trace

    w = load_workload(resolve_trace(source))
    per_copy = -(-n_jobs // copies)
    base = w.head(per_copy)
    k = np.repeat(np.arange(len(base)), copies)[:n_jobs]  # jobs in (submit, id) order
    c = np.tile(np.arange(copies), len(base))[:n_jobs]
    procs = base.procs[k]
    unknown = np.full(k.size, -1)
    fields = [k * copies + c + 1, base.submit_s[k], unknown, base.runtime_s[k], procs,
              unknown, unknown, procs, base.requested_time_s[k], unknown, np.ones(k.size),
              base.user_id[k], base.group_id[k], base.executable[k], unknown, unknown,
              unknown, unknown]
    header = (f"; Version: 2.2\n; Computer: {copies} x {source} (olsctl bench --big)\n"
              f"; MaxJobs: {k.size}\n; MaxRecords: {k.size}\n"
              f"; MaxProcs: {copies * w.machine_procs}\n")
    for key in ("UnixStartTime", "TimeZone"):
        if w.header.get(key) is not None:
            header += f"; {key}: {w.header.get(key)}\n"
    path = Path(folder) / "big.swf"
    with open(path, "w", encoding="ascii", newline="\n") as fh:
        fh.write(header)
        fh.writelines(table_chunks(fields, " "))
    return path


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
    from olsctl.power.accounting import MachinePower
    from olsctl.power.cap import CapSchedule
    from olsctl.power.profiles import synthetic_profiles
    from olsctl.power.setup import power_setup

    m = MachinePower()
    policy = make_policy({"name": "knapsack", "window": 20, "predictor": "history"})
    sim = MainSimulator(w, policy, est)
    sim.state.power, sim.state.limit = power_setup(
        w, synthetic_profiles(w, m.idle_w, m.peak_w), m,
        CapSchedule.constant(0.625 * w.machine_procs * m.peak_w), job_keys=False,
        throttle=throttle)
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


#: configs/easy-ols.yaml's controller as shipped (cheapest-first, SLA feedback, one worker)
EASY_OLS_CONTROLLER = {**LAWSON_CONTROLLER, "search": "cheapest-first", "n_jobs": 1,
                       "sla": {**LAWSON_CONTROLLER["sla"], "feedback": True}}


@dataclass
class TickCostRow:
    """What EASY/OLS's controller cost on one log: its ticks, the what-ifs it ran (each
    resumption of one cut short counts), the ticks that missed the SLA (or the limit SLA
    feedback set) and the controller's wall time (s)."""

    log: str
    ticks: int
    whatifs: int
    misses: int
    controller_s: float

    @property
    def per_tick_ms(self) -> float:
        """Controller wall milliseconds per tick."""
        return 1000.0 * self.controller_s / self.ticks if self.ticks else 0.0

    @property
    def whatifs_per_tick(self) -> float:
        return self.whatifs / self.ticks if self.ticks else 0.0


def tick_cost(trace: str, controller: dict | None = None, estimates: str = "exact",
              label: str | None = None) -> TickCostRow:
    """Run EASY under ``controller`` (default :data:`EASY_OLS_CONTROLLER`) on ``trace``
    (outputs to a temporary directory) and say what the controller cost per tick."""
    import tempfile

    from olsctl.config import build_config
    from olsctl.runner import execute

    with tempfile.TemporaryDirectory(prefix="olsctl-bench-") as tmp:
        config = build_config({"trace": trace, "estimates": estimates, "policy": {"name": "easy"},
                               "out": tmp, "controller": controller or EASY_OLS_CONTROLLER},
                              source="bench")
        gc.collect()
        result = execute(config)
    c = result.summary["controller"]
    return TickCostRow(label or result.summary["trace"], c["ticks"], c["whatifs"],
                       c["sla_misses"], result.controller_wall_s)


def bench_congested(quiet: str = "KTH-SP2", spec: Any = None, seed: int = 0,
                    repeat: int = 1, controller: dict | None = None,
                    estimates: str = "exact") -> tuple[TickCostRow, TickCostRow]:
    """EASY/OLS's cost per tick on a congested synthetic log (:func:`olsctl.synth.
    congested_swf` with ``spec`` and ``seed``: more work offered than the machine can do,
    a queue of hundreds of jobs for weeks, no candidate meeting the SLA at most ticks)
    and on the ``quiet`` log, ``repeat`` times in turns (congested, quiet, congested,
    ...), so that a slow spell of the machine falls on both; for each, the run whose
    controller took least. Returns (congested, quiet)."""
    import tempfile
    from pathlib import Path

    from olsctl.synth import CongestedSpec, congested_swf

    spec = spec or CongestedSpec()
    best: dict[str, TickCostRow] = {}
    with tempfile.TemporaryDirectory(prefix="olsctl-bench-") as tmp:
        path = congested_swf(Path(tmp) / "congested.swf", spec, seed)
        label = f"congested (seed {seed}, {spec.jobs} jobs, load {spec.load:g})"
        for _ in range(repeat):
            for key, trace, name in (("congested", str(path), label), ("quiet", quiet, None)):
                row = tick_cost(trace, controller, estimates, name)
                if key not in best or row.controller_s < best[key].controller_s:
                    best[key] = row
    return best["congested"], best["quiet"]
