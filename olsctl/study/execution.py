"""Running a study: the grid's missing runs, each in a worker (joblib's loky processes,
which die with the study process, or tasks on a Dask cluster), stored and tabled as each
one finishes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator

from olsctl.config import RunConfig
from olsctl.errors import Infeasible, OlsctlError
from olsctl.run_files import json_text, write_atomic
from olsctl.policies import compile_kernels
from olsctl.runner import execute, needs_kernels
from olsctl.workload import resolve_trace
from olsctl.study.grid import GridPoint, Study
from olsctl.study.progress import NULL_STUDY_PROGRESS, StudyProgress
from olsctl.study.storage import (Outcome, StudyError, _locked, _new_dir, _store, finished_runs,
                                  known_infeasible, write_tables, writing_into)


# --- one run in a worker ---------------------------------------------------------------

def run_point(rid: str, config: RunConfig, scratch: str | None) -> Outcome:
    """Run one grid point into a new directory under ``scratch`` (kept there for the
    caller to move), or, with ``scratch`` None, under the system's temporary directory
    and hand the files back as bytes. Errors become the outcome's one-line ``error``."""
    t0 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix=f"{rid}.")) if scratch is None else _new_dir(scratch, rid)
    try:
        execute(replace(config, out=str(tmp)))
        summary_path = tmp / "summary.json"
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
        summary["config"]["out"] = config.out  # the run's place in the study, not tmp
        write_atomic(summary_path, json_text(summary))
        outcome = Outcome(rid, summary=summary, path=str(tmp))
        if scratch is None:
            outcome.files = {p.name: p.read_bytes() for p in sorted(tmp.iterdir())}
            outcome.path = None
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if not isinstance(exc, Exception):
            raise
        text = str(exc) if isinstance(exc, OlsctlError) else f"{type(exc).__name__}: {exc}"
        why = " ".join(str(exc.args[0]).split()) if isinstance(exc, Infeasible) else None
        outcome = Outcome(rid, error=" ".join(text.split()), infeasible=why)
    outcome.wall_s = time.perf_counter() - t0
    return outcome


# --- running a study -------------------------------------------------------------------

@dataclass
class StudyResult:
    """Summaries of the finished runs, errors of the failed ones and why the infeasible
    ones are (when the study keeps them, see :func:`run_study`), by run id; ``computed``
    runs ran now, ``reused`` of the finished ones were finished before."""

    done: dict[str, dict] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    computed: int = 0
    wall_s: float = 0.0
    infeasible: dict[str, str] = field(default_factory=dict)
    reused: int = 0


def run_study(study: Study, progress: StudyProgress = NULL_STUDY_PROGRESS,
              keep_infeasible: bool = False) -> StudyResult:
    """Compute the grid's missing runs, storing each run and the tables as it finishes.
    With worker processes on this machine, the policy kernels that runs need are
    compiled here first (:func:`olsctl.policies.compile_kernels`, which says so through
    ``progress``), so that the workers load them instead of compiling them at once.

    With ``keep_infeasible`` (``olsctl tune``), a setting under which some job can never
    start is no failure: it is stored in ``infeasible.csv`` with why, and not run again
    while it is there."""
    t0 = time.perf_counter()
    client = _connect(study, progress.say) if study.backend == "dask" else None  # before writing
    result = StudyResult()
    try:
        where = f"{study.source}: out"
        with _locked(study.out_dir, where):
            scratch = study.out_dir / ".partial"
            with writing_into(study.out_dir, where):
                shutil.rmtree(scratch, ignore_errors=True)
                scratch.mkdir()
                (study.out_dir / "runs").mkdir(exist_ok=True)
            result.done = finished_runs(study)
            result.reused = len(result.done)
            if keep_infeasible:
                result.infeasible = {k: v for k, v in known_infeasible(study).items()
                                     if k not in result.done}
            kept = result.infeasible if keep_infeasible else None  # infeasible.csv's rows
            todo = longest_first([p for p in study.points if p.run_id not in result.done
                                  and p.run_id not in result.infeasible])
            with writing_into(study.out_dir, where):
                write_tables(study, result.done, result.failed, kept)
            compiling = sorted({p.config.policy["name"] for p in todo
                                if needs_kernels(p.config)})
            if client is None and study.n_jobs != 1 and compiling:
                # fill numba's cache once here (for the runs' policy families), so that
                # the workers load the compiled kernels instead of each compiling them
                compile_kernels(progress.say, compiling)
            progress.start(study, len(todo), len(result.done), len(result.infeasible))
            try:
                for outcome in _outcomes(study, todo, scratch, client):
                    if not keep_infeasible:
                        outcome.infeasible = None  # a failure like any other
                    if outcome.error is None:
                        _store(study.out_dir, outcome)
                        result.done[outcome.run_id] = outcome.summary
                    elif outcome.infeasible is not None:
                        result.infeasible[outcome.run_id] = outcome.infeasible
                    else:
                        result.failed[outcome.run_id] = outcome.error
                    result.computed += 1
                    write_tables(study, result.done, result.failed, kept)
                    progress.advance(outcome)
            finally:
                progress.close()
            shutil.rmtree(scratch, ignore_errors=True)
    finally:
        if client is not None:
            client.close()
    result.wall_s = time.perf_counter() - t0
    return result


