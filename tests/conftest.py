"""Shared test helpers: tiny in-memory workloads and one-call runs of both engines.

``make_workload`` builds a :class:`olsctl.workload.Workload` from Python lists (no file);
``run_main`` and ``run_whatif_all`` run it under a policy with a strict checker and return
``{job_id: start_s}``, so the same hand-computed answer can be checked on the SimPy main
simulator and on the what-if engine (started from an empty machine, every job an arrival).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest

from olsctl.checker import StrictChecker
from olsctl.policies import make_policy
from olsctl.sim import MainSimulator
from olsctl.swf import SwfHeader
from olsctl.whatif import JobTable, empty_snapshot, run_whatif
from olsctl.workload import LoadReport, Workload

REPO_ROOT = Path(__file__).parent.parent


def _without_source_constants() -> None:
    """Hypothesis draws some values from literals in the source of the modules loaded
    from outside site-packages: with olsctl installed editable, from olsctl's own, as
    many as the test run has imported so far. The derandomized properties that tally
    what they checked (:mod:`property_tally`) would then draw other examples by install
    and by which tests ran first; they are counted on the examples drawn without those
    literals, as in an install into site-packages. (Hypothesis's internal hook: when it
    is gone, this does nothing.)"""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:
        return
    if callable(getattr(providers, "_get_local_constants", None)) and \
            callable(getattr(providers, "Constants", None)):
        none = providers.Constants()
        providers._get_local_constants = lambda: none


_without_source_constants()


def make_workload(
    job_id: Sequence[int],
    submit_s: Sequence[float],
    runtime_s: Sequence[float],
    procs: Sequence[int],
    requested_time_s: Sequence[float] | None = None,
    machine_procs: int = 4,
    name: str = "tiny",
) -> Workload:
    """A workload from columns, sorted by (submit time, job id) as the loader sorts.

    ``requested_time_s`` defaults to -1 (unknown) for every job; user and group ids are -1.
    """
    n = len(job_id)
    if requested_time_s is None:
        requested_time_s = [-1.0] * n
    cols = [np.asarray(job_id, dtype=np.int64), np.asarray(submit_s, dtype=float),
            np.asarray(runtime_s, dtype=float), np.asarray(procs, dtype=np.int64),
            np.asarray(requested_time_s, dtype=float)]
    assert all(c.size == n for c in cols), "columns of different lengths"
    order = np.lexsort((cols[0], cols[1]))
    jid, sub, run, prc, req = (c[order] for c in cols)
    report = LoadReport(source=name, records=n, kept=n)
    return Workload(
        name=name,
        machine_procs=int(machine_procs),
        header=SwfHeader(),
        report=report,
        job_id=jid,
        submit_s=sub,
        runtime_s=run,
        procs=prc,
        requested_time_s=req,
        user_id=np.full(n, -1, dtype=np.int64),
        group_id=np.full(n, -1, dtype=np.int64),
    )


def workload_from_rows(rows: Sequence[tuple], machine_procs: int) -> Workload:
    """Rows of (job_id, submit_s, runtime_s, procs[, requested_time_s])."""
    cols = list(zip(*[tuple(r) + ((-1,) if len(r) == 4 else ()) for r in rows]))
    return make_workload(*cols, machine_procs=machine_procs)


def easy_policy():
    return make_policy({"name": "easy", "order": "fcfs"})


def make_main(
    workload: Workload,
    estimates: str = "exact",
    active_procs: int | None = None,
    policy=None,
    checker: StrictChecker | None = None,
) -> MainSimulator:
    """A main simulator over ``workload`` with a strict checker (EASY/FCFS by default)."""
    return MainSimulator(
        workload,
        easy_policy() if policy is None else policy,
        workload.estimate_s(estimates),
        active_procs=active_procs,
        checker=StrictChecker() if checker is None else checker,
    )


def starts_of(records) -> dict[int, float]:
    """``{job_id: start_s}`` from a run's job records (each job must appear once)."""
    out = {int(r.job_id): float(r.start_s) for r in records.jobs}
    assert len(out) == len(records.jobs), "a job was recorded twice"
    return out


def run_main(
    workload: Workload,
    estimates: str = "exact",
    active_procs: int | None = None,
    policy=None,
) -> dict[int, float]:
    """Run the main simulator to the end; ``{job_id: start_s}`` of every started job."""
    return starts_of(make_main(workload, estimates, active_procs, policy).run())


