"""The online-simulation controller: choice rules, a hand-checked tick, determinism."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataclasses import replace

from conftest import make_main, starts_of, workload_from_rows, write_burst_trace
from property_tally import checked, run_counted
from olsctl.cli import main
from olsctl.config import build_config
from olsctl.controller import (Candidate, Controller, ControllerSettings, Trial, WhatIfTask,
                               choose, what_if)
from olsctl.errors import ConfigError
from olsctl.whatif import JobTable


def _trial(active, bsld, unstarted=0, cost=None, cap=None):
    return Trial(Candidate(active, cap), 3, unstarted, 0, bsld, bsld, 0.0, 0.0,
                 float(active if cost is None else cost))


def _snapshot_at(w, t, active=None):
    sim = make_main(w, active_procs=active)
    snaps = []
    sim.at(t, lambda s: snaps.append(s.state.snapshot()))
    sim.run()
    return snaps[0]


def test_choose_cheapest_meeting_the_sla_ties_to_the_larger_machine():
    trials = [_trial(2, 250.0), _trial(4, 150.0), _trial(6, 100.0), _trial(8, 1.0)]
    best, reason, met = choose(trials, "mean_bsld", 200.0)
    assert best.active_procs == 4 and met and reason == "cheapest meeting the SLA"
    same_cost = [_trial(4, 5.0, cost=1.0), _trial(8, 5.0, cost=1.0)]
    assert choose(same_cost, "mean_bsld", 200.0)[0].active_procs == 8
    # with equal cost and machine, the higher cap wins
    caps = [_trial(8, 5.0, cost=1.0, cap=100.0), _trial(8, 5.0, cost=1.0, cap=200.0)]
    assert choose(caps, "mean_bsld", 200.0)[0].candidate.cap_w == 200.0


def test_choose_closest_when_none_meets_and_unstarted_jobs_count_as_infinite():
    trials = [_trial(2, 0.0, unstarted=1), _trial(4, 400.0), _trial(8, 300.0)]
    best, reason, met = choose(trials, "mean_bsld", 200.0)
    assert best.active_procs == 8 and not met and reason.startswith("no candidate")
    assert trials[0].metric("mean_bsld") == math.inf


def test_what_if_scores_the_snapshot_jobs_by_hand():
    # 4 processors; at t=0 job 1 (4 procs, 100 s) and job 2 (2 procs, 10 s) wait.
    # With 4 active: job 1 runs 0-100, job 2 waits 100 s: bsld 1 and 1 + 100/10 = 11.
    # With 2 active: job 1 can never start (unstarted), the trial fails the SLA.
    w = workload_from_rows([(1, 0, 100, 4), (2, 0, 10, 2)], 4)
    task = WhatIfTask(_snapshot_at(w, 0), {"name": "easy"})
    full = what_if(task, Candidate(4))
    assert (full.mean_bsld, full.max_wait_s, full.unstarted) == (6.0, 100.0, 0)
    assert full.p95_bsld == pytest.approx(11 - 0.05 * 10)  # numpy's linear interpolation
    half = what_if(task, Candidate(2))
    assert half.unstarted == 1 and half.metric("mean_bsld") == math.inf
    # a 50 s horizon: job 2 is still waiting then, its wait counts as 50 s (censored)
    short = what_if(replace(task, horizon_s=50.0), Candidate(4))
    assert (short.censored, short.unstarted, short.max_wait_s) == (1, 0, 50.0)
    assert short.mean_bsld == pytest.approx((1 + 1 + 50 / 10) / 2)


def test_what_if_arrival_models_compete_with_the_snapshot_jobs():
    # 3 processors, interval 100 s, snapshot at t=100: job 1 (2 procs) runs 0-300; job 2
    # (2 procs, 100 s) waits, reserved at 300 with 1 extra processor; job 3 (3 procs, 50 s)
    # waits behind it. Without arrivals job 2 starts at 300 and job 3 at 400 (wait 340).
    # "oracle" feeds job 4 (1 proc, 1000 s, submitted at 150): it backfills on the extra
    # processor and holds it until 1150, so job 3 starts only then (wait 1090). "recent"
    # replays the last interval's arrivals (jobs 2 and 3, at 150 and 160): they queue
    # behind the snapshot's jobs and change nothing for them.
    w = workload_from_rows([(1, 0, 300, 2), (2, 50, 100, 2), (3, 60, 50, 3),
                            (4, 150, 1000, 1)], 3)
    jobs = JobTable(w.job_id, w.submit_s, w.procs, w.runtime_s, w.runtime_s)
    waits = {}
    for model in ("none", "recent", "oracle"):
        ctl = Controller(ControllerSettings(interval_s=100.0, fractions=(1.0,), arrivals=model),
                         {"name": "easy"}, jobs=jobs)
        sim = make_main(w)
        tasks = []
        sim.at(100, lambda s: tasks.append(ctl._task(s, s.state.snapshot())))
        sim.run()
        task = tasks[0]
        arrived = None if task.arrivals is None else (task.arrivals.job_id.tolist(),
                                                      task.arrivals.submit_s.tolist())
        trial = what_if(task, Candidate(3))
        waits[model] = (arrived, trial.jobs, trial.max_wait_s)
    assert waits == {"none": (None, 3, 340.0),
                     "recent": (([2, 3], [150.0, 160.0]), 3, 340.0),
                     "oracle": (([4], [150.0]), 3, 1090.0)}


def test_a_tick_applies_the_choice_to_the_main_simulator():
    # One 1-proc job of 1000 s on an 8-processor machine: every candidate meets the SLA,
    # so the cheapest (2 of 8 with fractions 0.25 and 1) is applied at the first tick.
    w = workload_from_rows([(1, 0, 1000, 1), (2, 5000, 10, 1)], 8)
    sim = make_main(w)
    ctl = Controller(ControllerSettings(interval_s=3600.0, fractions=(0.25, 1.0)), {"name": "easy"})
    ctl.start(sim)
    rec = sim.run()
    # ticks while work remains: at 3600 job 2 has yet to arrive, so one more at 7200
    assert [d["chosen"]["active_procs"] for d in ctl.decisions] == [2, 2, 2]
    assert [d["time_s"] for d in ctl.decisions] == [0, 3600, 7200]
    assert max(rec.samples.active_procs[1:]) == 2
    # the first tick's move from 8 to 2 is a change (the only one)
    assert ctl.summary()["changes"] == 1 and ctl.summary()["whatifs"] == 6


def _busy_then_quiet():
    # 8 processors: a burst of 8 half-machine jobs at t=0 (all 8 processors give mean
    # bounded slowdown 2.5, 6 only 4.5), then a lone short job every hour
    rows = [(i, 0, 1800, 4) for i in range(1, 9)]
    rows += [(100 + k, 3600 * k, 60, 1) for k in range(4, 12)]
    return workload_from_rows(rows, 8)


def test_bisect_finds_the_same_choice_as_grid_with_fewer_what_ifs():
    w = _busy_then_quiet()
    runs = {}
    for search in ("grid", "bisect"):
        sim = make_main(w)
        ctl = Controller(ControllerSettings(interval_s=900.0, search=search,
                                            sla_max=3.0), {"name": "easy"})
        ctl.start(sim)
        runs[search] = (starts_of(sim.run()), ctl)
    grid, bis = runs["grid"][1], runs["bisect"][1]
    assert runs["grid"][0] == runs["bisect"][0]
    assert [d["chosen"] for d in grid.decisions] == [d["chosen"] for d in bis.decisions]
    assert len({d["chosen"]["active_procs"] for d in grid.decisions}) > 1  # it does move
    assert bis.whatifs < grid.whatifs
    assert all(len(d["trials"]) <= 3 for d in bis.decisions)  # 7 candidates: 3 probes


def test_min_dwell_and_max_step_hold_the_machine_steady():
    w = _busy_then_quiet()
    free = ControllerSettings(interval_s=900.0, sla_max=3.0)
    steady = replace(free, min_dwell_s=3600.0, max_step=1)
    seen = {}
    for name, settings in (("free", free), ("steady", steady)):
        sim = make_main(w)
        ctl = Controller(settings, {"name": "easy"})
        ctl.start(sim)
        sim.run()
        seen[name] = ctl
    counts = ControllerSettings().active_counts(8)
    assert counts == [2, 3, 4, 5, 6, 7, 8]
    last_change, prev = None, 8
    for d in seen["steady"].decisions:
        a = d["chosen"]["active_procs"]
        assert abs(counts.index(a) - counts.index(prev)) <= 1
        if a != prev:
            assert last_change is None or d["time_s"] - last_change >= 3600
            last_change = d["time_s"]
        prev = a
    assert any(d["reason"].startswith("kept: changed less than") for d in seen["steady"].decisions)
    assert prev == 2  # it still gets down to the smallest machine, one step at a time
    jumps = [abs(counts.index(a["chosen"]["active_procs"]) - counts.index(b["chosen"]["active_procs"]))
             for a, b in zip(seen["free"].decisions, seen["free"].decisions[1:])]
    assert max(jumps) > 1  # without the limits it jumps


def _die_at_1800(task, candidates, seed=0):
    """A batch of what-ifs whose worker process dies at the tick of t=1800."""
    import os

    from olsctl.controller import what_if_batch

    if task.snapshot.now_s == 1800.0:
        os._exit(3)
    return what_if_batch(task, candidates, seed)


def test_a_worker_that_dies_keeps_the_current_setting_and_the_run_goes_on():
    from joblib import Parallel

    w = _busy_then_quiet()
    sim = make_main(w)
    ctl = Controller(ControllerSettings(interval_s=900.0, sla_max=3.0, n_jobs=2,
                                        parallel_min_waiting=0, pool_min_s=0.0),
                     {"name": "easy"}, batch=_die_at_1800)
    ctl.start(sim)
    with Parallel(n_jobs=2, backend="loky") as parallel:
        ctl.parallel = parallel
        rec = sim.run()
    assert len(rec.jobs) == len(w)
    by_time = {d["time_s"]: d for d in ctl.decisions}
    bad = by_time[1800.0]
    assert bad["reason"] == "kept: a what-if failed" and bad["trials"] == []
    assert "Terminated" in bad["failure"] or "died" in bad["failure"].lower()
    assert bad["chosen"] == by_time[900.0]["chosen"]
    assert by_time[2700.0]["trials"]  # the pool came back for the next tick


def _die_in_a_worker_at_1800(task, candidates, seed=0):
    """As :func:`_die_at_1800`, but only in a worker process (not in the test's own)."""
    import os

    from olsctl.controller import what_if_batch

    if task.snapshot.now_s == 1800.0 and os.environ.get("OLSCTL_TEST_PID") != str(os.getpid()):
        os._exit(3)
    return what_if_batch(task, candidates, seed)


def test_a_worker_that_dies_while_this_process_runs_its_share_keeps_the_setting(monkeypatch):
    # the run's pool (WorkerPool, olsctl's worker processes) takes shares while one runs
    # here
    import os
    from contextlib import ExitStack

    from olsctl.runner import WorkerPool

    monkeypatch.setenv("OLSCTL_TEST_PID", str(os.getpid()))
    w = _busy_then_quiet()
    sim = make_main(w)
    ctl = Controller(ControllerSettings(interval_s=900.0, sla_max=3.0, n_jobs=2,
                                        parallel_min_waiting=0, pool_min_s=0.0),
                     {"name": "easy"}, batch=_die_in_a_worker_at_1800)
    ctl.start(sim)
    with ExitStack() as stack:
        ctl.parallel = WorkerPool(stack, 2, "processes")
        assert ctl.parallel.overlaps  # one share runs here meanwhile
        rec = sim.run()
    assert len(rec.jobs) == len(w)
    by_time = {d["time_s"]: d for d in ctl.decisions}
    bad = by_time[1800.0]
    assert bad["reason"] == "kept: a what-if failed" and bad["trials"] == []
    assert bad["chosen"] == by_time[900.0]["chosen"]
    assert by_time[2700.0]["trials"] and "failure" not in by_time[2700.0]


@pytest.mark.parametrize("engine", ["what-if loop", "compiled batch"])
def test_a_failing_what_if_keeps_the_current_setting_and_the_run_goes_on(monkeypatch, engine):
    """Whether EASY's what-ifs run one by one (WhatIfRun) or as one compiled batch."""
    import olsctl.controller.batches as batchmod
    import olsctl.controller.scoring as ctlmod

    w = _busy_then_quiet()

    class Flaky(ctlmod.WhatIfRun):
        def __init__(self, task, candidate):
            if task.snapshot.now_s == 1800.0:
                raise RuntimeError("what-if exploded")
            super().__init__(task, candidate)

    def flaky_batch(task, *args, **kwargs):
        if task.snapshot.now_s == 1800.0:
            raise RuntimeError("what-if exploded")
        return real_batch(task, *args, **kwargs)

    real_batch = batchmod.fast_batch
    if engine == "compiled batch":
        monkeypatch.setattr(batchmod, "fast_batch", flaky_batch)
    else:
        monkeypatch.setattr(batchmod, "fast_batch", lambda *args, **kwargs: None)
        monkeypatch.setattr(ctlmod, "WhatIfRun", Flaky)
    sim = make_main(w)
    ctl = Controller(ControllerSettings(interval_s=900.0, sla_max=3.0), {"name": "easy"})
    ctl.start(sim)
    rec = sim.run()
    assert len(rec.jobs) == len(w)
    bad = [d for d in ctl.decisions if d["time_s"] == 1800.0][0]
    assert bad["reason"] == "kept: a what-if failed" and "exploded" in bad["failure"]
    before = [d for d in ctl.decisions if d["time_s"] == 900.0][0]
    assert bad["chosen"] == before["chosen"]
    assert ctl.summary()["failures"] == 1


@pytest.mark.parametrize("search,backend", [("grid", "processes"),
                                            ("cheapest-first", "processes"),
                                            ("bound-first", "processes"),
                                            ("grid", "loky")])
def test_same_decisions_and_bytes_with_one_and_two_workers(tmp_path, monkeypatch, search,
                                                           backend):
    monkeypatch.chdir(tmp_path)
    rows = [(i, 300 * i, 200 + (37 * i) % 900, 1 + (i * 7) % 5) for i in range(1, 80)]
    lines = ["; MaxProcs: 8"] + [f"{j} {s} -1 {r} {p} -1 -1 {p} {r} -1 1 -1 -1 -1 -1 -1 -1 -1"
                                  for j, s, r, p in rows]
    (tmp_path / "t.swf").write_text("\n".join(lines) + "\n")
    outs = []
    for n_jobs in (1, 2):
        # every tick through the worker processes with two (pool_min_s: 0)
        cfg = (f"trace: t.swf\nout: out{n_jobs}\ncontroller:\n  interval_s: 600\n"
               f"  n_jobs: {n_jobs}\n  sla: {{metric: mean_bsld, max: 3}}\n  search: {search}\n"
               f"  parallel_min_waiting: 0\n  pool_min_s: 0\n"
               + (f"  backend: {backend}\n" if n_jobs > 1 else ""))  # one worker: no pool
        (tmp_path / f"c{n_jobs}.yaml").write_text(cfg)
        assert main(["run", f"c{n_jobs}.yaml", "--quiet", "--strict"]) == 0
        outs.append(tmp_path / f"out{n_jobs}")
    for name in ("decisions.jsonl", "jobs.csv", "timeseries.csv"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes()
    decisions = (outs[0] / "decisions.jsonl").read_text().splitlines()
    assert len(decisions) > 10


@pytest.mark.parametrize("controller,key", [
    ({"search": "cheapest-first", "cost": {"weights": {"active_procs": 1, "energy": 1e-9}}},
     "controller.search"),
    ({"pool_min_s": -1}, "controller.pool_min_s"),
    ({"backend": "lokyy"}, "controller.backend"),
    ({"pool_min_s": "fast"}, "controller.pool_min_s"),
    ({"interval_s": 0}, "controller.interval_s"),
    ({"candidates": {"power_cap": {}}}, "controller.candidates"),
    ({"candidates": {"active_procs": {"fraction": [0, 0.5]}}},
     "controller.candidates.active_procs.fraction"),
    ({"sla": {"metric": "speed", "max": 3}}, "controller.sla.metric"),
    ({"sla": {"metric": "mean_bsld", "max": 0.5}}, "controller.sla.max"),
    ({"cost": "money"}, "controller.cost"),
    ({"cost": {"weights": {"energy": -1}}}, "controller.cost.weights.energy"),
    ({"search": "random"}, "controller.search"),
    ({"arrivals": "poisson"}, "controller.arrivals"),
    ({"horizon": -5}, "controller.horizon"),
    ({"max_step": 0}, "controller.max_step"),
    ({"candidates": {"window": {"from": 5, "to": 1, "step": 1}}}, "controller.candidates.window"),
    ({"candidates": {"power_cap": {"fraction": [0.5, 11]}}},
     "controller.candidates.power_cap.fraction[1]"),
    ({"n_jobs": 0}, "controller.n_jobs"),
    ({"knob": 1}, "controller.knob"),
])
def test_bad_controller_settings_name_the_key(controller, key):
    with pytest.raises(ConfigError) as err:
        build_config({"controller": controller}, source="x.yaml")
    assert f"x.yaml: {key}" in str(err.value)


def _random_snapshot(data, max_machine: int):
    """A random small workload on 2..max_machine processors, snapshot at a random time."""
    n = data.draw(st.integers(2, 25))
    machine = data.draw(st.integers(2, max_machine))
    rows, t = [], 0
    for i in range(n):
        t += data.draw(st.sampled_from([0, 0, 5, 30, 200]))
        rows.append((i + 1, t, data.draw(st.integers(1, 900)), data.draw(st.integers(1, machine))))
    w = workload_from_rows(rows, machine)
    return _snapshot_at(w, data.draw(st.integers(0, t))), machine


#: the SLA metrics a what-if can be cut short on
_BOUNDED_METRICS = st.sampled_from(["mean_bsld", "mean_wait_s", "max_wait_s"])


def _blocked_snapshot(data, max_machine: int):
    """A random small workload on 2..max_machine processors and its snapshot at a random
    time at which a job has been waiting: jobs 1 and 2 come at t=0, job 1 leaves too few
    processors for job 2 and runs past the snapshot time; up to 23 random jobs follow.
    Returns the snapshot, the machine size and a random candidate under which every
    waiting job can start (none is wider than its active processors)."""
    machine = data.draw(st.integers(2, max_machine))
    width = data.draw(st.integers(1, machine - 1))
    runtime = data.draw(st.integers(100, 900))
    rows, t = [(1, 0, runtime, width), (2, 0, data.draw(st.integers(1, 900)),
                                        machine - width + 1)], 0
    for i in range(3, 3 + data.draw(st.integers(0, 23))):
        t += data.draw(st.sampled_from([0, 0, 5, 30, 200]))
        rows.append((i, t, data.draw(st.integers(1, 900)), data.draw(st.integers(1, machine))))
    snap = _snapshot_at(workload_from_rows(rows, machine), data.draw(st.integers(1, runtime - 1)))
    widest = int(snap.procs[snap.n_running:].max())
    return snap, machine, Candidate(data.draw(st.integers(widest, machine)))


#: the lowest value of each bounded SLA metric
_FLOOR = {"mean_bsld": 1.0, "mean_wait_s": 0.0, "max_wait_s": 0.0}


def _cut_bounds(task: WhatIfTask, cand: Candidate, metric: str) -> list[float]:
    """The bounds a what-if of ``task`` is cut short at, as its limit is raised to each
    in turn from the metric's floor (fresh what-ifs, each cut at a later instant), until
    it runs to the end. Job 2 of :func:`_blocked_snapshot` waits at the first pass, so
    the first what-if is always cut."""
    bounds, limit = [], _FLOOR[metric]
    while True:
        trial = what_if(replace(task, stop_above=(metric, limit)), cand)
        if trial.complete:
            return bounds
        bounds.append(limit := trial.metric(metric))


def _cutting_limit(data, task: WhatIfTask, cand: Candidate, metric: str):
    """A random limit at which the what-if is cut short (between two successive cut
    bounds, or at the lower one when the gap is too thin for the margin of the cut),
    and the cut bounds."""
    bounds = _cut_bounds(task, cand, metric)
    i = data.draw(st.integers(0, len(bounds) - 1))
    below = _FLOOR[metric] if i == 0 else bounds[i - 1]
    limit = below + data.draw(st.floats(0.0, 0.9)) * (bounds[i] - below)
    if what_if(replace(task, stop_above=(metric, limit)), cand).complete:
        limit = below
    return limit, bounds


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow],
          derandomize=True)
