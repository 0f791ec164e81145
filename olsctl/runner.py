"""One run from a validated config: load, simulate, measure, write.

All input is read and checked before anything is written, so bad input never leaves a
half-written output directory.
"""

from __future__ import annotations

import gc
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from olsctl import __version__, backends
from olsctl.backends import MAX_FAILED_CALLS, BackendDown, BackendError, failed_calls_error
from olsctl.checker import NULL_CHECKER, StrictChecker
from olsctl.config import RunConfig, check_run
from olsctl.controller.settings import ControllerSettings, cost_weights
from olsctl.controller.tick import Controller
from olsctl.errors import (ConfigError, InfeasibleConfig, InfeasibleRun, SimulationError,
                           TraceError)
from olsctl.feedback import FeedbackSettings, SlaFeedback
from olsctl.metrics import job_columns, sla_summary, summarize, week_origin, weekly
from olsctl.policies import compile_kernels, make_policy, uses_kernels
from olsctl.policies.core.jit import on_stderr, silent
from olsctl.power import accounting
from olsctl.power.setup import power_inputs, power_setup
from olsctl.records import RunRecords
from olsctl.run_files import power_csv, write_run
from olsctl.sim import NULL_PROGRESS, MainSimulator, Progress
from olsctl.whatif import JobTable
from olsctl.workers import Workers, processes_for
from olsctl.workload import Workload, load_workload, resolve_trace


@dataclass
class RunResult:
    summary: dict
    out_dir: Path
    files: list[Path]
    controller_wall_s: float = 0.0


class _RichProgress(Progress):
    def __init__(self, bar) -> None:
        self.bar = bar
        self.task = None

    def update(self, done: int, total: int, now_s: float) -> None:
        if self.task is None:
            self.task = self.bar.add_task("run", total=total)
        self.bar.update(self.task, completed=done)


