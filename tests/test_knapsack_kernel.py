"""The window knapsack's compiled what-ifs (:mod:`olsctl.policies.power.forward`, run from
:class:`olsctl.policies.power.template.KnapsackTemplate`) give the trials of its Python
pass, on snapshots a real capped run took: held jobs, users' histories, wakes and caps
in every combination of the knapsack's settings that changes what its pass reads.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import config as numba_config

from conftest import same_trials, whatif_trials
from olsctl.config import build_config
from olsctl.controller import batches
from olsctl.controller.trials import Candidate
from olsctl.policies.core.jit import compile_kernels, compiled
from olsctl.runner import execute

#: settings that change what the pass reads or does, each with another predictor
VARIANTS = (
    {"order": "wfp", "force": "reserve", "stat": "max", "headroom": "predicted",
     "predictor": {"name": "history", "window": 10, "alpha": 1.0}},
    {"order": "fcfs", "force": "now", "stat": "mean", "headroom": "measured",
     "predictor": "oracle"},
    {"order": "wfp", "force": "when-fits", "stat": "max", "headroom": "measured",
     "predictor": "naive"},
    {"order": "fcfs", "force": "reserve", "stat": "mean", "headroom": "predicted",
     "predictor": {"name": "history", "window": 3, "alpha": 0.8}, "window": 4},
    {"order": "wfp", "force": "reserve", "stat": "max", "headroom": "predicted",
     "predictor": "oracle", "window": 3, "backfill": "queue"},
    {"order": "fcfs", "force": "reserve", "stat": "mean", "headroom": "measured",
     "predictor": {"name": "history", "window": 3, "alpha": 0.8}, "backfill": "easy"},
)


def _recorded_tasks(out, load_scale: float, caps: list, interval_s: float) -> list:
    """The what-if tasks of a capped controller run on KTH-SP2 (configs/cap-ols.yaml's
    policy) at ``load_scale`` with the ``caps`` (fractions of the peak), a tick every
    ``interval_s``."""
    tasks = []
    real = batches.tick_template

    def record(snap, policy, until_s, task):
        if not tasks or tasks[-1] is not task:
            tasks.append(task)
        return real(snap, policy, until_s, task)

    config = build_config({
        "trace": "KTH-SP2", "load_scale": load_scale, "out": str(out),
        "policy": dict(VARIANTS[0], name="knapsack", window=20),
        "power": {"cap": {"fraction": 1.0}},
        "controller": {"interval_s": interval_s, "candidates": {
            "active_procs": {"fraction": [1.0]}, "power_cap": {"fraction": caps}},
            "sla": {"metric": "mean_bsld", "max": 200}, "cost": "power_cap"}})
    batches.tick_template = record
    try:
        execute(config)
    finally:
        batches.tick_template = real
    return tasks


@pytest.fixture(scope="module")
def capped_tasks(tmp_path_factory):
    """The what-if tasks of a capped controller run (configs/cap-ols.yaml's caps, 10% more
    load), every 150th tick's."""
    return _recorded_tasks(tmp_path_factory.mktemp("cap"), 1.1,
                           [0.4, 0.5, 0.625, 0.75, 0.875, 1.0], 3600)[::150]


