"""The plain reference of ``olsctl bench``: an EASY loop written apart from olsctl's state
and policy code (one heap of arrivals and completions, a list queue, the EASY rules
inline), reading the file itself, and a whole ``olsctl run`` timed as a process of its
own beside it; and the large log of ``olsctl bench --big``.
"""

from __future__ import annotations

import gc
import gzip
import re
import subprocess
import sys
import tempfile
import time
from heapq import heapify, heappop, heappush
from pathlib import Path

import numpy as np

from olsctl.errors import OlsctlError
from olsctl.run_files import table_chunks
from olsctl.workload import load_workload, resolve_trace


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
    return timed_run(["--trace", str(path), "--estimates", estimates])


class RunFailed(OlsctlError, RuntimeError):
    """A benched ``olsctl run`` that failed: its command and the last line it wrote to
    stderr (its own one-line error)."""

    kind = "RunError"


def timed_run(args: list[str]) -> tuple[float, float]:
    """``olsctl run ARGS --out TMP --quiet`` in a process of its own (``TMP`` a temporary
    directory): its wall time (s) and its peak resident memory (MB, the kernel's
    ``ru_maxrss`` of that process); a run that fails raises :class:`RunFailed`."""
    code = "from olsctl.cli import entry_point; entry_point()"
    with tempfile.TemporaryDirectory(prefix="olsctl-bench-") as tmp:
        cmd = [sys.executable, "-S", "-c", _TIMER, sys.executable, "-c", code, "run",
               *args, "--out", str(Path(tmp) / "out"), "--quiet"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        figures = done.stdout.split()
        if done.returncode != 0 or len(figures) != 3 or figures[2] != "0":
            said = (done.stderr.strip().splitlines() or ["no error written"])[-1]
            raise RunFailed(f"olsctl run {' '.join(args)} failed: {said}")
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
