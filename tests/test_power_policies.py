"""Power-aware policies: hand-checked cases, the cap held, and what-if fidelity."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import make_main, workload_from_rows
from olsctl.checker import StrictChecker
from olsctl.policies import REGISTRY, make_policy
from olsctl.policies.power.verify import VERIFY
from olsctl.power.cap import CapSchedule
from olsctl.power.profiles import PowerProfiles, ProfileSettings, synthetic_profiles
from olsctl.power.runtime import power_state
from olsctl.state import SimState
from olsctl.whatif import run_whatif


def _flat(levels: list[float]) -> PowerProfiles:
    """One phase per job at the given power per processor."""
    n = len(levels)
    return PowerProfiles(np.arange(n + 1), np.ones(n), np.asarray(levels, dtype=float), 0)


def _waiting_state(procs, power_w, machine, cap_w, idle_w=0.0):
    n = len(procs)
    st_ = SimState(machine, list(range(n)), [0.0] * n, procs, [100.0] * n, [100.0] * n,
                   checker=StrictChecker())
    st_.power = power_state(_flat(power_w), [0] * n, idle_w, 0.0, 100.0,
                            CapSchedule.constant(cap_w))
    for i in range(n):
        st_.arrive(i)
    return st_


def test_wallace_motivational_example_knapsack_beats_fcfs():
    # Wallace et al.'s motivational example, with the paper's figures: a machine of 6
    # racks (one processor = one rack, idle racks at 0 W) under a 230 kW cap; J0..J3 wait
    # in this order (racks, kW per rack): J0 (3, 60), J1 (1, 50), J2 (5, 30), J3 (4, 40).
    # FCFS takes J0 (180 kW) and J1 (50 kW): 230 kW exactly, 4 racks busy, 2 idle; J2
    # would need 5 racks. The knapsack over the window maximises racks under the cap:
    # J1 + J2, all 6 racks at 200 kW (J1 + J3 is 5 racks, J0 + J3 needs 7).
    procs, kw = [3, 1, 5, 4], [60e3, 50e3, 30e3, 40e3]
    fcfs, used, room = [], 0, 230e3
    for j in range(4):
        if used + procs[j] <= 6 and procs[j] * kw[j] <= room:
            fcfs.append(j)
            used += procs[j]
            room -= procs[j] * kw[j]
        else:
            break
    assert fcfs == [0, 1] and used == 4 and room == 0.0
    state = _waiting_state(procs, kw, 6, 230e3)
    state.run_pass(make_policy({"name": "naive-cap", "predictor": "oracle"}))
    assert state.started == [0, 1]
    state = _waiting_state(procs, kw, 6, 230e3)
    state.run_pass(make_policy({"name": "knapsack", "window": 4, "order": "fcfs",
                                "predictor": "oracle"}))
    assert state.started == [1, 2]
    assert state.busy_procs == 6
    assert state.power.measured_w(state) == 200e3
    assert state.power.forced_starts == 0


def test_knapsack_forces_the_longest_waiting_job_when_nothing_fits():
    # Window of 2, both jobs above the cap: the first starts anyway (a forced start),
    # one a pass.
    state = _waiting_state([1, 1], [500.0, 600.0], 4, 100.0)
    state.run_pass(make_policy({"name": "knapsack", "window": 2, "force": "now"}))
    assert state.started == [0] and state.power.forced_starts == 1
    # A window of 3 is not full: with a job running, nothing is forced...
    state = _waiting_state([1, 1, 1], [500.0, 600.0, 10.0], 4, 100.0)
    state.start(2)
    state.queue.remove(2)
    state.run_pass(make_policy({"name": "knapsack", "window": 3, "force": "now"}))
    assert state.started == [] and state.power.forced_starts == 0
    # ... but on an idle machine waiting frees no power, so the first job is forced.
    state = _waiting_state([1, 1], [500.0, 600.0], 4, 100.0)
    state.run_pass(make_policy({"name": "knapsack", "window": 3, "force": "now"}))
    assert state.started == [0] and state.power.forced_starts == 1


def _held_case_run(force: str, c_runtime_s: int = 10):
    """Machine of 4 processors, idle 0 W, cap 150 W, window 2, oracle predictions. A (100 W,
    runs 0..100) and D (40 W, 0..50) leave 10 W of headroom; B (100 W, submitted at 1)
    and C (30 W, at 2) fill the window and neither fits."""
    w = workload_from_rows([(1, 0, 100, 1), (2, 0, 50, 1), (3, 1, 10, 1),
                            (4, 2, c_runtime_s, 1)], 4)
    sim = make_main(w, policy=make_policy({"name": "knapsack", "window": 2,
                                           "predictor": "oracle", "force": force}))
    sim.state.power = power_state(_flat([100.0, 40.0, 100.0, 30.0]), [0] * 4, 0.0, 0.0,
                                  100.0, CapSchedule.constant(150.0))
    records = sim.run()
    starts = {r.job_id: r.start_s for r in records.jobs}
    level = {1: 100.0, 2: 40.0, 3: 100.0, 4: 30.0}
    peak = max(sum(level[r.job_id] for r in records.jobs if r.start_s <= t < r.end_s)
               for t in {r.start_s for r in records.jobs})
    return starts, peak, sim.state.power.forced_starts


def test_knapsack_force_now_overshoots_the_cap_when_fits_does_not():
    # Wallace's rule: B is forced at 2 (100 + 40 + 100 = 240 W over a 150 W cap), and C
    # starts when D's end makes room for it (50).
    starts, peak, forced = _held_case_run("now")
    assert starts == {1: 0.0, 2: 0.0, 3: 2.0, 4: 50.0}
    assert peak == 240.0 and forced == 1
    # when-fits: B is held; at 50 C would fit but waits behind B; at 100 A ends, B fits
    # and starts at once, and the knapsack goes on: C fits beside it (130 W). The peak
    # is A + D at the start.
    starts, peak, forced = _held_case_run("when-fits")
    assert starts == {1: 0.0, 2: 0.0, 3: 100.0, 4: 100.0}
    assert peak == 140.0 <= 150.0 and forced == 0
    # reserve: B is held and will fit when A ends (100); C fits at 50 and ends by 100,
    # so it starts at 50; a C that would run until 110 waits and starts beside B.
    starts, peak, forced = _held_case_run("reserve")
    assert starts == {1: 0.0, 2: 0.0, 3: 100.0, 4: 50.0}
    assert peak == 140.0 and forced == 0
    starts, peak, forced = _held_case_run("reserve", c_runtime_s=60)
    assert starts == {1: 0.0, 2: 0.0, 3: 100.0, 4: 100.0}
    assert peak == 140.0 and forced == 0


def _backfill_case_run(backfill: str, e_runtime_s: int):
    """The held case of :func:`_held_case_run` under ``force: reserve`` in FCFS order, with
    a fifth job E (5 W, one processor, submitted at 3) behind the full window of B and C."""
    w = workload_from_rows([(1, 0, 100, 1), (2, 0, 50, 1), (3, 1, 10, 1), (4, 2, 10, 1),
                            (5, 3, e_runtime_s, 1)], 4)
    sim = make_main(w, policy=make_policy({"name": "knapsack", "window": 2, "order": "fcfs",
                                           "predictor": "oracle", "force": "reserve",
                                           "backfill": backfill}))
    sim.state.power = power_state(_flat([100.0, 40.0, 100.0, 30.0, 5.0]), [0] * 5, 0.0,
                                  0.0, 100.0, CapSchedule.constant(150.0))
    return {r.job_id: r.start_s for r in sim.run().jobs}


def test_knapsack_backfill_reaches_past_the_window_while_a_job_is_held():
    # B is held from 2 and fits at 100 (A's end); the 10 W of headroom left fit E (5 W)
    # at 3, outside the window [B, C]. backfill window: E waits for the window: at 50 D
    # ends, C starts and E enters the window and starts beside it.
    assert _backfill_case_run("window", 20) == {1: 0.0, 2: 0.0, 3: 100.0, 4: 50.0, 5: 50.0}
    # queue: E starts at 3, as it ends (23) before B fits; one that would end at 103
    # waits: at 50 it is in the window, where it must end by 100 too, so it waits for B.
    assert _backfill_case_run("queue", 20) == {1: 0.0, 2: 0.0, 3: 100.0, 4: 50.0, 5: 3.0}
    assert _backfill_case_run("queue", 97)[5] == 3.0  # (ends as B fits)
    assert _backfill_case_run("queue", 98)[5] == 100.0
    assert _backfill_case_run("queue", 100) == {1: 0.0, 2: 0.0, 3: 100.0, 4: 50.0,
                                                5: 100.0}
    # easy: at 100 (A and D ended) B takes one of the four processors and 100 of the
    # 150 W, leaving three and 50 W, which E (1, 5 W) fits: it starts at 3 however long
    # it runs.
    assert _backfill_case_run("easy", 100) == {1: 0.0, 2: 0.0, 3: 100.0, 4: 50.0, 5: 3.0}


@pytest.mark.parametrize("body,error", [
    ("backfill: queue, force: now",
     "queue acts only while force: reserve holds the machine for a job (got force: now)"),
    ("backfill: easy, force: when-fits", "easy acts only while force: reserve holds the "
     "machine for a job (got force: when-fits)"),
    ("backfill: deep", "must be one of window, queue, easy (got 'deep')"),
])
def test_a_backfill_setting_that_cannot_act_is_refused(tmp_path, capsys, body, error):
    from olsctl.cli import main

    cfg = tmp_path / "bad.yaml"
    cfg.write_text(f"trace: KTH-SP2\nout: {tmp_path / 'out'}\n"
                   f"policy: {{name: knapsack, {body}}}\npower: {{cap: {{fraction: 0.5}}}}\n")
    assert main(["run", str(cfg), "--quiet"]) == 2
    assert capsys.readouterr().err.strip() == f"ConfigError: {cfg}: policy.backfill: {error}"
    assert not (tmp_path / "out").exists()


def test_knapsack_when_fits_still_starts_a_job_on_an_idle_machine():
    # Both jobs are over the cap even alone: nothing runs, so the first starts anyway
    # (and is counted), as under Wallace's rule; the held job goes first.
    state = _waiting_state([1, 1], [500.0, 600.0], 4, 100.0)
    state.run_pass(make_policy({"name": "knapsack", "window": 2, "force": "when-fits"}))
    assert state.started == [0] and state.power.forced_starts == 1
    # A held job waits while anything runs, even when a later job would fit.
    state = _waiting_state([1, 1, 1, 1], [500.0, 600.0, 10.0, 50.0], 4, 100.0)
    state.start(3)
    state.queue.remove(3)  # 50 W runs: 50 W of headroom
    policy = make_policy({"name": "knapsack", "window": 2, "force": "when-fits"})
    state.run_pass(policy)
    assert state.started == [] and state.power.window_entry[0] == -np.inf
    state.now_s = 1.0
    state.run_pass(policy)  # job 2 (10 W) fits and is in the window, but 0 is held
    assert state.started == []


@pytest.mark.parametrize("value", ["later", 3, True])
def test_knapsack_force_setting_is_checked(tmp_path, capsys, value):
    from olsctl.cli import main

    (tmp_path / "t.swf").write_text("; MaxProcs: 4\n"
                                    "1 0 -1 10 1 -1 -1 1 10 -1 1 1 1 -1 -1 -1 -1 -1\n")
    (tmp_path / "k.yaml").write_text(
        "trace: t.swf\nout: out\npower: {cap: {fraction: 0.5}}\n"
        f"policy: {{name: knapsack, force: {value}}}\n")
    capsys.readouterr()
    rc = main(["run", str(tmp_path / "k.yaml"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("ConfigError: ") and "policy.force" in err and "k.yaml" in err
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="force"):
        make_policy({"name": "knapsack", "force": "later"})


def test_naive_capping_assumes_peak_and_stops_at_the_first_misfit():
    # peak 100 W per processor, idle 0: cap 250 W fits two 1-proc jobs at peak, not three
    state = _waiting_state([1, 1, 1, 1], [10.0] * 4, 8, 250.0)
    state.run_pass(make_policy({"name": "naive-cap"}))
    assert state.started == [0, 1]
    # a job too big for the cap even alone starts when nothing runs (forced), once
    state = _waiting_state([4, 1], [10.0, 10.0], 8, 250.0)
    state.run_pass(make_policy({"name": "naive-cap"}))
    assert state.started == [0] and state.power.forced_starts == 1


@pytest.mark.parametrize("verify,expected", [
    ("naive", [0]),        # 2 x 100 W at peak > 150 W
    ("mean", [0, 1]),      # 60 + 60 <= 150
    ("max", [0]),          # max 80 each: 160 > 150
])
def test_easy_power_verification_methods(verify, expected):
    # two 1-proc jobs, mean 60 W, max 80 W, std 20 W per processor; cap 150 W, idle 0
    prof = PowerProfiles(np.array([0, 2, 4]), np.array([0.5, 0.5, 0.5, 0.5]),
                         np.array([40.0, 80.0, 40.0, 80.0]), 0)
    state = SimState(4, [0, 1], [0.0, 0.0], [1, 1], [10.0, 10.0], [10.0, 10.0],
                     checker=StrictChecker())
    state.power = power_state(prof, [0, 0], 0.0, 0.0, 100.0, CapSchedule.constant(150.0))
    state.arrive(0)
    state.arrive(1)
    state.run_pass(make_policy({"name": "easy-power", "verify": verify,
                                "predictor": "oracle"}))
    assert state.started == expected


def test_gaussian_verification_counts_sigma():
    prof = PowerProfiles(np.array([0, 2, 4]), np.array([0.5] * 4),
                         np.array([40.0, 80.0, 40.0, 80.0]), 0)  # mean 60, std 20
    for sigma, expected in ((0.0, [0, 1]), (1.0, [0, 1]), (2.0, [0])):
        # two jobs: 120 + sigma x sqrt(2) x 20 vs cap 150 (sigma 1: 148.3, sigma 2: 176.6)
        state = SimState(4, [0, 1], [0.0, 0.0], [1, 1], [10.0, 10.0], [10.0, 10.0])
        state.power = power_state(prof, [0, 0], 0.0, 0.0, 100.0, CapSchedule.constant(150.0))
        state.arrive(0)
        state.arrive(1)
        state.run_pass(make_policy({"name": "easy-power", "verify": "gaussian",
                                    "sigma": sigma, "predictor": "oracle"}))
        assert state.started == expected, sigma


def test_verification_methods_are_a_registry(monkeypatch):
    # the setting's choices are the registered methods; a new method is one function
    # and one entry: here every job predicted at 70 W per processor (two: 140 <= 150 W)
    assert REGISTRY["easy-power"].params["verify"].choices == tuple(VERIFY)
    monkeypatch.setitem(VERIFY, "flat70", lambda state, predictor, j: (state.procs[j] * 70.0,
                                                                      None))
    prof = PowerProfiles(np.array([0, 2, 4]), np.array([0.5] * 4),
                         np.array([40.0, 80.0, 40.0, 80.0]), 0)
    for cap_w, expected in ((150.0, [0, 1]), (130.0, [0])):
        state = SimState(4, [0, 1], [0.0, 0.0], [1, 1], [10.0, 10.0], [10.0, 10.0],
                         checker=StrictChecker())
        state.power = power_state(prof, [0, 0], 0.0, 0.0, 100.0, CapSchedule.constant(cap_w))
        state.arrive(0)
        state.arrive(1)
        state.run_pass(make_policy({"name": "easy-power", "verify": "flat70",
                                    "predictor": "oracle"}))
        assert state.started == expected, cap_w
    with pytest.raises(ValueError, match="verify: must be one of naive, mean, max, "
                                         "gaussian, flat70"):
        make_policy({"name": "easy-power", "verify": "median"})


POLICIES = [
    {"name": "naive-cap"},
    {"name": "knapsack", "window": 3, "order": "fcfs", "force": "now", "predictor": "oracle"},
    {"name": "knapsack", "window": 2, "order": "wfp", "force": "now", "predictor": "history"},
    {"name": "greedy-knapsack", "profit": "stretch", "predictor": "naive"},
    {"name": "easy-power", "verify": "gaussian", "predictor": "history"},
    {"name": "easy-power", "order": "saf", "verify": "mean", "predictor": "oracle"},
    {"name": "knapsack", "window": 3, "order": "fcfs", "force": "now", "predictor": "learner"},
    {"name": "knapsack", "window": 4, "predictor": "history", "stat": "max",
     "headroom": "predicted"},  # (the defaults: WFP order, force reserve)
    {"name": "easy-power", "verify": "max", "predictor": "learner"},
    {"name": "knapsack", "window": 2, "order": "fcfs", "predictor": "history",
     "force": "when-fits"},
    {"name": "knapsack", "window": 3, "order": "wfp", "predictor": "learner", "stat": "max",
     "headroom": "predicted", "force": "when-fits"},
    {"name": "knapsack", "window": 2, "order": "wfp", "predictor": "history",
     "force": "reserve"},
    {"name": "knapsack", "window": 3, "order": "fcfs", "predictor": "oracle", "stat": "max",
     "headroom": "predicted", "force": "reserve"},
    {"name": "knapsack", "window": 2, "order": "wfp", "predictor": "history",
     "force": "reserve", "backfill": "queue"},
    {"name": "knapsack", "window": 2, "order": "fcfs", "predictor": "oracle",
     "headroom": "predicted", "force": "reserve", "backfill": "easy"},
]


def _power_sim(w, spec, cap_w, seed):
    prof = synthetic_profiles(w, 100.0, 500.0, ProfileSettings(seed=seed))
    sim = make_main(w, policy=make_policy(spec))
    sim.state.power = power_state(prof, [int(u) % 3 for u in w.job_id.tolist()], 100.0,
                                  10.0, 500.0, CapSchedule.constant(cap_w),
                                  [int(u) % 5 for u in w.job_id.tolist()],
                                  learning=spec.get("predictor") == "learner", sample_s=7.0)
    return sim


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_power_policies_whatif_fidelity_and_checker(data):
    machine = data.draw(st.integers(2, 10))
    n = data.draw(st.integers(1, 20))
    rows, t = [], 0
    for i in range(n):
        t += data.draw(st.sampled_from([0, 0, 2, 10, 30]))
        rows.append((i + 1, t, data.draw(st.integers(1, 100)),
                     data.draw(st.integers(1, machine))))
    w = workload_from_rows(rows, machine)
    spec = data.draw(st.sampled_from(POLICIES))
    cap_w = machine * data.draw(st.sampled_from([150.0, 300.0, 600.0]))
    seed = data.draw(st.integers(0, 3))
    cut = data.draw(st.sampled_from(sorted(set(w.submit_s.tolist()))))
    snaps = []
    sim = _power_sim(w, spec, cap_w, seed)
    sim.at(cut, lambda s: snaps.append(s.state.snapshot()))
    records = sim.run()  # strict checker throughout
    starts = {r.job_id: r.start_s for r in records.jobs}
    assert len(starts) + len(records.unstarted) == n
    assert not records.unstarted  # forced starts on an idle machine let every job run
    truth_sim = _power_sim(w.select(np.flatnonzero(w.submit_s <= cut)), spec, cap_w, seed)
    truth_sim.at(cut, lambda s: None)
    truth_run = truth_sim.run()
    truth = {r.job_id: r.start_s for r in truth_run.jobs}
    truth.update({j: float("nan") for j in truth_run.unstarted})
    res = run_whatif(snaps[0], make_policy(spec), checker=StrictChecker())
    for job, start in zip(res.job_id.tolist(), res.start_s.tolist()):
        assert start == truth[job] or (start != start and truth[job] != truth[job])


def test_history_prediction_follows_each_finish_and_snapshots_keep_theirs():
    """The history predictor, worked by hand (window 2, alpha 0.5; flat profiles, so a
    job's mean and max are its level): no history gives the peak; each finish of the
    user's jobs changes the prediction at once (predictions are kept per user only until
    the history grows); a snapshot taken before a finish keeps predicting from the
    history it was taken with, and its own finishes leave the state's alone."""
    from types import SimpleNamespace

    from olsctl.power.predict import History

    state = _waiting_state([1, 1, 1, 1], [10.0, 30.0, 50.0, 70.0], 4, 1e9)
    pred = History(window=2, alpha=0.5)
    assert pred.predict(state, 3, "mean") == 100.0 and pred.predict(state, 3, "std") == 0.0
    for j in range(3):
        state.start(j)
    state.finish(0)
    assert pred.predict(state, 3, "mean") == 10.0
    snap = SimpleNamespace(power=state.power.subset([0, 1, 2, 3]))
    assert pred.predict(snap, 3, "max") == 10.0
    state.finish(1)  # 30 now, 10 one finish ago at weight 0.5
    assert pred.predict(state, 3, "mean") == pytest.approx((30.0 + 0.5 * 10.0) / 1.5)
    assert pred.predict(snap, 3, "mean") == 10.0
    state.finish(2)  # the window of 2 drops the 10
    assert pred.predict(state, 3, "max") == pytest.approx((50.0 + 0.5 * 30.0) / 1.5)
    snap.power.on_finish(SimpleNamespace(runtime_s=[100.0] * 4, start_s=[0.0] * 4), 3)
    assert pred.predict(snap, 0, "mean") == pytest.approx((70.0 + 0.5 * 10.0) / 1.5)
    assert pred.predict(state, 0, "mean") == pytest.approx((50.0 + 0.5 * 30.0) / 1.5)