def test_the_compiled_knapsack_what_ifs_give_the_python_trials(capped_tasks, monkeypatch):
    """For each recorded tick, each variant of the knapsack's settings and 6 candidates
    (caps of 40%, 62.5% and 100% on all or three quarters of the processors, against a
    setting in force of all processors at 87.5%, so some candidates wake processors),
    the trials are equal field by field (energy and peak power too)."""
    compared = cut = held = busy = 0
    for task in capped_tasks:
        snap = task.snapshot
        total, peak = snap.total_procs, snap.power.peak_w * snap.total_procs
        held += -float("inf") in snap.power.window_entry
        busy += snap.n_waiting > 5
        for variant in VARIANTS:
            t = replace(task, policy=dict(variant, name="knapsack"),
                        stop_above=("mean_bsld", 50.0), wake_latency_s=60.0,
                        current=Candidate(total * 3 // 4, 0.875 * peak),
                        cost=(("energy", 1.0),))
            candidates = [Candidate(a, f * peak) for a in (total, total * 3 // 4)
                          for f in (0.4, 0.625, 1.0)]
            for got in same_trials(t, candidates, monkeypatch):
                compared += 1
                cut += len(got) > 1
    assert compared == 6 * len(VARIANTS) * len(capped_tasks) and len(capped_tasks) >= 40
    assert cut > 50 and held >= 2 and busy > 10, (cut, held, busy)


def test_long_queues_in_wfp_order_give_the_python_trials(tmp_path, monkeypatch):
    """Where the queue is far longer than what a pass reads, the compiled loop ranks only
    the front of the WFP order (:mod:`olsctl.policies.core.front`) and keeps the held job
    between passes: on the ticks with the longest queues of a heavily loaded capped run
    (more than 150 waiting), under force reserve and when-fits and windows of 20 and 3,
    and with the whole queue backfilled while a job is held, the trials are those of the
    Python pass."""
    tasks = _recorded_tasks(tmp_path, 1.6, [0.3, 1.0], 6 * 3600)
    tasks = sorted(tasks, key=lambda t: -t.snapshot.n_waiting)[:3]
    assert min(t.snapshot.n_waiting for t in tasks) > 150
    compared = 0
    for task in tasks:
        total, peak = task.snapshot.total_procs, task.snapshot.power.peak_w
        for variant in (VARIANTS[0], dict(VARIANTS[2], window=3), VARIANTS[5]):
            t = replace(task, policy=dict(variant, name="knapsack"), stop_above=None)
            compared += len(same_trials(t, [Candidate(total, f * peak * total)
                                            for f in (0.3, 0.6)], monkeypatch))
    assert compared == 18


@pytest.mark.parametrize("python", [False, True], ids=["compiled", "python"])
def test_a_what_if_over_its_cap_stops_once_the_forecast_span_has_run(capped_tasks, python,
                                                                       monkeypatch):
    """A what-if under a cap pauses once the power forecast's span (the coming hour) has
    run: when the forecast passes the cap its trial is decided there (SLA metrics
    unknown), else it goes on as if it had not paused. Against the same what-ifs run
    whole, every trial is equal field by field (cut short by the SLA bound and run on
    alike; a whole run the bound cut short past the span is over the cap once run on),
    by the compiled loop and by the Python pass; the runs decided at the pause stopped
    within the span, where the whole runs went past it."""
    decided = went_on = 0
    for task in capped_tasks:
        snap = task.snapshot
        total, peak = snap.total_procs, snap.power.peak_w * snap.total_procs
        t = replace(task, stop_above=("mean_bsld", 50.0))
        span_end = snap.now_s + t.power_s
        cands = [Candidate(total, f * peak) for f in (0.4, 0.625, 1.0)]
        paused = whatif_trials(t, cands, python, monkeypatch)
        whole = whatif_trials(t, cands, python, monkeypatch, pause=False)
        for (got, _, stop), (want, _, whole_stop) in zip(paused, whole):
            assert got[-1] == want[-1]
            if got != want:  # decided at the pause; the whole run was cut short later
                assert len(got) == 1 and got[0].over_cap and want[0].stopped_at_s > span_end
            last = got[-1]
            if last.over_cap and whole_stop > span_end:
                assert stop <= span_end and np.isnan(last.mean_bsld)
                decided += 1
            elif whole_stop > span_end:
                assert stop == whole_stop
                went_on += 1
    assert decided >= 10 and went_on >= 10, (decided, went_on)


@pytest.mark.parametrize("force", ["now", "reserve", "when-fits"])
def test_the_power_state_holds_every_window_mark_the_pass_makes(force, tmp_path,
                                                                 monkeypatch):
    """After each pass of the main simulator, the run's power state (what snapshots
    carry) holds the window entry of every job as the pass left it: the times jobs
    entered a window and the held job's mark. Checked on a burst under a tight cap with
    a window of 3, where windows fill and jobs are held; the run must see both."""
    from olsctl.policies.power.knapsack import WindowKnapsack
    from conftest import write_burst_trace

    write_burst_trace(tmp_path / "t.swf")
    real = WindowKnapsack.schedule
    seen = {"passes": 0, "marks": 0, "held": 0}

    def checked(self, state):
        real(self, state)
        arrays = [v for k, v in state.cache.items() if k[0] == "knapsack"]
        if not arrays:
            return
        mine = np.asarray(state.power.window_entry, dtype=float)
        assert np.array_equal(mine, arrays[0].entry, equal_nan=True)
        seen["passes"] += 1
        seen["marks"] = max(seen["marks"], int((~np.isnan(mine)).sum()))
        seen["held"] += bool(np.isneginf(mine).any())

    monkeypatch.setattr(WindowKnapsack, "schedule", checked)
    execute(build_config({
        "trace": str(tmp_path / "t.swf"), "out": str(tmp_path / "out"),
        "policy": {"name": "knapsack", "window": 3, "force": force, "order": "wfp",
                   "predictor": {"name": "history", "window": 2}},
        "power": {"cap": {"fraction": 0.35}}}))
    assert seen["passes"] > 20 and seen["marks"] > 10, seen
    assert (seen["held"] > 0) == (force != "now"), seen


@pytest.mark.skipif(numba_config.DISABLE_JIT, reason="nothing compiles without the JIT")
@pytest.mark.parametrize("order, limit", [("fcfs", "none"), ("wfp", "throttle")])
def test_the_warm_up_compiles_the_main_pass_a_run_calls(tmp_path, order, limit):
    """The knapsack's warm-up (run before workers start, under the compile lock) readies
    the main simulator's pass with the very argument types a run gives it: a capped run
    afterwards adds no compiled version of it (one would compile in every worker)."""
    import olsctl.policies.power.forward  # noqa: F401  (the knapsack's warm-up)

    k = compiled()
    compile_kernels(say=lambda _line: None)
    before = list(k.main_pass.signatures)
    assert len(before) == 1
    config = build_config({
        "trace": "KTH-SP2", "out": str(tmp_path / "run"),
        "policy": {"name": "knapsack", "window": 20, "order": order, "force": "reserve"},
        "power": {"cap": {"fraction": 0.5}, "limit": limit}})
    execute(config)
    assert list(k.main_pass.signatures) == before


def _textbook_choice(cand, free, room, procs, rise):
    """The knapsack's dynamic program as textbooks write it (every size, every job): the
    jobs of ``cand`` that fit ``free``, the least power for each processor count, the
    largest count within ``room``, then back through the jobs that improved it."""
    items = [j for j in cand if procs[j] <= free]
    if not items:
        return []
    top = min(sum(procs[j] for j in items), free)
    best = [0.0] + [float("inf")] * top
    took = [[False] * (top + 1) for _ in items]
    for i, j in enumerate(items):
        for s in range(top, procs[j] - 1, -1):
            c = best[s - procs[j]] + rise[j]
            if c < best[s]:
                best[s], took[i][s] = c, True
    size = max(s for s in range(top + 1) if best[s] <= room)
    picked = []
    for i in range(len(items) - 1, -1, -1):
        if size and took[i][size]:
            picked.append(items[i])
            size -= procs[items[i]]
    return picked[::-1]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_knapsack_choice_is_the_textbook_programs(data):
    """``knapsack_choose`` (which skips sizes and jobs that cannot lead to its answer)
    picks exactly the jobs the plain dynamic program picks, on windows of up to 12 jobs
    whose power rises are mostly positive, some negative; and the pick fits, with the
    most processors any subset that fits has (all subsets tried)."""
    from itertools import combinations

    k = compiled()
    n = data.draw(st.integers(1, 12))
    procs = np.array(data.draw(st.lists(st.integers(1, 16), min_size=n, max_size=n)),
                     dtype=np.int64)
    low = data.draw(st.sampled_from([0.0, -40.0]))  # below idle power: the rise is < 0
    pred = np.array(data.draw(st.lists(st.floats(low, 200.0, allow_nan=False),
                                       min_size=n, max_size=n)))
    free = data.draw(st.integers(1, 40))
    room = data.draw(st.floats(0.0, 4000.0))
    rise = procs * pred  # (idle power 0 and each job its own group)
    cand = np.arange(n, dtype=np.int64)
    m = k.knapsack_choose(cand, n, free, room, procs, np.arange(n, dtype=np.int64), pred,
                          0.0)
    got = cand[:m].tolist()
    assert got == _textbook_choice(list(range(n)), free, room, procs, rise)
    assert sum(procs[got]) <= free and sum(rise[j] for j in got) <= room  # (in job order,
    # as the program adds them)
    most = max((sum(procs[list(c)]) for r in range(n + 1) for c in combinations(range(n), r)
                if sum(procs[list(c)]) <= free and sum(rise[j] for j in c) <= room), default=0)
    assert sum(procs[got]) == most


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 9), max_size=40))
def test_a_templates_users_are_numbered_by_first_appearance(values):
    """first_seen numbers the user codes of a template's jobs 0, 1, ... in the order they
    first appear (as a dict's keys keep them) and leaves its scratch as it found it."""
    codes = np.array(values, dtype=np.int64)
    slot = np.full(10, -1, dtype=np.int64)
    found, group = np.empty(codes.size, dtype=np.int64), np.empty(codes.size, dtype=np.int64)
    m = compiled().first_seen(codes, slot, found, group)
    order = list(dict.fromkeys(values))
    assert found[:m].tolist() == order
    assert group.tolist() == [order.index(v) for v in values]
    assert (slot == -1).all()