@given(st.data())
def _a_what_if_cut_short_surely_misses_and_bounds_the_full_metric(data):
    # Random small workloads, a snapshot at a random time, random candidates and SLAs:
    # a what-if cut short by the bound misses the SLA when run in full, and its bound is
    # below the full metric; one not cut short is the very same trial. Half the limits
    # are drawn where the what-if must be cut short, half at or above the highest bound
    # that cuts it (up to twice the full metric), where it must not be.
    snap, machine, cand = _blocked_snapshot(data, 12)
    metric = data.draw(_BOUNDED_METRICS)
    task = WhatIfTask(snap, {"name": "easy"})
    full = what_if(task, cand)
    limit, bounds = _cutting_limit(data, task, cand, metric)
    if data.draw(st.booleans()):
        top = max(bounds[-1], 2.0 * full.metric(metric) + 1.0)
        limit = data.draw(st.floats(bounds[-1], top))
    cut = what_if(replace(task, stop_above=(metric, limit)), cand)
    if cut.complete:
        assert cut == full
        assert limit >= bounds[-1]
    else:
        assert full.metric(metric) > limit
        assert cut.metric(metric) <= full.metric(metric) + 1e-9 * max(1.0, full.metric(metric))
        assert limit < bounds[-1]
    checked(True, cut_short=not cut.complete, complete=cut.complete)


