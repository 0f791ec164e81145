"""EASY's arrivals-only passes (olsctl.policies.easy.passes.easy_pass under FCFS): at an
instant where jobs only arrived since the last pass, only the new jobs are tried, behind
the same blocked head, with the extra processors the last pass left. A hand-worked trace
where that extra decides, then random workloads run with and without the shortcut.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import run_main, run_whatif_all, workload_from_rows
from olsctl.policies.easy import passes as backfill
@pytest.fixture
def shortcuts(monkeypatch):
    """Counts the arrivals-only passes taken."""
    calls = []
    original = backfill._new_jobs_pass

    def spy(*args, **kwargs):
        calls.append(args[0].now_s)
        return original(*args, **kwargs)

    monkeypatch.setattr(backfill, "_new_jobs_pass", spy)
    return calls


def test_the_extra_left_by_the_last_pass_decides(shortcuts):
    """12 processors. t=0: job 1 (6 procs, 100 s) starts; job 2 (8) is blocked: at 100,
    12 are free, so shadow 100 and extra 4. t=10: job 3 (3 procs, 500 s) ends after the
    shadow time and takes 3 of the extra (1 left). t=20: job 4 (2 procs, 500 s) fits the
    3 free processors but not the 1 extra: it waits (with the extra of a fresh pass, 4, it
    would start). t=30: job 5 (1 proc, 500 s) takes the last extra processor. t=40: job 6
    (1 proc, 50 s) ends at 90, before the shadow time: it starts on the last free
    processor. t=90: job 6 ends, a pass: nothing fits the 1 free processor but job 4
    (2). t=100: job 1 ends, 8 free: job 2 starts. t=150: job 2 ends: job 4 starts. The
    instants 10, 20, 30 and 40 only have arrivals."""
    rows = [(1, 0, 100, 6), (2, 0, 50, 8), (3, 10, 500, 3), (4, 20, 500, 2),
            (5, 30, 500, 1), (6, 40, 50, 1)]
    want = {1: 0.0, 2: 100.0, 3: 10.0, 4: 150.0, 5: 30.0, 6: 40.0}
    w = workload_from_rows(rows, 12)
    assert run_main(w) == want
    assert shortcuts == [10.0, 20.0, 30.0, 40.0]
    del shortcuts[:]
    assert run_whatif_all(w) == want  # the what-if engine's own loop takes it too
    assert shortcuts == [10.0, 20.0, 30.0, 40.0]


def _random_rows(rng: np.random.Generator, machine: int) -> list[tuple]:
    """Bursty arrivals on a small machine (long queues, many arrivals-only instants);
    requested times from under to far over the runtime, so with user estimates jobs
    overrun their expected ends (the shadow time then is now)."""
    n = int(rng.integers(20, 120))
    submit = np.cumsum(rng.choice([0, 0, 1, 2, 3, 7, 30], size=n))
    runtime = rng.choice([1, 2, 5, 10, 30, 60, 200], size=n)
    procs = rng.integers(1, machine + 1, size=n)
    factor = rng.choice([0.5, 1.0, 1.0, 2.0, 10.0], size=n)
    return [(i + 1, int(submit[i]), int(runtime[i]), int(procs[i]),
             max(1, int(runtime[i] * factor[i]))) for i in range(n)]


@pytest.mark.parametrize("estimates", ["exact", "user"])
def test_the_shortcut_changes_no_start(estimates, shortcuts, monkeypatch):
    taken = 0
    for seed in range(60):
        rng = np.random.default_rng(seed)
        machine = int(rng.integers(2, 20))
        w = workload_from_rows(_random_rows(rng, machine), machine)
        del shortcuts[:]
        fast = run_main(w, estimates)
        used = len(shortcuts)
        monkeypatch.setattr(backfill, "ARRIVALS_SHORTCUT", False)
        plain = run_main(w, estimates)
        monkeypatch.setattr(backfill, "ARRIVALS_SHORTCUT", True)
        assert fast == plain, seed
        assert len(fast) == len(w.job_id), seed
        taken += used > 0
    assert taken >= 40  # most workloads took the shortcut at least once


@pytest.mark.parametrize("estimates", ["exact", "user"])
def test_the_compiled_pass_over_a_long_queue_changes_no_start(estimates, shortcuts,
                                                              monkeypatch):
    """Under FCFS, once a run has compiled the kernels, a pass over a queue of
    ``LONG_QUEUE`` jobs or more is the compiled pass; it starts what the plain pass
    starts and leaves what the arrivals-only shortcut needs (here every pass is long)."""
    from olsctl.policies.core import jit

    monkeypatch.setattr(jit, "_COMPILED", jit.compiled())
    taken = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        machine = int(rng.integers(2, 20))
        w = workload_from_rows(_random_rows(rng, machine), machine)
        monkeypatch.setattr(backfill, "LONG_QUEUE", 1)
        del shortcuts[:]
        fast = run_main(w, estimates)
        taken += len(shortcuts) > 0
        monkeypatch.setattr(backfill, "LONG_QUEUE", 1 << 60)
        assert fast == run_main(w, estimates), seed
        assert len(fast) == len(w.job_id), seed
    assert taken >= 25  # the compiled passes left the shortcut what it needs
