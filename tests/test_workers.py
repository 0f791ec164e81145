"""olsctl.workers: the controller's own worker processes."""

from __future__ import annotations

import os

import pytest

from olsctl.workers import WorkerDied, Workers


def _square_and_pid(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def _fail(x: int) -> int:
    raise ValueError(f"bad {x}")


def _exit(code: int) -> None:
    os._exit(code)


def test_answers_come_in_order_from_other_processes_with_more_calls_than_workers():
    workers = Workers(2)
    try:
        got = list(workers.submit((_square_and_pid, (x,), {}) for x in range(7)))
        assert [sq for sq, _ in got] == [x * x for x in range(7)]
        pids = {pid for _, pid in got}
        assert len(pids) == 2 and os.getpid() not in pids
        again = list(workers.submit([(_square_and_pid, (3,), {})]))  # the same workers
        assert again[0][1] in pids
    finally:
        workers.close()


def test_an_exception_in_a_call_is_raised_here():
    workers = Workers(1)
    try:
        with pytest.raises(ValueError, match="bad 4"):
            list(workers.submit([(_fail, (4,), {})]))
        assert list(workers.submit([(_square_and_pid, (2,), {})]))[0][0] == 4
    finally:
        workers.close()


def test_a_worker_that_dies_raises_and_the_next_call_starts_new_ones():
    workers = Workers(1)
    try:
        first = list(workers.submit([(_square_and_pid, (1,), {})]))[0][1]
        with pytest.raises(WorkerDied, match="exit code 3"):
            list(workers.submit([(_exit, (3,), {})]))
        second = list(workers.submit([(_square_and_pid, (1,), {})]))[0][1]
        assert second != first
    finally:
        workers.close()
    assert workers._procs == []