def test_a_what_if_cut_short_surely_misses_and_bounds_the_full_metric():
    run_counted(_a_what_if_cut_short_surely_misses_and_bounds_the_full_metric,
                cut_short=0.1, complete=0.1)  # (derandomized: 36% and 64%)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def _a_what_if_cut_short_goes_on_as_a_new_one_with_the_higher_limit_would(data):
    # A what-if cut short at one limit, then resumed under higher limits (the next cut
    # bounds, multiples of the limit, then none), gives exactly the trial of a what-if
    # started with that limit.
    from olsctl.controller import WhatIfRun

    snap, machine, cand = _blocked_snapshot(data, 12)
    metric = data.draw(_BOUNDED_METRICS)
    task = WhatIfTask(snap, {"name": "easy"})
    low, bounds = _cutting_limit(data, task, cand, metric)
    task = replace(task, stop_above=(metric, low))
    run = WhatIfRun(task, cand)
    checked(not run.trial.complete)
    assert not run.trial.complete  # cut short, as _cutting_limit made sure
    highs = sorted({low * 1.5, low * 4, low * 50, *[b for b in bounds if b > low][:3]})
    for high in (*highs, None):
        stop = None if high is None else (metric, high)
        got = run.resume(stop)
        assert got == what_if(replace(task, stop_above=stop), cand)
        if got.complete:
            break
    with pytest.raises(ValueError):
        WhatIfRun(task, cand).resume((("max_wait_s" if metric != "max_wait_s"
                                       else "mean_bsld"), low * 2))