class PlainProgress(Progress):
    """A run's progress as plain lines (stderr a pipe or a file): a line once at least
    ``step`` of the jobs more have started, or ``quiet_s`` have passed, since the last
    line, and never sooner than ``gap_s`` after the simulation started or the last line
    (so a run shorter than ``gap_s`` prints none); none at the end (the run's own summary
    follows). Times are wall seconds of ``clock``; use it as a context manager around
    the simulation, which starts its clock."""

    step, gap_s, quiet_s = 0.1, 15.0, 60.0

    def __init__(self, say: Callable[[str], None], clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self.say, self.clock = say, clock
        self.t0_s = self._last_s = clock()
        self._last_done = 0

    def __enter__(self) -> "PlainProgress":
        self.t0_s = self._last_s = self.clock()
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def update(self, done: int, total: int, now_s: float) -> None:
        if not 0 < done < total:
            return
        t_s = self.clock()
        since_s = t_s - self._last_s
        if since_s < self.gap_s or (done - self._last_done < self.step * total
                                    and since_s < self.quiet_s):
            return
        spent_s = t_s - self.t0_s
        self.say(f"simulating: {done:,} of {total:,} jobs started ({100 * done / total:.0f}%) "
                 f"in {spent_s:.0f} s, about {spent_s * (total - done) / done:.0f} s left")
        self._last_s, self._last_done = t_s, done


class WorkerPool:
    """The worker processes of a run's controller, kept until ``stack`` closes.

    When the pool ``overlaps``, ``n_jobs`` counts this process as one of the workers:
    :meth:`submit` sends shares of a tick's work to the other ``n_jobs - 1`` and returns
    at once, and this process runs its own share before it reads their answers. With
    ``processes`` (the default, :mod:`olsctl.workers`) that costs about 0.15 ms a trip.
    Any other name is a joblib backend (``loky``, ``dask``, ``ray``, ...), through
    ``joblib.Parallel``, which looks for results every 10 ms; one that cannot hand back
    results before all are in (``multiprocessing``) does not overlap, and gets all
    ``n_jobs`` shares. ``dask`` and ``ray`` run on ``cluster`` (:mod:`olsctl.backends`).

    A call that fails raises as before (the tick keeps its setting; a joblib pool is
    built anew for the next call); a backend that cannot start, or fails
    ``MAX_FAILED_CALLS`` calls in a row, raises :class:`olsctl.backends.BackendDown`,
    which stops the run (``where``, ``file: controller``, starts its message). Joining a
    running cluster is said with ``say``."""

    def __init__(self, stack: ExitStack, n_jobs: int, backend: str, cluster: str | None = None,
                 where: str = "controller", say: Callable[[str], None] = silent) -> None:
        self.n_jobs = n_jobs
        self.backend = backend
        self.cluster = cluster
        self._where = where
        self._say = say
        self._workers = None
        self._parallel = None
        self._params: dict | None = None  # joblib's parallel_config, once connected
        self._stack = stack
        self._failed_calls = 0

    @property
    def overlaps(self) -> bool:
        return self.backend == "processes" or self._joblib_or_stop().return_generator

    def start(self) -> None:
        """Start the workers now; they get ready while the run goes on. A joblib backend
        that cannot be set up (a cluster out of reach) raises
        :class:`olsctl.backends.BackendError` here, before the first tick."""
        if self.backend == "processes":
            self._own().start()
        else:
            self._joblib()

    def submit(self, tasks) -> Iterator:
        """Send ``tasks`` (joblib ``delayed`` calls) off; an iterator over their results,
        in order (a worker that died raises there)."""
        try:
            if self.backend != "processes":
                results = iter(self._joblib_or_stop()(tasks))
            else:
                results = self._own().submit(tasks)
        except Exception as exc:
            self._count_failure(exc)
            raise
        return self._watched(results)

    def _watched(self, results: Iterator) -> Iterator:
        """``results``, counting a call that fails (closing this closes ``results``)."""
        try:
            yield from results
        except Exception as exc:
            self._count_failure(exc)
            raise
        self._failed_calls = 0

    def _count_failure(self, exc: Exception) -> None:
        self._drop_parallel()  # it may still count the failed call as running
        self._failed_calls += 1
        if self._failed_calls >= MAX_FAILED_CALLS:
            raise BackendDown(failed_calls_error(self._where, self.backend,
                                                 self._failed_calls, exc)) from exc

    def _own(self):
        if self._workers is None:
            self._workers = Workers(processes_for(self.n_jobs) - 1)
            self._stack.callback(self._workers.close)
        return self._workers

    def __call__(self, tasks) -> list:
        return list(self.submit(tasks))

    def _joblib_or_stop(self):
        try:
            return self._joblib()
        except BackendError as exc:  # in a tick: the run stops
            raise BackendDown(exc) from None

    def _joblib(self):
        if self._parallel is None:
            if self._params is None:  # the cluster, joined once for the run
                self._params = backends.connect(self._stack, self.backend, self.cluster,
                                                processes_for(self.n_jobs), self._where,
                                                self._say)
                self._stack.callback(self._drop_parallel)  # before the cluster closes
            self._parallel = backends.parallel(self.backend, self.n_jobs, self._params,
                                               self._where)
        return self._parallel

    def _drop_parallel(self) -> None:
        parallel, self._parallel = self._parallel, None
        if parallel is not None:
            try:
                parallel.__exit__(None, None, None)
            except Exception:  # a pool that failed may fail to close: it is dropped anyway
                pass


@contextmanager
def collector_paused() -> Iterator[None]:
    """Within the block, Python's cycle collector does not run by itself: a run makes
    millions of small objects that mostly live to its end (job records, the decision
    log's entries, the controller's trials) and hold no cycles, and every collection
    looks at them again, for nothing. Running it less often (thresholds 50,000, 50, 100)
    still cost about 0.5 s of SDSC-BLUE's 9.5 s under configs/easy-ols.yaml; not at
    all, none, with the same peak memory. Objects with cycles made meanwhile (a policy
    of one's own could make some on every pass) wait for the next collection after the
    block. The collector is on again after the block (also after an error) if it was
    before."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def execute(config: RunConfig, progress_bar=None, live=None,
            say: Callable[[str], None] = on_stderr) -> RunResult:
    """Run ``config`` and write its outputs; ``progress_bar`` is a rich Progress, an
    :class:`olsctl.sim.Progress` that is a context manager (:class:`PlainProgress`) or None;
    ``live`` an :class:`olsctl.live.LiveRun` that watches (and may pace) the run, or None;
    ``say`` is told when the run compiles the policy kernels before its worker pool
    starts, or waits for another process's compile
    (:func:`olsctl.policies.compile_kernels`).

    The run files an earlier run left in ``out`` that this run does not write (its
    ``power.csv``, ``decisions.jsonl``, ``live.jsonl``) are removed once the outputs are
    written, so the directory holds one run; other files there are left alone."""
    _check_out(config)
    workload = _workload(config)
    estimates = workload.estimate_s(config.estimates)
    check_run(config, workload, estimates)  # every check across sections, before anything runs
    power = power_inputs(config, workload)  # read and checked before anything runs
    policy = make_policy(config.policy)
    checker = StrictChecker() if config.strict else NULL_CHECKER
    sim = _main_simulator(config, workload, estimates, policy, power, checker, progress_bar)
    controller = None
    if config.controller is not None:
        controller = _controller(config, workload, estimates,
                                 None if power is None else power[1])
        if power is not None:
            sim.wake_latency_s = power[1].wake_latency_s
        controller.start(sim)
    records = _simulate(config, sim, controller, progress_bar, live, say)
    summary = _summary(config, workload, policy, checker, sim, records)
    extra_files: dict[str, str] = {}
    if controller is not None:
        summary["controller"] = controller.summary()
        extra_files["decisions.jsonl"] = controller.jsonl()
    job_power = None
    if power is not None:
        extra_files["power.csv"], job_power = _power_outputs(config, workload, power, sim,
                                                             records, summary)
    out_dir = Path(config.out)
    files = _write(config, workload, sim, records, summary, extra_files, job_power)
    feed = live is not None and live.writes_feed
    _remove_stale(out_dir, {p.name for p in files} | ({FEED_FILE} if feed else set()))
    return RunResult(summary, out_dir, files, controller.wall_s if controller else 0.0)


def needs_kernels(config: RunConfig) -> bool:
    """Whether a run of ``config`` calls compiled policy kernels (it has a controller, or
    its policy's main pass is compiled): what :func:`olsctl.policies.compile_kernels`
    readies for it."""
    return uses_kernels(config.policy, config.controller is not None)


def _workload(config: RunConfig) -> Workload:
    """The run's workload: its trace found (an error names the config that named it),
    loaded and scaled."""
    try:
        path = resolve_trace(config.trace, config.base_dir)
    except TraceError as exc:
        if config.source in ("<defaults>", "command line"):
            raise
        where = config.base_dir or Path.cwd()
        raise TraceError(f"{config.source}: trace: {exc.args[0]} (looked in {where})") from None
    return load_workload(path, config.procs, config.skip_bad_lines).load_scaled(
        config.load_scale)


def _main_simulator(config: RunConfig, workload: Workload, estimates: np.ndarray,
                    policy: Any, power: tuple | None, checker: Any,
                    progress_bar: Any) -> MainSimulator:
    """The main simulator of the run, its policy's job model prepared and, with power,
    its power state (and hardware limit) set up."""
    sink = (NULL_PROGRESS if progress_bar is None else progress_bar
            if isinstance(progress_bar, Progress) else _RichProgress(progress_bar))
    sim = MainSimulator(workload, policy, estimates, config.active_procs, checker, sink)
    problem = policy.prepare(sim.state, workload)  # a job model of the policy's own
    if problem is not None:  # some job could never run under the policy's settings
        raise InfeasibleConfig(f"{config.source}: policy.{problem}")
    if power is not None:
        profiles, machine, cap = power
        predictor = config.policy.get("predictor")
        name = predictor.get("name") if isinstance(predictor, dict) else predictor
        spec = config.power
        sim.state.power, limit = power_setup(
            workload, profiles, machine, cap, learning=name == "learner",
            throttle=spec["limit"] == "throttle", perf_seed=spec["seed"], share=spec["share"],
            min_clock=spec["min_clock"])
        if limit is not None:
            sim.state.limit = limit
    return sim


def _simulate(config: RunConfig, sim: MainSimulator, controller: Controller | None,
              progress_bar: Any, live: Any, say: Callable[[str], None]) -> RunRecords:
    """Run the main simulator to its end (with the controller's worker pool, the
    progress bar and the live view around it); every job must have started."""
    with ExitStack() as stack:
        stack.enter_context(collector_paused())
        if controller is not None:
            # ready the what-ifs' compiled kernels here, under the machine's compile
            # lock: one process compiles them, and says so; the others, and this run's
            # workers, load them (MQBF's main pass alone compiles at its first call)
            compile_kernels(say, [config.policy["name"]])
        if controller is not None and controller.settings.n_jobs != 1:
            controller.parallel = WorkerPool(stack, controller.settings.n_jobs,
                                             controller.settings.backend,
                                             config.controller["cluster"],
                                             f"{config.source}: controller", say)
            controller.parallel.start()  # a cluster out of reach stops the run here
        if progress_bar is not None:
            stack.enter_context(progress_bar)
        if live is not None:
            stack.enter_context(live.attach(sim, controller))
        try:
            records = sim.run()
        except BackendDown as down:  # the pool cannot run what-ifs: the run stops
            raise down.error from down.__cause__
    if records.unstarted:
        first = records.unstarted[0]
        raise InfeasibleRun(
            f"{len(records.unstarted)} job(s) could never start under policy "
            f"{config.policy['name']} (first: job {first}): nothing was left running to "
            f"free processors or power; raise the cap or the active processors")
    return records


def _summary(config: RunConfig, workload: Workload, policy: Any, checker: Any,
             sim: MainSimulator, records: RunRecords) -> dict:
    """``summary.json`` without the controller's and the power's parts: the run, its
    metrics, weeks and SLA windows, and the policy's own report (``policy`` is the one
    the run started with)."""
    active = config.active_procs
    header = workload.header
    summary = {
        "olsctl": __version__,
        "trace": workload.name,
        "config": config.as_dict(),
        "load": workload.report.as_dict(),
        "active_procs_at_start": workload.machine_procs if active is None else active,
        "strict_checks": checker.starts_checked if config.strict else None,
        "metrics": summarize(records),
    }
    sla = config.sla_spec()
    summary["weekly"] = weekly(records, header.first_int("UnixStartTime"),
                               header.first_int("TimeZone"), sla.window_s, sla)
    summary["sla"] = sla_summary(summary["weekly"], sla)
    report = policy.run_report(sim.state, records)
    if report is not None:
        summary[policy.report_key] = report
    return summary


def _power_outputs(config: RunConfig, workload: Workload, power: tuple, sim: MainSimulator,
                   records: RunRecords, summary: dict) -> tuple[str, tuple]:
    """The run's power accounting: ``summary["power"]`` filled in, and the text of
    ``power.csv`` and the jobs' power columns of ``jobs.csv`` returned."""
    profiles, machine, cap = power
    index_of = {j: i for i, j in enumerate(workload.job_id.tolist())}
    cap = sim.state.power.cap  # with the controller's changes, if any
    limit = sim.state.limit
    tl = accounting.timeline(records, profiles, index_of, machine, cap,
                             wake_before=sim.wake_latency_s > 0,
                             job_log=None if limit is None else (limit.log_t, limit.log_dw))
    smp = accounting.samples(tl, machine.sample_s)
    power_summary = accounting.summary(tl, smp)
    summary["power"] = {**power_summary, "cap": config.power["cap"],
                        "forced_starts": sim.state.power.forced_starts,
                        "synthetic_profiles": profiles.synthetic_jobs,
                        "profiles": config.power["profiles"],
                        "limit": config.power["limit"]}
    if limit is None:
        summary["power"]["scheduler_csr"] = power_summary["csr"]
        job_power = (profiles.mean_w, index_of)
    else:
        figures = accounting.limit_summary(tl, smp, machine.sample_s, limit, records)
        summary["power"].update(share=config.power["share"], **figures)
        if config.strict and not figures["limit_held"]:
            raise SimulationError(
                f"--strict: the power limit did not hold: power passed the cap by up to "
                f"{figures['max_over_cap_w']:.6g} W (jobs at power.min_clock "
                f"{config.power['min_clock']:g} still drew more)")
        energy = [limit.energy.get(i, 0.0) for i in range(len(workload))]
        job_power = (profiles.mean_w, index_of, np.asarray(energy))
    text = power_csv(smp, None if limit is None else ~accounting.untouched(smp, machine.sample_s,
                                                                           limit.intervals))
    return text, job_power


def _write(config: RunConfig, workload: Workload, sim: MainSimulator, records: RunRecords,
           summary: dict, extra_files: dict[str, str], job_power: tuple | None) -> list[Path]:
    """Write the run's files into ``config.out``; the paths written."""
    logged = None
    if job_power is not None or sim.state.budget is not None:  # a job may get other than it asked
        logged = ({j: i for i, j in enumerate(workload.job_id.tolist())},
                  workload.procs, workload.runtime_s)
    try:
        return write_run(Path(config.out), job_columns(records), records.samples, summary,
                         extra_files, job_power, logged)
    except OSError as exc:
        raise ConfigError(f"{config.source}: out: cannot write into {config.out}: "
                          f"{exc.strerror or exc}") from None


#: the feed ``olsctl run --live/--feed`` writes (:data:`olsctl.live.FEED_NAME`)
FEED_FILE = "live.jsonl"
#: every file a run may write into its directory; a run removes those of them that an
#: earlier run left there and it did not write itself (never any other file)
RUN_FILES = ("jobs.csv", "timeseries.csv", "summary.json", "power.csv", "decisions.jsonl",
             FEED_FILE)


def _check_out(config: RunConfig) -> None:
    """``out`` must be a directory, or a path where one can be made: a file there, or
    in the way of it, is a one-line error before anything runs."""
    out = Path(config.out)
    for path in (out, *out.parents):
        if not path.exists():
            continue
        if not path.is_dir():
            what = ("exists and is not a directory" if path == out
                    else f"cannot be made: {path} is a file")
            source = "command line" if config.source == "<defaults>" else config.source
            raise ConfigError(f"{source}: out: {config.out} {what}")
        return


def _remove_stale(out_dir: Path, written: set[str]) -> None:
    """Remove the run files (:data:`RUN_FILES`) in ``out_dir`` not in ``written``."""
    for name in RUN_FILES:
        path = out_dir / name
        if name not in written and (path.is_file() or path.is_symlink()):
            path.unlink()


def _controller(config: RunConfig, workload, estimates, machine) -> Controller:
    """The controller of a run, from its validated ``controller`` section."""
    c = config.controller
    cands = c["candidates"]
    ap = cands["active_procs"]
    caps_w = windows = None
    if "power_cap" in cands:  # (config.check_run made sure there is power)
        kind, values = next(iter(cands["power_cap"].items()))
        peak = workload.machine_procs * machine.peak_w
        caps_w = tuple(v * peak if kind == "fraction" else float(v) for v in values)
    if "window" in cands:
        windows = tuple(cands["window"])
    params = tuple((name, tuple(values)) for name, values in cands.get("policy", {}).items())
    sla = config.controller_sla()
    weights = tuple(cost_weights(c["cost"]).items())
    settings = ControllerSettings(
        interval_s=c["interval_s"],
        fractions=tuple(ap.get("fraction", ())),
        procs=tuple(ap["procs"]) if "procs" in ap else None,
        caps_w=caps_w, windows=windows, params=params,
        sla_metric=sla.metric, sla_max=sla.max, sla_window_s=sla.window_s, cost=weights,
        search=c["search"], arrivals=c["arrivals"],
        horizon_s=None if c["horizon"] == "drain" else float(c["horizon"]),
        min_dwell_s=c["min_dwell_s"], max_step=c["max_step"], n_jobs=c["n_jobs"],
        backend=c["backend"], parallel_min_waiting=c["parallel_min_waiting"],
        pool_min_s=None if c["pool_min_s"] == "auto" else float(c["pool_min_s"]), seed=c["seed"])
    jobs = JobTable(workload.job_id, workload.submit_s, workload.procs, estimates,
                    workload.runtime_s)
    feedback = None
    if c["sla"]["feedback"] is not None:
        header = workload.header
        origin, _ = week_origin(float(workload.submit_s[0]), header.first_int("UnixStartTime"),
                                header.first_int("TimeZone"))
        feedback = SlaFeedback(FeedbackSettings(**c["sla"]["feedback"]), sla.metric,
                               sla.max, sla.window_s, origin,
                               workload.submit_s, workload.runtime_s, estimates)
    return Controller(settings, config.policy, jobs=jobs, feedback=feedback,
                      wake_energy_j=0.0 if machine is None else machine.wake_energy_j)