def test_the_main_pass_reads_the_running_jobs_as_the_state_has_them(tmp_path,
                                                                   monkeypatch):
    """The main simulator's pass keeps its (expected end, job) rows of the running jobs
    from one pass to the next while no job has ended and no other pass started one: at
    every call of the compiled pass they are the state's running jobs, in its order
    (KTH-SP2 under a cap, window knapsack in WFP order), and most passes reuse them."""
    from olsctl.policies.power import knapsack

    k = compiled()
    real_schedule, real_pass = knapsack.WindowKnapsack.schedule, k.main_pass
    seen = {"state": None, "calls": 0, "reused": 0}

    def schedule(self, state):
        seen["state"] = state
        a = state.cache.get(self._cache_key)
        seen["reused"] += a is not None and \
            a.rows_at == (len(state.start_order), state.finishes)
        return real_schedule(self, state)

    def main_pass(*args):
        rows, nr = args[9], args[10]
        want = [[e, j] for e, j in seen["state"].running]
        assert nr == len(want) and rows[:nr].tolist() == want
        seen["calls"] += 1
        return real_pass(*args)

    monkeypatch.setattr(knapsack.WindowKnapsack, "schedule", schedule)
    monkeypatch.setattr(k, "main_pass", main_pass)
    execute(build_config({"trace": "KTH-SP2", "out": str(tmp_path),
                          "policy": dict(VARIANTS[0], name="knapsack", window=20),
                          "power": {"cap": {"fraction": 0.5}}}))
    assert seen["calls"] > 20000 and seen["reused"] > 5000, seen