def test_a_what_if_cut_short_goes_on_as_a_new_one_with_the_higher_limit_would():
    run_counted(_a_what_if_cut_short_goes_on_as_a_new_one_with_the_higher_limit_would)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_closest_candidate_found_with_cut_offs_is_the_one_full_runs_find(data):
    # Random small workloads and a tight SLA that few candidates meet: the choice made
    # with what-ifs cut short (at the SLA, then at the best complete score while looking
    # for the closest) is the one made from every candidate run in full, with the same
    # metrics; the trials cut short hold bounds above the chosen one's score.
    snap, machine = _random_snapshot(data, 10)
    metric = data.draw(_BOUNDED_METRICS)
    limit = data.draw(st.floats(1.0, 30.0))
    search = data.draw(st.sampled_from(["grid", "cheapest-first"]))
    s = ControllerSettings(procs=tuple(range(1, machine + 1)), sla_metric=metric,
                           sla_max=limit, search=search)
    ctl = Controller(s, {"name": "easy"})
    task = WhatIfTask(snap, {"name": "easy"}, stop_above=(metric, limit))
    cands = s.candidates(machine)
    trials = ctl._search(task, cands, snap.n_waiting)
    got, _, met = choose(trials, metric, limit)
    if not met:
        trials = ctl._complete_closest(task, trials, snap.n_waiting)
        got, _, met = choose(trials, metric, limit)
    full = [what_if(replace(task, stop_above=None), c) for c in cands]
    want, _, want_met = choose(full, metric, limit)
    assert (got, met) == (want, want_met)
    if not met:
        score = want.metric(metric)
        for t in trials:
            assert t.complete or t.metric(metric) > score


