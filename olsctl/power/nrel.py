"""Convert the NREL job power log into an SWF workload and a power CSV olsctl can run.

The log (``ground_truth.csv``, BSD-3-Clause) has per job: submit, start and end times,
nodes, runtime and measured average power per node. The SWF gets one job per row in
submit order (job numbers from 1), submit times in seconds after the earliest submission,
the logged wait, runtime, and nodes as allocated and requested processors (one processor
per node); requested time, users and groups are unknown (-1). ``MaxNodes``/``MaxProcs``
is the largest number of nodes busy at once in the log (the machine has at least that
many). The CSV has ``job_id,mean_w`` for the jobs with a measurement (rows of 0 W are
missing data: those jobs get synthetic profiles when run).
"""

from __future__ import annotations

import csv
import gzip
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from olsctl.errors import TraceError, cannot_write
from olsctl.run_files import write_atomic

COLUMNS = ("submit", "start", "end", "nodes", "runtime_s", "wait_time", "avg_power_per_node")


def _time(path: Path, line: int, field: str, text: str) -> float:
    try:
        return datetime.strptime(text.strip(), "%Y-%m-%d %H:%M:%S").replace(
            tzinfo=timezone.utc).timestamp()
    except ValueError:
        raise TraceError(f"{path.name}:{line}: field {field} is not a time "
                         f"'YYYY-MM-DD HH:MM:SS': {text!r}") from None


def _num(path: Path, line: int, field: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise TraceError(f"{path.name}:{line}: field {field} is not a number: {text!r}") from None
    if not np.isfinite(value) or value < 0:
        raise TraceError(f"{path.name}:{line}: field {field} must be finite and >= 0: {text!r}")
    return value


def _read_rows(src: Path) -> list[tuple[float, ...]]:
    """The jobs of the NREL CSV at ``src``, checked: (submit, start, end as epoch
    seconds, nodes, runtime_s, mean W per node) each."""
    opener = gzip.open if src.suffix == ".gz" else open
    rows = []
    try:
        with opener(src, "rt", newline="") as fh:
            reader = csv.reader(fh)
            header = next(reader, [])
            if tuple(h.strip() for h in header) != COLUMNS:
                raise TraceError(f"{src.name}:1: expected columns {','.join(COLUMNS)}")
            for line, row in enumerate(reader, start=2):
                if len(row) != len(COLUMNS):
                    raise TraceError(f"{src.name}:{line}: expected {len(COLUMNS)} fields, "
                                     f"found {len(row)}")
                submit = _time(src, line, "submit", row[0])
                start = _time(src, line, "start", row[1])
                end = _time(src, line, "end", row[2])
                nodes = _num(src, line, "nodes", row[3])
                runtime = _num(src, line, "runtime_s", row[4])
                power = _num(src, line, "avg_power_per_node", row[6])
                rows.append((submit, start, end, nodes, runtime, power))
    except (OSError, EOFError) as exc:
        raise TraceError(f"{src}: cannot read: {exc}") from None
    if not rows:
        raise TraceError(f"{src.name}: no jobs")
    return rows


def convert(src: Path, swf_out: Path, power_out: Path) -> dict:
    """Write ``swf_out`` and ``power_out`` from the NREL CSV at ``src``; returns counts.
    Both outputs are written whole or not at all."""
    src = Path(src)
    rows = _read_rows(src)
    data = np.asarray(rows, dtype=float)
    order = np.lexsort((np.arange(len(rows)), data[:, 0]))
    data = data[order]
    t0 = data[0, 0]
    # the most nodes busy at once: +nodes at each start, -nodes at each end
    times = np.concatenate((data[:, 1], data[:, 2]))
    delta = np.concatenate((data[:, 3], -data[:, 3]))
    ev = np.lexsort((delta, times))  # ends before starts at one instant
    machine = int(max(np.cumsum(delta[ev]).max(), data[:, 3].max()))
    lines = [
        "; Version: 2.2",
        "; Computer: NREL production HPC system (converted by olsctl from the NREL job power log)",
        "; Acknowledge: Alliance for Sustainable Energy, LLC (BSD-3-Clause)",
        f"; UnixStartTime: {int(t0)}",
        "; TimeZone: 0",
        f"; MaxJobs: {len(data)}",
        f"; MaxRecords: {len(data)}",
        f"; MaxNodes: {machine}",
        f"; MaxProcs: {machine}",
        "; Note: MaxProcs is the most nodes busy at once in the log; one processor per node",
    ]
    power_lines = ["job_id,mean_w"]
    measured = 0
    for i, (submit, start, _end, nodes, runtime, power) in enumerate(data.tolist(), start=1):
        wait = max(start - submit, 0.0)
        n = int(nodes)
        lines.append(f"{i} {int(submit - t0)} {int(wait)} {int(runtime)} {n} -1 -1 {n} -1 -1 "
                     f"1 -1 -1 -1 -1 -1 -1 -1")
        if power > 0:
            power_lines.append(f"{i},{power!r}")
            measured += 1
    written: list[Path] = []
    for option, path, text in (("--swf", Path(swf_out), lines),
                               ("--power", Path(power_out), power_lines)):
        try:
            write_atomic(path, "\n".join(text) + "\n")
        except OSError as exc:
            for done in written:  # both files or neither
                done.unlink(missing_ok=True)
            raise cannot_write(f"command line: {option}", path, exc, folder=False) from None
        written.append(path)
    return {"jobs": len(data), "measured": measured, "machine_procs": machine}