def job_table(workload: Workload, estimates: str = "exact") -> JobTable:
    return JobTable(
        job_id=workload.job_id,
        submit_s=workload.submit_s,
        procs=workload.procs,
        estimate_s=workload.estimate_s(estimates),
        runtime_s=workload.runtime_s,
    )


def run_whatif_all(
    workload: Workload,
    estimates: str = "exact",
    active_procs: int | None = None,
    policy=None,
) -> dict[int, float]:
    """What-if engine from an empty machine at the first submit, every job an arrival.

    Returns ``{job_id: start_s}`` (NaN for a job that never started).
    """
    snap = empty_snapshot(float(workload.submit_s[0]), workload.machine_procs, active_procs)
    res = run_whatif(snap, easy_policy() if policy is None else policy,
                     arrivals=job_table(workload, estimates), checker=StrictChecker())
    return {int(j): float(s) for j, s in zip(res.job_id, res.start_s)}


#: the tests that also run with numba's JIT disabled (marker ``nojit``): the kernels' own
#: tests (EASY's and MQBF's), EASY's hand-worked rules and oracle, the power-aware
#: policies' hand-worked cases and fidelity, the knapsack kernels' quick tests, the
#: contract suites' EASY and knapsack cases (EASY, the power-aware EASY, the window
#: knapsack with its backfill settings), the compiled what-if batches' tests, SLA
#: feedback's kernel, and the hand-worked cases of the SLA cut-off of what-ifs.
#: ``pytest`` runs them again uncompiled in a subprocess (tests/test_kernels.py); by
#: hand: ``NUMBA_DISABLE_JIT=1 pytest -m nojit``. Left compiled only (minutes of plain
#: Python each, over code the cases above run too): the knapsack's tests over a whole
#: log's what-ifs, and MQBF's what-if on SDSC-SP2 (its KTH-SP2 case stays).
NOJIT_TESTS = {
    "test_kernels.py": None,
    "test_mqbf_kernel.py": None,
    "test_easy_rules.py": None,
    "test_easy_batch.py": None,
    "test_mqbf_batch.py": None,
    "test_power_policies.py": None,
    "test_knapsack_kernel.py": ("test_the_knapsack_choice_is_the_textbook_programs",
                                "test_the_main_pass_reads_the_running_jobs_as_the_state",
                                "test_a_templates_users_are_numbered",
                                "test_the_power_state_holds_every_window_mark"),
    "test_properties.py": ("test_main_matches_reference_easy",
                           "test_whatif_from_snapshot_reproduces_main"),
    "test_contract.py": ("test_policy_keeps_the_contract[easy",
                         "test_policy_keeps_the_contract[knapsack]",
                         "test_the_knapsack_keeps_the_contract"),
    "test_contract_controller.py": ("test_one_candidate_predicts_what_happens[easy-",),
    "test_feedback.py": ("test_pairwise_sum_has_the_bits", "test_window_metric_equals"),
    "test_mutants.py": ("test_a_what_if_whose_full_metric_equals_the_limit_is_not_cut_short",
                        "test_a_what_if_is_cut_short_only_beyond_the_margin"),
}


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", "nojit: also run with numba's JIT disabled (NUMBA_DISABLE_JIT=1 pytest -m "
                   "nojit); tests/test_kernels.py runs them so")


#: of the files NOJIT_TESTS takes whole, the tests left compiled only (see above)
NOT_NOJIT = ("test_the_kernel_gives_the_python_what_if_on_a_real_log[SDSC-SP2",)


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        names = NOJIT_TESTS.get(item.path.name, ())
        if item.name.startswith(NOT_NOJIT):
            continue
        if names is None or any(item.name.startswith(n) for n in names):
            item.add_marker(pytest.mark.nojit)


#: the test that runs the nojit subset uncompiled (tests/test_kernels.py)
NOJIT_RUNNER = "test_the_nojit_subset_passes_uncompiled"