def test_run_set_overrides_any_key_and_bad_ones_exit_2(tmp_path, capsys):
    out = tmp_path / "o"
    lines = ["; MaxProcs: 4"] + [f"{j} {10 * j} -1 {50 + j} {1 + j % 4} -1 -1 {1 + j % 4} 200 -1 1 "
                                 f"-1 -1 -1 -1 -1 -1 -1" for j in range(1, 30)]
    (tmp_path / "t.swf").write_text("\n".join(lines) + "\n")
    assert main(["run", "--trace", str(tmp_path / "t.swf"), "--quiet",
                 "--out", str(out), "--set", "policy.name=mqbf", "--set",
                 "policy.queues=2", "--set", "policy.boundaries_s=[100]"]) == 0
    import json

    policy = json.loads((out / "summary.json").read_text())["config"]["policy"]
    assert (policy["name"], policy["queues"], policy["boundaries_s"]) == ("mqbf", 2, [100.0])
    for bad, key in (("policy.queues=0", "policy.queues"), ("nothing=1", "nothing"),
                     ("controller.sla.max=-3", "controller.sla.max"), ("novalue", "--set")):
        assert main(["run", "--quiet", "--out", str(tmp_path / "x"), "--set", bad]) == 2
        err = capsys.readouterr().err.strip()
        assert key in err and len(err.splitlines()) == 1
        assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("policy", ["easy", "mqbf"])
def test_bench_ols_reports_both_worker_counts(tmp_path, capsys, monkeypatch, policy):
    lines = ["; MaxProcs: 8"] + [f"{j} {200 * j} -1 {600 + 37 * j % 900} {1 + j % 8} -1 -1 "
                                 f"{1 + j % 8} 1500 -1 1 -1 -1 -1 -1 -1 -1 -1" for j in range(1, 60)]
    (tmp_path / "t.swf").write_text("\n".join(lines) + "\n")
    import olsctl.bench.controller_cost as controller_cost

    ran = []  # each benched run's policy (bench_ols builds its config when it runs)
    build = controller_cost.build_config
    monkeypatch.setattr(controller_cost, "build_config",
                        lambda raw, **kw: ran.append(raw["policy"]["name"]) or build(raw, **kw))
    more = ["--mqbf"] if policy == "mqbf" else []
    assert main(["bench", str(tmp_path / "t.swf"), "--ols", "--search", "bisect", *more]) == 0
    text = capsys.readouterr().out
    line = [x for x in text.splitlines() if x.startswith("t.swf:")][0]
    assert "n_jobs=1" in line and "n_jobs=2" in line and "controller" in line
    assert ran == [policy, policy] and ("MQBF(4)/OLS" in text) == (policy == "mqbf")
    if more:  # (--feedback compares EASY/OLS open loop and with feedback)
        assert main(["bench", str(tmp_path / "t.swf"), "--ols", "--feedback", *more]) == 2
        err = capsys.readouterr().err.strip()
        assert "--mqbf" in err and len(err.splitlines()) == 1


