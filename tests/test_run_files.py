"""Output files formatted a column at a time: the same bytes as formatting value by value
(:func:`olsctl.run_files.num`), piece by piece; job records turned into columns in one go."""

from __future__ import annotations

import random

import numpy as np
import pytest

from olsctl import run_files
from olsctl.metrics import job_columns
from olsctl.run_files import column_bytes, csv_chunks, csv_text, jobs_csv, num, timeseries_csv
from olsctl.records import JobRecord, RunRecords, TimeSeries

SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 9.0, 10.0, 99.0, 100.0, 2.5, 1e16, -1e16,
           2.0**53, -(2.0**53), 2.0**53 - 1, -(2.0**53 - 1), 1e22, 3e15 + 0.5, 1e-300, 5e-324,
           0.1 + 0.2, 123456789.123, float("nan"), float("inf"), -float("inf")]


def _texts(matrix: np.ndarray) -> list[str]:
    return [bytes(row[row != 0]).decode() for row in matrix]


def _floats(seed: int, n: int) -> list[float]:
    rng = random.Random(seed)
    return ([rng.uniform(-1e6, 1e6) for _ in range(n)]
            + [float(rng.randint(-10**9, 10**9)) for _ in range(n)]
            + [rng.random() * 10.0 ** rng.randint(-20, 20) for _ in range(n)]
            + [float(rng.randint(-2**53 + 1, 2**53 - 1)) for _ in range(n)])


@pytest.mark.parametrize("values", [
    SPECIAL, _floats(1, 500), [1.0, 2.0, 3.0], [0.25], [],
    [0, -1, 5, 9, 10, -10, 99, 100, 2**62, 2**63 - 1, -2**63 + 1, 1_000_000],
    [-2**63, 0, 7],
], ids=["special", "random", "whole", "one", "empty", "ints", "int64-min"])
def test_a_column_reads_as_num_writes_each_value(values):
    assert _texts(column_bytes(np.asarray(values))) == [num(v) for v in values]
    assert _texts(column_bytes(values)) == [num(v) for v in values]


def test_booleans_are_written_as_0_and_1():
    assert _texts(column_bytes(np.array([True, False]))) == ["1", "0"]


@pytest.mark.parametrize("rows", [1, 7, 1 << 15])
def test_csv_pieces_join_to_the_text_of_each_value(monkeypatch, rows):
    monkeypatch.setattr(run_files, "CHUNK_ROWS", rows)
    floats = np.array(_floats(2, 50) + SPECIAL)
    cols = [floats, np.arange(floats.size), floats[::-1].copy(), floats > 0]
    head = ["a", "b", "c", "d"]
    assert "".join(csv_chunks(head, cols)) == csv_text(head, zip(*(c.tolist() for c in cols)))
    assert "".join(csv_chunks(head, [c[:0] for c in cols])) == "a,b,c,d\n"


def _records(seed: int, n: int) -> RunRecords:
    rng = random.Random(seed)
    samples = TimeSeries()
    jobs = []
    for k, job_id in enumerate(rng.sample(range(1, 10 * n), n)):
        submit = float(rng.randint(0, 1000))
        start = submit + rng.choice([0.0, rng.randint(0, 500), rng.random() * 100])
        runtime = float(rng.randint(1, 300)) if k % 3 else rng.random() * 50 + 0.5
        jobs.append(JobRecord(job_id, submit, start, start + runtime, runtime,
                              rng.randint(1, 64), runtime * rng.choice([1.0, 2.0])))
        samples.time_s.append(float(k) * 1.5)
        samples.queue_len.append(rng.randint(0, 300))
        samples.busy_procs.append(rng.randint(0, 1000))
        samples.active_procs.append(1000)
    return RunRecords(1000, jobs, samples)


def test_jobs_and_timeseries_csv_are_the_bytes_of_formatting_value_by_value():
    rec = _records(3, 400)
    c = job_columns(rec)
    cols = [c.job_id, c.submit_s, c.start_s, c.end_s, c.runtime_s, c.wait_s, c.turnaround_s,
            c.procs, c.estimate_s, c.bsld]
    assert jobs_csv(c) == csv_text(run_files.JOB_COLUMNS, zip(*(x.tolist() for x in cols)))
    s = rec.samples
    assert timeseries_csv(s) == csv_text(
        run_files.TIMESERIES_COLUMNS,
        zip(list(s.time_s), list(s.queue_len), list(s.busy_procs), list(s.active_procs)))


def test_job_table_is_the_records_sorted_as_tuples():
    rec = _records(4, 300)
    expect = np.asarray(sorted(rec.jobs), dtype=float)
    assert np.array_equal(rec.job_table(), expect)
    rec.jobs.append(rec.jobs[0]._replace(start_s=-1.0))  # a repeated id: ties as tuples
    assert np.array_equal(rec.job_table(), np.asarray(sorted(rec.jobs), dtype=float))