class NojitRun:
    """The nojit subset run uncompiled in a subprocess (``NUMBA_DISABLE_JIT=1``), started
    as soon as a session has collected :data:`NOJIT_RUNNER`, so that it runs on a second
    core beside the other tests; that test waits for it and reads its outcome. Its own
    temporary folder, and its output in a file (a pipe nobody reads could fill)."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="olsctl-nojit-"))
        self.log = open(self.folder / "out.txt", "w+")
        env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-x", "-m", "nojit", "-p",
             "no:cacheprovider", "--basetemp", str(self.folder / "tmp"),
             str(REPO_ROOT / "tests")],
            cwd=REPO_ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT, text=True)

    def outcome(self, timeout_s: float) -> tuple[int, str]:
        """(exit code, the last lines of its output), once it has ended."""
        code = self.proc.wait(timeout=timeout_s)
        self.log.seek(0)
        return code, "\n".join(self.log.read().splitlines()[-30:])

    def close(self) -> None:
        if self.proc.poll() is None:  # (the session stopped first: Ctrl-C, -x)
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        shutil.rmtree(self.folder, ignore_errors=True)


_NOJIT = pytest.StashKey[NojitRun]()


def pytest_collection_finish(session) -> None:
    from numba.core import config as numba_config

    if numba_config.DISABLE_JIT or session.config.option.collectonly:
        return  # (already uncompiled, the test skips; or nothing runs)
    if any(item.name == NOJIT_RUNNER for item in session.items):
        session.config.stash[_NOJIT] = NojitRun()


def pytest_sessionfinish(session) -> None:
    run = session.config.stash.get(_NOJIT, None)
    if run is not None:
        run.close()


@pytest.fixture
def nojit_run(request) -> NojitRun:
    """The session's uncompiled run of the nojit subset (see :class:`NojitRun`)."""
    return request.config.stash[_NOJIT]


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


def trace_path(name: str) -> Path:
    """A bundled log in the repository, e.g. ``KTH-SP2-1996-2.1-cln.swf.gz``; the calling
    test is skipped (with the reason) when the file is not there."""
    path = REPO_ROOT / "traces" / name
    if not path.exists():
        pytest.skip(f"bundled trace {path} is missing")
    return path


def write_burst_trace(path: Path) -> None:
    """An SWF log on 16 processors: a burst of 24 four-processor jobs of 30 minutes in
    the first 4 minutes, then one 10-minute single-processor job an hour (hours 4-15);
    users and groups cycle, so history predictors have something to learn."""
    lines = ["; MaxProcs: 16"]
    for j in range(1, 25):
        lines.append(f"{j} {10 * (j - 1)} -1 1800 4 -1 -1 4 1800 -1 1 {j % 3} {j % 2} "
                     f"-1 -1 -1 -1 -1")
    for k in range(4, 16):
        j = 21 + k
        lines.append(f"{j} {3600 * k} -1 600 1 -1 -1 1 600 -1 1 {j % 3} {j % 2} "
                     f"-1 -1 -1 -1 -1")
    path.write_text("\n".join(lines) + "\n")


def whatif_trials(task, candidates, python: bool, monkeypatch, pause: bool = True) -> list:
    """Each candidate's trial as :class:`olsctl.controller.scoring.WhatIfRun` scores it,
    cut short under the task's bound and then run on to the end (by the family's
    compiled loop, or with ``python`` by the policy's Python pass), whether the compiled
    loop ran it, and the simulated time its what-if stopped at (None: no what-if ran).
    ``pause``: a what-if under a cap pauses at the power forecast's span
    (``scoring.PAUSE_AT_SPAN``)."""
    from olsctl.controller import batches, scoring

    with monkeypatch.context() as m:
        if python:
            m.setattr(batches, "tick_template", lambda *args: None)
        m.setattr(scoring, "PAUSE_AT_SPAN", pause)
        out = []
        for c in candidates:
            run = scoring.WhatIfRun(task, c)
            got = [run.trial]
            if not run.trial.complete:
                got.append(run.resume(None))
            ran = run.arrays or run.state  # (neither: too wide to run)
            out.append((got, run.arrays is not None, None if ran is None else ran.now_s))
        return out


def same_trials(task, candidates, monkeypatch) -> list:
    """Each candidate's trials (cut short, then run on: :func:`whatif_trials`) by the
    family's compiled loop, checked equal, field by field, to those of the policy's
    Python pass; the compiled loop must have run every candidate but those too narrow
    for a waiting job (scored without a what-if). Returns the trials."""
    fast = whatif_trials(task, candidates, False, monkeypatch)
    slow = whatif_trials(task, candidates, True, monkeypatch)
    snap = task.snapshot
    out = []
    for c, (want, python_ran, _), (got, compiled_ran, _) in zip(candidates, slow, fast):
        too_wide = bool((snap.procs[snap.n_running:] > c.active_procs).any())
        assert compiled_ran == (not too_wide) and not python_ran
        assert got == want
        out.append(got)
    return out