def test_bench_congested_jobs_needs_the_congested_bench_and_a_job(capsys):
    # the congested log's size: only with --ols --congested, and at least one job
    for args in (["--ols", "--congested-jobs", "50"], ["--ols", "--congested",
                                                       "--congested-jobs", "0"]):
        assert main(["bench", *args]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("ConfigError: command line: --congested-jobs:")
        assert len(err.splitlines()) == 1


def test_bench_times_the_compared_policies_in_turns_with_easy():
    # the MQBF and knapsack ratios divide by EASY's time: their runs alternate with
    # EASY's, so a slow spell of the machine does not land on one side only
    from olsctl.bench.simulators import _interleaved

    calls = []

    def job(name, result):
        def run():
            calls.append(name)
            return result
        return run

    best, result, others = _interleaved(3, job("easy", "records"),
                                        [job("mqbf", None), job("knapsack", None)])
    assert calls == ["easy", "mqbf", "knapsack"] * 3
    assert result == "records"
    assert len(others) == 2


def test_woken_processors_are_usable_only_after_the_wake_latency(tmp_path):
    # 4 processors, 2 active at the start; job 1 needs all 4 (100 s), submitted at 0.
    # The first tick (t=0) must raise the count to 4 (with 2 the job can never start);
    # the two sleepers take 60 s to wake, so job 1 starts at 60 in the main simulator,
    # and the what-if predicted exactly that: wait 60 s, bounded slowdown 1 + 60/100.
    lines = ["; MaxProcs: 4", "1 0 -1 100 4 -1 -1 4 100 -1 1 1 1 -1 -1 -1 -1 -1",
             "2 1000 -1 50 1 -1 -1 1 50 -1 1 1 1 -1 -1 -1 -1 -1"]
    (tmp_path / "t.swf").write_text("\n".join(lines) + "\n")
    from olsctl.config import build_config as build
    from olsctl.runner import execute

    cfg = build({"trace": "t.swf", "active_procs": 2, "out": str(tmp_path / "o"),
                 "power": {"wake_latency_s": 60.0, "wake_energy_j": 6000.0},
                 "controller": {"interval_s": 3600,
                                "candidates": {"active_procs": {"procs": [2, 4]}},
                                "sla": {"metric": "mean_bsld", "max": 100}}},
                base_dir=tmp_path)
    result = execute(cfg)
    import csv
    import json

    rows = {r["job_id"]: r for r in csv.DictReader(open(tmp_path / "o" / "jobs.csv"))}
    assert float(rows["1"]["starting_time"]) == 60.0
    first = json.loads((tmp_path / "o" / "decisions.jsonl").read_text().splitlines()[0])
    assert first["chosen"]["active_procs"] == 4
    full = [t for t in first["trials"] if t["active_procs"] == 4][0]
    assert full["mean_bsld"] == pytest.approx(1.6) and full["max_wait_s"] == 60.0
    power = result.summary["power"]
    assert power["wakes"] == 2 and power["wake_energy_j"] == 12000.0


def _rmap_trace(path, n=400):
    import random

    rng = random.Random(3)
    lines, t = ["; MaxProcs: 64"], 0
    for j in range(1, n + 1):
        t += rng.choice([0, 60, 300, 900])
        r, p = rng.randint(60, 7200), rng.choice([1, 2, 4, 8, 16])
        lines.append(f"{j} {t} -1 {r} {p} -1 -1 {p} {r} -1 1 {j % 7} {j % 4} -1 -1 -1 -1 -1")
    path.write_text("\n".join(lines) + "\n")


def test_the_controller_tunes_a_declared_policy_setting(tmp_path):
    # RMAP's share of the power bound given to jobs, tuned hourly at cost = the share:
    # every tick picks the cheapest share whose what-if meets the SLA, the setting is
    # applied to the main simulator, and the power budget holds throughout.
    import json

    from olsctl.config import build_config as build
    from olsctl.runner import execute

    _rmap_trace(tmp_path / "t.swf")
    cfg = build({"trace": "t.swf", "procs": 128, "out": str(tmp_path / "o"),
                 "policy": {"name": "rmap-adaptive", "bound": 0.5},
                 "controller": {"interval_s": 3600,
                                "candidates": {"active_procs": {"fraction": [1.0]},
                                               "policy": {"share": [0.5, 0.75, 1.0]}},
                                "sla": {"metric": "mean_bsld", "max": 3},
                                "cost": "policy.share"}}, base_dir=tmp_path)
    result = execute(cfg)
    ticks = [json.loads(x) for x in (tmp_path / "o" / "decisions.jsonl").read_text().splitlines()]
    chosen = set()
    for d in ticks:
        met = [t for t in d["trials"] if t["mean_bsld"] is not None and t["mean_bsld"] <= 3]
        if met:
            want = min(t["policy.share"] for t in met)
        else:  # none meets it: the closest (ties to the larger share)
            best = min(t["mean_bsld"] for t in d["trials"] if t["mean_bsld"] is not None)
            want = max(t["policy.share"] for t in d["trials"] if t["mean_bsld"] == best)
        assert d["chosen"]["policy.share"] == want
        assert all(t["cost"] == t["policy.share"] for t in d["trials"])
        chosen.add(want)
    assert len(chosen) > 1  # it does move between shares
    assert result.summary["budget"]["csr"] == 1.0


@pytest.mark.parametrize("candidates,cost,key", [
    ({"policy": {"speed": [1, 2]}}, "active_procs", "controller.candidates.policy.speed"),
    ({"policy": {"share": [0.5, 7]}}, "active_procs", "controller.candidates.policy.share[1]"),
    ({"policy": {"share": [0.5, 1.0]}}, "policy.bound", "controller.cost"),
])
def test_bad_policy_candidates_name_the_key(tmp_path, candidates, cost, key):
    from olsctl.config import build_config as build
    from olsctl.runner import execute

    _rmap_trace(tmp_path / "t.swf", n=20)
    cfg = build({"trace": "t.swf", "procs": 128, "out": str(tmp_path / "o"),
                 "policy": {"name": "rmap-adaptive"},
                 "controller": {"candidates": candidates, "cost": cost}}, source="x.yaml",
                base_dir=tmp_path)
    with pytest.raises(ConfigError) as err:
        execute(cfg)
    assert f"x.yaml: {key}" in str(err.value)
    assert not (tmp_path / "o").exists()


def test_cap_candidates_lower_the_cap_when_quiet_and_raise_it_under_load(tmp_path):
    # 16 processors: a burst of 24 four-processor jobs of 30 min in the first 4 minutes,
    # then one short job an hour; caps of 37.5% to 100% of peak, cost = the cap
    import csv
    import json

    write_burst_trace(tmp_path / "t.swf")
    (tmp_path / "c.yaml").write_text(
        "trace: t.swf\nout: out\n"
        "policy: {name: knapsack, window: 5, stat: max, force: when-fits,\n"
        "         predictor: {name: oracle}}\n"
        "power: {cap: {fraction: 1.0}, sample_s: 60}\n"
        "controller:\n  interval_s: 900\n  candidates:\n"
        "    active_procs: {fraction: [1.0]}\n"
        "    power_cap: {fraction: [0.375, 0.5, 0.75, 1.0]}\n"
        "  sla: {metric: mean_bsld, max: 4}\n  cost: power_cap\n")
    assert main(["run", str(tmp_path / "c.yaml"), "--quiet",
                 "--out", str(tmp_path / "out")]) == 0
    out = tmp_path / "out"
    ticks = [json.loads(line) for line in (out / "decisions.jsonl").read_text().splitlines()]
    caps = sorted({t["cap_w"] for d in ticks for t in d["trials"]})
    assert len(caps) == 4
    busy = [d["chosen"]["cap_w"] for d in ticks if d["waiting"] >= 8]
    quiet = [d["chosen"]["cap_w"] for d in ticks if d["running"] == 0 and d["waiting"] == 0]
    assert busy and quiet
    assert max(busy) > caps[0]  # raised under load
    assert set(quiet) == {caps[0]}  # the lowest cap when nothing runs or waits
    # the cap in force is the one chosen at the last tick, and the CSR is against it
    rows = list(csv.DictReader((out / "power.csv").open()))
    chosen_at = [(d["time_s"], d["chosen"]["cap_w"]) for d in ticks]
    for row in rows:
        t = float(row["time"])
        in_force = [c for s, c in chosen_at if s <= t][-1]
        assert float(row["cap_w"]) == in_force
        assert row["within_cap"] == str(int(float(row["peak_power_w"]) <= in_force))
    csr = json.loads((out / "summary.json").read_text())["power"]["csr"]
    assert csr == sum(r["within_cap"] == "1" for r in rows) / len(rows)
    assert csr >= 0.99


class _CountingPool:
    """Stands in for a joblib.Parallel of two workers: runs the calls here, counts them."""

    n_jobs = 2

    def __init__(self, trip_s: float = 0.0):
        self.calls = 0
        self.trip_s = trip_s  # what a round trip to the workers takes

    def __call__(self, tasks):
        import time

        self.calls += 1
        time.sleep(self.trip_s)
        return [f(*args, **kwargs) for f, args, kwargs in tasks]


class _SharingPool(_CountingPool):
    """A pool that takes shares (``submit``) while this process runs its own: records
    the candidates of each share it got, and runs them here."""

    def __init__(self):
        super().__init__()
        self.shares: list[list] = []

    overlaps = True

    def submit(self, tasks):
        tasks = list(tasks)
        self.shares.extend(args[2] for _, args, _ in tasks)
        return iter([f(*args, **kwargs) for f, args, kwargs in tasks])


def test_a_split_tick_runs_one_share_here_and_sends_the_others_deciding_the_same():
    w = _busy_then_quiet()
    runs = {}
    for pool in (None, _SharingPool()):
        sim = make_main(w)
        ctl = Controller(ControllerSettings(interval_s=900.0, sla_max=3.0, n_jobs=2,
                                            parallel_min_waiting=0, pool_min_s=0.0),
                         {"name": "easy"})
        ctl.parallel = pool
        ctl.start(sim)
        runs[pool is not None] = (starts_of(sim.run()), ctl.decisions, pool)
    assert runs[True][:2] == runs[False][:2]
    pool = runs[True][2]
    ticks = sum(1 for d in runs[True][1] if d["trials"])
    counts = ControllerSettings().active_counts(8)
    assert pool.calls == 0 and len(pool.shares) == ticks > 5  # one share a tick went out
    # of the seven candidates, 2, 4, 6 and 8 processors ran here; 3, 5 and 7 went out
    assert all([c.active_procs for c in share] == counts[1::2] for share in pool.shares)


@pytest.mark.parametrize("pool_min_s,trip_s,used", [
    (0.0, 0.0, "every tick"), (1e9, 0.0, "never"),
    # auto (None): two empty round trips measure the pool first; what-ifs of microseconds
    # never save a trip of 10 ms
    (None, 0.01, "never")])
def test_ticks_go_to_the_pool_only_when_worth_it_and_decide_the_same(pool_min_s, trip_s,
                                                                      used):
    w = _busy_then_quiet()
    runs = {}
    for mode in ("in process", "pool"):
        sim = make_main(w)
        ctl = Controller(ControllerSettings(interval_s=900.0, sla_max=3.0, n_jobs=2,
                                            parallel_min_waiting=0, pool_min_s=pool_min_s),
                         {"name": "easy"})
        pool = _CountingPool(trip_s) if mode == "pool" else None
        ctl.parallel = pool
        ctl.start(sim)
        runs[mode] = (starts_of(sim.run()), ctl.decisions, pool)
    assert runs["pool"][:2] == runs["in process"][:2]  # same schedule and decisions
    ticks = sum(1 for d in runs["pool"][1] if d["trials"])
    assert ticks > 5
    calls = runs["pool"][2].calls
    if pool_min_s is not None:
        assert calls == (ticks if used == "every tick" else 0)
    else:
        assert calls == 2  # the two trips that measured the pool


def test_auto_mode_measures_a_round_trip_once_before_it_first_uses_the_pool():
    ctl = Controller(ControllerSettings(n_jobs=2), {"name": "easy"})
    ctl.parallel = pool = _CountingPool(trip_s=0.01)
    ctl.dispatcher.per_whatif_s = 0.02  # 140 ms in all, 70 ms saved by two workers
    assert ctl.dispatcher.pool_pays(None, 7, 2)  # (no what-if goes on the trips: no task needed)
    assert pool.calls == 2 and 0.01 <= ctl.dispatcher.hop_s < 1.0
    ctl.dispatcher.per_whatif_s = 0.002  # 7 ms saved: not worth 1.5 trips of over 10 ms
    assert not ctl.dispatcher.pool_pays(None, 7, 2)
    assert pool.calls == 2  # measured once


def test_the_tick_after_an_sla_miss_stays_in_process_in_auto_mode():
    # its what-ifs cut short may have to go on, which only those run in process can do
    auto = Controller(ControllerSettings(n_jobs=2), {"name": "easy"})
    auto.dispatcher.per_whatif_s = 0.02
    assert auto.dispatcher.use_pool(7, 2)
    auto.dispatcher.after_miss = True
    assert not auto.dispatcher.use_pool(7, 2)
    forced = Controller(ControllerSettings(n_jobs=2, pool_min_s=0), {"name": "easy"})
    forced.dispatcher.per_whatif_s, forced.dispatcher.after_miss = 0.02, True
    assert forced.dispatcher.use_pool(7, 2)
    w = _busy_then_quiet()
    sim = make_main(w)
    ctl = Controller(ControllerSettings(interval_s=900.0, sla_max=1.0), {"name": "easy"})
    ctl.start(sim)
    sim.run()
    last = [d["sla_met"] for d in ctl.decisions if d["sla_met"] is not None][-1]
    assert ctl.dispatcher.after_miss == (not last)


def test_a_slow_tick_goes_to_the_pool_in_auto_mode():
    ctl = Controller(ControllerSettings(n_jobs=2), {"name": "easy"})
    assert not ctl.dispatcher.use_pool(7, 2)  # nothing measured yet: in process
    ctl.dispatcher.per_whatif_s = 0.001  # 7 ms in all, 3.5 ms saved by two workers: not worth 30 ms
    assert not ctl.dispatcher.use_pool(7, 2)
    ctl.dispatcher.per_whatif_s = 0.02  # 140 ms in all, 70 ms saved
    assert ctl.dispatcher.use_pool(7, 2)
    ctl.dispatcher.hop_s = 0.05  # the pool has been adding 50 ms: 70 ms saved is below 75 ms
    assert not ctl.dispatcher.use_pool(7, 2)


def test_cheapest_first_chooses_as_grid_with_fewer_what_ifs_whatever_the_workers():
    w = _busy_then_quiet()
    runs = {}
    for search, pool in (("grid", None), ("cheapest-first", None),
                         ("cheapest-first", _CountingPool())):
        sim = make_main(w)
        ctl = Controller(ControllerSettings(interval_s=900.0, search=search, sla_max=3.0,
                                            n_jobs=2, parallel_min_waiting=0,
                                            pool_min_s=0.0), {"name": "easy"})
        ctl.parallel = pool
        ctl.start(sim)
        runs[search, pool is not None] = (starts_of(sim.run()), ctl)
    grid = runs["grid", False]
    for key in (("cheapest-first", False), ("cheapest-first", True)):
        starts, ctl = runs[key]
        assert starts == grid[0]
        assert [(d["chosen"], d["reason"], d["sla_met"]) for d in ctl.decisions] == \
            [(d["chosen"], d["reason"], d["sla_met"]) for d in grid[1].decisions]
        assert ctl.whatifs < grid[1].whatifs
        for d in ctl.decisions:  # cheaper ones all tried and missing; none tried after
            if d["sla_met"]:
                tried = sorted(t["active_procs"] for t in d["trials"])
                assert tried[-1] == d["chosen"]["active_procs"]
                assert all(t["mean_bsld"] is None or t["mean_bsld"] > 3.0
                           for t in d["trials"] if t["active_procs"] < tried[-1])
    # two workers take two candidates a round, but the log keeps only what one would
    one, two = runs["cheapest-first", False][1], runs["cheapest-first", True][1]
    assert one.decisions == two.decisions and one.whatifs == two.whatifs
    assert runs["cheapest-first", True][1].parallel.calls > 0