def run_weight(config: RunConfig) -> float:
    """A rough measure of how long a run takes, to start the longest first: the size of
    its log's file times its load, times one plus the candidates a controller tries at
    each tick (a list given as ``{from, to, step}`` counts as four)."""
    try:
        size = float(resolve_trace(config.trace, config.base_dir).stat().st_size)
    except (OlsctlError, OSError):
        size = 1.0
    cands = 0
    if config.controller:
        spec = config.controller.get("candidates") or {}
        cands = 1
        for key, value in spec.items():
            if key in ("active_procs", "power_cap"):
                value = next(iter(value.values()), []) if isinstance(value, dict) else value
            groups = value.values() if key == "policy" and isinstance(value, dict) else [value]
            for v in groups:
                cands *= len(v) if isinstance(v, (list, tuple)) and v else 4
    return size * float(config.load_scale or 1.0) * (1 + cands)


def longest_first(points: list[GridPoint]) -> list[GridPoint]:
    """The runs to compute, the heaviest (:func:`run_weight`) first, ties in grid order:
    with a few workers, a long run started last would leave the others idle at the end.
    Where a run goes and what it gives do not depend on the order."""
    weight = {p.index: run_weight(p.config) for p in points}
    return sorted(points, key=lambda p: (-weight[p.index], p.index))


def _connect(study: Study, say: Callable[[str], None]):
    """A client of the study's Dask scheduler, said first (it may take a while); a
    refused connection fails at once (:func:`olsctl.backends.reach_dask`)."""
    from dask.distributed import Client

    from olsctl.backends import reach_dask

    say(f"connecting to the dask scheduler at {study.scheduler}")
    try:
        reach_dask(study.scheduler)
        return Client(study.scheduler)
    except Exception as exc:  # unreachable, refused, a bad address: all the same to the user
        raise StudyError(f"{study.source}: scheduler: cannot connect to {study.scheduler}: "
                         f"{' '.join(str(exc).split()) or type(exc).__name__}") from None


def _outcomes(study: Study, todo: list[GridPoint], scratch: Path, client) -> Iterator[Outcome]:
    """Outcomes in the order the runs finish."""
    if not todo:
        return
    if client is not None:
        yield from _dask_outcomes(client, todo)
        return
    from joblib import Parallel, delayed, parallel_config
    from joblib.externals.loky.process_executor import TerminatedWorkerError

    quiet_recycled_workers()

    # every worker ends with this process, even one killed outright (_die_with_parent)
    with parallel_config(backend="loky", initializer=_die_with_parent,
                         initargs=(os.getpid(),)):
        parallel = Parallel(n_jobs=study.n_jobs, return_as="generator_unordered")
    try:
        where = str(scratch.resolve())  # pool workers may run in another directory
        yield from parallel(delayed(run_point)(p.run_id, p.config, where) for p in todo)
    except TerminatedWorkerError as exc:
        why = " ".join(str(exc).split())[:200]
        raise StudyError(f"{study.source}: a worker process died ({why}); the finished runs "
                         f"are kept: run the study again to go on") from None


#: the start of the warning loky gives when it replaces a worker whose memory grew past
#: its limit (a worker that ran a large log) while runs were queued for it: the runs are
#: not lost, the replacement takes them (joblib/joblib#869)
RECYCLED_WORKER = "A worker stopped while some jobs were given to the executor"


def quiet_recycled_workers() -> None:
    """Do not show loky's :data:`RECYCLED_WORKER` warning, which reads like a failure; a
    worker that really dies still stops the study with its own message."""
    warnings.filterwarnings("ignore", message=RECYCLED_WORKER, category=UserWarning)


#: how often a study worker looks whether the study process is still there (s)
PARENT_POLL_S = 0.5
#: Linux's prctl option: the signal a process gets when its parent ends
PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> None:
    """A study worker's initializer: the worker ends when the study process ``parent_pid``
    does, even when that was killed outright (SIGKILL leaves it no time to stop its
    workers, which would otherwise finish the runs they hold, minutes later). On Linux
    the kernel kills the worker at once (``prctl(PR_SET_PDEATHSIG)``); everywhere a
    thread of the worker looks every ``PARENT_POLL_S`` whether its parent has changed."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):  # no prctl here: the watchdog alone
            pass
    if os.getppid() != parent_pid:  # the study ended before the worker was set
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True,
                     name="olsctl-parent-watch").start()


def _watch_parent(parent_pid: int) -> None:
    """End this process once its parent is no longer ``parent_pid`` (it ended and this
    process was handed to another)."""
    while os.getppid() == parent_pid:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


def _dask_outcomes(client, todo: list[GridPoint]) -> Iterator[Outcome]:
    """Each run as a task on the cluster; files come back as bytes (no shared disk needed)."""
    from dask.distributed import as_completed

    ids = {}
    futures = []
    for p in todo:
        fut = client.submit(run_point, p.run_id, p.config, None, pure=False)
        ids[fut.key] = p.run_id
        futures.append(fut)
    for fut in as_completed(futures):
        try:
            yield fut.result()
        except Exception as exc:  # the task never ran to the end (a worker was lost)
            text = " ".join(f"{type(exc).__name__}: {exc}".split())
            yield Outcome(ids[fut.key], error=text)