@pytest.mark.parametrize("order", ["fcfs", "wfp"])
def test_knapsack_pass_reads_the_queue_again_when_it_lost_a_job_another_way(order):
    """The main simulator's knapsack pass keeps the queue between passes as an array
    (jobs join its end, and leave it by the pass's starts). Worked by hand on a machine
    of 4 (no cap that binds): J0 takes it all; J1 and J2 (2 each) wait. J1 then leaves
    the queue without starting, J0 ends and J3 (2) arrives: the next pass starts J2 and
    J3, never J1."""
    state = _waiting_state([4, 2, 2, 2], [10.0] * 4, 4, 1e9)
    state.queue.remove(3)  # (J3 arrives later)
    policy = make_policy({"name": "knapsack", "window": 20, "order": order,
                          "predictor": "oracle"})
    state.run_pass(policy)
    assert state.started == [0] and state.queue == [1, 2]
    state.queue.remove(1)
    state.now_s = 100.0
    state.finish(0)
    state.arrive(3)
    state.run_pass(policy)
    assert sorted(state.started) == [2, 3] and state.queue == []


def test_a_snapshots_flat_phases_are_its_jobs_phases():
    """A snapshot's power state takes its phases as flat arrays from its source's
    (:func:`olsctl.power.runtime.flat_phases`): the same arrays as made from its own
    lists, for running and waiting jobs picked in any order, jobs of one phase or many;
    pickled (to a worker) it carries no arrays of its source."""
    import pickle

    from olsctl.power.runtime import flat_phases

    rng = np.random.default_rng(7)
    phases = [[(f, float(rng.integers(100, 900))) for f in
               np.diff(np.r_[0.0, np.sort(rng.random(int(k) - 1)), 1.0])]
              for k in rng.integers(1, 6, size=60)]
    offset = np.cumsum([0] + [len(p) for p in phases])
    prof = PowerProfiles(offset, np.array([f for p in phases for f, _ in p]),
                         np.array([w for p in phases for _, w in p]), 0)
    p = power_state(prof, [0] * 60, 50.0, 5.0, 1000.0, CapSchedule.constant(1e9))
    for idx in ([5], [59, 0, 17, 3], list(rng.permutation(60)[:40])):
        sub = p.subset([int(j) for j in idx])
        assert sub.flat_from is not None
        got = flat_phases(sub, len(idx))
        sub.flat_from = None
        want = flat_phases(sub, len(idx))
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        assert want[0][-1] == sum(len(phases[j]) for j in idx)
        assert pickle.loads(pickle.dumps(p.subset([int(j) for j in idx]))).flat_from is None
